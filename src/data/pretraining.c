/* Google's instance-making algorithm (create_pretraining_data.py), decision for
 * decision. Comments name the reference's variables so the two can be read side by
 * side. Segments A and B are always runs of consecutive sentences, so they are kept as
 * [lo, hi) ranges into the token array instead of copied lists; truncation moves the
 * ends of a range. */
#include "data/pretraining.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/test_hooks.h"

/* TEST_COUNT_WORK: steps of create_pretraining_data's loops, reading (pretraining_io.c) and
 * making instances (here), what the scaling tests count. */

PretrainingOptions pretraining_default_options(void) {
    return (PretrainingOptions){
        .do_lower_case = true, .do_whole_word_mask = false, .max_seq_length = 128,
        .max_predictions_per_seq = 20, .random_seed = 12345, .dupe_factor = 10,
        .masked_lm_prob = 0.15, .short_seq_prob = 0.1, .spool_memory_mb = 256};
}

int pretraining_check_options(const PretrainingOptions *opt, BertError *err) {
    /* [CLS] A [SEP] B [SEP] with A and B non-empty needs 5 slots; the reference fails
     * an assertion (or randint(2, max_num_tokens)) below that. */
    if (opt->max_seq_length < 5 || opt->max_seq_length > 65536)
        return bert_fail(err, "--max_seq_length must be in [5, 65536], got %d", opt->max_seq_length);
    if (opt->max_predictions_per_seq < 1 || opt->max_predictions_per_seq > 65536)
        return bert_fail(err, "--max_predictions_per_seq must be in [1, 65536], got %d",
                         opt->max_predictions_per_seq);
    if (opt->dupe_factor < 0 || opt->dupe_factor > 10000)  /* each pass redoes the corpus */
        return bert_fail(err, "--dupe_factor must be in [0, 10000], got %d", opt->dupe_factor);
    if (!(opt->masked_lm_prob >= 0 && opt->masked_lm_prob <= 1))
        return bert_fail(err, "--masked_lm_prob must be in [0, 1], got %g", opt->masked_lm_prob);
    if (!(opt->short_seq_prob >= 0 && opt->short_seq_prob <= 1))
        return bert_fail(err, "--short_seq_prob must be in [0, 1], got %g", opt->short_seq_prob);
    if (!(opt->spool_memory_mb >= 0 && opt->spool_memory_mb < 1e7))
        return bert_fail(err, "--spool_memory_mb must be >= 0, got %g", opt->spool_memory_mb);
    return 0;
}

/* ---- DocumentSet ------------------------------------------------------------------- */

void documents_init(DocumentSet *d) {
    memset(d, 0, sizeof *d);
    d->cap_sentences = 1024;
    d->sentence_start = xmalloc(d->cap_sentences * sizeof *d->sentence_start);
    d->sentence_start[0] = 0;
    d->cap_documents = 256;
    d->document_start = xmalloc(d->cap_documents * sizeof *d->document_start);
    d->document_start[0] = 0;
}

void documents_free(DocumentSet *d) {
    free(d->tokens);
    free(d->sentence_start);
    free(d->document_start);
    memset(d, 0, sizeof *d);
}

void documents_add_sentence(DocumentSet *d, const int32_t *ids, size_t n) {
    if (n == 0) return;
    if (!d->document_open) {
        if (d->n_documents + 2 > d->cap_documents) {
            d->cap_documents = grow_capacity(d->cap_documents, d->n_documents + 2, 1024);
            d->document_start = xrealloc(d->document_start, d->cap_documents * sizeof *d->document_start);
        }
        d->n_documents++;
        d->document_open = true;
    }
    if (d->n_tokens + n > d->cap_tokens) {
        d->cap_tokens = grow_capacity(d->cap_tokens, d->n_tokens + n, 1 << 16);
        d->tokens = xrealloc(d->tokens, d->cap_tokens * sizeof *d->tokens);
    }
    if (d->n_sentences + 2 > d->cap_sentences) {
        d->cap_sentences = grow_capacity(d->cap_sentences, d->n_sentences + 2, 1024);
        d->sentence_start = xrealloc(d->sentence_start, d->cap_sentences * sizeof *d->sentence_start);
    }
    memcpy(d->tokens + d->n_tokens, ids, n * sizeof *ids);
    TEST_COUNT_WORK((long long)n);
    d->n_tokens += n;
    d->n_sentences++;
    d->sentence_start[d->n_sentences] = d->n_tokens;
    d->document_start[d->n_documents] = d->n_sentences;
}

void documents_break(DocumentSet *d) { d->document_open = false; }

size_t document_sentence_count(const DocumentSet *d, size_t doc) {
    return d->document_start[doc + 1] - d->document_start[doc];
}

/* ---- MaskVocab --------------------------------------------------------------------- */

static int32_t required_token(const Vocab *vocab, const char *tok, BertError *err) {
    int id = vocab_lookup(vocab, tok, strlen(tok));
    if (id < 0) bert_fail(err, "the vocabulary has no %s token", tok);
    return id;
}

int mask_vocab_init(MaskVocab *mv, const Vocab *vocab, BertError *err) {
    memset(mv, 0, sizeof *mv);
    if ((mv->cls_id = required_token(vocab, "[CLS]", err)) < 0) return -1;
    if ((mv->sep_id = required_token(vocab, "[SEP]", err)) < 0) return -1;
    if ((mv->mask_id = required_token(vocab, "[MASK]", err)) < 0) return -1;
    mv->vocab_size = vocab_size(vocab);
    mv->words = xmalloc((size_t)mv->vocab_size * sizeof *mv->words);
    mv->is_continuation = xcalloc((size_t)mv->vocab_size, sizeof *mv->is_continuation);
    /* The reference's vocab_words is list(vocab.keys()): every distinct token once.
     * Each id whose token looks up to itself contributes; for vocabularies without
     * duplicate lines (every BERT vocabulary) that is all ids, in file order. */
    for (int id = 0; id < mv->vocab_size; id++) {
        const char *tok = vocab_token(vocab, id);
        mv->is_continuation[id] = strncmp(tok, "##", 2) == 0;
        if (vocab_lookup(vocab, tok, strlen(tok)) == id) mv->words[mv->n_words++] = id;
    }
    return 0;
}

void mask_vocab_free(MaskVocab *mv) {
    free(mv->words);
    free(mv->is_continuation);
    memset(mv, 0, sizeof *mv);
}

/* ---- Instance generation ----------------------------------------------------------- */

typedef struct {
    const DocumentSet *docs;
    const PretrainingOptions *opt;
    const MaskVocab *mv;
    PyRandom *rng;
    uint32_t *order;          /* all_documents after rng.shuffle: order[k] = document */
    Instance inst;
    int32_t *original;        /* tokens before masking (the labels) */
    int32_t *group_of;        /* cand_indexes: group id per shuffled slot */
    int32_t *group_first, *group_len, *members;
    InstanceSink sink;
    void *sink_ctx;
} Generator;

/* Python's round() is round-half-to-even, which is rint() in the default FP mode. */
static int num_to_predict(const Generator *g, int n_tokens) {
    long rounded = (long)rint((double)n_tokens * g->opt->masked_lm_prob);
    if (rounded < 1) rounded = 1;
    return rounded < g->opt->max_predictions_per_seq ? (int)rounded : g->opt->max_predictions_per_seq;
}

/* create_masked_lm_predictions(): masks inst->input_ids in place, fills the predictions. */
static void mask_tokens(Generator *g) {
    Instance *in = &g->inst;
    const MaskVocab *mv = g->mv;
    const bool whole_words = g->opt->do_whole_word_mask;
    int n = in->n_tokens, n_groups = 0, n_members = 0;
    memcpy(g->original, in->input_ids, (size_t)n * sizeof *g->original);
    for (int i = 0; i < n; i++) {
        int32_t id = in->input_ids[i];
        if (id == mv->cls_id || id == mv->sep_id) continue;
        g->members[n_members++] = i;
        /* A "##" piece joins the previous candidate, even across the middle [SEP], as
         * in the reference (it only looks at cand_indexes[-1]). Without whole-word
         * masking group k is just members[k]: group_first and group_len stay unused. */
        if (!whole_words) {
            g->group_of[n_groups] = n_groups;
            n_groups++;
        } else if (n_groups >= 1 && mv->is_continuation[id]) {
            g->group_len[n_groups - 1]++;
        } else {
            g->group_first[n_groups] = n_members - 1;
            g->group_len[n_groups] = 1;
            g->group_of[n_groups] = n_groups;
            n_groups++;
        }
    }
    pyrandom_shuffle(g->rng, g->group_of, (size_t)n_groups, sizeof *g->group_of);
    TEST_COUNT_WORK(2 * (long long)n + n_groups);  /* copied, grouped, shuffled */

    int want = num_to_predict(g, n), n_masked = 0;
    /* The groups are disjoint, so the reference's covered_indexes test never fires. */
    for (int k = 0; k < n_groups && n_masked < want; k++) {
        int grp = g->group_of[k];
        int first = whole_words ? g->group_first[grp] : grp, len = whole_words ? g->group_len[grp] : 1;
        if (n_masked + len > want) continue;
        for (int m = 0; m < len; m++) {
            int index = g->members[first + m];
            int32_t replacement;
            if (pyrandom_random(g->rng) < 0.8) replacement = mv->mask_id;
            else if (pyrandom_random(g->rng) < 0.5) replacement = g->original[index];
            else replacement = mv->words[pyrandom_randint(g->rng, 0, mv->n_words - 1)];
            in->input_ids[index] = replacement;
            /* Keep predictions sorted by position (the reference sorts at the end). */
            int at = n_masked++;
            while (at > 0 && in->masked_positions[at - 1] > index) {
                in->masked_positions[at] = in->masked_positions[at - 1];
                in->masked_ids[at] = in->masked_ids[at - 1];
                at--;
            }
            TEST_COUNT_WORK(n_masked - at);
            in->masked_positions[at] = index;
            in->masked_ids[at] = g->original[index];
        }
    }
    in->n_masked = n_masked;
}

/* truncate_seq_pair(): trims the longer of [a_lo,a_hi) and [b_lo,b_hi) (B on ties) from
 * the front or the back at random until both fit in max_num_tokens. */
static void truncate_pair(Generator *g, size_t *a_lo, size_t *a_hi, size_t *b_lo, size_t *b_hi,
                          size_t max_num_tokens) {
    size_t alo = *a_lo, ahi = *a_hi, blo = *b_lo, bhi = *b_hi; /* in registers */
    /* one random draw per token trimmed */
    TEST_COUNT_WORK((ahi - alo) + (bhi - blo) > max_num_tokens ? (long long)((ahi - alo) + (bhi - blo) - max_num_tokens) + 1
                                                               : 1);
    while ((ahi - alo) + (bhi - blo) > max_num_tokens) {
        /* Arithmetic rather than branches: the coin flip is unpredictable by design. */
        size_t trim_a = ahi - alo > bhi - blo, front = pyrandom_random(g->rng) < 0.5;
        size_t trim_b = 1 - trim_a, back = 1 - front;
        alo += trim_a & front;
        ahi -= trim_a & back;
        blo += trim_b & front;
        bhi -= trim_b & back;
    }
    *a_lo = alo, *a_hi = ahi, *b_lo = blo, *b_hi = bhi;
}

/* Assembles [CLS] A [SEP] B [SEP], masks it and hands it to the sink. */
static int emit_instance(Generator *g, size_t a_lo, size_t a_hi, size_t b_lo, size_t b_hi,
                         bool is_random_next, BertError *err) {
    const int32_t *tok = g->docs->tokens;
    Instance *in = &g->inst;
    int n = 0;
    in->input_ids[n++] = g->mv->cls_id;
    memcpy(in->input_ids + n, tok + a_lo, (a_hi - a_lo) * sizeof *tok);
    n += (int)(a_hi - a_lo);
    in->input_ids[n++] = g->mv->sep_id;
    in->n_segment_a = n;
    memcpy(in->input_ids + n, tok + b_lo, (b_hi - b_lo) * sizeof *tok);
    n += (int)(b_hi - b_lo);
    in->input_ids[n++] = g->mv->sep_id;
    in->n_tokens = n;
    in->is_random_next = is_random_next;
    in->a_lo = a_lo, in->b_lo = b_lo;
    TEST_COUNT_WORK(n);
    mask_tokens(g);
    return g->sink(g->sink_ctx, in, err);
}

/* create_instances_from_document() for all_documents[document_index]. */
static int instances_from_document(Generator *g, size_t document_index, BertError *err) {
    const DocumentSet *d = g->docs;
    const size_t *sent = d->sentence_start;
    size_t doc = g->order[document_index];
    size_t first = d->document_start[doc], n_sent = document_sentence_count(d, doc);
    size_t max_num_tokens = (size_t)g->opt->max_seq_length - 3;
    size_t target_seq_length = max_num_tokens;
    if (pyrandom_random(g->rng) < g->opt->short_seq_prob)
        target_seq_length = (size_t)pyrandom_randint(g->rng, 2, (int64_t)max_num_tokens);

    size_t chunk_first = 0, current_length = 0; /* current_chunk = sentences [chunk_first, i] */
    for (size_t i = 0; i < n_sent; i++) {
        TEST_COUNT_WORK(1);
        current_length += sent[first + i + 1] - sent[first + i];
        if (i != n_sent - 1 && current_length < target_seq_length) continue;
        size_t chunk_len = i - chunk_first + 1;
        size_t a_end = 1;
        if (chunk_len >= 2) a_end = (size_t)pyrandom_randint(g->rng, 1, (int64_t)chunk_len - 1);
        size_t a_lo = sent[first + chunk_first], a_hi = sent[first + chunk_first + a_end];
        size_t b_lo, b_hi;
        bool is_random_next = chunk_len == 1 || pyrandom_random(g->rng) < 0.5;
        if (is_random_next) {
            /* Negative when A alone reaches the target: B then gets one sentence. */
            long target_b_length = (long)target_seq_length - (long)(a_hi - a_lo);
            size_t random_index = 0;
            for (int attempt = 0; attempt < 10; attempt++) {
                random_index = (size_t)pyrandom_randint(g->rng, 0, (int64_t)d->n_documents - 1);
                if (random_index != document_index) break;
            }
            size_t rdoc = g->order[random_index];
            size_t r_first = d->document_start[rdoc];
            size_t random_start = (size_t)pyrandom_randint(
                g->rng, 0, (int64_t)document_sentence_count(d, rdoc) - 1);
            /* tokens_b takes whole sentences from random_start until it reaches
             * target_b_length (always at least one sentence). */
            b_lo = sent[r_first + random_start];
            b_hi = b_lo;
            for (size_t j = random_start; j < document_sentence_count(d, rdoc); j++) {
                TEST_COUNT_WORK(1);
                b_hi = sent[r_first + j + 1];
                if ((long)(b_hi - b_lo) >= target_b_length) break;
            }
            i -= chunk_len - a_end; /* put the unused sentences back */
        } else {
            b_lo = a_hi;
            b_hi = sent[first + i + 1];
        }
        truncate_pair(g, &a_lo, &a_hi, &b_lo, &b_hi, max_num_tokens);
        if (emit_instance(g, a_lo, a_hi, b_lo, b_hi, is_random_next, err) != 0) return -1;
        chunk_first = i + 1;
        current_length = 0;
    }
    return 0;
}

static void generator_init(Generator *g, const DocumentSet *docs, const PretrainingOptions *opt,
                           const MaskVocab *mv, PyRandom *rng) {
    memset(g, 0, sizeof *g);
    g->docs = docs, g->opt = opt, g->mv = mv, g->rng = rng;
    size_t seq = (size_t)opt->max_seq_length, pred = (size_t)opt->max_predictions_per_seq;
    g->inst.input_ids = xmalloc(seq * sizeof(int32_t));
    g->inst.masked_positions = xmalloc(pred * sizeof(int32_t));
    g->inst.masked_ids = xmalloc(pred * sizeof(int32_t));
    g->original = xmalloc(seq * sizeof(int32_t));
    g->group_of = xmalloc(seq * sizeof(int32_t));
    g->group_first = xmalloc(seq * sizeof(int32_t));
    g->group_len = xmalloc(seq * sizeof(int32_t));
    g->members = xmalloc(seq * sizeof(int32_t));
    g->order = xmalloc((docs->n_documents ? docs->n_documents : 1) * sizeof *g->order);
    for (size_t k = 0; k < docs->n_documents; k++) g->order[k] = (uint32_t)k;
}

static void generator_free(Generator *g) {
    free(g->inst.input_ids);
    free(g->inst.masked_positions);
    free(g->inst.masked_ids);
    free(g->original);
    free(g->group_of);
    free(g->group_first);
    free(g->group_len);
    free(g->members);
    free(g->order);
}

int generate_instances(const DocumentSet *docs, const PretrainingOptions *opt,
                       const MaskVocab *mv, PyRandom *rng, InstanceSink sink, void *ctx,
                       BertError *err) {
    if (pretraining_check_options(opt, err) != 0) return -1;
    if (docs->n_documents > UINT32_MAX) return bert_fail(err, "too many documents in one shard");
    Generator g;
    generator_init(&g, docs, opt, mv, rng);
    g.sink = sink, g.sink_ctx = ctx;
    pyrandom_shuffle(rng, g.order, docs->n_documents, sizeof *g.order);
    TEST_COUNT_WORK((long long)docs->n_documents);
    int rc = 0;
    for (int dupe = 0; dupe < opt->dupe_factor && rc == 0; dupe++)
        for (size_t k = 0; k < docs->n_documents && rc == 0; k++)
            rc = instances_from_document(&g, k, err);
    generator_free(&g);
    return rc;
}
