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
/* s as a JSON string literal, quotes included. */
void textbuf_json_string(TextBuf *t, const char *s);
/* n bytes as standard base64 (RFC 4648, padded). */
void textbuf_base64(TextBuf *t, const unsigned char *bytes, size_t n);

#endif
