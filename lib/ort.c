/* ort.c: see ort.h. ORT's profile is a JSON array of Chrome-like events on its own clock
 * (microseconds since the session's profiling began): "model_run" (cat Session) per run, and per
 * node "NAME_kernel_time" (cat Node) with args op_name, provider, input_type_shape,
 * output_type_shape. The k-th model_run of a session is the k-th ort.Run libprof recorded for
 * that session; each node event is placed at the same offset from its run's start as in ORT's
 * profile, clamped inside the run and after the node before it, so node slices nest in the run's
 * slice. Parsed with a small scanner of our own: the file has a fixed shape and the recorder
 * cannot link a JSON library into programs. */
#define _GNU_SOURCE
#include "ort.h"
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

struct run {
    uint64_t session, start, dur;
    uint32_t tid;
    uint64_t kernel; /* node time inside */
};

struct node {
    uint64_t start, dur;                       /* ns, libprof's clock, after alignment */
    uint32_t tid, name, op, provider, in, out; /* strings: offsets into `text` + 1 (0: none) */
};

struct lp_ort {
    const struct lp_reader *r;
    struct run *run;
    size_t nrun, cap_run;
    struct node *node;
    size_t nnode, cap_node;
    char *text; /* names and shapes */
    size_t ntext, cap_text;
    uint64_t profiled_run_ns;
    size_t profiled_runs;
};

struct lp_ort *lp_ort_new(const struct lp_reader *r) {
    struct lp_ort *o = lp_os_calloc(1, sizeof *o);
    if (o) o->r = r;
    return o;
}

void lp_ort_free(struct lp_ort *o) {
    if (!o) return;
    lp_os_free(o->run);
    lp_os_free(o->node);
    lp_os_free(o->text);
    lp_os_free(o);
}

int lp_ort_run(struct lp_ort *o, uint64_t session, uint32_t tid, uint64_t start_ns, uint64_t dur_ns) {
    if (LP_RESERVE(o->run, o->cap_run, o->nrun + 1) != 0) return -1;
    o->run[o->nrun++] = (struct run){session, start_ns, dur_ns, tid, 0};
    return 0;
}

int lp_ort_any(const struct lp_ort *o) { return o && o->nnode > 0; }

static uint32_t keep(struct lp_ort *o, const char *s, size_t n) {
    if (!s) return 0;
    if (LP_RESERVE(o->text, o->cap_text, o->ntext + n + 1) != 0) return 0;
    memcpy(o->text + o->ntext, s, n);
    o->text[o->ntext + n] = '\0';
    uint32_t at = (uint32_t)o->ntext + 1;
    o->ntext += n + 1;
    return at;
}
static const char *str(const struct lp_ort *o, uint32_t at) { return at ? o->text + at - 1 : ""; }

/* ---- the scanner ---------------------------------------------------------------------------- */

struct scan {
    const char *p, *end;
};

static void ws(struct scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t' || *s->p == ',')) s->p++;
}

/* A string's bytes (escapes kept as written: names and shapes have none). */
static int string(struct scan *s, const char **b, size_t *n) {
    ws(s);
    if (s->p >= s->end || *s->p != '"') return -1;
    const char *q = ++s->p;
    while (s->p < s->end && *s->p != '"') s->p += *s->p == '\\' ? 2 : 1;
    if (s->p >= s->end) return -1;
    *b = q;
    *n = (size_t)(s->p - q);
    s->p++;
    return 0;
}

/* Skip one value; its raw text in *b, *n. */
static int value(struct scan *s, const char **b, size_t *n) {
    ws(s);
    if (s->p >= s->end) return -1;
    const char *start = s->p;
    if (*s->p == '"') {
        const char *x;
        size_t k;
        if (string(s, &x, &k) != 0) return -1;
    } else if (*s->p == '{' || *s->p == '[') {
        int depth = 0;
        for (; s->p < s->end; s->p++) {
            if (*s->p == '"') {
                const char *x;
                size_t k;
                if (string(s, &x, &k) != 0) return -1;
                s->p--;
            } else if (*s->p == '{' || *s->p == '[') {
                depth++;
            } else if ((*s->p == '}' || *s->p == ']') && --depth == 0) {
                s->p++;
                break;
            }
        }
    } else {
        while (s->p < s->end && *s->p != ',' && *s->p != '}' && *s->p != ']') s->p++;
    }
    *b = start;
    *n = (size_t)(s->p - start);
    return 0;
}

/* `[{"float":[1,64]},{"float":[64]}]` -> `float[1,64] float[64]` */
static uint32_t shapes(struct lp_ort *o, const char *b, size_t n) {
    char buf[512];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 2 < sizeof buf; i++) {
        char c = b[i];
        if (c == '"' || c == '{' || c == ' ') continue;
        if (c == ':') continue;
        if (c == '}') {
            if (i + 1 < n && b[i + 1] == ',') buf[k++] = ' ', i++;
            continue;
        }
        if ((c == '[' && i == 0) || (c == ']' && i == n - 1)) continue;
        buf[k++] = c;
    }
    return keep(o, buf, k);
}

struct ev {
    const char *cat, *name;
    size_t ncat, nname;
    double ts, dur;
    const char *op, *prov, *in, *out;
    size_t nop, nprov, nin, nout;
};

static int is(const char *b, size_t n, const char *lit) { return n == strlen(lit) && !memcmp(b, lit, n); }

static int object(struct scan *s, struct ev *e) {
    memset(e, 0, sizeof *e);
    ws(s);
    if (s->p >= s->end || *s->p != '{') return -1;
    s->p++;
    for (;;) {
        ws(s);
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            return 0;
        }
        const char *k, *v;
        size_t nk, nv;
        if (string(s, &k, &nk) != 0) return -1;
        ws(s);
        if (s->p >= s->end || *s->p != ':') return -1;
        s->p++;
        ws(s);
        if (is(k, nk, "args") && s->p < s->end && *s->p == '{') {
            struct scan a = {s->p, s->end};
            if (value(s, &v, &nv) != 0) return -1;
            a.end = s->p;
            a.p++;
            for (;;) {
                ws(&a);
                if (a.p >= a.end || *a.p == '}') break;
                const char *ak, *av;
                size_t nak, nav;
                if (string(&a, &ak, &nak) != 0) break;
                ws(&a);
                if (a.p < a.end && *a.p == ':') a.p++;
                ws(&a);
                int quoted = a.p < a.end && *a.p == '"';
                if (value(&a, &av, &nav) != 0) break;
                if (quoted && nav >= 2) av++, nav -= 2;
                if (is(ak, nak, "op_name")) e->op = av, e->nop = nav;
                if (is(ak, nak, "provider")) e->prov = av, e->nprov = nav;
                if (is(ak, nak, "input_type_shape")) e->in = av, e->nin = nav;
                if (is(ak, nak, "output_type_shape")) e->out = av, e->nout = nav;
            }
            continue;
        }
        int quoted = s->p < s->end && *s->p == '"';
        if (value(s, &v, &nv) != 0) return -1;
        if (quoted && nv >= 2) v++, nv -= 2;
        if (is(k, nk, "cat")) e->cat = v, e->ncat = nv;
        if (is(k, nk, "name")) e->name = v, e->nname = nv;
        if (is(k, nk, "ts")) e->ts = strtod(v, NULL);
        if (is(k, nk, "dur")) e->dur = strtod(v, NULL);
    }
}

static int by_start(const void *x, const void *y) {
    const struct run *a = x, *b = y;
    if (a->session != b->session) return a->session < b->session ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* One session's profile `data` against its runs run[0..n). */
static int fold(struct lp_ort *o, const char *data, size_t len, struct run *run, size_t n) {
    struct scan s = {data, data + len};
    ws(&s);
    if (s.p >= s.end || *s.p != '[') return 0;
    s.p++;
    /* first pass: the model runs, in order */
    double *mts = NULL, *mdur = NULL;
    size_t nm = 0, cap1 = 0, cap2 = 0;
    struct ev e;
    struct scan t = s;
    while (object(&t, &e) == 0)
        if (is(e.cat, e.ncat, "Session") && is(e.name, e.nname, "model_run")) {
            if (LP_RESERVE(mts, cap1, nm + 1) != 0 || LP_RESERVE(mdur, cap2, nm + 1) != 0) {
                lp_os_free(mts);
                lp_os_free(mdur);
                return -1;
            }
            mts[nm] = e.ts;
            mdur[nm++] = e.dur;
        }
    /* the k-th model_run is the k-th ort.Run (the last ones, if ORT saw fewer or more) */
    size_t pairs = nm < n ? nm : n, m0 = nm - pairs, r0 = n - pairs;
    for (size_t k = 0; k < pairs; k++) {
        o->profiled_run_ns += run[r0 + k].dur;
        o->profiled_runs++;
    }
    uint64_t prev_end = 0;
    size_t cur = 0;
    while (object(&s, &e) == 0) {
        if (!is(e.cat, e.ncat, "Node") || !pairs) continue;
        while (cur + 1 < pairs && e.ts >= mts[m0 + cur + 1]) cur++;
        double m = mts[m0 + cur];
        if (e.ts < m || e.ts > m + mdur[m0 + cur]) continue; /* outside every run (session start) */
        struct run *r = &run[r0 + cur];
        uint64_t start = r->start + (uint64_t)((e.ts - m) * 1000.0), dur = (uint64_t)(e.dur * 1000.0);
        if (start < prev_end && prev_end <= r->start + r->dur) start = prev_end;
        if (start > r->start + r->dur) start = r->start + r->dur;
        if (start + dur > r->start + r->dur) dur = r->start + r->dur - start;
        prev_end = start + dur;
        size_t nn = e.nname;
        if (nn > 12 && !memcmp(e.name + nn - 12, "_kernel_time", 12)) nn -= 12;
        if (LP_RESERVE(o->node, o->cap_node, o->nnode + 1) != 0) {
            lp_os_free(mts);
            lp_os_free(mdur);
            return -1;
        }
        struct node *d = &o->node[o->nnode++];
        *d = (struct node){start,
                           dur,
                           r->tid,
                           keep(o, e.name, nn),
                           keep(o, e.op, e.nop),
                           keep(o, e.prov, e.nprov),
                           e.in ? shapes(o, e.in, e.nin) : 0,
                           e.out ? shapes(o, e.out, e.nout) : 0};
        r->kernel += dur;
    }
    lp_os_free(mts);
    lp_os_free(mdur);
    return 0;
}

int lp_ort_finish(struct lp_ort *o) {
    const struct lp_reader *r = o->r;
    if (!r->nort_profiles || !o->nrun) return 0;
    lp_sort(o->run, o->nrun, sizeof *o->run, by_start);
    for (uint32_t i = 0; i < r->nort_profiles; i++) {
        uint64_t session = r->ort_profiles[i].session;
        size_t a = 0;
        while (a < o->nrun && o->run[a].session != session) a++;
        size_t b = a;
        while (b < o->nrun && o->run[b].session == session) b++;
        if (fold(o, r->ort_profiles[i].data, r->ort_profiles[i].len, o->run + a, b - a) != 0) return -1;
    }
    return 0;
}

size_t lp_ort_count(const struct lp_ort *o) { return o ? o->nnode : 0; }

void lp_ort_node(const struct lp_ort *o, size_t i, const char **name, uint32_t *tid, uint64_t *start, uint64_t *dur) {
    const struct node *d = &o->node[i];
    *name = str(o, d->name);
    *tid = d->tid;
    *start = d->start;
    *dur = d->dur;
}

static void view_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    const struct lp_ort *o = a->view[LP_VIEW_ORT];
    if (!lp_ort_any(o)) return;
    for (size_t i = 0; i < o->nnode; i++) {
        const struct node *d = &o->node[i];
        const char *name = str(o, d->name);
        lp_json_event(j, "X", pid, d->tid, "ort.node", name, strlen(name), (int64_t)d->start);
        lp_json_dur(j, d->dur);
        lp_json_args(j);
        const char *keys[] = {"op", "provider", "inputs", "outputs"};
        uint32_t vals[] = {d->op, d->provider, d->in, d->out};
        for (int k = 0; k < 4; k++) {
            if (!vals[k]) continue;
            lp_json_key(j, keys[k]);
            lp_json_str(j, str(o, vals[k]), strlen(str(o, vals[k])));
        }
        lp_json_args_end(j);
        lp_json_event_end(j);
    }
}

/* ---- tables --------------------------------------------------------------------------------- */

struct agg {
    const char *key, *op;
    uint64_t count, ns;
};

static int by_ns(const void *x, const void *y) {
    const struct agg *a = x, *b = y;
    return a->ns < b->ns ? 1 : a->ns > b->ns ? -1 : strcmp(a->key, b->key);
}

/* Node time summed by op type (by_op) or by node name; *n rows, heaviest first. */
static struct agg *aggregate(const struct lp_ort *o, int by_op, size_t *n) {
    struct agg *v = lp_os_calloc(o->nnode + 1, sizeof *v);
    *n = 0;
    if (!v) return NULL;
    for (size_t i = 0; i < o->nnode; i++) {
        const char *key = str(o, by_op ? o->node[i].op : o->node[i].name);
        size_t k = 0;
        while (k < *n && strcmp(v[k].key, key)) k++; /* few distinct keys: a model's nodes */
        if (k == *n) v[(*n)++] = (struct agg){key, str(o, o->node[i].op), 0, 0};
        v[k].count++;
        v[k].ns += o->node[i].dur;
    }
    lp_sort(v, *n, sizeof *v, by_ns);
    return v;
}

static uint64_t kernel_ns(const struct lp_ort *o) {
    uint64_t k = 0;
    for (size_t i = 0; i < o->nnode; i++) k += o->node[i].dur;
    return k;
}

static void view_summary(const struct lp_analysis *a, struct lp_out *out, unsigned top) {
    const struct lp_ort *o = a->view[LP_VIEW_ORT];
    if (!lp_ort_any(o)) return;
    char b1[32], b2[32], b3[32];
    uint64_t run_ns = o->profiled_run_ns, kern = kernel_ns(o);
    lp_fmt_ns(b1, sizeof b1, (int64_t)run_ns);
    lp_fmt_ns(b2, sizeof b2, (int64_t)kern);
    lp_fmt_ns(b3, sizeof b3,
              (int64_t)(run_ns > kern ? (run_ns - kern) / (o->profiled_runs ? o->profiled_runs : 1) : 0));
    lp_out_fmt(out,
               "  ONNX Runtime: %zu runs with node profiles, %s in runs, %s in node kernels; framework tax %.1f%% "
               "(%s a run)\n",
               o->profiled_runs, b1, b2,
               run_ns ? 100.0 * (double)(run_ns - (kern < run_ns ? kern : run_ns)) / (double)run_ns : 0.0, b3);
    for (int by_op = 1; by_op >= 0; by_op--) {
        size_t n;
        struct agg *v = aggregate(o, by_op, &n);
        lp_out_fmt(out, "  %s:\n  %10s %10s %10s %7s  %s\n", by_op ? "ONNX Runtime by op type" : "ONNX Runtime by node",
                   "count", "total", "mean", "share", by_op ? "op" : "node (op)");
        for (size_t i = 0; v && i < n && i < lp_top(top, 20); i++) {
            lp_fmt_ns(b1, sizeof b1, (int64_t)v[i].ns);
            lp_fmt_ns(b2, sizeof b2, (int64_t)(v[i].ns / v[i].count));
            lp_out_fmt(out, "  %10llu %10s %10s %6.1f%%  %s", (unsigned long long)v[i].count, b1, b2,
                       run_ns ? 100.0 * (double)v[i].ns / (double)run_ns : 0.0, v[i].key);
            if (!by_op) lp_out_fmt(out, " (%s)", v[i].op);
            lp_out_c(out, '\n');
        }
        lp_os_free(v);
    }
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    const struct lp_ort *o = a->view[LP_VIEW_ORT];
    if (!lp_ort_any(o)) return;
    lp_json_kobject(j, "ort");
    lp_json_kus(j, "profiled_runs", LP_U(o->profiled_runs), "run_ns", LP_U(o->profiled_run_ns), "kernel_ns",
                LP_U(kernel_ns(o)), "nodes", LP_U(o->nnode), NULL);
    for (int by_op = 1; by_op >= 0; by_op--) {
        size_t n;
        struct agg *v = aggregate(o, by_op, &n);
        lp_json_karray(j, by_op ? "by_op" : "by_node");
        for (size_t i = 0; v && i < n; i++) {
            lp_json_object(j);
            lp_json_ks(j, "name", v[i].key, strlen(v[i].key));
            if (!by_op) lp_json_ks(j, "op", v[i].op, strlen(v[i].op));
            lp_json_kus(j, "count", LP_U(v[i].count), "total_ns", LP_U(v[i].ns), NULL);
            lp_json_object_end(j);
        }
        lp_json_array_end(j);
        lp_os_free(v);
    }
    lp_json_object_end(j);
}

/* ---- the view (views.h): ONNX Runtime's node profiles, placed inside their runs */
#define ORT(a) ((struct lp_ort *)(a)->view[LP_VIEW_ORT])
#define SHAPE(s) (1u << LP_SHAPE_##s)
static int view_create(struct lp_analysis *a) { return (a->view[LP_VIEW_ORT] = lp_ort_new(a->r)) ? 0 : -1; }
static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    const struct lp_call_rec *rec = s->call;
    if (rec->call != LP_CALL_ORT_RUN || !e->timed || rec->nargs < 1) return 0;
    return lp_ort_run(ORT(a), rec->a[0], e->tid, e->start_ns, e->dur_ns);
}
static int view_finish(struct lp_analysis *a) { return lp_ort_finish(ORT(a)); }
static void view_destroy(struct lp_analysis *a) { lp_ort_free(ORT(a)); }

// clang-format off
const struct lp_view lp_view_ort = {"ort", SHAPE(CALL), view_create, view_event, NULL, view_finish, view_destroy, view_summary, NULL, view_chrome, view_metadata};
// clang-format on
