/* outputs.h: every output libprof writes from a trace, one row each — its key (a followed run's
 * requests, a snapshot's), its libprof-report option, its file beside a trace under
 * LIBPROF_FLAMEGRAPH, what of the trace it is made of, and its writer. lp_convert opens the ones
 * asked for, libprof-report's options set them, the preload names them at exit and in the
 * converters it starts, a live look asks them of a follower: each of those loops over this table,
 * so an output is one row here and one writer (a lib/write_*.c or the view that owns its data). */
#ifndef LP_OUTPUTS_H
#define LP_OUTPUTS_H

#include <stddef.h>

#include "analysis.h" /* enum lp_output_kind, LP_NEEDS_* */

struct lp_sink;
struct lp_analysis;
struct lp_output {
    const char *key;    /* its name in a request: "chrome" */
    const char *option; /* libprof-report's option, "--chrome"; NULL: none of its own */
    const char *help;   /* ... what its --help says of it (its argument: FILE; '\n' continues a line) */
    const char *flame;  /* LIBPROF_FLAMEGRAPH's file beside the trace (".alloc.folded"); NULL: not one */
    unsigned needs;     /* LP_NEEDS_*; 0: any trace */
    int streamed;       /* made from the events as the pass goes (a snapshot copies the pass's) */
    /* The writer: sets the sink's event (streamed) and finish (totals) for this trace (lp_convert,
     * once the file is open); 0 or -1 (out of memory). */
    int (*writer)(struct lp_sink *k, struct lp_analysis *a);
};
extern const struct lp_output lp_outputs[LP_OUT_COUNT];

/* The row whose key or option is `name` ("pprof", "--pprof"), or -1. */
int lp_output_find(const char *name);
/* Can a trace with (or without) stacks and samples make an output that needs `needs`? */
int lp_output_possible(unsigned needs, int stacks, int samples);
/* The timeline a trace named `path` is written as: LP_OUT_PERFETTO for NAME.pftrace (or
 * NAME.perfetto-trace), else LP_OUT_CHROME. */
int lp_output_timeline(const char *path);
/* NAME.ext -> NAME + suffix (the flame graphs beside a trace; "" gives NAME). */
void lp_output_beside(char *dst, size_t len, const char *trace, const char *suffix);

#endif
