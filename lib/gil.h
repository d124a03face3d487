/* gil.h: where a Python program's threads spend the time they do not run — waiting for the GIL
 * (the "GIL wait" slices the preload records: CPython's timed wait on the GIL's condition
 * variable), blocked in locks, sleeps and I/O — per thread, per Python line and per call stack
 * (the wall-clock flame graph: the CPU samples and the blocked time together).
 *
 * One rule for what counts, shared by the converter's view (gil.c, over a raw trace's events) and
 * libprof-report's per-thread table (over any trace's slices):
 *   - GIL wait: the "GIL wait" slices (category python);
 *   - off-CPU: the time in the traced calls that block — lock and condition waits (sync), sleeps
 *     and polls (wait), reads, writes, syncs and opens of files and sockets (io, net); a call
 *     inside another counted once;
 *   - GIL held: from the end of each GIL wait that took the GIL to the thread's next GIL wait or
 *     blocking call (a Python thread gives the GIL up before it blocks), or to where another
 *     thread took the GIL (its holder had let it go), whichever comes first. CPython waits in
 *     rounds of the switch interval: a round that timed out and is followed within a millisecond
 *     by the thread's next round did not take the GIL; one that was signalled did (its holder
 *     handed the GIL over), and so did one that timed out and is followed by anything else. A thread that takes the
 *     GIL while it is free has no wait to start from: that stretch is not counted held. The
 *     holds, in time order, are the GIL's holder track (the timeline's "GIL holder"), which
 *     libprof-report reads back. */
#ifndef LP_GIL_H
#define LP_GIL_H

#include <stdint.h>
#include <string.h>

struct lp_analysis;
struct lp_out;

/* What a blocking slice is: the innermost frame the wall-clock flame graph gives it. */
enum lp_block { LP_BLOCK_NONE, LP_BLOCK_GIL, LP_BLOCK_LOCK, LP_BLOCK_SLEEP, LP_BLOCK_IO, LP_BLOCK_KINDS };
extern const char *const lp_block_frames[LP_BLOCK_KINDS]; /* "[GIL wait]", "[lock]", "[sleep]", "[io]" */

/* The kind of a slice of category `cat` named `name` (libprof's families, as the Chrome trace
 * names them). */
enum lp_block lp_block_kind(const char *cat, const char *name);

/* The GIL held by thread `who` (the caller's index) of process `group` from `from` to `to`
 * (INT64_MAX: no end seen yet). */
struct lp_gil_hold {
    int64_t from, to;
    uint32_t who, group;
    uint8_t open;      /* its thread's last hold, which the thread's next slice may end */
    uint8_t timed_out; /* its wait timed out: a hold only if the thread's next slice is no GIL wait */
    uint8_t none;      /* it was not one: its thread waited again */
};
struct lp_gil_holds {
    struct lp_gil_hold *h;
    size_t n, cap;
};

/* One thread's totals, fed its GIL waits and blocking slices in time order (by start or by end:
 * a slice inside one counted before is counted once, either way). */
struct lp_gil_thread {
    int64_t wait_ns, held_ns, off_ns; /* GIL wait, GIL held (lp_gil_holds_end), off-CPU (GIL waits apart) */
    uint64_t waits;                   /* GIL waits */
    size_t hold;                      /* 1 + its open hold in the holds, or 0 */
    int64_t off_end;                  /* the end of the last blocking slice counted */
};
static inline void lp_gil_thread_init(struct lp_gil_thread *t) { memset(t, 0, sizeof *t); }
/* (sums saturate: a forged trace may hold any times) */
static inline int64_t lp_gil_sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
static inline int64_t lp_gil_since(int64_t to, int64_t from) { /* to - from, to >= from */
    int64_t r;
    return __builtin_sub_overflow(to, from, &r) ? INT64_MAX : r;
}
/* Thread `t` (index `who` of process `group`) has a slice of kind `kind`: a GIL wait (`timed_out`:
 * it returned ETIMEDOUT) opens a hold in `hs` (NULL: no holds kept). 0, or -1 when out of memory. */
int lp_gil_thread_add(struct lp_gil_thread *t, struct lp_gil_holds *hs, uint32_t who, uint32_t group,
                      enum lp_block kind, int64_t ts, int64_t dur, int timed_out);
/* Every slice so far is in: the holds sorted by process and start, each cut at the next one's
 * start (its holder had let the GIL go). The caller then reads them: each one's length
 * (lp_gil_hold_ns), and where its threads' open holds went (`open`: the thread's `hold` is 1 + the
 * new index). */
void lp_gil_holds_end(struct lp_gil_holds *hs);
static inline int64_t lp_gil_hold_ns(const struct lp_gil_hold *h) { /* 0: none, or no end yet */
    return !h->none && h->to != INT64_MAX && h->to > h->from ? lp_gil_since(h->to, h->from) : 0;
}
void lp_gil_holds_free(struct lp_gil_holds *hs);

/* A raw trace's threads followed through its events (by the reader's thread index): the GIL
 * view's totals, and libprof-report's slices of a raw trace (slices.c), which need the holder
 * track the Chrome trace has. */
struct lp_gil_threads {
    struct lp_gil_thread *th;
    size_t nth;
    struct lp_gil_holds holds;
};
/* Thread `thread` has a slice of kind `kind` (lp_gil_thread_add). 0, or -1 when out of memory. */
int lp_gil_threads_add(struct lp_gil_threads *g, uint32_t thread, enum lp_block kind, int64_t ts, int64_t dur,
                       int timed_out);
/* Every event so far is in: the holds ended (lp_gil_holds_end), each thread's GIL held added up. */
void lp_gil_threads_end(struct lp_gil_threads *g);
void lp_gil_threads_free(struct lp_gil_threads *g);
/* A GIL wait's result was ETIMEDOUT: argument words `a` (cond, ret) of `nargs`. */
int lp_gil_timed_out(unsigned nargs, const uint64_t *a);
struct lp_reader;
/* The name of a hold's slice on the holder track: its thread's label and id, the id last (the
 * report reads it back). Its length. */
int lp_gil_hold_name(const struct lp_reader *r, uint32_t who, char *buf, size_t len);

/* The timeline's track of the GIL's holder (a pseudo thread of the process, as the GPU's streams
 * are): one slice per hold, named by the thread that held it. */
#define LP_GIL_TRACK UINT32_C(0x4f000000)

/* The view's wall-clock flame graph (NAME.wall.folded, --wall-folded): collapsed stacks in
 * microseconds, the thread as the root frame — each CPU sample's stack at the sampling period,
 * each blocked slice's call stack with its kind as the innermost frame. */
void lp_gil_wall_folded(const struct lp_analysis *a, struct lp_out *o);

/* fn(arg, thread, stack, kind, ns) for each thread's blocked time under one call stack, of one
 * kind (the reader's thread index and stack id); the number of them (fn NULL: only counted). */
size_t lp_gil_blocked_each(const struct lp_analysis *a,
                           void (*fn)(void *arg, uint32_t thread, uint32_t stack, enum lp_block kind, int64_t ns),
                           void *arg);

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_gil;

#endif
