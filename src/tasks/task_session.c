/* The fine-tuning commands' shared opening and closing (tasks/task_session.h). */
#include "tasks/task_session.h"

#include <string.h>

int task_session_open(TaskSession *s, const FinetuneArgs *ft, const FinetuneInputs *in, int max_input_chars_per_word,
                      BertError *err) {
    memset(s, 0, sizeof *s);
    s->start = now_seconds();
    int rc = make_dirs_created(ft->output_dir, s->created, sizeof s->created, err);
    if (rc == 0) rc = logger_open(&s->log, ft->json_summary, false, true, err);
    if (rc == 0 && in->note[0]) logger_print(s->log, "%s", in->note);
    if (rc == 0) rc = vocab_load(&s->vocab, in->vocab_file, err);
    if (rc == 0) {
        TokenizerOptions to = tokenizer_default_options();
        to.do_lower_case = in->do_lower_case, to.max_input_chars_per_word = max_input_chars_per_word;
        s->tok = tokenizer_new(s->vocab, &to);
        if (!s->tok) rc = bert_fail(err, "%s: the vocabulary has no [UNK]", in->vocab_file);
    }
    return rc;
}

void task_session_close(TaskSession *s, const char *output_dir, int rc) {
    tokenizer_free(s->tok), vocab_free(s->vocab);
    logger_close(s->log);
    if (rc != 0) remove_created_dirs(output_dir, s->created);   /* a failed run leaves no empty folder */
    memset(s, 0, sizeof *s);
}
