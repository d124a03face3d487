/* report.h: libprof-report's analyses over a trace seen as time slices (struct lp_slices):
 * per-name statistics with self time and percentiles, per-thread busy time, iterations,
 * framework tax, what-if, diff, events CSV, merge, HTML. A raw libprof trace becomes slices
 * through lib/'s decoder (lp_slices_from_reader); Chrome traces through chrome_in.c. */
#ifndef LP_REPORT_H
#define LP_REPORT_H

#include <regex.h>
#include <stdint.h>
#include <stdio.h>

#include "chrome_in.h"
#include "lib/reader.h"
#include "lib/sites.h"

enum rp_sort { RP_TOTAL, RP_SELF, RP_COUNT, RP_MEAN, RP_P50, RP_P99, RP_MAX, RP_NAME };
enum rp_units { RP_AUTO, RP_NS, RP_US, RP_MS, RP_S };

#define RP_MAX_WHATIF 8

struct rp_opts {
    int top; /* rows per table (0 = all) */
    enum rp_sort sort;
    enum rp_units units;
    int have_filter;
    regex_t filter;         /* --filter: names shown */
    const char *iterations; /* --iterations REGEX, or NULL */
    regex_t iter_re;
    int skip; /* --skip N: warm-up iterations left out of the statistics */
    int have_kernels;
    regex_t kernels; /* --kernels: names that count as kernels, beside the default families */
    int nwhatif;
    regex_t whatif_re[RP_MAX_WHATIF];
    double whatif_ratio[RP_MAX_WHATIF];
    const char *whatif_text[RP_MAX_WHATIF];
    int by_shapes; /* --by-shapes: PyTorch's operators by input shapes */
};

/* The report printed by default (tables), on `f`. */
int rp_print(FILE *f, const char *label, const struct lp_slices *c, const struct rp_opts *o);
/* --diff: `base` → `cur`, per name, by impact. */
int rp_diff(FILE *f, const struct lp_slices *base, const struct lp_slices *cur, const struct rp_opts *o);
/* What one conversion of a raw trace makes for the page (libprof-report.c): the summary's text
 * (the memory/I/O/BLAS tables), the folded stacks of the four allocation flame graphs, and the
 * "heap by site" series (nseries 0: none) and the CPU samples. */
#define RP_SITE_TOP 8       /* the page's "heap by site": its stacks */
#define RP_SITE_BUCKETS 300 /* ... and its instants */
struct rp_page_parts {
    char *summary;
    char *folded[4];
    struct lp_site_series sites;
    struct lp_samples *samples; /* the CPU samples (NULL: none, or the page gathers its own) */
};
/* --html: one self-contained file (inline CSS and SVG, no script, no network). `r` (may be NULL)
 * adds the heap-over-time plots; `parts` (may be NULL) what the conversion made for it. */
int rp_html(FILE *f, const char *label, const struct lp_slices *c, const struct lp_reader *r,
            const struct rp_page_parts *parts, const struct rp_opts *o);
/* For the HTML page: the top rows as the table shows them (name, count, total, self, mean, p50,
 * p99, max), and each thread's wall, busy and kernel time. */
int rp_top_rows(const struct lp_slices *c, const struct rp_opts *o,
                void (*emit)(void *, const char *, size_t, const int64_t *), void *arg);
/* The CPU samples' tables (by function, by Python line) as a Chrome trace's metadata keeps them
 * (a raw trace's come with the converter's summary). Nothing when the trace has none. */
int rp_print_cpu(FILE *f, const struct lp_slices *c, const struct rp_opts *o);
/* PyTorch's operators as the trace's metadata keeps them (by name, or by name and input shapes
 * with --by-shapes), with the CPU sampled inside them; nothing when the trace has none. */
int rp_print_torch(FILE *f, const struct lp_slices *c, const struct rp_opts *o);
int rp_torch_rows(const struct lp_slices *c, const struct rp_opts *o, int by_shapes,
                  void (*emit)(void *, const struct lp_op_row *, int64_t cpu), void *arg);
struct rp_thread_share {
    int64_t pid, tid, wall, busy, kernel; /* wall 0: a thread with samples only */
    int64_t cpu, cpu_kernel;              /* sampled CPU time, in kernels; -1: not sampled */
    int64_t gil_wait, gil_held, off_cpu;  /* Python threads (lib/gil.h); gil_wait -1: the trace has no GIL wait */
};
int rp_thread_shares(const struct lp_slices *c, const struct rp_opts *o,
                     void (*emit)(void *, const struct rp_thread_share *), void *arg);
/* The latency of each iteration (--iterations), in time order; their number in *n (caller frees). */
int64_t *rp_iteration_latencies(const struct lp_slices *c, const struct rp_opts *o, size_t *n);

/* Cross-host clock skew of a job's ranks (tools/skew.c). Per input: its wall-clock anchor, rank
 * (-1: not a rank), host and the ends of its first MPI_Barrier [0] and MPI_Init [1] on the main
 * thread, in ns since its anchor (0: none). */
struct rp_sync {
    int64_t origin_ns, rank;
    char host[64];
    int64_t sync_ns[2];
};
/* The correction of each input's anchor (ns, added to its shift) in corr_ns; returns the call the
 * hosts were aligned on, "none" when several hosts lack a common one, NULL for one host. */
const char *rp_skew(const struct rp_sync *in, int n, int64_t *corr_ns);
void rp_sync_of_slices(const struct lp_slices *c, struct rp_sync *s);
/* The same of a raw trace (its header, its job, a scan of its first events: only a job's rank). */
void rp_sync_of_reader(const struct lp_reader *r, struct rp_sync *s);

/* --merge --chrome OUT in bounded memory (tools/merge.c): 0, or 1 with a message. A raw input is
 * converted with the options `base` (alloc_min UINT64_MAX: each trace's own). */
struct lp_convert_opts;
int rp_merge_stream(const char *const *paths, int n, const char *out, const struct lp_convert_opts *base, int quiet);

#endif
