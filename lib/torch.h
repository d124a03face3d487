/* torch.h: PyTorch's operators in the conversion pass — the operator table (count, total, self,
 * mean, p50/p99, bytes allocated inside each operator: self and total), the same by input shapes
 * (LIBPROF_TORCH_SHAPES), the arrows from each backward node to the forward operator it came from
 * (sequence numbers), and the ranges that ended on another thread than the one that started them,
 * paired by handle. Fed by convert.c in its single pass, in time order. */
#ifndef LP_TORCH_H
#define LP_TORCH_H

#include <stdint.h>

#include "calls.h"
#include "describe.h"
#include "json.h"
#include "out.h"
#include "reader.h"

struct lp_torch;

struct lp_torch *lp_torch_new(const struct lp_reader *r);
void lp_torch_free(struct lp_torch *t);
/* A torch.op / torch.begin / torch.end event of the pass (`v`: its Chrome view, which gets the
 * backward node's arrow, or is hidden for a start or end the pairing shows instead). */
int lp_torch_call(struct lp_torch *t, const struct lp_event *e, const struct lp_call_rec *c, int counting,
                  struct lp_call_view *v);
/* `bytes` allocated on thread `tid` at `ns` (charged to the operators open there). */
void lp_torch_alloc(struct lp_torch *t, uint32_t tid, uint64_t ns, uint64_t bytes);
int lp_torch_expected(const struct lp_torch *t); /* the trace names PyTorch operators */
int lp_torch_finish(struct lp_torch *t);
int lp_torch_any(const struct lp_torch *t); /* operators seen */

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_torch;

#endif
