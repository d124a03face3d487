/* cudamem.h: device memory from the cuda family's records — cudaMalloc/cudaMallocAsync that
 * succeeded make a block, cudaFree/cudaFreeAsync release it: the bytes live over time (a counter
 * track "cuda device memory"), their peak and when, what is still live at exit (leaks), and by
 * call site (the call's stack: its innermost Python line, or native frame) the bytes allocated
 * and the bytes live at the peak. PyTorch's caching allocator shows as its own cudaMalloc and
 * cudaFree calls: the memory it reserves (torch.cuda.memory_reserved), not each tensor. */
#ifndef LP_CUDAMEM_H
#define LP_CUDAMEM_H

#include <stdint.h>

#include "json.h"
#include "out.h"
#include "reader.h"

struct lp_cudamem;
struct lp_call_rec;
struct lp_event;

struct lp_cudamem *lp_cudamem_new(const struct lp_reader *r);
void lp_cudamem_free(struct lp_cudamem *m);
/* A CALL event of the pass (only the cuda family's allocations count). -1: out of memory. */
int lp_cudamem_call(struct lp_cudamem *m, const struct lp_event *e, const struct lp_call_rec *c);
int lp_cudamem_any(const struct lp_cudamem *m); /* device allocations seen */
/* The device memory live at its peak by allocation site, as collapsed stacks (the device's
 * heap-at-peak flame graph; the sites need LIBPROF_STACKS) */
void lp_cudamem_folded_peak(struct lp_cudamem *m, struct lp_out *out);

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_cudamem;

#endif
