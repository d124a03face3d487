/* crash: allocates (50 malloc/free pairs of 5555 bytes, then one 6666-byte block kept), then
 * ends as asked, to test that every recorded event reaches the trace whatever the ending.
 *
 * usage: crash segv|abort|term|sentsegv|handler|dispositions
 *   segv      writes through a null pointer          (dies by SIGSEGV)
 *   abort     abort()                                 (SIGABRT)
 *   term      raise(SIGTERM)                          (SIGTERM)
 *   sentsegv  raise(SIGSEGV): sent, not a fault       (SIGSEGV)
 *   handler   installs its own SIGSEGV handler, which prints "caught" and _exit(7)s, then faults
 *   dispositions  prints whether SIGSEGV, SIGINT, SIGTERM are at SIG_DFL as sigaction/signal
 *                 report them (libprof's handlers must not show) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

static void on_segv(int sig) {
    (void)sig;
    static const char msg[] = "caught\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    _exit(7);
}

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "segv";
    if (!strcmp(m, "dispositions")) {
        struct sigaction sa;
        sigaction(SIGSEGV, NULL, &sa);
        int segv = sa.sa_handler == SIG_DFL;
        sighandler_t old = signal(SIGINT, SIG_DFL);
        int intr = old == SIG_DFL;
        sigaction(SIGTERM, NULL, &sa);
        printf("segv %d int %d term %d\n", segv, intr, sa.sa_handler == SIG_DFL);
        return 0;
    }
    for (int i = 0; i < 50; i++) free(malloc(5555));
    sink = malloc(6666);
    if (!strcmp(m, "handler")) signal(SIGSEGV, on_segv);
    if (!strcmp(m, "segv") || !strcmp(m, "handler")) *(volatile int *)sink = 0, *(volatile int *)0 = 1;
    if (!strcmp(m, "abort")) abort();
    if (!strcmp(m, "term")) raise(SIGTERM);
    if (!strcmp(m, "sentsegv")) raise(SIGSEGV);
    return 0;
}
