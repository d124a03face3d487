/* write_chrome.h: the Chrome trace writer (write_chrome.c), a struct lp_sink (analysis.h). */
#ifndef LP_WRITE_CHROME_H
#define LP_WRITE_CHROME_H

#include <stdint.h>

struct lp_sink;
struct lp_reader;

/* 0, or -1 when out of memory; `k->out` is set by the caller. timeline_ns: the trace keeps the
 * last timeline_ns of the run at full detail and, before that, the slices of at least
 * timeline_min_ns (0: the whole run at full detail). */
int lp_sink_chrome(struct lp_sink *k, const struct lp_reader *r, const char *path, uint64_t alloc_min,
                   uint64_t timeline_ns, uint64_t timeline_min_ns);

#endif
