#include "train/stop_signal.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received;

static void on_stop_signal(int sig) {
    received = sig;
    /* the next SIGINT is not caught: a second Ctrl-C ends the process */
    if (sig == SIGINT) signal(SIGINT, SIG_DFL);
}

void stop_signal_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  /* file reads in progress carry on */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

void stop_signal_restore(void) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
}

int stop_signal_received(void) { return (int)received; }
void stop_signal_clear(void) { received = 0; }
