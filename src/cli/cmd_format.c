/* `bert format`: raw corpus -> NVIDIA's one-document-per-line text.
 *   bert format wikipedia DUMP(.xml|.xml.bz2) -o wikicorpus_en_one_article_per_line.txt
 *   bert format books DIR -o bookscorpus_one_book_per_line.txt */
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
         "books: drop Project Gutenberg header/footer around *** START/END OF *** (default true)"},
        {"quiet", FLAG_BOOL, &quiet, "no progress or summary"},
    };
    FlagSpec spec = {"format", "bert format wikipedia DUMP.xml[.bz2] -o OUT | bert format books DIR -o OUT",
                     flags, (int)(sizeof flags / sizeof flags[0]), 2, 2};
    char *pos[2];
    int npos = 0;
    int rc = flags_parse(&spec, argc, argv, pos, &npos);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!out) {
        fprintf(stderr, "bert format: -o OUT is required\n");
        return 2;
    }
    bool wiki = !strcmp(pos[0], "wikipedia"), books = !strcmp(pos[0], "books");
    if (!wiki && !books) {
        fprintf(stderr, "bert format: unknown corpus kind '%s' (wikipedia or books)\n", pos[0]);
        return 2;
    }
    opt.progress = !quiet;
    FormatStats st;
    BertError err;
    rc = wiki ? format_wikipedia(pos[1], out, &opt, &st, &err) : format_books(pos[1], out, &opt, &st, &err);
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
    return 0;
}
