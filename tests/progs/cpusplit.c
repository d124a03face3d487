/* cpusplit: programs whose CPU is known, for the sampler's tests (test_sample.c).
 *
 *   split        thread A burns 2.0 s of its CPU in burn_a, thread B 1.0 s in burn_b, the main
 *                thread 0.5 s in f1 then 0.5 s in f2, a fourth thread sleeps 2 s; prints each
 *                function's measured CPU in ms ("burn_a 2000" ...)
 *   phases       the main thread burns 0.5 s in f1, sleeps 0.4 s, burns 0.5 s in f2 (a time
 *                window over each phase sees one function)
 *   sigprof N    its own ITIMER_PROF at 100 Hz and a SIGPROF handler counting ticks while it burns
 *                N ms; prints the ticks (a program's own profiling timer must keep working)
 *   sigtrap      installs its own SIGTRAP handler, reads it back, raises SIGTRAP, executes a
 *                breakpoint (int3), burns 0.2 s; prints "trapped 2 readback 1"
 *   churn S      three threads, each until it has used S seconds of CPU (on a busy machine the run
 *                takes longer, the work is the same): one dlopens and dlcloses a library, one
 *                throws and catches C++ exceptions through a library, one allocates — the places
 *                a sampler's stack walk can deadlock (the loader's lock, the unwinder's); prints
 *                how many rounds each did */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile double sink;

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Each burner spins on its own loop until the thread has used `s` seconds of CPU. */
#define BURNER(name, k)                                           \
    __attribute__((noinline)) static double name(double s) {      \
        double t0 = cpu_now(), x = 0;                             \
        while (cpu_now() - t0 < s)                                \
            for (int i = 0; i < 20000; i++) x += (double)i * (k); \
        sink = x;                                                 \
        return cpu_now() - t0;                                    \
    }
BURNER(burn_a, 0.5)
BURNER(burn_b, 0.25)
BURNER(f1, 0.125)
BURNER(f2, 0.0625)

static double took[4];
static void *thread_a(void *arg) {
    (void)arg;
    took[0] = burn_a(2.0);
    return NULL;
}
static void *thread_b(void *arg) {
    (void)arg;
    took[1] = burn_b(1.0);
    return NULL;
}
static void *sleeper(void *arg) {
    (void)arg;
    sleep(2);
    return NULL;
}

static volatile sig_atomic_t ticks, trapped;
static void on_prof(int sig) {
    (void)sig;
    ticks++;
}
static void on_trap(int sig) {
    (void)sig;
    trapped++;
}

/* The churn threads: each loops until it has used `churn_s` seconds of CPU, counting its rounds. */
static double churn_s;
static long rounds[3];
static void *dl_loop(void *arg) {
    const char *lib = arg;
    double t0 = cpu_now();
    for (; cpu_now() - t0 < churn_s; rounds[0]++) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (h) dlclose(h);
    }
    return NULL;
}
static void *throw_loop(void *arg) {
    void (*thrower)(int) = (void (*)(int))arg;
    double t0 = cpu_now();
    for (int i = 0; cpu_now() - t0 < churn_s; i++, rounds[1]++) thrower(i);
    return NULL;
}
static void *malloc_loop(void *arg) {
    (void)arg;
    double t0 = cpu_now();
    for (; cpu_now() - t0 < churn_s; rounds[2]++)
        for (int i = 0; i < 64; i++) {
            void *p = malloc(64 + (rand() & 1023));
            sink += (double)(uintptr_t)p;
            free(p);
        }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "split";
    if (!strcmp(mode, "split")) {
        pthread_t a, b, s;
        pthread_create(&a, NULL, thread_a, NULL);
        pthread_create(&b, NULL, thread_b, NULL);
        pthread_create(&s, NULL, sleeper, NULL);
        took[2] = f1(0.5);
        took[3] = f2(0.5);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        pthread_join(s, NULL);
        printf("burn_a %.0f\nburn_b %.0f\nf1 %.0f\nf2 %.0f\n", took[0] * 1e3, took[1] * 1e3, took[2] * 1e3,
               took[3] * 1e3);
        return 0;
    }
    if (!strcmp(mode, "phases")) {
        took[2] = f1(0.5);
        usleep(400000);
        took[3] = f2(0.5);
        printf("f1 %.0f\nf2 %.0f\n", took[2] * 1e3, took[3] * 1e3);
        return 0;
    }
    if (!strcmp(mode, "sigprof") && argc > 2) {
        signal(SIGPROF, on_prof);
        struct itimerval it = {{0, 10000}, {0, 10000}};
        setitimer(ITIMER_PROF, &it, NULL);
        burn_a(atof(argv[2]) / 1e3);
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_PROF, &off, NULL);
        printf("ticks %d\n", (int)ticks);
        return 0;
    }
    if (!strcmp(mode, "sigtrap")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_trap;
        sigaction(SIGTRAP, &sa, NULL);
        struct sigaction q;
        sigaction(SIGTRAP, NULL, &q);
        raise(SIGTRAP);
        __asm__ volatile("int3");
        burn_a(0.2);
        printf("trapped %d readback %d\n", (int)trapped, q.sa_handler == on_trap);
        return 0;
    }
    if (!strcmp(mode, "churn") && argc > 4) {
        /* argv: churn SECONDS LIBRARY-TO-DLOPEN LIBRARY-THAT-THROWS */
        void *h = dlopen(argv[4], RTLD_NOW);
        void (*thrower)(int) = h ? (void (*)(int))dlsym(h, "lp_throw_and_catch") : NULL;
        if (!thrower) {
            fprintf(stderr, "cpusplit: %s: %s\n", argv[4], dlerror());
            return 2;
        }
        churn_s = atof(argv[2]);
        pthread_t t[3];
        pthread_create(&t[0], NULL, dl_loop, argv[3]);
        pthread_create(&t[1], NULL, throw_loop, (void *)thrower);
        pthread_create(&t[2], NULL, malloc_loop, NULL);
        for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
        printf("churned %ld %ld %ld\n", rounds[0], rounds[1], rounds[2]);
        return 0;
    }
    fprintf(stderr, "usage: cpusplit split | phases | sigprof MS | sigtrap | churn S LIB THROWER\n");
    return 2;
}
