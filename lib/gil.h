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
 *   - GIL held: from each GIL wait's end to the thread's next GIL wait or blocking call (a Python
 *     thread gives the GIL up before it blocks). A thread that takes the GIL while it is free has
 *     no wait to start from: that stretch is not counted held. */
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

/* One thread's totals, fed its GIL waits and blocking slices in time order (by start or by end:
 * a slice inside one counted before is counted once, either way). */
struct lp_gil_thread {
    int64_t wait_ns, held_ns, off_ns; /* GIL wait, GIL held, off-CPU (blocked, GIL waits apart) */
    uint64_t waits;                   /* GIL waits */
    int64_t held_from;                /* the last GIL wait's end, while held is open (else -1) */
    int64_t off_end;                  /* the end of the last blocking slice counted */
};
static inline void lp_gil_thread_init(struct lp_gil_thread *t) {
    memset(t, 0, sizeof *t);
    t->held_from = -1;
}
/* (sums saturate: a forged trace may hold any times) */
static inline int64_t lp_gil_sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
static inline int64_t lp_gil_since(int64_t to, int64_t from) { /* to - from, to >= from */
    int64_t r;
    return __builtin_sub_overflow(to, from, &r) ? INT64_MAX : r;
}
static inline void lp_gil_thread_add(struct lp_gil_thread *t, enum lp_block kind, int64_t ts, int64_t dur) {
    if (kind == LP_BLOCK_NONE) return;
    int64_t end = lp_gil_sat(ts, dur);
    if (t->held_from >= 0 && ts >= t->held_from) t->held_ns = lp_gil_sat(t->held_ns, lp_gil_since(ts, t->held_from));
    t->held_from = -1;
    if (kind == LP_BLOCK_GIL) {
        t->wait_ns = lp_gil_sat(t->wait_ns, dur);
        t->waits++;
        t->held_from = end;
        return;
    }
    int64_t from = ts > t->off_end ? ts : t->off_end;
    if (end > from) t->off_ns = lp_gil_sat(t->off_ns, lp_gil_since(end, from));
    if (end > t->off_end) t->off_end = end;
}

/* The view's wall-clock flame graph (NAME.wall.folded, --wall-folded): collapsed stacks in
 * microseconds, the thread as the root frame — each CPU sample's stack at the sampling period,
 * each blocked slice's call stack with its kind as the innermost frame. */
void lp_gil_wall_folded(const struct lp_analysis *a, struct lp_out *o);

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_gil;

#endif
