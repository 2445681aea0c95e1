/* Response bodies (serve/textbuf.h). */
#include "serve/textbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

void textbuf_char(TextBuf *t, char c) {
    reserve(t, 1);
    t->p[t->len++] = c;
    t->p[t->len] = '\0';
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

/* 10^k as a double: exact up to 10^22, else within a few units of its last place. */
static double power_of_ten(int k) {
    static const double exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (k >= 0) return k <= 22 ? exact[k] : exact[22] * power_of_ten(k - 22);
    return 1.0 / power_of_ten(-k);
}

/* x > 0 (a float's value) scaled to 9 significant digits: m in [1e8, 1e9), x ~ m 10^(e - 8). */
static long long nine_digits(double x, int *e) {
    *e = (int)floor(log10(x));
    for (;;) {
        const int k = 8 - *e;
        const double scaled = k >= 0 ? x * power_of_ten(k) : x / power_of_ten(-k);
        const long long m = llrint(scaled);
        if (m >= 1000000000LL) (*e)++;        /* log10 was low, or rounding carried into a 10th digit */
        else if (m < 100000000LL) (*e)--;     /* log10 was high */
        else return m;
    }
}

void textbuf_float(TextBuf *t, float v) {
    if (!isfinite(v) || v == 0.0f) {   /* printf's spellings: 0, -0 (and inf/nan, which JSON lacks) */
        textbuf_printf(t, "%.9g", (double)v);
        return;
    }
    int e;
    long long m = nine_digits(fabs((double)v), &e);
    char digits[9], out[32];
    for (int i = 8; i >= 0; i--, m /= 10) digits[i] = (char)('0' + m % 10);
    int n = 9;
    while (n > 1 && digits[n - 1] == '0') n--;   /* %g drops trailing zeros */
    size_t len = 0;
    if (v < 0) out[len++] = '-';
    if (e >= -4 && e < 9) {   /* %g's fixed notation */
        if (e >= 0) {
            for (int i = 0; i <= e; i++) out[len++] = i < n ? digits[i] : '0';
            if (n > e + 1) {
                out[len++] = '.';
                for (int i = e + 1; i < n; i++) out[len++] = digits[i];
            }
        } else {
            out[len++] = '0', out[len++] = '.';
            for (int i = 0; i < -e - 1; i++) out[len++] = '0';
            for (int i = 0; i < n; i++) out[len++] = digits[i];
        }
    } else {   /* d.ddde+XX */
        out[len++] = digits[0];
        if (n > 1) {
            out[len++] = '.';
            for (int i = 1; i < n; i++) out[len++] = digits[i];
        }
        len += (size_t)snprintf(out + len, sizeof out - len, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    reserve(t, len);
    memcpy(t->p + t->len, out, len);
    t->len += len;
    t->p[t->len] = '\0';
}
