/* alloc.c: the allocation family — malloc, calloc, realloc, reallocarray, free, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc.
 *
 * Every wrapper has the same shape: resolve the next definition once, ask the core whether to
 * record, take two timestamps around the real call, append one record. errno is whatever the
 * real call left (the core saves and restores it on its slow paths).
 *
 * The next definition (lpr_real, core/real.c) is found with lpr_dlsym(RTLD_NEXT), not by calling
 * __libc_malloc, so that an allocator preloaded after libprof (tcmalloc, jemalloc) keeps serving
 * the program. dlsym itself may call calloc before we know where calloc is: those requests are
 * served from a static bootstrap pool that free() and realloc() recognise. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hook.h"

/* ---- bootstrap pool ------------------------------------------------------------------------ */

static char pool[64 * 1024] __attribute__((aligned(64)));
static size_t pool_used;

static int in_pool(const void *p) { return (uintptr_t)p - (uintptr_t)pool < sizeof pool; }

/* A zeroed block from the pool, with its size stored just before it (for realloc). */
static void *pool_alloc(size_t n) {
    size_t need = ((n + 15) & ~(size_t)15) + 16;
    size_t off = __atomic_fetch_add(&pool_used, need, __ATOMIC_RELAXED);
    if (off + need > sizeof pool) return NULL;
    *(size_t *)(pool + off) = n;
    return pool + off + 16;
}

static size_t pool_size(const void *p) { return *(const size_t *)((const char *)p - 16); }

/* Resolve the next allocator (from the core's start-up). Blocks handed out by the pool while
 * dlsym ran must be recognised by free/realloc forever after: such a process keeps the
 * allocation hooks on their slow path (LP_GATE_SLOWPATH). */
static void lpr_alloc_resolve(void) {
    lpr_real_resolve_alloc();
    if (__atomic_load_n(&pool_used, __ATOMIC_RELAXED)) __atomic_fetch_or(&lpr_gate, LP_GATE_SLOWPATH, __ATOMIC_RELAXED);
}

LP_FAMILY_SETUP(alloc, lpr_alloc_resolve, NULL, NULL);

#define ENSURE_REAL()                                                \
    do {                                                             \
        if (LP_UNLIKELY(lpr_real.free == NULL)) lpr_alloc_resolve(); \
    } while (0)

/* ---- records -------------------------------------------------------------------------------
 * An allocation is stamped once, after it returned (when the block came to exist); with
 * LIBPROF_ALLOC_TIMING=1 also before the call, giving its duration. `t0` is 0 when untimed. */

static inline uint64_t alloc_t0(void) { return LP_UNLIKELY(lpr_alloc_timed) ? lpr_ticks() : 0; }

/* An allocation record preceded by its stack word (one reservation, so they stay together).
 * Inlined into the hook's slow path, where the stack is captured. */
__attribute__((always_inline)) static inline void rec_alloc_stack(struct lpr_tls *t, unsigned kind, uint64_t t0,
                                                                  uint64_t t1, size_t size, void *p) {
    uint32_t sid = 0;
    if (p) LP_STACK_CAPTURE(sid); /* a failed call allocated nothing */
    unsigned timed = lpr_alloc_timed != 0, n = 4 + timed;
    uint64_t *r = lpr_reserve(t, n);
    if (r == NULL) return;
    r[0] = lpr_word_stack(sid);
    if (timed) {
        r[1] = lpr_word0_timed(kind, t0);
        r[2] = lpr_word1(t0, t1);
    } else {
        r[1] = lpr_word0(kind, t1);
    }
    r[2 + timed] = size;
    r[3 + timed] = (uintptr_t)p;
    lpr_commit(t, r + n);
}

/* The plain allocation record (no stack, untimed): the general path's and lean_point's. */
static inline void put_alloc(struct lpr_tls *t, unsigned kind, uint64_t t1, size_t size, void *p) {
    uint64_t *r = lpr_reserve(t, 3);
    if (LP_UNLIKELY(r == NULL)) return;
    r[0] = lpr_word0(kind, t1);
    r[1] = size;
    r[2] = (uintptr_t)p;
    lpr_commit(t, r + 3);
}

/* A realloc record, its stack word first when `sid` is not 0: rec_realloc's and realloc_point's. */
static inline void put_realloc(struct lpr_tls *t, unsigned kind, uint32_t sid, uint64_t t0, uint64_t t1, size_t size,
                               void *p, void *old) {
    unsigned s = sid != 0;
    uint64_t *r = lpr_reserve(t, 5 + s);
    if (LP_UNLIKELY(r == NULL)) return;
    if (s) *r++ = lpr_word_stack(sid);
    r[0] = lpr_word0_timed(kind, t0);
    r[1] = lpr_word1(t0, t1);
    r[2] = size;
    r[3] = (uintptr_t)p;
    r[4] = (uintptr_t)old;
    lpr_commit(t, r + 5);
}

/* ---- counted, not recorded (LIBPROF_ALLOC_SAMPLE on the lean path: lpr_alloc_tally) -----------
 * Only the sampled allocations are recorded then, and blocks.c remembers each; an allocation
 * that holds no sampled byte adds to the thread's tally (format.h's TALLY), with no timestamp and
 * no append. A free asks blocks.c whether its block was recorded: then the free is recorded
 * too, else it is counted. Both sides count the bytes a block holds on the heap as its usable
 * size (a free knows nothing else), read before the real free. */

/* The bytes block p holds on the heap: its usable size — read inline from glibc's chunk header
 * (the chunk's size less its 8-byte header; a mapped chunk's header is 16 bytes, which these
 * blocks of 128 KiB and more overstate by 8), else what the allocator says. */
static inline uint64_t held(void *p) {
    if (LP_LIKELY(lpr_usable_glibc)) return (((const uint64_t *)p)[-1] & ~(uint64_t)7) - 8;
    return malloc_usable_size(p);
}

static inline void tally_net(struct lpr_tally *y, int64_t d) {
    int64_t net = (int64_t)(y->w[LP_TALLY_NET] += (uint64_t)d);
    if (net > (int64_t)y->w[LP_TALLY_RISE]) y->w[LP_TALLY_RISE] = (uint64_t)net;
}

static inline void tally_size(struct lpr_tally *y, size_t size) {
    unsigned b = lp_size_pow2(size);
    y->hist[b < LP_TALLY_HIST_BUCKETS ? b : LP_TALLY_HIST_BUCKETS - 1]++;
}

/* One more call on row `row` (LP_TALLY_*_N): the record goes out every y->every of them. */
static inline void tally_call(struct lpr_tls *t, unsigned row) {
    if (LP_UNLIKELY(++t->tally.w[row] >= t->tally.every)) lpr_tally_write(t);
}

/* A record is about to be made: the thread's counts go first when they moved the heap by a
 * sampling gap or more since they were last written — so that on this thread the heap at a
 * recorded block is off by less than one gap, without a TALLY before every sampled record. */
static inline void tally_before_record(struct lpr_tls *t) {
    const struct lpr_tally *y = &t->tally;
    int64_t net = (int64_t)y->w[LP_TALLY_NET];
    uint64_t moved = (uint64_t)(net < 0 ? -net : net);
    if (moved >= lpr_alloc_sample || y->w[LP_TALLY_RISE] >= lpr_alloc_sample) lpr_tally_write(t);
}

/* A block of `size` bytes asked, at p (not NULL), counted on row `row` (LP_TALLY_*_N). */
static inline void tally_born(struct lpr_tls *t, unsigned row, size_t size, void *p) {
    struct lpr_tally *y = &t->tally;
    y->w[row + 1] += size;
    tally_net(y, (int64_t)held(p));
    tally_size(y, size);
    y->last = (uintptr_t)p;
    tally_call(t, row);
}

/* free(p) counted: before the real free, which the block's size is read from. */
static inline void tally_died(struct lpr_tls *t, void *p) {
    struct lpr_tally *y = &t->tally;
    if (LP_LIKELY(p != NULL)) {
        uint64_t u = held(p);
        y->w[LP_TALLY_FREE_B] += u;
        y->w[LP_TALLY_NET] -= u;
        if (LP_UNLIKELY((uintptr_t)p == y->last)) { /* freed before the thread allocated again */
            y->w[LP_TALLY_TEMP_N]++;
            y->w[LP_TALLY_TEMP_B] += u;
        }
        y->last = 0;
    } else {
        y->w[LP_TALLY_BLOCKS]++; /* (a free that released no block) */
    }
    tally_call(t, LP_TALLY_FREE_N);
}

/* Under the tally, is free(p) only counted? Else p was recorded, is forgotten now, and its free
 * will be recorded: the thread's counts go first, so that its records and counts stay in order. */
static inline int free_tallied(struct lpr_tls *t, void *p) {
    if (p && lpr_blocks_take(p)) {
        tally_before_record(t);
        return 0;
    }
    return 1;
}
#define FREE_TALLIED(t, p) (LP_UNLIKELY(lpr_alloc_tally) && free_tallied(t, p))

/* The allocation of `size` bytes at p (not NULL) under the tally: 1 when counted, 0 when it is to
 * be recorded (with its stack when `sampled`) — then blocks.c has it. The aligned allocators are
 * rare: always recorded. A block blocks.c has no room for is counted. */
static int tallied(struct lpr_tls *t, unsigned kind, size_t size, void *p, int sampled) {
    int row = kind == LP_EV_MALLOC ? LP_TALLY_MALLOC_N : kind == LP_EV_CALLOC ? LP_TALLY_CALLOC_N : -1;
    if (!sampled && row >= 0) {
        tally_born(t, (unsigned)row, size, p);
        return 1;
    }
    if (lpr_blocks_add(p) == 0 || row < 0) {
        tally_before_record(t); /* the counts before the record */
        return 0;
    }
    tally_born(t, (unsigned)row, size, p);
    return 1;
}

/* realloc under the tally (the caller holds the guard or the hook): counted when neither block
 * was or is to be recorded; else recorded, the old block named only when it was recorded (a
 * counted one is released in the tally). The stack is captured here, at the depth of
 * realloc_point's. */
__attribute__((noinline)) static void *realloc_tallied(struct lpr_tls *t, unsigned kind, void *p, size_t n) {
    int was = p && lpr_blocks_take(p);
    uint64_t uo = p && !was ? held(p) : 0, t0 = was ? lpr_ticks() : 0;
    void *q = LPR_REAL(realloc)(p, n);
    struct lpr_tally *y = &t->tally;
    if (q == NULL && n) { /* failed: p lives on as it was */
        if (was) lpr_blocks_add(p);
        tally_before_record(t);
        put_realloc(t, kind, 0, t0, lpr_ticks(), n, NULL, was ? p : NULL);
        return q;
    }
    int sampled = q && lpr_alloc_sampled(t, n);
    int record = was || sampled || kind != LP_EV_REALLOC; /* (reallocarray is rare: recorded) */
    if (record && q && lpr_blocks_add(q) != 0 && !was && kind == LP_EV_REALLOC) record = 0; /* no room: counted */
    if (!record) {
        y->w[LP_TALLY_REALLOC_B] += n;
        int64_t d = -(int64_t)uo;
        if (q) {
            d += (int64_t)held(q);
            tally_size(y, n);
            y->last = (uintptr_t)q;
        }
        y->w[LP_TALLY_BLOCKS] += (uint64_t)((q != NULL) - (p != NULL));
        tally_net(y, d);
        tally_call(t, LP_TALLY_REALLOC_N);
        return q;
    }
    if (p && !was) { /* the old block was counted: released in the tally */
        y->w[LP_TALLY_NET] -= uo;
        y->w[LP_TALLY_BLOCKS]--;
    }
    tally_before_record(t);
    uint64_t t1 = lpr_ticks();
    uint32_t sid = 0;
    if (sampled) LP_STACK_CAPTURE(sid);
    put_realloc(t, kind, sid, was ? t0 : t1, t1, n, q, was ? p : NULL);
    return q;
}

__attribute__((always_inline)) static inline void rec_alloc(struct lpr_tls *t, unsigned kind, uint64_t t0, size_t size,
                                                            void *p) {
    uint64_t t1 = lpr_ticks();
    uint64_t *r;
    int sampled = 0;
    if (LP_UNLIKELY(lpr_stack_depth)) { /* LIBPROF_STACKS: every allocation's, or a sample's */
        if (LP_LIKELY(!lpr_alloc_sample)) {
            sampled = 1;
        } else {
            sampled = lpr_alloc_sampled(t, size);
            if (lpr_alloc_tally && p && tallied(t, kind, size, p, sampled)) { /* counted */
                lpr_hook_leave(t);
                return;
            }
        }
    }
    if (sampled) { /* the stack's id first */
        rec_alloc_stack(t, kind, t0, t1, size, p);
    } else if (LP_LIKELY(!lpr_alloc_timed)) {
        put_alloc(t, kind, t1, size, p);
    } else if ((r = lpr_reserve(t, 4)) != NULL) {
        r[0] = lpr_word0_timed(kind, t0);
        r[1] = lpr_word1(t0, t1);
        r[2] = size;
        r[3] = (uintptr_t)p;
        lpr_commit(t, r + 4);
    }
    lpr_hook_leave(t);
}

static inline void rec_free(struct lpr_tls *t, uint64_t t0, void *p) {
    uint64_t *r;
    if (LP_LIKELY(!lpr_alloc_timed)) {
        if (LP_LIKELY((r = lpr_reserve(t, 2)) != NULL)) {
            r[0] = lpr_word0(LP_EV_FREE, t0);
            r[1] = (uintptr_t)p;
            lpr_commit(t, r + 2);
        }
    } else if ((r = lpr_reserve(t, 3)) != NULL) {
        r[0] = lpr_word0_timed(LP_EV_FREE, t0);
        r[1] = lpr_word1(t0, lpr_ticks());
        r[2] = (uintptr_t)p;
        lpr_commit(t, r + 3);
    }
    lpr_hook_leave(t);
}

/* realloc releases at its start and allocates at its end, so it always carries both stamps:
 * with one, another thread's reuse of the released block could appear to come first. */
/* (always inlined: a stack capture counts the hook frames above it, the walk's slack is three) */
__attribute__((always_inline)) static inline void rec_realloc(struct lpr_tls *t, unsigned kind, uint64_t t0,
                                                              size_t size, void *p, void *old) {
    uint64_t t1 = lpr_ticks();
    uint32_t sid = 0;
    if (LP_UNLIKELY(lpr_stack_depth) && p && lpr_alloc_sampled(t, size)) LP_STACK_CAPTURE(sid);
    put_realloc(t, kind, sid, t0, t1, size, p, old);
    lpr_hook_leave(t);
}

/* ---- the interposed functions ----------------------------------------------------------------
 * Each has a fast path that is all an unprofiled program pays: one load of the gate, one test,
 * and a tail jump to the real function (the core resolves `real` before it opens the gate).
 *
 * Recording takes the lean path, *_lean, when the allocation records are plain (no stacks,
 * untimed, the TSC clock: LP_GATE_LEAN) and nothing is pending — one guard, the real call, one
 * rdtsc and one append, few enough registers that the function needs almost no stack frame —
 * and the general path, *_general, for everything else (start-up, the bootstrap pool, stacks,
 * timed records), kept out of line so that its larger frame (a stack capture's buffer) is paid
 * only by those who use it. The exported function reads the gate once and picks one. */

#define GATE_CLOSED(g) LP_LIKELY(!((g) & (LP_GATE_UNINIT | LP_GATE_STICKY | (1u << LP_FAM_ALLOC))))
#define LEAN(g) LP_LIKELY(((g) & (LP_GATE_UNINIT | LP_GATE_STICKY | LP_GATE_LEAN)) == LP_GATE_LEAN)

/* The lean path's append of `n` words (a constant: the copy unrolls, and the words stay in
 * registers), or, when the chunk is full, the general reservation out of line. The guard is
 * released by the caller. */
__attribute__((noinline)) static void lean_append_slow(struct lpr_tls *t, unsigned n, uint64_t a, uint64_t b,
                                                       uint64_t c, uint64_t d, uint64_t e) {
    uint64_t *r = lpr_reserve(t, n);
    if (r == NULL) return;
    const uint64_t w[5] = {a, b, c, d, e};
    for (unsigned i = 0; i < n; i++) r[i] = w[i];
    lpr_commit(t, r + n);
}

#define LEAN_APPEND(t, n, a, b, c, d, e)                                 \
    do {                                                                 \
        uint64_t *r_ = (t)->cur;                                         \
        if (LP_UNLIKELY((uintptr_t)r_ + (n)*8u > (uintptr_t)(t)->end)) { \
            lean_append_slow((t), (n), (a), (b), (c), (d), (e));         \
        } else { /* each word stored once, straight from its register */ \
            r_[0] = (a);                                                 \
            r_[1] = (b);                                                 \
            if ((n) > 2) r_[2] = (c);                                    \
            if ((n) > 3) r_[3] = (d);                                    \
            if ((n) > 4) r_[4] = (e);                                    \
            lpr_commit((t), r_ + (n));                                   \
        }                                                                \
    } while (0)

/* LIBPROF_ALLOC_SAMPLE on the lean path: an allocation that holds no sampled byte only counts
 * down to the next (LEAN_POINT); one that may hold one is recorded here, out of line, with its
 * stack when it does (lpr_alloc_sample_point draws the next gap). */
__attribute__((noinline)) static void lean_point(struct lpr_tls *t, unsigned kind, size_t size, void *p) {
    int sampled = lpr_alloc_sample_point(t, size);
    if (LP_UNLIKELY(lpr_alloc_tally) && p && tallied(t, kind, size, p, sampled)) return;
    uint64_t t1 = lpr_ticks();
    if (sampled)
        rec_alloc_stack(t, kind, 0, t1, size, p);
    else
        put_alloc(t, kind, t1, size, p);
}

/* Sampled stacks on the lean path: 1 when a sampled byte may fall in the `n` bytes (the
 * allocation goes out of line, to lean_point or realloc_point), else they are counted down. */
#define LEAN_POINT(t, n) \
    (LP_UNLIKELY(lpr_stack_depth) && (LP_UNLIKELY((t)->sample_left <= (n)) ? 1 : ((t)->sample_left -= (n), 0)))

/* What a calloc asks for (SIZE_MAX when the product overflows: the call fails). */
static inline size_t calloc_bytes(size_t nmemb, size_t size) {
    size_t total;
    return __builtin_mul_overflow(nmemb, size, &total) ? SIZE_MAX : total;
}

/* The tally path (LP_GATE_TALLY): the lean path's shape, counting what it does not record. */
#define TALLY(g) LP_LIKELY(((g) & (LP_GATE_UNINIT | LP_GATE_STICKY | LP_GATE_TALLY)) == LP_GATE_TALLY)

__attribute__((noinline)) static void *malloc_tally(size_t n) {
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) return LPR_REAL(malloc)(n);
    t->guard = 1;
    void *p = LPR_REAL(malloc)(n);
    if (LP_UNLIKELY(p == NULL)) /* failed: recorded as such */
        put_alloc(t, LP_EV_MALLOC, lpr_ticks(), n, p);
    else if (LEAN_POINT(t, n))
        lean_point(t, LP_EV_MALLOC, n, p);
    else
        tally_born(t, LP_TALLY_MALLOC_N, n, p);
    t->guard = 0;
    return p;
}

__attribute__((noinline)) static void *calloc_tally(size_t nmemb, size_t size) {
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) return LPR_REAL(calloc)(nmemb, size);
    t->guard = 1;
    void *p = LPR_REAL(calloc)(nmemb, size);
    size_t total = calloc_bytes(nmemb, size);
    if (LP_UNLIKELY(p == NULL))
        put_alloc(t, LP_EV_CALLOC, lpr_ticks(), total, p);
    else if (LEAN_POINT(t, total))
        lean_point(t, LP_EV_CALLOC, total, p);
    else
        tally_born(t, LP_TALLY_CALLOC_N, total, p);
    t->guard = 0;
    return p;
}

__attribute__((noinline)) static void free_tally(void *p) {
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) {
        LPR_REAL(free)(p);
        return;
    }
    t->guard = 1;
    if (free_tallied(t, p)) {
        tally_died(t, p);
        LPR_REAL(free)(p);
    } else {
        uint64_t w0 = lpr_word0(LP_EV_FREE, lpr_tsc());
        LPR_REAL(free)(p);
        LEAN_APPEND(t, 2, w0, (uintptr_t)p, 0, 0, 0);
    }
    t->guard = 0;
}

__attribute__((noinline)) static void *realloc_tally(void *p, size_t n) {
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) return LPR_REAL(realloc)(p, n);
    t->guard = 1;
    void *q = realloc_tallied(t, LP_EV_REALLOC, p, n);
    t->guard = 0;
    return q;
}

__attribute__((noinline)) static void *malloc_general(size_t n) {
    if (LP_UNLIKELY(lpr_real.malloc == NULL)) {
        if (lpr_real_resolving) return pool_alloc(n);
        lpr_alloc_resolve();
    }
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC);
    if (LP_LIKELY(!t)) return LPR_REAL(malloc)(n);
    uint64_t t0 = alloc_t0();
    void *p = LPR_REAL(malloc)(n);
    rec_alloc(t, LP_EV_MALLOC, t0, n, p);
    return p;
}

__attribute__((noinline)) static void *malloc_lean(size_t n) {
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) return LPR_REAL(malloc)(n); /* libprof's own, or re-entered */
    t->guard = 1;
    void *p = LPR_REAL(malloc)(n);
    if (LEAN_POINT(t, n))
        lean_point(t, LP_EV_MALLOC, n, p);
    else
        LEAN_APPEND(t, 3, lpr_word0(LP_EV_MALLOC, lpr_tsc()), n, (uintptr_t)p, 0, 0);
    t->guard = 0;
    return p;
}

LP_EXPORT void *malloc(size_t n) {
    uint32_t g = lpr_gate;
    if (GATE_CLOSED(g)) return LPR_REAL(malloc)(n);
    if (LEAN(g)) return malloc_lean(n);
    if (TALLY(g)) return malloc_tally(n);
    return malloc_general(n);
}

__attribute__((noinline)) static void *calloc_general(size_t nmemb, size_t size) {
    if (LP_UNLIKELY(lpr_real.calloc == NULL)) {
        if (lpr_real_resolving) {
            size_t n;
            return __builtin_mul_overflow(nmemb, size, &n) ? NULL : pool_alloc(n);
        }
        lpr_alloc_resolve();
    }
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC);
    if (LP_LIKELY(!t)) return LPR_REAL(calloc)(nmemb, size);
    uint64_t t0 = alloc_t0();
    void *p = LPR_REAL(calloc)(nmemb, size);
    size_t total = calloc_bytes(nmemb, size);
    rec_alloc(t, LP_EV_CALLOC, t0, total, p);
    return p;
}

__attribute__((noinline)) static void *calloc_lean(size_t nmemb, size_t size) {
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) return LPR_REAL(calloc)(nmemb, size);
    t->guard = 1;
    void *p = LPR_REAL(calloc)(nmemb, size);
    size_t total = calloc_bytes(nmemb, size);
    if (LEAN_POINT(t, total))
        lean_point(t, LP_EV_CALLOC, total, p);
    else
        LEAN_APPEND(t, 3, lpr_word0(LP_EV_CALLOC, lpr_tsc()), total, (uintptr_t)p, 0, 0);
    t->guard = 0;
    return p;
}

LP_EXPORT void *calloc(size_t nmemb, size_t size) {
    uint32_t g = lpr_gate;
    if (GATE_CLOSED(g)) return LPR_REAL(calloc)(nmemb, size);
    if (LEAN(g)) return calloc_lean(nmemb, size);
    if (TALLY(g)) return calloc_tally(nmemb, size);
    return calloc_general(nmemb, size);
}

__attribute__((noinline)) static void free_general(void *p) {
    if (LP_UNLIKELY(in_pool(p))) return;
    ENSURE_REAL();
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC);
    if (LP_LIKELY(!t)) {
        LPR_REAL(free)(p);
        return;
    }
    if (FREE_TALLIED(t, p)) {
        tally_died(t, p);
        LPR_REAL(free)(p);
        lpr_hook_leave(t);
        return;
    }
    uint64_t t0 = lpr_ticks();
    LPR_REAL(free)(p);
    rec_free(t, t0, p);
}

__attribute__((noinline)) static void free_lean(void *p) {
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) {
        LPR_REAL(free)(p);
        return;
    }
    uint64_t w0 = lpr_word0(LP_EV_FREE, lpr_tsc()); /* a release takes effect at its start */
    t->guard = 1;
    LPR_REAL(free)(p);
    LEAN_APPEND(t, 2, w0, (uintptr_t)p, 0, 0, 0);
    t->guard = 0;
}

LP_EXPORT void free(void *p) {
    uint32_t g = lpr_gate;
    if (GATE_CLOSED(g)) {
        LPR_REAL(free)(p);
        return;
    }
    if (LEAN(g)) {
        free_lean(p);
        return;
    }
    if (TALLY(g)) {
        free_tally(p);
        return;
    }
    free_general(p);
}

/* Off for good, with the bootstrap pool untouched, the allocation hooks can leave the program's
 * way like the other pass-through hooks (core/unhook.c). */
static int pool_untouched(void) { return __atomic_load_n(&pool_used, __ATOMIC_RELAXED) == 0; }
LP_UNHOOKABLE_IF(ALLOC, malloc, pool_untouched);
LP_UNHOOKABLE_IF(ALLOC, free, pool_untouched);
LP_UNHOOKABLE_IF(ALLOC, calloc, pool_untouched);
LP_UNHOOKABLE_IF(ALLOC, realloc, pool_untouched);

/* realloc of a pool block: move it to the real allocator. */
static void *pool_realloc(void *p, size_t n) {
    void *q = LPR_REAL(malloc)(n);
    if (q) {
        size_t old = pool_size(p);
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}

__attribute__((noinline)) static void *realloc_general(void *p, size_t n) {
    if (LP_UNLIKELY(lpr_real.realloc == NULL)) {
        if (lpr_real_resolving) {
            void *q = pool_alloc(n);
            if (q && p) memcpy(q, p, pool_size(p) < n ? pool_size(p) : n);
            return q;
        }
        lpr_alloc_resolve();
    }
    if (LP_UNLIKELY(in_pool(p))) return pool_realloc(p, n);
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC);
    if (LP_LIKELY(!t)) return LPR_REAL(realloc)(p, n);
    if (LP_UNLIKELY(lpr_alloc_tally)) {
        void *q = realloc_tallied(t, LP_EV_REALLOC, p, n);
        lpr_hook_leave(t);
        return q;
    }
    uint64_t t0 = lpr_ticks();
    void *q = LPR_REAL(realloc)(p, n);
    rec_realloc(t, LP_EV_REALLOC, t0, n, q, p);
    return q;
}

/* realloc_lean's lean_point: the record of rec_realloc, with its stack when a point falls in it. */
__attribute__((noinline)) static void realloc_point(struct lpr_tls *t, uint64_t t0, size_t n, void *q, void *p) {
    uint64_t t1 = lpr_ticks();
    uint32_t sid = 0;
    if (lpr_alloc_sample_point(t, n)) LP_STACK_CAPTURE(sid);
    put_realloc(t, LP_EV_REALLOC, sid, t0, t1, n, q, p);
}

/* A realloc always carries both stamps (see rec_realloc). No pool block exists on the lean path:
 * the pool is used only before the allocator is resolved, and then LP_GATE_SLOWPATH stays set. */
__attribute__((noinline)) static void *realloc_lean(void *p, size_t n) {
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) return LPR_REAL(realloc)(p, n);
    uint64_t t0 = lpr_tsc();
    t->guard = 1;
    void *q = LPR_REAL(realloc)(p, n);
    if (q && LEAN_POINT(t, n)) {
        realloc_point(t, t0, n, q, p);
        t->guard = 0;
        return q;
    }
    uint64_t t1 = lpr_tsc();
    LEAN_APPEND(t, 5, lpr_word0_timed(LP_EV_REALLOC, t0), lpr_word1(t0, t1), n, (uintptr_t)q, (uintptr_t)p);
    t->guard = 0;
    return q;
}

LP_EXPORT void *realloc(void *p, size_t n) {
    uint32_t g = lpr_gate;
    if (GATE_CLOSED(g)) return LPR_REAL(realloc)(p, n);
    if (LEAN(g)) return realloc_lean(p, n);
    if (TALLY(g)) return realloc_tally(p, n);
    return realloc_general(p, n);
}

/* Implemented over the next realloc (glibc does the same), so that a program with its own
 * allocator preloaded never reaches glibc's realloc with a foreign pointer. */
LP_EXPORT void *reallocarray(void *p, size_t nmemb, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(nmemb, size, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    ENSURE_REAL();
    if (LP_UNLIKELY(in_pool(p))) return pool_realloc(p, n);
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC);
    if (LP_LIKELY(!t)) return LPR_REAL(realloc)(p, n);
    if (LP_UNLIKELY(lpr_alloc_tally)) {
        void *q = realloc_tallied(t, LP_EV_REALLOCARRAY, p, n);
        lpr_hook_leave(t);
        return q;
    }
    uint64_t t0 = lpr_ticks();
    void *q = LPR_REAL(realloc)(p, n);
    rec_realloc(t, LP_EV_REALLOCARRAY, t0, n, q, p);
    return q;
}

/* The aligned allocators are rare; they share one plain shape. */
LP_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    ENSURE_REAL();
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC);
    if (LP_LIKELY(!t)) return LPR_REAL(posix_memalign)(out, align, n);
    uint64_t t0 = alloc_t0();
    int rc = LPR_REAL(posix_memalign)(out, align, n);
    rec_alloc(t, LP_EV_POSIX_MEMALIGN, t0, n, rc == 0 ? *out : NULL);
    return rc;
}

#define ALIGNED_HOOK(fn, KIND, PARAMS, ARGS)              \
    LP_EXPORT void *fn PARAMS {                           \
        ENSURE_REAL();                                    \
        struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC); \
        if (LP_LIKELY(!t)) return lpr_real.fn ARGS;       \
        uint64_t t0 = alloc_t0();                         \
        void *p = lpr_real.fn ARGS;                       \
        rec_alloc(t, KIND, t0, n, p);                     \
        return p;                                         \
    }

ALIGNED_HOOK(aligned_alloc, LP_EV_ALIGNED_ALLOC, (size_t align, size_t n), (align, n))
ALIGNED_HOOK(memalign, LP_EV_MEMALIGN, (size_t align, size_t n), (align, n))
ALIGNED_HOOK(valloc, LP_EV_VALLOC, (size_t n), (n))
ALIGNED_HOOK(pvalloc, LP_EV_PVALLOC, (size_t n), (n))
