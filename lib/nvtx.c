/* nvtx.c: see nvtx.h. */
#include "nvtx.h"
#include "json.h"

#include "async.h"
#include "os.h"
#include "views.h"
#include "analysis.h"
#include "calls.h"

struct lp_nvtx {
    const struct lp_reader *r;
    struct lp_asyncs ranges; /* extra: the domain's name id (0: NVTX's default domain) */
};

struct lp_nvtx *lp_nvtx_new(const struct lp_reader *r) {
    struct lp_nvtx *n = lp_os_calloc(1, sizeof *n);
    if (n) n->r = r;
    return n;
}

void lp_nvtx_free(struct lp_nvtx *n) {
    if (!n) return;
    lp_async_free(&n->ranges);
    lp_os_free(n);
}

int lp_nvtx_call(struct lp_nvtx *n, const struct lp_event *e, const struct lp_call_rec *c, struct lp_call_view *v) {
    int begin = c->call == LP_CALL_NVTX_START;
    if ((!begin && c->call != LP_CALL_NVTX_END) || c->nargs < (begin ? 3u : 1u)) return 0;
    v->hidden = 1;
    lp_async_mark(&n->ranges, begin ? c->a[2] : c->a[0], begin, e->tid, e->ns, begin ? (uint32_t)c->a[0] : 0,
                  begin ? (uint32_t)c->a[1] : 0);
    return n->ranges.oom ? -1 : 0;
}

int lp_nvtx_any(const struct lp_nvtx *n) { return n && n->ranges.n; }

static void domain_arg(const struct lp_async_range *a, struct lp_json *j, void *ctx) {
    const struct lp_reader *r = ctx;
    if (!a->extra) return;
    uint32_t len;
    const char *d = lp_reader_name(r, a->extra, &len);
    lp_json_key(j, "domain");
    lp_json_str(j, d, len);
}

static void view_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    const struct lp_nvtx *n = a->view[LP_VIEW_NVTX];
    if (!lp_nvtx_any(n)) return;
    lp_async_chrome(&n->ranges, n->r, j, pid, "nvtx", domain_arg, (void *)n->r);
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    const struct lp_nvtx *n = a->view[LP_VIEW_NVTX];
    if (!lp_nvtx_any(n)) return;
    lp_json_kobject(j, "nvtx");
    lp_json_kus(j, "ranges", LP_U(n->ranges.n), "unpaired", LP_U(lp_async_unpaired(&n->ranges)), NULL);
    lp_json_object_end(j);
}

/* ---- the view (views.h): NVTX's start/end ranges, paired across threads */
#define NVTX(a) ((struct lp_nvtx *)(a)->view[LP_VIEW_NVTX])
#define SHAPE(s) (1u << LP_SHAPE_##s)
static int view_create(struct lp_analysis *a) { return (a->view[LP_VIEW_NVTX] = lp_nvtx_new(a->r)) ? 0 : -1; }
static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    return lp_nvtx_call(NVTX(a), e, s->call, (struct lp_call_view *)s->view);
}
static void view_destroy(struct lp_analysis *a) { lp_nvtx_free(NVTX(a)); }

// clang-format off
const struct lp_view lp_view_nvtx = {"nvtx", SHAPE(CALL), view_create, view_event, NULL, NULL, view_destroy, NULL, NULL, view_chrome, view_metadata};
// clang-format on
