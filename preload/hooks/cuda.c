/* cuda.c: the cuda family — the CUDA runtime's entry points, from a program (or library: PyTorch's
 * libc10_cuda) that calls libcudart.so: kernel launches named by their __global__ function, with
 * grid, block, shared memory and stream; device and pinned allocations; copies and sets with
 * their bytes and direction; the host's waits on the GPU (device, stream and event
 * synchronisations); graph launches. Each a slice with CUDA's error code, whatever it is: a
 * program on a machine with no GPU (cudaErrorInsufficientDriver, 35) is recorded as it runs.
 *
 * Kernel names: a program's startup registers each of its kernels with the runtime
 * (__cudaRegisterFunction: the address of its host-side launch function — CUDA's "host
 * function" —, the device name, mangled), and nvcc's launch code then asks for the kernel's
 * handle (__cudaGetKernel, once per kernel) and launches it (__cudaLaunchKernel, CUDA 13;
 * cudaLaunchKernel with the host function's address before, and from libraries). libprof keeps
 * host function -> name and handle -> name (kernels.c), and names a kernel at its first launch, demangled
 * with the C++ runtime's own __cxa_demangle when the program has one. A program linked to the
 * static runtime (nvcc's default) calls none of these through its PLT: nothing of it is seen
 * here.
 *
 * GPU time (the kernels' start and end on the device) comes from CUPTI (cupti.c): each call here
 * is bracketed by a correlation id, its start, that ties what it queued to its slice. */
#define _GNU_SOURCE
#include <stdint.h>

#include "gpu.h"
#include "hook.h"

typedef struct {
    unsigned x, y, z;
} dim3;
typedef int cuda_err;       /* cudaError_t */
enum { ERR_UNKNOWN = 999 }; /* returned when the runtime is missing (never: the program calls it) */

LP_REAL_SLOT(__cudaRegisterFunction)
LP_REAL_SLOT(__cudaGetKernel)

void __cudaRegisterFunction(void **fatbin, const char *host_fn, char *dev, const char *name, int limit, void *tid,
                            void *bid, dim3 *bdim, dim3 *gdim, int *wsize);
cuda_err __cudaGetKernel(void **handle, const void *host_fn);

/* Not recorded (startup, once per kernel): where names come from. */
LP_EXPORT void __cudaRegisterFunction(void **fatbin, const char *host_fn, char *dev, const char *name, int limit,
                                      void *tid, void *bid, dim3 *bdim, dim3 *gdim, int *wsize) {
    if (!LP_REAL(__cudaRegisterFunction)) return;
    LP_REAL(__cudaRegisterFunction)(fatbin, host_fn, dev, name, limit, tid, bid, bdim, gdim, wsize);
    lpr_kernel_put(host_fn, name);
}

LP_EXPORT cuda_err __cudaGetKernel(void **handle, const void *host_fn) {
    if (!LP_REAL(__cudaGetKernel)) return ERR_UNKNOWN;
    cuda_err r = LP_REAL(__cudaGetKernel)(handle, host_fn);
    if (handle && *handle && *handle != host_fn) lpr_kernel_put(*handle, lpr_kernel_mangled(host_fn));
    return r;
}

/* ---- launches ----------------------------------------------------------------------------------- */

static void record_launch(struct lpr_tls *t, uint64_t t0, const void *kernel, dim3 g, dim3 b, size_t shmem,
                          const void *stream, cuda_err r) {
    uint8_t gd = lpr_guard_hold(t); /* the demangled name and its interning are libprof's */
    uint32_t name = lpr_kernel_id(kernel);
    lpr_guard_restore(t, gd);
    uint64_t a[10] = {name, g.x, g.y, g.z, b.x, b.y, b.z, shmem, U(stream), I(r)};
    lpr_call_record(t, LP_CALL_CUDA_LAUNCH, t0, lpr_ticks(), 10, a, NULL, 0);
}

#define LAUNCH_HOOK(fn)                                                                                           \
    LP_REAL_SLOT(fn)                                                                                              \
    cuda_err fn(const void *k, dim3 g, dim3 b, void **args, size_t shmem, void *stream);                          \
    __attribute__((noinline)) static cuda_err fn##_slow(const void *k, dim3 g, dim3 b, void **args, size_t shmem, \
                                                        void *stream) {                                           \
        if (!LP_REAL(fn)) return ERR_UNKNOWN;                                                                     \
        LP_BEGIN(LP_FAM_CUDA);                                                                                    \
        cuda_err r;                                                                                               \
        LP_GPU_CALL(LP_REAL(fn), r = LP_REAL(fn)(k, g, b, args, shmem, stream));                                  \
        if (t) record_launch(t, t0, k, g, b, shmem, stream, r);                                                   \
        return r;                                                                                                 \
    }                                                                                                             \
    LP_EXPORT cuda_err fn(const void *k, dim3 g, dim3 b, void **args, size_t shmem, void *stream) {               \
        LP_PASS_ARGS(LP_FAM_CUDA, fn, (k, g, b, args, shmem, stream));                                            \
        return fn##_slow(k, g, b, args, shmem, stream);                                                           \
    }
LAUNCH_HOOK(__cudaLaunchKernel)
LAUNCH_HOOK(__cudaLaunchKernel_ptsz)
LAUNCH_HOOK(cudaLaunchKernel)
LAUNCH_HOOK(cudaLaunchKernel_ptsz)

/* ---- memory, copies, waits ------------------------------------------------------------------ */
/* Device allocations carry their call stack (LIBPROF_STACKS), as host allocations do: the sites of
 * the device-memory view (lib/cudamem.c). */
static void record_alloc(struct lpr_tls *t, uint64_t t0, unsigned call, void **p, size_t n, const void *stream,
                         int has_stream, cuda_err r) {
    uint32_t sid = 0;
    if (LP_UNLIKELY(lpr_stack_depth) && r == 0) {
        uint8_t g = lpr_guard_hold(t);
        LP_STACK_CAPTURE(sid);
        lpr_guard_restore(t, g);
    }
    uint64_t a[4] = {U(p && r == 0 ? *p : NULL), U(n), U(stream), I(r)};
    if (!has_stream) a[2] = a[3];
    lpr_call_record_stack(t, sid, call, t0, lpr_ticks(), has_stream ? 4 : 3, a);
}
/* (the pointer a successful allocation made; 0 when it failed) */
#define MADE(p) U(p &&r == 0 ? *(p) : NULL)

cuda_err cudaMalloc(void **p, size_t n);
cuda_err cudaFree(void *p);
cuda_err cudaMallocHost(void **p, size_t n);
cuda_err cudaFreeHost(void *p);
cuda_err cudaMallocAsync(void **p, size_t n, void *stream);
cuda_err cudaFreeAsync(void *p, void *stream);
cuda_err cudaMemcpy(void *dst, const void *src, size_t n, int kind);
cuda_err cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream);
cuda_err cudaMemset(void *p, int v, size_t n);
cuda_err cudaMemsetAsync(void *p, int v, size_t n, void *stream);
cuda_err cudaDeviceSynchronize(void);
cuda_err cudaStreamSynchronize(void *stream);
cuda_err cudaEventSynchronize(void *event);
cuda_err cudaGraphLaunch(void *graph, void *stream);

LP_REAL_SLOT(cudaMalloc)
LP_REAL_SLOT(cudaFree)
LP_REAL_SLOT(cudaMallocHost)
LP_REAL_SLOT(cudaFreeHost)
LP_REAL_SLOT(cudaMallocAsync)
LP_REAL_SLOT(cudaFreeAsync)
LP_REAL_SLOT(cudaMemcpy)
LP_REAL_SLOT(cudaMemcpyAsync)
LP_REAL_SLOT(cudaMemset)
LP_REAL_SLOT(cudaMemsetAsync)
LP_REAL_SLOT(cudaDeviceSynchronize)
LP_REAL_SLOT(cudaStreamSynchronize)
LP_REAL_SLOT(cudaEventSynchronize)
LP_REAL_SLOT(cudaGraphLaunch)

__attribute__((noinline)) static cuda_err cudaMalloc_slow(void **p, size_t n) {
    if (!LP_REAL(cudaMalloc)) return ERR_UNKNOWN;
    LP_BEGIN(LP_FAM_CUDA);
    cuda_err r;
    LP_GPU_CALL(LP_REAL(cudaMalloc), r = LP_REAL(cudaMalloc)(p, n));
    if (t) record_alloc(t, t0, LP_CALL_CUDA_MALLOC, p, n, NULL, 0, r);
    return r;
}
LP_EXPORT cuda_err cudaMalloc(void **p, size_t n) {
    LP_PASS_ARGS(LP_FAM_CUDA, cudaMalloc, (p, n));
    return cudaMalloc_slow(p, n);
}
__attribute__((noinline)) static cuda_err cudaMallocAsync_slow(void **p, size_t n, void *s) {
    if (!LP_REAL(cudaMallocAsync)) return ERR_UNKNOWN;
    LP_BEGIN(LP_FAM_CUDA);
    cuda_err r;
    LP_GPU_CALL(LP_REAL(cudaMallocAsync), r = LP_REAL(cudaMallocAsync)(p, n, s));
    if (t) record_alloc(t, t0, LP_CALL_CUDA_MALLOC_ASYNC, p, n, s, 1, r);
    return r;
}
LP_EXPORT cuda_err cudaMallocAsync(void **p, size_t n, void *s) {
    LP_PASS_ARGS(LP_FAM_CUDA, cudaMallocAsync, (p, n, s));
    return cudaMallocAsync_slow(p, n, s);
}
LP_HOOK_AROUND(CUDA, CUDA_FREE, cuda_err, cudaFree, (void *p), (p), ERR_UNKNOWN, LP_GPU_CALL, U(p), I(r))
LP_HOOK_AROUND(CUDA, CUDA_MALLOC_HOST, cuda_err, cudaMallocHost, (void **p, size_t n), (p, n), ERR_UNKNOWN, LP_GPU_CALL,
               MADE(p), U(n), I(r))
LP_HOOK_AROUND(CUDA, CUDA_FREE_HOST, cuda_err, cudaFreeHost, (void *p), (p), ERR_UNKNOWN, LP_GPU_CALL, U(p), I(r))
LP_HOOK_AROUND(CUDA, CUDA_FREE_ASYNC, cuda_err, cudaFreeAsync, (void *p, void *s), (p, s), ERR_UNKNOWN, LP_GPU_CALL,
               U(p), U(s), I(r))
LP_HOOK_AROUND(CUDA, CUDA_MEMCPY, cuda_err, cudaMemcpy, (void *d, const void *s, size_t n, int k), (d, s, n, k),
               ERR_UNKNOWN, LP_GPU_CALL, U(n), I(k), I(r))
LP_HOOK_AROUND(CUDA, CUDA_MEMCPY_ASYNC, cuda_err, cudaMemcpyAsync, (void *d, const void *s, size_t n, int k, void *st),
               (d, s, n, k, st), ERR_UNKNOWN, LP_GPU_CALL, U(n), I(k), U(st), I(r))
LP_HOOK_AROUND(CUDA, CUDA_MEMSET, cuda_err, cudaMemset, (void *p, int v, size_t n), (p, v, n), ERR_UNKNOWN, LP_GPU_CALL,
               U(n), I(r))
LP_HOOK_AROUND(CUDA, CUDA_MEMSET_ASYNC, cuda_err, cudaMemsetAsync, (void *p, int v, size_t n, void *s), (p, v, n, s),
               ERR_UNKNOWN, LP_GPU_CALL, U(n), U(s), I(r))
LP_HOOK_AROUND(CUDA, CUDA_DEVICE_SYNC, cuda_err, cudaDeviceSynchronize, (void), (), ERR_UNKNOWN, LP_GPU_CALL, I(r))
LP_HOOK_AROUND(CUDA, CUDA_STREAM_SYNC, cuda_err, cudaStreamSynchronize, (void *s), (s), ERR_UNKNOWN, LP_GPU_CALL, U(s),
               I(r))
LP_HOOK_AROUND(CUDA, CUDA_EVENT_SYNC, cuda_err, cudaEventSynchronize, (void *e), (e), ERR_UNKNOWN, LP_GPU_CALL, U(e),
               I(r))
LP_HOOK_AROUND(CUDA, CUDA_GRAPH_LAUNCH, cuda_err, cudaGraphLaunch, (void *g, void *s), (g, s), ERR_UNKNOWN, LP_GPU_CALL,
               U(g), U(s), I(r))
