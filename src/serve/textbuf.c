/* Response bodies (serve/textbuf.h). */
#include "serve/textbuf.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/common.h"

void textbuf_init(TextBuf *t) {
    t->cap = 4096, t->len = 0, t->p = xmalloc(t->cap);
    t->p[0] = '\0';
}

static void reserve(TextBuf *t, size_t more) {
    if (t->len + more + 1 > t->cap) t->p = xrealloc(t->p, t->cap = 2 * t->cap + more + 1);
}

void textbuf_printf(TextBuf *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        reserve(t, (size_t)n);
    }
}

void textbuf_json_string(TextBuf *t, const char *s) {
    textbuf_printf(t, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c == '"' || *c == '\\') textbuf_printf(t, "\\%c", *c);
        else if (*c < 0x20) textbuf_printf(t, "\\u%04x", *c);
        else textbuf_printf(t, "%c", *c);
    textbuf_printf(t, "\"");
}

void textbuf_base64(TextBuf *t, const unsigned char *b, size_t n) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    reserve(t, (n + 2) / 3 * 4);
    char *o = t->p + t->len;
    for (size_t i = 0; i < n; i += 3) {
        const unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
        *o++ = a[v >> 18 & 63], *o++ = a[v >> 12 & 63];
        *o++ = i + 1 < n ? a[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? a[v & 63] : '=';
    }
    *o = '\0';
    t->len = (size_t)(o - t->p);
}
