/* gpu.h: what the GPU families share — the cuda, cublas and nccl hooks mark each call with its
 * start (CUPTI's external correlation, cupti.c) so that the kernels, copies and sets it queued
 * are tied to its slice, and kernels are named by one registry (kernels.c) for the cuda
 * family's launches and CUPTI's records alike. */
#ifndef LPR_GPU_H
#define LPR_GPU_H

#include <stdint.h>

/* Around the real call of a recorded GPU entry point that started at `*t0` (ticks): the first
 * starts CUPTI (`runtime`: an address inside the CUDA library the program calls, to find
 * libcupti beside it; *t0 is then taken again, after it). Returns 1 when a correlation was
 * pushed: lpr_gpu_leave pops it. */
int lpr_gpu_enter(uint64_t *t0, const void *runtime) __attribute__((visibility("hidden")));
void lpr_gpu_leave(void) __attribute__((visibility("hidden")));

/* kernels.c: `key` (a host function, a kernel handle, a name string) -> the device name
 * `mangled` (static for the process's life: a module's registration string, or CUPTI's) */
void lpr_kernel_put(const void *key, const char *mangled) __attribute__((visibility("hidden")));
const char *lpr_kernel_mangled(const void *key) __attribute__((visibility("hidden")));
/* The name id of `key`'s kernel, demangled once ("<unnamed kernel>" when unknown; the guard held
 * by the caller). */
uint32_t lpr_kernel_id(const void *key) __attribute__((visibility("hidden")));
/* The name id of a kernel's device name itself (CUPTI's records). */
uint32_t lpr_cuda_name_id(const char *mangled) __attribute__((visibility("hidden")));

/* The bracket itself, for hooks written out by hand: `real` is the real function called. */
#define LP_GPU_CALL(real, call)                                    \
    do {                                                           \
        int c_ = t ? lpr_gpu_enter(&t0, (const void *)(real)) : 0; \
        call;                                                      \
        if (c_) lpr_gpu_leave();                                   \
    } while (0)

#endif
