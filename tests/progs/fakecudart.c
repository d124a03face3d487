/* fakecudart: a stand-in for libcudart.so.13 on machines with no GPU (CI), for the cuda tests
 * only: the entry points tests/progs/cudaprog calls, each succeeding — "device" memory is host
 * memory, copies are memcpy, a launch runs nothing — so that libprof's handling of successful
 * calls (device memory over time, its peak, what is freed) is exercised where no GPU is. When
 * libcupti.so.13 is loaded and is fakecupti (beside it), each launch, copy and set is also run on
 * fakecupti's made-up device, as the real runtime reports its work to CUPTI. Built
 * as build/progs/fakecuda/libcudart.so.13 with the real library's symbol version
 * (fakecudart.map). Not a model of CUDA: nothing but what those tests need. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned x, y, z;
} dim3;

static __thread struct {
    dim3 g, b;
    size_t shmem;
    void *stream;
} pending;
static int module;

/* kernels by their host function: the device names the program registered */
static struct {
    const void *host_fn;
    const char *name;
} kernels[64];
static int nkernels;

/* fakecupti's device, when libprof (or the program) loaded it */
static struct {
    void (*kernel)(const char *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, size_t, int);
    void (*copy)(size_t, int, int);
    void (*set)(size_t, int);
} gpu;
static int device(void) {
    if (!gpu.kernel) {
        void *h = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD);
        if (!h) return 0;
        *(void **)&gpu.kernel = dlsym(h, "fakecupti_kernel");
        *(void **)&gpu.copy = dlsym(h, "fakecupti_copy");
        *(void **)&gpu.set = dlsym(h, "fakecupti_set");
        dlclose(h);
    }
    return gpu.kernel && gpu.copy && gpu.set;
}

void **__cudaRegisterFatBinary(void *fatbin) {
    (void)fatbin;
    return (void **)&module;
}
void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void __cudaUnregisterFatBinary(void **h) { (void)h; }
void __cudaRegisterFunction(void **h, const char *host_fn, char *dev, const char *name, int limit, void *tid, void *bid,
                            dim3 *bdim, dim3 *gdim, int *wsize) {
    (void)h, (void)dev, (void)limit, (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
    if (nkernels < 64) kernels[nkernels].host_fn = host_fn, kernels[nkernels++].name = name;
}
unsigned __cudaPushCallConfiguration(dim3 g, dim3 b, size_t shmem, void *stream) {
    pending.g = g;
    pending.b = b;
    pending.shmem = shmem;
    pending.stream = stream;
    return 0;
}
int __cudaPopCallConfiguration(dim3 *g, dim3 *b, size_t *shmem, void **stream) {
    *g = pending.g;
    *b = pending.b;
    *shmem = pending.shmem;
    *stream = pending.stream;
    return 0;
}
int __cudaGetKernel(void **handle, const void *host_fn) {
    *handle = (void *)host_fn;
    return 0;
}
int __cudaLaunchKernel(const void *k, dim3 g, dim3 b, void **args, size_t shmem, void *stream) {
    (void)args;
    const char *name = "?";
    for (int i = 0; i < nkernels; i++)
        if (kernels[i].host_fn == k) name = kernels[i].name;
    if (device()) gpu.kernel(name, g.x, g.y, g.z, b.x, b.y, b.z, shmem, stream != NULL);
    return 0;
}
int cudaMalloc(void **p, size_t n) {
    *p = malloc(n);
    return *p ? 0 : 2; /* cudaErrorMemoryAllocation */
}
int cudaFree(void *p) {
    free(p);
    return 0;
}
static int copy(void *d, const void *s, size_t n, int kind, void *stream) {
    memcpy(d, s, n);
    if (device()) gpu.copy(n, kind, stream != NULL);
    return 0;
}
int cudaMemcpy(void *d, const void *s, size_t n, int kind) { return copy(d, s, n, kind, NULL); }
int cudaMemcpyAsync(void *d, const void *s, size_t n, int kind, void *stream) { return copy(d, s, n, kind, stream); }
int cudaMemsetAsync(void *p, int v, size_t n, void *stream) {
    memset(p, v, n);
    if (device()) gpu.set(n, stream != NULL);
    return 0;
}
int cudaStreamCreate(void **s) {
    *s = (void *)&pending;
    return 0;
}
int cudaStreamSynchronize(void *s) {
    (void)s;
    return 0;
}
int cudaDeviceSynchronize(void) { return 0; }
int cudaGetLastError(void) { return 0; }
