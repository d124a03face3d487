/* sync.c: the sync family — lock and condition waits: pthread_mutex_lock, pthread_rwlock_rdlock
 * and _wrlock, pthread_cond_wait / _timedwait / _clockwait, sem_wait, pthread_barrier_wait.
 *
 * Only waits are recorded. A mutex that is free or already the caller's goes straight to the C
 * library; another lock is first tried; when that succeeds (the uncontended case) nothing is
 * written. When the lock is busy the blocking call is
 * timed and recorded with the lock's address, so the trace shows who waited, where and how long.
 * Condition variables and barriers always wait, so they are always recorded; CPython's wait for
 * its GIL, a timed condition wait, is told apart and named "GIL wait". */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>

#include "hook.h"

/* the list as it reads best, one group a line */
// clang-format off
#define REALS(X) \
    X(pthread_mutex_lock) X(pthread_mutex_trylock) X(pthread_rwlock_rdlock) X(pthread_rwlock_tryrdlock) \
    X(pthread_rwlock_wrlock) X(pthread_rwlock_trywrlock) X(pthread_cond_wait) X(pthread_cond_timedwait) \
    X(pthread_cond_clockwait) X(sem_wait) X(sem_trywait) X(pthread_barrier_wait)
// clang-format on
REALS(LP_REAL_SLOT)

static void rec(struct lpr_tls *t, unsigned call, uint64_t t0, const void *obj, int r) {
    uint64_t a[2] = {U(obj), I(r)};
    lpr_call_record_args(t, LP_FAM_SYNC, call, t0, lpr_ticks(), 2, a);
}

/* A lock: try first, in the exported half (an uncontended lock, nearly every one, costs one
 * extra test and nothing is written); block, timed, in the slow half only when the try says
 * busy. `busy` is the try's "would block". Recording is tested first: when it is off, the
 * program's own calls no longer come here at all (core/unhook.c). */
#define LOCK_HOOK(CALL, lockfn, tryfn, T, busy, peek)                                                            \
    __attribute__((noinline)) static int lockfn##_slow(T *obj, int tried) {                                      \
        (void)LP_REAL(lockfn); /* resolved (and kept) here: the exported half only reads it */                   \
        struct lpr_tls *t = lpr_call_begin(LP_FAM_SYNC);                                                         \
        if (!t) return LP_REAL(lockfn)(obj);                                                                     \
        if (!tried) {                                                                                            \
            __typeof__(&tryfn) try_ = LP_REAL(tryfn);                                                            \
            if (!try_) return LP_REAL(lockfn)(obj);                                                              \
            int r = try_(obj);                                                                                   \
            if (r != (busy)) return r;                                                                           \
        }                                                                                                        \
        uint64_t t0 = lpr_ticks();                                                                               \
        int r = LP_REAL(lockfn)(obj);                                                                            \
        rec(t, LP_CALL_##CALL, t0, obj, r);                                                                      \
        return r;                                                                                                \
    }                                                                                                            \
    /* recording, and the lock may make the caller wait: try it first */                                         \
    __attribute__((noinline)) static int lockfn##_busy(T *obj) {                                                 \
        __typeof__(&tryfn) try_ = (__typeof__(&tryfn))__atomic_load_n(&real_##tryfn, __ATOMIC_RELAXED);          \
        if (LP_LIKELY(try_ != NULL)) {                                                                           \
            int r = try_(obj);                                                                                   \
            return r != (busy) ? r : lockfn##_slow(obj, 1);                                                      \
        }                                                                                                        \
        return lockfn##_slow(obj, 0);                                                                            \
    }                                                                                                            \
    /* every path a tail call: the common one (a free lock) is a dozen instructions */                           \
    LP_EXPORT int lockfn(T *obj) {                                                                               \
        uint32_t g = lpr_gate;                                                                                   \
        int records = (g & ((1u << LP_FAM_SYNC) | LP_GATE_UNINIT)) == (1u << LP_FAM_SYNC);                       \
        if (LP_LIKELY(records) && !peek(obj)) return lockfn##_busy(obj);                                         \
        __typeof__(&lockfn) f_ = (__typeof__(&lockfn))__atomic_load_n(&real_##lockfn, __ATOMIC_RELAXED);         \
        if (LP_LIKELY(f_ != NULL) && (records || !(g & ((1u << LP_FAM_SYNC) | LP_GATE_UNINIT)))) return f_(obj); \
        return lockfn##_slow(obj, 0);                                                                            \
    }
/* A mutex that is free (glibc's lock word 0), or already this thread's (a recursive re-lock), cannot
 * make its caller wait: such a lock goes straight to the C library — two loads instead of a
 * trylock (a try costs ~35 instructions, a third of sqlite3's recording overhead went there).
 * Anything else takes the try-then-time path above. A lock freed and taken by another thread
 * between the look and the call waits unrecorded: a window of a few instructions. */
static inline int mutex_cannot_wait(pthread_mutex_t *m) {
    int word = __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED);
    return word == 0 || __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) == (int)lpr_tls.tid;
}
#define MUTEX_PEEK(obj) mutex_cannot_wait(obj)
#define NO_PEEK(obj) 0
LOCK_HOOK(MUTEX_LOCK, pthread_mutex_lock, pthread_mutex_trylock, pthread_mutex_t, EBUSY, MUTEX_PEEK)
LOCK_HOOK(RWLOCK_RD, pthread_rwlock_rdlock, pthread_rwlock_tryrdlock, pthread_rwlock_t, EBUSY, NO_PEEK)
LOCK_HOOK(RWLOCK_WR, pthread_rwlock_wrlock, pthread_rwlock_trywrlock, pthread_rwlock_t, EBUSY, NO_PEEK)

/* sem_trywait reports "would block" as -1 with errno EAGAIN; that errno must not leak. */
__attribute__((noinline)) static int sem_wait_slow(sem_t *s) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_SYNC);
    if (!t) return LP_REAL(sem_wait)(s);
    int saved = errno;
    int r = LP_REAL(sem_trywait)(s);
    if (r == 0 || errno != EAGAIN) return r;
    errno = saved;
    uint64_t t0 = lpr_ticks();
    r = LP_REAL(sem_wait)(s);
    rec(t, LP_CALL_SEM_WAIT, t0, s, r);
    return r;
}

LP_EXPORT int sem_wait(sem_t *s) {
    LP_PASS_ARGS(LP_FAM_SYNC, sem_wait, (s));
    return sem_wait_slow(s);
}

/* Condition variables and barriers always wait: plain hooks. */
LP_HOOK(SYNC, COND_WAIT, int, pthread_cond_wait, (pthread_cond_t * c, pthread_mutex_t *m), (c, m), ENOSYS, (void)0,
        U(c), I(r))
/* A timed wait is CPython's wait for the GIL when it waits on the GIL's condition variable
 * (python.h): that wait is the python family's, recorded as "GIL wait" with the Python line the
 * thread will run once it has the GIL; any other is the sync family's. So the GIL's waits are
 * recorded without the sync family, whose hooks of every mutex cost a program that locks often
 * (PyTorch) more than the waits are worth when only the GIL is asked about. */
#define GIL_OR_SYNC ((1u << LP_FAM_SYNC) | (1u << LP_FAM_PYTHON))
__attribute__((noinline)) static int pthread_cond_timedwait_slow(pthread_cond_t *c, pthread_mutex_t *m,
                                                                 const struct timespec *ts) {
    if (!LP_REAL(pthread_cond_timedwait)) LP_NOFN(ENOSYS);
    int gil = lpr_py_gil_wait(c, m);
    unsigned fam = gil ? LP_FAM_PYTHON : LP_FAM_SYNC;
    LP_BEGIN(fam);
    int r = LP_REAL(pthread_cond_timedwait)(c, m, ts);
    LP_RECORD(fam, gil ? LP_CALL_GIL_WAIT : LP_CALL_COND_TIMEDWAIT, U(c), I(r));
    return r;
}
LP_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *ts) {
    LP_PASS_MASK(GIL_OR_SYNC, pthread_cond_timedwait, (c, m, ts));
    return pthread_cond_timedwait_slow(c, m, ts);
}
LP_HOOK(SYNC, COND_TIMEDWAIT, int, pthread_cond_clockwait,
        (pthread_cond_t * c, pthread_mutex_t *m, clockid_t clk, const struct timespec *ts), (c, m, clk, ts), ENOSYS,
        (void)0, U(c), I(r))
LP_HOOK(SYNC, BARRIER_WAIT, int, pthread_barrier_wait, (pthread_barrier_t * b), (b), ENOSYS, (void)0, U(b), I(r))

/* the hottest pass-throughs: unbound from the program when this family never records */
LP_UNHOOKABLE(SYNC, pthread_mutex_lock);
LP_UNHOOKABLE(SYNC, pthread_cond_wait);
/* the timed wait stays bound while the python family records: it names the GIL's waits */
static int python_off(void) { return !(lpr_cfg.families & (1u << LP_FAM_PYTHON)); }
LP_UNHOOKABLE_IF(SYNC, pthread_cond_timedwait, python_off);
