/* nvtx.h: NVTX's start/end ranges in the conversion pass — a start (nvtxRangeStart*) and its end
 * (nvtxRangeEnd, on any thread) paired by the id libprof handed out, each range one async slice
 * ("b"/"e", category "nvtx", with its domain) on the thread that started it. Push/pop ranges and
 * marks are ordinary slices (describe.c). */
#ifndef LP_NVTX_H
#define LP_NVTX_H

#include <stdint.h>

#include "calls.h"
#include "json.h"
#include "out.h"
#include "reader.h"

struct lp_nvtx;

struct lp_nvtx *lp_nvtx_new(const struct lp_reader *r);
void lp_nvtx_free(struct lp_nvtx *n);
/* An "nvtx start" or "nvtx end" event of the pass (`v`: its view, hidden: the pairing shows it). */
int lp_nvtx_call(struct lp_nvtx *n, const struct lp_event *e, const struct lp_call_rec *c, struct lp_call_view *v);
int lp_nvtx_any(const struct lp_nvtx *n);

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_nvtx;

#endif
