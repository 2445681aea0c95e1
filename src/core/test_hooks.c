/* The test hooks' state (core/test_hooks.h): in libbert_test.a only. */
#include "core/test_hooks.h"

#ifdef BERT_TEST_HOOKS
_Thread_local long long test_hook_work;
long long test_work(void) { return test_hook_work; }
void (*test_hook_before_delete)(const char *path);
void (*test_hook_moved_aside)(const char *path);
void (*test_hook_int8_input)(const float *weight, const float *x, const int8_t *q, const float *scale, int rows, int cols);
#endif
