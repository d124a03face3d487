/* stats.h: per-name call statistics shared by the converters — exact count, total, min and max,
 * and a log-linear duration histogram (64 sub-buckets per power of two, so a percentile is within
 * 1.6 % of the true value) because a trace may hold far more events than memory. */
#ifndef LP_STATS_H
#define LP_STATS_H

#include <stdint.h>
#include <stdlib.h>

#include <sys/mman.h>

#include "os.h"

#define LP_SUB_BITS 6
#define LP_SUB (1u << LP_SUB_BITS)
#define LP_HIST_BUCKETS ((64 - LP_SUB_BITS + 1) * LP_SUB)

struct fnstat {
    uint64_t count, failed, bytes;
    uint64_t timed, total_ns, min_ns, max_ns; /* over the calls that carry a duration */
    uint64_t *hist;
    int mapped; /* hist is a mapping of its own (else from lp_os_calloc) */
};

#define LP_HIST_MAPS 256      /* histograms mapped at once, at most */
extern unsigned lp_hist_maps; /* ... and now (defined in lib/convert.c) */

static inline unsigned lp_hist_bucket(uint64_t v) {
    if (v < LP_SUB) return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= LP_SUB_BITS */
    return (e - LP_SUB_BITS + 1) * LP_SUB + (unsigned)((v >> (e - LP_SUB_BITS)) & (LP_SUB - 1));
}

/* Middle of bucket b. */
static inline uint64_t lp_hist_value(unsigned b) {
    if (b < LP_SUB) return b;
    unsigned e = b / LP_SUB + LP_SUB_BITS - 1, m = b % LP_SUB;
    uint64_t lo = ((uint64_t)(LP_SUB + m)) << (e - LP_SUB_BITS);
    uint64_t width = UINT64_C(1) << (e - LP_SUB_BITS);
    return lo + width / 2;
}

static inline uint64_t lp_percentile(const struct fnstat *f, double p) {
    if (f->timed == 0 || !f->hist) return 0;
    uint64_t rank = (uint64_t)(p * (double)f->timed + 0.999999);
    if (rank < 1) rank = 1;
    uint64_t acc = 0;
    /* (the buckets below the smallest duration's are empty: 3,700 of them for microseconds) */
    for (unsigned b = lp_hist_bucket(f->min_ns); b < LP_HIST_BUCKETS; b++) {
        acc += f->hist[b];
        if (acc >= rank) {
            uint64_t v = lp_hist_value(b);
            if (v < f->min_ns) v = f->min_ns;
            if (v > f->max_ns) v = f->max_ns;
            return v;
        }
    }
    return f->max_ns;
}

/* Release what lp_fnstat_add took. */
static inline void lp_fnstat_free(struct fnstat *f) {
    if (f->mapped) {
        lp_os_munmap(f->hist, LP_HIST_BUCKETS * sizeof *f->hist);
        __atomic_fetch_sub(&lp_hist_maps, 1, __ATOMIC_RELAXED);
    } else {
        lp_os_free(f->hist);
    }
    f->hist = NULL;
    f->mapped = 0;
}

/* Add `n` calls that took `dur_ns` each (when timed). Returns -1 when out of memory. */
static inline int lp_fnstat_add(struct fnstat *f, uint64_t n, int timed, uint64_t dur_ns, uint64_t bytes, int failed) {
    f->count += n;
    if (!failed) f->bytes += bytes;
    f->failed += failed ? n : 0;
    if (!timed) return 0;
    if (!f->hist) {
        /* The first few are mapped, not calloc'ed: the kernel supplies the zeroes of the pages
         * a function's durations touch, where calloc clears all 30 KB (a fixed cost of each
         * conversion). Past LP_HIST_MAPS (a trace with thousands of BLAS shapes) calloc, so as
         * not to pile up mappings. */
        if (__atomic_fetch_add(&lp_hist_maps, 1, __ATOMIC_RELAXED) < LP_HIST_MAPS) {
            void *h = lp_os_mmap(NULL, LP_HIST_BUCKETS * sizeof *f->hist, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            f->hist = h == MAP_FAILED ? NULL : h;
            f->mapped = f->hist != NULL;
        }
        if (!f->hist) f->hist = lp_os_calloc(LP_HIST_BUCKETS, sizeof *f->hist);
        if (!f->hist) return -1;
        f->min_ns = UINT64_MAX;
    }
    f->timed += n;
    f->total_ns += dur_ns * n;
    if (dur_ns < f->min_ns) f->min_ns = dur_ns;
    if (dur_ns > f->max_ns) f->max_ns = dur_ns;
    f->hist[lp_hist_bucket(dur_ns)] += n;
    return 0;
}

#endif
