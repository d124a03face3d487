/* views.c: see views.h. The table, and each view's row: thin adapters over its own file (torch.c,
 * nvtx.c, ort.c, etdump.c, cudamem.c, gpu.c, pycalls.c, samples.c) and the MPI instants the merge of a job aligns clocks on. */
#define _GNU_SOURCE
#include "views.h"

#include "analysis.h"
#include "calls.h"
#include "cudamem.h"
#include "etdump.h"
#include "gpu.h"
#include "nvtx.h"
#include "ort.h"
#include "pycalls.h"
#include "torch.h"
#include "samples.h"

#define SHAPE(s) (1u << LP_SHAPE_##s)
/* each view's state, typed */
#define PYCALLS(a) ((struct lp_pycalls *)(a)->view[LP_VIEW_PYCALLS])
#define ORT(a) ((struct lp_ort *)(a)->view[LP_VIEW_ORT])
#define ETDUMP(a) ((struct lp_etdump *)(a)->view[LP_VIEW_ETDUMP])
#define CUDAMEM(a) ((struct lp_cudamem *)(a)->view[LP_VIEW_CUDAMEM])
#define GPU(a) ((struct lp_gpu *)(a)->view[LP_VIEW_GPU])
#define TORCH(a) ((struct lp_torch *)(a)->view[LP_VIEW_TORCH])
#define NVTX(a) ((struct lp_nvtx *)(a)->view[LP_VIEW_NVTX])
#define SAMPLES(a) ((struct lp_samples *)(a)->view[LP_VIEW_CPU])

/* ---- PyTorch's operators (torch.c): once the trace names any, allocations take the general
 * path, so each is charged to the operator running on its thread ---------------------------- */
static int torch_create(struct lp_analysis *a) {
    a->view[LP_VIEW_TORCH] = lp_torch_new(a->r);
    if (!TORCH(a)) return -1;
    a->general_allocs |= lp_torch_expected(TORCH(a));
    return 0;
}
static int torch_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    unsigned shape = lp_kind_shape[e->kind];
    if (shape == LP_SHAPE_CALL) {
        if (lp_call_role[s->call->call] != LP_ROLE_TORCH) return 0;
        a->general_allocs = 1; /* from here on allocations are charged to operators */
        /* (the pass's own view of the record: torch.c may hide it from the writers) */
        return lp_torch_call(TORCH(a), e, s->call, a->counting, (struct lp_call_view *)s->view);
    }
    if (a->general_allocs && s->size && a->counting && (shape == LP_SHAPE_ALLOC || e->phase))
        lp_torch_alloc(TORCH(a), e->tid, e->ns, s->size);
    return 0;
}
static int torch_finish(struct lp_analysis *a) { return lp_torch_finish(TORCH(a)); }
static void torch_destroy(struct lp_analysis *a) { lp_torch_free(TORCH(a)); }
static void torch_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    if (lp_torch_any(TORCH(a))) lp_torch_summary(TORCH(a), o, top);
}
static void torch_csv(const struct lp_analysis *a, struct lp_out *o) {
    if (lp_torch_any(TORCH(a))) lp_torch_csv(TORCH(a), o);
}
static void torch_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    if (lp_torch_any(TORCH(a))) lp_torch_chrome(TORCH(a), j, pid); /* ranges ended elsewhere */
}
static void torch_metadata(const struct lp_analysis *a, struct lp_json *j) {
    if (lp_torch_any(TORCH(a))) lp_torch_metadata(TORCH(a), j);
}

/* ---- NVTX's start/end ranges (nvtx.c), paired across threads ----------------------------- */
static int nvtx_create(struct lp_analysis *a) { return (a->view[LP_VIEW_NVTX] = lp_nvtx_new(a->r)) ? 0 : -1; }
static int nvtx_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    return lp_nvtx_call(NVTX(a), e, s->call, (struct lp_call_view *)s->view);
}
static void nvtx_destroy(struct lp_analysis *a) { lp_nvtx_free(NVTX(a)); }
static void nvtx_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    if (lp_nvtx_any(NVTX(a))) lp_nvtx_chrome(NVTX(a), j, pid);
}
static void nvtx_metadata(const struct lp_analysis *a, struct lp_json *j) {
    if (lp_nvtx_any(NVTX(a))) lp_nvtx_metadata(NVTX(a), j);
}

/* ---- ONNX Runtime's node profiles (ort.c), placed inside their runs ---------------------- */
static int ort_create(struct lp_analysis *a) { return (a->view[LP_VIEW_ORT] = lp_ort_new(a->r)) ? 0 : -1; }
static int ort_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    const struct lp_call_rec *rec = s->call;
    if (rec->call != LP_CALL_ORT_RUN || !e->timed || rec->nargs < 1) return 0;
    return lp_ort_run(ORT(a), rec->a[0], e->tid, e->start_ns, e->dur_ns);
}
static int ort_finish(struct lp_analysis *a) { return lp_ort_finish(ORT(a)); }
static void ort_destroy(struct lp_analysis *a) { lp_ort_free(ORT(a)); }
static void ort_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    if (lp_ort_any(ORT(a))) lp_ort_summary(ORT(a), o, top);
}
static void ort_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    if (lp_ort_any(ORT(a))) lp_ort_chrome(ORT(a), j, pid); /* ORT's nodes, inside their runs */
}
static void ort_metadata(const struct lp_analysis *a, struct lp_json *j) {
    if (lp_ort_any(ORT(a))) lp_ort_metadata(ORT(a), j);
}

/* ---- ExecuTorch's ETDumps (etdump.c), placed by the execute and instruction slices -------- */
static int et_create(struct lp_analysis *a) {
    return a->r->netdumps && !(a->view[LP_VIEW_ETDUMP] = lp_etdump_new(a->r)) ? -1 : 0;
}
static int et_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    if (!ETDUMP(a) || !e->timed) return 0;
    const struct lp_call_rec *rec = lp_kind_shape[e->kind] == LP_SHAPE_CALL ? s->call : NULL;
    int64_t index = rec ? lp_etdump_index(rec->call, rec->nargs, rec->a[2]) : LP_ETDUMP_OTHER;
    return lp_etdump_slice(ETDUMP(a), index, e->tid, e->start_ns, e->dur_ns);
}
static int et_finish(struct lp_analysis *a) { return ETDUMP(a) ? lp_etdump_finish(ETDUMP(a)) : 0; }
static void et_destroy(struct lp_analysis *a) { lp_etdump_free(ETDUMP(a)); }
static void et_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    if (lp_etdump_any(ETDUMP(a))) lp_etdump_summary(ETDUMP(a), o, top);
}
static void et_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    if (lp_etdump_any(ETDUMP(a))) lp_etdump_chrome(ETDUMP(a), j, pid); /* a row beside each thread */
}
static void et_metadata(const struct lp_analysis *a, struct lp_json *j) {
    if (lp_etdump_any(ETDUMP(a))) lp_etdump_metadata(ETDUMP(a), j);
}

/* ---- CUDA device memory (cudamem.c), from the cuda family's allocations --------------------- */
static int cm_create(struct lp_analysis *a) { return (a->view[LP_VIEW_CUDAMEM] = lp_cudamem_new(a->r)) ? 0 : -1; }
static int cm_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    return lp_call_family[s->call->call] == LP_FAM_CUDA ? lp_cudamem_call(CUDAMEM(a), e, s->call) : 0;
}
static void cm_destroy(struct lp_analysis *a) { lp_cudamem_free(CUDAMEM(a)); }
static void cm_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    if (lp_cudamem_any(CUDAMEM(a))) lp_cudamem_summary(CUDAMEM(a), o, top);
}
static void cm_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    if (lp_cudamem_any(CUDAMEM(a))) lp_cudamem_chrome(CUDAMEM(a), j, pid); /* the bytes live over time */
}
static void cm_metadata(const struct lp_analysis *a, struct lp_json *j) {
    if (lp_cudamem_any(CUDAMEM(a))) lp_cudamem_metadata(CUDAMEM(a), j);
}

/* ---- the GPU's own kernels, copies and sets (gpu.c), from CUPTI's records; the GPU families'
 * calls are their arrows' starts ------------------------------------------------------------- */
static int gpu_create(struct lp_analysis *a) { return (a->view[LP_VIEW_GPU] = lp_gpu_new(a->r)) ? 0 : -1; }
static int gpu_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    unsigned fam = lp_call_family[s->call->call];
    return fam == LP_FAM_CUDA || fam == LP_FAM_CUBLAS || fam == LP_FAM_NCCL ? lp_gpu_call(GPU(a), e, s->call) : 0;
}
static int gpu_finish(struct lp_analysis *a) { return lp_gpu_finish(GPU(a)); }
static void gpu_destroy(struct lp_analysis *a) { lp_gpu_free(GPU(a)); }
static void gpu_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    if (lp_gpu_any(GPU(a))) lp_gpu_summary(GPU(a), o, top, a->span_ns);
}
static void gpu_csv(const struct lp_analysis *a, struct lp_out *o) {
    if (lp_gpu_any(GPU(a))) lp_gpu_csv(GPU(a), o);
}
static void gpu_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    if (lp_gpu_any(GPU(a))) lp_gpu_chrome(GPU(a), j, pid); /* a track per stream, arrows from the launches */
}
static void gpu_metadata(const struct lp_analysis *a, struct lp_json *j) {
    if (lp_gpu_any(GPU(a))) lp_gpu_metadata(GPU(a), j);
}

/* ---- Python call slices (pycalls.c) -------------------------------------------------------- */
static int py_create(struct lp_analysis *a) { return (a->view[LP_VIEW_PYCALLS] = lp_pycalls_new(a->r)) ? 0 : -1; }
static int py_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    (void)s;
    return lp_pycalls_event(PYCALLS(a), e, a->counting);
}
static int py_finish(struct lp_analysis *a) { return lp_pycalls_finish(PYCALLS(a)); }
static void py_destroy(struct lp_analysis *a) { lp_pycalls_free(PYCALLS(a)); }
static void py_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    if (lp_pycalls_any(PYCALLS(a))) lp_pycalls_summary(PYCALLS(a), o, top);
}
static void py_csv(const struct lp_analysis *a, struct lp_out *o) {
    if (lp_pycalls_any(PYCALLS(a))) lp_pycalls_csv(PYCALLS(a), o);
}
static void py_metadata(const struct lp_analysis *a, struct lp_json *j) {
    if (lp_pycalls_any(PYCALLS(a))) lp_pycalls_metadata(PYCALLS(a), j);
}

/* ---- CPU samples (samples.c): theirs alone (no writer streams them) ------------------------- */
static int cpu_create(struct lp_analysis *a) {
    int oom = 0;
    a->view[LP_VIEW_CPU] = lp_samples_new(a->r, &oom); /* NULL: no CPU samples */
    return oom ? -1 : 0;
}
static int cpu_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    (void)s;
    return SAMPLES(a) ? lp_samples_event(SAMPLES(a), e, a->counting) : 0;
}
static int cpu_fit(struct lp_analysis *a) { return SAMPLES(a) ? lp_samples_fit(SAMPLES(a)) : 0; }
static int cpu_finish(struct lp_analysis *a) { return lp_samples_finish(SAMPLES(a)); }
static void cpu_destroy(struct lp_analysis *a) { lp_samples_free(SAMPLES(a)); }
static void cpu_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    lp_samples_summary(SAMPLES(a), o, top);
}
static void cpu_csv(const struct lp_analysis *a, struct lp_out *o) { lp_samples_csv(SAMPLES(a), o); }
static void cpu_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    lp_samples_chrome(SAMPLES(a), j, pid); /* each thread's CPU over time */
}
static void cpu_metadata(const struct lp_analysis *a, struct lp_json *j) { lp_samples_metadata(SAMPLES(a), j); }

/* ---- MPI: the ends of the main thread's first barrier and MPI_Init, the instants a merge of a
 * job's ranks on several hosts aligns their clocks on (tools/skew.c; metadata.job.sync_ns) ---- */
static int mpi_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    unsigned call = s->call->call;
    if ((call == LP_CALL_MPI_BARRIER || call == LP_CALL_MPI_INIT || call == LP_CALL_MPI_INIT_THREAD) && e->timed &&
        e->tid == a->r->hdr.pid) {
        int w = call != LP_CALL_MPI_BARRIER;
        if (!a->mpi_sync_ns[w]) a->mpi_sync_ns[w] = e->start_ns + e->dur_ns;
    }
    return 0;
}

// clang-format off
const struct lp_view lp_views[LP_VIEW_COUNT] = {
    [LP_VIEW_PYCALLS] = {"python calls", SHAPE(PYCALL), py_create, py_event, NULL, py_finish, py_destroy,
     py_summary, py_csv, NULL, py_metadata},
    [LP_VIEW_ORT] = {"ort", SHAPE(CALL), ort_create, ort_event, NULL, ort_finish, ort_destroy,
     ort_summary, NULL, ort_chrome, ort_metadata},
    [LP_VIEW_ETDUMP] = {"etdump", SHAPE(CALL) | SHAPE(RANGE) | SHAPE(PYCALL), et_create, et_event, NULL, et_finish, et_destroy,
     et_summary, NULL, et_chrome, et_metadata},
    [LP_VIEW_CUDAMEM] = {"cuda memory", SHAPE(CALL), cm_create, cm_event, NULL, NULL, cm_destroy,
     cm_summary, NULL, cm_chrome, cm_metadata},
    [LP_VIEW_GPU] = {"gpu", SHAPE(CALL), gpu_create, gpu_event, NULL, gpu_finish, gpu_destroy,
     gpu_summary, gpu_csv, gpu_chrome, gpu_metadata},
    [LP_VIEW_TORCH] = {"torch", SHAPE(CALL) | SHAPE(ALLOC) | SHAPE(REALLOC), torch_create, torch_event, NULL, torch_finish, torch_destroy,
     torch_summary, torch_csv, torch_chrome, torch_metadata},
    [LP_VIEW_NVTX] = {"nvtx", SHAPE(CALL), nvtx_create, nvtx_event, NULL, NULL, nvtx_destroy,
     NULL, NULL, nvtx_chrome, nvtx_metadata},
    [LP_VIEW_MPI] = {"mpi", SHAPE(CALL), NULL, mpi_event, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [LP_VIEW_CPU] = {"cpu", SHAPE(SAMPLE), cpu_create, cpu_event, cpu_fit, cpu_finish, cpu_destroy,
     cpu_summary, cpu_csv, cpu_chrome, cpu_metadata},
};
// clang-format on
const unsigned lp_nviews = sizeof lp_views / sizeof lp_views[0];
