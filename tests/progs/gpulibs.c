/* gpulibs: the GPU libraries' entry points libprof records — cuBLAS GEMMs and NCCL collectives —
 * called as a program calls them, through the real libcublas.so and libnccl.so of the CUDA
 * toolkit. With no GPU (or none given: a NULL handle and communicator), each call returns its
 * library's error and queues nothing; the call, its shapes and bytes are what is recorded.
 * Prints each call's status, then "done". */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc);
int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha, const double *a, int lda,
                   const double *b, int ldb, const double *beta, double *c, int ldc);
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at, int lda,
                 const void *b, int bt, int ldb, const void *beta, void *c, int ct, int ldc, int compute, int algo);
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                              long long sa, const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                              long long sc, int batch);
int cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld);
int cublasLtMatmulDescCreate(void **d, int compute, int scale);
int cublasLtMatmulDescSetAttribute(void *d, int attr, const void *buf, size_t size);
int cublasLtMatmul(void *h, void *desc, const void *alpha, const void *a, void *ad, const void *b, void *bd,
                   const void *beta, const void *c, void *cd, void *d, void *dd, const void *algo, void *ws, size_t wss,
                   void *stream);
int ncclAllReduce(const void *s, void *r, size_t count, int type, int op, void *comm, void *stream);
int ncclBroadcast(const void *s, void *r, size_t count, int type, int root, void *comm, void *stream);
int ncclSend(const void *s, size_t count, int type, int peer, void *comm, void *stream);

int main(void) {
    float fa = 1, fb = 0;
    double da = 1, db = 0;
    printf("sgemm %d\n", cublasSgemm_v2(NULL, 0, 1, 64, 32, 16, &fa, NULL, 64, NULL, 32, &fb, NULL, 64));
    printf("dgemm %d\n", cublasDgemm_v2(NULL, 1, 0, 8, 8, 8, &da, NULL, 8, NULL, 8, &db, NULL, 8));
    /* half inputs (CUDA_R_16F = 2), float compute */
    printf("gemmex %d\n",
           cublasGemmEx(NULL, 0, 0, 128, 256, 512, &fa, NULL, 2, 128, NULL, 2, 512, &fb, NULL, 2, 128, 68, -1));
    printf("batched %d\n", cublasSgemmStridedBatched(NULL, 0, 0, 16, 16, 16, &fa, NULL, 16, 256, NULL, 16, 256, &fb,
                                                     NULL, 16, 256, 12));
    /* cublasLt: the shapes in descriptors (made on the host: no GPU needed); A transposed, 96 x 40
     * (so k = 96), B 96 x 80, D 40 x 80; bfloat16 (CUDA_R_16BF = 14), float compute (68) */
    void *desc = NULL, *la = NULL, *lb = NULL, *ld = NULL;
    int trans = 1;
    if (cublasLtMatmulDescCreate(&desc, 68, 0) == 0 && cublasLtMatmulDescSetAttribute(desc, 3, &trans, 4) == 0 &&
        cublasLtMatrixLayoutCreate(&la, 14, 96, 40, 96) == 0 && cublasLtMatrixLayoutCreate(&lb, 14, 96, 80, 96) == 0 &&
        cublasLtMatrixLayoutCreate(&ld, 14, 40, 80, 40) == 0)
        printf("ltmatmul %d\n",
               cublasLtMatmul(NULL, desc, &fa, NULL, la, NULL, lb, &fb, NULL, ld, NULL, ld, NULL, NULL, 0, NULL));
    else
        puts("ltmatmul descriptors failed");
    /* 1 Mi floats (ncclFloat32 = 7, ncclSum = 0); a broadcast of 4096 doubles (8) from rank 0 */
    printf("allreduce %d\n", ncclAllReduce(NULL, NULL, 1 << 20, 7, 0, NULL, NULL));
    printf("broadcast %d\n", ncclBroadcast(NULL, NULL, 4096, 8, 0, NULL, NULL));
    printf("send %d\n", ncclSend(NULL, 1000, 6, 3, NULL, NULL));
    puts("done");
    return 0;
}
