// cudaprog: a CUDA program of known calls, built with nvcc -cudart shared (the runtime as a shared
// library, as PyTorch has it): a 4 MiB device buffer, a copy to it, three launches of scale
// (grid 4096, block 256) and two of add_one (grid 1024, block 1024, 128 bytes of shared memory, on
// a stream of its own), a set, a copy back, the waits, the frees. Prints each call's CUDA error
// code (35, "driver insufficient", on a machine with no GPU; 0 on one) and exits 0 either way.
// With the argument own-cupti it is then a CUPTI client of its own, as a program running
// torch.profiler is: it loads libcupti.so.13, registers its buffer callbacks, traces kernels,
// launches scale once more, flushes, and prints how many kernel records it got.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <dlfcn.h>
#include <cuda_runtime.h>

__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

__global__ void add_one(float *x, int n) {
    extern __shared__ float pad[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f + 0.0f * pad[0];
}

static float host[1 << 20];

static int own_kernels;
static void want(uint8_t **b, size_t *n, size_t *max) {
    *n = 1 << 20;
    *b = (uint8_t *)malloc(*n);
    *max = 0;
}
static int (*next_record)(uint8_t *, size_t, void **);
static void done(void *ctx, uint32_t s, uint8_t *b, size_t n, size_t valid) {
    (void)ctx, (void)s, (void)n;
    void *r = nullptr;
    while (next_record(b, valid, &r) == 0)
        if (*(uint32_t *)r == 10) own_kernels++; // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
    free(b);
}

// The program's own CUPTI client: -1 when it has no CUPTI.
static int own_cupti(float *d, int n) {
    void *h = dlopen("libcupti.so.13", RTLD_NOW);
    if (!h) return -1;
    auto reg = (int (*)(void (*)(uint8_t **, size_t *, size_t *), void (*)(void *, uint32_t, uint8_t *, size_t,
                                                                            size_t)))dlsym(h, "cuptiActivityRegisterCallbacks");
    auto enable = (int (*)(int))dlsym(h, "cuptiActivityEnable");
    auto flush = (int (*)(uint32_t))dlsym(h, "cuptiActivityFlushAll");
    next_record = (int (*)(uint8_t *, size_t, void **))dlsym(h, "cuptiActivityGetNextRecord");
    if (!reg || !enable || !flush || !next_record || reg(want, done) != 0 || enable(10) != 0) return -1;
    scale<<<n / 256, 256>>>(d, 0.5f, n);
    cudaDeviceSynchronize();
    flush(1);
    return own_kernels;
}

int main(int argc, char **argv) {
    const int n = 1 << 20;
    const size_t bytes = n * sizeof(float);
    float *d = nullptr;
    cudaStream_t s = nullptr;
    for (int i = 0; i < n; i++) host[i] = (float)(i % 7);
    printf("cudaMalloc %d\n", (int)cudaMalloc(&d, bytes));
    printf("cudaMemcpy %d\n", (int)cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    for (int k = 0; k < 3; k++) {
        scale<<<n / 256, 256>>>(d, 2.0f, n);
        printf("scale %d\n", (int)cudaGetLastError());
    }
    cudaStreamCreate(&s);
    for (int k = 0; k < 2; k++) {
        add_one<<<n / 1024, 1024, 128, s>>>(d, n);
        printf("add_one %d\n", (int)cudaGetLastError());
    }
    printf("cudaMemsetAsync %d\n", (int)cudaMemsetAsync(d, 0, bytes / 2, s));
    printf("cudaMemcpyAsync %d\n", (int)cudaMemcpyAsync(host, d, bytes, cudaMemcpyDeviceToHost, s));
    printf("cudaStreamSynchronize %d\n", (int)cudaStreamSynchronize(s));
    printf("cudaDeviceSynchronize %d\n", (int)cudaDeviceSynchronize());
    if (argc > 1 && !strcmp(argv[1], "own-cupti")) printf("own cupti kernels %d\n", own_cupti(d, n));
    printf("cudaFree %d\n", (int)cudaFree(d));
    double sum = 0;
    for (int i = 0; i < n; i++) sum += host[i];
    printf("sum %.1f\n", sum);
    return 0;
}
