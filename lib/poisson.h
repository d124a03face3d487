/* poisson.h: the arithmetic of sampled allocation stacks (LIBPROF_ALLOC_SAMPLE=R), one place for
 * the recorder and the converter. The recorder marks points of a Poisson process of rate 1/R
 * over each thread's allocated bytes (tcmalloc's and heapprofd's sampler): the gap to the next
 * point is exponential with mean R, so an allocation of s bytes holds a point, and gets its
 * stack, with probability p(s) = 1 - exp(-s/R) — whatever came before it. The converter counts a
 * sampled allocation as s / p(s) bytes and 1 / p(s) calls: sums over sites are then unbiased
 * estimates of the exact sums (Horvitz-Thompson), a big block (p near 1) weighs what it is, and
 * a small one stands for the many like it that were not sampled. No libm: the preload links
 * none, so the two functions are written out (relative error below 1e-9 where it matters). */
#ifndef LP_POISSON_H
#define LP_POISSON_H

#include <stdint.h>
#include <string.h>

#define LP_LN2 0.69314718055994530942

/* exp(-x) for x >= 0. */
static inline double lp_exp_neg(double x) {
    if (!(x < 700)) return 0;
    int k = (int)(x / LP_LN2);
    double r = x - k * LP_LN2, term = 1, sum = 1; /* r in [0, ln 2): the series converges fast */
    for (int i = 1; i <= 14; i++) {
        term *= -r / i;
        sum += term;
    }
    uint64_t bits = (uint64_t)(1023 - k) << 52; /* 2^-k (k < 1010) */
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return sum * scale;
}

/* 1 - exp(-x), exact for small x too. */
static inline double lp_one_minus_exp_neg(double x) {
    if (x < 0.01) return x * (1 - x / 2 * (1 - x / 3 * (1 - x / 4 * (1 - x / 5))));
    return 1 - lp_exp_neg(x);
}

/* ln(u) for u in (0, 1]: u = m 2^e with m in [1, 2), ln m = 2 atanh((m - 1) / (m + 1)). */
static inline double lp_ln(double u) {
    uint64_t bits;
    memcpy(&bits, &u, sizeof bits);
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1023) << 52);
    double m;
    memcpy(&m, &bits, sizeof m);
    double z = (m - 1) / (m + 1), z2 = z * z, term = z, sum = 0; /* z < 1/3 */
    for (int i = 1; i <= 25; i += 2) {
        sum += term / i;
        term *= z2;
    }
    return e * LP_LN2 + 2 * sum;
}

/* The gap, in bytes, to the next sampled byte: exponential with mean `rate`; `rng` a xorshift64*
 * state (never 0), advanced. At least 1. */
static inline uint64_t lp_sample_gap(uint64_t *rng, uint64_t rate) {
    uint64_t x = *rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *rng = x;
    uint64_t bits53 = (x * UINT64_C(2685821657736338717)) >> 11;
    double u = (double)(bits53 + 1) / 9007199254740992.0; /* (0, 1] */
    double g = -lp_ln(u) * (double)rate;
    return g < 1 ? 1 : g > 1e18 ? (uint64_t)1e18 : (uint64_t)g;
}

/* The weight of a sampled allocation of `size` bytes: 1 / p(size). */
static inline double lp_sample_weight(uint64_t size, uint64_t rate) {
    if (!rate) return 1;
    double p = lp_one_minus_exp_neg((double)(size ? size : 1) / (double)rate);
    return p > 0 ? 1 / p : 1;
}

#endif
