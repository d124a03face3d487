/* calls.h: analysis and export of CALL records (the runtime entry points) — per-entry-point
 * statistics, per-file I/O totals, anonymous mappings, GEMM shapes with GFLOP/s, oneDNN
 * primitives by kind and shape, thread-creation flows. Used by convert.c in its single pass. */
#ifndef LP_CALLS_H
#define LP_CALLS_H

#include <stdint.h>

#include "reader.h"
#include "describe.h"
#include "out.h"

struct lp_calls;

/* What the pass learned about one call, for the writers (the Chrome trace): the file it worked
 * on, a point of the "mmap anon" counter, an arrow from a pthread_create to its thread. */
struct lp_call_view {
    int counting;     /* after the last reset: the call is shown */
    int hidden;       /* not an event (a descriptor's path, known before libprof started) */
    const char *file; /* the file the call worked on (not NUL-terminated), NULL if none */
    uint32_t file_len;
    int mmap_point; /* the anonymous mappings changed: mmap_live is the new total */
    uint64_t mmap_live;
    int flow; /* both ends of an arrow are known now: a thread's creation, a backward node's forward op */
    uint64_t flow_id, s_ts, s_tid, f_ts, f_tid;
    const char *flow_name, *flow_cat; /* NULL: "thread start" in "thread" */
};

struct lp_calls *lp_calls_new(const struct lp_reader *r);
void lp_calls_free(struct lp_calls *c);
/* One CALL event (in time order): decoded into `rec`, what it means into `v`. `counting`:
 * statistics are on (after the last reset). Returns -1 when out of memory. */
int lp_calls_event(struct lp_calls *c, const struct lp_event *e, int counting, struct lp_call_rec *rec,
                   struct lp_call_view *v);
/* At the end of the pass: add the tallies of calls under LIBPROF_MIN_NS. */
int lp_calls_finish(struct lp_calls *c);
/* ,"calls":{...},"files":[...],... inside metadata.libprof (`capped`: the mmap counter track
 * was cut short by its writer) */
void lp_calls_metadata(const struct lp_calls *c, struct lp_json *j, int capped);
void lp_calls_csv(const struct lp_calls *c, struct lp_out *o);
struct fnstat;
/* One row of the CSV summary: name,category,count,total_ns,...,bytes,gflops,temporary (gflops <= 0: empty). */
void lp_csv_row(struct lp_out *o, const char *name, size_t len, const char *cat, const struct fnstat *f, double gflops);
void lp_calls_summary(const struct lp_calls *c, struct lp_out *o, unsigned top);

#endif
