/* speedscope.h: one speedscope file (https://www.speedscope.app/file-format-schema.json) of a
 * trace's stack views — the allocation views of its sites (sites.c) and the CPU samples of each
 * thread (samples.c) — with one shared table of frames, one per distinct function name. */
#ifndef LP_SPEEDSCOPE_H
#define LP_SPEEDSCOPE_H

#include "out.h"

struct lp_sites;
struct lp_samples;

/* Either may be NULL. 0, or -1 when out of memory. */
int lp_speedscope(struct lp_out *o, const char *name, struct lp_sites *sites, const struct lp_samples *samples);

#endif
