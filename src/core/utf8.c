#include "core/utf8.h"

int32_t utf8_decode(const unsigned char *s, size_t len, int *nbytes) {
    unsigned char b = s[0];
    if (b < 0x80) {
        *nbytes = 1;
        return b;
    }
    int need;
    int32_t cp;
    unsigned char lo = 0x80, hi = 0xBF;  /* allowed range of the second byte */
    if (b >= 0xC2 && b <= 0xDF) { need = 1; cp = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 2; cp = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;          /* overlong */
        if (b == 0xED) hi = 0x9F;          /* surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3; cp = b & 0x07;
        if (b == 0xF0) lo = 0x90;          /* overlong */
        if (b == 0xF4) hi = 0x8F;          /* beyond U+10FFFF */
    } else {
        *nbytes = 1;
        return -1;
    }
    for (int k = 1; k <= need; k++) {
        unsigned char c = (size_t)k < len ? s[k] : 0;
        unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
        if ((size_t)k >= len || c < min || c > max) {
            *nbytes = k;
            return -1;
        }
        cp = (cp << 6) | (c & 0x3F);
    }
    *nbytes = need + 1;
    return cp;
}

bool py_isspace(int32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

size_t utf8_rstrip_len(const char *text, size_t len) {
    while (len > 0) {
        size_t k = len - 1;
        while (k > 0 && len - k < 4 && ((unsigned char)text[k] & 0xC0) == 0x80) k--;
        int n;
        int32_t cp = utf8_decode((const unsigned char *)text + k, len - k, &n);
        if (cp < 0 || (size_t)n != len - k || !py_isspace(cp)) return len;
        len = k;
    }
    return 0;
}
