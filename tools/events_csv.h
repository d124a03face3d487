/* events_csv.h: --events-csv — one row per event (pid, tid, ts_ns, dur_ns, category, name, size,
 * ptr, rank, host), of a trace's slices or streamed from a raw trace, and --merge's of several
 * inputs merged on one timeline in bounded memory. */
#ifndef RP_EVENTS_CSV_H
#define RP_EVENTS_CSV_H

#include <stdint.h>
#include <stdio.h>

#include "lib/reader.h"
#include "lib/slices.h"

/* --events-csv for slices (a raw trace streams its own, see rp_events_csv_lpt). `keyed`: no
 * header, each row led by "KEY\t" in non-decreasing KEY order (ns: a raw trace's effect times, the
 * slices' starts), for rp_merge_keyed_csv. */
int rp_events_csv(FILE *f, const struct lp_slices *c, int keyed);
int rp_events_csv_lpt(FILE *f, const struct lp_reader *r, int keyed);
/* --merge --events-csv: n keyed CSV streams merged in KEY + shift_ns[i] order into `out` (header
 * first; each row's ts_ns shifted). Bounded: one pending row per input. */
int rp_merge_keyed_csv(FILE **in, const int64_t *shift_ns, int n, FILE *out);

#endif
