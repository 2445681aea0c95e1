/* Output of the formatters: NVIDIA's one-document-per-line layout, byte for byte as its
 * BookscorpusTextFormatting / WikicorpusTextFormatting write it -- every non-empty source
 * line of a document followed by one space, and "\n\n" after the document -- except that
 * documents with no text are left out rather than written as blank lines. Written under a
 * temporary name, published by doc_writer_commit. */
#ifndef BERT_DOC_WRITER_H
#define BERT_DOC_WRITER_H

#include "data/corpus.h"

typedef struct {
    AtomicFile af;      /* the output, when atomic */
    FILE *fp;           /* where text goes: af.fp, or a scratch file */
    bool atomic;
    bool in_document;   /* some text of the current document was written */
    FormatStats *stats;
    bool progress;
    double t0, last_report;
    const char *what;   /* "books", "wikipedia" (progress lines) */
} DocWriter;

int doc_writer_open(DocWriter *w, const char *path, FormatStats *stats, bool progress,
                    const char *what, BertError *err);
/* A scratch output (a part to be joined later): written in place, no fsync; abort deletes it. */
int doc_writer_open_scratch(DocWriter *w, const char *path, FormatStats *stats, BertError *err);
/* Appends one line of the current document (the caller strips it); empty lines are ignored. */
void doc_writer_line(DocWriter *w, const char *text, size_t len);
/* Ends the current document; returns true if it had text (and so was written). */
bool doc_writer_end_document(DocWriter *w);
int doc_writer_commit(DocWriter *w, BertError *err);
void doc_writer_abort(DocWriter *w);

/* Python's str.strip() of text[0..len): the start offset and length of what remains. */
size_t utf8_strip(const char *text, size_t len, size_t *start);

#endif
