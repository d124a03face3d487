/* state.h: what every hook reads first, defined in state.c: the gate of the recording families, the
 * thread's own state (initial-exec TLS), the switches the hot path tests, the guard against
 * recording libprof itself. The floor of the recorder: it includes no other file of it. */
#ifndef LPR_STATE_H
#define LPR_STATE_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "libprof/format.h"
#include "lib/cc.h"

#define LP_HIDDEN __attribute__((visibility("hidden")))
#define LP_EXPORT __attribute__((visibility("default")))
#define LP_TLS __thread __attribute__((tls_model("initial-exec")))

#define LP_RANGE_DEPTH 64

/* The allocations and frees a thread counted and did not record (LIBPROF_ALLOC_SAMPLE): a TALLY
 * record's payload as it is written (format.h), then when to write it. */
struct lpr_tally {
    uint64_t w[LP_TALLY_HIST];
    uint32_t hist[LP_TALLY_HIST_BUCKETS];
    uint64_t every; /* a count of mallocs (or frees) that writes it: 0 until the thread's first
                     * record (the first one writes), 1 past its TLS destructors (each one) */
    uintptr_t last; /* the block the thread allocated last (0 once it freed one): temporaries */
};
static inline int lpr_tally_any(const struct lpr_tally *y) {
    return (y->w[LP_TALLY_MALLOC_N] | y->w[LP_TALLY_CALLOC_N] | y->w[LP_TALLY_REALLOC_N] | y->w[LP_TALLY_FREE_N] |
            y->w[LP_TALLY_NET] | y->w[LP_TALLY_BLOCKS]) != 0; /* (a recorded realloc's counted old block) */
}

/* Thread-local recording state. It lives in initial-exec TLS so the hot path reaches it with one
 * %fs-relative access; everything a flush needs lives in the registry node `thr`. */
struct lpr_tls {
    uint64_t *cur; /* next free word of the chunk */
    uint64_t *end; /* end of the chunk */
    uint8_t guard; /* inside a hook or inside libprof itself: record nothing */
    uint8_t late;  /* thread past its last TLS destructor: every commit writes through */
    uint8_t state; /* enum lpr_tls_state */
    uint8_t dtor_round;
    uint32_t tid;
    uint32_t py_stack;            /* the Python frames at the start of the call being recorded (python.c) */
    uint8_t in_unwind;            /* inside libunwind for libprof (stacks.c): a sample must not walk again */
    uint8_t in_loader;            /* inside dlopen, dlclose or dl_iterate_phdr (hooks/dl.c): nor then */
    uint8_t stack_scans;          /* lookups of the thread's stack mapping (walk.c) */
    uint8_t probe_fault;          /* a probed load faulted (python.c: lpr_py_fault_fixup stepped over it) */
    uintptr_t stack_lo, stack_hi; /* the stack mapping the thread's samples walk in (walk.c) */
    void *scache, *pycache;       /* the registry node's stack and Python caches, once made (tbuf.c) */
    uint64_t records;             /* records committed by this thread (for the END statistics) */
    struct lpr_thread *thr;       /* registry node owning the chunk memory */
    uint64_t late_rec[24];        /* scratch for records written after the thread's destructors ran */
    uint64_t life_t0, life_creator, life_flow; /* thread.c: a thread libprof saw created (flow != 0) */
    uint64_t sample_left, sample_rng;          /* LIBPROF_ALLOC_SAMPLE: bytes to the next sampled one (stacks.c) */
    struct lpr_tally tally;                    /* ... and what was counted, not recorded (hooks/alloc.c) */
    uint32_t range_depth;                      /* open annotation ranges (annot.c), including unrecorded deep ones */
    uint32_t range_id[LP_RANGE_DEPTH];
    uint64_t range_t0[LP_RANGE_DEPTH];
};

enum lpr_tls_state { LP_TLS_NEW = 0, LP_TLS_ACTIVE, LP_TLS_LATE, LP_TLS_FAILED };

LP_HIDDEN extern LP_TLS struct lpr_tls lpr_tls;

/* The gate: one word read by every hook. Bit f is set while family f records; LP_GATE_UNINIT
 * is set until the first hook call has read the environment. Off costs one load and one test. */
#define LP_GATE_UNINIT (1u << 31)
/* Set by a hook family that must see every call even when nothing records (the allocation
 * family, once dlsym has taken blocks from its bootstrap pool). Kept across gate changes. */
#define LP_GATE_SLOWPATH (1u << 30)
LP_HIDDEN extern volatile uint32_t lpr_gate;

/* Set while the part of libprof's set-up that may allocate or look symbols up (libunwind,
 * the module map, signal handlers, unhooking) has not run: only the allocation family's hooks
 * and libprof's constructor do it, never a hook that a program's own allocator may call while it
 * initialises itself (mmap, a lock, a read of /proc). Only the allocation hooks test this bit. */
#define LP_GATE_PENDING (1u << 29)
#define LP_GATE_STICKY (LP_GATE_SLOWPATH | LP_GATE_PENDING)
/* Set beside the allocation family's bit when its records are plain (lpr_alloc_lean): the
 * allocation hooks' lean path needs one test of the gate for everything. */
#define LP_GATE_LEAN (1u << 28)
/* Set beside the families while a Python interpreter libprof can read is in the process
 * (python.c): a call hook then reads the calling Python line, with no other load to know it. */
#define LP_GATE_PY (1u << 27)
/* Set instead of LP_GATE_LEAN when the plain allocation records are sampled (lpr_alloc_tally):
 * the hooks then take their tally path, and the lean path pays nothing for it. */
#define LP_GATE_TALLY (1u << 26)
_Static_assert(LP_FAM_COUNT <= 26, "the families' bits stay below the gate's own");

/* Allocation records are plain: no stacks, untimed, TSC timestamps (hooks/alloc.c's lean path,
 * LP_GATE_LEAN). Set once by life.c, before LP_GATE_PENDING is cleared. */
LP_HIDDEN extern int lpr_alloc_lean;
LP_HIDDEN extern int lpr_alloc_tally; /* blocks.c: LIBPROF_ALLOC_SAMPLE on the lean path */
LP_HIDDEN extern int lpr_py_on;       /* python.c: an interpreter libprof can read is in the process */

/* Open or close families without losing the sticky bits. */
static inline void lpr_gate_set(uint32_t families) {
    uint32_t old = lpr_gate, want;
    if ((families & (1u << LP_FAM_ALLOC)) && lpr_alloc_lean) families |= lpr_alloc_tally ? LP_GATE_TALLY : LP_GATE_LEAN;
    if (families && __atomic_load_n(&lpr_py_on, __ATOMIC_RELAXED)) families |= LP_GATE_PY;
    do {
        want = families | (old & LP_GATE_STICKY);
    } while (!__atomic_compare_exchange_n(&lpr_gate, &old, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
}

static inline void lpr_hook_leave(struct lpr_tls *t) { t->guard = 0; }

/* Hold the guard around libprof's own use of malloc/free: the compiler knows those builtins do
 * not read program memory and would otherwise drop a plain store before them. */
static inline uint8_t lpr_guard_hold(struct lpr_tls *t) {
    uint8_t g = t->guard;
    *(volatile uint8_t *)&t->guard = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return g;
}
static inline void lpr_guard_restore(struct lpr_tls *t, uint8_t g) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    *(volatile uint8_t *)&t->guard = g;
}

/* The CPU sampler is on (sample.c sets it): the signal it uses, else 0. Read where a wait or a
 * write must not be cut short by a sample. */
LP_HIDDEN extern int lpr_sampling;
static inline int lpr_sample_signal(void) { return __atomic_load_n(&lpr_sampling, __ATOMIC_ACQUIRE) ? SIGTRAP : 0; }

#endif
