/* mpi.c: the mpi family — MPI_Init/Init_thread/Finalize, point-to-point (Send, Recv, Isend, Irecv,
 * Sendrecv, Wait, Waitall, Waitany, Test) and collectives (Barrier, Bcast, Reduce, Allreduce,
 * Gather, Scatter, Allgather(v), Alltoall(v), Reduce_scatter) as timed slices with their bytes
 * (count x MPI_Type_size), peer or root, tag and communicator size.
 *
 * No MPI headers: the few types are declared here with Open MPI's ABI (handles are pointers;
 * Debian's MPI). MPICH-family libraries pass int handles in the same registers and work too,
 * except that their handle values are shown as numbers. The real functions are the next
 * definitions of the same names (the MPI library, resolved on first use: most programs have
 * none); the sizes come from PMPI_Type_size and PMPI_Comm_size, the profiling interface every
 * MPI library exports, so a tool layered on PMPI underneath still sees its own calls. A program
 * without an MPI library never reaches these hooks; one that probes with
 * lpr_dlsym(RTLD_DEFAULT, "MPI_...") is told none is there (hooks/dl.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>

#include "hook.h"

typedef void *mpi_handle; /* MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request: pointers in Open MPI */
#define MPI_ERR_OTHER 16

/* the MPI functions hooked, as the C bindings declare them (const on send buffers) */
// clang-format off
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Finalize(void);
int MPI_Send(const void *buf, int count, mpi_handle dt, int dest, int tag, mpi_handle comm);
int MPI_Recv(void *buf, int count, mpi_handle dt, int source, int tag, mpi_handle comm, void *status);
int MPI_Isend(const void *buf, int count, mpi_handle dt, int dest, int tag, mpi_handle comm, mpi_handle *req);
int MPI_Irecv(void *buf, int count, mpi_handle dt, int source, int tag, mpi_handle comm, mpi_handle *req);
int MPI_Sendrecv(const void *sbuf, int scount, mpi_handle sdt, int dest, int stag, void *rbuf, int rcount,
                 mpi_handle rdt, int source, int rtag, mpi_handle comm, void *status);
int MPI_Wait(mpi_handle *req, void *status);
int MPI_Waitall(int n, mpi_handle *reqs, void *statuses);
int MPI_Waitany(int n, mpi_handle *reqs, int *index, void *status);
int MPI_Test(mpi_handle *req, int *flag, void *status);
int MPI_Barrier(mpi_handle comm);
int MPI_Bcast(void *buf, int count, mpi_handle dt, int root, mpi_handle comm);
int MPI_Reduce(const void *sbuf, void *rbuf, int count, mpi_handle dt, mpi_handle op, int root, mpi_handle comm);
int MPI_Allreduce(const void *sbuf, void *rbuf, int count, mpi_handle dt, mpi_handle op, mpi_handle comm);
int MPI_Gather(const void *sbuf, int scount, mpi_handle sdt, void *rbuf, int rcount, mpi_handle rdt, int root,
               mpi_handle comm);
int MPI_Scatter(const void *sbuf, int scount, mpi_handle sdt, void *rbuf, int rcount, mpi_handle rdt, int root,
                mpi_handle comm);
int MPI_Allgather(const void *sbuf, int scount, mpi_handle sdt, void *rbuf, int rcount, mpi_handle rdt,
                  mpi_handle comm);
int MPI_Allgatherv(const void *sbuf, int scount, mpi_handle sdt, void *rbuf, const int *rcounts, const int *displs,
                   mpi_handle rdt, mpi_handle comm);
int MPI_Alltoall(const void *sbuf, int scount, mpi_handle sdt, void *rbuf, int rcount, mpi_handle rdt,
                 mpi_handle comm);
int MPI_Alltoallv(const void *sbuf, const int *scounts, const int *sdispls, mpi_handle sdt, void *rbuf,
                  const int *rcounts, const int *rdispls, mpi_handle rdt, mpi_handle comm);
int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts, mpi_handle dt, mpi_handle op,
                       mpi_handle comm);

#define REALS(X) \
    X(MPI_Init) X(MPI_Init_thread) X(MPI_Finalize) X(MPI_Send) X(MPI_Recv) X(MPI_Isend) X(MPI_Irecv) \
    X(MPI_Sendrecv) X(MPI_Wait) X(MPI_Waitall) X(MPI_Waitany) X(MPI_Test) X(MPI_Barrier) X(MPI_Bcast) \
    X(MPI_Reduce) X(MPI_Allreduce) X(MPI_Gather) X(MPI_Scatter) X(MPI_Allgather) X(MPI_Allgatherv) \
    X(MPI_Alltoall) X(MPI_Alltoallv) X(MPI_Reduce_scatter)
// clang-format on
REALS(LP_REAL_SLOT)

static void *pmpi_type_size, *pmpi_comm_size;

/* count x the datatype's size (0 when it cannot be asked) */
static uint64_t bytes(int count, mpi_handle dt) {
    int (*f)(mpi_handle, int *) = (int (*)(mpi_handle, int *))lpr_next(&pmpi_type_size, "PMPI_Type_size");
    int sz = 0;
    if (!f || count <= 0 || f(dt, &sz) != 0 || sz < 0) return 0;
    return (uint64_t)count * (uint64_t)sz;
}

static uint64_t comm_size(mpi_handle comm) {
    int (*f)(mpi_handle, int *) = (int (*)(mpi_handle, int *))lpr_next(&pmpi_comm_size, "PMPI_Comm_size");
    int n = 0;
    return f && f(comm, &n) == 0 && n > 0 ? (uint64_t)n : 0;
}

static uint64_t sum_bytes(const int *counts, int n, mpi_handle dt) {
    uint64_t s = 0;
    for (int i = 0; counts && i < n; i++) s += bytes(counts[i], dt);
    return s;
}

/* the sizes are read before the call (a collective may be the communicator's last use) */
LP_HOOK(MPI, MPI_INIT, int, MPI_Init, (int *argc, char ***argv), (argc, argv), MPI_ERR_OTHER, (void)0, I(r))
LP_HOOK(MPI, MPI_INIT_THREAD, int, MPI_Init_thread, (int *argc, char ***argv, int required, int *provided),
        (argc, argv, required, provided), MPI_ERR_OTHER, (void)0, I(required), I(provided ? *provided : -1), I(r))
LP_HOOK(MPI, MPI_FINALIZE, int, MPI_Finalize, (void), (), MPI_ERR_OTHER, (void)0, I(r))
LP_HOOK(MPI, MPI_SEND, int, MPI_Send, (const void *buf, int count, mpi_handle dt, int dest, int tag, mpi_handle comm),
        (buf, count, dt, dest, tag, comm), MPI_ERR_OTHER, uint64_t b = bytes(count, dt);
        uint64_t n = comm_size(comm), b, I(dest), I(tag), n, I(r))
LP_HOOK(MPI, MPI_RECV, int, MPI_Recv,
        (void *buf, int count, mpi_handle dt, int source, int tag, mpi_handle comm, void *status),
        (buf, count, dt, source, tag, comm, status), MPI_ERR_OTHER, uint64_t b = bytes(count, dt);
        uint64_t n = comm_size(comm), b, I(source), I(tag), n, I(r))
LP_HOOK(MPI, MPI_ISEND, int, MPI_Isend,
        (const void *buf, int count, mpi_handle dt, int dest, int tag, mpi_handle comm, mpi_handle *req),
        (buf, count, dt, dest, tag, comm, req), MPI_ERR_OTHER, uint64_t b = bytes(count, dt);
        uint64_t n = comm_size(comm), b, I(dest), I(tag), n, I(r))
LP_HOOK(MPI, MPI_IRECV, int, MPI_Irecv,
        (void *buf, int count, mpi_handle dt, int source, int tag, mpi_handle comm, mpi_handle *req),
        (buf, count, dt, source, tag, comm, req), MPI_ERR_OTHER, uint64_t b = bytes(count, dt);
        uint64_t n = comm_size(comm), b, I(source), I(tag), n, I(r))
LP_HOOK(MPI, MPI_SENDRECV, int, MPI_Sendrecv,
        (const void *sbuf, int scount, mpi_handle sdt, int dest, int stag, void *rbuf, int rcount, mpi_handle rdt,
         int source, int rtag, mpi_handle comm, void *status),
        (sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, source, rtag, comm, status), MPI_ERR_OTHER,
        uint64_t b = bytes(scount, sdt);
        uint64_t rb = bytes(rcount, rdt); uint64_t n = comm_size(comm), b, I(dest), I(stag), n, I(r), rb, I(source))
LP_HOOK(MPI, MPI_WAIT, int, MPI_Wait, (mpi_handle * req, void *status), (req, status), MPI_ERR_OTHER, (void)0, I(r))
LP_HOOK(MPI, MPI_WAITALL, int, MPI_Waitall, (int cnt, mpi_handle *reqs, void *statuses), (cnt, reqs, statuses),
        MPI_ERR_OTHER, (void)0, I(cnt), I(r))
LP_HOOK(MPI, MPI_WAITANY, int, MPI_Waitany, (int cnt, mpi_handle *reqs, int *index, void *status),
        (cnt, reqs, index, status), MPI_ERR_OTHER, (void)0, I(cnt), I(r))
LP_HOOK(MPI, MPI_TEST, int, MPI_Test, (mpi_handle * req, int *flag, void *status), (req, flag, status), MPI_ERR_OTHER,
        (void)0, I(r))
LP_HOOK(MPI, MPI_BARRIER, int, MPI_Barrier, (mpi_handle comm), (comm), MPI_ERR_OTHER, uint64_t n = comm_size(comm), n,
        I(r))
LP_HOOK(MPI, MPI_BCAST, int, MPI_Bcast, (void *buf, int count, mpi_handle dt, int root, mpi_handle comm),
        (buf, count, dt, root, comm), MPI_ERR_OTHER, uint64_t b = bytes(count, dt);
        uint64_t n = comm_size(comm), b, I(root), n, I(r))
LP_HOOK(MPI, MPI_REDUCE, int, MPI_Reduce,
        (const void *sbuf, void *rbuf, int count, mpi_handle dt, mpi_handle op, int root, mpi_handle comm),
        (sbuf, rbuf, count, dt, op, root, comm), MPI_ERR_OTHER, uint64_t b = bytes(count, dt);
        uint64_t n = comm_size(comm), b, I(root), n, I(r))
LP_HOOK(MPI, MPI_ALLREDUCE, int, MPI_Allreduce,
        (const void *sbuf, void *rbuf, int count, mpi_handle dt, mpi_handle op, mpi_handle comm),
        (sbuf, rbuf, count, dt, op, comm), MPI_ERR_OTHER, uint64_t b = bytes(count, dt);
        uint64_t n = comm_size(comm), b, n, I(r))
LP_HOOK(MPI, MPI_GATHER, int, MPI_Gather,
        (const void *sbuf, int scount, mpi_handle sdt, void *rbuf, int rcount, mpi_handle rdt, int root,
         mpi_handle comm),
        (sbuf, scount, sdt, rbuf, rcount, rdt, root, comm), MPI_ERR_OTHER, uint64_t b = bytes(scount, sdt);
        uint64_t n = comm_size(comm), b, I(root), n, I(r))
LP_HOOK(MPI, MPI_SCATTER, int, MPI_Scatter,
        (const void *sbuf, int scount, mpi_handle sdt, void *rbuf, int rcount, mpi_handle rdt, int root,
         mpi_handle comm),
        (sbuf, scount, sdt, rbuf, rcount, rdt, root, comm), MPI_ERR_OTHER, uint64_t b = bytes(rcount, rdt);
        uint64_t n = comm_size(comm), b, I(root), n, I(r))
LP_HOOK(MPI, MPI_ALLGATHER, int, MPI_Allgather,
        (const void *sbuf, int scount, mpi_handle sdt, void *rbuf, int rcount, mpi_handle rdt, mpi_handle comm),
        (sbuf, scount, sdt, rbuf, rcount, rdt, comm), MPI_ERR_OTHER, uint64_t b = bytes(scount, sdt);
        uint64_t n = comm_size(comm), b, n, I(r))
LP_HOOK(MPI, MPI_ALLGATHERV, int, MPI_Allgatherv,
        (const void *sbuf, int scount, mpi_handle sdt, void *rbuf, const int *rcounts, const int *displs,
         mpi_handle rdt, mpi_handle comm),
        (sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm), MPI_ERR_OTHER, uint64_t b = bytes(scount, sdt);
        uint64_t n = comm_size(comm), b, n, I(r))
LP_HOOK(MPI, MPI_ALLTOALL, int, MPI_Alltoall,
        (const void *sbuf, int scount, mpi_handle sdt, void *rbuf, int rcount, mpi_handle rdt, mpi_handle comm),
        (sbuf, scount, sdt, rbuf, rcount, rdt, comm), MPI_ERR_OTHER, uint64_t n = comm_size(comm);
        uint64_t b = bytes(scount, sdt) * n, b, n, I(r))
LP_HOOK(MPI, MPI_ALLTOALLV, int, MPI_Alltoallv,
        (const void *sbuf, const int *scounts, const int *sdispls, mpi_handle sdt, void *rbuf, const int *rcounts,
         const int *rdispls, mpi_handle rdt, mpi_handle comm),
        (sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm), MPI_ERR_OTHER, uint64_t n = comm_size(comm);
        uint64_t b = sum_bytes(scounts, (int)n, sdt), b, n, I(r))
LP_HOOK(MPI, MPI_REDUCE_SCATTER, int, MPI_Reduce_scatter,
        (const void *sbuf, void *rbuf, const int *rcounts, mpi_handle dt, mpi_handle op, mpi_handle comm),
        (sbuf, rbuf, rcounts, dt, op, comm), MPI_ERR_OTHER, uint64_t n = comm_size(comm);
        uint64_t b = sum_bytes(rcounts, (int)n, dt), b, n, I(r))

/* dlsym of an MPI_* name (hooks/dl.c sends it here): libprof exports the MPI functions it hooks,
 * so a program probing the global scope for MPI would find libprof's — it is told what it would
 * be told without libprof: the MPI library's function, or nothing (and dlerror says so, as it
 * would have: ctypes reads it). */
void *lpr_mpi_dlsym(void *handle, const char *name) {
    void *f = lpr_dlsym(handle, name);
    Dl_info self, at;
    if (f && dladdr((void *)lpr_mpi_dlsym, &self) && dladdr(f, &at) && at.dli_fbase == self.dli_fbase) {
        f = lpr_resolve(name);
        if (!f) {
            static void *libc;
            if (!libc) libc = LPR_REAL(dlopen)("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
            if (libc) lpr_dlsym(libc, name);
        }
    }
    return f;
}
