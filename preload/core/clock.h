/* clock.h: timestamps (clock.c), and the hot path's inline. */
#ifndef LPR_CLOCK_H
#define LPR_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "state.h"

LP_HIDDEN extern int lpr_clock_kind;          /* enum lp_clock in use */
LP_HIDDEN extern uint64_t lpr_origin_ticks;   /* record timestamps are relative to this */
LP_HIDDEN extern uint64_t lpr_origin_mono_ns; /* CLOCK_MONOTONIC at the same moment */
LP_HIDDEN void lpr_clock_init(int requested);
LP_HIDDEN uint64_t lpr_mono_ns(void);
LP_HIDDEN uint64_t lpr_real_ns(void);
LP_HIDDEN uint64_t lpr_origin_boot_ns(void);

/* The timestamp of the hot path: the TSC where it is invariant (about 10 ns here, against 25 ns
 * for clock_gettime through the vDSO), CLOCK_MONOTONIC otherwise. */
static inline uint64_t lpr_ticks(void) {
#if defined(__x86_64__)
    if (LP_LIKELY(lpr_clock_kind == LP_CLOCK_TSC)) return __rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The TSC itself, for hooks that have checked lpr_clock_kind == LP_CLOCK_TSC (lpr_alloc_lean). */
static inline uint64_t lpr_tsc(void) {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return lpr_ticks();
#endif
}

#endif
