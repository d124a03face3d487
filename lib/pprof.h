/* pprof.h: profiles in pprof's format (github.com/google/pprof, profile.proto, gzipped) — what Go's
 * pprof, Pyroscope, Parca, Grafana and speedscope read: the CPU samples (sample types
 * samples/count and cpu/nanoseconds, and wall/nanoseconds where threads blocked, a "thread" label
 * on each sample) and the allocation stacks
 * (alloc_objects/count, alloc_space/bytes, and inuse_objects/count, inuse_space/bytes: the
 * blocks still live when the trace ends). Mappings carry the objects' paths and build ids;
 * functions their names and files, Python ones their first line, locations their lines. */
#ifndef LP_PPROF_H
#define LP_PPROF_H

#include "out.h"
#include "reader.h"

struct lp_samples;
struct lp_sites;
struct lp_syms;

/* 0, or -1 when out of memory. */
struct lp_analysis;
/* The CPU profile; with `a` (may be NULL) whose trace has blocked time (gil.h), a third sample type,
 * wall/nanoseconds: each sample's period, and each blocked call stack's time under its kind
 * ("[GIL wait]", "[lock]", "[sleep]", "[io]") as the innermost frame, as the wall-clock flame graph. */
int lp_pprof_cpu(struct lp_out *o, const struct lp_reader *r, const struct lp_samples *s, struct lp_syms *syms,
                 const struct lp_analysis *a);
int lp_pprof_heap(struct lp_out *o, const struct lp_reader *r, struct lp_sites *sites, struct lp_syms *syms);

#endif
