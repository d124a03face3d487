/* wait.c: the wait family — time a thread spends asleep or blocked polling: nanosleep,
 * clock_nanosleep, usleep, sleep, poll, ppoll, select, pselect, epoll_wait, epoll_pwait.
 * This off-CPU time is what a "framework tax" analysis must not count as work.
 *
 * Timeouts are read before the call (select may rewrite its timeval with the time left). A thread
 * about to wait first writes what it has recorded, now and then (lpr_tbuf_idle): a view of the
 * running process (libprof-report --live) then sees an idle thread's last events. */
#define _GNU_SOURCE
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

LP_HOOK(WAIT, NANOSLEEP, int, nanosleep, (const struct timespec *req, struct timespec *rem), (req, rem), -1,
        int64_t ns = (lpr_tbuf_idle(), ts_ns(req)), I(ns), I(r))
LP_HOOK(WAIT, CLOCK_NANOSLEEP, int, clock_nanosleep,
        (clockid_t clk, int flags, const struct timespec *req, struct timespec *rem), (clk, flags, req, rem), ENOSYS,
        int64_t ns = (lpr_tbuf_idle(), asked_ns(clk, flags, req)), I(ns), I(r))
LP_HOOK(WAIT, USLEEP, int, usleep, (useconds_t us), (us), -1, lpr_tbuf_idle(), (uint64_t)us * 1000, I(r))
LP_HOOK(WAIT, SLEEP, unsigned, sleep, (unsigned s), (s), s, lpr_tbuf_idle(), (uint64_t)s * 1000000000u, (uint64_t)r)
LP_HOOK(WAIT, POLL, int, poll, (struct pollfd * fds, nfds_t n, int timeout), (fds, n, timeout), -1, lpr_tbuf_idle(),
        (uint64_t)n, I(timeout), I(r))
LP_HOOK(WAIT, PPOLL, int, ppoll, (struct pollfd * fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask),
        (fds, n, tmo, mask), -1, int64_t ns = (lpr_tbuf_idle(), ts_ns(tmo)), (uint64_t)n, I(ns), I(r))
LP_HOOK(WAIT, SELECT, int, select, (int n, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv), (n, rd, wr, ex, tv),
        -1,
        int64_t ns = (lpr_tbuf_idle(), 0) + (tv ? (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000 : -1),
        I(n), I(ns), I(r))
LP_HOOK(WAIT, PSELECT, int, pselect,
        (int n, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo, const sigset_t *mask),
        (n, rd, wr, ex, tmo, mask), -1, int64_t ns = (lpr_tbuf_idle(), ts_ns(tmo)), I(n), I(ns), I(r))
LP_HOOK(WAIT, EPOLL_WAIT, int, epoll_wait, (int ep, struct epoll_event *ev, int max, int timeout),
        (ep, ev, max, timeout), -1, lpr_tbuf_idle(), I(ep), I(max), I(timeout), I(r))
LP_HOOK(WAIT, EPOLL_WAIT, int, epoll_pwait,
        (int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *mask), (ep, ev, max, timeout, mask), -1,
        lpr_tbuf_idle(), I(ep), I(max), I(timeout), I(r))

/* the hottest pass-throughs: unbound from the program when this family never records */
LP_UNHOOKABLE(WAIT, poll);
LP_UNHOOKABLE(WAIT, nanosleep);
