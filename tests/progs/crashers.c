/* crashers: the held-out set of ways a program dies, for the crash tests (issue 14). Each mode
 * first makes a known set of allocations on the main thread — 1000 malloc(100 + i % 7), of which
 * 990 are freed — then dies as asked. Whatever the ending, the trace at the asked path must hold
 * every one of those events.
 *
 * usage: crashers MODE
 *   segv     write through a null pointer                        (SIGSEGV, a fault)
 *   abort    abort()                                             (SIGABRT)
 *   bus      touch a mapped page past the end of its file       (SIGBUS)
 *   fpe      integer division by zero                            (SIGFPE)
 *   thread   a second thread faults (after its own 500 malloc/free pairs of 64 bytes)
 *   racing   faults while a second thread allocates in a loop (pairs of 48 bytes)
 *   rehandle its own SIGSEGV handler prints "handled", puts the default back and re-raises,
 *            as Python's faulthandler does                       (SIGSEGV)
 *   quit     raise(SIGQUIT), left at its default                 (SIGQUIT, core)
 *   hup      kill(getpid(), SIGHUP)                              (SIGHUP)
 *   kill     20000 more blocks from grow_here(), then SIGKILL: no handler runs, only what was
 *            already written survives (with small chunks, most of it) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *volatile sink;
static volatile int started;
/* what the compiler cannot see through: a null pointer and a zero it must load at run time */
static int *volatile nowhere;
static volatile int zero, quotient;

static void known_allocations(void) {
    void *keep[10];
    for (int i = 0; i < 1000; i++) {
        void *p = malloc(100 + i % 7);
        if (i % 100 == 0)
            keep[i / 100] = p;
        else
            free(p);
    }
    sink = keep[9];
}

static void fault(void) { *nowhere = 1; }

static void *second(void *arg) {
    (void)arg;
    for (int i = 0; i < 500; i++) free(malloc(64));
    fault();
    return NULL;
}

static void *allocator(void *arg) {
    (void)arg;
    for (;;) {
        void *p = malloc(48);
        started = 1;
        free(p);
    }
    return NULL;
}

__attribute__((noinline)) static void grow_here(int n) {
    for (int i = 0; i < n; i++) {
        void **p = malloc(32);
        *p = (void *)sink;
        sink = p;
    }
}

static void on_segv(int sig) {
    static const char msg[] = "handled\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "segv";
    known_allocations();
    if (!strcmp(m, "segv")) fault();
    if (!strcmp(m, "abort")) abort();
    if (!strcmp(m, "bus")) {
        char path[] = "/tmp/crashers-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0 || ftruncate(fd, 4096) != 0) return 2;
        volatile char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        unlink(path);
        if (p == MAP_FAILED) return 2;
        p[0] = 1;
        p[4096] = 1; /* past the end of the file: SIGBUS */
    }
    if (!strcmp(m, "fpe")) quotient = 1000 / zero;
    if (!strcmp(m, "thread") || !strcmp(m, "racing")) {
        pthread_t t;
        int racing = !strcmp(m, "racing");
        if (pthread_create(&t, NULL, racing ? allocator : second, NULL) != 0) return 2;
        if (racing) {
            while (!started) {}
            usleep(20000);
            fault();
        }
        pthread_join(t, NULL);
    }
    if (!strcmp(m, "rehandle")) {
        signal(SIGSEGV, on_segv);
        fault();
    }
    if (!strcmp(m, "quit")) raise(SIGQUIT);
    if (!strcmp(m, "hup")) kill(getpid(), SIGHUP);
    if (!strcmp(m, "kill")) {
        grow_here(20000);
        kill(getpid(), SIGKILL);
    }
    return 3;
}
