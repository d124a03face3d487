/* convert.h: turning a raw trace into what people read — the Chrome trace, the CSV summary and
 * the stderr table. One pass over the time-ordered events computes every statistic; the preload
 * calls this at exit and libprof-report calls it on a saved .lpt, so both give the same output. */
#ifndef LP_CONVERT_H
#define LP_CONVERT_H

#include <stdint.h>

#include "reader.h"

struct lp_convert_opts {
    const char *chrome_path; /* Chrome trace JSON to write, or NULL */
    int chrome_fd;           /* ... or to this open descriptor when >= 0 (no temporary name) */
    const char *csv_path;    /* CSV summary to write, or NULL */
    int summary_fd;          /* human-readable table to this fd, or -1 */
    uint64_t alloc_min;      /* allocations at least this large become instant events */
    const char *trace_label; /* where the trace went, for the summary's first line */
    /* flame graphs of allocation call stacks (traces with stacks only), or NULL */
    const char *folded_path;       /* allocated bytes, collapsed-stack format */
    const char *folded_leaks_path; /* leaked bytes, collapsed-stack format */
    const char *speedscope_path;   /* both, speedscope JSON */
    int killed_by;           /* the process died by this signal (known to its parent), 0 if not */
    /* Called about every million events with (events done, events total). */
    void (*progress)(uint64_t done, uint64_t total, void *arg);
    void *progress_arg;
};

/* Returns 0, or -1 with a message in `err` (outputs that could be written are complete). */
int lp_convert(const struct lp_reader *r, const struct lp_convert_opts *o, char *err, size_t errlen);

#endif
