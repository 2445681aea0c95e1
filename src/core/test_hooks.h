/* Test hooks: what the library keeps only for its tests, compiled in only where
 * BERT_TEST_HOOKS is defined. The Makefile compiles every library source that includes this
 * header (directly: the Makefile finds them by that line) a second time with it, into
 * libbert_test.a, which the tests link; libbert.a and ./bert carry none of it.
 *
 * Work: the scaling tests (tests/test.h) count the steps of the text passes' loops (bytes
 * scanned, hash probes, sort comparisons, ...) instead of timing them. TEST_COUNT_WORK(n)
 * adds n steps to the calling thread's count; elsewhere it is nothing (n is not evaluated:
 * it must have no side effects). */
#ifndef BERT_CORE_TEST_HOOKS_H
#define BERT_CORE_TEST_HOOKS_H

#include <stdint.h>

#ifdef BERT_TEST_HOOKS
extern _Thread_local long long test_hook_work;
#define TEST_COUNT_WORK(n) ((void)(test_hook_work += (long long)(n)))
/* Steps counted on the calling thread so far (a pass's work: the difference around it). */
long long test_work(void);
/* Called with each file's path before a deletion of a folder tree removes it (train/
 * checkpoint.c): a test stops the process there to see what a kill leaves. */
extern void (*test_hook_before_delete)(const char *path);
#define TEST_HOOK_BEFORE_DELETE(path) (test_hook_before_delete ? test_hook_before_delete(path) : (void)0)
/* Called with the hidden name a checkpoint being replaced by a rerun of its step was moved to,
 * before its replacement takes its name (train/checkpoint.c): a test kills the process there. */
extern void (*test_hook_moved_aside)(const char *path);
#define TEST_HOOK_MOVED_ASIDE(path) (test_hook_moved_aside ? test_hook_moved_aside(path) : (void)0)
/* Called before each int8 product of the encoder (model/bert_forward.c) with its weight, the
 * fp32 rows its input was quantized from (NULL where they are not kept: the feed-forward's
 * activation) and the quantized rows (q [rows, cols], scale [rows]): a test checks each
 * producer's quantization, the smoothing factors it divided by included. */
extern void (*test_hook_int8_input)(const float *weight, const float *x, const int8_t *q, const float *scale, int rows,
                                    int cols);
#define TEST_HOOK_INT8_INPUT(w, x, q, s, rows, cols) \
    (test_hook_int8_input ? test_hook_int8_input(w, x, q, s, rows, cols) : (void)0)
/* Whether that hook is set (the fp32 rows it reads must then be kept). */
#define TEST_HOOK_INT8_SET() (test_hook_int8_input != NULL)
#else
#define TEST_COUNT_WORK(n) ((void)0)
#define TEST_HOOK_BEFORE_DELETE(path) ((void)0)
#define TEST_HOOK_MOVED_ASIDE(path) ((void)0)
#define TEST_HOOK_INT8_INPUT(w, x, q, s, rows, cols) ((void)0)
#define TEST_HOOK_INT8_SET() 0
#endif

#endif
