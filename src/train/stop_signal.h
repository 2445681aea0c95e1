/* Stopping a long run cleanly: SIGTERM (a cluster's time limit, `kill`) and SIGINT (Ctrl-C)
 * only set a flag; the training loop checks it after each optimizer step, writes a
 * checkpoint and exits 0, as NVIDIA's run_pretraining.py does for SIGTERM. A second SIGINT
 * while the first is being handled ends the process at once (the default action), so a
 * user who insists is never stuck. */
#ifndef BERT_TRAIN_STOP_SIGNAL_H
#define BERT_TRAIN_STOP_SIGNAL_H

void stop_signal_install(void);
void stop_signal_restore(void);      /* the default handlers again */
int stop_signal_received(void);      /* the signal number, or 0 */
void stop_signal_clear(void);        /* for tests */

#endif
