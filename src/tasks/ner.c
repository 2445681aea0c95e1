/* NER data and metric: see ner.h. */
#include "tasks/ner.h"

#include <stdlib.h>
#include <string.h>

#include "text/vocab.h"

/* ---------------------------------------------------------------- CoNLL files */

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

typedef struct {
    size_t words_cap, sent_cap;
} Growth;

static void end_sentence(NerData *d, Growth *g) {
    if (d->start[d->n_sentences] == d->n_words) return;   /* no words since the last boundary */
    ARRAY_RESERVE(d->start, g->sent_cap, (size_t)d->n_sentences + 2, 64);
    d->start[++d->n_sentences] = d->n_words;
}

/* One non-blank line, NUL-terminated in place: its first and last columns. */
static int add_line(NerData *d, Growth *g, char *line, long lineno, bool allow_untagged, const char *path,
                    BertError *err) {
    char *word = line;
    while (is_space(*word)) word++;
    char *end = word;
    while (*end && !is_space(*end)) end++;
    char *rest = end;
    while (is_space(*rest)) rest++;
    *end = '\0';
    if (!strcmp(word, "-DOCSTART-")) {   /* a document mark: a boundary, no word */
        end_sentence(d, g);
        return 0;
    }
    char *tag = NULL;
    if (*rest) {   /* the last column */
        char *stop = rest + strlen(rest);
        while (stop > rest && is_space(stop[-1])) stop--;
        *stop = '\0';
        tag = stop;
        while (tag > rest && !is_space(tag[-1])) tag--;
    } else if (!allow_untagged) {
        return bert_fail(err, "%s:%ld: \"%s\": a word without a tag (expected: word [other columns] tag)", path,
                         lineno, word);
    }
    const size_t had = g->words_cap;
    ARRAY_RESERVE(d->word, g->words_cap, (size_t)d->n_words + 1, 1024);
    if (g->words_cap != had)   /* the parallel arrays grow with the words' */
        d->tag = xrealloc(d->tag, sizeof(char *) * g->words_cap), d->line = xrealloc(d->line, sizeof(long) * g->words_cap);
    d->word[d->n_words] = word, d->tag[d->n_words] = tag, d->line[d->n_words] = lineno;
    d->untagged += tag == NULL;
    d->n_words++;
    return 0;
}

int ner_read_conll(const char *path, bool allow_untagged, NerData *out, BertError *err) {
    memset(out, 0, sizeof *out);
    size_t len;
    if (read_file(path, &out->storage, &len, err)) return -1;
    if (memchr(out->storage, '\0', len)) {
        ner_data_free(out);
        return bert_fail(err, "%s: holds a NUL byte: not a CoNLL text file", path);
    }
    Growth g = {0, 0};
    ARRAY_RESERVE(out->start, g.sent_cap, 1, 64);
    out->start[0] = 0;
    long lineno = 0;
    for (char *line = out->storage; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        lineno++;
        const char *p = line;
        while (is_space(*p)) p++;
        int rc = *p ? add_line(out, &g, line, lineno, allow_untagged, path, err) : (end_sentence(out, &g), 0);
        if (rc) {
            ner_data_free(out);
            return -1;
        }
        line = nl ? nl + 1 : NULL;
    }
    end_sentence(out, &g);
    if (out->n_words == 0) {
        ner_data_free(out);
        return bert_fail(err, "%s: no words (a CoNLL file: one word a line, blank lines between sentences)", path);
    }
    return 0;
}

void ner_data_free(NerData *d) {
    free(d->start), free(d->word), free(d->tag), free(d->line), free(d->storage);
    memset(d, 0, sizeof *d);
}

/* ---------------------------------------------------------------- labels */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* name as the next id; false (nothing added) when it is a label already. */
static bool labels_add(NerLabels *l, const char *name) {
    bool added;
    StrMapEntry *e = strmap_intern(&l->index, name, strlen(name), &added);
    if (!added) return false;
    e->value = l->n;
    l->name[l->n++] = xstrdup(name);
    return true;
}

static void labels_init(NerLabels *l, size_t capacity) {
    memset(l, 0, sizeof *l);
    l->name = xmalloc(sizeof(char *) * (capacity > 0 ? capacity : 1));
    strmap_init(&l->index, capacity, true);
}

int ner_labels_from_data(const NerData *d, NerLabels *out, BertError *err) {
    memset(out, 0, sizeof *out);
    StrMap seen;   /* the distinct tags, then sorted: not every word's tag sorted */
    strmap_init(&seen, 64, false);
    for (long i = 0; i < d->n_words; i++) {
        if (!d->tag[i]) {
            strmap_free(&seen);
            return bert_fail(err, "line %ld: \"%s\" has no tag: the label list needs every word tagged", d->line[i],
                             d->word[i]);
        }
        strmap_intern(&seen, d->tag[i], strlen(d->tag[i]), NULL);
    }
    const char **sorted = xmalloc(sizeof(char *) * (seen.n + 1));
    for (size_t k = 0; k < seen.n; k++) sorted[k] = seen.entries[k].key;   /* borrowed: NUL-terminated in d */
    qsort(sorted, seen.n, sizeof(char *), cmp_str);
    labels_init(out, seen.n);
    for (size_t k = 0; k < seen.n; k++) labels_add(out, sorted[k]);
    free(sorted), strmap_free(&seen);
    return 0;
}

int ner_labels_read(const char *path, NerLabels *out, BertError *err) {
    memset(out, 0, sizeof *out);
    NerData d;
    if (ner_read_conll(path, true, &d, err)) return -1;   /* one label a line: the words */
    labels_init(out, (size_t)d.n_words);
    int rc = 0;
    for (long i = 0; i < d.n_words && rc == 0; i++) {
        if (d.tag[i]) rc = bert_fail(err, "%s:%ld: one label a line, not \"%s ...\"", path, d.line[i], d.word[i]);
        else if (!labels_add(out, d.word[i])) rc = bert_fail(err, "%s:%ld: label %s given twice", path, d.line[i], d.word[i]);
    }
    ner_data_free(&d);
    if (rc) ner_labels_free(out);
    return rc;
}

void ner_labels_from_names(char *const *names, int n, NerLabels *out) {
    labels_init(out, (size_t)n);
    for (int k = 0; k < n; k++)
        if (!labels_add(out, names[k])) out->name[out->n++] = xstrdup(names[k]);   /* its id kept, the first one found */
}

int ner_label_id(const NerLabels *l, const char *tag) {
    const StrMapEntry *e = tag ? strmap_find(&l->index, tag, strlen(tag)) : NULL;
    return e ? (int)e->value : -1;
}

void ner_labels_free(NerLabels *l) {
    for (int k = 0; k < l->n; k++) free(l->name[k]);
    free(l->name), strmap_free(&l->index);
    memset(l, 0, sizeof *l);
}

int ner_check_tags(const NerData *d, const NerLabels *l, const char *path, BertError *err) {
    for (long i = 0; i < d->n_words; i++)
        if (d->tag[i] && ner_label_id(l, d->tag[i]) < 0)
            return bert_fail(err, "%s:%ld: tag %s is not one of the %d labels (the training file's tags, or --labels)",
                             path, d->line[i], d->tag[i], l->n);
    return 0;
}

/* ---------------------------------------------------------------- features */

/* run_ner.py's b_to_i_label: a later piece of a B-X word gets I-X, where I-X is a label. */
static int *b_to_i_labels(const NerLabels *l) {
    int *map = xmalloc(sizeof(int) * (size_t)(l->n > 0 ? l->n : 1));
    for (int k = 0; k < l->n; k++) {
        map[k] = k;
        if (strncmp(l->name[k], "B-", 2)) continue;
        char *inside = xstrdup(l->name[k]);
        inside[0] = 'I';
        const int id = ner_label_id(l, inside);
        if (id >= 0) map[k] = id;
        free(inside);
    }
    return map;
}

/* Sentence s as row s: [CLS], each word's pieces while they fit, [SEP]. */
static void sentence_features(const NerData *d, const NerLabels *l, const Tokenizer *tok, const int *b_to_i, int s,
                              int cls, int sep, TokenList *pieces, NerFeatures *f) {
    const int T = f->max_seq_length;
    int32_t *ids = f->input_ids + (size_t)s * T, *lab = f->labels + (size_t)s * T;
    int t = 0;
    bool cut = false;
    ids[t] = cls, lab[t++] = -100;
    for (long w = d->start[s]; w < d->start[s + 1]; w++) {
        f->first_piece[w] = -1;
        tokenize(tok, d->word[w], strlen(d->word[w]), pieces);
        const int label = l ? ner_label_id(l, d->tag[w]) : -1;
        for (int k = 0; k < pieces->n; k++) {
            if (t >= T - 1) {   /* room for [SEP] only: the rest of the sentence is cut */
                cut = true;
                break;
            }
            if (k == 0) f->first_piece[w] = t;
            ids[t] = pieces->tokens[k].id;
            lab[t++] = label < 0 ? -100 : k == 0 ? label : b_to_i ? b_to_i[label] : -100;
        }
        f->words_cut += f->first_piece[w] < 0 && pieces->n > 0;
    }
    ids[t] = sep, lab[t++] = -100;
    f->truncated += cut;
    f->length[s] = t;
    for (int k = 0; k < t; k++) f->input_mask[(size_t)s * T + k] = 1;
    for (int k = t; k < T; k++) lab[k] = -100;
}

int ner_features(const NerData *d, const NerLabels *labels, const Tokenizer *tok, int max_seq_length,
                 bool label_all_tokens, NerFeatures *f, BertError *err) {
    memset(f, 0, sizeof *f);
    const Vocab *v = tokenizer_vocab(tok);
    const int cls = vocab_lookup(v, "[CLS]", 5), sep = vocab_lookup(v, "[SEP]", 5);
    if (cls < 0 || sep < 0) return bert_fail(err, "the vocabulary has no [CLS] or [SEP]");
    if (max_seq_length < 3) return bert_fail(err, "--max_seq_length %d: at least 3", max_seq_length);
    const size_t cells = (size_t)d->n_sentences * (size_t)max_seq_length;
    f->n = d->n_sentences, f->max_seq_length = max_seq_length;
    f->input_ids = xcalloc(cells, sizeof(int32_t)), f->input_mask = xcalloc(cells, sizeof(int32_t));
    f->labels = xcalloc(cells, sizeof(int32_t)), f->length = xcalloc((size_t)f->n, sizeof(int32_t));
    f->first_piece = xcalloc((size_t)d->n_words, sizeof(int32_t));
    int *b_to_i = labels && label_all_tokens ? b_to_i_labels(labels) : NULL;
    TokenList pieces;
    token_list_init(&pieces);
    for (int s = 0; s < d->n_sentences; s++) sentence_features(d, labels, tok, b_to_i, s, cls, sep, &pieces, f);
    token_list_free(&pieces);
    free(b_to_i);
    return 0;
}

void ner_features_free(NerFeatures *f) {
    free(f->input_ids), free(f->input_mask), free(f->labels), free(f->length), free(f->first_piece);
    memset(f, 0, sizeof *f);
}

/* ---------------------------------------------------------------- the metric */

/* A tag as seqeval's default mode splits it: the prefix is the first character (a UTF-8
 * code point), the type what follows its first dash, else all that follows the prefix;
 * an empty type is "_". */
typedef struct {
    const char *prefix, *type;
    size_t prefix_len, type_len;
} TagParts;

static size_t first_char_len(const char *s) {
    size_t n = *s ? 1 : 0;
    while (n && ((unsigned char)s[n] & 0xC0) == 0x80) n++;
    return n;
}

static TagParts split_default(const char *tag) {
    TagParts p = {tag, tag, first_char_len(tag), 0};
    const char *rest = tag + p.prefix_len, *dash = strchr(rest, '-');
    p.type = dash ? dash + 1 : rest;
    p.type_len = strlen(p.type);
    if (!p.type_len) p.type = "_", p.type_len = 1;
    return p;
}

static bool is(const TagParts *p, char c) { return p->prefix_len == 1 && p->prefix[0] == c; }
static bool same_type(const TagParts *a, const TagParts *b) {
    return a->type_len == b->type_len && !memcmp(a->type, b->type, a->type_len);
}

/* conlleval's endOfChunk / startOfChunk, as seqeval's default mode has them. */
static bool chunk_ends(const TagParts *prev, const TagParts *cur) {
    if (is(prev, 'E') || is(prev, 'S')) return true;
    if ((is(prev, 'B') || is(prev, 'I')) && (is(cur, 'B') || is(cur, 'S') || is(cur, 'O'))) return true;
    return !is(prev, 'O') && !is(prev, '.') && !same_type(prev, cur);
}

static bool chunk_starts(const TagParts *prev, const TagParts *cur) {
    if (is(cur, 'B') || is(cur, 'S')) return true;
    if ((is(prev, 'E') || is(prev, 'S') || is(prev, 'O')) && (is(cur, 'E') || is(cur, 'I'))) return true;
    return !is(cur, 'O') && !is(cur, '.') && !same_type(prev, cur);
}

typedef struct {
    long begin, end;   /* positions in the sentences joined by one "O" each (seqeval's flattening) */
    const char *type;
    size_t type_len;
} Entity;

typedef struct {
    Entity *e;
    long n;
    size_t cap;
} Entities;

static void add_entity(Entities *es, long begin, long end, const char *type, size_t type_len) {
    ARRAY_RESERVE(es->e, es->cap, (size_t)es->n + 1, 64);
    es->e[es->n++] = (Entity){begin, end, type, type_len};
}

/* Default mode over the whole sequence, as seqeval flattens it: each sentence followed by
 * an "O", and one more at the end; the chunk's begin carries across, as there. */
static void entities_default(const char *const *tags, const long *start, int n_sentences, Entities *out) {
    TagParts prev = split_default("O");
    const TagParts outside = prev;
    long begin = 0, pos = 0;
    for (int s = 0; s < n_sentences; s++)
        for (long w = start[s]; w <= start[s + 1]; w++, pos++) {
            const TagParts cur = w < start[s + 1] ? split_default(tags[w]) : outside;
            if (chunk_ends(&prev, &cur)) add_entity(out, begin, pos - 1, prev.type, prev.type_len);
            if (chunk_starts(&prev, &cur)) begin = pos;
            prev = cur;
        }
    if (chunk_ends(&prev, &outside)) add_entity(out, begin, pos - 1, prev.type, prev.type_len);
}

/* Strict mode: the prefix must be the scheme's; the type is what follows it with dashes
 * stripped at both ends (seqeval's Token), "_" if empty. A chunk is B-X (I-X)* (IOB2), or
 * B-X (I-X)* E-X or S-X (IOBES): runs that do not end so are no entity. */
static int strict_parts(const char *tag, bool iobes, TagParts *p, BertError *err) {
    *p = (TagParts){tag, tag + 1, first_char_len(tag), 0};
    const char *allowed = iobes ? "BIOES" : "BIO";
    if (p->prefix_len != 1 || !strchr(allowed, tag[0]))
        return bert_fail(err, "tag \"%s\": strict %s takes the prefixes %s only", tag, iobes ? "IOBES" : "IOB2",
                         allowed);
    const char *end = tag + strlen(tag);
    while (*p->type == '-') p->type++;
    while (end > p->type && end[-1] == '-') end--;
    p->type_len = (size_t)(end - p->type);
    if (!p->type_len) p->type = "_", p->type_len = 1;
    return 0;
}

static int entities_strict(const char *const *tags, const long *start, int n_sentences, bool iobes, Entities *out,
                           BertError *err) {
    long base = 0;   /* positions as the default mode numbers them: matching needs them equal on both sides */
    for (int s = 0; s < n_sentences; base += start[s + 1] - start[s] + 1, s++) {
        const long n = start[s + 1] - start[s];
        TagParts *t = xmalloc(sizeof(TagParts) * (size_t)(n + 1));
        for (long i = 0; i < n; i++)
            if (strict_parts(tags[start[s] + i], iobes, &t[i], err)) {
                free(t);
                return -1;
            }
        strict_parts("O", iobes, &t[n], err);
        for (long i = 0; i < n;) {
            if (!is(&t[i], 'B') && !(iobes && is(&t[i], 'S'))) {
                i++;
                continue;
            }
            long j = i + 1;   /* the run: I (IOB2), I then at most one E (IOBES), of the same type */
            if (!is(&t[i], 'S'))
                while (j < n && same_type(&t[j], &t[i]) && (is(&t[j], 'I') || (iobes && is(&t[j], 'E')))) {
                    j++;
                    if (is(&t[j - 1], 'E')) break;
                }
            const TagParts *last = &t[j - 1];
            if (!iobes || is(last, 'E') || is(last, 'S')) add_entity(out, base + i, base + j - 1, t[i].type, t[i].type_len);
            i = j;
        }
        free(t);
    }
    return 0;
}

static int extract(const char *const *tags, const long *start, int n_sentences, NerMetricMode mode, Entities *out,
                   BertError *err) {
    if (mode == NER_METRIC_DEFAULT) {
        entities_default(tags, start, n_sentences, out);
        return 0;
    }
    return entities_strict(tags, start, n_sentences, mode == NER_METRIC_STRICT_IOBES, out, err);
}

static bool same_entity(const Entity *a, const Entity *b) {
    return a->begin == b->begin && a->end == b->end && a->type_len == b->type_len && !memcmp(a->type, b->type, a->type_len);
}

static int cmp_entity(const void *pa, const void *pb) {
    const Entity *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    const size_t n = a->type_len < b->type_len ? a->type_len : b->type_len;
    const int c = memcmp(a->type, b->type, n);
    return c ? c : (a->type_len > b->type_len) - (a->type_len < b->type_len);
}

/* seqeval's sets: distinct (type, begin, end); the default mode's stale begins can repeat one */
static void distinct(Entities *es) {
    if (es->n == 0) return;
    qsort(es->e, (size_t)es->n, sizeof(Entity), cmp_entity);
    long k = 0;
    for (long i = 0; i < es->n; i++)
        if (k == 0 || !same_entity(&es->e[k - 1], &es->e[i])) es->e[k++] = es->e[i];
    es->n = k;
}

static long count_common(const Entities *a, const Entities *b) {
    long i = 0, j = 0, common = 0;
    while (i < a->n && j < b->n) {
        const int c = cmp_entity(&a->e[i], &b->e[j]);
        if (c == 0) common++, i++, j++;
        else if (c < 0) i++;
        else j++;
    }
    return common;
}

int ner_score(const char *const *gold, const char *const *pred, const long *start, int n_sentences, NerMetricMode mode,
              NerScores *out, BertError *err) {
    memset(out, 0, sizeof *out);
    Entities g = {0}, p = {0};
    int rc = extract(gold, start, n_sentences, mode, &g, err);
    if (rc == 0) rc = extract(pred, start, n_sentences, mode, &p, err);
    if (rc == 0) {
        distinct(&g), distinct(&p);
        const long tp = count_common(&g, &p);
        out->true_entities = g.n, out->predicted_entities = p.n, out->correct_entities = tp;
        /* seqeval's arithmetic, in its order: 0 for 0/0, F1 = 2 P R / (P + R) with 0 for P + R = 0 */
        out->precision = p.n ? (double)tp / (double)p.n : 0.0;
        out->recall = g.n ? (double)tp / (double)g.n : 0.0;
        const double denom = out->precision + out->recall;
        out->f1 = 2.0 * out->precision * out->recall / (denom == 0.0 ? 1.0 : denom);
        long right = 0;
        out->tokens = n_sentences ? start[n_sentences] - start[0] : 0;
        for (long w = n_sentences ? start[0] : 0; w < (n_sentences ? start[n_sentences] : 0); w++)
            right += !strcmp(gold[w], pred[w]);
        out->accuracy = out->tokens ? (double)right / (double)out->tokens : 0.0;
    }
    free(g.e), free(p.e);
    return rc;
}

int ner_metric_mode(const char *name) {
    if (!strcmp(name, "default")) return NER_METRIC_DEFAULT;
    if (!strcmp(name, "strict-iob2")) return NER_METRIC_STRICT_IOB2;
    if (!strcmp(name, "strict-iobes")) return NER_METRIC_STRICT_IOBES;
    return -1;
}
