/* real.h: the C library's functions libprof calls for itself, past its own hooks (real.c): the
 * allocator, dlsym, the loader; and the lookup of the next definition of a hooked name. */
#ifndef LPR_REAL_H
#define LPR_REAL_H

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>

#include "state.h"

struct dl_phdr_info; /* <link.h> */
struct lpr_real_fns {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void *(*dlopen)(const char *, int);
    int (*dlclose)(void *);
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    int (*pthread_join)(pthread_t, void **);
    int (*sigaction)(int, const struct sigaction *, struct sigaction *);
    void (*(*signal)(int, void (*)(int)))(int);
    int (*dl_iterate_phdr)(int (*)(struct dl_phdr_info *, size_t, void *), void *);
};
/* dl_iterate_phdr with the thread marked inside the loader (real.c); libprof calls it by this name. */
LP_HIDDEN int lpr_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data);
LP_HIDDEN extern struct lpr_real_fns lpr_real;
/* The C library's (the next) `fn`, never libprof's hook of that name: LPR_REAL(malloc)(n). */
#define LPR_REAL(fn) (lpr_real.fn)
LP_HIDDEN extern __thread int lpr_real_resolving; /* inside the allocation functions' dlsym */
LP_HIDDEN void lpr_real_resolve_alloc(void);      /* the malloc family, once */
LP_HIDDEN void lpr_real_resolve(void);            /* everything, once */

/* The C library's dlsym: libprof exports dlsym (hooks/dl.c), so its own lookups call the C
 * library's by this name (RTLD_NEXT stays relative to libprof): never `dlsym` in libprof's code. */
LP_HIDDEN void *lpr_dlsym(void *handle, const char *name);
typedef void *(*lpr_dlsym_fn)(void *, const char *);
LP_HIDDEN lpr_dlsym_fn lpr_dlsym_real(void);

/* A handle on an object already loaded (the C library's dlopen, RTLD_NOLOAD), released
 * with lpr_dl_release: libprof's own lookups, not the program's dlopen. */
LP_HIDDEN void *lpr_dl_handle(const char *path);
LP_HIDDEN void lpr_dl_release(void *h);

/* The thread is inside the dynamic loader (dlopen, dlclose, dl_iterate_phdr): a CPU sample then
 * takes no native stack (the loader's lock is not to be taken again from a signal handler). The
 * threads inside are counted too, and a fork waits until no other thread is (real.c): a child
 * would inherit the loader's lock held by a thread it does not have, and its first stack capture
 * (libunwind asks dl_iterate_phdr) or dlopen would wait for ever. */
LP_HIDDEN extern int lpr_loader_users, lpr_loader_gate;
LP_HIDDEN void lpr_loader_wait(void);
static inline void lpr_loader_enter(void) {
    if (LP_UNLIKELY(__atomic_load_n(&lpr_loader_gate, __ATOMIC_ACQUIRE)) && !lpr_tls.in_loader) lpr_loader_wait();
    __atomic_fetch_add(&lpr_loader_users, 1, __ATOMIC_SEQ_CST);
    if (LP_UNLIKELY(__atomic_load_n(&lpr_loader_gate, __ATOMIC_SEQ_CST)) && !lpr_tls.in_loader) {
        __atomic_fetch_sub(&lpr_loader_users, 1, __ATOMIC_SEQ_CST); /* a fork began meanwhile: after it */
        lpr_loader_wait();
        __atomic_fetch_add(&lpr_loader_users, 1, __ATOMIC_SEQ_CST);
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    (*(volatile uint8_t *)&lpr_tls.in_loader)++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline void lpr_loader_leave(void) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    (*(volatile uint8_t *)&lpr_tls.in_loader)--;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&lpr_loader_users, 1, __ATOMIC_RELEASE);
}
/* Around the real fork (hooks/process.c): no other thread inside the loader (waited for, bounded),
 * none let in until it returns, in the parent and in the child. */
LP_HIDDEN void lpr_loader_fork_begin(void);
LP_HIDDEN void lpr_loader_fork_end(int child);

/* Find the next definition of `name` after libprof: dlsym(RTLD_NEXT), then every loaded object
 * in load order (a library dlopen'ed RTLD_LOCAL, such as the BLAS numpy brings, is not in the
 * global scope). NULL when nothing loaded defines it. */
LP_HIDDEN void *lpr_resolve(const char *name);
/* lpr_resolve once into *slot; an absent function stays NULL and is looked up again later
 * (BLAS may be loaded after the first call that needed it). */
static inline void *lpr_next(void **slot, const char *name) {
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (LP_UNLIKELY(!f)) {
        f = lpr_resolve(name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

#endif
