// cudaprog: a CUDA program of known calls, built with nvcc -cudart shared (the runtime as a shared
// library, as PyTorch has it): a 4 MiB device buffer, a copy to it, three launches of scale
// (grid 4096, block 256) and two of add_one (grid 1024, block 1024, 128 bytes of shared memory, on
// a stream of its own), a set, a copy back, the waits, the frees. Prints each call's CUDA error
// code (35, "driver insufficient", on a machine with no GPU; 0 on one) and exits 0 either way.
#include <cstdio>
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

int main() {
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
    printf("cudaFree %d\n", (int)cudaFree(d));
    double sum = 0;
    for (int i = 0; i < n; i++) sum += host[i];
    printf("sum %.1f\n", sum);
    return 0;
}
