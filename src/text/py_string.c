#include "text/py_string.h"

#include <utf8proc.h>

#include "text/unicode_class.h"

/* CPython's handle_capital_sigma: U+03A3 lowers to final sigma U+03C2 when a cased
 * character precedes it and none follows, skipping case-ignorable characters both ways. */
static bool final_sigma(const int32_t *s, size_t n, size_t i) {
    size_t j = i;
    while (j > 0 && uc_is_case_ignorable(s[j - 1])) j--;
    if (j == 0 || !uc_is_cased(s[j - 1])) return false;
    for (j = i + 1; j < n && uc_is_case_ignorable(s[j]); j++) {}
    return j == n || !uc_is_cased(s[j]);
}

size_t py_lower(const int32_t *in, size_t n, int32_t *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] < 0x80) {   /* ASCII: the common case */
            out[m++] = in[i] >= 'A' && in[i] <= 'Z' ? in[i] + 32 : in[i];
        } else if (in[i] == 0x3A3) {
            out[m++] = final_sigma(in, n, i) ? 0x3C2 : 0x3C3;
        } else {
            int32_t lowered[2];
            int k = uc_lower_full(in[i], lowered);
            for (int t = 0; t < k; t++) out[m++] = lowered[t];
        }
    }
    return m;
}

bool py_isalnum(int32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z');
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return true;
    default:
        return false;
    }
}
