/* cublas.c: the cublas family — cuBLAS's GEMMs (libcublas.so, as PyTorch and programs call it):
 * single, double and typed (cublasGemmEx: half, bfloat16, ...) matrix products, strided batches
 * included, each a slice with m, n, k, the two transposes (cublasOperation_t: 0 none, 1
 * transpose, 2 conjugate), the batch count, the element type (cudaDataType: 0 float, 1 double, 2
 * half, 14 bfloat16, ...) and cuBLAS's status. A call only queues the product on its stream: the
 * slice is the host's time in cuBLAS, not the GPU's (which GPU time, when measured, gives).
 * cublasLt's matmul (libcublasLt.so, PyTorch's path for most GEMMs) keeps its shapes in
 * descriptors: they are read back from cublasLt itself (its GetAttribute functions) after the
 * call — D is m x n, A gives k (its columns, or rows when transposed). */
#define _GNU_SOURCE
#include <stdint.h>

#include "gpu.h"
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

int cublasLtMatmul(void *h, void *desc, const void *alpha, const void *a, void *ad, const void *b, void *bd,
                   const void *beta, const void *c, void *cd, void *d, void *dd, const void *algo, void *ws, size_t wss,
                   void *stream);
int cublasLtMatrixLayoutGetAttribute(void *layout, int attr, void *buf, size_t size, size_t *written);
int cublasLtMatmulDescGetAttribute(void *desc, int attr, void *buf, size_t size, size_t *written);

LP_REAL_SLOT(cublasSgemm_v2)
LP_REAL_SLOT(cublasDgemm_v2)
LP_REAL_SLOT(cublasGemmEx)
LP_REAL_SLOT(cublasSgemmStridedBatched)
LP_REAL_SLOT(cublasGemmStridedBatchedEx)
LP_REAL_SLOT(cublasLtMatmul)
LP_REAL_SLOT(cublasLtMatrixLayoutGetAttribute)
LP_REAL_SLOT(cublasLtMatmulDescGetAttribute)

/* cublasLt's descriptors (cublasLt.h's attribute numbers and sizes) */
enum { LAYOUT_TYPE = 0, LAYOUT_ROWS = 2, LAYOUT_COLS = 3, LAYOUT_BATCH = 5, DESC_TRANSA = 3, DESC_TRANSB = 4 };
static uint64_t layout_u64(void *l, int attr) {
    uint64_t v = 0;
    size_t got = 0;
    if (l && LP_REAL(cublasLtMatrixLayoutGetAttribute)) LP_REAL(cublasLtMatrixLayoutGetAttribute)(l, attr, &v, 8, &got);
    return got == 8 ? v : 0;
}
static int64_t layout_i32(void *l, int attr, int32_t dflt) {
    int32_t v = dflt;
    size_t got = 0;
    if (l && LP_REAL(cublasLtMatrixLayoutGetAttribute)) LP_REAL(cublasLtMatrixLayoutGetAttribute)(l, attr, &v, 4, &got);
    return got == 4 ? v : dflt;
}
static int64_t desc_op(void *d, int attr) {
    int32_t v = 0;
    size_t got = 0;
    if (d && LP_REAL(cublasLtMatmulDescGetAttribute)) LP_REAL(cublasLtMatmulDescGetAttribute)(d, attr, &v, 4, &got);
    return got == 4 ? v : 0;
}
/* k: A's columns, or its rows when A is transposed */
static uint64_t lt_k(void *desc, void *ad) {
    return layout_u64(ad, desc_op(desc, DESC_TRANSA) ? LAYOUT_ROWS : LAYOUT_COLS);
}

LP_HOOK_AROUND(CUBLAS, CUBLAS_SGEMM, cublas_status, cublasSgemm_v2,
               (void *h, int ta, int tb, int m, int n, int k, const float *al, const float *a, int lda, const float *b,
                int ldb, const float *be, float *c, int ldc),
               (h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc), STATUS_MISSING, LP_GPU_CALL, I(m), I(n), I(k),
               I(ta), I(tb), U(1), U(R_32F), I(r))
LP_HOOK_AROUND(CUBLAS, CUBLAS_DGEMM, cublas_status, cublasDgemm_v2,
               (void *h, int ta, int tb, int m, int n, int k, const double *al, const double *a, int lda,
                const double *b, int ldb, const double *be, double *c, int ldc),
               (h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc), STATUS_MISSING, LP_GPU_CALL, I(m), I(n), I(k),
               I(ta), I(tb), U(1), U(R_64F), I(r))
LP_HOOK_AROUND(CUBLAS, CUBLAS_GEMM_EX, cublas_status, cublasGemmEx,
               (void *h, int ta, int tb, int m, int n, int k, const void *al, const void *a, int at, int lda,
                const void *b, int bt, int ldb, const void *be, void *c, int ct, int ldc, int compute, int algo),
               (h, ta, tb, m, n, k, al, a, at, lda, b, bt, ldb, be, c, ct, ldc, compute, algo), STATUS_MISSING,
               LP_GPU_CALL, I(m), I(n), I(k), I(ta), I(tb), U(1), I(at), I(r))
LP_HOOK_AROUND(CUBLAS, CUBLAS_SGEMM_BATCHED, cublas_status, cublasSgemmStridedBatched,
               (void *h, int ta, int tb, int m, int n, int k, const float *al, const float *a, int lda, long long sa,
                const float *b, int ldb, long long sb, const float *be, float *c, int ldc, long long sc, int batch),
               (h, ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc, batch), STATUS_MISSING, LP_GPU_CALL,
               I(m), I(n), I(k), I(ta), I(tb), I(batch), U(R_32F), I(r))
LP_HOOK_AROUND(CUBLAS, CUBLAS_GEMM_BATCHED_EX, cublas_status, cublasGemmStridedBatchedEx,
               (void *h, int ta, int tb, int m, int n, int k, const void *al, const void *a, int at, int lda,
                long long sa, const void *b, int bt, int ldb, long long sb, const void *be, void *c, int ct, int ldc,
                long long sc, int batch, int compute, int algo),
               (h, ta, tb, m, n, k, al, a, at, lda, sa, b, bt, ldb, sb, be, c, ct, ldc, sc, batch, compute, algo),
               STATUS_MISSING, LP_GPU_CALL, I(m), I(n), I(k), I(ta), I(tb), I(batch), I(at), I(r))
LP_HOOK_AROUND(CUBLAS, CUBLASLT_MATMUL, cublas_status, cublasLtMatmul,
               (void *h, void *desc, const void *al, const void *a, void *ad, const void *b, void *bd, const void *be,
                const void *c, void *cd, void *d, void *dd, const void *algo, void *ws, size_t wss, void *stream),
               (h, desc, al, a, ad, b, bd, be, c, cd, d, dd, algo, ws, wss, stream), STATUS_MISSING, LP_GPU_CALL,
               U(layout_u64(dd, LAYOUT_ROWS)), U(layout_u64(dd, LAYOUT_COLS)), U(lt_k(desc, ad)),
               I(desc_op(desc, DESC_TRANSA)), I(desc_op(desc, DESC_TRANSB)), I(layout_i32(dd, LAYOUT_BATCH, 1)),
               I(layout_i32(ad, LAYOUT_TYPE, -1)), I(r))
