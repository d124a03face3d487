/* sigswitch: a signal sent to a thread on its way into a wait, and its action changed right after
 * (CPython's test_signal.test_stress_modifying_handlers does this at full speed: one thread
 * raises SIGUSR1 while another switches its handler between a function and SIG_IGN).
 *
 * A worker allocates for 150 ms (its records stay in its buffer: run with a large
 * LIBPROF_BUFFER_KB), then sleeps 3 s. Under libprof the thread writes what it recorded on its
 * way into the sleep, with signals held. The main thread watches the worker's blocked signals in
 * /proc; when it sees SIGUSR1 held there (libprof's write), it sends SIGUSR1 to the worker and at
 * once sets SIGUSR1 to SIG_IGN. Without libprof the signal would have found the worker asleep
 * and its handler would have run; it must with libprof too. The moment counts only where
 * SIGUSR1 is still held once sent (the write may end in between: then the signal simply finds the
 * thread running). Where no such moment is seen (no libprof, or a write too quick to see), the
 * signal is sent once the worker sleeps, and the main thread waits for the handler before it
 * changes the action.
 *
 * usage: sigswitch    prints "window W handled H" (W: the signal was sent in the moment) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile sig_atomic_t handled;
static volatile int tid, about_to_sleep;

static void on_usr1(int sig) {
    (void)sig;
    handled = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* allocations from stacks of a few depths */
NOINLINE static void *nest(int depth) {
    void *p = depth ? nest(depth - 1) : malloc(48);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *worker(void *arg) {
    (void)arg;
    tid = (int)syscall(SYS_gettid);
    double t0 = now_s();
    for (long i = 0;; i++) {
        free(nest((int)(i % 8)));
        if (i % 4096 == 0 && now_s() - t0 > 0.15) break;
    }
    about_to_sleep = 1;
    struct timespec d = {3, 0};
    nanosleep(&d, NULL);
    return NULL;
}

/* Is SIGUSR1 blocked in thread `t` (its SigBlk line in /proc)? -1 when it cannot be read. */
static int usr1_blocked(int t) {
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", t);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *b = strstr(buf, "SigBlk:");
    if (!b) return -1;
    unsigned long long mask = strtoull(b + 7, NULL, 16);
    return (mask >> (SIGUSR1 - 1)) & 1;
}

/* Is thread `t` asleep (State: S)? */
static int asleep(int t) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", t);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    while (!tid) sched_yield();
    int window = 0;
    double slept_at = 0;
    for (;;) {
        if (usr1_blocked(tid) == 1) {
            window = 2; /* (confirmed below, once the signal is sent) */
            break;
        }
        if (about_to_sleep && asleep(tid)) {
            if (!slept_at) slept_at = now_s();
            if (now_s() - slept_at > 0.1) break; /* it sleeps: no moment of held signals seen */
        }
    }
    pthread_kill(th, SIGUSR1);
    if (window) window = usr1_blocked(tid) == 1; /* still held: the signal is pending in the moment */
    if (!window)                                 /* (the bare case: the handler runs as the signal wakes the worker) */
        for (double t0 = now_s(); !handled && now_s() - t0 < 2;) sched_yield();
    sa.sa_handler = SIG_IGN;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_join(th, NULL);
    printf("window %d handled %d\n", window, (int)handled);
    return 0;
}
