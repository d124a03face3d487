/* altshim: a preload that measures how much of the program's alternate signal stacks its
 * handlers used. Each stack the program gives sigaltstack() is filled with a pattern; when the
 * program takes it back (SS_DISABLE, as CPython's faulthandler does at exit) the deepest byte
 * changed is found and "altshim: USED of SIZE bytes used" written to stderr. Loaded before
 * libprof (LD_PRELOAD="libaltshim.so libprof.so"), so libprof's own handlers are measured too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static unsigned char *lo;
static size_t size;

static void report(void) {
    if (!lo) return;
    size_t untouched = 0;
    while (untouched < size && lo[untouched] == 0xA5) untouched++;
    char b[96];
    int n = snprintf(b, sizeof b, "altshim: %zu of %zu bytes used\n", size - untouched, size);
    if (write(2, b, (size_t)n) < 0) lo = NULL;
    lo = NULL;
}

int sigaltstack(const stack_t *ss, stack_t *old) {
    static int (*real)(const stack_t *, stack_t *);
    if (!real) real = (int (*)(const stack_t *, stack_t *))dlsym(RTLD_NEXT, "sigaltstack");
    if (ss && (ss->ss_flags & SS_DISABLE)) {
        report();
    } else if (ss && ss->ss_sp) {
        lo = ss->ss_sp;
        size = ss->ss_size;
        memset(lo, 0xA5, size);
    }
    return real(ss, old);
}
