/* cublas.c: the cublas family — cuBLAS's GEMMs (libcublas.so, as PyTorch and programs call it):
 * single, double and typed (cublasGemmEx: half, bfloat16, ...) matrix products, strided batches
 * included, each a slice with m, n, k, the two transposes (cublasOperation_t: 0 none, 1
 * transpose, 2 conjugate), the batch count, the element type (cudaDataType: 0 float, 1 double, 2
 * half, 14 bfloat16, ...) and cuBLAS's status. A call only queues the product on its stream: the
 * slice is the host's time in cuBLAS, not the GPU's (which GPU time, when measured, gives).
 * cublasLt's matmul (shapes behind descriptors) is not seen here. */
#define _GNU_SOURCE
#include <stdint.h>

#include "hook.h"

typedef int cublas_status; /* cublasStatus_t */
enum { STATUS_MISSING = 999, R_32F = 0, R_64F = 1 };

int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc);
int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha, const double *a, int lda,
                   const double *b, int ldb, const double *beta, double *c, int ldc);
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at, int lda,
                 const void *b, int bt, int ldb, const void *beta, void *c, int ct, int ldc, int compute, int algo);
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                              long long sa, const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                              long long sc, int batch);
int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at,
                               int lda, long long sa, const void *b, int bt, int ldb, long long sb, const void *beta,
                               void *c, int ct, int ldc, long long sc, int batch, int compute, int algo);

LP_REAL_SLOT(cublasSgemm_v2)
LP_REAL_SLOT(cublasDgemm_v2)
LP_REAL_SLOT(cublasGemmEx)
LP_REAL_SLOT(cublasSgemmStridedBatched)
LP_REAL_SLOT(cublasGemmStridedBatchedEx)

LP_HOOK(CUBLAS, CUBLAS_SGEMM, cublas_status, cublasSgemm_v2,
        (void *h, int ta, int tb, int m, int n, int k, const float *al, const float *a, int lda, const float *b,
         int ldb, const float *be, float *c, int ldc),
        (h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc), STATUS_MISSING, (void)0, I(m), I(n), I(k), I(ta), I(tb),
        U(1), U(R_32F), I(r))
LP_HOOK(CUBLAS, CUBLAS_DGEMM, cublas_status, cublasDgemm_v2,
        (void *h, int ta, int tb, int m, int n, int k, const double *al, const double *a, int lda, const double *b,
         int ldb, const double *be, double *c, int ldc),
        (h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc), STATUS_MISSING, (void)0, I(m), I(n), I(k), I(ta), I(tb),
        U(1), U(R_64F), I(r))
LP_HOOK(CUBLAS, CUBLAS_GEMM_EX, cublas_status, cublasGemmEx,
        (void *h, int ta, int tb, int m, int n, int k, const void *al, const void *a, int at, int lda, const void *b,
         int bt, int ldb, const void *be, void *c, int ct, int ldc, int compute, int algo),
        (h, ta, tb, m, n, k, al, a, at, lda, b, bt, ldb, be, c, ct, ldc, compute, algo), STATUS_MISSING, (void)0, I(m),
        I(n), I(k), I(ta), I(tb), U(1), I(at), I(r))
LP_HOOK(CUBLAS, CUBLAS_SGEMM_BATCHED, cublas_status, cublasSgemmStridedBatched,
        (void *h, int ta, int tb, int m, int n, int k, const float *al, const float *a, int lda, long long sa,
         const float *b, int ldb, long long sb, const float *be, float *c, int ldc, long long sc, int batch),
        (h, ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc, batch), STATUS_MISSING, (void)0, I(m), I(n),
        I(k), I(ta), I(tb), I(batch), U(R_32F), I(r))
LP_HOOK(CUBLAS, CUBLAS_GEMM_BATCHED_EX, cublas_status, cublasGemmStridedBatchedEx,
        (void *h, int ta, int tb, int m, int n, int k, const void *al, const void *a, int at, int lda, long long sa,
         const void *b, int bt, int ldb, long long sb, const void *be, void *c, int ct, int ldc, long long sc,
         int batch, int compute, int algo),
        (h, ta, tb, m, n, k, al, a, at, lda, sa, b, bt, ldb, sb, be, c, ct, ldc, sc, batch, compute, algo),
        STATUS_MISSING, (void)0, I(m), I(n), I(k), I(ta), I(tb), I(batch), I(at), I(r))
