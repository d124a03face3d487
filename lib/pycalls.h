/* pycalls.h: the Python functions of LIBPROF_PYTHON_CALLS as a table — per function, its calls,
 * time, and the bytes allocated on its thread while it ran (inclusive of what it called): per
 * layer time and memory of a model. Fed by convert.c's pass; the memory needs a second pass over
 * the allocations, made only when the trace has such slices. */
#ifndef LP_PYCALLS_H
#define LP_PYCALLS_H

#include <stdint.h>

#include "out.h"
#include "reader.h"

struct lp_pycalls;
struct lp_json;

struct lp_pycalls *lp_pycalls_new(const struct lp_reader *r);
void lp_pycalls_free(struct lp_pycalls *p);
/* A PYCALL event of the pass (`counting`: after the last reset). Returns -1 when out of memory. */
int lp_pycalls_event(struct lp_pycalls *p, const struct lp_event *e, int counting);
/* After the pass: the allocations inside each call. Returns -1 when out of memory. */
int lp_pycalls_finish(struct lp_pycalls *p);
/* 1 when the trace had Python call slices. */
int lp_pycalls_any(const struct lp_pycalls *p);

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_pycalls;

#endif
