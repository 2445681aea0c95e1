/* Python's str methods that text evaluation needs, on code points: str.lower() over a whole
 * string (full mapping: U+0130 becomes two code points; U+03A3 takes Final_Sigma's context),
 * and str.isalnum() (what `re`'s \w and \b test on str patterns, with '_').
 *
 * Unicode data is utf8proc's (Debian 12: Unicode 15.0; Python 3.11 has 14.0): the two agree
 * on every code point Python 3.11 assigns (tests/test_squad_eval.c checks all of them against
 * tests/data/squad/unicode.json, written by Python). */
#ifndef BERT_PY_STRING_H
#define BERT_PY_STRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* str.lower() of in[0..n): writes at most 2n code points to out and returns the count. */
size_t py_lower(const int32_t *in, size_t n, int32_t *out);

/* str.isalnum() of one character: general category L* or N* (Python's isalpha, isdecimal,
 * isdigit and isnumeric together are exactly these). */
bool py_isalnum(int32_t cp);

#endif
