/* Stopping a long run cleanly: SIGTERM (a cluster's time limit, `kill`), SIGINT (Ctrl-C) and
 * SIGHUP (a closed terminal or ssh session) only set a flag; the training loop checks it after
 * each optimizer step, writes a checkpoint and exits 0, as NVIDIA's run_pretraining.py does
 * for SIGTERM. A second SIGINT while the first is being handled ends the process at once (the
 * default action), so a user who insists is never stuck. The flag is set by core's signal
 * thread (core/common.h, signals_start), never by a handler: a handler running on a thread
 * inside a oneDNN JIT kernel corrupted the heap (issue 35, D10). Being asynchronous, the flag
 * is set shortly after the signal is sent, not at once. */
#ifndef BERT_TRAIN_STOP_SIGNAL_H
#define BERT_TRAIN_STOP_SIGNAL_H

void stop_signal_install(void);
void stop_signal_restore(void);      /* stop signals end the process again */
int stop_signal_received(void);      /* the signal number, or 0 */
void stop_signal_clear(void);        /* for tests */

#endif
