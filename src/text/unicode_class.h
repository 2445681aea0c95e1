/* Character properties of BERT's BasicTokenizer, computed from utf8proc the way
 * google-research/bert tokenization.py computes them from Python's unicodedata and str
 * methods. Internal to src/text/.
 *
 * Unicode versions: Python 3.11 ships Unicode 14.0, Debian 12's utf8proc 2.8 ships 15.0.
 * The only disagreements are characters first assigned in 15.0 (tools/tokenizer_parity.py
 * --sweep lists them); real text is unaffected. */
#ifndef BERT_UNICODE_CLASS_H
#define BERT_UNICODE_CLASS_H

#include <stdbool.h>
#include <stdint.h>

enum {
    UC_DROP = 1,          /* removed by _clean_text: NUL, U+FFFD, Cc/Cf except \t \n \r */
    UC_SPACE = 2,         /* separates words: _is_whitespace or str.isspace() */
    UC_PUNCT = 4,         /* _is_punctuation: ASCII symbols and Unicode P*; a word alone */
    UC_CJK = 8,           /* _is_chinese_char: gets spaces around it */
    UC_UNCASED_CHANGES = 16, /* lower() + NFD + dropping Mn may change it (uncased slow path) */
};

/* The flags above for one code point (slow: asks utf8proc). */
uint8_t uc_classify(int32_t cp);

/* Properties for Python's Final_Sigma rule in str.lower(). */
bool uc_is_cased(int32_t cp);
bool uc_is_case_ignorable(int32_t cp);

/* Python's full lower-case mapping of cp, except U+03A3 (context-dependent, see
 * tokenizer.c): writes 1 or 2 code points to out and returns the count. */
int uc_lower_full(int32_t cp, int32_t out[2]);

/* Canonical decomposition (NFD) of one code point, without reordering; returns the count
 * written to out (at most cap; the longest decomposition is 4 code points). */
int uc_decompose(int32_t cp, int32_t *out, int cap);

/* Canonical combining class and whether the category is Mn. */
int uc_combining_class(int32_t cp);
bool uc_is_nonspacing_mark(int32_t cp);

#endif
