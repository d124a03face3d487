/* gpu.h: what the GPU families share — the cuda, cublas and nccl hooks mark each call with its
 * start (CUPTI's external correlation, cupti.c) so that the kernels, copies and sets it queued
 * are tied to its slice, and CUPTI's records name kernels as the cuda family does (cuda.c). */
#ifndef LPR_GPU_H
#define LPR_GPU_H

#include <stdint.h>

/* Around the real call of a recorded GPU entry point that started at `*t0` (ticks): the first
 * starts CUPTI (`runtime`: an address inside the CUDA library the program calls, to find
 * libcupti beside it; *t0 is then taken again, after it). Returns 1 when a correlation was
 * pushed: lpr_gpu_leave pops it. */
int lpr_gpu_enter(uint64_t *t0, const void *runtime) __attribute__((visibility("hidden")));
void lpr_gpu_leave(void) __attribute__((visibility("hidden")));

/* The name id of a kernel's device name (mangled, static for the process's life: a module's
 * registration string or CUPTI's), demangled once (the guard held by the caller). */
uint32_t lpr_cuda_name_id(const char *mangled) __attribute__((visibility("hidden")));

/* The bracket itself, for hooks written out by hand: `real` is the real function called. */
#define LP_GPU_CALL(real, call)                                    \
    do {                                                           \
        int c_ = t ? lpr_gpu_enter(&t0, (const void *)(real)) : 0; \
        call;                                                      \
        if (c_) lpr_gpu_leave();                                   \
    } while (0)

#endif
