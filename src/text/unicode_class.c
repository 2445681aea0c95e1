/* Python's character predicates, re-expressed on utf8proc's Unicode database. Each
 * function names the Python code it mirrors; tests/test_tokenizer.c and the code-point
 * sweep in tools/tokenizer_parity.py check them against Python itself. */
#include "text/unicode_class.h"

#include <utf8proc.h>

/* _is_chinese_char: the fixed code-point ranges of tokenization.py (its definition of
 * "CJK character", not a Unicode property, so it is spelled out here). */
static bool is_reference_cjk(int32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* _is_punctuation: "all non-letter/number ASCII" plus Unicode categories P*. */
static bool is_reference_punct(int32_t cp, utf8proc_category_t cat) {
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
        (cp >= 123 && cp <= 126))
        return true;
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

/* Python's str.isspace(): category Zs or bidirectional class WS, B or S. It decides
 * where whitespace_tokenize() splits; _is_whitespace() (space, \t, \n, \r, Zs) is a
 * subset. The difference is U+2028 and U+2029, which _clean_text keeps but split()
 * still splits on. */
static bool is_python_space(int32_t cp, const utf8proc_property_t *p) {
    return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' ||
           p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

int uc_lower_full(int32_t cp, int32_t out[2]) {
    /* SpecialCasing.txt has exactly one unconditional lower-case mapping longer than one
     * code point: U+0130 LATIN CAPITAL LETTER I WITH DOT ABOVE -> i + U+0307, which
     * Python applies and utf8proc's simple mapping does not. */
    if (cp == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = utf8proc_tolower(cp);
    return 1;
}

int uc_decompose(int32_t cp, int32_t *out, int cap) {
    int boundclass = UTF8PROC_BOUNDCLASS_START;
    utf8proc_ssize_t n = utf8proc_decompose_char(cp, out, cap, UTF8PROC_DECOMPOSE, &boundclass);
    if (n < 1 || n > cap) {  /* cannot happen for valid scalar values; keep cp unchanged */
        out[0] = cp;
        return 1;
    }
    return (int)n;
}

int uc_combining_class(int32_t cp) { return utf8proc_get_property(cp)->combining_class; }

bool uc_is_nonspacing_mark(int32_t cp) {
    return utf8proc_get_property(cp)->category == UTF8PROC_CATEGORY_MN;
}

uint8_t uc_classify(int32_t cp) {
    const utf8proc_property_t *p = utf8proc_get_property(cp);
    utf8proc_category_t cat = (utf8proc_category_t)p->category;
    bool tab_nl_cr = cp == '\t' || cp == '\n' || cp == '\r';
    /* _clean_text: NUL, U+FFFD and _is_control (Cc, Cf; \t\n\r count as whitespace). */
    if (cp == 0 || cp == 0xFFFD ||
        (!tab_nl_cr && (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF)))
        return UC_DROP;
    uint8_t flags = 0;
    if (is_python_space(cp, p)) flags |= UC_SPACE;
    if (is_reference_punct(cp, cat)) flags |= UC_PUNCT;
    if (is_reference_cjk(cp)) flags |= UC_CJK;
    int32_t lowered[2], decomposed[8];
    if (cp == 0x3A3 || cat == UTF8PROC_CATEGORY_MN || uc_lower_full(cp, lowered) != 1 ||
        lowered[0] != cp || uc_decompose(cp, decomposed, 8) != 1 || decomposed[0] != cp)
        flags |= UC_UNCASED_CHANGES;
    return flags;
}

/* Unicode's Cased: Lowercase or Uppercase or Lt. utf8proc has no Other_Lowercase /
 * Other_Uppercase property, so "has a case mapping" stands in for it. PropList.txt's
 * Other_Lowercase / Other_Uppercase characters that have no case mapping and are not
 * case-ignorable anyway (Lm, Mn) are these: the ordinal indicators and the squared /
 * negative circled / negative squared Latin capitals. The code-point sweep test
 * (tests/test_tokenizer_sweep.c) finds no other difference from Python. */
bool uc_is_cased(int32_t cp) {
    if (cp == 0xAA || cp == 0xBA || (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
        (cp >= 0x1F170 && cp <= 0x1F189))
        return true;
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
           cat == UTF8PROC_CATEGORY_LT || utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp;
}

/* Unicode's Case_Ignorable: Mn, Me, Cf, Lm, Sk, or Word_Break MidLetter, MidNumLet or
 * Single_Quote. utf8proc has no Word_Break property; those three classes are these
 * 17 code points (WordBreakProperty.txt of Unicode 14 and 15). */
bool uc_is_case_ignorable(int32_t cp) {
    static const int32_t word_break_mid[] = {0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F,
                                             0x05F4, 0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                             0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
    utf8proc_category_t cat = utf8proc_category(cp);
    if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
        cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK)
        return true;
    for (size_t i = 0; i < sizeof word_break_mid / sizeof word_break_mid[0]; i++)
        if (word_break_mid[i] == cp) return true;
    return false;
}
