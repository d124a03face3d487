/* gpu.h: the GPU's own records (CUPTI, preload/hooks/cupti.c) made into a view — each kernel, copy
 * and set on a track per stream ("GPU 0 stream 7") at its start and end on the GPU, with an arrow
 * from the slice of the call that queued it (a cudaLaunchKernel, a cublasLtMatmul, an
 * ncclAllReduce: the correlation record pairs CUPTI's id with that slice's start); a kernel table
 * (count, GPU time total, mean, p50, p99 by kernel name), copies by direction, and each stream's
 * and each device's busy time. */
#ifndef LP_GPU_H
#define LP_GPU_H

#include <stdint.h>

#include "json.h"
#include "out.h"
#include "reader.h"

struct lp_gpu;
struct lp_call_rec;

struct lp_gpu *lp_gpu_new(const struct lp_reader *r);
void lp_gpu_free(struct lp_gpu *g);
/* A CALL event of the pass: the GPU's records, and the GPU families' calls (the arrows' starts).
 * -1: out of memory. */
int lp_gpu_call(struct lp_gpu *g, const struct lp_event *e, const struct lp_call_rec *c);
int lp_gpu_finish(struct lp_gpu *g);
int lp_gpu_any(const struct lp_gpu *g); /* GPU records seen */
/* `span`: the run's length, of which the busy times are shares */

/* The track of GPU `device`'s stream `stream` in the Chrome trace (beside the process's threads,
 * whose ids are below 2^22). */
#define LP_GPU_TRACK(k) (UINT32_C(0x50000000) + (uint32_t)(k))

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_gpu;

#endif
