/* pycalls.c: see pycalls.h. */
#define _GNU_SOURCE
#include "pycalls.h"
#include "json.h"
#include "os.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "vec.h"
#include "views.h"
#include "analysis.h"
#include "calls.h"

struct span { /* one call */
    uint64_t start, end;
    uint32_t thread, fn;
};

struct fn { /* one function (code id) */
    uint64_t calls, ns, bytes, allocs;
};

struct lp_pycalls {
    const struct lp_reader *r;
    struct span *span;
    size_t nspan, cap_span;
    struct fn *fn; /* by code id */
    size_t cap_fn;
};

struct lp_pycalls *lp_pycalls_new(const struct lp_reader *r) {
    struct lp_pycalls *p = lp_os_calloc(1, sizeof *p);
    if (p) p->r = r;
    return p;
}

void lp_pycalls_free(struct lp_pycalls *p) {
    if (!p) return;
    lp_os_free(p->span);
    lp_os_free(p->fn);
    lp_os_free(p);
}

int lp_pycalls_any(const struct lp_pycalls *p) { return p && p->nspan > 0; }

int lp_pycalls_event(struct lp_pycalls *p, const struct lp_event *e, int counting) {
    uint64_t id = e->w[0];
    if (!counting || id >= LP_MAX_PYCODE_ID) return 0;
    if (LP_RESERVE(p->span, p->cap_span, p->nspan + 1) != 0 || LP_RESERVE_ZERO(p->fn, p->cap_fn, id + 1) != 0)
        return -1;
    p->span[p->nspan++] = (struct span){e->start_ns, e->start_ns + e->dur_ns, e->thread, (uint32_t)id};
    p->fn[id].calls++;
    p->fn[id].ns += e->dur_ns;
    return 0;
}

static int by_thread_start(const void *x, const void *y) {
    const struct span *a = x, *b = y;
    if (a->thread != b->thread) return a->thread < b->thread ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return a->end > b->end ? -1 : a->end < b->end; /* the outer one first */
}

/* Every allocation of a thread is charged to each of its calls open at that moment: the calls of
 * one thread nest, so a sweep in time order keeps the open ones on a stack. */
int lp_pycalls_finish(struct lp_pycalls *p) {
    if (!p->nspan) return 0;
    lp_sort(p->span, p->nspan, sizeof *p->span, by_thread_start);
    if (p->r->follow) return 0; /* a followed trace is read once: no bytes charged to the calls */
    uint32_t nthreads = p->r->nthreads;
    size_t *first = lp_os_calloc((size_t)nthreads + 1, sizeof *first), *next = lp_os_calloc(nthreads + 1, sizeof *next);
    struct open {
        size_t n, cap;
        size_t *v;
    } *open = lp_os_calloc(nthreads + 1, sizeof *open);
    struct lp_iter *it = lp_iter_new(p->r);
    int rc = -1;
    if (!first || !next || !open || !it) goto out;
    for (uint32_t t = 0; t <= nthreads; t++) first[t] = next[t] = SIZE_MAX;
    for (size_t i = p->nspan; i-- > 0;) first[p->span[i].thread < nthreads ? p->span[i].thread : nthreads] = i;
    for (uint32_t t = 0; t <= nthreads; t++) next[t] = first[t];
    struct lp_event e;
    while (lp_iter_next(it, &e)) {
        uint64_t freed, born, size;
        lp_event_blocks(&e, &freed, &born, &size);
        if (!born || !size) continue;
        uint32_t t = e.thread < nthreads ? e.thread : nthreads;
        struct open *o = &open[t];
        while (o->n && p->span[o->v[o->n - 1]].end < e.ns) o->n--; /* calls that ended */
        while (next[t] < p->nspan && p->span[next[t]].thread == e.thread && p->span[next[t]].start <= e.ns) {
            size_t s = next[t]++;
            if (p->span[s].end < e.ns) continue; /* ended before this allocation */
            while (o->n && p->span[o->v[o->n - 1]].end < p->span[s].start) o->n--;
            if (LP_RESERVE(o->v, o->cap, o->n + 1) != 0) goto out;
            o->v[o->n++] = s;
        }
        for (size_t k = 0; k < o->n; k++) {
            struct fn *f = &p->fn[p->span[o->v[k]].fn];
            f->bytes += size;
            f->allocs++;
        }
    }
    rc = 0;
out:
    if (open)
        for (uint32_t t = 0; t <= nthreads; t++) lp_os_free(open[t].v);
    lp_os_free(open);
    lp_os_free(first);
    lp_os_free(next);
    if (it) lp_iter_free(it);
    return rc;
}

/* Code ids with calls, most time first. */
static const struct lp_pycalls *sort_p;
static int by_time(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    uint64_t ta = sort_p->fn[a].ns, tb = sort_p->fn[b].ns;
    return ta < tb ? 1 : ta > tb ? -1 : (a > b) - (a < b);
}
static uint32_t *ranked(const struct lp_pycalls *p, uint32_t *n) {
    *n = 0;
    uint32_t *v = p->cap_fn ? lp_os_malloc(p->cap_fn * sizeof *v) : NULL;
    if (!v) return NULL;
    for (uint32_t id = 0; id < p->cap_fn; id++)
        if (p->fn[id].calls) v[(*n)++] = id;
    sort_p = p;
    lp_sort(v, *n, sizeof *v, by_time);
    return v;
}

static void name_of(const struct lp_pycalls *p, uint32_t id, const char **name, uint32_t *nlen, const char **file,
                    uint32_t *flen, uint32_t *line) {
    const struct lp_pycode_ref *c = id < p->r->npycodes && p->r->pycodes[id].name ? &p->r->pycodes[id] : NULL;
    *name = c ? c->name : "?";
    *nlen = c ? c->name_len : 1;
    *file = c ? c->file : "?";
    *flen = c ? c->file_len : 1;
    *line = c ? c->firstline : 0;
}

static void view_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    const struct lp_pycalls *p = a->view[LP_VIEW_PYCALLS];
    if (!lp_pycalls_any(p)) return;
    uint32_t n;
    uint32_t *v = ranked(p, &n);
    if (!v || !n) {
        lp_os_free(v);
        return;
    }
    lp_out_fmt(o,
               "  Python calls (LIBPROF_PYTHON_CALLS; memory: allocated on the thread while the call ran, "
               "inclusive):\n  %10s %10s %10s %10s %10s  %s\n",
               "calls", "time", "mean", "allocs", "allocated", "function");
    char b1[32], b2[32], b3[32];
    for (uint32_t i = 0; i < n && i < lp_top(top, 20); i++) {
        const struct fn *f = &p->fn[v[i]];
        const char *name, *file;
        uint32_t nl, fl, line;
        name_of(p, v[i], &name, &nl, &file, &fl, &line);
        lp_fmt_ns(b1, sizeof b1, (int64_t)f->ns);
        lp_fmt_ns(b2, sizeof b2, (int64_t)(f->ns / f->calls));
        lp_fmt_bytes(b3, sizeof b3, f->bytes);
        lp_out_fmt(o, "  %10llu %10s %10s %10llu %10s  %.*s (%.*s:%u)\n", (unsigned long long)f->calls, b1, b2,
                   (unsigned long long)f->allocs, b3, (int)nl, name, (int)fl, file, line);
    }
    lp_os_free(v);
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    const struct lp_pycalls *p = a->view[LP_VIEW_PYCALLS];
    if (!lp_pycalls_any(p)) return;
    uint32_t n;
    uint32_t *v = ranked(p, &n);
    lp_json_karray(j, "python_calls");
    for (uint32_t i = 0; v && i < n; i++) {
        const struct fn *f = &p->fn[v[i]];
        const char *name, *file;
        uint32_t nl, fl, line;
        name_of(p, v[i], &name, &nl, &file, &fl, &line);
        lp_json_object(j);
        lp_json_ks(j, "name", name, nl);
        lp_json_ks(j, "file", file, fl);
        lp_json_kus(j, "line", LP_U(line), "calls", LP_U(f->calls), "total_ns", LP_U(f->ns), "alloc_bytes",
                    LP_U(f->bytes), "allocs", LP_U(f->allocs), NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_os_free(v);
}

static void view_csv(const struct lp_analysis *a, struct lp_out *o) {
    const struct lp_pycalls *p = a->view[LP_VIEW_PYCALLS];
    if (!lp_pycalls_any(p)) return;
    uint32_t n;
    uint32_t *v = ranked(p, &n);
    for (uint32_t i = 0; v && i < n; i++) {
        const struct fn *f = &p->fn[v[i]];
        const char *name, *file;
        uint32_t nl, fl, line;
        name_of(p, v[i], &name, &nl, &file, &fl, &line);
        lp_out_csv_str(o, name, nl);
        lp_out_fmt(o, ",python_call,%llu,%llu,%llu,,,,,,%llu,,\n", (unsigned long long)f->calls,
                   (unsigned long long)f->ns, (unsigned long long)(f->ns / f->calls), (unsigned long long)f->bytes);
    }
    lp_os_free(v);
}

/* ---- the view (views.h): Python call slices */
#define PYCALLS(a) ((struct lp_pycalls *)(a)->view[LP_VIEW_PYCALLS])
#define SHAPE(s) (1u << LP_SHAPE_##s)
static int view_create(struct lp_analysis *a) { return (a->view[LP_VIEW_PYCALLS] = lp_pycalls_new(a->r)) ? 0 : -1; }
static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    (void)s;
    return lp_pycalls_event(PYCALLS(a), e, a->counting);
}
static int view_finish(struct lp_analysis *a) { return lp_pycalls_finish(PYCALLS(a)); }
static void view_destroy(struct lp_analysis *a) { lp_pycalls_free(PYCALLS(a)); }

// clang-format off
const struct lp_view lp_view_pycalls = {"python calls", SHAPE(PYCALL), view_create, view_event, NULL, view_finish, view_destroy, view_summary, view_csv, NULL, view_metadata};
// clang-format on
