/* convert.h: turning a raw trace into what people read — the Chrome trace, the CSV summary, the
 * stderr table and the flame graphs. One pass over the time-ordered events (convert.c) computes
 * every statistic and feeds each writer through one interface (struct lp_sink, analysis.h): writers that
 * stream events (the Chrome trace, write_chrome.c) see every event as the pass does; all of them
 * then write what the whole run added up to (write_tables.c, the flame graphs in sites.c). The
 * preload calls this at exit and libprof-report calls it on a saved .lpt — or on a spool it
 * follows while the program runs (lp_reader_follow) — so all give the same output. */
#ifndef LP_CONVERT_H
#define LP_CONVERT_H

#include <stdint.h>

#include "analysis.h"
#include "calls.h"
#include "out.h"
#include "outputs.h"
#include "reader.h"
#include "cudamem.h"
#include "etdump.h"
#include "gpu.h"
#include "ort.h"
#include "pycalls.h"
#include "sites.h"
#include "stats.h"
#include "torch.h"

/* A snapshot of a followed trace (libprof-report --live on a run a follower converts): while the
 * pass waits for more, ask() says whether a look was asked (it takes the request); a forked copy
 * of the pass then calls load() for the outputs wanted — each to its path, or to a descriptor —
 * and writes them from what it has read so far, while the pass itself goes on; release() lets
 * the request go in the pass. The summary is the table LIBPROF_SUMMARY prints (its "leaked" is
 * what is still live). */
struct lp_snapshot {
    int (*ask)(struct lp_snapshot *s);
    int (*load)(struct lp_snapshot *s);
    void (*release)(struct lp_snapshot *s);
    char path[LP_OUT_COUNT][4096]; /* each output asked for (outputs.h), "" for none */
    int fd[LP_OUT_COUNT];          /* ... or the descriptor it goes to (>= 0) */
    unsigned top;                  /* the summary's rows per table (--top; 0: each table's own) */
};

/* Returns 0, or -1 with a message in `err` (outputs that could be written are complete). */
int lp_convert(const struct lp_reader *r, const struct lp_convert_opts *o, char *err, size_t errlen);

/* The views of the hook families that make more of a trace (views.h): created, fed and finished by
 * the pass; their state is struct lp_analysis's view slots (analysis.h). */
#include "views.h"

#endif
