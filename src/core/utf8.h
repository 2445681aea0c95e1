/* UTF-8 and Python's notion of whitespace, shared by the tokenizer and the data pipeline
 * (which reproduce Python programs byte for byte). */
#ifndef BERT_CORE_UTF8_H
#define BERT_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decodes the code point at s[0..len) (len >= 1) as Python's decoder does: returns it with
 * *nbytes its length, or -1 for an invalid sequence (overlong, surrogate, beyond U+10FFFF,
 * truncated), *nbytes then being the maximal subpart that Python's errors="replace" turns
 * into one U+FFFD (as Unicode recommends). */
int32_t utf8_decode(const unsigned char *s, size_t len, int *nbytes);

/* Python's str.isspace(): what str.strip() and str.split() take as whitespace. */
bool py_isspace(int32_t c);

/* Length of text without trailing whitespace (Python's str.rstrip()); 0 if all blank. Scans
 * back from the end, a character at a time; an invalid byte counts as U+FFFD. */
size_t utf8_rstrip_len(const char *text, size_t len);

#endif
