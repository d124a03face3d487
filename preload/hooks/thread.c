/* thread.c: the thread family — pthread_create, the created thread's life, pthread_join and
 * pthread_exit.
 *
 * pthread_create starts the new thread in a trampoline that records, when the thread ends
 * (returning, pthread_exit or cancellation: a cleanup handler), one "thread" slice covering its
 * whole life, with the creator's tid and a flow id that links it to the pthread_create slice
 * (an arrow in Perfetto). Thread names come from the kernel (tbuf.c reads them when a thread
 * exits and at the end), so pthread_setname_np, prctl(PR_SET_NAME) and names set before
 * libprof saw the thread all show without hooks of their own. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "hook.h"

#define REALS(X) X(pthread_create) X(pthread_join) X(pthread_exit)
REALS(LP_REAL_SLOT)

static uint64_t next_flow;

struct start {
    void *(*fn)(void *);
    void *arg;
    uint64_t creator, flow;
};

/* The life is kept in the thread's TLS so that a thread still running when the process ends
 * (a pool or OpenMP worker) gets its slice closed by the exit path (tbuf.c). */
static void thread_end(void *p) {
    (void)p;
    struct lpr_tls *me = &lpr_tls;
    uint64_t a[3] = {me->life_creator, me->life_flow, 0};
    uint64_t t0 = me->life_t0;
    me->life_flow = 0;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_THREAD);
    if (t && a[1]) lpr_call_record(t, LP_CALL_THREAD_LIFE, t0, lpr_ticks(), 3, a, NULL, 0);
}

static void *trampoline(void *p) {
    struct start s = *(struct start *)p;
    LPR_REAL(free)(p); /* libprof's own block, not the program's: not through the hook */
    uint8_t g = lpr_guard_hold(&lpr_tls);
    (void)lpr_reserve(&lpr_tls, 1); /* a buffer now, so the exit path can close this life */
    lpr_guard_restore(&lpr_tls, g);
    lpr_tls.life_creator = s.creator;
    lpr_tls.life_t0 = lpr_ticks();
    lpr_tls.life_flow = s.flow;
    void *ret;
    pthread_cleanup_push(thread_end, NULL);
    ret = s.fn(s.arg);
    pthread_cleanup_pop(1);
    return ret;
}

static int create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

LP_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    if (!LP_REAL(pthread_create)) return ENOSYS;
    int r = create(th, attr, fn, arg);
    if (LP_UNLIKELY(lpr_py_new_thread != NULL)) lpr_py_new_thread(); /* a Python thread gets its profile */
    return r;
}

static int create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_THREAD);
    if (!t) return LP_REAL(pthread_create)(th, attr, fn, arg);
    uint64_t t0 = lpr_ticks();
    lpr_real_resolve_alloc();
    struct start *s = LPR_REAL(malloc)(sizeof *s);             /* libprof's own block: not through the hook */
    if (!s) return LP_REAL(pthread_create)(th, attr, fn, arg); /* untraced rather than failed */
    uint64_t flow = __atomic_add_fetch(&next_flow, 1, __ATOMIC_RELAXED) | (uint64_t)lpr_pid << 32;
    *s = (struct start){fn, arg, t->tid ? t->tid : lpr_gettid(), flow};
    int r = LP_REAL(pthread_create)(th, attr, trampoline, s);
    if (r != 0) LPR_REAL(free)(s);
    uint64_t a[2] = {(uint64_t)(int64_t)r, r == 0 ? flow : 0};
    lpr_call_record(t, LP_CALL_PTHREAD_CREATE, t0, lpr_ticks(), 2, a, NULL, 0);
    return r;
}

LP_EXPORT int pthread_join(pthread_t th, void **ret) {
    if (!LP_REAL(pthread_join)) return ENOSYS;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_THREAD);
    uint64_t t0 = t ? lpr_ticks() : 0;
    int r = LP_REAL(pthread_join)(th, ret);
    if (t) {
        uint64_t a = (uint64_t)(int64_t)r;
        lpr_call_record(t, LP_CALL_PTHREAD_JOIN, t0, lpr_ticks(), 1, &a, NULL, 0);
    }
    return r;
}

LP_EXPORT void pthread_exit(void *ret) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_THREAD);
    if (t) lpr_call_record(t, LP_CALL_PTHREAD_EXIT, lpr_ticks(), 0, 0, NULL, NULL, 0);
    void (*f)(void *) = LP_REAL(pthread_exit);
    if (f) f(ret);
    abort(); /* unreachable: the C library always has pthread_exit */
}
