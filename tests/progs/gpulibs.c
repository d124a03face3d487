/* gpulibs: the GPU libraries' entry points libprof records — cuBLAS GEMMs and NCCL collectives —
 * called as a program calls them, through the real libcublas.so and libnccl.so of the CUDA
 * toolkit. With no GPU (or none given: a NULL handle and communicator), each call returns its
 * library's error and queues nothing; the call, its shapes and bytes are what is recorded.
 * Prints each call's status, then "done". */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <nccl.h>
#include <stdio.h>

int main(void) {
    float fa = 1, fb = 0;
    double da = 1, db = 0;
    printf("sgemm %d\n",
           cublasSgemm(NULL, CUBLAS_OP_N, CUBLAS_OP_T, 64, 32, 16, &fa, NULL, 64, NULL, 32, &fb, NULL, 64));
    printf("dgemm %d\n", cublasDgemm(NULL, CUBLAS_OP_T, CUBLAS_OP_N, 8, 8, 8, &da, NULL, 8, NULL, 8, &db, NULL, 8));
    /* half inputs (CUDA_R_16F, 2 in the trace), float compute */
    printf("gemmex %d\n",
           cublasGemmEx(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 128, 256, 512, &fa, NULL, CUDA_R_16F, 128, NULL, CUDA_R_16F,
                        512, &fb, NULL, CUDA_R_16F, 128, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    printf("batched %d\n", cublasSgemmStridedBatched(NULL, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &fa, NULL, 16, 256,
                                                     NULL, 16, 256, &fb, NULL, 16, 256, 12));
    /* cublasLt: the shapes in descriptors (made on the host: no GPU needed); A transposed, 96 x 40
     * (so k = 96), B 96 x 80, D 40 x 80; bfloat16 (CUDA_R_16BF, 14 in the trace), float compute */
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasOperation_t trans = CUBLAS_OP_T;
    if (cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0 &&
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans) == 0 &&
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, 96, 40, 96) == 0 &&
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, 96, 80, 96) == 0 &&
        cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, 40, 80, 40) == 0)
        printf("ltmatmul %d\n",
               cublasLtMatmul(NULL, desc, &fa, NULL, la, NULL, lb, &fb, NULL, ld, NULL, ld, NULL, NULL, 0, NULL));
    else
        puts("ltmatmul descriptors failed");
    /* 1 Mi floats; a broadcast of 4096 doubles from rank 0; 1000 halves to rank 3 */
    printf("allreduce %d\n", ncclAllReduce(NULL, NULL, 1 << 20, ncclFloat32, ncclSum, NULL, NULL));
    printf("broadcast %d\n", ncclBroadcast(NULL, NULL, 4096, ncclFloat64, 0, NULL, NULL));
    printf("send %d\n", ncclSend(NULL, 1000, ncclFloat16, 3, NULL, NULL));
    puts("done");
    return 0;
}
