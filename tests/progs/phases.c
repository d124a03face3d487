/* phases: three allocation phases with recording control between them, for testing start/stop,
 * reset, signals and timers. Phase A mallocs and frees 100 blocks of 1001 bytes, phase B mallocs
 * 100 blocks of 1002 bytes and keeps them, phase C mallocs and frees 100 blocks of 1003 bytes and
 * then frees B's blocks. Output goes through write(2), so stdio allocates nothing.
 *
 * usage: phases api|reset|signal|sleep|handler
 *   api      libprof_stop() before B, libprof_start() before C
 *   reset    libprof_reset() before B
 *   signal   raise(SIGUSR2) before B and before C (with LIBPROF_SIGNAL=SIGUSR2)
 *   sleep    1.5 s between A and B, and between B and C (for LIBPROF_DELAY/DURATION)
 *   handler  installs its own SIGUSR2 handler, raises SIGUSR2 twice, prints how often it ran */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libprof.h"

static void *volatile keep[100];
static volatile sig_atomic_t handled;

static void say(const char *s) {
    ssize_t w = write(1, s, strlen(s));
    (void)w;
}

static void churn(size_t size, int free_them) {
    for (int i = 0; i < 100; i++) {
        void *p = malloc(size);
        if (free_them)
            free(p);
        else
            keep[i] = p;
    }
}

static void nap(void) {
    struct timespec ts = {1, 500000000};
    nanosleep(&ts, NULL);
}

static void on_usr2(int sig) {
    (void)sig;
    handled++;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "api";
    if (!strcmp(mode, "handler")) {
        signal(SIGUSR2, on_usr2);
        raise(SIGUSR2);
        raise(SIGUSR2);
        say(handled == 2 ? "handled 2\n" : "handled WRONG\n");
        return 0;
    }
    churn(1001, 1);
    if (!strcmp(mode, "api")) libprof_stop();
    if (!strcmp(mode, "reset")) libprof_reset();
    if (!strcmp(mode, "signal")) raise(SIGUSR2);
    if (!strcmp(mode, "sleep")) nap();
    churn(1002, 0);
    if (!strcmp(mode, "api")) libprof_start();
    if (!strcmp(mode, "signal")) raise(SIGUSR2);
    if (!strcmp(mode, "sleep")) nap();
    churn(1003, 1);
    for (int i = 0; i < 100; i++) free(keep[i]);
    say("ok\n");
    return 0;
}
