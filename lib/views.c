/* views.c: see views.h. The table — each view's row is its own file's (torch.c, nvtx.c, ort.c,
 * etdump.c, cudamem.c, gpu.c, pycalls.c, gil.c, samples.c) — and the one view with no state of its own:
 * the MPI instants the merge of a job aligns clocks on. */
#define _GNU_SOURCE
#include "views.h"

#include "analysis.h"
#include "calls.h"
#include "cudamem.h"
#include "etdump.h"
#include "gil.h"
#include "gpu.h"
#include "nvtx.h"
#include "ort.h"
#include "pycalls.h"
#include "samples.h"
#include "torch.h"

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

static const struct lp_view mpi_view = {.name = "mpi", .shapes = 1u << LP_SHAPE_CALL, .event = mpi_event};

const struct lp_view *const lp_views[LP_VIEW_COUNT] = {
    [LP_VIEW_PYCALLS] = &lp_view_pycalls, [LP_VIEW_ORT] = &lp_view_ort, [LP_VIEW_ETDUMP] = &lp_view_etdump,
    [LP_VIEW_CUDAMEM] = &lp_view_cudamem, [LP_VIEW_GPU] = &lp_view_gpu, [LP_VIEW_TORCH] = &lp_view_torch,
    [LP_VIEW_NVTX] = &lp_view_nvtx,       [LP_VIEW_MPI] = &mpi_view,    [LP_VIEW_GIL] = &lp_view_gil,
    [LP_VIEW_CPU] = &lp_view_samples,
};
const unsigned lp_nviews = sizeof lp_views / sizeof lp_views[0];
