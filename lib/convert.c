/* convert.c: the one pass over a decoded trace (see convert.h) — per-function statistics, the
 * live-heap timeline, leaks, the runtime entry points (calls.c) and allocation sites (sites.c) —
 * handing every event to the writers as it goes; then each writer writes its totals, each to a
 * temporary name renamed into place, so a reader never sees half a file.
 *
 * Frees are matched to allocations by pointer here, never on the hot path. Durations go into a
 * log-linear histogram per function (64 sub-buckets per power of two, so a percentile is within
 * 1.6 % of the true value; count, total, min and max are exact) because a trace may hold far more
 * events than memory. */
#define _GNU_SOURCE
#include "convert.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "map.h"
#include "os.h"
#include "samples.h"
#include "vec.h"

unsigned lp_hist_maps; /* stats.h */

/* ---- the pass ----------------------------------------------------------------------------------- */

/* What every allocation event touches. The general path's helpers below work on it in place
 * (p->h); the fast path loads it into local scalars for the length of a run and stores it back. */
struct hot {
    struct lp_map live; /* pointer -> lp_live_pack(size, stack) of every live block */
    uint64_t live_bytes, peak_bytes, peak_ns;
    struct lp_cbucket *bucket; /* the counter bucket of the last event's time ... */
    uint64_t bucket_to;        /* ... and the first time past it */
    uint64_t temporary, temporary_bytes, untracked_frees, reused_live;
    int oom;
};

/* The last block allocated on a thread, for heaptrack's temporaries. */
struct last_alloc {
    uint64_t size;
    uint32_t stack;
    uint8_t valid;
};

struct pass {
    struct lp_analysis a;
    struct hot h;
    size_t cap_ranges;
    uint64_t bucket_mult; /* ns * bucket_mult >> 64 = counter bucket: no division per event */
    /* temporary allocations, per thread (index of lp_reader.threads) */
    struct last_alloc *last;
    uint64_t *ring; /* memray's threshold: the last N blocks allocated per thread */
    unsigned threshold;
    uint32_t nthreads;
    int follow; /* the trace is still being written (lp_reader_follow): its length is not known */
    int64_t tally_bytes, tally_blocks; /* the TALLY records' sums (what of live_bytes they hold: the positive part) */
    struct lp_cbucket no_bucket;       /* the fast path's when no counter track is asked for */
};

#define HOT static inline __attribute__((always_inline))

/* A followed trace's first guess of its length (the counter buckets double as it outgrows it). */
#define FOLLOW_SPAN_NS UINT64_C(64000000000)

/* A block of `size` bytes from `stack` was allocated on thread `t` (`l`: its last_alloc). */
HOT void temp_born(struct pass *p, struct last_alloc *l, unsigned threshold, uint32_t t, uint64_t ptr, uint64_t size,
                   uint32_t stack) {
    if (threshold) {
        uint64_t *r = &p->ring[(size_t)t * threshold];
        memmove(r + 1, r, (threshold - 1) * sizeof *r);
        r[0] = ptr;
    } else {
        *l = (struct last_alloc){size, stack, 1};
    }
}

/* Block `v` (lp_live_pack) at `ptr` was released on thread `t`: temporary or not. */
HOT void temp_died(struct pass *p, struct hot *h, struct last_alloc *l, unsigned threshold, int counting, uint32_t t,
                   uint64_t ptr, uint64_t v) {
    int temporary = 0;
    if (threshold) {
        uint64_t *r = &p->ring[(size_t)t * threshold];
        for (unsigned i = 0; i < threshold; i++)
            if (r[i] == ptr) {
                temporary = 1;
                r[i] = 0;
                break;
            }
    } else {
        temporary = l->valid && l->size == lp_live_bytes(v) && l->stack == lp_live_stack(v);
        l->valid = 0;
    }
    if (temporary && counting) {
        h->temporary++;
        h->temporary_bytes += lp_live_bytes(v);
        if (p->a.sites) lp_sites_temporary(p->a.sites, v);
    }
}

struct bucket_at {
    struct lp_cbucket *b;
    uint64_t to; /* the first time past it */
};

/* The counter bucket of time `ns`, entered for the first time. Events come in time order (the
 * iterator yields by effect time, and every event's ns is that time), so the pass asks only when
 * it passes the end of the bucket it is in. */
/* A followed trace's run outgrew the buckets: each two become one, twice as long. */
static void halve_buckets(struct pass *p) {
    struct lp_analysis *a = &p->a;
    uint64_t used[LP_COUNTER_BUCKETS / 64] = {0};
    for (unsigned i = 0; i < LP_COUNTER_BUCKETS / 2; i++) {
        int u0 = (a->cb_used[(2 * i) / 64] >> ((2 * i) % 64)) & 1,
            u1 = (a->cb_used[(2 * i + 1) / 64] >> ((2 * i + 1) % 64)) & 1;
        struct lp_cbucket x = a->cb[2 * i], y = a->cb[2 * i + 1];
        if (u0 && u1) {
            if (y.min.v < x.min.v) x.min = y.min;
            if (y.max.v > x.max.v) x.max = y.max;
            x.last = y.last;
        } else if (u1) {
            x = y;
        }
        a->cb[i] = x;
        if (u0 || u1) used[i / 64] |= UINT64_C(1) << (i % 64);
    }
    memcpy(a->cb_used, used, sizeof used);
    p->bucket_mult >>= 1;
    p->h.bucket_to = 0; /* the bucket the general path is in moved */
}

static __attribute__((noinline)) struct bucket_at enter_bucket(struct pass *p, uint64_t ns, uint64_t live_bytes) {
    struct lp_analysis *a = &p->a;
    while (p->follow && p->bucket_mult > 1 &&
           (uint64_t)(((unsigned __int128)ns * p->bucket_mult) >> 64) >= LP_COUNTER_BUCKETS)
        halve_buckets(p);
    uint64_t b = (uint64_t)(((unsigned __int128)ns * p->bucket_mult) >> 64);
    if (b >= LP_COUNTER_BUCKETS) b = LP_COUNTER_BUCKETS - 1;
    /* the times that map to b end at ceil((b + 1) * 2^64 / mult) */
    unsigned __int128 m = p->bucket_mult ? p->bucket_mult : 1, to = (((unsigned __int128)(b + 1) << 64) + m - 1) / m;
    struct bucket_at at = {&a->cb[b], b == LP_COUNTER_BUCKETS - 1 || to > UINT64_MAX ? UINT64_MAX : (uint64_t)to};
    if (!(a->cb_used[b / 64] & (UINT64_C(1) << (b % 64)))) {
        a->cb_used[b / 64] |= UINT64_C(1) << (b % 64);
        at.b->min = at.b->max = (struct lp_point){ns, live_bytes};
    }
    return at;
}

HOT void heap_changed(struct pass *p, struct hot *h, int counting, uint64_t ns) {
    if (!counting) return;
    if (h->live_bytes > h->peak_bytes) {
        h->peak_bytes = h->live_bytes;
        h->peak_ns = ns;
        if (p->a.sites) lp_sites_peak(p->a.sites); /* the peak views are of this instant */
    }
    if (!p->a.cb) return;
    if (ns >= h->bucket_to) { /* (0 at the start) */
        struct bucket_at at = enter_bucket(p, ns, h->live_bytes);
        h->bucket = at.b;
        h->bucket_to = at.to;
    }
    struct lp_cbucket *c = h->bucket;
    struct lp_point pt = {ns, h->live_bytes};
    if (pt.v < c->min.v) c->min = pt;
    if (pt.v > c->max.v) c->max = pt;
    c->last = pt;
}

/* A block of `size` bytes at `ptr` from `stack` was made on thread `t`, at `ns`. The live map's
 * value: its size and call stack, in one word (sites.h). */
HOT void block_born(struct pass *p, struct hot *h, struct last_alloc *l, unsigned threshold, int counting, uint32_t t,
                    uint64_t ptr, uint64_t size, uint64_t ns, uint32_t stack) {
    struct lp_analysis *a = &p->a;
    if (stack >= LP_MAX_STACK_ID) stack = 0;
    uint64_t live = lp_live_size(size);
    if (lp_map_full(&h->live)) { /* on a copy: the map itself is never handed to a call */
        struct lp_map m = h->live;
        if (lp_map_grow(&m) != 0) {
            h->oom = 1;
            return;
        }
        h->live = m;
    }
    uint64_t old = 0;
    if (lp_map_insert(&h->live, ptr, lp_live_pack(live, stack), &old)) {
        /* we missed its free (e.g. released through a path libprof does not see) */
        h->reused_live++;
        h->live_bytes -= lp_live_bytes(old);
        if (a->sites) lp_sites_died(a->sites, old, ns);
    }
    if (a->sites && lp_sites_born(a->sites, live, stack, counting, ns) != 0) h->oom = 1;
    h->live_bytes += live;
    heap_changed(p, h, counting, ns);
    if (l) temp_born(p, l, threshold, t, ptr, live, stack);
    a->size_hist[lp_size_pow2(size)] += (uint64_t)counting;
}

/* The block at `ptr` was released on thread `t` at `ns`: its size, or 0 when it was not known
 * to be live. */
HOT uint64_t block_died(struct pass *p, struct hot *h, struct last_alloc *l, unsigned threshold, int counting,
                        uint32_t t, uint64_t ptr, uint64_t ns) {
    struct lp_analysis *a = &p->a;
    uint64_t v;
    if (!lp_map_take(&h->live, ptr, &v)) {
        h->untracked_frees++;
        return 0;
    }
    if (l) temp_died(p, h, l, threshold, counting, t, ptr, v);
    if (a->sites) lp_sites_died(a->sites, v, ns);
    uint64_t size = lp_live_bytes(v);
    h->live_bytes -= size;
    heap_changed(p, h, counting, ns);
    return size;
}

/* A TALLY (format.h): the allocations and frees a thread counted since its last one, now. The
 * heap takes their highest point, then where they left it; its bytes of counted blocks are
 * their usable sizes. A thread's frees of blocks another thread counted later may take the sum below
 * zero for a while: the heap shows 0 then. */
static void tally(struct pass *p, struct hot *h, const struct lp_event *e) {
    struct lp_analysis *a = &p->a;
    uint64_t w[LP_TALLY_WORDS];
    lp_tally_words(e->w, w);
    static const struct {
        uint16_t kind, word;
    } rows[] = {{LP_EV_MALLOC, LP_TALLY_MALLOC_N},
                {LP_EV_CALLOC, LP_TALLY_CALLOC_N},
                {LP_EV_REALLOC, LP_TALLY_REALLOC_N},
                {LP_EV_FREE, LP_TALLY_FREE_N}};
    if (a->counting) {
        for (unsigned i = 0; i < sizeof rows / sizeof rows[0]; i++)
            if (w[rows[i].word] && lp_fnstat_add(&a->fn[rows[i].kind], w[rows[i].word], 0, 0, w[rows[i].word + 1], 0))
                h->oom = 1;
        for (unsigned b = 0; b < LP_TALLY_HIST_BUCKETS; b++)
            a->size_hist[b] += (uint32_t)(w[LP_TALLY_HIST + b / 2] >> (b % 2 * 32));
        h->temporary += w[LP_TALLY_TEMP_N];
        h->temporary_bytes += w[LP_TALLY_TEMP_B];
        if (a->sites) lp_sites_counted(a->sites, w[LP_TALLY_MALLOC_N] + w[LP_TALLY_CALLOC_N] + w[LP_TALLY_REALLOC_N]);
    }
    p->tally_blocks += (int64_t)(w[LP_TALLY_MALLOC_N] + w[LP_TALLY_CALLOC_N] - w[LP_TALLY_FREE_N] + w[LP_TALLY_BLOCKS]);
    int64_t base = p->tally_bytes;
    p->tally_bytes += (int64_t)w[LP_TALLY_NET];
    uint64_t recorded = h->live_bytes - (base > 0 ? (uint64_t)base : 0);
    int64_t top = base + (int64_t)w[LP_TALLY_RISE];
    h->live_bytes = recorded + (top > 0 ? (uint64_t)top : 0);
    heap_changed(p, h, a->counting, e->ns);
    h->live_bytes = recorded + (p->tally_bytes > 0 ? (uint64_t)p->tally_bytes : 0);
    heap_changed(p, h, a->counting, e->ns);
}

/* Add one call to row `f`: `bytes` actually handed out (or released). */
HOT void account(struct pass *p, struct fnstat *f, const struct lp_event *e, uint64_t bytes, int failed) {
    if (p->a.counting && lp_fnstat_add(f, 1, e->timed, e->dur_ns, bytes, failed) != 0) p->h.oom = 1;
}

/* Apply one event (the general path). Returns the size of the block concerned (allocated or
 * freed), for writers. */
HOT uint64_t analyse(struct pass *p, const struct lp_event *e) {
    struct lp_analysis *a = &p->a;
    struct hot *h = &p->h;
    const uint64_t *w = e->w;
    struct fnstat *f = &a->fn[e->kind];
    struct last_alloc *l = e->thread < p->nthreads ? &p->last[e->thread] : NULL;
    unsigned th = p->threshold;
    int counting = a->counting;
    if (th && !l) th = 0; /* not a thread of the trace's (cannot happen): no temporaries */
    switch (lp_kind_shape[e->kind]) {
    case LP_SHAPE_ALLOC:
        account(p, f, e, w[0], w[1] == 0);
        if (w[1]) block_born(p, h, l, th, counting, e->thread, w[1], w[0], e->ns, e->stack);
        return w[0];
    case LP_SHAPE_FREE: {
        uint64_t s = w[0] ? block_died(p, h, l, th, counting, e->thread, w[0], e->ns) : 0;
        account(p, f, e, s, 0);
        return s;
    }
    case LP_SHAPE_RANGE: {
        account(p, f, e, 0, 0);
        uint64_t id = w[0];
        if (id > LP_MAX_NAME_ID) id = 0; /* not a name a writer can produce: "(other)" */
        if (LP_RESERVE_ZERO(a->ranges, p->cap_ranges, id + 1) != 0) {
            h->oom = 1;
            return 0;
        }
        if (id >= a->nranges) a->nranges = id + 1;
        account(p, &a->ranges[id], e, 0, 0);
        return 0;
    }
    case LP_SHAPE_MARK:
    case LP_SHAPE_COUNTER: account(p, f, e, 0, 0); return 0;
    case LP_SHAPE_CONTROL: a->pauses += e->kind == LP_EV_PAUSE; return 0;
    case LP_SHAPE_TALLY: tally(p, h, e); return 0;
    case LP_SHAPE_REALLOC: {
        uint64_t size = w[0], np = w[1], op = w[2];
        if (e->phase == 0) { /* release of the old block, at the call's start */
            if (op && !(np == 0 && size > 0)) return block_died(p, h, l, th, counting, e->thread, op, e->ns);
            return 0;
        }
        account(p, f, e, size, np == 0 && size > 0);
        if (np) block_born(p, h, l, th, counting, e->thread, np, size, e->ns, e->stack);
        return size;
    }
    default: /* CALL records: calls.c, from the loop */ return 0;
    }
}

/* ---- the allocation fast path ------------------------------------------------------------------
 * Most of a trace is malloc, free and realloc records, and most of their blocks are too small for
 * any writer to want them (lp_sink.alloc_min). For those the pass reads the yielding thread's
 * chunk in place (lp_iter_run) and applies each record as the helpers above would, on local
 * scalars — no event is built, no writer called, no kind dispatched twice — until a record it
 * does not take: another kind, a block a writer wants, or the time another thread's record
 * comes first. The iterator then takes over from that record. Statistics before the last reset
 * and memray's threshold are left to the general path. Measured on churn: 295 -> 96
 * instructions an event for the whole conversion (README "Overhead"). */

/* What the fast path does with a record, by its first byte (kind | LP_REC_TIMED). */
enum { FAST_NO, FAST_ALLOC, FAST_FREE, FAST_REALLOC, FAST_STACK, FAST_TIMED = 8 };
#define FAST_CLASS(shape)                          \
    ((shape) == LP_SHAPE_ALLOC      ? FAST_ALLOC   \
     : (shape) == LP_SHAPE_FREE     ? FAST_FREE    \
     : (shape) == LP_SHAPE_REALLOC  ? FAST_REALLOC \
     : (shape) == LP_SHAPE_STACKREF ? FAST_STACK   \
                                    : FAST_NO)
static const uint8_t fast_class[256] = {
#define LP_X(id, name, fam, shape, words) \
    [LP_EV_##id] = FAST_CLASS(shape),     \
    [LP_EV_##id | LP_REC_TIMED] =         \
        FAST_CLASS(shape) == FAST_STACK || FAST_CLASS(shape) == FAST_NO ? FAST_NO : FAST_CLASS(shape) | FAST_TIMED,
    LP_KINDS(LP_X)
#undef LP_X
};

/* Hand a block the fast path took to the writers that want blocks of this size (a free's size is
 * known only once its block is found): the event lp_iter_next would have yielded. */
static __attribute__((noinline)) void fast_pass_on(struct pass *p, struct lp_sink **stream, int nstream,
                                                   uint32_t thread, uint32_t tid, const uint64_t *q, uint32_t stack,
                                                   uint64_t ns, unsigned phase, uint64_t size) {
    const struct lp_reader *r = p->a.r;
    unsigned timed = lp_rec_timed(q[0]);
    uint64_t start = q[0] & LP_TS_MASK, start_ns = lp_ticks_to_ns(r, start);
    struct lp_event e = {.ns = ns,
                         .start_ns = start_ns,
                         .tid = tid,
                         .thread = thread,
                         .stack = stack,
                         .kind = (uint16_t)lp_rec_kind(q[0]),
                         .phase = (uint8_t)phase,
                         .timed = (uint8_t)timed,
                         .w = q + 1 + timed};
    if (timed) e.dur_ns = lp_ticks_to_ns(r, start + (q[1] & LP_DUR_MASK)) - start_ns;
    struct lp_seen seen = {p->a.counting, size, NULL, NULL};
    for (int i = 0; i < nstream; i++)
        if (size >= stream[i]->alloc_min) stream[i]->event(stream[i], &p->a, &e, &seen);
}

/* Take the run of records the fast path can apply; `fast_min`: the smallest block a writer wants.
 * What each record does is what analyse() and its helpers do, written out on local scalars (the
 * general path keeps them in p->h) so that the compiler can keep them in registers: this loop is
 * most of a conversion's time. Blocks of 2^42 bytes or more and stack ids past LP_MAX_STACK_ID
 * (which the helpers clamp) are left to the general path. libprof-report --general-path skips
 * this loop; convert/fast_path_matches_general_path (tests/integration/test_convert.c) checks
 * that both give the same files on real traces. */
static inline __attribute__((always_inline)) void fast_loop(struct pass *p, struct lp_iter *it, struct lp_run run,
                                                            struct lp_sink **stream, int nstream, uint64_t fast_min,
                                                            struct lp_sites *const sites) {
    struct lp_analysis *a = &p->a;
    const uint64_t mult = a->r->mult, bound = run.bound;
    const uint64_t size_lim = fast_min < LP_LIVE_MAX ? fast_min : LP_LIVE_MAX; /* sizes taken: below it */
    const uint32_t t = run.thread;
    struct hot *hp = &p->h;
    /* the live map, as scalars: `room` is what it takes before it must grow */
    struct lp_map_slot *slots = hp->live.slots;
    uint64_t mask = hp->live.cap - 1, room = hp->live.cap / 2 - hp->live.n;
    unsigned shift = hp->live.shift;
    uint64_t live_bytes = hp->live_bytes, peak_bytes = hp->peak_bytes;
    uint64_t taken = 0;
    /* no counter track asked: a bucket of the pass's own that is never left */
    struct lp_cbucket *bucket = a->cb ? hp->bucket : &p->no_bucket;
    uint64_t bucket_to = a->cb ? hp->bucket_to : UINT64_MAX;
    /* the thread's last allocation (heaptrack's temporaries): stack UINT32_MAX when there is none */
    uint64_t last_size = p->last[t].size;
    uint32_t last_stack = p->last[t].valid ? p->last[t].stack : UINT32_MAX;
    int oom = 0;
    const uint64_t *q = run.p, *end = run.end;
    uint32_t stack = sites ? run.stack : 0; /* (0 without sites: the copy below never sets it) */
    const uint64_t NO_SLOT = UINT64_MAX;

/* What heap_changed() does, cut to what can move: after the heap grew only its bucket's maximum
 * (and the peak only when that does: the peak is never below a bucket's maximum), after it
 * shrank only the minimum. A bucket entered starts at the value itself. */
#define FAST_PEAK(ns_)                   \
    if (live_bytes > peak_bytes) {       \
        peak_bytes = live_bytes;         \
        hp->peak_ns = (ns_);             \
        if (sites) lp_sites_peak(sites); \
    }
#define FAST_ENTER(ns_)                                             \
    if (LP_MAP_UNLIKELY((ns_) >= bucket_to)) {                      \
        struct bucket_at at__ = enter_bucket(p, (ns_), live_bytes); \
        bucket = at__.b;                                            \
        bucket_to = at__.to;                                        \
        FAST_PEAK(ns_);                                             \
    }
#define FAST_HEAP(ns_, grew_, shrank_) /* (grew_, shrank_: constants) */                                \
    do {                                                                                                \
        uint64_t ns__ = (ns_);                                                                          \
        FAST_ENTER(ns__);                                                                               \
        if ((shrank_) && live_bytes < bucket->min.v) bucket->min = (struct lp_point){ns__, live_bytes}; \
        if ((grew_) && live_bytes > bucket->max.v) {                                                    \
            bucket->max = (struct lp_point){ns__, live_bytes};                                          \
            FAST_PEAK(ns__);                                                                            \
        }                                                                                               \
        bucket->last = (struct lp_point){ns__, live_bytes};                                             \
    } while (0)

/* The end of block_born(), once the block is in the map. */
#define FAST_BORN_TAIL(size_, ns_, replaced_)                                   \
    do {                                                                        \
        uint64_t ts__ = (size_);                                                \
        if (sites && lp_sites_born(sites, ts__, stack, 1, (ns_)) != 0) oom = 1; \
        live_bytes += ts__;                                                     \
        if (LP_MAP_UNLIKELY(replaced_))                                         \
            FAST_HEAP(ns_, 1, 1);                                               \
        else                                                                    \
            FAST_HEAP(ns_, 1, 0);                                               \
        last_size = ts__;                                                       \
        last_stack = stack;                                                     \
        a->size_hist[lp_size_pow2(ts__)]++;                                     \
    } while (0)

/* What block_born() does (`size_` below LP_LIVE_MAX, `stack` below LP_MAX_STACK_ID). */
#define FAST_BORN(ptr_, size_, ns_)                                          \
    do {                                                                     \
        uint64_t ptr__ = (ptr_), size__ = (size_);                           \
        if (LP_MAP_UNLIKELY(room == 0)) {                                    \
            hp->live.n = hp->live.cap / 2;                                   \
            if (lp_map_grow(&hp->live) != 0) {                               \
                oom = 1;                                                     \
                break;                                                       \
            }                                                                \
            slots = hp->live.slots;                                          \
            mask = hp->live.cap - 1;                                         \
            shift = hp->live.shift;                                          \
            room = hp->live.cap / 2 - hp->live.n;                            \
        }                                                                    \
        uint64_t i__ = lp_slot_find(slots, mask, shift, ptr__, 1);           \
        if (LP_MAP_UNLIKELY(slots[i__].key != 0)) { /* we missed its free */ \
            uint64_t old__ = slots[i__].val;                                 \
            hp->reused_live++;                                               \
            live_bytes -= lp_live_bytes(old__);                              \
            if (sites) lp_sites_died(sites, old__, (ns_));                   \
        }                                                                    \
        int replaced__ = slots[i__].key != 0;                                \
        room -= !replaced__;                                                 \
        slots[i__].key = ptr__;                                              \
        slots[i__].val = lp_live_pack(size__, stack);                        \
        FAST_BORN_TAIL(size__, ns_, replaced__);                             \
    } while (0)

/* The slot of live block `ptr_` in `i_`, or NO_SLOT when it is not live. */
#define FAST_FIND(ptr_, i_)                                        \
    do {                                                           \
        uint64_t ptr__ = (ptr_);                                   \
        (i_) = NO_SLOT;                                            \
        uint64_t j__ = lp_slot_find(slots, mask, shift, ptr__, 0); \
        if (slots[j__].key) (i_) = j__;                            \
    } while (0)

/* The end of block_died(), once block `v_` is out of the map: its size in `out_`. */
#define FAST_DIED_TAIL(v_, ns_, out_)                                                 \
    do {                                                                              \
        uint64_t tv__ = (v_), tb__ = lp_live_bytes(tv__);                             \
        if (last_stack == lp_live_stack(tv__) && last_size == tb__) { /* temporary */ \
            hp->temporary++;                                                          \
            hp->temporary_bytes += tb__;                                              \
            if (sites) lp_sites_temporary(sites, tv__);                               \
        }                                                                             \
        last_stack = UINT32_MAX;                                                      \
        if (sites) lp_sites_died(sites, tv__, (ns_));                                 \
        live_bytes -= tb__;                                                           \
        FAST_HEAP(ns_, 0, 1);                                                         \
        (out_) = tb__;                                                                \
    } while (0)

/* What block_died() does: the block's size in `out_`, 0 when it was not live. */
#define FAST_DIED(ptr_, ns_, out_)                                  \
    do {                                                            \
        uint64_t i__ = lp_slot_find(slots, mask, shift, (ptr_), 0); \
        (out_) = 0;                                                 \
        if (LP_MAP_UNLIKELY(!slots[i__].key)) {                     \
            hp->untracked_frees++;                                  \
            break;                                                  \
        }                                                           \
        uint64_t v__ = slots[i__].val;                              \
        room++;                                                     \
        lp_slot_remove(slots, mask, shift, i__);                    \
        FAST_DIED_TAIL(v__, ns_, out_);                             \
    } while (0)

    while (q < end) {
        uint64_t w0 = q[0], start = w0 & LP_TS_MASK;
        unsigned b = (unsigned)(w0 >> LP_TS_BITS), cls = fast_class[b];
        if (cls == FAST_ALLOC) { /* no duration: at its end = at its start */
            uint64_t size = q[1], ptr = q[2];
            if (start >= bound || size >= size_lim) break;
            struct fnstat *f = &a->fn[b];
            f->count++;
            if (ptr) {
                f->bytes += size;
                FAST_BORN(ptr, size, (uint64_t)(((unsigned __int128)start * mult) >> 32));
            } else {
                f->failed++;
            }
            q += 3;
        } else if (cls == FAST_FREE) {
            uint64_t ptr = q[1], size = 0;
            if (start >= bound) break;
            uint64_t ns = (uint64_t)(((unsigned __int128)start * mult) >> 32); /* lp_ticks_to_ns */
            if (ptr) FAST_DIED(ptr, ns, size);
            struct fnstat *f = &a->fn[b];
            f->count++;
            f->bytes += size;
            if (LP_MAP_UNLIKELY(size >= fast_min)) fast_pass_on(p, stream, nstream, t, run.tid, q, stack, ns, 1, size);
            q += 2;
        } else if (cls == FAST_STACK) { /* validated: a record follows it in this chunk */
            uint32_t ref = sites ? lp_stack_ref(a->r, start) : 0;
            if (!ref || ref >= LP_MAX_STACK_ID) break; /* (no sites: a damaged trace) */
            stack = ref;
            q++;
            continue;
        } else if (cls != FAST_NO) { /* a timed record, or a realloc (both phases: no other thread's
                                      * record comes between them) */
            unsigned timed = b >> 7;
            const uint64_t *w = q + 1 + timed;
            uint64_t stop = timed ? start + (q[1] & LP_DUR_MASK) : start;
            uint64_t ns = (uint64_t)(((unsigned __int128)start * mult) >> 32);
            uint64_t end_ns = timed ? (uint64_t)(((unsigned __int128)stop * mult) >> 32) : ns;
            struct fnstat *f = &a->fn[b & ~LP_REC_TIMED];
            cls &= ~FAST_TIMED;
            if (cls == FAST_ALLOC) {
                uint64_t size = w[0], ptr = w[1];
                if (stop >= bound || size >= size_lim) break;
                if (lp_fnstat_add(f, 1, 1, end_ns - ns, size, ptr == 0) != 0) oom = 1;
                if (ptr) FAST_BORN(ptr, size, end_ns);
                q = w + 2;
            } else if (cls == FAST_FREE) {
                uint64_t ptr = w[0], size = 0;
                if (start >= bound) break; /* a release takes effect at its start */
                if (ptr) FAST_DIED(ptr, ns, size);
                if (lp_fnstat_add(f, 1, 1, end_ns - ns, size, 0) != 0) oom = 1;
                if (LP_MAP_UNLIKELY(size >= fast_min))
                    fast_pass_on(p, stream, nstream, t, run.tid, q, stack, ns, 1, size);
                q = w + 1;
            } else {
                uint64_t size = w[0], np = w[1], op = w[2], old = 0, i = NO_SLOT;
                if (stop >= bound || size >= size_lim) break;
                int failed = np == 0 && size > 0;
                if (np && np == op) FAST_FIND(op, i);
                if (i != NO_SLOT) { /* grown or shrunk in place (nearly all of sqlite's): the slot stays */
                    FAST_DIED_TAIL(slots[i].val, ns, old);
                    if (LP_MAP_UNLIKELY(old >= fast_min))
                        fast_pass_on(p, stream, nstream, t, run.tid, q, stack, ns, 0, old);
                    if (lp_fnstat_add(f, 1, timed, end_ns - ns, size, 0) != 0) oom = 1;
                    slots[i].val = lp_live_pack(size, stack);
                    FAST_BORN_TAIL(size, end_ns, 0);
                    q = w + 3;
                    goto next;
                }
                if (op && !failed) {
                    FAST_DIED(op, ns, old);
                    if (LP_MAP_UNLIKELY(old >= fast_min))
                        fast_pass_on(p, stream, nstream, t, run.tid, q, stack, ns, 0, old);
                }
                if (lp_fnstat_add(f, 1, timed, end_ns - ns, size, failed) != 0) oom = 1;
                if (np) FAST_BORN(np, size, end_ns);
                q = w + 3;
            }
        } else {
            break;
        }
    next:
        taken++;
        stack = 0;
    }
#undef FAST_HEAP
#undef FAST_ENTER
#undef FAST_PEAK
#undef FAST_BORN_TAIL
#undef FAST_BORN
#undef FAST_FIND
#undef FAST_DIED_TAIL
#undef FAST_DIED
    hp->live.n = hp->live.cap / 2 - room;
    hp->live_bytes = live_bytes;
    hp->peak_bytes = peak_bytes;
    if (a->cb) {
        hp->bucket = bucket;
        hp->bucket_to = bucket_to;
    }
    hp->oom |= oom;
    p->last[t] = (struct last_alloc){last_size, last_stack == UINT32_MAX ? 0 : last_stack, last_stack != UINT32_MAX};
    a->events += taken;
    a->events_fast += taken;
    lp_iter_run_end(it, q, stack, taken);
}

/* The loop comes in two copies, with and without allocation sites (a trace with stacks), so that
 * the common one tests for none of their calls. */
static void fast_run(struct pass *p, struct lp_iter *it, struct lp_sink **stream, int nstream, uint64_t fast_min) {
    struct lp_run run;
    if (!p->a.counting || p->threshold || p->a.opts->general_path || p->a.general_allocs || !p->h.live.slots ||
        !lp_iter_run(it, &run) || run.thread >= p->nthreads || run.stack >= LP_MAX_STACK_ID ||
        (run.stack && !p->a.sites))
        return;
    if (p->a.sites)
        fast_loop(p, it, run, stream, nstream, fast_min, p->a.sites);
    else
        fast_loop(p, it, run, stream, nstream, fast_min, NULL);
}

/* ---- outputs: each file through a temporary name ----------------------------------------------- */

struct output {
    const char *path; /* NULL: an open descriptor of the caller's */
    char tmp[4096 + 32];
    struct lp_out out;
    struct lp_sink sink;
    int open;
};

/* Open `path` for writing through a temporary name, so a reader never sees half a file. Traces
 * name the program's files, its command line and its source lines: `mode` is the owner's only
 * unless the user says otherwise, and never wider than a file already at `path` (the umask takes
 * away the rest). */
static int open_tmp(const char *path, char *tmp, size_t len, unsigned mode) {
    snprintf(tmp, len, "%s.tmp%ld", path, (long)getpid());
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) mode &= (unsigned)st.st_mode | 0600;
    /* A new file, never an existing one or a symlink planted at the name; the rename that
     * follows replaces a symlink at `path` rather than writing through it. */
    lp_os_unlink(tmp);
    return lp_os_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (int)mode);
}

static int output_open(struct output *o, const char *path, int fd, unsigned mode, char *err, size_t errlen) {
    o->path = path;
    if (path) fd = open_tmp(path, o->tmp, sizeof o->tmp, mode ? mode : 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", path ? path : "output", strerror(errno));
        return -1;
    }
    lp_out_init(&o->out, fd);
    o->sink.out = &o->out;
    o->open = 1;
    return 0;
}

/* Flush and, for a file of ours, close and rename into place. 0 or -1 (message in err). */
static int output_close(struct output *o, char *err, size_t errlen) {
    if (!o->open) return 0;
    o->open = 0;
    int rc = lp_out_flush(&o->out);
    if (!o->path) {
        if (rc != 0) snprintf(err, errlen, "cannot write the output: %s", strerror(o->out.err));
        return rc;
    }
    if (lp_os_close(o->out.fd) != 0 && rc == 0) {
        rc = -1;
        o->out.err = errno;
    }
    if (rc == 0 && lp_os_rename(o->tmp, o->path) != 0) {
        rc = -1;
        o->out.err = errno;
    }
    if (rc != 0) {
        snprintf(err, errlen, "cannot write %s: %s", o->path, strerror(o->out.err));
        lp_os_unlink(o->tmp);
    }
    return rc;
}

/* ---- the conversion ----------------------------------------------------------------------------- */

/* A followed trace (lp_reader_follow) has grown new threads or stacks since the last look: the
 * pass's tables indexed by them grow too. Returns 0 or -1 (out of memory). */
static int refit(struct pass *p) {
    const struct lp_reader *r = p->a.r;
    uint32_t n = r->nthreads;
    if (n > p->nthreads) {
        struct last_alloc *l = lp_os_realloc(p->last, ((size_t)n + 1) * sizeof *l);
        if (!l) return -1;
        memset(l + p->nthreads + 1, 0, (size_t)(n - p->nthreads) * sizeof *l);
        p->last = l;
        if (p->threshold) {
            uint64_t *g = lp_os_realloc(p->ring, ((size_t)n * p->threshold + 1) * sizeof *g);
            if (!g) return -1;
            memset(g + (size_t)p->nthreads * p->threshold, 0,
                   ((size_t)(n - p->nthreads) * p->threshold + 1) * sizeof *g);
            p->ring = g;
        }
        p->nthreads = n;
        for (unsigned v = 0; v < lp_nviews; v++)
            if (lp_views[v]->fit && lp_views[v]->fit(&p->a) != 0) return -1;
    }
    if (p->a.sites && lp_sites_fit(p->a.sites) != 0) return -1;
    return 0;
}

/* The pass is over (or a snapshot's copy of it stops here): the totals, each writer's file
 * closed and renamed into place. 0, -1 (a file not written: err) or -2 (out of memory). */
static int totals(struct pass *p, struct output *out, char *err, size_t errlen) {
    struct lp_analysis *a = &p->a;
    const struct lp_convert_opts *o = a->opts;
    const struct lp_reader *r = a->r;
    struct hot *h = &p->h;
    for (unsigned b = LP_SIZE_BUCKETS; b < LP_SIZE_POW2; b++) { /* the last bucket: all bigger */
        a->size_hist[LP_SIZE_BUCKETS - 1] += a->size_hist[b];
        a->size_hist[b] = 0;
    }
    a->live_bytes = h->live_bytes;
    a->peak_bytes = h->peak_bytes;
    a->peak_ns = h->peak_ns;
    a->temporary = h->temporary;
    a->temporary_bytes = h->temporary_bytes;
    a->untracked_frees = h->untracked_frees;
    a->reused_live = h->reused_live;
    a->live_blocks = h->live.n + (p->tally_blocks > 0 ? (uint64_t)p->tally_blocks : 0);
    lp_map_free(&h->live); /* before the sites' replay, which builds its own */
    if (h->oom || lp_calls_finish(a->calls) != 0) return -2;
    if (a->sites && lp_sites_finish(a->sites, o->peak_at_ns) != 0) return -2;
    for (unsigned v = 0; v < lp_nviews; v++)
        if (lp_views[v]->finish && lp_views[v]->finish(a) != 0) return -2;
    if (o->progress) o->progress(a->events, r->events, o->progress_arg);
    int rc = 0;
    for (int k = 0; k < LP_OUT_COUNT; k++) {
        if (!out[k].open) continue;
        if (out[k].sink.finish) out[k].sink.finish(&out[k].sink, a);
        if (output_close(&out[k], err, errlen) != 0) rc = -1;
    }
    return rc;
}

/* ---- snapshots of a followed trace (struct lp_snapshot) ----------------------------------------- */

struct snap {
    struct pass *p;
    struct output *out;
};

/* In the forked copy of the pass: the outputs asked for, from what the pass has so far. Nothing
 * the pass itself writes is touched: the Chrome trace streamed so far is copied from its file
 * (read, never written), the other outputs are made by their totals alone. */
static __attribute__((noreturn)) void snapshot_child(struct snap *x) {
    struct pass *p = x->p;
    struct output *out = x->out;
    const struct lp_convert_opts *o = p->a.opts;
    struct lp_snapshot *s = o->snapshot;
    char err[512];
    for (int k = 0; k < LP_OUT_COUNT; k++) s->fd[k] = -1;
    if (s->load(s) != 0) lp_os_exit(1);
    for (int k = 0; k < LP_OUT_COUNT; k++) {
        const char *w = s->path[k][0] ? s->path[k] : NULL;
        int wfd = s->fd[k];
        if (out[k].open) {
            int old = out[k].out.fd;
            out[k].open = 0;
            out[k].path = NULL; /* (its temporary file is the pass's: never removed here) */
            if ((!w && wfd < 0) || !lp_outputs[k].streamed) {
                lp_os_close(old);
                if (!w && wfd < 0) continue;
            } else { /* the streamed part, copied (a Perfetto trace has written nothing yet) */
                char tmp[sizeof out[k].tmp] = "";
                int fd = wfd >= 0 ? wfd : open_tmp(w, tmp, sizeof tmp, o->file_mode ? o->file_mode : 0600);
                if (fd < 0) continue;
                char buf[1 << 16];
                ssize_t n = 0;
                uint64_t total = out[k].out.total; /* (never past it: the pass goes on writing the file) */
                for (uint64_t at = 0; at < total; at += (uint64_t)n) {
                    size_t want = total - at < sizeof buf ? (size_t)(total - at) : sizeof buf;
                    if ((n = lp_os_pread(old, buf, want, (off_t)at)) <= 0 || lp_os_write(fd, buf, (size_t)n) != n)
                        break;
                }
                lp_os_close(old);
                out[k].out.fd = fd;
                out[k].path = wfd >= 0 ? NULL : w;
                memcpy(out[k].tmp, tmp, sizeof tmp);
                out[k].open = 1;
                continue;
            }
        }
        /* a Chrome or Perfetto trace is streamed: only the one the pass writes can be copied; the
         * others are made by their totals alone */
        if ((!w && wfd < 0) || lp_outputs[k].streamed ||
            !lp_output_possible(lp_outputs[k].needs, lp_alloc_sites(p->a.r, p->a.sites) != NULL,
                                lp_samples_of(&p->a) != NULL) ||
            output_open(&out[k], w, wfd, o->file_mode, err, sizeof err) != 0)
            continue;
        out[k].sink = (struct lp_sink){.out = &out[k].out};
        if (lp_outputs[k].writer(&out[k].sink, &p->a) != 0) out[k].out.err = ENOMEM;
    }
    ((struct lp_convert_opts *)o)->live = 1; /* (this copy's own memory) the summary says "so far" */
    ((struct lp_convert_opts *)o)->top = s->top;
    p->a.span_ns = lp_ticks_to_ns(p->a.r, p->a.r->last_ticks);
    int rc = refit(p) != 0 ? -2 : totals(p, out, err, sizeof err);
    lp_os_exit(rc == 0 ? 0 : 1);
}

/* While a followed trace's pass waits for more: a look asked is made by a copy of the process,
 * and copies that are done are reaped. */
static void snapshot_idle(void *arg) {
    struct snap *x = arg;
    struct lp_snapshot *s = x->p->a.opts->snapshot;
    while (lp_os_reap() > 0) {}
    if (!s || !s->ask || s->ask(s) <= 0) return;
    if (lp_os_fork() == 0) snapshot_child(x);
    if (s->release) s->release(s);
}

/* The pass's state for trace r: the heap, the statistics, the views. 0, or -1 out of memory. */
static int pass_setup(struct pass *p, const struct lp_reader *r, const struct lp_convert_opts *o) {
    struct lp_analysis *a = &p->a;
    a->r = r;
    a->opts = o;
    p->follow = r->follow != NULL;
    a->span_ns = lp_ticks_to_ns(r, r->last_ticks);
    a->reset_ns = r->reset_ticks ? lp_ticks_to_ns(r, r->reset_ticks) : 0;
    a->counting = a->reset_ns == 0;
    uint64_t span = a->span_ns == UINT64_MAX ? UINT64_MAX : a->span_ns + 1; /* a forged clock */
    if (p->follow) span = FOLLOW_SPAN_NS; /* and twice as long each time the run outgrows it */
    unsigned __int128 mult = ((unsigned __int128)LP_COUNTER_BUCKETS << 64) / span;
    p->bucket_mult = mult > UINT64_MAX ? UINT64_MAX : (uint64_t)mult; /* spans under 2 us */
    a->calls = lp_calls_new(r);
    p->nthreads = r->nthreads;
    p->threshold = o->temporary_threshold > 64 ? 64 : o->temporary_threshold;
    /* a thread's slot in `last` is also how the helpers know it is one of the trace's */
    p->last = lp_os_calloc((size_t)r->nthreads + 1, sizeof *p->last);
    if (p->threshold) p->ring = lp_os_calloc((size_t)r->nthreads * p->threshold + 1, sizeof *p->ring);
    if (!p->last || (p->threshold && !p->ring)) return -1;
    if (lp_map_grow(&p->h.live) != 0) return -1;  /* the fast path counts on a map with slots */
    a->sites = lp_sites_new(r, o->py_user_lines); /* NULL: no stacks in this trace */
    if (!a->calls) return -1;
    /* the timeline's "heap by site" tracks (write_chrome.c) or the HTML page's chart
     * (o->site_series): their series kept as the pass goes rather than made by a pass of their
     * own (a saved trace's: its length is known). One set of instants only: asked for both, the
     * tracks take that pass. The general path (--general-path) leaves them to it: a check of both. */
    int site_chrome =
        o->site_tracks && (o->path[LP_OUT_CHROME] || (o->fds >> LP_OUT_CHROME & 1) || o->path[LP_OUT_PERFETTO]);
    if (o->site_series) memset(o->site_series, 0, sizeof *o->site_series);
    if (a->sites && (site_chrome || o->site_series) && !p->follow && !o->general_path &&
        lp_sites_series_keep(a->sites, o->site_series ? o->site_series_buckets : LP_SITE_SERIES_BUCKETS,
                             lp_ticks_to_ns(r, r->last_ticks) + 1) != 0)
        return -1;
    for (unsigned v = 0; v < lp_nviews; v++) /* the families' views (views.c) */
        if (lp_views[v]->create && lp_views[v]->create(a) != 0) return -1;
    return 0;
}

/* The writers asked for (outputs.h), each opened by its row; one that needs what the trace lacks
 * is named in *missing (with what it needs), reported once the others are written. 0; -1 with a
 * message in err; -2 out of memory. */
static int outputs_open(struct pass *p, struct output *out, const struct lp_convert_opts *o, const char **missing,
                        unsigned *missing_needs, char *err, size_t errlen) {
    struct lp_analysis *a = &p->a;
    int stacks = lp_alloc_sites(a->r, a->sites) != NULL, samples = lp_samples_of(a) != NULL;
    for (int k = 0; k < LP_OUT_COUNT; k++) {
        int fd = o->fds >> k & 1 ? o->fd[k] : -1;
        const char *path = k == LP_OUT_SUMMARY || fd >= 0 ? NULL : o->path[k];
        if (!path && fd < 0) continue;
        if (!lp_output_possible(lp_outputs[k].needs, stacks, samples)) {
            *missing = path;
            *missing_needs =
                lp_outputs[k].needs & (stacks ? ~LP_NEEDS_STACKS : ~0u) & (samples ? ~LP_NEEDS_SAMPLES : ~0u);
            continue;
        }
        if (output_open(&out[k], path, fd, o->file_mode, err, errlen) != 0) return -1;
        if (lp_outputs[k].writer(&out[k].sink, a) != 0) return -2;
    }
    return 0;
}

/* The pass: each event analysed, seen by the views that ask for its shape, handed to the writers;
 * runs of small allocations the fast path's. 0, or -1 out of memory. */
static int run_pass(struct pass *p, struct output *out) {
    struct lp_analysis *a = &p->a;
    const struct lp_reader *r = a->r;
    const struct lp_convert_opts *o = a->opts;
    struct lp_sink *stream[LP_OUT_COUNT];
    int nstream = 0;
    for (int k = 0; k < LP_OUT_COUNT; k++)
        if (out[k].open && out[k].sink.event) stream[nstream++] = &out[k].sink;
    struct snap snap = {p, out};
    struct lp_iter *it = p->follow ? lp_iter_follow((struct lp_reader *)r, snapshot_idle, &snap) : lp_iter_new(r);
    if (!it) return -1;
    struct lp_event e;
    struct lp_call_rec rec;
    struct lp_call_view view;
    uint64_t next_progress = 1u << 20;
    uint64_t fast_min = UINT64_MAX; /* the smallest block a writer wants to see */
    for (int k = 0; k < nstream; k++)
        if (stream[k]->alloc_min < fast_min) fast_min = stream[k]->alloc_min;
    int rc = 0;
    for (;;) {
        if (p->follow && refit(p) != 0) {
            rc = -1;
            break;
        }
        fast_run(p, it, stream, nstream, fast_min);
        if (!lp_iter_next(it, &e)) break;
        if (p->follow && refit(p) != 0) {
            rc = -1;
            break;
        }
        if (!a->counting && e.ns >= a->reset_ns) { /* the last reset: statistics start here */
            a->counting = 1;
            p->h.peak_bytes = p->h.live_bytes;
            p->h.peak_ns = e.ns;
            if (a->sites) lp_sites_peak(a->sites);
        }
        struct lp_seen seen = {a->counting, analyse(p, &e), NULL, NULL};
        a->events += e.phase;
        unsigned shape = lp_kind_shape[e.kind];
        if (shape == LP_SHAPE_CALL) {
            if (lp_calls_event(a->calls, &e, a->counting, &rec, &view) != 0) p->h.oom = 1;
            if (a->sites && e.stack && a->counting && rec.call < LP_CALL_COUNT)
                lp_sites_call(a->sites, e.stack, lp_call_family[rec.call], e.dur_ns);
            seen.call = &rec;
            seen.view = &view;
        }
        for (unsigned v = 0; v < lp_nviews; v++) /* the families' views: the events they ask for */
            if ((lp_views[v]->shapes >> shape & 1) && lp_views[v]->event(a, &e, &seen) != 0) p->h.oom = 1;
        if (shape == LP_SHAPE_SAMPLE) continue; /* the samples' view alone: the writers take its totals */
        int heap = shape == LP_SHAPE_ALLOC || shape == LP_SHAPE_FREE || shape == LP_SHAPE_REALLOC;
        for (int k = 0; k < nstream; k++)
            if (!heap || seen.size >= stream[k]->alloc_min) stream[k]->event(stream[k], a, &e, &seen);
        if (o->progress && a->events >= next_progress) {
            o->progress(a->events, r->events, o->progress_arg);
            next_progress += 1u << 20;
        }
    }
    lp_iter_free(it);
    return rc;
}

static void pass_free(struct pass *p, struct output *out) {
    if (out) {
        for (int k = 0; k < LP_OUT_COUNT; k++) {
            if (out[k].open && out[k].path) { /* a failure on the way: no half-written file stays */
                lp_os_close(out[k].out.fd);
                lp_os_unlink(out[k].tmp);
            }
            if (out[k].sink.release) out[k].sink.release(&out[k].sink);
        }
    }
    if (p) {
        for (unsigned k = 0; k < LP_KIND_COUNT; k++) lp_fnstat_free(&p->a.fn[k]);
        for (size_t id = 0; id < p->a.nranges; id++) lp_fnstat_free(&p->a.ranges[id]);
        lp_os_free(p->a.ranges);
        lp_map_free(&p->h.live);
        lp_calls_free(p->a.calls);
        lp_sites_free(p->a.sites);
        for (unsigned v = 0; v < lp_nviews; v++)
            if (lp_views[v]->destroy) lp_views[v]->destroy(&p->a);
        lp_os_free(p->last);
        lp_os_free(p->ring);
        lp_os_free(p->a.cb);
    }
    lp_os_free(p);
    lp_os_free(out);
}

int lp_convert(const struct lp_reader *r, const struct lp_convert_opts *o, char *err, size_t errlen) {
    struct pass *p = lp_os_calloc(1, sizeof *p);
    struct output *out = lp_os_calloc(LP_OUT_COUNT, sizeof *out);
    int rc = -1;
    const char *missing = NULL;
    unsigned missing_needs = 0;
    if (o->samples_out) *o->samples_out = NULL;
    if (!p || !out || pass_setup(p, r, o) != 0) goto oom;
    int opened = outputs_open(p, out, o, &missing, &missing_needs, err, errlen);
    if (opened == -1) goto out;
    if (opened == -2 || run_pass(p, out) != 0) goto oom;
    struct lp_analysis *a = &p->a;
    if (p->follow) {
        a->span_ns = lp_ticks_to_ns(r, r->last_ticks); /* now known */
        if (refit(p) != 0) goto oom;
    }
    int t = totals(p, out, err, errlen);
    if (t == -2) goto oom;
    rc = t;
    if (o->samples_out && rc == 0) *o->samples_out = lp_samples_take(a);
    if (o->site_series && lp_alloc_sites(r, a->sites) &&
        lp_site_series_of(r, o->site_series_top, o->site_series_buckets, o->site_series, a->sites, LP_RANK_HIGHEST) !=
            0)
        goto oom;
    if (missing && rc == 0) {
        snprintf(err, errlen, "%s: the trace has no %s (record with %s)", missing,
                 missing_needs & LP_NEEDS_STACKS ? "call stacks" : "CPU samples",
                 missing_needs & LP_NEEDS_STACKS ? "LIBPROF_STACKS=16" : "LIBPROF_SAMPLE_HZ=1000");
        rc = -1;
    }
    goto out;
oom:
    snprintf(err, errlen, "out of memory while converting the trace");
    rc = -1;
out:
    pass_free(p, out);
    return rc;
}
