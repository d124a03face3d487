/* wait.c: the wait family — time a thread spends asleep or blocked polling: nanosleep,
 * clock_nanosleep, usleep, sleep, poll, ppoll, select, pselect, epoll_wait, epoll_pwait.
 * This off-CPU time is what a "framework tax" analysis must not count as work.
 *
 * Timeouts are read before the call (select may rewrite its timeval with the time left). A thread
 * about to wait first writes what it has recorded, now and then (lpr_tbuf_idle): a view of the
 * running process (libprof-report --live) then sees an idle thread's last events. A signal the
 * program handles that comes while it writes interrupts the wait (EINTR), as it would have had
 * it come a moment later, in the wait itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "hook.h"

/* the list as it reads best, one group a line */
// clang-format off
#define REALS(X) \
    X(nanosleep) X(clock_nanosleep) X(usleep) X(sleep) X(poll) X(ppoll) X(select) X(pselect) \
    X(epoll_wait) X(epoll_pwait)
// clang-format on
REALS(LP_REAL_SLOT)

static int64_t ts_ns(const struct timespec *ts) { return ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1; }

/* clock_nanosleep with TIMER_ABSTIME is given a date: the time asked for is what is recorded. */
static int64_t asked_ns(clockid_t clk, int flags, const struct timespec *req) {
    int64_t ns = ts_ns(req);
    if ((flags & TIMER_ABSTIME) && ns >= 0) {
        struct timespec now;
        clock_gettime(clk, &now);
        ns -= ts_ns(&now);
    }
    return ns;
}

/* A wait: hook.h's shape, with the thread's events written on its way in (lpr_tbuf_idle) and,
 * when a signal the program handles came meanwhile, INTR (the result of a wait that signal
 * interrupted: EINTR) in place of the real call. MASK: the signal mask the wait sets, or NULL. */
#define WAIT_HOOK(CALL, RET, FN, PARAMS, ARGS, FAIL, MASK, PRE, INTR, ...) \
    __attribute__((noinline)) static RET FN##_slow PARAMS {                \
        if (!LP_REAL(FN)) LP_NOFN(FAIL);                                   \
        int intr_ = lpr_tbuf_idle(MASK);                                   \
        PRE;                                                               \
        LP_BEGIN(LP_FAM_WAIT);                                             \
        RET r = intr_ ? (INTR) : LP_REAL(FN) ARGS;                         \
        LP_RECORD(LP_FAM_WAIT, LP_CALL_##CALL, __VA_ARGS__);               \
        return r;                                                          \
    }                                                                      \
    LP_EXPORT RET FN PARAMS {                                              \
        LP_PASS_ARGS(LP_FAM_WAIT, FN, ARGS);                               \
        return FN##_slow ARGS;                                             \
    }

static int eintr(void) {
    errno = EINTR;
    return -1;
}
/* An interrupted sleep: nothing of it slept (rem: all of it, where the time asked was relative). */
static int slept_none(const struct timespec *req, struct timespec *rem, int abs) {
    if (rem && req && !abs) *rem = *req;
    return EINTR;
}

WAIT_HOOK(NANOSLEEP, int, nanosleep, (const struct timespec *req, struct timespec *rem), (req, rem), -1, NULL,
          int64_t ns = ts_ns(req), (slept_none(req, rem, 0), eintr()), I(ns), I(r))
WAIT_HOOK(CLOCK_NANOSLEEP, int, clock_nanosleep,
          (clockid_t clk, int flags, const struct timespec *req, struct timespec *rem), (clk, flags, req, rem), ENOSYS,
          NULL, int64_t ns = asked_ns(clk, flags, req), slept_none(req, rem, (flags & TIMER_ABSTIME) != 0), I(ns), I(r))
WAIT_HOOK(USLEEP, int, usleep, (useconds_t us), (us), -1, NULL, (void)0, eintr(), (uint64_t)us * 1000, I(r))
WAIT_HOOK(SLEEP, unsigned, sleep, (unsigned s), (s), s, NULL, (void)0, s, (uint64_t)s * 1000000000u, (uint64_t)r)
WAIT_HOOK(POLL, int, poll, (struct pollfd * fds, nfds_t n, int timeout), (fds, n, timeout), -1, NULL, (void)0, eintr(),
          (uint64_t)n, I(timeout), I(r))
WAIT_HOOK(PPOLL, int, ppoll, (struct pollfd * fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask),
          (fds, n, tmo, mask), -1, mask, int64_t ns = ts_ns(tmo), eintr(), (uint64_t)n, I(ns), I(r))
WAIT_HOOK(SELECT, int, select, (int n, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv), (n, rd, wr, ex, tv), -1,
          NULL, int64_t ns = tv ? (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000 : -1, eintr(), I(n),
          I(ns), I(r))
WAIT_HOOK(PSELECT, int, pselect,
          (int n, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo, const sigset_t *mask),
          (n, rd, wr, ex, tmo, mask), -1, mask, int64_t ns = ts_ns(tmo), eintr(), I(n), I(ns), I(r))
WAIT_HOOK(EPOLL_WAIT, int, epoll_wait, (int ep, struct epoll_event *ev, int max, int timeout), (ep, ev, max, timeout),
          -1, NULL, (void)0, eintr(), I(ep), I(max), I(timeout), I(r))
WAIT_HOOK(EPOLL_WAIT, int, epoll_pwait, (int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *mask),
          (ep, ev, max, timeout, mask), -1, mask, (void)0, eintr(), I(ep), I(max), I(timeout), I(r))

/* the hottest pass-throughs: unbound from the program when this family never records */
LP_UNHOOKABLE(WAIT, poll);
LP_UNHOOKABLE(WAIT, nanosleep);
