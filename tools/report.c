/* report.c: libprof-report's analyses over slices — see report.h.
 *
 * Everything starts from one index: the slices of each thread sorted by start (longest first on
 * ties), walked with a stack to give every slice its parent. From that come self time (a slice's
 * duration minus its direct children's), busy time (slices at the top of a thread, a libprof
 * "thread" life not counting as work), kernel time (outermost kernel slices) and the iteration
 * windows. Percentiles are exact: each name's durations are sorted. */
#define _GNU_SOURCE
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/describe.h"
#include "lib/fmt.h"
#include "lib/gil.h"
#include "lib/map.h"
#include "lib/vec.h"

/* Sums of durations saturate rather than overflow (a forged trace can hold huge ones). */
static inline int64_t sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
#define ADD(x, v) ((x) = sat((x), (v)))

/* ---- the index ---------------------------------------------------------------------------- */

struct an {
    const struct lp_slices *c;
    const struct rp_opts *o;
    uint32_t *order; /* slices by thread, start, longest first */
    int64_t *parent; /* index of the enclosing slice, -1 at the top */
    int64_t *self;
    uint8_t *life;   /* a libprof thread life: not work */
    uint8_t *kernel; /* a kernel entry point */
    uint8_t *outer_kernel;
    uint8_t *block; /* enum lp_block: a GIL wait, a blocking call (lib/gil.h) */
    size_t n;
    int gil;     /* the trace has GIL waits */
    int has_cpu; /* the slices carry the CPU sampled while they ran */
};

static const struct lp_slices *sort_c;
static int cmp_order(const void *x, const void *y) {
    const struct lp_slice *a = &sort_c->slices[*(const uint32_t *)x], *b = &sort_c->slices[*(const uint32_t *)y];
    if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
    if (a->ts_ns != b->ts_ns) return a->ts_ns < b->ts_ns ? -1 : 1;
    if (a->dur_ns != b->dur_ns) return a->dur_ns > b->dur_ns ? -1 : 1;
    return *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
}

static int cmp_ts(const void *x, const void *y) {
    const struct lp_slice *a = &sort_c->slices[*(const uint32_t *)x], *b = &sort_c->slices[*(const uint32_t *)y];
    return a->ts_ns < b->ts_ns ? -1 : a->ts_ns > b->ts_ns;
}

/* A slice of this category is a compute kernel: libprof's kernel families (the family table),
 * the kernel categories of other profilers' traces (PyTorch, ONNX Runtime, CUDA), and ONNX Runtime's
 * nodes libprof folded in (ort.node: run time outside them is ORT's framework tax). */
static int is_kernel_cat(const char *cat) {
    int f = lp_family_find(cat, strlen(cat));
    if (f >= 0) return lp_family_kernel[f];
    static const char *const foreign[] = {"kernel", "Kernel", "gpu_op", "cuda_runtime", "ort.node"};
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        if (!strcmp(cat, foreign[i])) return 1;
    return 0;
}

/* A CUDA call that waits for the GPU (a device, stream or event synchronisation, a synchronous
 * copy): its time is the GPU's work, not the framework's. */
static int is_gpu_wait(const char *cat, const char *name) {
    if (strcmp(cat, "cuda")) return 0;
    size_t n = strlen(name);
    return !strcmp(name, "cudaMemcpy") || (n > 11 && !strcmp(name + n - 11, "Synchronize"));
}

static void an_free(struct an *a) {
    free(a->order);
    free(a->parent);
    free(a->self);
    free(a->life);
    free(a->kernel);
    free(a->outer_kernel);
    free(a->block);
}

static int an_build(struct an *a, const struct lp_slices *c, const struct rp_opts *o) {
    memset(a, 0, sizeof *a);
    a->c = c;
    a->o = o;
    a->n = c->nslices;
    size_t n = a->n ? a->n : 1;
    a->order = malloc(n * sizeof *a->order);
    a->parent = malloc(n * sizeof *a->parent);
    a->self = malloc(n * sizeof *a->self);
    a->life = calloc(n, 1);
    a->kernel = calloc(n, 1);
    a->outer_kernel = calloc(n, 1);
    a->block = calloc(n, 1);
    int64_t *stack = malloc(n * sizeof *stack);
    if (!a->order || !a->parent || !a->self || !a->life || !a->kernel || !a->outer_kernel || !a->block || !stack) {
        free(stack);
        an_free(a);
        return -1;
    }
    a->has_cpu = c->cpu.period_ns != 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct lp_slice *s = &c->slices[i];
        if (s->cpu_ns >= 0) a->has_cpu = 1;
        a->order[i] = (uint32_t)i;
        a->self[i] = s->dur_ns;
        const char *cat = c->names[s->cat], *name = c->names[s->name];
        a->life[i] = !strcmp(cat, "thread") && !strcmp(name, "thread");
        a->block[i] = (uint8_t)lp_block_kind(cat, name);
        if (a->block[i] == LP_BLOCK_GIL) a->gil = 1;
        a->kernel[i] = is_kernel_cat(cat) || is_gpu_wait(cat, name) ||
                       (o->have_kernels && regexec(&o->kernels, name, 0, NULL, 0) == 0);
    }
    sort_c = c;
    lp_sort(a->order, a->n, sizeof *a->order, cmp_order);
    size_t depth = 0;
    for (size_t k = 0; k < a->n; k++) {
        uint32_t i = a->order[k];
        const struct lp_slice *s = &c->slices[i];
        if (k > 0) {
            const struct lp_slice *prev = &c->slices[a->order[k - 1]];
            if (prev->pid != s->pid || prev->tid != s->tid) depth = 0; /* another thread */
        }
        while (depth > 0) {
            const struct lp_slice *top = &c->slices[stack[depth - 1]];
            if (s->ts_ns < top->ts_ns + top->dur_ns) break;
            depth--;
        }
        a->parent[i] = depth ? stack[depth - 1] : -1;
        if (depth) a->self[stack[depth - 1]] = sat(a->self[stack[depth - 1]], -s->dur_ns); /* overlaps: clipped below */
        int outer = a->kernel[i];
        for (size_t d = 0; d < depth && outer; d++)
            if (a->kernel[stack[d]]) outer = 0;
        a->outer_kernel[i] = (uint8_t)outer;
        stack[depth++] = i;
    }
    for (size_t i = 0; i < a->n; i++)
        if (a->self[i] < 0) a->self[i] = 0;
    free(stack);
    return 0;
}

/* Work at the top of its thread: no parent, or only a thread life above. */
static int top_work(const struct an *a, size_t i) {
    if (a->life[i]) return 0;
    int64_t p = a->parent[i];
    return p < 0 || a->life[p];
}

/* ---- formatting --------------------------------------------------------------------------- */

static const char *unit_name(enum rp_units u) {
    return u == RP_NS ? "ns" : u == RP_US ? "us" : u == RP_MS ? "ms" : u == RP_S ? "s" : "";
}

static void fmt_dur(char *buf, size_t len, int64_t ns, enum rp_units u) {
    switch (u) {
    case RP_NS: snprintf(buf, len, "%lld", (long long)ns); return;
    case RP_US: snprintf(buf, len, "%.3f", (double)ns / 1e3); return;
    case RP_MS: snprintf(buf, len, "%.3f", (double)ns / 1e6); return;
    case RP_S: snprintf(buf, len, "%.6f", (double)ns / 1e9); return;
    default: break;
    }
    lp_fmt_ns(buf, len, ns);
}

static int shown(const struct rp_opts *o, const char *name) {
    return !o->have_filter || regexec(&o->filter, name, 0, NULL, 0) == 0;
}

/* ---- per-name statistics ------------------------------------------------------------------ */

struct row {
    uint32_t name;
    size_t count;
    int64_t total, self, min, max, p10, p50, p90, p95, p99, p999;
    int64_t cpu, outer; /* CPU sampled in, and wall time of, its outermost slices (not inside one of the same name) */
};

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

static int64_t pct(const int64_t *d, size_t n, double p) {
    size_t rank = (size_t)ceil(p * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return d[rank - 1];
}

/* One row per name (indexed by name id; rows with count 0 unused). */
static struct row *name_rows(const struct an *a) {
    const struct lp_slices *c = a->c;
    struct row *rows = calloc(c->nnames ? c->nnames : 1, sizeof *rows);
    size_t *start = calloc(c->nnames + 1, sizeof *start);
    int64_t *d = malloc((a->n ? a->n : 1) * sizeof *d);
    if (!rows || !start || !d) {
        free(rows);
        free(start);
        free(d);
        return NULL;
    }
    for (size_t i = 0; i < a->n; i++) start[c->slices[i].name + 1]++;
    for (size_t k = 1; k <= c->nnames; k++) start[k] += start[k - 1];
    size_t *fill = calloc(c->nnames ? c->nnames : 1, sizeof *fill);
    if (!fill) {
        free(rows);
        free(start);
        free(d);
        return NULL;
    }
    for (size_t i = 0; i < a->n; i++) {
        const struct lp_slice *s = &c->slices[i];
        struct row *r = &rows[s->name];
        d[start[s->name] + fill[s->name]++] = s->dur_ns;
        r->count++;
        ADD(r->total, s->dur_ns);
        ADD(r->self, a->self[i]);
        int inner = 0; /* a recursive call's time is its outermost one's */
        for (int64_t q = a->parent[i]; q >= 0 && !inner; q = a->parent[q]) inner = c->slices[q].name == s->name;
        if (!inner) {
            ADD(r->outer, s->dur_ns);
            if (s->cpu_ns > 0) ADD(r->cpu, s->cpu_ns);
        }
    }
    for (size_t k = 0; k < c->nnames; k++) {
        struct row *r = &rows[k];
        r->name = (uint32_t)k;
        if (!r->count) continue;
        int64_t *v = d + start[k];
        lp_sort(v, r->count, sizeof *v, cmp_i64);
        r->min = v[0];
        r->max = v[r->count - 1];
        r->p10 = pct(v, r->count, 0.10);
        r->p50 = pct(v, r->count, 0.50);
        r->p90 = pct(v, r->count, 0.90);
        r->p95 = pct(v, r->count, 0.95);
        r->p99 = pct(v, r->count, 0.99);
        r->p999 = pct(v, r->count, 0.999);
    }
    free(fill);
    free(start);
    free(d);
    return rows;
}

static enum rp_sort sort_by;
static const struct lp_slices *sort_names;
static int64_t row_key(const struct row *r) {
    switch (sort_by) {
    case RP_SELF: return r->self;
    case RP_COUNT: return (int64_t)r->count;
    case RP_MEAN: return r->count ? r->total / (int64_t)r->count : 0;
    case RP_P50: return r->p50;
    case RP_P99: return r->p99;
    case RP_MAX: return r->max;
    default: return r->total;
    }
}
static int cmp_row(const void *x, const void *y) {
    const struct row *a = x, *b = y;
    if (sort_by == RP_NAME) return strcmp(sort_names->names[a->name], sort_names->names[b->name]);
    int64_t ka = row_key(a), kb = row_key(b);
    return ka > kb ? -1 : ka < kb ? 1 : strcmp(sort_names->names[a->name], sort_names->names[b->name]);
}

/* Rows to show, sorted, filtered, cut to --top; their number in *n. Caller frees. */
static struct row *ranked_rows(const struct an *a, size_t *n) {
    struct row *rows = name_rows(a);
    if (!rows) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < a->c->nnames; i++)
        if (rows[i].count && shown(a->o, a->c->names[rows[i].name])) rows[k++] = rows[i];
    sort_by = a->o->sort;
    sort_names = a->c;
    lp_sort(rows, k, sizeof *rows, cmp_row);
    if (a->o->top > 0 && (size_t)a->o->top < k) k = (size_t)a->o->top;
    *n = k;
    return rows;
}

static int name_width(const struct lp_slices *c, const struct row *rows, size_t n) {
    size_t w = 4;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(c->names[rows[i].name]);
        if (l > w) w = l;
    }
    return (int)(w > 60 ? 60 : w);
}

static void print_table(FILE *f, const struct an *a) {
    size_t n;
    struct row *rows = ranked_rows(a, &n);
    if (!rows) return;
    const struct rp_opts *o = a->o;
    int w = name_width(a->c, rows, n);
    static const char *const cols[] = {"total", "self", "mean", "min",   "p10", "p50",
                                       "p90",   "p95",  "p99",  "p99.9", "max"};
    fprintf(f, "%-*s %9s", w, "name", "count");
    for (size_t k = 0; k < sizeof cols / sizeof *cols; k++) fprintf(f, " %10s", cols[k]);
    if (a->has_cpu) fprintf(f, " %10s %6s", "cpu", "cpu%");
    if (o->units != RP_AUTO) fprintf(f, "   (%s)", unit_name(o->units));
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        int64_t v[] = {r->total, r->self, r->total / (int64_t)r->count, r->min, r->p10, r->p50, r->p90, r->p95, r->p99,
                       r->p999,  r->max};
        fprintf(f, "%-*.*s %9zu", w, w, a->c->names[r->name], r->count);
        for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
            char b[32];
            fmt_dur(b, sizeof b, v[k], o->units);
            fprintf(f, " %10s", b);
        }
        if (a->has_cpu) { /* CPU beside wall time: a call that waited shows little */
            char b[32];
            fmt_dur(b, sizeof b, r->cpu, o->units);
            fprintf(f, " %10s %5.0f%%", b, r->outer > 0 ? 100.0 * (double)r->cpu / (double)r->outer : 0.0);
        }
        fputc('\n', f);
    }
    if (a->has_cpu)
        fprintf(f, "(cpu: CPU sampled on the slice's thread while it ran, outermost slices of each name; cpu%%: of "
                   "their wall time)\n");
    free(rows);
}

/* ---- threads: busy time and framework tax ------------------------------------------------- */

struct thr {
    int64_t pid, tid, first, last, busy, kernel, life;
    int64_t cpu, cpu_kernel;  /* sampled: on the thread, in its outermost kernel slices (-1: not sampled) */
    int sliced;               /* it has slices (else only samples: no wall time) */
    struct lp_gil_thread gil; /* GIL wait and held, off-CPU (lib/gil.h) */
};

/* GIL held, per thread: the trace's "GIL holder" track (lib/gil.h), each slice named by its
 * holder, the thread id last. */
static void held_from_track(const struct an *a, struct thr *t, size_t k) {
    for (size_t j = 0; j < a->c->nslices; j++) {
        const struct lp_slice *s = &a->c->slices[j];
        if (s->tid != LP_GIL_TRACK) continue;
        const char *name = a->c->names[s->name], *sp = strrchr(name, ' ');
        char *end;
        long long tid = sp ? strtoll(sp + 1, &end, 10) : -1;
        if (!sp || *end || tid <= 0) continue;
        for (size_t i = 0; i < k; i++)
            if (t[i].pid == s->pid && t[i].tid == tid) ADD(t[i].gil.held_ns, s->dur_ns);
    }
}

/* The threads: those with slices, then those only sampled (a thread running Python, or the
 * program's own loops, may have no traced call at all). */
static struct thr *threads(const struct an *a, size_t *n) {
    struct thr *t = NULL;
    size_t k = 0, cap = 0;
    const struct lp_cpu *cpu = &a->c->cpu;
    for (size_t j = 0; j < a->n; j++) {
        const struct lp_slice *s = &a->c->slices[a->order[j]];
        if (s->tid == LP_GIL_TRACK) continue; /* the GIL's holder: not a thread (held_from_track) */
        if (!k || t[k - 1].pid != s->pid || t[k - 1].tid != s->tid) {
            if (LP_RESERVE(t, cap, k + 1) != 0) {
                free(t);
                return NULL;
            }
            t[k++] = (struct thr){
                s->pid, s->tid, s->ts_ns, s->ts_ns + s->dur_ns, 0, 0, 0, a->has_cpu ? 0 : -1, a->has_cpu ? 0 : -1,
                1,      {0}};
            lp_gil_thread_init(&t[k - 1].gil);
        }
        struct thr *x = &t[k - 1];
        uint32_t i = a->order[j];
        lp_gil_thread_add(&x->gil, NULL, 0, 0, (enum lp_block)a->block[i], s->ts_ns, s->dur_ns, 0);
        if (s->ts_ns + s->dur_ns > x->last) x->last = s->ts_ns + s->dur_ns;
        if (top_work(a, i)) ADD(x->busy, s->dur_ns);
        if (a->outer_kernel[i]) {
            ADD(x->kernel, s->dur_ns);
            if (s->cpu_ns > 0) ADD(x->cpu_kernel, s->cpu_ns);
        }
        if (a->life[i]) x->life = 1;
    }
    held_from_track(a, t, k);
    for (size_t m = 0; m < cpu->nthreads; m++) { /* the samples' totals */
        const struct lp_cpu_thread *ct = &cpu->threads[m];
        size_t j = 0;
        while (j < k && !(t[j].tid == ct->tid && (t[j].pid == ct->pid || !ct->pid))) j++;
        if (j == k) {
            if (LP_RESERVE(t, cap, k + 1) != 0) {
                free(t);
                return NULL;
            }
            t[k++] = (struct thr){ct->pid, ct->tid, 0, 0, 0, 0, 0, 0, 0, 0, {0}};
            lp_gil_thread_init(&t[k - 1].gil);
        }
        ADD(t[j].cpu, (int64_t)(ct->samples * cpu->period_ns));
    }
    *n = k;
    return t;
}

/* --top N: the N threads that used the most (sampled CPU, else busy time) come first, alone. */
static int by_use_desc(const void *x, const void *y) {
    const struct thr *a = x, *b = y;
    int64_t ua = a->cpu > 0 ? a->cpu : a->busy, ub = b->cpu > 0 ? b->cpu : b->busy;
    return ua > ub ? -1 : ua < ub;
}

static void print_threads(FILE *f, const struct an *a) {
    size_t n;
    struct thr *t = threads(a, &n);
    if (!t || !n) {
        free(t);
        return;
    }
    size_t shown = a->o->top > 0 && (size_t)a->o->top < n ? (size_t)a->o->top : n;
    if (shown < n) lp_sort(t, n, sizeof *t, by_use_desc);
    if (a->has_cpu)
        fprintf(f, "\nper thread: wall = first to last slice; busy = in traced calls (outermost); kernel = in BLAS, "
                   "oneDNN,\nOpenMP regions, waits on the GPU or --kernels; cpu = sampled user CPU time; framework tax "
                   "= share of it "
                   "outside kernels\n");
    else
        fprintf(f, "\nper thread: wall = first to last slice; busy = in traced calls (outermost); kernel = in BLAS, "
                   "oneDNN,\nOpenMP regions, waits on the GPU or --kernels; framework tax = share of the wall time "
                   "outside kernels\n");
    if (a->gil)
        fprintf(f, "Python threads: gil wait = waiting for the GIL; gil held = the trace's GIL holder track (from a "
                   "wait that took\nthe GIL to the thread's next wait or blocking call, or another thread's taking "
                   "it); off-cpu = blocked in\ntraced calls (locks, sleeps, I/O)\n");
    fprintf(f, "%8s %10s %11s %11s %7s %11s %7s", "pid", "tid", "wall", "busy", "busy%", "kernel", "kernel%");
    if (a->has_cpu) fprintf(f, " %11s %11s", "cpu", "cpu kernel");
    if (a->gil) fprintf(f, " %11s %11s %11s", "gil wait", "gil held", "off-cpu");
    fprintf(f, " %9s\n", "tax%");
    int64_t wall = 0, busy = 0, kern = 0, cpu = 0, ckern = 0;
    struct lp_gil_thread gil; /* the overall line's */
    lp_gil_thread_init(&gil);
    for (size_t i = 0; i <= n; i++) {
        /* the last line: all threads together (a thread that only waits for work counts too) */
        int all = i == n;
        if (!all && i >= shown) { /* beyond --top: counted in the overall line only */
            ADD(wall, t[i].last - t[i].first);
            ADD(busy, t[i].busy);
            ADD(kern, t[i].kernel);
            if (t[i].cpu > 0) ADD(cpu, t[i].cpu);
            if (t[i].cpu_kernel > 0) ADD(ckern, t[i].cpu_kernel);
            ADD(gil.wait_ns, t[i].gil.wait_ns);
            ADD(gil.held_ns, t[i].gil.held_ns);
            ADD(gil.off_ns, t[i].gil.off_ns);
            if (i + 1 == n) fprintf(f, "%19s (%zu more threads, in the overall line)\n", "...", n - shown);
            continue;
        }
        int64_t w_ = all ? wall : t[i].last - t[i].first, b_ = all ? busy : t[i].busy, k_ = all ? kern : t[i].kernel;
        int64_t c_ = all ? cpu : t[i].cpu, ck_ = all ? ckern : t[i].cpu_kernel;
        if (!all) {
            ADD(wall, w_);
            ADD(busy, b_);
            ADD(kern, k_);
            if (c_ > 0) ADD(cpu, c_);
            if (ck_ > 0) ADD(ckern, ck_);
            ADD(gil.wait_ns, t[i].gil.wait_ns);
            ADD(gil.held_ns, t[i].gil.held_ns);
            ADD(gil.off_ns, t[i].gil.off_ns);
        }
        char w[32], b[32], k[32];
        fmt_dur(w, sizeof w, w_, RP_AUTO);
        fmt_dur(b, sizeof b, b_, RP_AUTO);
        fmt_dur(k, sizeof k, k_, RP_AUTO);
        double bp = w_ ? 100.0 * (double)b_ / (double)w_ : 0, kp = w_ ? 100.0 * (double)k_ / (double)w_ : 0;
        if (all)
            fprintf(f, "%19s", "overall");
        else
            fprintf(f, "%8lld %10lld", (long long)t[i].pid, (long long)t[i].tid);
        if (!all && !t[i].sliced)
            fprintf(f, " %11s %11s %7s %11s %7s", "-", "-", "-", "-", "-");
        else
            fprintf(f, " %11s %11s %6.1f%% %11s %6.1f%%", w, b, bp, k, kp);
        double tax = 100.0 - kp;
        if (a->has_cpu) {
            char c[32], ck[32];
            fmt_dur(c, sizeof c, c_, RP_AUTO);
            fmt_dur(ck, sizeof ck, ck_, RP_AUTO);
            fprintf(f, " %11s %11s", c, ck);
            tax = c_ > 0 ? 100.0 * (double)(c_ - (ck_ < c_ ? ck_ : c_)) / (double)c_ : 0;
        }
        if (a->gil) {
            const struct lp_gil_thread *g = all ? &gil : &t[i].gil;
            char gw[32], gh[32], off[32];
            fmt_dur(gw, sizeof gw, g->wait_ns, RP_AUTO);
            fmt_dur(gh, sizeof gh, g->held_ns, RP_AUTO);
            fmt_dur(off, sizeof off, g->off_ns, RP_AUTO);
            fprintf(f, " %11s %11s %11s", gw, gh, off);
        }
        if (a->has_cpu && c_ <= 0)
            fprintf(f, " %9s\n", "-");
        else
            fprintf(f, " %8.1f%%\n", tax);
    }
    free(t);
}

/* ---- what-if -------------------------------------------------------------------------------
 * Model: the matching slices (outermost matches only) run RATIO x faster; each thread's timeline
 * shrinks by what its own matching slices save, nothing else moves. The run's end-to-end time
 * becomes the latest thread end after shrinking. Cross-thread waits are not modelled: a thread
 * waiting on a faster one is not sped up unless its wait is itself a matching slice. */

static int whatif_match(const struct rp_opts *o, const char *name, double *ratio) {
    for (int k = 0; k < o->nwhatif; k++)
        if (regexec(&o->whatif_re[k], name, 0, NULL, 0) == 0) {
            *ratio = o->whatif_ratio[k];
            return 1;
        }
    return 0;
}

/* Time saved by slice i (0 when it is not an outermost match). */
static int64_t saved_by(const struct an *a, size_t i) {
    double ratio;
    const struct lp_slice *s = &a->c->slices[i];
    if (a->life[i] || !whatif_match(a->o, a->c->names[s->name], &ratio)) return 0;
    for (int64_t p = a->parent[i]; p >= 0; p = a->parent[p]) {
        double r2;
        if (whatif_match(a->o, a->c->names[a->c->slices[p].name], &r2)) return 0;
    }
    return (int64_t)((double)s->dur_ns * (1.0 - 1.0 / ratio));
}

static void print_whatif(FILE *f, const struct an *a) {
    if (!a->o->nwhatif || !a->n) return;
    size_t n;
    struct thr *t = threads(a, &n);
    if (!t) return;
    int64_t *saved = calloc(n ? n : 1, sizeof *saved);
    int64_t start = INT64_MAX, end = INT64_MIN, matched = 0, matched_time = 0;
    size_t ti = 0;
    /* a thread's end here is its last work, not its life slice: a pool thread alive until the
     * process exits does not hold the estimate back */
    for (size_t k = 0; k < n; k++) t[k].last = INT64_MIN;
    for (size_t j = 0; j < a->n; j++) {
        uint32_t i = a->order[j];
        const struct lp_slice *s = &a->c->slices[i];
        while (ti < n && (t[ti].pid != s->pid || t[ti].tid != s->tid)) ti++;
        if (a->life[i]) continue;
        if (ti < n && s->ts_ns + s->dur_ns > t[ti].last) t[ti].last = s->ts_ns + s->dur_ns;
        if (s->ts_ns < start) start = s->ts_ns;
        if (s->ts_ns + s->dur_ns > end) end = s->ts_ns + s->dur_ns;
        int64_t sv = saved_by(a, i);
        if (sv) {
            matched++;
            ADD(matched_time, s->dur_ns);
            if (ti < n) ADD(saved[ti], sv);
        }
    }
    int64_t after_end = INT64_MIN;
    for (size_t k = 0; k < n; k++)
        if (t[k].last != INT64_MIN && t[k].last - saved[k] > after_end) after_end = t[k].last - saved[k];
    if (after_end == INT64_MIN) after_end = end;
    char b[32], c2[32], m[32];
    fmt_dur(b, sizeof b, end - start, RP_AUTO);
    fmt_dur(c2, sizeof c2, after_end - start, RP_AUTO);
    fmt_dur(m, sizeof m, matched_time, RP_AUTO);
    fprintf(f, "\nwhat-if");
    for (int k = 0; k < a->o->nwhatif; k++) fprintf(f, " '%s'", a->o->whatif_text[k]);
    fprintf(f, ": %lld matching slices, %s\n  total latency %s -> estimated %s (%.1f%% less)\n", (long long)matched, m,
            b, c2, end > start ? 100.0 * (double)((end - start) - (after_end - start)) / (double)(end - start) : 0);
    free(saved);
    free(t);
}

/* ---- iterations ---------------------------------------------------------------------------- */

struct iter {
    size_t slice;
    int64_t ts, end, latency, kernel, saved;
    int64_t cpu, cpu_kernel; /* sampled on its thread: in it, in its outermost kernel slices */
    int64_t cpu_others;      /* sampled on the process's other threads while it ran (a run's pool); -1 unknown */
};

static int cmp_iter(const void *x, const void *y) {
    const struct iter *a = x, *b = y;
    return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* The iterations (--iterations): the outermost slices whose name matches, in time order; their
 * number in *n (NULL and 0 when none, or out of memory: *oom set). */
static struct iter *find_iterations(const struct an *a, size_t *n, int *oom) {
    const struct rp_opts *o = a->o;
    const struct lp_slices *c = a->c;
    struct iter *it = NULL;
    size_t ni = 0, cap = 0;
    *oom = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (a->life[i] || regexec(&o->iter_re, c->names[c->slices[i].name], 0, NULL, 0) != 0) continue;
        int nested = 0; /* an iteration inside an iteration: count the outer one */
        for (int64_t p = a->parent[i]; p >= 0 && !nested; p = a->parent[p])
            nested = regexec(&o->iter_re, c->names[c->slices[p].name], 0, NULL, 0) == 0;
        if (nested) continue;
        if (LP_RESERVE(it, cap, ni + 1) != 0) {
            free(it);
            *oom = 1;
            *n = 0;
            return NULL;
        }
        it[ni++] = (struct iter){i,
                                 c->slices[i].ts_ns,
                                 c->slices[i].ts_ns + c->slices[i].dur_ns,
                                 c->slices[i].dur_ns,
                                 0,
                                 0,
                                 c->slices[i].cpu_ns > 0 ? c->slices[i].cpu_ns : 0,
                                 0,
                                 c->slices[i].cpu_others_ns};
    }
    if (ni) lp_sort(it, ni, sizeof *it, cmp_iter);
    *n = ni;
    return it;
}

static void print_iterations(FILE *f, const struct an *a) {
    const struct rp_opts *o = a->o;
    const struct lp_slices *c = a->c;
    size_t ni;
    int oom;
    struct iter *it = find_iterations(a, &ni, &oom);
    if (oom) return;
    fprintf(f, "\niterations /%s/: %zu", o->iterations, ni);
    if (!ni) {
        fprintf(f, " (no slice matches)\n");
        free(it);
        return;
    }
    size_t skip = (size_t)o->skip < ni ? (size_t)o->skip : ni;
    fprintf(f, ", first %zu left out of the statistics (--skip)\n", skip);
    /* per iteration: ops inside the window (any thread), kernel time and what-if savings on the
     * iteration's own thread */
    size_t nn = c->nnames;
    int64_t *per = calloc(ni * (nn ? nn : 1), sizeof *per);
    if (!per) {
        free(it);
        return;
    }
    /* slices by start time: each window is a binary search and a scan of what starts in it */
    uint32_t *byts = malloc((a->n ? a->n : 1) * sizeof *byts);
    if (!byts) {
        free(per);
        free(it);
        return;
    }
    for (size_t i = 0; i < a->n; i++) byts[i] = (uint32_t)i;
    sort_c = c;
    lp_sort(byts, a->n, sizeof *byts, cmp_ts);
    for (size_t k = 0; k < ni; k++) {
        const struct lp_slice *w = &c->slices[it[k].slice];
        size_t lo = 0, hi = a->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (c->slices[byts[mid]].ts_ns < it[k].ts)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t j = lo; j < a->n && c->slices[byts[j]].ts_ns < it[k].end; j++) {
            size_t i = byts[j];
            const struct lp_slice *s = &c->slices[i];
            if (i == it[k].slice || a->life[i] || s->ts_ns + s->dur_ns > it[k].end) continue;
            ADD(per[k * nn + s->name], s->dur_ns);
            if (s->pid == w->pid && s->tid == w->tid) {
                if (a->outer_kernel[i]) ADD(it[k].kernel, s->dur_ns);
                if (a->outer_kernel[i] && s->cpu_ns > 0) ADD(it[k].cpu_kernel, s->cpu_ns);
                if (o->nwhatif) ADD(it[k].saved, saved_by(a, i));
            }
        }
    }
    free(byts);
    /* ops ranked by their mean over the kept iterations */
    size_t kept = ni - skip;
    struct row *rows = calloc(nn ? nn : 1, sizeof *rows);
    size_t nr = 0;
    for (size_t n = 0; n < nn && rows; n++) {
        int64_t tot = 0;
        for (size_t k = skip; k < ni; k++) ADD(tot, per[k * nn + n]);
        if (tot <= 0 || !shown(o, c->names[n])) continue;
        rows[nr].name = (uint32_t)n;
        rows[nr].total = tot;
        nr++;
    }
    sort_by = RP_TOTAL;
    sort_names = c;
    if (rows) lp_sort(rows, nr, sizeof *rows, cmp_row);
    size_t top = o->top > 0 ? (size_t)o->top : 20;
    if (nr > top) nr = top;
    size_t cols = ni < 8 ? ni : 8;
    int others = 0; /* the iterations know their pool's CPU */
    for (size_t k = 0; k < ni; k++) others |= it[k].cpu_others >= 0;
    int w = others ? 18 : 13; /* "cpu, other threads", "framework tax" */
    for (size_t r = 0; r < nr; r++) {
        int l = (int)strlen(c->names[rows[r].name]);
        if (l > w) w = l > 48 ? 48 : l;
    }
    fprintf(f, "%-*s", w, "");
    for (size_t k = 0; k < cols; k++) {
        char h[24];
        snprintf(h, sizeof h, "%sIteration %zu", k < skip ? "*" : "", k);
        fprintf(f, " %12s", h);
    }
    fprintf(f, " %11s %11s %11s %11s\n", "mean", "p50", "min", "max");
    int64_t *vals = malloc((ni ? ni : 1) * sizeof *vals);
    /* with samples, the framework tax is the CPU outside kernels (measured); without, the wall
     * time outside them (what is not a kernel is taken for the framework's). The lines: -5
     * latency, -4 cpu, -3 cpu of the other threads (a run's pool), -2 tax, -1 what-if, then ops */
    for (int line = -5; line < (int)nr && vals; line++) {
        const char *label;
        if (line == -4 && !a->has_cpu) continue;
        if (line == -3 && !others) continue;
        for (size_t k = 0; k < ni; k++) {
            if (line == -5)
                vals[k] = it[k].latency;
            else if (line == -4)
                vals[k] = it[k].cpu;
            else if (line == -3)
                vals[k] = it[k].cpu_others > 0 ? it[k].cpu_others : 0;
            else if (line == -2 && a->has_cpu)
                vals[k] = it[k].cpu ? (int64_t)(1000.0 *
                                                (double)(it[k].cpu - (it[k].cpu_kernel < it[k].cpu ? it[k].cpu_kernel
                                                                                                   : it[k].cpu)) /
                                                (double)it[k].cpu)
                                    : 0;
            else if (line == -2)
                vals[k] = it[k].latency
                              ? (int64_t)(1000.0 * (double)(it[k].latency - it[k].kernel) / (double)it[k].latency)
                              : 0;
            else if (line == -1)
                vals[k] = it[k].latency - it[k].saved;
            else
                vals[k] = per[k * nn + rows[line].name];
        }
        if (line == -1 && !o->nwhatif) continue;
        label = line == -5   ? "latency"
                : line == -4 ? "cpu"
                : line == -3 ? "cpu, other threads"
                : line == -2 ? "framework tax"
                : line == -1 ? "what-if"
                             : c->names[rows[line].name];
        fprintf(f, "%-*.*s", w, w, label);
        for (size_t k = 0; k < cols; k++) {
            char b[32];
            if (line == -2)
                snprintf(b, sizeof b, "%.1f%%", (double)vals[k] / 10.0);
            else
                fmt_dur(b, sizeof b, vals[k], o->units);
            fprintf(f, " %12s", b);
        }
        int64_t sum = 0, mn = INT64_MAX, mx = INT64_MIN;
        for (size_t k = skip; k < ni; k++) {
            ADD(sum, vals[k]);
            if (vals[k] < mn) mn = vals[k];
            if (vals[k] > mx) mx = vals[k];
        }
        int64_t med = 0;
        if (kept) {
            int64_t *s2 = malloc(kept * sizeof *s2);
            if (s2) {
                memcpy(s2, vals + skip, kept * sizeof *s2);
                lp_sort(s2, kept, sizeof *s2, cmp_i64);
                med = pct(s2, kept, 0.5);
                free(s2);
            }
        }
        int64_t st[4] = {kept ? sum / (int64_t)kept : 0, med, kept ? mn : 0, kept ? mx : 0};
        for (int k = 0; k < 4; k++) {
            char b[32];
            if (line == -2)
                snprintf(b, sizeof b, "%.1f%%", (double)st[k] / 10.0);
            else
                fmt_dur(b, sizeof b, st[k], o->units);
            fprintf(f, " %11s", b);
        }
        fputc('\n', f);
    }
    if (ni > cols) fprintf(f, "(columns: the first %zu of %zu iterations; statistics over all kept ones)\n", cols, ni);
    fprintf(f, "(framework tax: the share of the iteration's %s outside kernels on its thread%s)\n",
            a->has_cpu ? "CPU" : "time", a->has_cpu ? ", from the CPU samples" : "");
    free(vals);
    free(rows);
    free(per);
    free(it);
}

/* ---- CPU samples, from a Chrome trace's metadata ---------------------------------------------- */

static void cpu_rows(FILE *f, const char *title, const struct lp_cpu_row *rows, size_t n, const struct lp_cpu *cpu,
                     size_t top) {
    if (!n) return;
    fprintf(f, "%s\n%10s %7s %10s %7s %11s  %s\n", title, "self", "self %", "total", "total %", "self time", "");
    for (size_t i = 0; i < n && i < top; i++) {
        char t[32];
        fmt_dur(t, sizeof t, (int64_t)(rows[i].self * cpu->period_ns), RP_AUTO);
        double all = cpu->samples ? (double)cpu->samples : 1;
        fprintf(f, "%10llu %6.1f%% %10llu %6.1f%% %11s  %s\n", (unsigned long long)rows[i].self,
                100.0 * (double)rows[i].self / all, (unsigned long long)rows[i].total,
                100.0 * (double)rows[i].total / all, t, rows[i].name);
    }
}

int rp_print_cpu(FILE *f, const struct lp_slices *c, const struct rp_opts *o) {
    const struct lp_cpu *cpu = &c->cpu;
    if (!cpu->period_ns) return 0;
    char all[32], per[32];
    fmt_dur(all, sizeof all, (int64_t)(cpu->samples * cpu->period_ns), RP_AUTO);
    fmt_dur(per, sizeof per, (int64_t)cpu->period_ns, RP_AUTO);
    fprintf(f, "\nCPU samples: %llu on %zu thread%s, %s of user CPU (one per %s of a thread's user CPU)\n",
            (unsigned long long)cpu->samples, cpu->nthreads, cpu->nthreads == 1 ? "" : "s", all, per);
    size_t top = o->top > 0 ? (size_t)o->top : 20;
    cpu_rows(f, "CPU samples by function (self: the innermost frame; total: anywhere on the stack):", cpu->fns,
             cpu->nfns, cpu, top);
    cpu_rows(f, "CPU samples by Python line (self: the innermost Python frame; total: any Python frame):", cpu->lines,
             cpu->nlines, cpu, top);
    return ferror(f) ? -1 : 0;
}

/* ---- PyTorch's operators ------------------------------------------------------------------- */

/* The CPU sampled inside each operator slice, by name (-1: the trace has no samples). */
static int64_t op_cpu(const struct lp_slices *c, const char *name) {
    int64_t cpu = -1;
    for (size_t i = 0; i < c->nslices; i++) {
        const struct lp_slice *s = &c->slices[i];
        if (s->cpu_ns < 0 || strcmp(c->names[s->cat], "torch") || strcmp(c->names[s->name], name)) continue;
        cpu = (cpu < 0 ? 0 : cpu) + s->cpu_ns;
    }
    return cpu;
}

int rp_torch_rows(const struct lp_slices *c, const struct rp_opts *o, int by_shapes,
                  void (*emit)(void *, const struct lp_op_row *, int64_t cpu), void *arg) {
    const struct lp_op_row *rows = by_shapes ? c->op_shapes : c->ops;
    size_t n = by_shapes ? c->nop_shapes : c->nops, shown = 0;
    for (size_t i = 0; i < n && (o->top <= 0 || shown < (size_t)o->top); i++) {
        if (o->have_filter && regexec(&o->filter, rows[i].name, 0, NULL, 0) != 0) continue;
        emit(arg, &rows[i], by_shapes ? -1 : op_cpu(c, rows[i].name));
        shown++;
    }
    return 0;
}

struct op_print {
    FILE *f;
    const struct rp_opts *o;
};
static void op_line(void *arg, const struct lp_op_row *r, int64_t cpu) {
    struct op_print *p = arg;
    char v[7][32], bs[32], bt[32];
    int64_t d[7] = {
        (int64_t)r->total_ns, (int64_t)r->self_ns, (int64_t)r->mean_ns, (int64_t)r->p50_ns, (int64_t)r->p99_ns, cpu, 0};
    for (int k = 0; k < 6; k++)
        if (d[k] >= 0)
            fmt_dur(v[k], sizeof v[k], d[k], p->o->units);
        else
            snprintf(v[k], sizeof v[k], "-");
    lp_fmt_bytes(bs, sizeof bs, r->bytes_self);
    lp_fmt_bytes(bt, sizeof bt, r->bytes_total);
    fprintf(p->f, "%10llu %10s %10s %10s %10s %10s %10s %10s %10s  %s%s%s\n", (unsigned long long)r->count, v[0], v[1],
            v[2], v[3], v[4], v[5], bs, bt, r->name, r->shapes ? " " : "", r->shapes ? r->shapes : "");
}

int rp_print_torch(FILE *f, const struct lp_slices *c, const struct rp_opts *o) {
    if (!c->nops) return 0;
    int shapes = o->by_shapes && c->nop_shapes;
    fprintf(f, "\nPyTorch operators%s (self: outside child operators; bytes: allocated inside, self and total):\n",
            shapes ? " by input shapes" : "");
    if (o->by_shapes && !c->nop_shapes)
        fprintf(f, "(no input shapes in this trace: record with LIBPROF_TORCH_SHAPES=1)\n");
    fprintf(f, "%10s %10s %10s %10s %10s %10s %10s %10s %10s  %s\n", "count", "total", "self", "mean", "p50", "p99",
            "cpu", "bytes self", "bytes tot", "operator");
    struct op_print p = {f, o};
    rp_torch_rows(c, o, shapes, op_line, &p);
    return ferror(f) ? -1 : 0;
}

/* ---- the default report -------------------------------------------------------------------- */

int rp_print(FILE *f, const char *label, const struct lp_slices *c, const struct rp_opts *o) {
    struct an a;
    if (an_build(&a, c, o) != 0) return -1;
    size_t names = 0; /* distinct slice names (the table also holds categories) */
    uint8_t *seen = calloc(c->nnames ? c->nnames : 1, 1);
    for (size_t i = 0; seen && i < c->nslices; i++)
        if (!seen[c->slices[i].name]) {
            seen[c->slices[i].name] = 1;
            names++;
        }
    free(seen);
    fprintf(f, "%s: %zu slices, %zu names", label, c->nslices, names);
    if (c->skipped) fprintf(f, ", %zu events skipped (not slices)", c->skipped);
    if (c->unmatched) fprintf(f, ", %zu unmatched B/E", c->unmatched);
    fputc('\n', f);
    print_table(f, &a);
    print_threads(f, &a);
    if (o->iterations) print_iterations(f, &a);
    print_whatif(f, &a);
    an_free(&a);
    return ferror(f) ? -1 : 0;
}

/* ---- diff ---------------------------------------------------------------------------------- */

struct drow {
    const char *name;
    const struct row *b, *c;
    int64_t impact;
};

static int cmp_drow(const void *x, const void *y) {
    const struct drow *a = x, *b = y;
    int64_t ia = a->impact < 0 ? -a->impact : a->impact, ib = b->impact < 0 ? -b->impact : b->impact;
    return ia > ib ? -1 : ia < ib ? 1 : strcmp(a->name, b->name);
}

/* Two runs' CPU profiles: each function's self and total CPU time (samples x period) before and
 * after, by the change of its self time. Functions are matched by name. */
struct cdiff {
    const char *name;
    int64_t self[2], total[2];
};
static int cmp_cdiff(const void *x, const void *y) {
    const struct cdiff *a = x, *b = y;
    int64_t da = a->self[1] - a->self[0], db = b->self[1] - b->self[0];
    da = da < 0 ? -da : da;
    db = db < 0 ? -db : db;
    return da > db ? -1 : da < db ? 1 : strcmp(a->name, b->name);
}

static int diff_cpu(FILE *f, const struct lp_cpu *base, const struct lp_cpu *cur, const struct rp_opts *o) {
    if (!base->period_ns && !cur->period_ns) return 0;
    if (!base->period_ns || !cur->period_ns) {
        fprintf(f, "\nCPU samples: only in the %s run (record both with LIBPROF_SAMPLE_HZ to compare)\n",
                base->period_ns ? "base" : "new");
        return 0;
    }
    struct cdiff *d = calloc(base->nfns + cur->nfns + 1, sizeof *d);
    struct lp_map ix = {0}; /* name hash -> 1 + row (collisions: compared, the next key) */
    if (!d) return -1;
    size_t n = 0;
    const struct lp_cpu *run[2] = {base, cur};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < run[k]->nfns; i++) {
            const struct lp_cpu_row *r = &run[k]->fns[i];
            uint64_t h = 0xcbf29ce484222325ull, v = 0;
            for (const char *p = r->name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
            for (h |= 1; lp_map_get(&ix, h, &v) && strcmp(d[v - 1].name, r->name); h += 2) {}
            if (!lp_map_get(&ix, h, &v)) {
                if (lp_map_put(&ix, h, n + 1, NULL) < 0) {
                    free(d);
                    lp_map_free(&ix);
                    return -1;
                }
                d[n].name = r->name;
                v = ++n;
            }
            d[v - 1].self[k] = (int64_t)(r->self * run[k]->period_ns);
            d[v - 1].total[k] = (int64_t)(r->total * run[k]->period_ns);
        }
    lp_map_free(&ix);
    size_t kept = 0; /* the functions with CPU of their own in either run */
    for (size_t i = 0; i < n; i++)
        if (d[i].self[0] || d[i].self[1]) d[kept++] = d[i];
    n = kept;
    lp_sort(d, n, sizeof *d, cmp_cdiff);
    size_t top = o->top > 0 ? (size_t)o->top : 20;
    if (n > top) n = top;
    char c0[32], c1[32];
    fmt_dur(c0, sizeof c0, (int64_t)(base->samples * base->period_ns), o->units);
    fmt_dur(c1, sizeof c1, (int64_t)(cur->samples * cur->period_ns), o->units);
    fprintf(f, "\nCPU by function (self: the innermost frame; samples x period), %s -> %s of CPU:\n", c0, c1);
    size_t w = 8;
    for (size_t i = 0; i < n; i++) w = strlen(d[i].name) > w ? strlen(d[i].name) : w;
    if (w > 60) w = 60;
    fprintf(f, "%-*s %11s %11s %11s %8s %11s %11s\n", (int)w, "function", "self", "->", "delta", "", "total", "->");
    for (size_t i = 0; i < n; i++) {
        char s0[32], s1[32], dt[32], t0[32], t1[32], pc[16];
        int64_t delta = d[i].self[1] - d[i].self[0];
        fmt_dur(s0, sizeof s0, d[i].self[0], o->units);
        fmt_dur(s1, sizeof s1, d[i].self[1], o->units);
        fmt_dur(dt, sizeof dt, delta, o->units);
        fmt_dur(t0, sizeof t0, d[i].total[0], o->units);
        fmt_dur(t1, sizeof t1, d[i].total[1], o->units);
        if (!d[i].total[1])
            snprintf(pc, sizeof pc, cur->fns_cut ? "?" : "gone"); /* "?": past the list a JSON trace keeps */
        else if (!d[i].total[0])
            snprintf(pc, sizeof pc, base->fns_cut ? "?" : "new");
        else if (d[i].self[0])
            snprintf(pc, sizeof pc, "%+.1f%%", 100.0 * (double)delta / (double)d[i].self[0]);
        else
            snprintf(pc, sizeof pc, "-");
        fprintf(f, "%-*.*s %11s %11s %11s %8s %11s %11s\n", (int)w, (int)w, d[i].name, s0, s1, dt, pc, t0, t1);
    }
    free(d);
    return 0;
}

int rp_diff(FILE *f, const struct lp_slices *base, const struct lp_slices *cur, const struct rp_opts *o) {
    struct an ab, ac;
    if (an_build(&ab, base, o) != 0) return -1;
    if (an_build(&ac, cur, o) != 0) {
        an_free(&ab);
        return -1;
    }
    struct row *rb = name_rows(&ab), *rc = name_rows(&ac);
    struct drow *d = malloc((base->nnames + cur->nnames + 1) * sizeof *d);
    if (!rb || !rc || !d) {
        free(rb);
        free(rc);
        free(d);
        an_free(&ab);
        an_free(&ac);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < cur->nnames; i++) {
        if (!rc[i].count || !shown(o, cur->names[i])) continue;
        const struct row *match = NULL;
        for (size_t j = 0; j < base->nnames && !match; j++)
            if (rb[j].count && !strcmp(base->names[j], cur->names[i])) match = &rb[j];
        d[n++] = (struct drow){cur->names[i], match, &rc[i], rc[i].total - (match ? match->total : 0)};
    }
    for (size_t j = 0; j < base->nnames; j++) {
        if (!rb[j].count || !shown(o, base->names[j])) continue;
        int found = 0;
        for (size_t i = 0; i < cur->nnames && !found; i++)
            found = rc[i].count && !strcmp(base->names[j], cur->names[i]);
        if (!found) d[n++] = (struct drow){base->names[j], &rb[j], NULL, -rb[j].total};
    }
    lp_sort(d, n, sizeof *d, cmp_drow);
    if (o->top > 0 && (size_t)o->top < n) n = (size_t)o->top;
    size_t w = 16; /* "name (by impact)" */
    for (size_t i = 0; i < n; i++) w = strlen(d[i].name) > w ? strlen(d[i].name) : w;
    if (w > 50) w = 50;
    fprintf(f, "%-*s %9s %9s %11s %11s %11s %8s %11s %11s %11s %11s\n", (int)w, "name (by impact)", "count", "->",
            "total", "->", "delta", "", "p50", "->", "p99", "->");
    for (size_t i = 0; i < n; i++) {
        const struct row *b = d[i].b, *c = d[i].c;
        char t0[32], t1[32], dt[32], a50[32], b50[32], a99[32], b99[32], pc[16];
        fmt_dur(t0, sizeof t0, b ? b->total : 0, o->units);
        fmt_dur(t1, sizeof t1, c ? c->total : 0, o->units);
        fmt_dur(dt, sizeof dt, d[i].impact, o->units);
        fmt_dur(a50, sizeof a50, b ? b->p50 : 0, o->units);
        fmt_dur(b50, sizeof b50, c ? c->p50 : 0, o->units);
        fmt_dur(a99, sizeof a99, b ? b->p99 : 0, o->units);
        fmt_dur(b99, sizeof b99, c ? c->p99 : 0, o->units);
        if (b && b->total)
            snprintf(pc, sizeof pc, "%+.1f%%", 100.0 * (double)d[i].impact / (double)b->total);
        else
            snprintf(pc, sizeof pc, "new");
        if (!c) snprintf(pc, sizeof pc, "gone");
        fprintf(f, "%-*.*s %9zu %9zu %11s %11s %11s %8s %11s %11s %11s %11s\n", (int)w, (int)w, d[i].name,
                b ? b->count : 0, c ? c->count : 0, t0, t1, dt, pc, a50, b50, a99, b99);
    }
    int failed = diff_cpu(f, &base->cpu, &cur->cpu, o);
    free(d);
    free(rb);
    free(rc);
    an_free(&ab);
    an_free(&ac);
    return failed || ferror(f) ? -1 : 0;
}

int64_t *rp_iteration_latencies(const struct lp_slices *c, const struct rp_opts *o, size_t *n) {
    struct an a;
    *n = 0;
    if (!o->iterations || an_build(&a, c, o) != 0) return NULL;
    size_t ni;
    int oom;
    struct iter *it = find_iterations(&a, &ni, &oom);
    an_free(&a);
    if (!ni) {
        free(it);
        return NULL;
    }
    int64_t *lat = malloc(ni * sizeof *lat);
    for (size_t k = 0; lat && k < ni; k++) lat[k] = it[k].latency;
    free(it);
    *n = lat ? ni : 0;
    return lat;
}

int rp_top_rows(const struct lp_slices *c, const struct rp_opts *o,
                void (*emit)(void *, const char *, size_t, const int64_t *), void *arg) {
    struct an a;
    if (an_build(&a, c, o) != 0) return -1;
    size_t n;
    struct row *rows = ranked_rows(&a, &n);
    for (size_t i = 0; rows && i < n; i++) {
        const struct row *r = &rows[i];
        int64_t v[] = {r->total, r->self, r->total / (int64_t)r->count, r->p50,
                       r->p99,   r->max,  a.has_cpu ? r->cpu : -1};
        emit(arg, c->names[r->name], r->count, v);
    }
    free(rows);
    an_free(&a);
    return 0;
}

int rp_thread_shares(const struct lp_slices *c, const struct rp_opts *o,
                     void (*emit)(void *, const struct rp_thread_share *), void *arg) {
    struct an a;
    if (an_build(&a, c, o) != 0) return -1;
    size_t n;
    struct thr *t = threads(&a, &n);
    for (size_t i = 0; t && i < n; i++) {
        struct rp_thread_share sh = {t[i].pid,
                                     t[i].tid,
                                     t[i].sliced ? t[i].last - t[i].first : 0,
                                     t[i].busy,
                                     t[i].kernel,
                                     t[i].cpu,
                                     t[i].cpu_kernel,
                                     a.gil ? t[i].gil.wait_ns : -1,
                                     t[i].gil.held_ns,
                                     t[i].gil.off_ns};
        emit(arg, &sh);
    }
    free(t);
    an_free(&a);
    return 0;
}
