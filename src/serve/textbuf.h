/* A growing string for building response bodies. */
#ifndef BERT_SERVE_TEXTBUF_H
#define BERT_SERVE_TEXTBUF_H

#include <stddef.h>

typedef struct {
    char *p;    /* NUL-terminated; malloc'd (handed to libmicrohttpd, which frees it) */
    size_t len, cap;
} TextBuf;

void textbuf_init(TextBuf *t);
void textbuf_printf(TextBuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* v in %.9g's notation (9 significant digits, trailing zeros dropped; fixed notation for
 * exponents -4..8), from one double product instead of printf's exact conversion (~5x faster:
 * a 384-wide embedding's numbers were most of an answer's time in the server). The 9th digit
 * can differ from printf's by one where v's exact decimal expansion lies within ~1e-16 of a
 * rounding midpoint; either text reads back as v exactly: 9 digits step by at most 1e-8 of the
 * value, an off-by-one 9th digit lands within 1.5e-8, and a float's neighbours are 6e-8 away at
 * the least (tests/test_serve.c checks both on a million floats). */
void textbuf_float(TextBuf *t, float v);
void textbuf_char(TextBuf *t, char c);
/* s as a JSON string literal, quotes included. */
void textbuf_json_string(TextBuf *t, const char *s);
/* n bytes as standard base64 (RFC 4648, padded). */
void textbuf_base64(TextBuf *t, const unsigned char *bytes, size_t n);

#endif
