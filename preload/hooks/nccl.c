/* nccl.c: the nccl family — NCCL's collectives and point-to-point calls (libnccl.so.2, as
 * PyTorch's distributed backend calls it): all-reduce, broadcast, reduce, all-gather,
 * reduce-scatter, send, receive, each a slice with the bytes it moves (count x the element
 * type's size), the root or the peer (-1: none), the communicator's ranks (ncclCommCount; 0 when
 * the communicator cannot say), the stream, and NCCL's result. A call queues the operation on
 * its stream: the slice is the host's time in NCCL, not the transfer's. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "hook.h"

typedef int nccl_result; /* ncclResult_t */
enum { RESULT_MISSING = 999 };

/* ncclDataType_t -> bytes an element (nccl.h: int8, uint8, int32, uint32, int64, uint64, half,
 * float, double, bfloat16, fp8 e4m3, fp8 e5m2) */
static const uint8_t type_bytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static uint64_t bytes_of(size_t count, int type) {
    return type >= 0 && type < (int)sizeof type_bytes ? (uint64_t)count * type_bytes[type] : 0;
}

int ncclCommCount(const void *comm, int *count);
int ncclAllReduce(const void *s, void *r, size_t count, int type, int op, void *comm, void *stream);
int ncclBroadcast(const void *s, void *r, size_t count, int type, int root, void *comm, void *stream);
int ncclReduce(const void *s, void *r, size_t count, int type, int op, int root, void *comm, void *stream);
int ncclAllGather(const void *s, void *r, size_t count, int type, void *comm, void *stream);
int ncclReduceScatter(const void *s, void *r, size_t count, int type, int op, void *comm, void *stream);
int ncclSend(const void *s, size_t count, int type, int peer, void *comm, void *stream);
int ncclRecv(void *r, size_t count, int type, int peer, void *comm, void *stream);

LP_REAL_SLOT(ncclCommCount)
LP_REAL_SLOT(ncclAllReduce)
LP_REAL_SLOT(ncclBroadcast)
LP_REAL_SLOT(ncclReduce)
LP_REAL_SLOT(ncclAllGather)
LP_REAL_SLOT(ncclReduceScatter)
LP_REAL_SLOT(ncclSend)
LP_REAL_SLOT(ncclRecv)

/* The communicator's ranks, asked of NCCL itself (0: it cannot say). */
static uint64_t ranks(void *comm) {
    int n = 0;
    if (!comm || !LP_REAL(ncclCommCount) || LP_REAL(ncclCommCount)(comm, &n) != 0) return 0;
    return n > 0 ? (uint64_t)n : 0;
}

LP_HOOK_AROUND(NCCL, NCCL_ALLREDUCE, nccl_result, ncclAllReduce,
               (const void *s, void *r_, size_t count, int type, int op, void *comm, void *stream),
               (s, r_, count, type, op, comm, stream), RESULT_MISSING, LP_GPU_CALL, U(bytes_of(count, type)), I(-1),
               U(ranks(comm)), U(stream), I(r))
LP_HOOK_AROUND(NCCL, NCCL_BROADCAST, nccl_result, ncclBroadcast,
               (const void *s, void *r_, size_t count, int type, int root, void *comm, void *stream),
               (s, r_, count, type, root, comm, stream), RESULT_MISSING, LP_GPU_CALL, U(bytes_of(count, type)), I(root),
               U(ranks(comm)), U(stream), I(r))
LP_HOOK_AROUND(NCCL, NCCL_REDUCE, nccl_result, ncclReduce,
               (const void *s, void *r_, size_t count, int type, int op, int root, void *comm, void *stream),
               (s, r_, count, type, op, root, comm, stream), RESULT_MISSING, LP_GPU_CALL, U(bytes_of(count, type)),
               I(root), U(ranks(comm)), U(stream), I(r))
LP_HOOK_AROUND(NCCL, NCCL_ALLGATHER, nccl_result, ncclAllGather,
               (const void *s, void *r_, size_t count, int type, void *comm, void *stream),
               (s, r_, count, type, comm, stream), RESULT_MISSING, LP_GPU_CALL, U(bytes_of(count, type)), I(-1),
               U(ranks(comm)), U(stream), I(r))
LP_HOOK_AROUND(NCCL, NCCL_REDUCESCATTER, nccl_result, ncclReduceScatter,
               (const void *s, void *r_, size_t count, int type, int op, void *comm, void *stream),
               (s, r_, count, type, op, comm, stream), RESULT_MISSING, LP_GPU_CALL, U(bytes_of(count, type)), I(-1),
               U(ranks(comm)), U(stream), I(r))
LP_HOOK_AROUND(NCCL, NCCL_SEND, nccl_result, ncclSend,
               (const void *s, size_t count, int type, int peer, void *comm, void *stream),
               (s, count, type, peer, comm, stream), RESULT_MISSING, LP_GPU_CALL, U(bytes_of(count, type)), I(peer),
               U(ranks(comm)), U(stream), I(r))
LP_HOOK_AROUND(NCCL, NCCL_RECV, nccl_result, ncclRecv,
               (void *r_, size_t count, int type, int peer, void *comm, void *stream),
               (r_, count, type, peer, comm, stream), RESULT_MISSING, LP_GPU_CALL, U(bytes_of(count, type)), I(peer),
               U(ranks(comm)), U(stream), I(r))
