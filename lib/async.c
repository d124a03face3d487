/* async.c: see async.h. */
#include "async.h"

#include <string.h>

#include "os.h"
#include "vec.h"

struct lp_async_range *lp_async_mark(struct lp_asyncs *s, uint64_t handle, int begin, uint32_t tid, uint64_t ns,
                                     uint32_t name, uint32_t extra) {
    uint64_t v;
    struct lp_async_range *a;
    if (handle && lp_map_take(&s->pend, handle, &v)) {
        a = &s->v[v - 1];
    } else {
        if (LP_RESERVE(s->v, s->cap, s->n + 1) != 0) {
            s->oom = 1;
            return NULL;
        }
        a = &s->v[s->n++];
        memset(a, 0, sizeof *a);
        if (handle && lp_map_put(&s->pend, handle, s->n, NULL) < 0) s->oom = 1;
    }
    if (begin) {
        a->b = ns;
        a->btid = tid;
        a->name = name;
        a->extra = extra;
    } else {
        a->e = ns;
        a->etid = tid;
        if (!a->name) a->name = name;
    }
    return a;
}

uint64_t lp_async_unpaired(const struct lp_asyncs *s) {
    uint64_t n = 0;
    for (size_t i = 0; i < s->n; i++) n += !s->v[i].b || !s->v[i].e;
    return n;
}

void lp_async_chrome(const struct lp_asyncs *s, const struct lp_reader *r, struct lp_json *j, uint64_t pid,
                     const char *cat, void (*args)(const struct lp_async_range *a, struct lp_json *j, void *ctx),
                     void *ctx) {
    for (size_t i = 0; i < s->n; i++) {
        const struct lp_async_range *a = &s->v[i];
        if (!a->b || !a->e || a->e < a->b) continue;
        uint32_t len;
        const char *name = lp_reader_name(r, a->name, &len);
        lp_json_event(j, "b", pid, a->btid, cat, name, len, (int64_t)a->b);
        lp_json_id(j, i + 1);
        lp_json_args(j);
        lp_json_key(j, "ended_on_thread");
        lp_json_u64(j, a->etid);
        if (args) args(a, j, ctx);
        lp_json_args_end(j);
        lp_json_event_end(j);
        lp_json_event(j, "e", pid, a->btid, cat, name, len, (int64_t)a->e);
        lp_json_id(j, i + 1);
        lp_json_event_end(j);
    }
}

void lp_async_free(struct lp_asyncs *s) {
    lp_os_free(s->v);
    lp_map_free(&s->pend);
    memset(s, 0, sizeof *s);
}
