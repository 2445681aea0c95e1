/* WordPiece vocabulary: tokens by id, and an open-addressing hash to id from
 * (is "##" continuation, piece bytes).
 *
 * The hash is FNV-1a over the piece's bytes (a different start value for continuations),
 * so the tokenizer hashes the prefixes of a word incrementally, one pass per start
 * position, and looks each up without rehashing. */
#include "core/utf8.h"
#include "text/vocab_internal.h"

#include <stdlib.h>
#include <string.h>

uint64_t vocab_hash_init(bool continuation) { return continuation ? 0x84222325cbf29ce4ULL : 0xcbf29ce484222325ULL; }

uint64_t vocab_hash_extend(uint64_t h, const char *bytes, size_t len) {
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)bytes[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* The slot index and 32-bit tag come from different bits of the hash, so a tag match
 * rules out nearly all false candidates before memcmp. */
static size_t slot_of(const Vocab *v, uint64_t h) { return (size_t)(h ^ (h >> 29)) & v->mask; }
static uint32_t tag_of(uint64_t h) { return (uint32_t)(h >> 32); }

static bool starts_continuation(const char *tok, size_t len) { return len > 2 && tok[0] == '#' && tok[1] == '#'; }

/* Pieces are a few bytes: an inline loop instead of a libc call per candidate. */
static inline bool same_bytes(const char *a, const char *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

int vocab_lookup_piece(const Vocab *v, uint64_t h, bool continuation, const char *piece, size_t len) {
    uint32_t tag = tag_of(h), key = (uint32_t)len | (continuation ? VOCAB_CONT_BIT : 0);
    for (size_t s = slot_of(v, h);; s = (s + 1) & v->mask) {
        const VocabSlot *slot = &v->slots[s];
        if (slot->id < 0) return -1;
        if (slot->tag == tag && slot->piece_key == key && same_bytes(v->arena + slot->piece_at, piece, len))
            return slot->id;
    }
}

int vocab_lookup(const Vocab *v, const char *tok, size_t len) {
    bool cont = starts_continuation(tok, len);
    size_t skip = cont ? 2 : 0;
    uint64_t h = vocab_hash_extend(vocab_hash_init(cont), tok + skip, len - skip);
    return vocab_lookup_piece(v, h, cont, tok + skip, len - skip);
}

/* Inserts id under its token; a token that occurs twice maps to its last line, as the
 * reference's dict assignment does. */
static void insert(Vocab *v, int id, uint32_t piece_at) {
    size_t skip = v->is_cont[id] ? 2 : 0, len = v->lens[id] - skip;
    uint64_t h = vocab_hash_extend(vocab_hash_init(v->is_cont[id]), v->tokens[id] + skip, len);
    VocabSlot mine = {tag_of(h), id, piece_at, (uint32_t)len | (v->is_cont[id] ? VOCAB_CONT_BIT : 0)};
    for (size_t s = slot_of(v, h);; s = (s + 1) & v->mask) {
        VocabSlot *slot = &v->slots[s];
        if (slot->id < 0 || (slot->tag == mine.tag && slot->piece_key == mine.piece_key &&
                             memcmp(v->arena + slot->piece_at, v->arena + piece_at, len) == 0)) {
            *slot = mine;
            return;
        }
    }
}

/* Takes ownership of tokens[] (each xmalloc'ed). */
static Vocab *build(char **tokens, size_t *lens, int n) {
    Vocab *v = xcalloc(1, sizeof *v);
    v->n = n;
    v->tokens = tokens;
    v->lens = lens;
    v->is_cont = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *v->is_cont);
    size_t total = 1;
    for (int i = 0; i < n; i++) total += lens[i];
    v->arena = xmalloc(total);
    size_t cap = 64;
    while (cap < (size_t)n * 2 + 1) cap *= 2;
    v->mask = cap - 1;
    v->slots = xmalloc(cap * sizeof *v->slots);
    for (size_t i = 0; i < cap; i++) v->slots[i].id = -1;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        v->is_cont[i] = starts_continuation(tokens[i], lens[i]);
        size_t skip = v->is_cont[i] ? 2 : 0;
        memcpy(v->arena + at, tokens[i] + skip, lens[i] - skip);
        insert(v, i, (uint32_t)at);
        at += lens[i] - skip;
        /* Bounds for the longest-match search. */
        if (v->is_cont[i] && lens[i] - 2 > v->max_cont_bytes) v->max_cont_bytes = lens[i] - 2;
        if (!v->is_cont[i] && lens[i] > v->max_word_bytes) v->max_word_bytes = lens[i];
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
    free(v->is_cont);
    free(v->arena);
    free(v->slots);
    free(v);
}

int vocab_size(const Vocab *v) { return v->n; }

const char *vocab_token(const Vocab *v, int id) {
    return id >= 0 && id < v->n ? v->tokens[id] : NULL;
}
