/* clock.c: choosing the hot-path clock and anchoring it to CLOCK_MONOTONIC, CLOCK_REALTIME and
 * CLOCK_BOOTTIME.
 *
 * The TSC is used only when the CPU says it is invariant (constant rate, runs in deep sleep);
 * the decoder converts ticks to nanoseconds with the (ticks, monotonic ns) pairs that the file
 * header and every chunk header carry, so no calibration delay is spent at start-up. */
#define _GNU_SOURCE
#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "clock.h"
#include "log.h"
#include "state.h"

int lpr_clock_kind = LP_CLOCK_MONOTONIC;
uint64_t lpr_origin_ticks;
uint64_t lpr_origin_mono_ns;

static int tsc_invariant(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1; /* "Invariant TSC" */
#else
    return 0;
#endif
}

uint64_t lpr_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t lpr_real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_BOOTTIME when CLOCK_MONOTONIC was at origin (boot time runs on through a suspend,
 * monotonic time does not: read now, less the monotonic time since) */
uint64_t lpr_origin_boot_ns(void) {
    struct timespec ts;
    uint64_t mono = lpr_mono_ns();
    if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec - (mono - lpr_origin_mono_ns);
}

/* Pick the clock (`requested` is an enum lp_clock or -1 for the best one) and set the origin. */
void lpr_clock_init(int requested) {
    int tsc = tsc_invariant();
    if (requested == LP_CLOCK_TSC && !tsc)
        lpr_warn("LIBPROF_CLOCK=tsc: this CPU has no invariant TSC; using CLOCK_MONOTONIC");
    lpr_clock_kind = (requested != LP_CLOCK_MONOTONIC && tsc) ? LP_CLOCK_TSC : LP_CLOCK_MONOTONIC;
    lpr_origin_ticks = lpr_ticks();
    lpr_origin_mono_ns = lpr_mono_ns();
}
