/* fakecublas: a stand-in for libcublas.so.13 beside fakecudart and fakecupti (build/progs/fakecuda/),
 * for the GEMMs' GPU throughput test only: the four GEMMs tests/progs/gpulibs calls succeed, each
 * running one kernel on fakecupti's made-up device (grid_x = m * n * batch / 256, at least 1;
 * block 256: by fakecupti's rule 1000 + grid_x / 2 ns), as cuBLAS launches its kernels inside
 * the call. Not a model of cuBLAS: nothing but what that test needs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef int status;

static void run(const char *name, long m, long n, long batch) {
    static void (*kernel)(const char *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, size_t, int);
    if (!kernel) {
        void *h = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD);
        if (!h) return;
        *(void **)&kernel = dlsym(h, "fakecupti_kernel");
        dlclose(h);
    }
    long g = m * n * batch / 256;
    if (kernel) kernel(name, (unsigned)(g > 0 ? g : 1), 1, 1, 256, 1, 1, 0, 0);
}

status cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *al, const float *a, int lda,
                      const float *b, int ldb, const float *be, float *c, int ldc) {
    (void)h, (void)ta, (void)tb, (void)k, (void)al, (void)a, (void)lda, (void)b, (void)ldb, (void)be, (void)c,
        (void)ldc;
    run("fake_sgemm", m, n, 1);
    return 0;
}
status cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *al, const double *a, int lda,
                      const double *b, int ldb, const double *be, double *c, int ldc) {
    (void)h, (void)ta, (void)tb, (void)k, (void)al, (void)a, (void)lda, (void)b, (void)ldb, (void)be, (void)c,
        (void)ldc;
    run("fake_dgemm", m, n, 1);
    return 0;
}
status cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *al, const void *a, int at, int lda,
                    const void *b, int bt, int ldb, const void *be, void *c, int ct, int ldc, int compute, int algo) {
    (void)h, (void)ta, (void)tb, (void)k, (void)al, (void)a, (void)at, (void)lda, (void)b, (void)bt, (void)ldb;
    (void)be, (void)c, (void)ct, (void)ldc, (void)compute, (void)algo;
    run("fake_gemmex", m, n, 1);
    return 0;
}
status cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *al, const float *a, int lda,
                                 long long sa, const float *b, int ldb, long long sb, const float *be, float *c,
                                 int ldc, long long sc, int batch) {
    (void)h, (void)ta, (void)tb, (void)k, (void)al, (void)a, (void)lda, (void)sa, (void)b, (void)ldb, (void)sb;
    (void)be, (void)c, (void)ldc, (void)sc;
    run("fake_sgemm_batched", m, n, batch);
    return 0;
}
