/* analyses.h: what the fuzz targets of the trace readers run on the slices a reader made — the
 * report with every slice an iteration and a what-if on every name, a diff against itself, the
 * events CSV plain and keyed — all into /dev/null. */
#ifndef FUZZ_ANALYSES_H
#define FUZZ_ANALYSES_H

#include <stdio.h>

#include "tools/events_csv.h"
#include "tools/report.h"

static inline void fuzz_analyses(struct lp_slices *c) {
    static FILE *null;
    static struct rp_opts o;
    if (!null) {
        null = fopen("/dev/null", "w");
        regcomp(&o.iter_re, ".", REG_EXTENDED | REG_NOSUB);
        o.iterations = ".";
        regcomp(&o.whatif_re[0], "a", REG_EXTENDED | REG_NOSUB);
        o.whatif_ratio[0] = 2;
        o.whatif_text[0] = "a=2";
        o.nwhatif = 1;
    }
    rp_print(null, "fuzz", c, &o);
    rp_diff(null, c, c, &o);
    rp_events_csv(null, c, 0);
    rp_events_csv(null, c, 1);
    lp_slices_free(c);
}

#endif
