/* Corpus preparation before create_pretraining_data, following NVIDIA's BERT recipe:
 *
 *   format_wikipedia / format_books   raw corpus -> "one document per line" text file
 *   shard_corpus                      one-document-per-line files -> sentence shards
 *
 * Formatted files (NVIDIA's wikicorpus_en_one_article_per_line.txt and
 * bookscorpus_one_book_per_line.txt), byte for byte in NVIDIA's layout: UTF-8, one
 * document per line, each of its source lines (paragraphs) followed by one space, and a
 * blank line after each document ("text \n\n"); documents without text are left out.
 * Readers skip blank lines and trailing whitespace, as NVIDIA's TextSharding.py does.
 *
 * Shard files (NVIDIA's TextSharding.py layout): <output_dir>/<prefix>_training_<i>.txt for
 * i in [0, n_training_shards) and <prefix>_test_<i>.txt for i in [0, n_test_shards); one
 * sentence per line and a blank line after every document -- exactly the input format of
 * Google's create_pretraining_data.py.
 *
 * Every output file is written under a temporary name and renamed when complete, so a
 * failure never leaves a half-written file behind under the final name. */
#ifndef BERT_CORPUS_H
#define BERT_CORPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

/* ---- Formatting ---------------------------------------------------------------------- */

typedef struct {
    long long documents_written;   /* non-empty documents (lines) in the output */
    long long documents_skipped;   /* redirects, other namespaces, empty after cleaning */
    /* Wikipedia pages not kept, by reason (part of documents_skipped): redirects, pages of
     * another namespace, and pages whose <ns> is missing or not a number */
    long long pages_redirect, pages_other_namespace, pages_bad_namespace;
    long long pages_too_large;     /* skipped: text over FormatOptions.max_page_mb */
    long long input_bytes;         /* bytes read (decompressed XML for .bz2 dumps) */
    long long output_bytes;        /* bytes written */
    long long invalid_utf8_bytes;  /* bad input bytes, each replaced by U+FFFD */
    int parallel_ranges;           /* multi-stream .bz2 read by threads in this many ranges (0: serially) */
    double seconds;                /* wall time of the call */
} FormatStats;

typedef struct {
    /* Books only: drop the Project Gutenberg licence header and footer (text before the
     * "*** START OF ..." line and from the "*** END OF ..." line on) when present.
     * NVIDIA's BookscorpusTextFormatting keeps everything; default true. */
    bool strip_gutenberg;
    /* Print progress (documents, MB/s) to stderr about once a second. */
    bool progress;
    /* Dumps in parts: parts formatted at once (<= 0: all cores). */
    int n_threads;
    /* Wikipedia: a page whose text passes this many MiB is skipped and counted
     * (pages_too_large), so memory stays bounded (cleaning holds a few copies of a page).
     * Wikipedia itself caps articles at 2 MiB; default 32. */
    double max_page_mb;
} FormatOptions;

FormatOptions format_default_options(void);

/* dump: a MediaWiki pages-articles XML dump, plain (.xml) or bzip2-compressed (.bz2,
 * multi-stream supported), read as a stream in bounded memory. Keeps pages in namespace
 * 0 that are not redirects; each becomes one line of cleaned article text (the title is
 * not repeated, as in NVIDIA's WikicorpusTextFormatting). A truncated or malformed dump
 * is an error and no output file is published. opt and stats may be NULL. */
int format_wikipedia(const char *dump, const char *out, const FormatOptions *opt,
                     FormatStats *stats, BertError *err);
/* The same for a dump published in parts (pages-articles1.xml-p1p41242.bz2, ...): the
 * parts are formatted in parallel (opt->n_threads), their articles joined in the order
 * given into one output. */
int format_wikipedia_dumps(const char *const *dumps, int n_dumps, const char *out,
                           const FormatOptions *opt, FormatStats *stats, BertError *err);

/* dir: a folder of plain-text books (*.txt, read in sorted name order; a single file is
 * also accepted). Each book becomes one line: UTF-8 BOM removed, CRLF handled, each
 * non-blank line stripped and followed by one space (NVIDIA's layout, above). opt and
 * stats may be NULL. */
int format_books(const char *dir, const char *out, const FormatOptions *opt,
                 FormatStats *stats, BertError *err);
/* path: a plain-text file whose blank lines separate documents (create_pretraining_data's
 * convention). Within a document, every line is stripped and followed by one space, so a
 * hard-wrapped paragraph becomes one run of text and the sentence splitter sees its
 * sentences whole; a file without blank lines is one document. The Project Gutenberg header
 * and footer are left out as for books (opt->strip_gutenberg), the BOM and CRLF handled.
 * opt and stats may be NULL. */
int format_text(const char *path, const char *out, const FormatOptions *opt,
                FormatStats *stats, BertError *err);
/* The books format_books reads from dir, in its order: the *.txt files directly in it
 * (regular files only: anything else is an error), sorted; a plain file is a list of itself.
 * Free each name and the array. */
int format_list_books(const char *dir, char ***books, int *n, BertError *err);

/* (The wikitext cleaning itself is in data/wikitext.h.) */

/* ---- Sentences ----------------------------------------------------------------------- */

/* A sentence is text[start, end) of the document it was split from. */
typedef struct {
    size_t start, end;
} SentenceSpan;

typedef struct {
    SentenceSpan *spans;
    int n, cap;
} SentenceList;

void sentence_list_init(SentenceList *l);
void sentence_list_free(SentenceList *l);

/* NLTK's Punkt sentence tokenizer with its English model -- what nltk.sent_tokenize and
 * so NVIDIA's TextSharding.py use -- reimplemented to give the same sentence spans
 * (abbreviations, initials, numbers, collocations, orthographic evidence, closing quotes
 * and brackets realigned onto the sentence they end). The model is compiled in. A
 * splitter is immutable once made: split_sentences may run on it from many threads. */
typedef struct SentenceSplitter SentenceSplitter;
SentenceSplitter *sentence_splitter_new(void);
void sentence_splitter_free(SentenceSplitter *s);

/* Splits text[0..len) (UTF-8; an invalid byte counts as one U+FFFD) into sentences,
 * replacing out's previous contents; returns out->n. Spans are exactly the ones
 * nltk.sent_tokenize returns (leading whitespace of the text stays in the first one,
 * as in NLTK; trailing whitespace is never included). Empty or blank text gives none. */
int split_sentences(const SentenceSplitter *s, const char *text, size_t len, SentenceList *out);

/* ---- Sharding ------------------------------------------------------------------------ */

typedef struct {
    const char *const *input_files;  /* one-document-per-line files, read in this order */
    int n_input_files;
    const char *output_dir;          /* created if missing */
    const char *output_name_prefix;  /* file name prefix inside output_dir, e.g. "books_wiki_en_corpus" */
    int n_training_shards;           /* >= 1 */
    int n_test_shards;               /* >= 0; 0: every sentence goes to training */
    double fraction_test_set;        /* NVIDIA's default 0.1 */
    /* < 0: NVIDIA's deterministic, seedless distribution (the default, for parity).
     * >= 0: documents are shuffled with this seed before distribution, so equally long
     * documents land in different shards for different seeds; deterministic per seed. */
    long long random_seed;
    int n_threads;                   /* <= 0: all cores (OpenMP default) */
    bool progress;                   /* progress and per-shard summary on stderr */
} ShardOptions;

ShardOptions shard_default_options(void); /* prefix "corpus", 256 training, 256 test, 0.1, seed -1 */

typedef struct {
    long long documents;           /* documents read (non-blank input lines) */
    long long sentences;           /* sentences written over all shards */
    long long input_bytes;
    long long output_bytes;
    long long min_shard_sentences, max_shard_sentences;  /* over training shards */
    long long invalid_utf8_bytes;  /* bad input bytes, each replaced by U+FFFD */
    double seconds;
} ShardStats;

/* Two passes over the inputs in bounded memory (about 30 bytes per document, never the text):
 * pass 1 counts each document's sentences, the distribution is NVIDIA's, pass 2 writes each
 * shard (in parallel over shards) with its documents in NVIDIA's order. Fails with a clear
 * message if there are fewer documents than shards. */
int shard_corpus(const ShardOptions *opt, ShardStats *stats, BertError *err);

/* The path of shard i of the training (is_test = false) or test set, as written above. */
void shard_path(const ShardOptions *opt, bool is_test, int i, char *out, size_t outlen);

/* ---- Text helpers shared by the formatters and the sharder --------------------------- */

/* Copies in[0..len) into *buf (grown as needed, NUL-terminated) with every invalid UTF-8
 * byte replaced by U+FFFD; adds the number replaced to *n_invalid (may be NULL). Returns
 * the new length. */
size_t utf8_sanitize(const char *in, size_t len, char **buf, size_t *cap, long long *n_invalid);
/* Splits one document and writes its sentences, one per line, then a blank line (the
 * shard layout). Returns the bytes written. */
long long write_document_sentences(FILE *out, const SentenceSplitter *sp, SentenceList *sl,
                                   const char *doc, size_t len);

#endif
