/* WordPiece vocabulary: tokens by id, and string maps (core/strmap.h) to id from the piece
 * of each token ("##" continuations and other tokens apart).
 *
 * The maps' hash extends (FNV-1a), so the tokenizer hashes the prefixes of a word
 * incrementally, one pass per start position, and looks each up without rehashing. */
#include "core/utf8.h"
#include "text/vocab_internal.h"

#include <stdlib.h>
#include <string.h>

static bool starts_continuation(const char *tok, size_t len) { return len > 2 && tok[0] == '#' && tok[1] == '#'; }

int vocab_lookup(const Vocab *v, const char *tok, size_t len) {
    bool cont = starts_continuation(tok, len);
    size_t skip = cont ? 2 : 0;
    return vocab_lookup_piece(v, strmap_hash(tok + skip, len - skip), cont, tok + skip, len - skip);
}

/* Takes ownership of tokens[] (each xmalloc'ed). A token that occurs twice maps to its last
 * line, as the reference's dict assignment does. */
static Vocab *build(char **tokens, size_t *lens, int n) {
    Vocab *v = xcalloc(1, sizeof *v);
    v->n = n;
    v->tokens = tokens;
    v->lens = lens;
    size_t n_cont = 0;
    for (int i = 0; i < n; i++) n_cont += starts_continuation(tokens[i], lens[i]);
    strmap_init(&v->words, (size_t)n - n_cont, false);
    strmap_init(&v->conts, n_cont, false);
    for (int i = 0; i < n; i++) {
        const bool cont = starts_continuation(tokens[i], lens[i]);
        const size_t skip = cont ? 2 : 0;
        StrMap *m = cont ? &v->conts : &v->words;
        strmap_intern(m, tokens[i] + skip, lens[i] - skip, NULL)->value = i;
        /* Bounds for the longest-match search. */
        size_t *longest = cont ? &v->max_cont_bytes : &v->max_word_bytes;
        if (lens[i] - skip > *longest) *longest = lens[i] - skip;
    }
    return v;
}

Vocab *vocab_from_tokens(const char *const *tokens, int n) {
    char **copy = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *copy);
    size_t *lens = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *lens);
    for (int i = 0; i < n; i++) {
        copy[i] = xstrdup(tokens[i]);
        lens[i] = strlen(tokens[i]);
    }
    return build(copy, lens, n);
}

static bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

int vocab_load(Vocab **out, const char *path, BertError *err) {
    *out = NULL;
    char *data;
    size_t len;
    if (read_file(path, &data, &len, err) != 0) return -1;
    int n = 0, cap = 1024;
    char **tokens = xmalloc((size_t)cap * sizeof *tokens);
    size_t *lens = xmalloc((size_t)cap * sizeof *lens);
    int rc = 0;
    /* A UTF-8 byte-order mark (editors on Windows add one) is not part of the first token:
     * kept, it would turn "[UNK]" on line 1 into an unknown token. */
    const size_t start = len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3) ? 3 : 0;
    for (size_t pos = start; pos < len && rc == 0;) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t line_end = nl ? (size_t)(nl - data) : len;
        size_t a = pos, b = line_end;
        /* load_vocab strips each line; vocab tokens never start or end in other spaces. */
        while (a < b && is_ascii_space(data[a])) a++;
        while (b > a && is_ascii_space(data[b - 1])) b--;
        for (size_t i = a; i < b;) {
            int k;
            if (utf8_decode((const unsigned char *)data + i, b - i, &k) < 0) {
                rc = bert_fail(err, "%s: line %d is not valid UTF-8", path, n + 1);
                break;
            }
            i += (size_t)k;
        }
        if (n == cap) {
            cap = (int)grow_capacity((size_t)cap, (size_t)cap + 1, 64);
            tokens = xrealloc(tokens, (size_t)cap * sizeof *tokens);
            lens = xrealloc(lens, (size_t)cap * sizeof *lens);
        }
        tokens[n] = xmalloc(b - a + 1);
        memcpy(tokens[n], data + a, b - a);
        tokens[n][b - a] = 0;
        lens[n++] = b - a;
        pos = line_end + 1;
    }
    free(data);
    if (rc == 0 && n == 0) rc = bert_fail(err, "%s: vocabulary file is empty", path);
    Vocab *v = build(tokens, lens, n);
    if (rc != 0) {
        vocab_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

void vocab_free(Vocab *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) free(v->tokens[i]);
    free(v->tokens);
    free(v->lens);
    strmap_free(&v->words);
    strmap_free(&v->conts);
    free(v);
}

int vocab_size(const Vocab *v) { return v->n; }

const char *vocab_token(const Vocab *v, int id) {
    return id >= 0 && id < v->n ? v->tokens[id] : NULL;
}
