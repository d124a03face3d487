/* cpu.h: what a trace's CPU samples add up to, as the report's views take them — from a raw
 * trace's samples (samples.c) or from a Chrome trace's metadata (tools/chrome_in.c). */
#ifndef LP_CPU_H
#define LP_CPU_H

#include <stddef.h>
#include <stdint.h>

#define LP_CPU_BUCKETS 400 /* each thread's CPU over time: the run in this many slices */
struct lp_cpu_thread {
    int64_t pid, tid;
    char name[48];                   /* "main", the name it was given, or "thread TID" */
    uint64_t samples;                /* ... taken on it */
    uint32_t bucket[LP_CPU_BUCKETS]; /* its samples in each slice of the run */
};
struct lp_cpu_row { /* a function, or a Python line: samples as the innermost frame, and anywhere */
    char *name;
    uint64_t self, total;
};
struct lp_cpu {
    uint64_t period_ns; /* CPU time a sample stands for; 0: the trace has no samples */
    uint64_t span_ns;   /* the run the buckets cut */
    uint64_t samples;
    struct lp_cpu_thread *threads;
    size_t nthreads;
    struct lp_cpu_row *fns, *lines; /* by samples as the innermost frame, most first */
    size_t nfns, nlines;
    int fns_cut; /* fns holds only the first of the trace's functions (a Chrome trace's metadata) */
};

/* Frees what `cpu` holds (lp_slices_free does it for a trace's). */
void lp_cpu_free(struct lp_cpu *cpu);

#endif
