/* libprof raw trace format (.lpt): the one definition shared by the preload and the tools.
 *
 * A raw trace is a fixed file header followed by a sequence of chunks. Every chunk starts with a
 * 32-byte chunk header, so a reader can walk the file without understanding every chunk type,
 * and a file cut short (process killed, disk full) still decodes up to its last whole chunk.
 * A clean run ends with an END chunk; its absence is how a reader knows the trace was cut short.
 *
 * Threads write EVENTS chunks independently (one pwrite each, at offsets reserved with an atomic
 * add), so chunks of different threads interleave in the file; within one thread they are in
 * order. Events inside a chunk are packed records of 64-bit words:
 *
 *   word 0   (kind | LP_REC_TIMED?) << 56 | time in clock ticks since the file's origin (56 bits)
 *   word 1   only when LP_REC_TIMED: duration in ticks (low 48 bits) | aux (high 16 bits, 0 today)
 *   then     payload, lp_kind_words[kind] words (see the X-macro list below)
 *
 * A timed record's time is the call's start. An untimed record carries one timestamp, taken when
 * the call took effect: after an allocation returned, before a release began. Allocation calls
 * are untimed unless LIBPROF_ALLOC_TIMING=1 (one timestamp costs ~8 ns on a virtual machine's
 * TSC, a large share of a malloc); realloc is always timed because it releases at its start and
 * allocates at its end.
 *
 * Ticks are converted to nanoseconds with the (ticks, CLOCK_MONOTONIC ns) pairs stored in the
 * file header and in every chunk header: the decoder fits a line through the first and last pair.
 * With LP_CLOCK_MONOTONIC a tick is a nanosecond.
 *
 * All integers are little-endian host order; the header's byte_order field lets a reader on
 * another machine refuse the file rather than misread it.
 *
 * Update LP_FORMAT_VERSION on every change to this file's layouts or kind numbering. */
#ifndef LIBPROF_FORMAT_H
#define LIBPROF_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define LIBPROF_VERSION "0.1.0"       /* the release, shown in traces and --version */
#define LP_FORMAT_MAGIC "LIBPROF\x1a" /* 8 bytes; \x1a stops `type` from dumping the file */
#define LP_FORMAT_VERSION 17
#define LP_FORMAT_VERSION_OLDEST 9 /* readers take every version from this one on */
#define LP_BYTE_ORDER_MARK 0x01020304u
#define LP_CHUNK_MAGIC 0x4b43504cu /* "LPCK" read as little-endian */

/* Event families: the one list that LIBPROF_EVENTS (the recorder's config), the format and
 * libprof-report read. The bit is the family's index. `kernel`: the family's calls are compute
 * kernels — what the report's framework tax counts as work done (time outside kernels is the
 * framework's). Adding a family: a row here, its entry points in LP_CALLS, one hook file. */
/* the list as it reads best, one group a line */
// clang-format off
#define LP_FAMILIES(X)                                                                               \
    X(ALLOC, "alloc", 0)     /* malloc, free and the rest of the allocation functions */             \
    X(ANNOT, "annot", 0)     /* the annotation API (include/libprof.h) */                            \
    X(CONTROL, "control", 0) /* pause/resume/reset: always recorded, whatever LIBPROF_EVENTS says */ \
    X(THREAD, "thread", 0)   /* thread creation, lifetime, join */                                   \
    X(SYNC, "sync", 0)       /* lock waits: only calls that blocked */                               \
    X(DL, "dl", 0)           /* dlopen, dlclose */                                                   \
    X(IO, "io", 0)           /* POSIX and stdio file I/O, mmap */                                    \
    X(PROC, "process", 0)    /* fork, exec, spawn, system, wait */                                   \
    X(WAIT, "wait", 0)       /* sleeping and polling: off-CPU time */                                \
    X(BLAS, "blas", 1)       /* CBLAS and Fortran BLAS level 1-3 */                                  \
    X(DNNL, "dnnl", 1)       /* oneDNN primitive execution */                                        \
    X(OMP, "omp", 1)         /* OpenMP parallel regions (libgomp) */                                 \
    X(PYTHON, "python", 0)   /* LIBPROF_PYTHON_CALLS functions; the waits for the GIL */                 \
    X(ORT, "ort", 0)         /* ONNX Runtime sessions and runs (its C API table) */                  \
    X(MPI, "mpi", 0)         /* MPI: init, point-to-point, collectives */                            \
    X(CPU, "cpu", 0)         /* CPU samples of every thread (LIBPROF_SAMPLE_HZ) */               \
    X(TORCH, "torch", 0)     /* PyTorch operators, autograd nodes, record_function ranges */      \
    X(NET, "net", 0)         /* sockets: socket, connect, accept, send, recv, shutdown */            \
    X(EXECUTORCH, "executorch", 0) /* ExecuTorch: each Method::execute, each instruction it runs */ \
    X(CUDA, "cuda", 0)       /* the CUDA runtime: launches, device memory, copies, waits on the GPU */ \
    X(NVTX, "nvtx", 0)       /* NVTX ranges and marks (C, torch.cuda.nvtx), through NVTX's injection */ \
    X(CUBLAS, "cublas", 0)   /* cuBLAS GEMMs: shapes, transposes, batches (queued on the GPU) */ \
    X(NCCL, "nccl", 0)       /* NCCL collectives and point-to-point: bytes, root or peer, ranks */
// clang-format on

enum lp_family {
#define LP_X(id, name, kernel) LP_FAM_##id,
    LP_FAMILIES(LP_X) /* no semicolon: the entries carry their commas */
#undef LP_X
    LP_FAM_COUNT
};

/* How a kind's payload words are to be read. */
enum lp_shape {
    LP_SHAPE_ALLOC,    /* size, ptr            : a block of `size` bytes now lives at ptr (0 = failed) */
    LP_SHAPE_FREE,     /* ptr                  : ptr released (0 = free(NULL)) */
    LP_SHAPE_REALLOC,  /* size, ptr, old ptr   : old released (unless ptr==0 && size>0), ptr now lives */
    LP_SHAPE_RANGE,    /* name id (timed)      : a named block of the program, pushed and popped */
    LP_SHAPE_MARK,     /* name id              : a named instant */
    LP_SHAPE_COUNTER,  /* name id, value       : a named counter took `value` (IEEE double bits) */
    LP_SHAPE_CONTROL,  /* reason (enum lp_control_reason): recording paused, resumed or reset */
    LP_SHAPE_CALL,     /* call header word, args, string: an intercepted runtime entry point */
    LP_SHAPE_STACKREF, /* no payload: the 56 "time" bits are a stack id (STACKS chunks) that belongs
                       * to the next record of the same thread (LIBPROF_STACKS) */
    LP_SHAPE_PYCALL,   /* code id (timed)      : a Python function ran (PYCODE entry; LIBPROF_PYTHON_CALLS) */
    LP_SHAPE_SAMPLE,   /* weight | flags, pc   : the thread was on the CPU at instruction pc, called from
                        * the stack of the STACK word before it (the callers: pc's own frame is not
                        * in it); weight periods of the sampling clock (LP_SAMPLE_*) */
    LP_SHAPE_TALLY,    /* mask, words          : the allocations and frees of the thread since its last
                        * TALLY that were counted and not recorded (LIBPROF_ALLOC_SAMPLE): bit i
                        * of the mask says word i of enum lp_tally_word follows (in order; the
                        * others are 0) */
};

/* A TALLY's payload (format 14 on). Under LIBPROF_ALLOC_SAMPLE an allocation that holds no
 * sampled byte, and the free of a block that was not recorded, are not recorded one by one: the
 * thread adds them up here, and writes the sums as one record every LP_TALLY_EVERY allocations or
 * frees (and before a record of its own when they moved the heap by a sampling gap, when it
 * waits, when it ends). The bytes a counted block
 * holds on the heap are its usable size (malloc_usable_size), since a free knows nothing else;
 * the bytes asked go to the per-function table. Words: */
enum lp_tally_word {
    LP_TALLY_MALLOC_N, /* malloc calls */
    LP_TALLY_MALLOC_B, /* ... bytes asked */
    LP_TALLY_CALLOC_N, /* calloc calls */
    LP_TALLY_CALLOC_B, /* ... bytes asked */
    LP_TALLY_REALLOC_N,
    LP_TALLY_REALLOC_B,
    LP_TALLY_FREE_N, /* free calls (free(NULL) too) */
    LP_TALLY_FREE_B, /* ... bytes released */
    LP_TALLY_NET,    /* bytes allocated less released (two's complement) */
    LP_TALLY_RISE,   /* the highest NET reached between the two records (>= 0): the heap's peak */
    LP_TALLY_TEMP_N, /* temporaries: blocks freed before the thread allocated again */
    LP_TALLY_TEMP_B,
    LP_TALLY_BLOCKS, /* blocks made less released, beyond MALLOC_N + CALLOC_N - FREE_N (realloc's, free(NULL)'s) */
    LP_TALLY_HIST,   /* LP_TALLY_HIST_BUCKETS u32 counts of blocks by size, two a word, low half
                      * first: below 16 B, then one per power of two, the last taking the rest */
    LP_TALLY_HIST_BUCKETS = 20,
    LP_TALLY_WORDS = LP_TALLY_HIST + LP_TALLY_HIST_BUCKETS / 2,
};
#define LP_TALLY_EVERY 1024
/* The size histogram's bucket of a block of `s` bytes (a TALLY's, and the converter's): 0 below
 * 16 B, then one per power of two (the converter folds the last ones into its last bucket). */
static inline unsigned lp_size_pow2(uint64_t s) { return 60u - (unsigned)__builtin_clzll(s | 8); }
/* A TALLY's words after its mask; -1 for a mask with bits past LP_TALLY_WORDS (damage). */
static inline int lp_tally_extra(uint64_t mask) { return mask >> LP_TALLY_WORDS ? -1 : __builtin_popcountll(mask); }
/* A TALLY's payload (its mask first) as the LP_TALLY_WORDS words of enum lp_tally_word. */
static inline void lp_tally_words(const uint64_t *w, uint64_t out[LP_TALLY_WORDS]) {
    const uint64_t *q = w + 1;
    for (unsigned i = 0; i < LP_TALLY_WORDS; i++) out[i] = w[0] >> i & 1 ? *q++ : 0;
}

/* A SAMPLE's payload word. */
#define LP_SAMPLE_WEIGHT(w) ((uint32_t)(w))      /* sampling periods this sample stands for (>= 1) */
#define LP_SAMPLE_IN_LIBPROF (UINT64_C(1) << 32) /* the thread was in libprof's own code: no stack */
#define LP_SAMPLE_SHALLOW (UINT64_C(1) << 33)    /* callers not walked (inside the loader, or no unwind rule) */

enum lp_control_reason {
    LP_CTL_API = 1,      /* libprof_start/stop/reset called by the program */
    LP_CTL_SIGNAL = 2,   /* LIBPROF_SIGNAL delivered */
    LP_CTL_DELAY = 3,    /* LIBPROF_DELAY elapsed, or the start of a delayed run */
    LP_CTL_DURATION = 4, /* LIBPROF_DURATION elapsed */
    LP_CTL_START = 5,    /* LIBPROF_START=paused */
};

/* Every record kind: id, name as shown to users, family, shape, payload words.
 * The numeric value of a kind is its position in this list, starting at 1 (0 is never valid,
 * so a zeroed hole in a damaged file cannot be mistaken for an event). */
/* the list as it reads best, one group a line */
// clang-format off
#define LP_KINDS(X)                                                         \
    X(MALLOC, "malloc", ALLOC, LP_SHAPE_ALLOC, 2)                           \
    X(CALLOC, "calloc", ALLOC, LP_SHAPE_ALLOC, 2)                           \
    X(REALLOC, "realloc", ALLOC, LP_SHAPE_REALLOC, 3)                       \
    X(REALLOCARRAY, "reallocarray", ALLOC, LP_SHAPE_REALLOC, 3)             \
    X(FREE, "free", ALLOC, LP_SHAPE_FREE, 1)                                \
    X(POSIX_MEMALIGN, "posix_memalign", ALLOC, LP_SHAPE_ALLOC, 2)           \
    X(ALIGNED_ALLOC, "aligned_alloc", ALLOC, LP_SHAPE_ALLOC, 2)             \
    X(MEMALIGN, "memalign", ALLOC, LP_SHAPE_ALLOC, 2)                       \
    X(VALLOC, "valloc", ALLOC, LP_SHAPE_ALLOC, 2)                           \
    X(PVALLOC, "pvalloc", ALLOC, LP_SHAPE_ALLOC, 2)                         \
    X(RANGE, "range", ANNOT, LP_SHAPE_RANGE, 1)                             \
    X(MARK, "mark", ANNOT, LP_SHAPE_MARK, 1)                                \
    X(COUNTER, "counter", ANNOT, LP_SHAPE_COUNTER, 2)                       \
    X(PAUSE, "libprof paused", CONTROL, LP_SHAPE_CONTROL, 1)                \
    X(RESUME, "libprof resumed", CONTROL, LP_SHAPE_CONTROL, 1)              \
    X(RESET, "libprof reset", CONTROL, LP_SHAPE_CONTROL, 1)                 \
    X(CALL, "call", CONTROL, LP_SHAPE_CALL, 1) /* family: lp_call_family */ \
    X(STACK, "stack", ALLOC, LP_SHAPE_STACKREF, 0)                          \
    X(PYCALL, "python call", PYTHON, LP_SHAPE_PYCALL, 1)                    \
    X(SAMPLE, "cpu sample", CPU, LP_SHAPE_SAMPLE, 2)                        \
    X(TALLY, "allocations counted", ALLOC, LP_SHAPE_TALLY, 1)
// clang-format on

enum lp_kind {
    LP_KIND_NONE = 0,
#define LP_X(id, name, fam, shape, words) LP_EV_##id,
    LP_KINDS(LP_X) /* no semicolon: the entries carry their commas */
#undef LP_X
    LP_KIND_COUNT
};

#define LP_REC_TIMED 0x80u /* in the kind byte: a duration word follows word 0 */
#define LP_TS_BITS 56
#define LP_TS_MASK ((UINT64_C(1) << LP_TS_BITS) - 1)
#define LP_DUR_MASK ((UINT64_C(1) << 48) - 1)

/* ---- CALL records: the runtime entry points --------------------------------------------------
 * A CALL record's first payload word is its header:
 *   bits 0-15  entry point (enum lp_call, position in LP_CALLS from 1)
 *   bits 16-19 number of argument words that follow (<= LP_CALL_MAX_ARGS)
 *   bits 20-31 bytes of the string that follows the arguments (<= LP_CALL_MAX_STR), padded to 8
 *   bit  32    the string was cut to LP_CALL_MAX_STR bytes
 * Arguments are u64 words named by the entry point's argument list below (a name ending in '-'
 * is shown signed). The role tells the converter what the call means beyond its time: which
 * arguments are a descriptor, a byte count, a block of memory; the converter keeps per-file and
 * per-shape statistics from them. */
enum lp_call_role {
    LP_ROLE_NONE,
    LP_ROLE_OPEN,   /* string path; args ..., ret fd */
    LP_ROLE_FDPATH, /* string path; args fd: a descriptor that was open before libprof started */
    LP_ROLE_CLOSE,  /* args fd, ret */
    LP_ROLE_READ,   /* args fd, count, [offset,] ret bytes */
    LP_ROLE_WRITE,  /* same, for writes */
    LP_ROLE_FDOP,   /* args fd, ...: another operation on a descriptor (lseek, fsync) */
    LP_ROLE_FOPEN,  /* string path; args mode, ret stream */
    LP_ROLE_FREAD,  /* args stream, bytes asked, bytes done */
    LP_ROLE_FWRITE,
    LP_ROLE_FOP,       /* args stream, ...: fflush */
    LP_ROLE_FCLOSE,    /* args stream, ret */
    LP_ROLE_MMAP,      /* args addr, len, prot, flags, fd, ret addr */
    LP_ROLE_MUNMAP,    /* args addr, len, ret */
    LP_ROLE_MREMAP,    /* args old, old len, new len, ret addr */
    LP_ROLE_CREATE,    /* pthread_create: args ret, flow */
    LP_ROLE_THREAD,    /* a thread's life: args creator tid, flow */
    LP_ROLE_GEMM,      /* args m, n, k, op: see LP_GEMM_* */
    LP_ROLE_GEMV,      /* args m, n, op */
    LP_ROLE_VEC,       /* args n, op: dot, axpy */
    LP_ROLE_DNNL,      /* args kind name id, shape name id, primitive */
    LP_ROLE_OMP,       /* GOMP_parallel: args threads asked, team size, flow */
    LP_ROLE_OMPWORK,   /* a team member running a region: args thread number, flow */
    LP_ROLE_WAITCHILD, /* wait family: args pid asked, ret pid, status */
    LP_ROLE_MPI,       /* MPI: args bytes (count x MPI_Type_size), peer or root, tag, communicator size */
    LP_ROLE_TORCH,     /* PyTorch: args name id, seq, scope, thread, fwd thread, shapes id, handle */
    LP_ROLE_SOCKET,    /* string what it is ("socket"); args ..., ret fd: a descriptor with no peer yet */
    LP_ROLE_PEER,      /* string the peer's address; args fd, ret: connect (fd gets the peer when ret is 0
                        * or -EINPROGRESS), accept (ret, the new descriptor, gets it) */
    LP_ROLE_PIPE,      /* string what it is ("pipe", "socketpair"); args fd0, fd1, ret */
    LP_ROLE_DUP,       /* args fd, ..., ret: the new descriptor names what fd named */
    LP_ROLE_ORT,       /* ONNX Runtime: string fields separated by 0x1f — model, then (Run) the
                        * inputs "name dtype[shape]; ..." and the output names */
    LP_ROLE_ET,        /* ExecuTorch: execute — args the Method (handle), error, string its name;
                        * instruction — args name id (the operator, "aten::add.out", or the
                        * delegate, "delegate XnnpackBackend"), chain, index, kind (LP_ET_*), error */
    LP_ROLE_CUDA,      /* the CUDA runtime: CUDA's error code last; a launch is named by its kernel
                        * (args name id, grid, block, shared bytes, stream); copies' direction is
                        * cudaMemcpyKind (0 host-host ... 4 default) */
    LP_ROLE_NVTX,      /* NVTX: args message name id (the slice's name), domain name id (0: the default), depth */
    LP_ROLE_GPU,       /* the GPU's own record of a kernel, copy or set (CUPTI), not a call: args its start
                        * and end (CLOCK_MONOTONIC ns, the GPU's clock mapped by CUPTI), device, stream,
                        * the correlation id CUPTI gave its launch; a correlation record pairs that id
                        * with the launch slice's start (its ticks since origin). The record's own time
                        * is when libprof received it. */
};

/* The kind of an ExecuTorch instruction (its program's InstructionArguments union). */
enum { LP_ET_KERNEL = 1, LP_ET_DELEGATE = 2, LP_ET_MOVE = 3, LP_ET_JUMP = 4, LP_ET_FREE = 5 };

/* The `op` argument of BLAS roles: element type, transposes, layout. */
#define LP_BLAS_S 0        /* float */
#define LP_BLAS_D 1        /* double */
#define LP_BLAS_C 2        /* complex float */
#define LP_BLAS_Z 3        /* complex double */
#define LP_BLAS_TA_SHIFT 4 /* 0 none, 1 transpose, 2 conjugate transpose */
#define LP_BLAS_TB_SHIFT 6
#define LP_BLAS_ROWMAJOR 0x100
#define LP_BLAS_FORTRAN 0x200 /* called through the Fortran interface (sgemm_) */

/* id, name shown, family, role, argument names. */
/* the list as it reads best, one group a line */
// clang-format off
#define LP_CALLS(X)                                                             \
    X(PTHREAD_CREATE, "pthread_create", THREAD, CREATE, "ret-,flow")            \
    X(THREAD_LIFE, "thread", THREAD, THREAD, "creator,flow,running_at_exit")    \
    X(PTHREAD_JOIN, "pthread_join", THREAD, NONE, "ret-")                       \
    X(PTHREAD_EXIT, "pthread_exit", THREAD, NONE, "")                           \
    X(MUTEX_LOCK, "pthread_mutex_lock", SYNC, NONE, "lock,ret-")                \
    X(RWLOCK_RD, "pthread_rwlock_rdlock", SYNC, NONE, "lock,ret-")              \
    X(RWLOCK_WR, "pthread_rwlock_wrlock", SYNC, NONE, "lock,ret-")              \
    X(COND_WAIT, "pthread_cond_wait", SYNC, NONE, "cond,ret-")                  \
    X(COND_TIMEDWAIT, "pthread_cond_timedwait", SYNC, NONE, "cond,ret-")        \
    X(SEM_WAIT, "sem_wait", SYNC, NONE, "sem,ret-")                             \
    X(BARRIER_WAIT, "pthread_barrier_wait", SYNC, NONE, "barrier,ret-")         \
    X(DLOPEN, "dlopen", DL, NONE, "flags,ret")                                  \
    X(DLCLOSE, "dlclose", DL, NONE, "handle,ret-")                              \
    X(FD, "fd", IO, FDPATH, "fd-")                                              \
    X(OPEN, "open", IO, OPEN, "flags,ret-")                                     \
    X(OPENAT, "openat", IO, OPEN, "dirfd-,flags,ret-")                          \
    X(CREAT, "creat", IO, OPEN, "mode,ret-")                                    \
    X(CLOSE, "close", IO, CLOSE, "fd-,ret-")                                    \
    X(READ, "read", IO, READ, "fd-,count,ret-")                                 \
    X(WRITE, "write", IO, WRITE, "fd-,count,ret-")                              \
    X(PREAD, "pread", IO, READ, "fd-,count,offset-,ret-")                       \
    X(PWRITE, "pwrite", IO, WRITE, "fd-,count,offset-,ret-")                    \
    X(READV, "readv", IO, READ, "fd-,count,ret-")                               \
    X(WRITEV, "writev", IO, WRITE, "fd-,count,ret-")                            \
    X(LSEEK, "lseek", IO, FDOP, "fd-,offset-,whence,ret-")                      \
    X(FSYNC, "fsync", IO, FDOP, "fd-,ret-")                                     \
    X(FDATASYNC, "fdatasync", IO, FDOP, "fd-,ret-")                             \
    X(FOPEN, "fopen", IO, FOPEN, "mode,ret")                                    \
    X(FREAD, "fread", IO, FREAD, "stream,count,ret")                            \
    X(FWRITE, "fwrite", IO, FWRITE, "stream,count,ret")                         \
    X(FFLUSH, "fflush", IO, FOP, "stream,ret-")                                 \
    X(FCLOSE, "fclose", IO, FCLOSE, "stream,ret-")                              \
    X(MMAP, "mmap", IO, MMAP, "addr,len,prot,flags,fd-,ret")                    \
    X(MUNMAP, "munmap", IO, MUNMAP, "addr,len,ret-")                            \
    X(MREMAP, "mremap", IO, MREMAP, "addr,len,new_len,ret")                     \
    X(FORK, "fork", PROC, NONE, "ret-")                                         \
    X(VFORK, "vfork", PROC, NONE, "")                                           \
    X(EXEC, "exec", PROC, NONE, "")                                             \
    X(POSIX_SPAWN, "posix_spawn", PROC, NONE, "ret-,pid-")                      \
    X(SYSTEM, "system", PROC, NONE, "ret-")                                     \
    X(WAITPID, "waitpid", PROC, WAITCHILD, "pid-,ret-,status")                  \
    X(WAITID, "waitid", PROC, NONE, "id-,ret-")                                 \
    X(NANOSLEEP, "nanosleep", WAIT, NONE, "ns,ret-")                            \
    X(CLOCK_NANOSLEEP, "clock_nanosleep", WAIT, NONE, "ns,ret-")                \
    X(USLEEP, "usleep", WAIT, NONE, "ns,ret-")                                  \
    X(SLEEP, "sleep", WAIT, NONE, "ns,ret-")                                    \
    X(POLL, "poll", WAIT, NONE, "nfds,timeout_ms-,ret-")                        \
    X(PPOLL, "ppoll", WAIT, NONE, "nfds,timeout_ns-,ret-")                      \
    X(SELECT, "select", WAIT, NONE, "nfds,timeout_ns-,ret-")                    \
    X(PSELECT, "pselect", WAIT, NONE, "nfds,timeout_ns-,ret-")                  \
    X(EPOLL_WAIT, "epoll_wait", WAIT, NONE, "epfd-,maxevents,timeout_ms-,ret-") \
    X(GEMM, "gemm", BLAS, GEMM, "m,n,k,op")                                     \
    X(GEMV, "gemv", BLAS, GEMV, "m,n,op")                                       \
    X(DOT, "dot", BLAS, VEC, "n,op")                                            \
    X(AXPY, "axpy", BLAS, VEC, "n,op")                                          \
    X(DNNL_EXEC, "dnnl_primitive_execute", DNNL, DNNL, "kind,shape,primitive")  \
    X(OMP_PARALLEL, "omp parallel", OMP, OMP, "threads_asked,team,flow")        \
    X(OMP_WORK, "omp work", OMP, OMPWORK, "thread_num,flow")                   \
    X(ORT_CREATE_SESSION, "ort.CreateSession", ORT, ORT, "session,failed")      \
    X(ORT_RUN, "ort.Run", ORT, ORT, "session,n_inputs,n_outputs,failed")            \
    X(ORT_RELEASE_SESSION, "ort.ReleaseSession", ORT, ORT, "session")          \
    X(MPI_INIT, "MPI_Init", MPI, MPI, "ret-")                                   \
    X(MPI_INIT_THREAD, "MPI_Init_thread", MPI, MPI, "required-,provided-,ret-") \
    X(MPI_FINALIZE, "MPI_Finalize", MPI, MPI, "ret-")                           \
    X(MPI_SEND, "MPI_Send", MPI, MPI, "bytes,peer-,tag-,comm_size,ret-")        \
    X(MPI_RECV, "MPI_Recv", MPI, MPI, "bytes,peer-,tag-,comm_size,ret-")        \
    X(MPI_ISEND, "MPI_Isend", MPI, MPI, "bytes,peer-,tag-,comm_size,ret-")      \
    X(MPI_IRECV, "MPI_Irecv", MPI, MPI, "bytes,peer-,tag-,comm_size,ret-")      \
    X(MPI_SENDRECV, "MPI_Sendrecv", MPI, MPI, "bytes,peer-,tag-,comm_size,ret-,recv_bytes,source-") \
    X(MPI_WAIT, "MPI_Wait", MPI, MPI, "ret-")                                   \
    X(MPI_WAITALL, "MPI_Waitall", MPI, MPI, "count,ret-")                       \
    X(MPI_WAITANY, "MPI_Waitany", MPI, MPI, "count,ret-")                       \
    X(MPI_TEST, "MPI_Test", MPI, MPI, "ret-")                                   \
    X(MPI_BARRIER, "MPI_Barrier", MPI, MPI, "comm_size,ret-")                   \
    X(MPI_BCAST, "MPI_Bcast", MPI, MPI, "bytes,root-,comm_size,ret-")           \
    X(MPI_REDUCE, "MPI_Reduce", MPI, MPI, "bytes,root-,comm_size,ret-")         \
    X(MPI_ALLREDUCE, "MPI_Allreduce", MPI, MPI, "bytes,comm_size,ret-")         \
    X(MPI_GATHER, "MPI_Gather", MPI, MPI, "bytes,root-,comm_size,ret-")         \
    X(MPI_SCATTER, "MPI_Scatter", MPI, MPI, "bytes,root-,comm_size,ret-")       \
    X(MPI_ALLGATHER, "MPI_Allgather", MPI, MPI, "bytes,comm_size,ret-")         \
    X(MPI_ALLGATHERV, "MPI_Allgatherv", MPI, MPI, "bytes,comm_size,ret-")       \
    X(MPI_ALLTOALL, "MPI_Alltoall", MPI, MPI, "bytes,comm_size,ret-")           \
    X(MPI_ALLTOALLV, "MPI_Alltoallv", MPI, MPI, "bytes,comm_size,ret-")         \
    X(MPI_REDUCE_SCATTER, "MPI_Reduce_scatter", MPI, MPI, "bytes,comm_size,ret-") \
    X(TORCH_OP, "torch.op", TORCH, TORCH, "name,seq-,scope,thread,fwd_thread,shapes,handle") \
    X(TORCH_BEGIN, "torch.begin", TORCH, TORCH, "name,seq-,scope,thread,fwd_thread,shapes,handle") \
    X(TORCH_END, "torch.end", TORCH, TORCH, "name,seq-,scope,thread,fwd_thread,shapes,handle") \
    X(SOCKET, "socket", NET, SOCKET, "domain-,type-,ret-")                      \
    X(SOCKETPAIR, "socketpair", NET, PIPE, "fd0-,fd1-,ret-")                    \
    X(CONNECT, "connect", NET, PEER, "fd-,ret-")                                \
    X(ACCEPT, "accept", NET, PEER, "fd-,ret-")                                  \
    X(SEND, "send", NET, WRITE, "fd-,count,ret-")                               \
    X(RECV, "recv", NET, READ, "fd-,count,ret-")                                \
    X(SHUTDOWN, "shutdown", NET, FDOP, "fd-,how-,ret-")                         \
    X(DUP, "dup", IO, DUP, "fd-,ret-")                                          \
    X(DUP2, "dup2", IO, DUP, "fd-,newfd-,ret-")                                 \
    X(FCNTL_DUPFD, "fcntl", IO, DUP, "fd-,cmd-,ret-")                           \
    X(PIPE, "pipe", IO, PIPE, "fd0-,fd1-,ret-")                                 \
    X(ET_EXECUTE, "executorch.execute", EXECUTORCH, ET, "handle,error")         \
    X(ET_INSTRUCTION, "executorch.instruction", EXECUTORCH, ET, "name,chain,instruction,kind,error")        \
    X(CUDA_LAUNCH, "cudaLaunchKernel", CUDA, CUDA, "name,grid_x,grid_y,grid_z,block_x,block_y,block_z,shared_bytes,stream,error-") \
    X(CUDA_MALLOC, "cudaMalloc", CUDA, CUDA, "ptr,bytes,error-")                      \
    X(CUDA_FREE, "cudaFree", CUDA, CUDA, "ptr,error-")                                 \
    X(CUDA_MALLOC_HOST, "cudaMallocHost", CUDA, CUDA, "ptr,bytes,error-")              \
    X(CUDA_FREE_HOST, "cudaFreeHost", CUDA, CUDA, "ptr,error-")                        \
    X(CUDA_MALLOC_ASYNC, "cudaMallocAsync", CUDA, CUDA, "ptr,bytes,stream,error-")     \
    X(CUDA_FREE_ASYNC, "cudaFreeAsync", CUDA, CUDA, "ptr,stream,error-")               \
    X(CUDA_MEMCPY, "cudaMemcpy", CUDA, CUDA, "bytes,direction,error-")                 \
    X(CUDA_MEMCPY_ASYNC, "cudaMemcpyAsync", CUDA, CUDA, "bytes,direction,stream,error-") \
    X(CUDA_MEMSET, "cudaMemset", CUDA, CUDA, "bytes,error-")                           \
    X(CUDA_MEMSET_ASYNC, "cudaMemsetAsync", CUDA, CUDA, "bytes,stream,error-")         \
    X(CUDA_DEVICE_SYNC, "cudaDeviceSynchronize", CUDA, CUDA, "error-")                 \
    X(CUDA_STREAM_SYNC, "cudaStreamSynchronize", CUDA, CUDA, "stream,error-")          \
    X(CUDA_EVENT_SYNC, "cudaEventSynchronize", CUDA, CUDA, "event,error-")             \
    X(CUDA_GRAPH_LAUNCH, "cudaGraphLaunch", CUDA, CUDA, "graph,stream,error-")                 \
    X(NVTX_RANGE, "nvtx range", NVTX, NVTX, "name,domain,depth")                       \
    X(NVTX_MARK, "nvtx mark", NVTX, NVTX, "name,domain")                               \
    X(CUBLAS_SGEMM, "cublasSgemm", CUBLAS, CUDA, "m,n,k,transa,transb,batch,type,status-")  \
    X(CUBLAS_DGEMM, "cublasDgemm", CUBLAS, CUDA, "m,n,k,transa,transb,batch,type,status-")  \
    X(CUBLAS_GEMM_EX, "cublasGemmEx", CUBLAS, CUDA, "m,n,k,transa,transb,batch,type,status-") \
    X(CUBLAS_SGEMM_BATCHED, "cublasSgemmStridedBatched", CUBLAS, CUDA, "m,n,k,transa,transb,batch,type,status-") \
    X(CUBLAS_GEMM_BATCHED_EX, "cublasGemmStridedBatchedEx", CUBLAS, CUDA, "m,n,k,transa,transb,batch,type,status-") \
    X(CUBLASLT_MATMUL, "cublasLtMatmul", CUBLAS, CUDA, "m,n,k,transa,transb,batch,type,status-") \
    X(NCCL_ALLREDUCE, "ncclAllReduce", NCCL, CUDA, "bytes,root-,ranks,stream,result-")       \
    X(NCCL_BROADCAST, "ncclBroadcast", NCCL, CUDA, "bytes,root-,ranks,stream,result-")       \
    X(NCCL_REDUCE, "ncclReduce", NCCL, CUDA, "bytes,root-,ranks,stream,result-")             \
    X(NCCL_ALLGATHER, "ncclAllGather", NCCL, CUDA, "bytes,root-,ranks,stream,result-")       \
    X(NCCL_REDUCESCATTER, "ncclReduceScatter", NCCL, CUDA, "bytes,root-,ranks,stream,result-") \
    X(NCCL_SEND, "ncclSend", NCCL, CUDA, "bytes,peer-,ranks,stream,result-")                 \
    X(NCCL_RECV, "ncclRecv", NCCL, CUDA, "bytes,peer-,ranks,stream,result-") \
    X(ET_INIT, "executorch.init", EXECUTORCH, ET, "handle,error") \
    X(GPU_KERNEL, "gpu kernel", CUDA, GPU, "name,start,end,device,stream,correlation,grid_x,grid_y,grid_z,block_x,block_y,block_z,shared_bytes,registers") \
    X(GPU_MEMCPY, "gpu memcpy", CUDA, GPU, "bytes,direction,start,end,device,stream,correlation") \
    X(GPU_MEMSET, "gpu memset", CUDA, GPU, "bytes,start,end,device,stream,correlation") \
    X(GPU_CORRELATION, "gpu correlation", CUDA, GPU, "correlation,launch") \
    X(GPU_DROPPED, "gpu dropped", CUDA, GPU, "records") \
    X(NVTX_START, "nvtx start", NVTX, NVTX, "name,domain,id") \
    X(NVTX_END, "nvtx end", NVTX, NVTX, "id") \
    X(GIL_WAIT, "GIL wait", PYTHON, NONE, "cond,ret-")
// clang-format on

enum lp_call {
    LP_CALL_NONE = 0,
#define LP_X(id, name, fam, role, args) LP_CALL_##id,
    LP_CALLS(LP_X) /* no semicolon: the entries carry their commas */
#undef LP_X
    LP_CALL_COUNT
};

#define LP_CALL_MAX_ARGS 15
#define LP_CALL_MAX_STR 2048
#define LP_CALL_STR_CUT (UINT64_C(1) << 32)

static inline uint64_t lp_call_header(unsigned call, unsigned nargs, unsigned slen) {
    return (uint64_t)call | (uint64_t)nargs << 16 | (uint64_t)slen << 20;
}
static inline unsigned lp_call_id(uint64_t h) { return (unsigned)(h & 0xffff); }
static inline unsigned lp_call_nargs(uint64_t h) { return (unsigned)(h >> 16) & 15; }
static inline unsigned lp_call_strlen(uint64_t h) { return (unsigned)(h >> 20) & 0xfff; }
/* Words after the header word. */
static inline unsigned lp_call_extra(uint64_t h) { return lp_call_nargs(h) + (lp_call_strlen(h) + 7) / 8; }

extern const char *const lp_call_names[LP_CALL_COUNT];
extern const uint8_t lp_call_family[LP_CALL_COUNT];
extern const uint8_t lp_call_role[LP_CALL_COUNT];
extern const char *const lp_call_args[LP_CALL_COUNT];

/* Clock the ticks come from. */
enum lp_clock {
    LP_CLOCK_MONOTONIC = 0, /* clock_gettime(CLOCK_MONOTONIC), tick = 1 ns */
    LP_CLOCK_TSC = 1,       /* x86 invariant TSC, converted with the sync pairs */
};

/* The file header: exactly LP_FILE_HEADER_SIZE bytes at offset 0. */
#define LP_FILE_HEADER_SIZE 128
struct lp_file_header {
    char magic[8];        /* LP_FORMAT_MAGIC */
    uint32_t version;     /* LP_FORMAT_VERSION */
    uint32_t byte_order;  /* LP_BYTE_ORDER_MARK as written by the producer */
    uint32_t header_size; /* LP_FILE_HEADER_SIZE */
    uint32_t clock;       /* enum lp_clock */
    uint32_t pid, ppid;
    uint64_t origin_ticks;   /* tick value that record timestamps are relative to */
    uint64_t origin_mono_ns; /* CLOCK_MONOTONIC at origin */
    uint64_t origin_real_ns; /* CLOCK_REALTIME at origin: aligns traces of several processes */
    uint32_t families;       /* bit mask of enum lp_family recorded */
    uint32_t buffer_bytes;   /* per-thread chunk size used */
    uint64_t alloc_min;      /* LIBPROF_ALLOC_MIN in effect (for the Chrome export) */
    uint32_t alloc_stacks;   /* LIBPROF_STACKS: frames recorded with each allocation (0: none) */
    uint32_t reserved0;
    uint64_t alloc_sample;   /* LIBPROF_ALLOC_SAMPLE: the mean bytes between allocations recorded with
                              * their stack (a Poisson process over bytes); 0: every one has it */
    uint64_t origin_boot_ns; /* CLOCK_BOOTTIME at origin (0 in traces of older versions: not known) */
    uint8_t reserved[128 - 96];
};

/* Chunk types. */
enum lp_chunk_type {
    LP_CHUNK_EVENTS = 1,     /* packed records of thread `tid` */
    LP_CHUNK_STRING = 2,     /* u32 key (enum lp_string_key), then the bytes; `tid` for thread names */
    LP_CHUNK_END = 3,        /* struct lp_end: the run finished and everything was flushed */
    LP_CHUNK_SHORT = 4,      /* struct lp_short[]: calls of thread `tid` under LIBPROF_MIN_NS, counted */
    LP_CHUNK_STACKS = 5,     /* call stacks, entries of three forms: a node (format 17 on: all the recorder
                           * writes) { u32 id, u32 LP_STACK_NODE, u64 parent id, u64 word }; before 17, a
                           * whole stack { u32 id, u32 n, u64 return addresses[n] (innermost first) } or
                           * a pair { u32 id, u32 LP_STACK_PAIR, u64 native | python << 32, u64 flags } */
    LP_CHUNK_MODULES = 6,    /* loaded objects: struct lp_module, then path and build-id bytes, padded to 8 */
    LP_CHUNK_PYCODE = 7,     /* Python code objects: { struct lp_pycode, name bytes, file bytes, padding to 8 }... */
    LP_CHUNK_HEADER = 8,     /* a copy of the file header, right after it: a damaged header loses nothing */
    LP_CHUNK_SAMPLES = 9,    /* SAMPLE records of thread `tid`: a stream of its own beside its EVENTS (a
                           * signal handler writes them, never into the buffer the hooks write) */
    LP_CHUNK_SAMPLING = 10,  /* struct lp_sampling: how samples were taken (at start), how it went (at end) */
    LP_CHUNK_WATERMARK = 11, /* u64 ticks: every record stamped before this is in the chunks before this one
                              * (written while a follower converts the spool during the run) */
    LP_CHUNK_OWN = 12,       /* struct lp_own_memory: libprof's own memory in the process, at the end */
    LP_CHUNK_LAST = LP_CHUNK_OWN /* (a type past this is no chunk: damage) */
};

/* libprof's own memory in the traced process, part by part: what its mappings reserve and what
 * of it is resident (pages touched) when the END is written. The heap the program allocates is
 * not in it; the conversion at exit runs in a process of its own and is not in it either. */
enum lp_own_part {
    LP_OWN_BUFFERS, /* the threads' record buffers and their sample buffers */
    LP_OWN_STACKS,  /* the stack tree's table and ring, the threads' stack caches */
    LP_OWN_WALKER,  /* the unwinder's rules and rows */
    LP_OWN_PYTHON,  /* Python's code objects: their table, names, line tables */
    LP_OWN_BLOCKS,  /* the sampled allocations' live blocks (LIBPROF_ALLOC_SAMPLE) */
    LP_OWN_STATIC,  /* libprof's zeroed static data */
    LP_OWN_OTHER,
    LP_OWN_PARTS
};
#define LP_OWN_UPPER_BOUND 1u /* some regions were not listed: counted whole as resident */
struct lp_own_memory {
    uint32_t flags;
    uint32_t parts; /* LP_OWN_PARTS of the writer */
    uint64_t reserved[LP_OWN_PARTS];
    uint64_t resident[LP_OWN_PARTS];
};
extern const char *const lp_own_part_names[LP_OWN_PARTS];

/* CPU sampling (LIBPROF_SAMPLE_HZ): every thread's own CPU clock (perf's task-clock, user time)
 * interrupts it every period_ns of CPU it uses. The last SAMPLING chunk of a file is the one to
 * read. */
#define LP_SAMPLING_HIST 256 /* handler times: 100 ns a bucket, the last one everything above */
struct lp_sampling {
    uint64_t period_ns; /* CPU time a sample of weight 1 stands for */
    uint32_t hz;
    uint32_t threads;    /* threads that took at least one sample */
    uint64_t samples;    /* samples recorded (weight 1 each) */
    uint64_t dropped;    /* samples lost: no buffer, the spool failed, a flush in the way */
    uint64_t in_libprof; /* samples that fell in libprof's own code (recorded, without a stack) */
    uint64_t shallow;    /* samples whose native frames were not walked */
    uint64_t handler_ns; /* time in the handler, all samples */
    uint64_t handler_max_ns;
    uint32_t hist[LP_SAMPLING_HIST]; /* handler times */
};

/* Where the copy of the file header lies: the payload of the first chunk. */
#define LP_HEADER_COPY_OFFSET (LP_FILE_HEADER_SIZE + LP_CHUNK_HEADER_SIZE)

/* Python frames in call stacks (the interpreter's own frames, read by the recorder where the
 * native stack passes through its evaluation loop): a stack word with the top bit set is not a
 * return address but a Python frame — code object `id` (a PYCODE entry) executing line `line`. */
#define LP_PYFRAME_BIT (UINT64_C(1) << 63)
#define LP_PYFRAME(id, line) (LP_PYFRAME_BIT | (uint64_t)(id) << 24 | ((uint64_t)(line)&0xffffff))
#define LP_PYFRAME_ID(w) ((uint32_t)((w) >> 24) & 0x3fffff)
#define LP_PYFRAME_LINE(w) ((uint32_t)((w)&0xffffff))
#define LP_MAX_PYCODE_ID (1u << 22)
/* In a stack, where native frames were left out: the native walk stopped at the depth asked
 * (LIBPROF_STACKS) before it reached the interpreter, and the thread's Python frames follow. */
#define LP_FRAME_ELIDED LP_PYFRAME_BIT

/* A thread running Python has stacks made of two parts, each a stack of its own in the table:
 * its native frames and its Python frames. A STACKS entry whose n is LP_STACK_PAIR joins them
 * (the recorder keeps the parts once and the pair in three words, where a joined copy would
 * repeat the Python frames in every native stack under them). A reader joins them as the
 * recorder would have: each native frame tagged LP_NATIVE_EVAL runs one run of the interpreter's
 * loop — the Python frames up to the next one tagged LP_PY_RUN_END go in its place; native frames
 * tagged LP_NATIVE_INTERP between runs are the interpreter's own and are left out; Python frames
 * left when the native frames end follow them, after LP_FRAME_ELIDED when the pair's flags say the
 * native part was cut (LP_PAIR_CUT). Readers strip the tags. */
#define LP_STACK_PAIR UINT32_MAX
#define LP_PAIR_CUT 1u
/* Format 17 on, call stacks are a tree: a STACKS entry whose n is LP_STACK_NODE is one node — a
 * frame word, and the id of the node of its caller (0: none; always an id written before it). A
 * stack is the node of its innermost frame. A node whose word is a join (LP_NODE_JOIN, the pair's
 * flags, the native part's node) is the pair of that native part and the Python part that is its
 * parent, joined as above. No frame word looks like a join: a Python frame's bits 46-61 are
 * clear, a return address has bit 63 clear. The recorder may write one stack under two ids: a
 * reader takes them as one stack. */
#define LP_STACK_NODE (UINT32_MAX - 1)
/* A native part hangs from a root node, LP_NODE_ROOT | the depth asked (LIBPROF_STACKS; 0: all):
 * the recorder keeps every native frame (a new stack then shares all its callers' nodes with the
 * stacks before it), a reader shows the innermost `depth` of them — the part cut there, as the
 * pair's LP_PAIR_CUT says, when it has that many or more. A native part with no root (a CPU
 * sample's: its walk has a depth of its own) is shown whole. */
#define LP_NODE_ROOT (UINT64_C(7) << 61)
#define LP_IS_ROOT(w) (((w)&LP_NODE_ROOT) == LP_NODE_ROOT)
#define LP_ROOT_DEPTH(w) ((uint32_t)(w))
#define LP_NODE_JOIN (UINT64_C(5) << 61)
#define LP_NODE_JOIN_MASK (UINT64_C(7) << 61)
#define LP_JOIN(native, flags) (LP_NODE_JOIN | (uint64_t)((flags)&0xff) << 32 | (uint32_t)(native))
#define LP_IS_JOIN(w) (((w)&LP_NODE_JOIN_MASK) == LP_NODE_JOIN)
#define LP_JOIN_NATIVE(w) ((uint32_t)(w))
#define LP_JOIN_FLAGS(w) ((uint32_t)((w) >> 32) & 0xff)
#define LP_NATIVE_EVAL (UINT64_C(1) << 62)
#define LP_NATIVE_INTERP (UINT64_C(1) << 61)
#define LP_NATIVE_TAGS (LP_NATIVE_EVAL | LP_NATIVE_INTERP)
#define LP_PY_RUN_END (UINT64_C(1) << 62)
/* The most frames a stack has once its parts are joined: native, the mark, Python. */
#define LP_STACK_MAX_FRAMES (2 * LP_STACK_MAX_DEPTH + 1)
struct lp_pycode {
    uint32_t id;        /* dense from 1 */
    uint32_t firstline; /* co_firstlineno */
    uint16_t name_len;  /* co_qualname (3.11+) or co_name, UTF-8 */
    uint16_t file_len;  /* co_filename as the program gave it, UTF-8 */
    uint32_t reserved;
};

/* One loaded object (dl_iterate_phdr), to symbolise addresses offline against the same files.
 * An address A inside [lo, hi) is at ELF virtual address A - base in `path`. */
struct lp_module {
    uint64_t base;   /* dlpi_addr: load bias */
    uint64_t lo, hi; /* lowest and highest address of its PT_LOAD segments */
    uint16_t path_len;
    uint16_t build_id_len;
    uint32_t reserved;
};
#define LP_STACK_MAX_DEPTH 128

/* Calls shorter than LIBPROF_MIN_NS are not recorded one by one; each thread counts them per
 * entry point and writes the tallies (since its last SHORT chunk) when it is flushed. */
struct lp_short {
    uint32_t call; /* enum lp_call */
    uint32_t reserved;
    uint64_t count;
    uint64_t ticks; /* their total duration */
};

enum lp_string_key {
    LP_STR_HOSTNAME = 1,
    LP_STR_EXE = 2,         /* absolute path of the executable */
    LP_STR_CMDLINE = 3,     /* argv, each argument NUL-terminated */
    LP_STR_THREAD_NAME = 4, /* name of thread `tid` */
    LP_STR_NAME = 5,        /* u32 id, then the bytes: a name that annotation records refer to */
    LP_STR_ORT_PROFILE = 6, /* u64 session, then ONNX Runtime's own profile of that session (its JSON) */
    LP_STR_JOB = 7,         /* launcher, rank, world size, local rank: NUL-separated (%r, metadata.job) */
    LP_STR_NOTE = 8, /* a message libprof had for the user, kept out of the program's stderr (metadata.libprof.notes) */
    LP_STR_ETDUMP = 9, /* an ETDump ExecuTorch's ETDumpGen handed the program (its flatbuffer, as is) */
};

/* Annotation name ids are dense from 1; a reader may treat a larger id as damage. */
#define LP_MAX_NAME_ID 65535

#define LP_CHUNK_HEADER_SIZE 32
struct lp_chunk_header {
    uint32_t magic;        /* LP_CHUNK_MAGIC */
    uint16_t type;         /* enum lp_chunk_type */
    uint16_t flags;        /* 0 */
    uint32_t tid;          /* kernel thread id of the writer (or subject, for thread names) */
    uint32_t length;       /* payload bytes after this header */
    uint64_t sync_ticks;   /* clock ticks when the chunk was written ... */
    uint64_t sync_mono_ns; /* ... and CLOCK_MONOTONIC at the same moment */
};

struct lp_end {
    uint64_t end_ticks; /* relative to origin */
    uint64_t events_written;
    uint64_t events_dropped; /* lost to write errors; the trace says so rather than hiding it */
    uint64_t chunks_written;
    int32_t exit_status;     /* status given to exit/_exit; -1 = unknown (returned from main) */
    uint32_t signal;         /* the signal that ended the process, 0 if none */
    uint64_t stacks_unique;  /* LIBPROF_STACKS: distinct call stacks recorded */
    uint64_t stacks_dropped; /* allocations whose stack did not fit the table (stack id 0) */
    uint64_t max_rss_kib;    /* getrusage's ru_maxrss at the end: all memory the process used */
};

/* Fill the constant fields of a file header (magic, version, byte order, size) and `clock`;
 * everything else zero. The one place a header's identity is written (lib/format_tables.c). */
void lp_header_init(struct lp_file_header *h, uint32_t clock);

/* Name, family and payload-word tables, indexed by kind (defined once in lib/format.c). */
extern const char *const lp_kind_names[LP_KIND_COUNT];
extern const uint8_t lp_kind_family[LP_KIND_COUNT];
extern const uint8_t lp_kind_shape[LP_KIND_COUNT];
extern const uint8_t lp_kind_words[LP_KIND_COUNT];
/* By a record's first byte (kind | LP_REC_TIMED): its length in words when that is all a reader
 * must check, else 0 (calls, resets, stack words, bytes that are no kind). */
extern const uint8_t lp_plain_words[256];
extern const char *const lp_family_names[LP_FAM_COUNT];
extern const uint8_t lp_family_kernel[LP_FAM_COUNT];
/* The family named `name` (`len` bytes), or -1. */
int lp_family_find(const char *name, size_t len);

/* The kind of record `w0`, or 0 if the kind byte is not valid. */
static inline unsigned lp_rec_kind(uint64_t w0) {
    unsigned k = (unsigned)(w0 >> LP_TS_BITS) & ~LP_REC_TIMED;
    return k < LP_KIND_COUNT ? k : 0;
}
static inline unsigned lp_rec_timed(uint64_t w0) { return (unsigned)(w0 >> (LP_TS_BITS + 7)) & 1; }
/* Words in the record at `w`, of which `avail` are readable; 0 if the record is damaged or
 * does not fit. */
static inline size_t lp_rec_size(const uint64_t *w, size_t avail) {
    if (avail == 0) return 0;
    unsigned k = lp_rec_kind(w[0]);
    if (k == 0) return 0;
    size_t n = 1 + lp_rec_timed(w[0]) + lp_kind_words[k];
    if (n > avail) return 0;
    if (lp_kind_shape[k] == LP_SHAPE_CALL) {
        unsigned c = lp_call_id(w[n - 1]);
        if (c == 0 || c >= LP_CALL_COUNT) return 0;
        n += lp_call_extra(w[n - 1]);
        if (n > avail) return 0;
    } else if (lp_kind_shape[k] == LP_SHAPE_TALLY) {
        int x = lp_tally_extra(w[n - 1]);
        if (x < 0 || (n += (size_t)x) > avail) return 0;
    }
    return n;
}

#endif
