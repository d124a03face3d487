/* real.c: the C library's functions that libprof calls on its own behalf and also intercepts —
 * the next malloc family (glibc's, or an allocator preloaded after libprof), dlopen, dlclose,
 * pthread_create, pthread_join, sigaction, signal — found once with dlsym(RTLD_NEXT) and called only through
 * this table (lpr_real), never through libprof's own exported names: what libprof does for
 * itself never reaches its hooks, so it never appears in a user's trace. Everything else the
 * core asks of the kernel is a raw system call (sys.h); lib/ reaches both through os.c.
 *
 * dlsym may itself call calloc before calloc is known: while the allocation functions are being
 * resolved (lpr_real_resolving), the allocation hooks serve such requests from their bootstrap
 * pool (hooks/alloc.c). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include "lp.h"
#include "sys.h"

struct lpr_real_fns lpr_real;
LP_TLS int lpr_real_resolving;

#define RESOLVE(fn) lpr_real.fn = (__typeof__(lpr_real.fn))lpr_dlsym(RTLD_NEXT, #fn)

void lpr_real_resolve_alloc(void) {
    if (lpr_real.free) return;
    lpr_real_resolving = 1;
    RESOLVE(calloc);
    RESOLVE(malloc);
    RESOLVE(realloc);
    RESOLVE(posix_memalign);
    RESOLVE(aligned_alloc);
    RESOLVE(memalign);
    RESOLVE(valloc);
    RESOLVE(pvalloc);
    RESOLVE(free); /* last: it is the "resolved" flag */
    lpr_real_resolving = 0;
    if (!lpr_real.malloc || !lpr_real.free || !lpr_real.calloc || !lpr_real.realloc) {
        static const char msg[] = "libprof: cannot find the real malloc; aborting\n";
        lpr_sys_write(2, msg, sizeof msg - 1);
        abort();
    }
}

void lpr_real_resolve(void) {
    lpr_real_resolve_alloc();
    if (lpr_real.dlopen) return;
    RESOLVE(dl_iterate_phdr);
    RESOLVE(dlclose);
    RESOLVE(pthread_create);
    RESOLVE(pthread_join);
    RESOLVE(sigaction);
    RESOLVE(signal);
    RESOLVE(dlopen); /* last: it is the "resolved" flag */
}

/* The C library's dlsym (GLIBC_2.34, before that GLIBC_2.2.5), found with dlvsym: libprof's own
 * export is the hook. */
lpr_dlsym_fn lpr_dlsym_real(void) {
    static lpr_dlsym_fn f;
    lpr_dlsym_fn g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
    if (!g) {
        g = (lpr_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!g) g = (lpr_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        __atomic_store_n(&f, g, __ATOMIC_RELEASE);
    }
    return g;
}

void *lpr_dlsym(void *handle, const char *name) {
    lpr_dlsym_fn f = lpr_dlsym_real();
    return f ? f(handle, name) : NULL;
}

/* ---- the loader and fork (lp.h) ----------------------------------------------------------------- */

int lpr_loader_users, lpr_loader_gate;

/* A thread about to enter the loader while a fork is under way: after it. */
void lpr_loader_wait(void) {
    while (__atomic_load_n(&lpr_loader_gate, __ATOMIC_ACQUIRE)) LP_SYS(SYS_sched_yield, 0, 0, 0);
}

void lpr_loader_fork_begin(void) {
    __atomic_store_n(&lpr_loader_gate, 1, __ATOMIC_SEQ_CST);
    int own = lpr_tls.in_loader; /* a fork from inside the loader (a constructor's) waits for no one */
    /* bounded: a thread that stays inside the loader (a callback that waits for the forking thread)
     * must not hang the program; 2 s, then the fork goes on as it would without libprof */
    for (int i = 0; i < 2000 && __atomic_load_n(&lpr_loader_users, __ATOMIC_SEQ_CST) > own; i++) {
        struct timespec ts = {0, 1000000};
        LP_SYS(SYS_nanosleep, &ts, NULL, 0);
    }
}

void lpr_loader_fork_end(int child) {
    if (child) __atomic_store_n(&lpr_loader_users, lpr_tls.in_loader, __ATOMIC_RELAXED); /* the others are gone */
    __atomic_store_n(&lpr_loader_gate, 0, __ATOMIC_RELEASE);
}

/* dl_iterate_phdr for libprof and for the program (hooks/dl.c exports it): the thread is marked
 * inside the loader meanwhile, so that a CPU sample taken then (sample.c) does not walk the stack
 * with libunwind, which would take the loader's lock again from a signal handler. */
int lpr_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data) {
    lpr_real_resolve();
    lpr_loader_enter();
    int r = LPR_REAL(dl_iterate_phdr)(cb, data);
    lpr_loader_leave();
    return r;
}

/* A handle on an object already loaded and initialised, through the C library's dlopen
 * (RTLD_NOLOAD: nothing is loaded), not the program's hook: libprof's own lookups. */
void *lpr_dl_handle(const char *path) {
    lpr_real_resolve();
    return LPR_REAL(dlopen) ? LPR_REAL(dlopen)(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
}
void lpr_dl_release(void *h) {
    if (h && LPR_REAL(dlclose)) LPR_REAL(dlclose)(h);
}
