/* altstack: a program whose signal handler runs on an alternate signal stack of the size CPython's
 * faulthandler gives it (SIGSTKSZ + AT_MINSIGSTKSZ, ~16 KiB here), with an unmapped page below it,
 * and calls what libprof hooks from there — malloc and free from several call sites, write to a
 * pipe (CPython's own handler writes the signal's byte to its wakeup descriptor) — for a while of
 * CPU, so that CPU samples land inside those hooks too.
 *   altstack [SIGNALS] [SPINS]: raise SIGUSR1 SIGNALS times (default 20), each handler running
 *   SPINS rounds (default 20000). Output: "ok", then the most of the alternate stack any handler
 *   used and the kernel's frame of a signal ("used N of M, signal frame F"). A handler that goes
 *   past its stack faults on the page below it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif
#define NOINLINE __attribute__((noinline, noclone))

static int fds[2];
static long spins = 20000;
static volatile unsigned long sink;

NOINLINE static void *site_a(size_t n) { return malloc(n); }
NOINLINE static void *site_b(size_t n) { return malloc(n + 100); }
NOINLINE static void *site_c(size_t n) { return calloc(1, n + 200); }

static void handler(int sig) {
    char c = (char)sig;
    if (write(fds[1], &c, 1) != 1) _exit(3);
    for (long i = 0; i < spins; i++) {
        void *p = (i % 3 == 0)   ? site_a((size_t)i % 512)
                  : (i % 3 == 1) ? site_b((size_t)i % 512)
                                 : site_c((size_t)i % 512);
        sink += (unsigned long)p;
        free(p);
    }
}

int main(int argc, char **argv) {
    int signals = argc > 1 ? atoi(argv[1]) : 20;
    if (argc > 2) spins = atol(argv[2]);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    long dyn = sysconf(_SC_SIGSTKSZ);
    size_t size = (size_t)(dyn > 0 ? dyn : SIGSTKSZ) + getauxval(AT_MINSIGSTKSZ);
    size_t whole = (size + page - 1) / page * page;
    char *m = mmap(NULL, whole + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0 || pipe(fds) != 0) return 1;
    char *lo = m + page + (whole - size); /* the stack's lowest byte: the guard page right below it */
    memset(lo, 0xA5, size);
    stack_t ss = {.ss_sp = lo, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) return 1;
    for (int i = 0; i < signals; i++) {
        char c;
        raise(SIGUSR1);
        if (read(fds[0], &c, 1) != 1) return 2;
    }
    size_t used = 0;
    while (used < size && (unsigned char)lo[used] == 0xA5) used++;
    printf("ok\nused %zu of %zu, signal frame %lu\n", size - used, size, getauxval(AT_MINSIGSTKSZ));
    return 0;
}
