/* calls.h: analysis and export of CALL records (the runtime entry points) — per-entry-point
 * statistics, per-file I/O totals, anonymous mappings, GEMM shapes with GFLOP/s, oneDNN
 * primitives by kind and shape, thread-creation flows. Used by convert.c in its single pass. */
#ifndef LP_CALLS_H
#define LP_CALLS_H

#include <stdint.h>

#include "reader.h"
#include "out.h"

struct lp_calls;

/* Where Chrome events go: the converter's writer, its "first event" flag and the pid. */
struct lp_chrome_sink {
    struct lp_out *o;
    int *first;
    uint32_t pid;
};

struct lp_calls *lp_calls_new(const struct lp_reader *r);
void lp_calls_free(struct lp_calls *c);
/* One CALL event (in time order). `counting`: statistics are on (after the last reset);
 * `sink` NULL: no Chrome output. Returns -1 when out of memory. */
int lp_calls_event(struct lp_calls *c, const struct lp_event *e, int counting, const struct lp_chrome_sink *sink);
/* At the end of the pass: add the tallies of calls under LIBPROF_MIN_NS. */
int lp_calls_finish(struct lp_calls *c);
/* ,"calls":{...},"files":[...],... inside metadata.libprof */
void lp_calls_metadata(const struct lp_calls *c, struct lp_out *o);
void lp_calls_csv(const struct lp_calls *c, struct lp_out *o);
struct fnstat;
/* The BLAS routine's name for a call and its `op` word ("sgemm", "dgemv", ...). */
const char *lp_blas_name(unsigned call, uint64_t op);
/* One row of the CSV summary: name,category,count,total_ns,...,bytes,gflops (gflops <= 0: empty). */
void lp_csv_row(struct lp_out *o, const char *name, size_t len, const char *cat, const struct fnstat *f, double gflops);
void lp_calls_summary(const struct lp_calls *c, struct lp_out *o);

#endif
