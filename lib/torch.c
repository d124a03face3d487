/* torch.c: see torch.h. Self time is an operator's time minus its child operators'
 * (torch.profiler's "Self CPU"); its total bytes are those its thread allocated between its start
 * and its end, its self bytes those not inside a child operator. */
#define _GNU_SOURCE
#include "torch.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "fmt.h"
#include "map.h"
#include "os.h"
#include "stats.h"
#include "vec.h"
#include "views.h"
#include "analysis.h"
#include "calls.h"

struct opstat {
    struct fnstat f;
    uint64_t self_ns, bytes_self, bytes_total;
    uint32_t name, shape; /* name ids (shape 0: all shapes) */
};

/* A thread's operators reach the pass as they ended (a thread's records are written at their
 * end: an operator's children come before it): each waits on its thread's stack of finished
 * operators until its parent, which starts earlier, takes it. */
struct done_op {
    uint64_t start, dur, bytes;
};
struct alloc_pt {
    uint64_t ns, cum; /* bytes the thread had allocated up to and with this allocation */
};

struct tstack {
    uint32_t tid;
    struct done_op *s;
    size_t n, cap;
    struct alloc_pt *al;
    size_t nal, capal;
};

struct lp_torch {
    const struct lp_reader *r;
    struct opstat *st; /* by name, then (name, shapes) pairs */
    size_t nst, capst;
    struct lp_map ix; /* name | shape << 32 -> index + 1 */
    struct tstack *th;
    size_t nth, capth;
    struct lp_map tix; /* tid -> index + 1 */
    struct lp_map fwd; /* logical thread << 40 | seq -> forward op's tid << 44 | start (us-ish ns) index */
    struct {
        uint32_t tid;
        uint64_t ns;
    } * fv;
    size_t nfv, capfv;
    uint64_t flow_id;
    struct lp_asyncs as; /* the ranges started and ended on two threads (extra: their shapes) */
    uint64_t ops, flows, unpaired, shapes_seen;
    int oom;
};

struct lp_torch *lp_torch_new(const struct lp_reader *r) {
    struct lp_torch *t = lp_os_calloc(1, sizeof *t);
    if (t) t->r = r;
    return t;
}

void lp_torch_free(struct lp_torch *t) {
    if (!t) return;
    for (size_t i = 0; i < t->nst; i++) lp_fnstat_free(&t->st[i].f);
    for (size_t i = 0; i < t->nth; i++) {
        lp_os_free(t->th[i].s);
        lp_os_free(t->th[i].al);
    }
    lp_os_free(t->st);
    lp_os_free(t->th);
    lp_os_free(t->fv);
    lp_async_free(&t->as);
    lp_map_free(&t->ix);
    lp_map_free(&t->tix);
    lp_map_free(&t->fwd);
    lp_os_free(t);
}

int lp_torch_any(const struct lp_torch *t) { return t && (t->ops || t->as.n); }

static long stat_of(struct lp_torch *t, uint32_t name, uint32_t shape) {
    uint64_t key = (uint64_t)name | (uint64_t)shape << 32 | UINT64_C(1) << 63, v;
    if (lp_map_get(&t->ix, key, &v)) return (long)v - 1;
    if (LP_RESERVE(t->st, t->capst, t->nst + 1) != 0 || lp_map_put(&t->ix, key, t->nst + 1, NULL) < 0) return -1;
    memset(&t->st[t->nst], 0, sizeof *t->st);
    t->st[t->nst].name = name;
    t->st[t->nst].shape = shape;
    return (long)t->nst++;
}

static struct tstack *thread_of(struct lp_torch *t, uint32_t tid) {
    uint64_t v;
    if (lp_map_get(&t->tix, tid + UINT64_C(1), &v)) return &t->th[v - 1];
    if (LP_RESERVE(t->th, t->capth, t->nth + 1) != 0 || lp_map_put(&t->tix, tid + UINT64_C(1), t->nth + 1, NULL) < 0)
        return NULL;
    memset(&t->th[t->nth], 0, sizeof *t->th);
    t->th[t->nth].tid = tid;
    return &t->th[t->nth++];
}

/* Bytes thread `s` allocated in [from, to]. */
static uint64_t bytes_in(const struct tstack *s, uint64_t from, uint64_t to) {
    size_t lo = 0, hi = s->nal; /* first allocation at or after `from` */
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (s->al[m].ns < from)
            lo = m + 1;
        else
            hi = m;
    }
    uint64_t before = lo ? s->al[lo - 1].cum : 0;
    size_t a = lo;
    hi = s->nal; /* first allocation after `to` */
    while (a < hi) {
        size_t m = (a + hi) / 2;
        if (s->al[m].ns <= to)
            a = m + 1;
        else
            hi = m;
    }
    return (a ? s->al[a - 1].cum : 0) - before;
}

int lp_torch_call(struct lp_torch *t, const struct lp_event *e, const struct lp_call_rec *c, int counting,
                  struct lp_call_view *v) {
    if (c->nargs < 7) return 0;
    if (c->call != LP_CALL_TORCH_OP) { /* a start and an end on two threads: shown as one range */
        v->hidden = 1;
        lp_async_mark(&t->as, c->a[6], c->call == LP_CALL_TORCH_BEGIN, e->tid, e->ns, (uint32_t)c->a[0],
                      (uint32_t)c->a[5]);
        return t->as.oom ? -1 : 0;
    }
    struct tstack *s = thread_of(t, e->tid);
    if (!s) return -1;
    uint32_t name = (uint32_t)c->a[0], shape = (uint32_t)c->a[5];
    long k = stat_of(t, name, 0), ks = shape ? stat_of(t, name, shape) : k;
    if (k < 0 || ks < 0 || LP_RESERVE(s->s, s->cap, s->n + 1) != 0) return -1;
    uint64_t child_ns = 0, child_bytes = 0, bytes = bytes_in(s, e->start_ns, e->start_ns + e->dur_ns);
    while (s->n && s->s[s->n - 1].start >= e->start_ns) { /* its children */
        s->n--;
        child_ns += s->s[s->n].dur;
        child_bytes += s->s[s->n].bytes;
    }
    s->s[s->n++] = (struct done_op){e->start_ns, e->dur_ns, bytes};
    if (counting) {
        t->ops++;
        for (int i = 0; i < (ks != k ? 2 : 1); i++) {
            struct opstat *o = &t->st[i ? ks : k];
            if (lp_fnstat_add(&o->f, 1, 1, e->dur_ns, 0, 0) != 0) return -1;
            o->self_ns += e->dur_ns > child_ns ? e->dur_ns - child_ns : 0;
            o->bytes_total += bytes;
            o->bytes_self += bytes > child_bytes ? bytes - child_bytes : 0;
        }
    }
    /* a forward operator with a sequence number, the first (outermost) of its number; a
     * backward node points back at it */
    int64_t seq = (int64_t)c->a[1];
    if (seq >= 0 && seq < (INT64_C(1) << 40)) {
        uint64_t key, val;
        if (c->a[2] == 1 && c->a[4]) { /* backward, with its forward thread */
            key = c->a[4] << 40 | (uint64_t)seq;
            if (lp_map_get(&t->fwd, key, &val)) {
                v->flow = 1;
                v->flow_name = "forward to backward";
                v->flow_cat = "torch";
                v->flow_id = (UINT64_C(7) << 60) + ++t->flow_id;
                v->s_tid = t->fv[val - 1].tid;
                v->s_ts = t->fv[val - 1].ns;
                v->f_tid = e->tid;
                v->f_ts = e->start_ns;
                t->flows++;
            }
        } else if (c->a[2] != 1 && c->a[3]) {
            key = c->a[3] << 40 | (uint64_t)seq;
            if (!lp_map_get(&t->fwd, key, &val)) {
                if (LP_RESERVE(t->fv, t->capfv, t->nfv + 1) != 0) return -1;
                t->fv[t->nfv].tid = e->tid;
                t->fv[t->nfv].ns = e->start_ns;
                if (lp_map_put(&t->fwd, key, ++t->nfv, NULL) < 0) return -1;
            }
        }
    }
    return 0;
}

void lp_torch_alloc(struct lp_torch *t, uint32_t tid, uint64_t ns, uint64_t bytes) {
    struct tstack *s = thread_of(t, tid);
    if (!s || LP_RESERVE(s->al, s->capal, s->nal + 1) != 0) {
        t->oom = 1;
        return;
    }
    uint64_t cum = s->nal ? s->al[s->nal - 1].cum : 0;
    s->al[s->nal++] = (struct alloc_pt){ns, cum + bytes};
}

/* Whether the trace holds operators (their names are interned): allocations are then kept from
 * the start, for the operators that end later. */
int lp_torch_expected(const struct lp_torch *t) {
    for (uint32_t id = 1; id < t->r->nnames; id++) {
        uint32_t len;
        const char *n = lp_reader_name(t->r, id, &len);
        if (len > 6 && !memcmp(n, "aten::", 6)) return 1;
    }
    return 0;
}

int lp_torch_finish(struct lp_torch *t) {
    t->unpaired = lp_async_unpaired(&t->as);
    return t->oom || t->as.oom ? -1 : 0;
}

/* Operators by total time, then name; pairs (shape != 0) or names only. */
static const struct lp_torch *sort_t;
static int by_total(const void *x, const void *y) {
    const struct opstat *a = &sort_t->st[*(const uint32_t *)x], *b = &sort_t->st[*(const uint32_t *)y];
    if (a->f.total_ns != b->f.total_ns) return a->f.total_ns > b->f.total_ns ? -1 : 1;
    return a->name != b->name ? (a->name < b->name ? -1 : 1) : (a->shape < b->shape ? -1 : a->shape > b->shape);
}
static uint32_t *sorted(const struct lp_torch *t, int pairs, size_t *n) {
    uint32_t *v = lp_os_malloc((t->nst + 1) * sizeof *v);
    *n = 0;
    if (!v) return NULL;
    for (size_t i = 0; i < t->nst; i++)
        if (t->st[i].f.count && (t->st[i].shape != 0) == pairs) v[(*n)++] = (uint32_t)i;
    sort_t = t;
    lp_sort(v, *n, sizeof *v, by_total);
    return v;
}

static void row_json(const struct lp_torch *t, struct lp_json *j, const struct opstat *s) {
    uint32_t len;
    const char *name = lp_reader_name(t->r, s->name, &len);
    lp_json_object(j);
    lp_json_ks(j, "name", name, len);
    if (s->shape) {
        const char *sh = lp_reader_name(t->r, s->shape, &len);
        lp_json_ks(j, "shapes", sh, len);
    }
    lp_json_kus(j, "count", LP_U(s->f.count), "total_ns", LP_U(s->f.total_ns), "self_ns", LP_U(s->self_ns), "mean_ns",
                LP_U(s->f.timed ? s->f.total_ns / s->f.timed : 0), "p50_ns", LP_U(lp_percentile(&s->f, 0.5)), "p99_ns",
                LP_U(lp_percentile(&s->f, 0.99)), "bytes_self", LP_U(s->bytes_self), "bytes_total",
                LP_U(s->bytes_total), NULL);
    lp_json_object_end(j);
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    const struct lp_torch *t = a->view[LP_VIEW_TORCH];
    if (!lp_torch_any(t)) return;
    lp_json_kobject(j, "torch");
    lp_json_kus(j, "operators", LP_U(t->ops), "backward_links", LP_U(t->flows), "cross_thread", LP_U(t->as.n),
                "unpaired", LP_U(t->unpaired), NULL);
    for (int pairs = 0; pairs < 2; pairs++) {
        size_t n;
        uint32_t *v = sorted(t, pairs, &n);
        lp_json_karray(j, pairs ? "by_shapes" : "ops");
        for (size_t i = 0; v && i < n; i++) row_json(t, j, &t->st[v[i]]);
        lp_json_array_end(j);
        lp_os_free(v);
    }
    lp_json_object_end(j);
}

/* The ranges that ended on another thread: async slices ("b"/"e") on the starting thread. */
static void view_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    const struct lp_torch *t = a->view[LP_VIEW_TORCH];
    if (!lp_torch_any(t)) return;
    lp_async_chrome(&t->as, t->r, j, pid, "torch", NULL, NULL);
}

static void view_csv(const struct lp_analysis *a, struct lp_out *o) {
    const struct lp_torch *t = a->view[LP_VIEW_TORCH];
    if (!lp_torch_any(t)) return;
    for (int pairs = 0; pairs < 2; pairs++) {
        size_t n;
        uint32_t *v = sorted(t, pairs, &n);
        for (size_t i = 0; v && i < n; i++) {
            const struct opstat *s = &t->st[v[i]];
            char label[600];
            uint32_t len, slen = 0;
            const char *name = lp_reader_name(t->r, s->name, &len);
            const char *sh = s->shape ? lp_reader_name(t->r, s->shape, &slen) : "";
            int k = snprintf(label, sizeof label, "%.*s%s%.*s", (int)len, name, slen ? " " : "", (int)slen, sh);
            struct fnstat f = s->f;
            f.bytes = s->bytes_total;
            lp_csv_row(o, label, k < (int)sizeof label ? (size_t)k : sizeof label - 1,
                       pairs ? "torch_shape" : "torch_op", &f, 0);
        }
        lp_os_free(v);
    }
}

static void view_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    const struct lp_torch *t = a->view[LP_VIEW_TORCH];
    if (!lp_torch_any(t)) return;
    size_t rows = lp_top(top, 20);
    size_t n;
    uint32_t *v = sorted(t, 0, &n);
    if (!v) return;
    lp_out_fmt(o, "  PyTorch operators: %llu (%zu names)%s\n", (unsigned long long)t->ops, n,
               t->flows ? ", backward nodes linked to their forward operators" : "");
    lp_out_fmt(o, "    %-36s %8s %10s %10s %10s %10s %10s %10s\n", "operator", "count", "total", "self", "p50", "p99",
               "bytes self", "bytes tot");
    for (size_t i = 0; i < n && i < rows; i++) {
        const struct opstat *s = &t->st[v[i]];
        uint32_t len;
        const char *name = lp_reader_name(t->r, s->name, &len);
        char tot[16], self[16], p50[16], p99[16], bs[16], bt[16];
        lp_fmt_ns(tot, sizeof tot, s->f.total_ns);
        lp_fmt_ns(self, sizeof self, s->self_ns);
        lp_fmt_ns(p50, sizeof p50, lp_percentile(&s->f, 0.5));
        lp_fmt_ns(p99, sizeof p99, lp_percentile(&s->f, 0.99));
        lp_fmt_bytes(bs, sizeof bs, s->bytes_self);
        lp_fmt_bytes(bt, sizeof bt, s->bytes_total);
        lp_out_fmt(o, "    %-36.*s %8llu %10s %10s %10s %10s %10s %10s\n", (int)(len > 36 ? 36 : len), name,
                   (unsigned long long)s->f.count, tot, self, p50, p99, bs, bt);
    }
    if (n > rows) lp_out_fmt(o, "    ... %zu more (metadata.libprof.torch, the CSV)\n", n - rows);
    lp_os_free(v);
}

/* ---- the view (views.h): PyTorch's operators: once the trace names any, allocations take the general
 * path, so each is charged to the operator running on its thread */
#define TORCH(a) ((struct lp_torch *)(a)->view[LP_VIEW_TORCH])
#define SHAPE(s) (1u << LP_SHAPE_##s)
static int view_create(struct lp_analysis *a) {
    a->view[LP_VIEW_TORCH] = lp_torch_new(a->r);
    if (!TORCH(a)) return -1;
    a->general_allocs |= lp_torch_expected(TORCH(a));
    return 0;
}
static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
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
static int view_finish(struct lp_analysis *a) { return lp_torch_finish(TORCH(a)); }
static void view_destroy(struct lp_analysis *a) { lp_torch_free(TORCH(a)); }

// clang-format off
const struct lp_view lp_view_torch = {"torch", SHAPE(CALL) | SHAPE(ALLOC) | SHAPE(REALLOC), view_create, view_event, NULL, view_finish, view_destroy, view_summary, view_csv, view_chrome, view_metadata};
// clang-format on
