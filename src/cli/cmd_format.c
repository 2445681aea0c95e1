/* `bert format`: raw corpus -> NVIDIA's one-document-per-line text.
 *   bert format wikipedia DUMP(.xml|.xml.bz2) -o wikicorpus_en_one_article_per_line.txt
 *   bert format books DIR -o bookscorpus_one_book_per_line.txt
 *   bert format text FILE -o FILE_one_document_per_line.txt   (blank lines between documents) */
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "data/corpus.h"

int cmd_format(int argc, char **argv) {
    const char *out = NULL;
    FormatOptions opt = format_default_options();
    bool quiet = false;
    Flag flags[] = {
        {"o", FLAG_STRING, &out, "output file (required); written atomically"},
        {"strip_gutenberg", FLAG_BOOL, &opt.strip_gutenberg,
         "books, text: drop Project Gutenberg header/footer around *** START/END OF *** (default true)"},
        {"max_page_mb", FLAG_DOUBLE, &opt.max_page_mb,
         "wikipedia: skip (and count) pages whose text passes this many MiB, bounding memory (default 32)"},
        {"quiet", FLAG_BOOL, &quiet, "no progress or summary"},
    };
    FlagSpec spec = {"format", "format {wikipedia DUMP.xml[.bz2]... | books DIR | text FILE} -o OUT [flags]",
                     flags, (int)(sizeof flags / sizeof flags[0]), 2, 65};
    char *pos[65];
    int npos = 0;
    int rc = flags_parse(&spec, argc, argv, pos, &npos);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (flags_require(&spec, "o") != 0) return 2;
    if (!(opt.max_page_mb > 0 && opt.max_page_mb <= 1048576)) {
        fprintf(stderr, "bert format: --max_page_mb must be in (0, 1048576]\n");
        return 2;
    }
    bool wiki = !strcmp(pos[0], "wikipedia"), books = !strcmp(pos[0], "books"), text = !strcmp(pos[0], "text");
    if (!wiki && !books && !text) {
        fprintf(stderr, "bert format: unknown corpus kind '%s' (wikipedia, books or text)\n", pos[0]);
        return 2;
    }
    for (int i = 1; i < npos; i++)
        if (is_same_file(pos[i], out)) {  /* the rename at the end would replace the input */
            fprintf(stderr, "bert format: output '%s' is input '%s'\n", out, pos[i]);
            return 2;
        }
    opt.progress = !quiet;
    FormatStats st;
    BertError err;
    if (!wiki && npos > 2) {
        fprintf(stderr, "bert format %s: one %s at a time\n", pos[0], books ? "folder (or file)" : "file");
        return 2;
    }
    rc = wiki    ? format_wikipedia_dumps((const char *const *)pos + 1, npos - 1, out, &opt, &st, &err)
         : text ? format_text(pos[1], out, &opt, &st, &err)
                 : format_books(pos[1], out, &opt, &st, &err);
    if (rc != 0) {
        fprintf(stderr, "bert format: %s\n", err.msg);
        return 1;
    }
    if (!quiet)
        fprintf(stderr,
                "bert format %s: %lld documents written to %s (%lld skipped); %.1f MB in, %.1f MB out, "
                "%.2f s, %.1f MB/s%s\n",
                pos[0], st.documents_written, out, st.documents_skipped, st.input_bytes / 1e6,
                st.output_bytes / 1e6, st.seconds, st.input_bytes / 1e6 / (st.seconds > 0 ? st.seconds : 1e-9),
                st.invalid_utf8_bytes ? "; invalid UTF-8 bytes replaced by U+FFFD" : "");
    if (!quiet && (st.pages_redirect || st.pages_other_namespace || st.pages_bad_namespace || st.pages_too_large))
        fprintf(stderr, "  pages not kept: %lld redirects, %lld of other namespaces, %lld with a missing or "
                        "malformed <ns>, %lld over --max_page_mb\n", st.pages_redirect, st.pages_other_namespace,
                st.pages_bad_namespace, st.pages_too_large);
    if (!quiet && st.parallel_ranges)
        fprintf(stderr, "  (multi-stream bzip2: decompressed and formatted as %d ranges in parallel)\n",
                st.parallel_ranges);
    return 0;
}
