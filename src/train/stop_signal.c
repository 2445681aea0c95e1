#include "train/stop_signal.h"

#include <signal.h>

#include "core/common.h"

static volatile sig_atomic_t received;

/* On core's signal thread (no signal context: see core/common.h's signals_start). */
static int on_stop_signal(int sig) {
    if (sig == SIGINT && received == SIGINT) return 0;   /* a second Ctrl-C ends the process */
    received = sig;
    return 1;
}

void stop_signal_install(void) {
    signals_start();   /* already done by main; a library caller (the tests) gets it here */
    signals_set_stop_handler(on_stop_signal);
}

void stop_signal_restore(void) { signals_set_stop_handler(NULL); }

int stop_signal_received(void) { return (int)received; }
void stop_signal_clear(void) { received = 0; }
