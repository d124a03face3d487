/* sites.h: allocation call sites (traces recorded with LIBPROF_STACKS) — bytes and calls per
 * call stack, each stack's share of the heap at its peak, leaks by stack, memory per library,
 * and the flame graphs (Brendan Gregg's folded format, speedscope JSON). Fed by convert.c's pass. */
#ifndef LP_SITES_H
#define LP_SITES_H

#include <stdint.h>

#include "reader.h"
#include "out.h"

struct lp_sites;

/* NULL when the trace has no call stacks. */
struct lp_sites *lp_sites_new(const struct lp_reader *r);
void lp_sites_free(struct lp_sites *s);
/* A block of `size` bytes now lives at ptr, allocated from `stack`; `counting`: after the last
 * reset (statistics on). Returns -1 when out of memory. */
int lp_sites_born(struct lp_sites *s, uint64_t ptr, uint64_t size, uint32_t stack, int counting);
void lp_sites_died(struct lp_sites *s, uint64_t ptr);
/* After the pass: replay the first `peak_count` events the iterator yields (up to and including
 * the one that made the heap's peak) to learn each stack's live bytes there; symbolise.
 * Returns -1 when out of memory. */
int lp_sites_finish(struct lp_sites *s, uint64_t peak_count);
void lp_sites_metadata(struct lp_sites *s, struct lp_out *o);
void lp_sites_csv(struct lp_sites *s, struct lp_out *o);
void lp_sites_summary(struct lp_sites *s, struct lp_out *o);
/* Collapsed stacks, one line per stack: "root;...;leaf BYTES", heaviest first. `leaks`: leaked
 * bytes instead of allocated bytes. */
void lp_sites_folded(struct lp_sites *s, struct lp_out *o, int leaks);
/* speedscope's file format: two sampled profiles (allocated and leaked bytes), unit bytes. */
void lp_sites_speedscope(struct lp_sites *s, struct lp_out *o, const char *name);

#endif
