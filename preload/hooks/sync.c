/* sync.c: the sync family — lock and condition waits: pthread_mutex_lock, pthread_rwlock_rdlock
 * and _wrlock, pthread_cond_wait / _timedwait / _clockwait, sem_wait, pthread_barrier_wait.
 *
 * Only waits are recorded. A lock is first tried; when that succeeds (the uncontended case) the
 * call costs one extra branch and nothing is written. When the lock is busy the blocking call is
 * timed and recorded with the lock's address, so the trace shows who waited, where and how long.
 * Condition variables and barriers always wait, so they are always recorded. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>

#include "../core/lp.h"

#define REALS(X) \
    X(pthread_mutex_lock) X(pthread_mutex_trylock) X(pthread_rwlock_rdlock) X(pthread_rwlock_tryrdlock) \
    X(pthread_rwlock_wrlock) X(pthread_rwlock_trywrlock) X(pthread_cond_wait) X(pthread_cond_timedwait) \
    X(pthread_cond_clockwait) X(sem_wait) X(sem_trywait) X(pthread_barrier_wait)
#define X(fn) static void *real_##fn;
REALS(X)
#undef X
#define REAL(fn) ((__typeof__(&fn))lpr_next(&real_##fn, #fn))

#define U(x) ((uint64_t)(uintptr_t)(x))
#define I(x) ((uint64_t)(int64_t)(x))

static void rec(struct lpr_tls *t, unsigned call, uint64_t t0, const void *obj, int r) {
    uint64_t a[2] = {U(obj), I(r)};
    lpr_call_record_args(t, LP_FAM_SYNC, call, t0, lpr_ticks(), 2, a);
}

/* Try first; block (timed) only when the try says busy. `busy` is the try's "would block". */
#define TRY_THEN_WAIT(call, lockfn, tryfn, obj, busy)                                        \
    do {                                                                                     \
        struct lpr_tls *t = lpr_call_begin(LP_FAM_SYNC);                                       \
        if (!t) return REAL(lockfn)(obj);                                                    \
        int r = REAL(tryfn)(obj);                                                            \
        if (r != (busy)) return r;                                                           \
        uint64_t t0 = lpr_ticks();                                                            \
        r = REAL(lockfn)(obj);                                                               \
        rec(t, call, t0, obj, r);                                                            \
        return r;                                                                            \
    } while (0)

__attribute__((noinline)) static int pthread_mutex_lock_slow(pthread_mutex_t *m) {
    TRY_THEN_WAIT(LP_CALL_MUTEX_LOCK, pthread_mutex_lock, pthread_mutex_trylock, m, EBUSY);
}

LP_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
    LP_PASS(LP_FAM_SYNC, pthread_mutex_lock, m);
    return pthread_mutex_lock_slow(m);
}

__attribute__((noinline)) static int pthread_rwlock_rdlock_slow(pthread_rwlock_t *l) {
    TRY_THEN_WAIT(LP_CALL_RWLOCK_RD, pthread_rwlock_rdlock, pthread_rwlock_tryrdlock, l, EBUSY);
}

LP_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l) {
    LP_PASS(LP_FAM_SYNC, pthread_rwlock_rdlock, l);
    return pthread_rwlock_rdlock_slow(l);
}

__attribute__((noinline)) static int pthread_rwlock_wrlock_slow(pthread_rwlock_t *l) {
    TRY_THEN_WAIT(LP_CALL_RWLOCK_WR, pthread_rwlock_wrlock, pthread_rwlock_trywrlock, l, EBUSY);
}

LP_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l) {
    LP_PASS(LP_FAM_SYNC, pthread_rwlock_wrlock, l);
    return pthread_rwlock_wrlock_slow(l);
}

/* sem_trywait reports "would block" as -1 with errno EAGAIN; that errno must not leak. */
__attribute__((noinline)) static int sem_wait_slow(sem_t *s) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_SYNC);
    if (!t) return REAL(sem_wait)(s);
    int saved = errno;
    int r = REAL(sem_trywait)(s);
    if (r == 0 || errno != EAGAIN) return r;
    errno = saved;
    uint64_t t0 = lpr_ticks();
    r = REAL(sem_wait)(s);
    rec(t, LP_CALL_SEM_WAIT, t0, s, r);
    return r;
}

LP_EXPORT int sem_wait(sem_t *s) {
    LP_PASS(LP_FAM_SYNC, sem_wait, s);
    return sem_wait_slow(s);
}

__attribute__((noinline)) static int pthread_cond_wait_slow(pthread_cond_t *c, pthread_mutex_t *m) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_SYNC);
    uint64_t t0 = t ? lpr_ticks() : 0;
    int r = REAL(pthread_cond_wait)(c, m);
    if (t) rec(t, LP_CALL_COND_WAIT, t0, c, r);
    return r;
}

LP_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    LP_PASS(LP_FAM_SYNC, pthread_cond_wait, c, m);
    return pthread_cond_wait_slow(c, m);
}

__attribute__((noinline)) static int pthread_cond_timedwait_slow(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *ts) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_SYNC);
    uint64_t t0 = t ? lpr_ticks() : 0;
    int r = REAL(pthread_cond_timedwait)(c, m, ts);
    if (t) rec(t, LP_CALL_COND_TIMEDWAIT, t0, c, r);
    return r;
}

LP_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *ts) {
    LP_PASS(LP_FAM_SYNC, pthread_cond_timedwait, c, m, ts);
    return pthread_cond_timedwait_slow(c, m, ts);
}

LP_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *ts) {
    if (!REAL(pthread_cond_clockwait)) return ENOSYS;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_SYNC);
    uint64_t t0 = t ? lpr_ticks() : 0;
    int r = REAL(pthread_cond_clockwait)(c, m, clk, ts);
    if (t) rec(t, LP_CALL_COND_TIMEDWAIT, t0, c, r);
    return r;
}

__attribute__((noinline)) static int pthread_barrier_wait_slow(pthread_barrier_t *b) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_SYNC);
    uint64_t t0 = t ? lpr_ticks() : 0;
    int r = REAL(pthread_barrier_wait)(b);
    if (t) rec(t, LP_CALL_BARRIER_WAIT, t0, b, r);
    return r;
}

LP_EXPORT int pthread_barrier_wait(pthread_barrier_t *b) {
    LP_PASS(LP_FAM_SYNC, pthread_barrier_wait, b);
    return pthread_barrier_wait_slow(b);
}
