/* wait.c: the wait family — time a thread spends asleep or blocked polling: nanosleep,
 * clock_nanosleep, usleep, sleep, poll, ppoll, select, pselect, epoll_wait, epoll_pwait.
 * This off-CPU time is what a "framework tax" analysis must not count as work.
 *
 * Timeouts are read before the call (select may rewrite its timeval with the time left). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "../core/lp.h"

#define REALS(X) X(nanosleep) X(clock_nanosleep) X(usleep) X(sleep) X(poll) X(ppoll) X(select) X(pselect) \
    X(epoll_wait) X(epoll_pwait)
#define X(fn) static void *real_##fn;
REALS(X)
#undef X
#define REAL(fn) ((__typeof__(&fn))lpr_next(&real_##fn, #fn))
#define I(x) ((uint64_t)(int64_t)(x))

static int64_t ts_ns(const struct timespec *ts) {
    return ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1;
}

#define BEGIN(fn, fail)                                                                      \
    if (!REAL(fn)) { errno = ENOSYS; return fail; }                                          \
    struct lpr_tls *t = lpr_call_begin(LP_FAM_WAIT);                                           \
    uint64_t t0 = t ? lpr_ticks() : 0
#define RECORD(call, ...) do {                                                               \
        if (t) { uint64_t a_[] = {__VA_ARGS__};                                              \
                 lpr_call_record_args(t, LP_FAM_WAIT, call, t0, lpr_ticks(), sizeof a_ / 8, a_); }     \
    } while (0)

__attribute__((noinline)) static int nanosleep_slow(const struct timespec *req, struct timespec *rem) {
    int64_t ns = ts_ns(req);
    BEGIN(nanosleep, -1);
    int r = REAL(nanosleep)(req, rem);
    RECORD(LP_CALL_NANOSLEEP, I(ns), I(r));
    return r;
}

LP_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem) {
    LP_PASS(LP_FAM_WAIT, nanosleep, req, rem);
    return nanosleep_slow(req, rem);
}

__attribute__((noinline)) static int clock_nanosleep_slow(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem) {
    int64_t ns = ts_ns(req);
    if (!REAL(clock_nanosleep)) return ENOSYS;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_WAIT);
    uint64_t t0 = t ? lpr_ticks() : 0;
    if (t && (flags & TIMER_ABSTIME) && ns >= 0) { /* record the time asked for, not the date */
        struct timespec now;
        clock_gettime(clk, &now);
        ns -= ts_ns(&now);
    }
    int r = REAL(clock_nanosleep)(clk, flags, req, rem);
    RECORD(LP_CALL_CLOCK_NANOSLEEP, I(ns), I(r));
    return r;
}

LP_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem) {
    LP_PASS(LP_FAM_WAIT, clock_nanosleep, clk, flags, req, rem);
    return clock_nanosleep_slow(clk, flags, req, rem);
}

__attribute__((noinline)) static int usleep_slow(useconds_t us) {
    BEGIN(usleep, -1);
    int r = REAL(usleep)(us);
    RECORD(LP_CALL_USLEEP, (uint64_t)us * 1000, I(r));
    return r;
}

LP_EXPORT int usleep(useconds_t us) {
    LP_PASS(LP_FAM_WAIT, usleep, us);
    return usleep_slow(us);
}

__attribute__((noinline)) static unsigned sleep_slow(unsigned s) {
    BEGIN(sleep, s);
    unsigned r = REAL(sleep)(s);
    RECORD(LP_CALL_SLEEP, (uint64_t)s * 1000000000u, (uint64_t)r);
    return r;
}

LP_EXPORT unsigned sleep(unsigned s) {
    LP_PASS(LP_FAM_WAIT, sleep, s);
    return sleep_slow(s);
}

__attribute__((noinline)) static int poll_slow(struct pollfd *fds, nfds_t n, int timeout) {
    BEGIN(poll, -1);
    int r = REAL(poll)(fds, n, timeout);
    RECORD(LP_CALL_POLL, (uint64_t)n, I(timeout), I(r));
    return r;
}

LP_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout) {
    LP_PASS(LP_FAM_WAIT, poll, fds, n, timeout);
    return poll_slow(fds, n, timeout);
}

__attribute__((noinline)) static int ppoll_slow(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask) {
    int64_t ns = ts_ns(tmo);
    BEGIN(ppoll, -1);
    int r = REAL(ppoll)(fds, n, tmo, mask);
    RECORD(LP_CALL_PPOLL, (uint64_t)n, I(ns), I(r));
    return r;
}

LP_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask) {
    LP_PASS(LP_FAM_WAIT, ppoll, fds, n, tmo, mask);
    return ppoll_slow(fds, n, tmo, mask);
}

__attribute__((noinline)) static int select_slow(int n, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv) {
    int64_t ns = tv ? (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000 : -1;
    BEGIN(select, -1);
    int r = REAL(select)(n, rd, wr, ex, tv);
    RECORD(LP_CALL_SELECT, I(n), I(ns), I(r));
    return r;
}

LP_EXPORT int select(int n, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv) {
    LP_PASS(LP_FAM_WAIT, select, n, rd, wr, ex, tv);
    return select_slow(n, rd, wr, ex, tv);
}

__attribute__((noinline)) static int pselect_slow(int n, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo, const sigset_t *mask) {
    int64_t ns = ts_ns(tmo);
    BEGIN(pselect, -1);
    int r = REAL(pselect)(n, rd, wr, ex, tmo, mask);
    RECORD(LP_CALL_PSELECT, I(n), I(ns), I(r));
    return r;
}

LP_EXPORT int pselect(int n, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo, const sigset_t *mask) {
    LP_PASS(LP_FAM_WAIT, pselect, n, rd, wr, ex, tmo, mask);
    return pselect_slow(n, rd, wr, ex, tmo, mask);
}

__attribute__((noinline)) static int epoll_wait_slow(int ep, struct epoll_event *ev, int max, int timeout) {
    BEGIN(epoll_wait, -1);
    int r = REAL(epoll_wait)(ep, ev, max, timeout);
    RECORD(LP_CALL_EPOLL_WAIT, I(ep), I(max), I(timeout), I(r));
    return r;
}

LP_EXPORT int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout) {
    LP_PASS(LP_FAM_WAIT, epoll_wait, ep, ev, max, timeout);
    return epoll_wait_slow(ep, ev, max, timeout);
}

__attribute__((noinline)) static int epoll_pwait_slow(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *mask) {
    BEGIN(epoll_pwait, -1);
    int r = REAL(epoll_pwait)(ep, ev, max, timeout, mask);
    RECORD(LP_CALL_EPOLL_WAIT, I(ep), I(max), I(timeout), I(r));
    return r;
}

LP_EXPORT int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *mask) {
    LP_PASS(LP_FAM_WAIT, epoll_pwait, ep, ev, max, timeout, mask);
    return epoll_pwait_slow(ep, ev, max, timeout, mask);
}
