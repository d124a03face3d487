/* fakecudart: a stand-in for libcudart.so.13 on machines with no GPU (CI), for the cuda tests
 * only: the entry points tests/progs/cudaprog calls, each succeeding — "device" memory is host
 * memory, copies are memcpy, a launch runs nothing — so that libprof's handling of successful
 * calls (device memory over time, its peak, what is freed) is exercised where no GPU is. Built
 * as build/progs/fakecuda/libcudart.so.13 with the real library's symbol version
 * (fakecudart.map). Not a model of CUDA: nothing but what those tests need. */
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

void **__cudaRegisterFatBinary(void *fatbin) {
    (void)fatbin;
    return (void **)&module;
}
void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void __cudaUnregisterFatBinary(void **h) { (void)h; }
void __cudaRegisterFunction(void **h, const char *stub, char *dev, const char *name, int limit, void *tid, void *bid,
                            dim3 *bdim, dim3 *gdim, int *wsize) {
    (void)h, (void)stub, (void)dev, (void)name, (void)limit, (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
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
int __cudaGetKernel(void **handle, const void *stub) {
    *handle = (void *)stub;
    return 0;
}
int __cudaLaunchKernel(const void *k, dim3 g, dim3 b, void **args, size_t shmem, void *stream) {
    (void)k, (void)g, (void)b, (void)args, (void)shmem, (void)stream;
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
int cudaMemcpy(void *d, const void *s, size_t n, int kind) {
    (void)kind;
    memcpy(d, s, n);
    return 0;
}
int cudaMemcpyAsync(void *d, const void *s, size_t n, int kind, void *stream) {
    (void)stream;
    return cudaMemcpy(d, s, n, kind);
}
int cudaMemsetAsync(void *p, int v, size_t n, void *stream) {
    (void)stream;
    memset(p, v, n);
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
