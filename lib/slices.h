/* slices.h: a trace seen as time slices — name, category, process, thread, start, duration — what
 * libprof-report's analyses (tools/report.c) work on, whichever trace it came from: a raw libprof
 * trace (lp_slices_from_reader, here, through the decoder) or Chrome trace JSON, libprof's own or
 * another profiler's (tools/chrome_in.c). Names are interned once each. */
#ifndef LP_SLICES_H
#define LP_SLICES_H

#include <stddef.h>
#include <stdint.h>

#include "cpu.h"

#include "reader.h"

struct lp_slice {
    uint32_t name; /* index into lp_slices.names */
    uint32_t cat;  /* category ("cat"), also an index into lp_slices.names */
    int64_t pid, tid;
    int64_t ts_ns; /* start */
    int64_t dur_ns;
    int64_t cpu_ns;        /* CPU sampled on its thread while it ran (LIBPROF_SAMPLE_HZ); -1: not sampled */
    int64_t cpu_others_ns; /* ... on the process's other threads, for a runtime's run (its pool); -1: not known */
};

/* One PyTorch operator's row of the trace's operator table (metadata.libprof.torch), by name or by
 * (name, input shapes). */
struct lp_op_row {
    char *name, *shapes; /* shapes NULL: all of the name's calls */
    uint64_t count, total_ns, self_ns, mean_ns, p50_ns, p99_ns, bytes_self, bytes_total;
};

struct lp_slices {
    struct lp_slice *slices;
    size_t nslices;
    char **names;
    size_t nnames;
    size_t events;                         /* trace events read */
    size_t skipped;                        /* events of no use here or malformed (counted, not fatal) */
    size_t unmatched;                      /* B without E, or E without B */
    int64_t origin_real_ns;                /* CLOCK_REALTIME of ts 0 when the trace says (libprof's do), else 0 */
    int64_t pid;                           /* the process, when the trace names one (libprof's metadata), else 0 */
    int64_t rank;                          /* the job's rank (libprof's metadata.job), -1 when none */
    char host[64];                         /* its host, when known */
    uint64_t mpi_sent, mpi_recv, mpi_coll; /* bytes of MPI point-to-point sends, receives; collectives */
    struct lp_cpu cpu;                     /* the CPU samples, when the trace has them */
    struct lp_op_row *ops, *op_shapes;     /* PyTorch's operators (a libprof trace's metadata), by total */
    size_t nops, nop_shapes;
};

/* An MPI call's bytes into c's sent/received/collective totals (by its name). */
void lp_slices_mpi_bytes(struct lp_slices *c, const char *name, uint64_t bytes, uint64_t recv_bytes);

/* Building a struct lp_slices. */
struct lp_slices_builder;
struct lp_slices_builder *lp_slices_builder_new(struct lp_slices *out);
uint32_t lp_slices_intern(struct lp_slices_builder *b, const char *name);
/* The same for a name of `len` bytes, not NUL-terminated. */
uint32_t lp_slices_intern_n(struct lp_slices_builder *b, const char *name, size_t len);
/* |ts| and dur are clamped to 2^61 ns (73 years: sums of two never overflow downstream). */
void lp_slices_add(struct lp_slices_builder *b, uint32_t name, uint32_t cat, int64_t pid, int64_t tid, int64_t ts_ns,
                   int64_t dur_ns);
/* The CPU sampled during the slice added last (slices are added without: -1). */
void lp_slices_set_cpu(struct lp_slices_builder *b, int64_t cpu_ns);
/* The CPU sampled on the other threads while it ran (a run: its pool's work). */
void lp_slices_set_cpu_others(struct lp_slices_builder *b, int64_t cpu_ns);
/* Marks the builder out of memory (a caller's own allocation failed). */
void lp_slices_oom(struct lp_slices_builder *b);
/* Frees the builder; returns -1 (and frees `out`'s contents) if memory ran out on the way. */
int lp_slices_builder_end(struct lp_slices_builder *b);
void lp_slices_free(struct lp_slices *c);

/* The timed events of a raw trace as slices: runtime entry points (named as in the Chrome trace:
 * "sgemm", the oneDNN primitive kind, ...), annotation ranges, thread lives, each with the CPU
 * sampled while it ran, and the samples' totals (out->cpu). `progress` (may be
 * NULL) is called about every million events. Returns 0, or -1 with a message. */
int lp_slices_from_reader(const struct lp_reader *r, struct lp_slices *out,
                          void (*progress)(uint64_t done, uint64_t total, void *arg), char *err, size_t errlen);

#endif
