/* views.h: the converter's side of the hook families that make more of a trace than the per-entry
 * point statistics (calls.c) — PyTorch's operators, ONNX Runtime's node profiles, Python call
 * slices, CPU samples, MPI's clock-alignment instants — one row each, as the hook families are
 * rows of LP_FAMILIES. lp_convert creates every view, hands each the events of the shapes it asks
 * for during the one pass, finishes them at its end and frees them; the writers ask each view for
 * its part of the summary, the CSV, the Chrome trace's events and its metadata. A view's state is
 * its slot of lp_analysis.view. A new view is one file — its analysis and its row (a struct lp_view
 * of its own functions, each given the analysis and finding its state in its slot) — a name in
 * lp_view_id and a pointer in lp_views: lp_convert and the writers do not change. */
#ifndef LP_VIEWS_H
#define LP_VIEWS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"

struct lp_analysis;
struct lp_event;
struct lp_seen;
struct lp_out;
struct lp_json;

/* The views, in the order they see each event. */
enum lp_view_id {
    LP_VIEW_PYCALLS, /* Python call slices (pycalls.c) */
    LP_VIEW_ORT,     /* ONNX Runtime's node profiles (ort.c) */
    LP_VIEW_ETDUMP,  /* ExecuTorch's ETDumps (etdump.c) */
    LP_VIEW_CUDAMEM, /* CUDA device memory (cudamem.c) */
    LP_VIEW_GPU,     /* the GPU's own kernels, copies and sets (gpu.c) */
    LP_VIEW_TORCH,   /* PyTorch's operators (torch.c) */
    LP_VIEW_NVTX,    /* NVTX's start/end ranges (nvtx.c) */
    LP_VIEW_MPI,     /* MPI's clock-alignment instants (no state of its own) */
    LP_VIEW_GIL,     /* Python threads: GIL waits, blocked time (gil.c) */
    LP_VIEW_CPU,     /* CPU samples (samples.c) */
    LP_VIEW_COUNT
};

struct lp_view {
    const char *name;
    unsigned shapes; /* the event shapes it sees (bit 1 << LP_SHAPE_*) */
    /* Its state, made for this trace into its slot of a->view (which may stay NULL: nothing to
     * see). 0, or -1 when out of memory. */
    int (*create)(struct lp_analysis *a);
    /* An event of one of its shapes (a CALL's record and meaning in s->call, s->view). 0 or -1. */
    int (*event)(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s);
    int (*fit)(struct lp_analysis *a);    /* a followed trace grew new threads; NULL: nothing to do */
    int (*finish)(struct lp_analysis *a); /* the pass is over: its totals. 0 or -1 */
    void (*destroy)(struct lp_analysis *a);
    /* its part of each output (NULL: none) */
    void (*summary)(const struct lp_analysis *a, struct lp_out *o, unsigned top);
    void (*csv)(const struct lp_analysis *a, struct lp_out *o);
    void (*chrome)(const struct lp_analysis *a, struct lp_json *j, uint64_t pid); /* events of its own */
    void (*metadata)(const struct lp_analysis *a,
                     struct lp_json *j); /* "key":value, ... (its members of metadata.libprof) */
};
extern const struct lp_view *const lp_views[LP_VIEW_COUNT];
extern const unsigned lp_nviews;
_Static_assert(LP_VIEW_COUNT <= LP_VIEW_SLOTS, "lp_analysis.view has room for every view (analysis.h)");

/* The views the writers read besides their own parts: the CPU samples (NULL without them), CUDA
 * device memory. */
static inline struct lp_samples *lp_samples_of(const struct lp_analysis *a) { return a->view[LP_VIEW_CPU]; }
/* The CPU samples handed to the caller of the conversion (it frees them): the view keeps none. */
static inline struct lp_samples *lp_samples_take(struct lp_analysis *a) {
    struct lp_samples *s = a->view[LP_VIEW_CPU];
    a->view[LP_VIEW_CPU] = NULL;
    return s;
}
static inline struct lp_cudamem *lp_cudamem_of(const struct lp_analysis *a) { return a->view[LP_VIEW_CUDAMEM]; }

#endif
