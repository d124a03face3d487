/* nvtx.c: see nvtx.h. */
#include "nvtx.h"
#include "json.h"

#include "async.h"
#include "os.h"

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

void lp_nvtx_chrome(const struct lp_nvtx *n, struct lp_json *j, uint64_t pid) {
    lp_async_chrome(&n->ranges, n->r, j, pid, "nvtx", domain_arg, (void *)n->r);
}

void lp_nvtx_metadata(const struct lp_nvtx *n, struct lp_json *j) {
    lp_json_kobject(j, "nvtx");
    lp_json_kus(j, "ranges", LP_U(n->ranges.n), "unpaired", LP_U(lp_async_unpaired(&n->ranges)), NULL);
    lp_json_object_end(j);
}
