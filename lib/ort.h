/* ort.h: ONNX Runtime's own per-node profile folded into libprof's trace — the profiles the
 * recorder copied into the spool (LP_STR_ORT_PROFILE, one per session), aligned run by run to the
 * ort.Run slices of that session, as slices "ort.node" on the thread of the run; and the tables
 * by op type, by node, and the framework tax of each run (run time minus node kernel time). */
#ifndef LP_ORT_H
#define LP_ORT_H

#include <stdint.h>

#include "json.h"
#include "out.h"
#include "reader.h"

struct lp_ort;

struct lp_ort *lp_ort_new(const struct lp_reader *r);
void lp_ort_free(struct lp_ort *o);
/* An ort.Run call of the pass (session, thread, time). Returns -1 when out of memory. */
int lp_ort_run(struct lp_ort *o, uint64_t session, uint32_t tid, uint64_t start_ns, uint64_t dur_ns);
/* After the pass: parse the profiles and align them. Returns -1 when out of memory. */
int lp_ort_finish(struct lp_ort *o);
int lp_ort_any(const struct lp_ort *o); /* node events to show */
/* The node events, one by one (libprof-report's slices). */
size_t lp_ort_count(const struct lp_ort *o);
void lp_ort_node(const struct lp_ort *o, size_t i, const char **name, uint32_t *tid, uint64_t *start, uint64_t *dur);

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_ort;

#endif
