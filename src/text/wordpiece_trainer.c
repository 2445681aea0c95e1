/* WordPiece vocabulary learning: BPE over the corpus's words with "##" continuation
 * symbols, as HuggingFace's WordPieceTrainer (a BpeTrainer with
 * continuing_subword_prefix="##").
 *
 * Every word starts as its characters: "w", "##o", "##r", "##d". Each step merges the
 * most frequent adjacent pair (weighted by word counts) into one symbol ("w" + "##o" ->
 * "wo", "##o" + "##r" -> "##or") until the vocabulary is full or no pair is frequent
 * enough. Pair counts live in a hash map with, per pair, the words that contain it; a
 * max-heap with lazy deletion finds the best pair (an entry whose count is out of date
 * is re-queued with the current count when it surfaces). */
#include "text/wordpiece_trainer.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "core/test_hooks.h"
#include "text/tokenizer.h"
#include "text/vocab_internal.h"

/* TEST_COUNT_WORK: steps of the trainer's loops (bytes hashed and probes made, characters
 * and symbols walked, comparisons of its sorts, heap moves), what the scaling tests count. */

/* ---- word counting ---- */

struct WordCounts {
    Tokenizer *basic;
    int max_chars;
    StrMap words;
};

WordCounts *word_counts_new(bool do_lower_case, int max_input_chars_per_word) {
    WordCounts *wc = xcalloc(1, sizeof *wc);
    TokenizerOptions opt = tokenizer_default_options();
    opt.do_lower_case = do_lower_case;
    wc->basic = tokenizer_new(NULL, &opt);
    wc->max_chars = max_input_chars_per_word;
    strmap_init(&wc->words, 0, true);
    return wc;
}

void word_counts_free(WordCounts *wc) {
    if (!wc) return;
    tokenizer_free(wc->basic);
    strmap_free(&wc->words);
    free(wc);
}

long word_counts_distinct(const WordCounts *wc) { return (long)wc->words.n; }

long long word_counts_total(const WordCounts *wc) {
    long long total = 0;
    for (size_t i = 0; i < wc->words.n; i++) total += wc->words.entries[i].value;
    return total;
}

static size_t utf8_chars(const char *s, size_t len) {
    TEST_COUNT_WORK((long long)len);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

typedef struct {
    StrMap *map;
    int max_chars;
} CountCtx;

static void count_word(const char *word, size_t len, int start, int end, void *ctx) {
    CountCtx *c = ctx;
    if (utf8_chars(word, len) > (size_t)c->max_chars) return;  /* always [UNK] */
    strmap_intern(c->map, word, len, NULL)->value++;
}

/* Each thread counts whole lines of its share of the text into its own map; the maps
 * are then added into wc in thread order. */
void word_counts_add_text(WordCounts *wc, const char *text, size_t len, int threads) {
    if (threads < 1) threads = 1;
    StrMap *local = xcalloc((size_t)threads, sizeof *local);
#pragma omp parallel num_threads(threads)
    {
        int tid = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t begin = len * (size_t)tid / (size_t)nt, end = len * (size_t)(tid + 1) / (size_t)nt;
        /* Move both edges forward to a line start so no line is split or counted twice. */
        while (begin > 0 && begin < len && text[begin - 1] != '\n') begin++;
        while (end < len && end > 0 && text[end - 1] != '\n') end++;
        strmap_init(&local[tid], 0, true);
        CountCtx ctx = {&local[tid], wc->max_chars};
        TokenList work;
        token_list_init(&work);
        for (size_t pos = begin; pos < end;) {
            const char *nl = memchr(text + pos, '\n', end - pos);
            size_t stop = nl ? (size_t)(nl - text) : end;
            TEST_COUNT_WORK((long long)(stop - pos) + 1);
            basic_tokenize(wc->basic, text + pos, stop - pos, &work, count_word, &ctx);
            pos = stop + 1;
        }
        token_list_free(&work);
    }
    for (int t = 0; t < threads; t++) {
        for (size_t i = 0; i < local[t].n; i++) {
            const StrMapEntry *e = &local[t].entries[i];
            strmap_intern(&wc->words, e->key, e->len, NULL)->value += e->value;
        }
        strmap_free(&local[t]);
    }
    free(local);
}

/* ---- training state ---- */

typedef struct {
    int *sym;
    int len;
    long long count;
} Word;

typedef struct {
    int a, b;
    long long count;
    int *where;  /* words that contained the pair when it was counted (may be stale) */
    int nwhere, capwhere;
} Pair;

typedef struct {
    long long count;
    int pair;
} HeapEntry;

typedef struct {
    StrMap symbols;          /* symbol string -> id (entry index); values unused */
    Word *words;
    int nwords;
    Pair *pairs;
    int npairs, cappairs;
    int32_t *pair_slots;     /* (a,b) -> pair index, open addressing */
    size_t pair_mask;
    HeapEntry *heap;
    size_t nheap, capheap;
    int *stamp;              /* per word: last merge that visited it */
} WordPieceState;

static uint64_t pair_key(int a, int b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }
/* Every bit of the key reaches the slot (splitmix64's finaliser). Taking bits 20 and up of
 * key * constant, as before, left the low 12 bits of the slot a function of the second
 * symbol alone: all pairs ending in one symbol ("##s") fell into one cluster, and the
 * probes grew faster than the corpus (16x for 10x the distinct words). */
static size_t pair_slot_of(uint64_t k, size_t mask) {
    k ^= k >> 30;
    k *= 0xBF58476D1CE4E5B9ULL;
    k ^= k >> 27;
    k *= 0x94D049BB133111EBULL;
    k ^= k >> 31;
    return (size_t)k & mask;
}

static void pairs_rehash(WordPieceState *tr) {
    memset(tr->pair_slots, -1, (tr->pair_mask + 1) * sizeof *tr->pair_slots);
    for (int i = 0; i < tr->npairs; i++) {
        size_t s = pair_slot_of(pair_key(tr->pairs[i].a, tr->pairs[i].b), tr->pair_mask);
        while (tr->pair_slots[s] >= 0) s = (s + 1) & tr->pair_mask, TEST_COUNT_WORK(1);
        tr->pair_slots[s] = i;
    }
    TEST_COUNT_WORK(tr->npairs);
}

static Pair *pair_get(WordPieceState *tr, int a, int b) {
    uint64_t k = pair_key(a, b);
    size_t s = pair_slot_of(k, tr->pair_mask);
    for (; tr->pair_slots[s] >= 0; s = (s + 1) & tr->pair_mask) {
        Pair *p = &tr->pairs[tr->pair_slots[s]];
        TEST_COUNT_WORK(1);
        if (p->a == a && p->b == b) return p;
    }
    if (tr->npairs == tr->cappairs) {
        tr->cappairs = tr->cappairs ? tr->cappairs * 2 : 4096;
        tr->pairs = xrealloc(tr->pairs, (size_t)tr->cappairs * sizeof *tr->pairs);
    }
    tr->pairs[tr->npairs] = (Pair){a, b, 0, NULL, 0, 0};
    tr->pair_slots[s] = tr->npairs++;
    if ((size_t)tr->npairs * 2 > tr->pair_mask) {
        tr->pair_mask = tr->pair_mask * 2 + 1;
        tr->pair_slots = xrealloc(tr->pair_slots, (tr->pair_mask + 1) * sizeof *tr->pair_slots);
        pairs_rehash(tr);
    }
    return &tr->pairs[tr->npairs - 1];
}

static void pair_note_word(Pair *p, int w) {
    if (p->nwhere && p->where[p->nwhere - 1] == w) return;
    if (p->nwhere == p->capwhere) {
        p->capwhere = p->capwhere ? p->capwhere * 2 : 4;
        p->where = xrealloc(p->where, (size_t)p->capwhere * sizeof *p->where);
    }
    p->where[p->nwhere++] = w;
}

static int cmp_symbols(const WordPieceState *tr, int a, int b) {
    TEST_COUNT_WORK(1);
    const StrMapEntry *x = &tr->symbols.entries[a], *y = &tr->symbols.entries[b];
    size_t la = x->len, lb = y->len;
    int c = memcmp(x->key, y->key, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

/* Max-heap on count; equal counts are broken by the pair's strings (first symbol, then
 * second, bytewise), so the result is reproducible by a plain reimplementation. */
static bool heap_before(const WordPieceState *tr, HeapEntry x, HeapEntry y) {
    if (x.count != y.count) return x.count > y.count;
    const Pair *p = &tr->pairs[x.pair], *q = &tr->pairs[y.pair];
    int c = cmp_symbols(tr, p->a, q->a);
    return c ? c < 0 : cmp_symbols(tr, p->b, q->b) < 0;
}

static void heap_push(WordPieceState *tr, long long count, int pair) {
    if (tr->nheap == tr->capheap) {
        tr->capheap = tr->capheap ? tr->capheap * 2 : 4096;
        tr->heap = xrealloc(tr->heap, tr->capheap * sizeof *tr->heap);
    }
    size_t i = tr->nheap++;
    HeapEntry e = {count, pair};
    while (i > 0 && heap_before(tr, e, tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
        TEST_COUNT_WORK(1);
    }
    tr->heap[i] = e;
}

static HeapEntry heap_pop(WordPieceState *tr) {
    HeapEntry top = tr->heap[0], last = tr->heap[--tr->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= tr->nheap) break;
        if (c + 1 < tr->nheap && heap_before(tr, tr->heap[c + 1], tr->heap[c])) c++;
        if (!heap_before(tr, tr->heap[c], last)) break;
        tr->heap[i] = tr->heap[c];
        i = c;
        TEST_COUNT_WORK(1);
    }
    if (tr->nheap) tr->heap[i] = last;
    return top;
}

/* The best pair whose count is current, or -1 when none is left. */
static int best_pair(WordPieceState *tr) {
    while (tr->nheap) {
        TEST_COUNT_WORK(1);
        HeapEntry e = heap_pop(tr);
        long long now = tr->pairs[e.pair].count;
        if (now == e.count && now > 0) return e.pair;
        if (now > 0 && now < e.count) heap_push(tr, now, e.pair);
    }
    return -1;
}

static int symbol_id(WordPieceState *tr, const char *s, size_t len) {
    return (int)strmap_index(&tr->symbols, strmap_intern(&tr->symbols, s, len, NULL));
}

/* Adds (sign=+1) or removes (-1) the counts of every adjacent pair of word w. With
 * sign +1 and only_with >= 0, pairs involving symbol only_with are queued in the heap
 * and learn that w contains them (the others are unchanged from before the merge). */
static void count_pairs(WordPieceState *tr, int w, int sign, int only_with) {
    Word *word = &tr->words[w];
    TEST_COUNT_WORK(word->len);
    for (int i = 0; i + 1 < word->len; i++) {
        Pair *p = pair_get(tr, word->sym[i], word->sym[i + 1]);
        p->count += sign * word->count;
        if (sign > 0 && (only_with < 0 || p->a == only_with || p->b == only_with)) {
            pair_note_word(p, w);
            if (only_with >= 0) heap_push(tr, p->count, (int)(p - tr->pairs));
        }
    }
}

/* Replaces each left-to-right occurrence of (a, b) in word w by c; returns whether any. */
static bool merge_in_word(Word *word, int a, int b, int c) {
    TEST_COUNT_WORK(word->len);
    int out = 0;
    bool any = false;
    for (int i = 0; i < word->len; i++) {
        if (i + 1 < word->len && word->sym[i] == a && word->sym[i + 1] == b) {
            word->sym[out++] = c;
            i++;
            any = true;
        } else {
            word->sym[out++] = word->sym[i];
        }
    }
    word->len = out;
    return any;
}

/* ---- setup: alphabet and initial words ---- */

typedef struct {
    const char *s;
    size_t len;
    long long count;
} CharCount;

static int cmp_char_count(const void *x, const void *y) {
    TEST_COUNT_WORK(1);
    const CharCount *a = x, *b = y;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static size_t utf8_char_len(const char *s) {
    unsigned char b = (unsigned char)s[0];
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

/* Character frequencies; marks the limit_alphabet most frequent as allowed (value 1). */
static void choose_alphabet(const WordCounts *wc, int limit, StrMap *allowed) {
    StrMap freq;
    strmap_init(&freq, 0, true);
    for (size_t i = 0; i < wc->words.n; i++) {
        const StrMapEntry *w = &wc->words.entries[i];
        for (size_t k = 0; k < w->len; k += utf8_char_len(w->key + k)) {
            const char *ch = w->key + k;
            strmap_intern(&freq, ch, utf8_char_len(ch), NULL)->value += w->value;
        }
    }
    CharCount *cc = xmalloc((freq.n + 1) * sizeof *cc);
    for (size_t i = 0; i < freq.n; i++) {
        const StrMapEntry *e = &freq.entries[i];
        cc[i] = (CharCount){e->key, e->len, e->value};
    }
    qsort(cc, freq.n, sizeof *cc, cmp_char_count);
    size_t keep = limit > 0 && (size_t)limit < freq.n ? (size_t)limit : freq.n;
    for (size_t i = 0; i < keep; i++) {
        strmap_intern(allowed, cc[i].s, cc[i].len, NULL)->value = 1;
    }
    free(cc);
    strmap_free(&freq);
}

static bool word_in_alphabet(const char *w, size_t len, const StrMap *alphabet) {
    for (size_t k = 0; k < len; k += utf8_char_len(w + k)) {
        const StrMapEntry *e = strmap_find(alphabet, w + k, utf8_char_len(w + k));
        if (!e || e->value != 1) return false;  /* absent or cut */
    }
    return true;
}

/* Sorted by count (descending) then bytes, so the result does not depend on threads. */
static int cmp_words(const void *x, const void *y, void *ctx) {
    TEST_COUNT_WORK(1);
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    const StrMapEntry *p = &((const StrMap *)ctx)->entries[a], *q = &((const StrMap *)ctx)->entries[b];
    if (p->value != q->value) return p->value > q->value ? -1 : 1;
    size_t n = p->len < q->len ? p->len : q->len;
    int c = memcmp(p->key, q->key, n);
    return c ? c : (p->len > q->len) - (p->len < q->len);
}

static void build_words(WordPieceState *tr, const WordCounts *wc, const StrMap *alphabet) {
    size_t *order = xmalloc((wc->words.n + 1) * sizeof *order);
    for (size_t i = 0; i < wc->words.n; i++) order[i] = i;
    qsort_r(order, wc->words.n, sizeof *order, cmp_words, (void *)&wc->words);
    tr->words = xcalloc(wc->words.n + 1, sizeof *tr->words);
    char piece[2 + 4];
    for (size_t oi = 0; oi < wc->words.n; oi++) {
        size_t i = order[oi];
        const char *w = wc->words.entries[i].key;
        size_t len = wc->words.entries[i].len;
        if (len == 0 || !word_in_alphabet(w, len, alphabet)) continue;
        Word *word = &tr->words[tr->nwords];
        word->sym = xmalloc(len * sizeof *word->sym);
        word->count = wc->words.entries[i].value;
        for (size_t k = 0; k < len;) {
            size_t n = utf8_char_len(w + k);
            size_t prefix = k ? 2 : 0;  /* "##" on all but the first character */
            memcpy(piece, "##", prefix);
            memcpy(piece + prefix, w + k, n);
            word->sym[word->len++] = symbol_id(tr, piece, prefix + n);
            k += n;
        }
        tr->nwords++;
    }
    free(order);
}

/* ---- the merge loop ---- */

static bool word_has_pair(const Word *word, int a, int b) {
    for (int i = 0; i + 1 < word->len; i++) {
        TEST_COUNT_WORK(1);
        if (word->sym[i] == a && word->sym[i + 1] == b) return true;
    }
    return false;
}

/* Merges pair p everywhere; returns the new symbol's id. */
static int apply_merge(WordPieceState *tr, int p, int stamp) {
    int a = tr->pairs[p].a, b = tr->pairs[p].b;
    const char *sa = tr->symbols.entries[a].key, *sb = tr->symbols.entries[b].key;
    size_t la = tr->symbols.entries[a].len, lb = tr->symbols.entries[b].len;
    char *merged = xmalloc(la + lb + 1);  /* "x" + "##y" -> "xy"; "##x" + "##y" -> "##xy" */
    memcpy(merged, sa, la);
    memcpy(merged + la, sb + 2, lb - 2);
    int c = symbol_id(tr, merged, la + lb - 2);
    free(merged);
    /* Take the word list: pair_get may move tr->pairs while words are re-counted. */
    int *where = tr->pairs[p].where, nwhere = tr->pairs[p].nwhere;
    tr->pairs[p].where = NULL;
    tr->pairs[p].nwhere = tr->pairs[p].capwhere = 0;
    TEST_COUNT_WORK(nwhere);
    for (int k = 0; k < nwhere; k++) {
        int w = where[k];
        if (tr->stamp[w] == stamp || !word_has_pair(&tr->words[w], a, b)) continue;
        tr->stamp[w] = stamp;
        count_pairs(tr, w, -1, -1);
        merge_in_word(&tr->words[w], a, b, c);
        count_pairs(tr, w, +1, c);
    }
    free(where);
    return c;
}

static void wordpiece_state_free(WordPieceState *tr) {
    strmap_free(&tr->symbols);
    for (int i = 0; i < tr->nwords; i++) free(tr->words[i].sym);
    free(tr->words);
    for (int i = 0; i < tr->npairs; i++) free(tr->pairs[i].where);
    free(tr->pairs);
    free(tr->pair_slots);
    free(tr->heap);
    free(tr->stamp);
}

VocabTrainOptions vocab_train_default_options(void) {
    VocabTrainOptions o = {.vocab_size = 30522, .do_lower_case = true, .min_frequency = 2, .num_unused = 994,
                           .limit_alphabet = 1000, .max_input_chars_per_word = 100, .threads = omp_get_max_threads()};
    return o;
}

/* BERT's layout: [PAD], up to 99 [unusedN], [UNK] [CLS] [SEP] [MASK], the other unused. */
static int write_specials(char **out, int num_unused) {
    int n = 0, unused = 0;
    char name[32];
    out[n++] = xstrdup("[PAD]");
    for (; unused < num_unused && unused < 99; unused++) {
        snprintf(name, sizeof name, "[unused%d]", unused);
        out[n++] = xstrdup(name);
    }
    const char *core[] = {"[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int i = 0; i < 4; i++) out[n++] = xstrdup(core[i]);
    for (; unused < num_unused; unused++) {
        snprintf(name, sizeof name, "[unused%d]", unused);
        out[n++] = xstrdup(name);
    }
    return n;
}

int wordpiece_train(const WordCounts *wc, const VocabTrainOptions *opt, char ***tokens, int *ntokens, BertError *err) {
    *tokens = NULL;
    *ntokens = 0;
    if (opt->num_unused < 0 || (long long)opt->vocab_size <= 5LL + opt->num_unused)  /* no int overflow */
        return bert_fail(err, "vocab_size %d leaves no room after 5 special tokens and %d [unusedN] slots", opt->vocab_size,
                         opt->num_unused);
    const int reserved = 5 + opt->num_unused;
    WordPieceState tr;
    memset(&tr, 0, sizeof tr);
    strmap_init(&tr.symbols, 0, true);
    tr.pair_mask = 4095;
    tr.pair_slots = xmalloc((tr.pair_mask + 1) * sizeof *tr.pair_slots);
    memset(tr.pair_slots, -1, (tr.pair_mask + 1) * sizeof *tr.pair_slots);
    StrMap alphabet;
    strmap_init(&alphabet, 0, true);
    choose_alphabet(wc, opt->limit_alphabet, &alphabet);
    build_words(&tr, wc, &alphabet);
    strmap_free(&alphabet);
    int budget = opt->vocab_size - reserved;
    if (tr.symbols.n == 0 || (int)tr.symbols.n > budget) {
        int have = (int)tr.symbols.n;
        wordpiece_state_free(&tr);
        return have == 0 ? bert_fail(err, "the corpus has no words to learn from")
                         : bert_fail(err, "vocab_size %d holds %d learned tokens but the corpus already has %d characters "
                                          "(with ## forms); raise --vocab_size or lower --limit_alphabet",
                                     opt->vocab_size, budget, have);
    }
    for (int w = 0; w < tr.nwords; w++) count_pairs(&tr, w, +1, -1);
    for (int p = 0; p < tr.npairs; p++)
        if (tr.pairs[p].count > 0) heap_push(&tr, tr.pairs[p].count, p);
    tr.stamp = xmalloc(((size_t)tr.nwords + 1) * sizeof *tr.stamp);
    memset(tr.stamp, -1, ((size_t)tr.nwords + 1) * sizeof *tr.stamp);
    for (int merges = 0; (int)tr.symbols.n < budget; merges++) {
        int p = best_pair(&tr);
        if (p < 0 || tr.pairs[p].count < opt->min_frequency) break;
        apply_merge(&tr, p, merges);
    }
    /* vocab.txt: specials, whole-word symbols, then "##" pieces, each in order of creation. */
    char **out = xmalloc(((size_t)reserved + tr.symbols.n) * sizeof *out);
    int n = write_specials(out, opt->num_unused);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < tr.symbols.n; i++) {
            const StrMapEntry *e = &tr.symbols.entries[i];
            bool cont = e->len > 2 && !memcmp(e->key, "##", 2);
            if (cont == (pass == 1)) out[n++] = xstrdup(e->key);
        }
    wordpiece_state_free(&tr);
    *tokens = out;
    *ntokens = n;
    return 0;
}
