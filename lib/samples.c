/* samples.c: see samples.h. */
#define _GNU_SOURCE
#include "samples.h"
#include "fmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "json.h"
#include "map.h"
#include "os.h"
#include "symbols.h"
#include "vec.h"
#include "views.h"
#include "calls.h"

#define TOP 20
#define META_ROWS 200

/* A function (or a Python line): its samples as the innermost frame and anywhere in the stack. */
struct row {
    const char *name; /* interned by lp_syms (lives as long as it) */
    uint64_t self, total;
};

struct table {
    struct row *rows;
    size_t n, cap;
    struct lp_map ix; /* name pointer -> 1 + row */
};

struct thread_cpu {
    uint64_t samples, in_libprof;
    struct when { /* its samples in time order: the time, the weight up to and with it, the stack */
        uint64_t ns, upto;
        uint32_t stack; /* LP_SAMPLES_IN_LIBPROF: in libprof's own code */
    } * times;
    size_t ntimes, captimes;
    size_t counted_from; /* the first of `times` counted (after the last reset): bucket's first */
    uint32_t *bucket;    /* LP_CPU_BUCKETS, made when the thread's first sample counted comes */
    struct table fn;     /* its own by-function table */
};

struct lp_samples {
    const struct lp_reader *r;
    uint64_t period_ns, total, in_libprof, span_ns;
    uint32_t nth; /* th holds nth + 1 threads (a followed trace's grow: lp_samples_fit) */
    /* the distinct samples: thread, callers' stack, instruction */
    struct skey {
        uint32_t thread, stack;
        uint64_t pc, n; /* n: samples counted (after the last reset) */
    } * keys;
    size_t nkeys, capkeys;
    struct lp_map ix; /* their hash -> 1 + index (collisions: compared, the next hash) */
    struct thread_cpu *th;
    struct lp_syms *syms;
    struct table fn, py; /* all threads: by function, by Python line */
};

struct lp_samples *lp_samples_new(const struct lp_reader *r, int *oom) {
    if (!r->samples && !(r->follow && r->sampling)) return NULL; /* (followed: samples may come) */
    struct lp_samples *s = lp_os_calloc(1, sizeof *s);
    if (s) s->th = lp_os_calloc((size_t)r->nthreads + 1, sizeof *s->th);
    if (s) s->nth = r->nthreads;
    if (!s || !s->th || lp_map_grow(&s->ix) != 0) {
        lp_samples_free(s);
        *oom = 1;
        return NULL;
    }
    s->r = r;
    s->period_ns = r->sampling && r->sampling->period_ns ? r->sampling->period_ns : 1000000;
    s->span_ns = r->follow ? UINT64_C(64000000000) : lp_ticks_to_ns(r, r->last_ticks) + 1;
    return s;
}

int lp_samples_fit(struct lp_samples *s) {
    uint32_t n = s->r->nthreads;
    if (n <= s->nth) return 0;
    struct thread_cpu *t = lp_os_realloc(s->th, ((size_t)n + 1) * sizeof *t);
    if (!t) return -1;
    /* the last slot takes samples of no known thread: it moves to the end */
    t[n] = t[s->nth];
    memset(t + s->nth, 0, (size_t)(n - s->nth) * sizeof *t);
    s->th = t;
    s->nth = n;
    return 0;
}

/* A followed trace outgrew the time its buckets span: each two become one, twice as long. */
static void double_span(struct lp_samples *s) {
    for (uint32_t t = 0; t <= s->nth; t++) {
        uint32_t *b = s->th[t].bucket;
        if (!b) continue;
        for (unsigned i = 0; i < LP_CPU_BUCKETS / 2; i++) b[i] = b[2 * i] + b[2 * i + 1];
        memset(b + LP_CPU_BUCKETS / 2, 0, (LP_CPU_BUCKETS - LP_CPU_BUCKETS / 2) * sizeof *b);
    }
    s->span_ns *= 2;
}

static void table_free(struct table *t) {
    lp_os_free(t->rows);
    lp_map_free(&t->ix);
}

void lp_samples_free(struct lp_samples *s) {
    if (!s) return;
    for (uint32_t i = 0; s->th && i <= s->r->nthreads; i++) {
        lp_os_free(s->th[i].bucket);
        lp_os_free(s->th[i].times);
        table_free(&s->th[i].fn);
    }
    lp_os_free(s->th);
    lp_map_free(&s->ix);
    lp_os_free(s->keys);
    table_free(&s->fn);
    table_free(&s->py);
    lp_os_free(s);
}

void lp_cpu_free(struct lp_cpu *cpu) {
    for (size_t i = 0; i < cpu->nfns; i++) lp_os_free(cpu->fns[i].name);
    for (size_t i = 0; i < cpu->nlines; i++) lp_os_free(cpu->lines[i].name);
    lp_os_free(cpu->fns);
    lp_os_free(cpu->lines);
    lp_os_free(cpu->threads);
    memset(cpu, 0, sizeof *cpu);
}

uint64_t lp_samples_count(const struct lp_samples *s) { return s ? s->total : 0; }
uint64_t lp_samples_period(const struct lp_samples *s) { return s ? s->period_ns : 0; }

/* The index of sample key (thread, stack, pc), added when new; -1 when out of memory. */
static long key_of(struct lp_samples *s, uint32_t thread, uint32_t stack, uint64_t pc) {
    uint64_t h = ((uint64_t)thread << 32 | stack) * 0x9E3779B97F4A7C15ull ^ pc * 0xff51afd7ed558ccdull, ix;
    for (h |= 1;; h += 2) { /* two keys of one hash: the next */
        if (!lp_map_get(&s->ix, h, &ix)) break;
        const struct skey *k = &s->keys[ix - 1];
        if (k->thread == thread && k->stack == stack && k->pc == pc) return (long)ix - 1;
    }
    if (LP_RESERVE(s->keys, s->capkeys, s->nkeys + 1) != 0 || lp_map_put(&s->ix, h, s->nkeys + 1, NULL) < 0) return -1;
    s->keys[s->nkeys] = (struct skey){thread, stack, pc, 0};
    return (long)s->nkeys++;
}

int lp_samples_event(struct lp_samples *s, const struct lp_event *e, int counting) {
    uint64_t w = e->w[0], weight = LP_SAMPLE_WEIGHT(w) ? LP_SAMPLE_WEIGHT(w) : 1;
    uint32_t t = e->thread <= s->nth ? e->thread : s->nth;
    struct thread_cpu *c = &s->th[t];
    long k = w & LP_SAMPLE_IN_LIBPROF ? (long)LP_SAMPLES_IN_LIBPROF : key_of(s, t, e->stack, e->w[1]);
    if (k < 0) return -1;
    /* the timeline the slices' CPU is read from (before a reset too: a slice may span it) */
    if (LP_RESERVE(c->times, c->captimes, c->ntimes + 1) != 0) return -1;
    c->times[c->ntimes] = (struct when){e->ns, (c->ntimes ? c->times[c->ntimes - 1].upto : 0) + weight, (uint32_t)k};
    c->ntimes++;
    if (!counting) return 0;
    if (!c->bucket) {
        if (!(c->bucket = lp_os_calloc(LP_CPU_BUCKETS, sizeof *c->bucket))) return -1;
        c->counted_from = c->ntimes - 1;
    }
    while (s->r->follow && e->ns >= s->span_ns && s->span_ns < (UINT64_C(1) << 62)) double_span(s);
    uint64_t b = (uint64_t)(((unsigned __int128)e->ns * LP_CPU_BUCKETS) / s->span_ns);
    c->bucket[b < LP_CPU_BUCKETS ? b : LP_CPU_BUCKETS - 1] += (uint32_t)weight;
    c->samples += weight;
    s->total += weight;
    if (w & LP_SAMPLE_IN_LIBPROF) {
        c->in_libprof += weight;
        s->in_libprof += weight;
    } else {
        s->keys[k].n += weight;
    }
    return 0;
}

/* A sample key's frames, innermost first: the instruction (as a return address would be: one
 * past it, looked up at address - 1), then its callers' stack; 0 frames when neither is known. */
static uint32_t view(const struct lp_samples *s, const struct skey *k, struct lp_frames *v) {
    struct lp_frames callers;
    uint32_t n = lp_stack_view(s->r, k->stack, &callers), m = 0;
    v->f = v->buf;
    if (k->pc) v->buf[m++] = k->pc + 1;
    for (uint32_t i = 0; i < n && m < LP_STACK_MAX_FRAMES; i++) v->buf[m++] = callers.f[i];
    return v->n = m;
}

/* The weight of the samples of `c` at or before `ns`. */
static uint64_t upto(const struct thread_cpu *c, uint64_t ns) {
    size_t lo = 0, hi = c->ntimes; /* the first sample after ns */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->times[mid].ns <= ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? c->times[lo - 1].upto : 0;
}

uint64_t lp_samples_cpu_ns(const struct lp_samples *s, uint32_t thread, uint64_t from_ns, uint64_t to_ns) {
    if (!s || thread > s->r->nthreads || to_ns < from_ns) return 0;
    const struct thread_cpu *c = &s->th[thread];
    if (!c->ntimes) return 0;
    uint64_t before = from_ns ? upto(c, from_ns - 1) : 0;
    return (upto(c, to_ns) - before) * s->period_ns;
}

uint64_t lp_samples_cpu_others_ns(const struct lp_samples *s, uint32_t thread, uint64_t from_ns, uint64_t to_ns) {
    uint64_t ns = 0;
    for (uint32_t t = 0; s && t <= s->nth && t <= s->r->nthreads; t++)
        if (t != thread && s->th[t].ntimes) ns += lp_samples_cpu_ns(s, t, from_ns, to_ns);
    return ns;
}

/* The row of `name` in `t` (added when new; rows are one per name's text: the symboliser gives
 * each address its own copy of its function's name); NULL when out of memory. */
static struct row *row_of(struct table *t, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull, ix;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    for (h |= 1;; h += 2) { /* a collision of two texts: the next key */
        if (!lp_map_get(&t->ix, h, &ix)) break;
        if (t->rows[ix - 1].name == name || !strcmp(t->rows[ix - 1].name, name)) return &t->rows[ix - 1];
    }
    if (LP_RESERVE(t->rows, t->cap, t->n + 1) != 0 || lp_map_put(&t->ix, h, t->n + 1, NULL) < 0) return NULL;
    t->rows[t->n] = (struct row){name, 0, 0};
    return &t->rows[t->n++];
}

/* Charge `n` samples of stack `frames` to `t`: self to the innermost, total once to each function
 * on it. */
static int charge(struct lp_samples *s, struct table *t, const struct lp_frames *v, uint64_t n) {
    const char *seen[LP_STACK_MAX_FRAMES];
    uint32_t ns = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        if (v->f[i] == LP_FRAME_ELIDED) continue;
        const char *name = lp_syms_function(s->syms, v->f[i], 1);
        struct row *r = row_of(t, name);
        if (!r) return -1;
        if (ns == 0) r->self += n;
        int dup = 0; /* (the row, not the pointer: one row per name) */
        for (uint32_t k = 0; k < ns && !dup; k++) dup = seen[k] == r->name;
        if (!dup) {
            r->total += n;
            seen[ns++] = r->name;
        }
    }
    return 0;
}

/* The Python lines: self to the innermost Python frame, total once to each line on the stack (a
 * line that recurses, or the import machinery's that runs at every level of nested imports, is
 * counted once a sample: a total never passes 100 %). */
static int charge_py(struct lp_samples *s, const struct lp_frames *v, uint64_t n) {
    const char *seen[LP_STACK_MAX_FRAMES];
    uint32_t ns = 0;
    int first = 1;
    for (uint32_t i = 0; i < v->n; i++) {
        uint64_t w = v->f[i];
        if (!(w & LP_PYFRAME_BIT) || w == LP_FRAME_ELIDED) continue;
        struct row *r = row_of(&s->py, lp_syms_function(s->syms, w, 1));
        if (!r) return -1;
        if (first) r->self += n;
        first = 0;
        int dup = 0;
        for (uint32_t k = 0; k < ns && !dup; k++) dup = seen[k] == r->name;
        if (!dup && ns < LP_STACK_MAX_FRAMES) {
            r->total += n;
            seen[ns++] = r->name;
        }
    }
    return 0;
}

static int cmp_row(const void *x, const void *y) {
    const struct row *a = x, *b = y;
    if (a->self != b->self) return a->self < b->self ? 1 : -1;
    if (a->total != b->total) return a->total < b->total ? 1 : -1;
    return strcmp(a->name, b->name);
}

/* A followed trace's buckets span the time it was given while it ran (64 s, doubled as it
 * outgrew it): at its end they span the run, made again from each thread's samples, so its CPU
 * over time ends where the run does and is as fine as a trace converted whole. */
static void span_the_run(struct lp_samples *s) {
    uint64_t end = lp_ticks_to_ns(s->r, s->r->last_ticks) + 1;
    if (!s->r->follow || end >= s->span_ns) return;
    s->span_ns = end;
    for (uint32_t t = 0; t <= s->nth; t++) {
        struct thread_cpu *c = &s->th[t];
        if (!c->bucket) continue;
        memset(c->bucket, 0, LP_CPU_BUCKETS * sizeof *c->bucket);
        for (size_t i = c->counted_from; i < c->ntimes; i++) {
            uint64_t b = (uint64_t)(((unsigned __int128)c->times[i].ns * LP_CPU_BUCKETS) / end);
            c->bucket[b < LP_CPU_BUCKETS ? b : LP_CPU_BUCKETS - 1] +=
                (uint32_t)(c->times[i].upto - (i ? c->times[i - 1].upto : 0));
        }
    }
}

int lp_samples_finish(struct lp_samples *s) {
    if (!s) return 0;
    span_the_run(s);
    if (!s->syms && !(s->syms = lp_syms_of(s->r))) return -1;
    static const char libprof_frame[] = "[libprof]";
    for (uint32_t t = 0; t <= s->r->nthreads; t++) {
        struct thread_cpu *c = &s->th[t];
        if (c->in_libprof) {
            struct row *r = row_of(&s->fn, libprof_frame), *q = row_of(&c->fn, libprof_frame);
            if (!r || !q) return -1;
            r->self += c->in_libprof;
            r->total += c->in_libprof;
            q->self += c->in_libprof;
            q->total += c->in_libprof;
        }
    }
    struct lp_frames v;
    for (size_t i = 0; i < s->nkeys; i++) {
        const struct skey *k = &s->keys[i];
        if (!k->n) continue;
        if (!view(s, k, &v)) {
            v.buf[0] = 0; /* nothing known: one frame, "0x0" */
            v.n = 1;
        }
        if (charge(s, &s->fn, &v, k->n) || charge(s, &s->th[k->thread].fn, &v, k->n) || charge_py(s, &v, k->n))
            return -1;
    }
    lp_sort(s->fn.rows, s->fn.n, sizeof *s->fn.rows, cmp_row);
    lp_sort(s->py.rows, s->py.n, sizeof *s->py.rows, cmp_row);
    for (uint32_t t = 0; t <= s->r->nthreads; t++)
        if (s->th[t].fn.n) lp_sort(s->th[t].fn.rows, s->th[t].fn.n, sizeof *s->th[t].fn.rows, cmp_row);
    /* the tables are sorted: their maps point at old places */
    lp_map_free(&s->fn.ix);
    lp_map_free(&s->py.ix);
    for (uint32_t t = 0; t <= s->r->nthreads; t++) lp_map_free(&s->th[t].fn.ix);
    return 0;
}

/* ---- the handler's times, from the recorder's histogram --------------------------------------- */

static uint64_t hist_pct(const struct lp_sampling *g, double q) {
    uint64_t n = 0, seen = 0;
    for (int i = 0; i < LP_SAMPLING_HIST; i++) n += g->hist[i];
    if (!n) return 0;
    uint64_t want = (uint64_t)(q * (double)n);
    if (want >= n) want = n - 1;
    for (int i = 0; i < LP_SAMPLING_HIST; i++) {
        seen += g->hist[i];
        if (seen > want) return (uint64_t)(i + 1) * 100; /* the bucket's upper end */
    }
    return LP_SAMPLING_HIST * 100;
}

/* "main", a name the thread was given (pthread_setname_np), or "thread TID". */
const char *lp_thread_label(const struct lp_reader *r, uint32_t t, char *buf, size_t len) {
    if (t >= r->nthreads) return "?";
    const struct lp_thread_info *ti = &r->threads[t];
    const char *exe = r->exe ? r->exe : "";
    uint32_t n = r->exe ? r->exe_len : 0, b = 0;
    for (uint32_t i = 0; i < n; i++)
        if (exe[i] == '/') b = i + 1;
    /* the kernel's name is the executable's (cut to 15 bytes) unless the thread was named — or
     * the main thread's, where the program was started through a link (python3 -> python3.10) */
    int inherited = ti->name && ti->name_len <= n - b && !memcmp(ti->name, exe + b, ti->name_len) &&
                    (ti->name_len == n - b || ti->name_len == 15);
    for (uint32_t i = 0; ti->name && !inherited && i < r->nthreads; i++)
        if (r->threads[i].tid == r->hdr.pid && r->threads[i].name && r->threads[i].name_len == ti->name_len &&
            !memcmp(r->threads[i].name, ti->name, ti->name_len))
            inherited = 1;
    if (ti->tid == r->hdr.pid)
        snprintf(buf, len, "main");
    else if (ti->name && !inherited)
        snprintf(buf, len, "%.*s", (int)(ti->name_len < 40 ? ti->name_len : 40), ti->name);
    else
        snprintf(buf, len, "thread %u", ti->tid);
    return buf;
}

static int export_rows(const struct table *t, struct lp_cpu_row **out, size_t *n) {
    *n = 0;
    if (!t->n) return 0;
    if (!(*out = lp_os_calloc(t->n, sizeof **out))) return -1;
    for (size_t i = 0; i < t->n; i++) {
        if (!((*out)[i].name = lp_os_strndup(t->rows[i].name, strlen(t->rows[i].name)))) return -1;
        (*out)[i].self = t->rows[i].self;
        (*out)[i].total = t->rows[i].total;
        ++*n;
    }
    return 0;
}

int lp_samples_export(const struct lp_samples *s, struct lp_cpu *out) {
    memset(out, 0, sizeof *out);
    if (!s) return 0;
    out->period_ns = s->period_ns;
    out->span_ns = s->span_ns;
    out->samples = s->total;
    size_t n = 0;
    for (uint32_t t = 0; t <= s->r->nthreads; t++) n += s->th[t].samples != 0;
    if (n && !(out->threads = lp_os_calloc(n, sizeof *out->threads))) goto oom;
    for (uint32_t t = 0; t <= s->r->nthreads; t++) {
        const struct thread_cpu *c = &s->th[t];
        if (!c->samples) continue;
        struct lp_cpu_thread *o = &out->threads[out->nthreads++];
        o->pid = s->r->hdr.pid;
        o->tid = t < s->r->nthreads ? s->r->threads[t].tid : 0;
        lp_thread_label(s->r, t, o->name, sizeof o->name);
        o->samples = c->samples;
        if (c->bucket) memcpy(o->bucket, c->bucket, sizeof o->bucket);
    }
    if (export_rows(&s->fn, &out->fns, &out->nfns) != 0 || export_rows(&s->py, &out->lines, &out->nlines) != 0)
        goto oom;
    return 0;
oom:
    lp_cpu_free(out);
    return -1;
}

void lp_samples_each_sample(const struct lp_samples *s,
                            void (*fn)(void *arg, uint32_t thread, uint32_t key, uint64_t ns, uint64_t weight),
                            void *arg) {
    if (!s) return;
    for (uint32_t t = 0; t <= s->r->nthreads; t++) {
        const struct thread_cpu *c = &s->th[t];
        for (size_t i = 0; i < c->ntimes; i++)
            fn(arg, t, c->times[i].stack, c->times[i].ns, c->times[i].upto - (i ? c->times[i - 1].upto : 0));
    }
}

unsigned lp_samples_frames(const struct lp_samples *s, uint32_t key, const char **names, unsigned max) {
    if (!s || !s->syms || !max) return 0;
    if (key == LP_SAMPLES_IN_LIBPROF || key >= s->nkeys) {
        names[0] = key == LP_SAMPLES_IN_LIBPROF ? "[libprof]" : "[unknown stack]";
        return 1;
    }
    struct lp_frames v;
    if (!view(s, &s->keys[key], &v)) {
        names[0] = "[unknown stack]";
        return 1;
    }
    unsigned n = 0; /* a frame's inlined functions first, each a frame of its own */
    for (uint32_t i = 0; i < v.n && n < max; i++) n += lp_syms_frames(s->syms, v.f[i], 1, names + n, max - n);
    return n;
}

const char *lp_samples_thread_name(const struct lp_samples *s, uint32_t thread, char *buf, size_t len) {
    return s ? lp_thread_label(s->r, thread, buf, len) : "?";
}

/* ---- the writers' views ---------------------------------------------------------------------- */

static void ms(char *buf, size_t len, uint64_t ns) {
    if (ns >= 10000000000u)
        snprintf(buf, len, "%.2f s", (double)ns / 1e9);
    else
        snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
}

static void rows_text(struct lp_out *o, const struct table *t, uint64_t total, uint64_t period, unsigned top) {
    lp_out_fmt(o, "  %10s %7s %10s %7s %10s  %s\n", "self", "self %", "total", "total %", "self time", "function");
    for (size_t i = 0; i < t->n && i < top; i++) {
        const struct row *r = &t->rows[i];
        char tm[32];
        ms(tm, sizeof tm, r->self * period);
        lp_out_fmt(o, "  %10llu %6.1f%% %10llu %6.1f%% %10s  %s\n", (unsigned long long)r->self,
                   total ? 100.0 * (double)r->self / (double)total : 0, (unsigned long long)r->total,
                   total ? 100.0 * (double)r->total / (double)total : 0, tm, r->name);
    }
}

static void view_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    const struct lp_samples *s = a->view[LP_VIEW_CPU];
    if (!s) return;
    const struct lp_sampling *g = s->r->sampling;
    char cpu[32];
    ms(cpu, sizeof cpu, s->total * s->period_ns);
    unsigned threads = 0;
    for (uint32_t t = 0; t <= s->r->nthreads; t++) threads += s->th[t].samples != 0;
    lp_out_fmt(o, "  CPU samples: %llu on %u thread%s, %s of user CPU (one per %.3f ms of a thread's user CPU)",
               (unsigned long long)s->total, threads, threads == 1 ? "" : "s", cpu, (double)s->period_ns / 1e6);
    if (g && (g->dropped || g->in_libprof))
        lp_out_fmt(o, "; %llu in libprof's own code, %llu dropped", (unsigned long long)g->in_libprof,
                   (unsigned long long)g->dropped);
    lp_out_s(o,
             "\n  CPU samples by function, all threads (self: the innermost frame; total: anywhere on the stack):\n");
    rows_text(o, &s->fn, s->total, s->period_ns, (unsigned)lp_top(top, TOP));
    if (s->py.n) {
        lp_out_s(o, "  CPU samples by Python line (self: the innermost Python frame; total: any Python frame):\n");
        rows_text(o, &s->py, s->total, s->period_ns, (unsigned)lp_top(top, TOP));
    }
    if (threads > 1) {
        lp_out_fmt(o, "  CPU samples per thread:\n  %10s %10s %10s  %-16s  %s\n", "tid", "samples", "user cpu",
                   "thread", "heaviest function (self)");
        for (uint32_t t = 0, rows = 0; t <= s->r->nthreads && (!top || rows < top); t++) {
            const struct thread_cpu *c = &s->th[t];
            if (!c->samples) continue;
            rows++;
            char name[64], tm[32];
            ms(tm, sizeof tm, c->samples * s->period_ns);
            lp_out_fmt(o, "  %10u %10llu %10s  %-16s  %s\n", t < s->r->nthreads ? s->r->threads[t].tid : 0,
                       (unsigned long long)c->samples, tm, lp_thread_label(s->r, t, name, sizeof name),
                       c->fn.n ? c->fn.rows[0].name : "-");
        }
    }
}

static void view_csv(const struct lp_analysis *a, struct lp_out *o) {
    const struct lp_samples *s = a->view[LP_VIEW_CPU];
    if (!s) return;
    for (size_t i = 0; i < s->fn.n; i++) {
        const struct row *r = &s->fn.rows[i];
        lp_out_csv_str(o, r->name, strlen(r->name));
        lp_out_fmt(o, ",cpu_self,%llu,%llu,,,,,,,,,\n", (unsigned long long)r->self,
                   (unsigned long long)(r->self * s->period_ns));
        lp_out_csv_str(o, r->name, strlen(r->name));
        lp_out_fmt(o, ",cpu_total,%llu,%llu,,,,,,,,,\n", (unsigned long long)r->total,
                   (unsigned long long)(r->total * s->period_ns));
    }
    for (size_t i = 0; i < s->py.n; i++) {
        const struct row *r = &s->py.rows[i];
        lp_out_csv_str(o, r->name, strlen(r->name));
        lp_out_fmt(o, ",cpu_python_line,%llu,%llu,,,,,,,,,\n", (unsigned long long)r->self,
                   (unsigned long long)(r->self * s->period_ns));
    }
}

static void rows_json(struct lp_json *j, const struct table *t, const char *key) {
    for (size_t i = 0; i < t->n && i < META_ROWS; i++) {
        lp_json_object(j);
        lp_json_ks(j, key, t->rows[i].name, strlen(t->rows[i].name));
        lp_json_kus(j, "self", LP_U(t->rows[i].self), "total", LP_U(t->rows[i].total), NULL);
        lp_json_object_end(j);
    }
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    const struct lp_samples *s = a->view[LP_VIEW_CPU];
    if (!s) return;
    const struct lp_sampling *g = s->r->sampling;
    lp_json_kobject(j, "sampling");
    lp_json_kus(j, "hz", LP_U(g ? g->hz : (unsigned)(1000000000u / s->period_ns)), "period_ns", LP_U(s->period_ns),
                "samples", LP_U(s->total), "cpu_ns", LP_U(s->total * s->period_ns), "span_ns", LP_U(s->span_ns), NULL);
    if (g) {
        uint64_t n = 0; /* handler runs */
        for (int i = 0; i < LP_SAMPLING_HIST; i++) n += g->hist[i];
        lp_json_kus(j, "taken", LP_U(g->samples), "dropped", LP_U(g->dropped), "in_libprof", LP_U(g->in_libprof),
                    "shallow", LP_U(g->shallow), NULL);
        lp_json_kobject(j, "handler");
        lp_json_kus(j, "mean_ns", LP_U(n ? g->handler_ns / n : 0), "p50_ns", LP_U(hist_pct(g, 0.5)), "p90_ns",
                    LP_U(hist_pct(g, 0.9)), "p99_ns", LP_U(hist_pct(g, 0.99)), "p999_ns", LP_U(hist_pct(g, 0.999)),
                    "max_ns", LP_U(g->handler_max_ns), NULL);
        lp_json_object_end(j);
    }
    lp_json_karray(j, "threads");
    for (uint32_t t = 0; t <= s->r->nthreads; t++) {
        const struct thread_cpu *c = &s->th[t];
        if (!c->samples) continue;
        char name[64];
        lp_json_object(j);
        lp_json_ku(j, "tid", t < s->r->nthreads ? s->r->threads[t].tid : 0);
        lp_thread_label(s->r, t, name, sizeof name);
        lp_json_ks(j, "name", name, strlen(name));
        lp_json_kus(j, "samples", LP_U(c->samples), "cpu_ns", LP_U(c->samples * s->period_ns), NULL);
        lp_json_karray(j, "buckets");
        for (unsigned b = 0; b < LP_CPU_BUCKETS; b++) lp_json_u64(j, c->bucket ? c->bucket[b] : 0);
        lp_json_array_end(j);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_kus(j, "functions", LP_U(s->fn.n), "python_lines", LP_U(s->py.n), NULL);
    lp_json_object_end(j);
    lp_json_karray(j, "cpu_functions");
    rows_json(j, &s->fn, "function");
    lp_json_array_end(j);
    lp_json_karray(j, "cpu_python_lines");
    rows_json(j, &s->py, "line");
    lp_json_array_end(j);
}

/* Brendan Gregg's collapsed format, the thread as the root frame: "thread;root;...;leaf N". */
void lp_folded_frame(struct lp_out *o, const char *name) {
    for (const char *p = name; *p; p++) lp_out_c(o, *p == ';' ? ':' : *p == '\n' ? ' ' : *p);
}

void lp_folded_frames(struct lp_out *o, struct lp_syms *syms, const struct lp_frames *v) {
    const char *names[16];
    for (uint32_t f = v->n; f-- > 0;) /* the outermost first; a frame's inlined functions after it */
        for (unsigned k = lp_syms_frames(syms, v->f[f], 1, names, 16); k-- > 0;) {
            lp_out_c(o, ';');
            lp_folded_frame(o, names[k]);
        }
}

void lp_samples_folded(const struct lp_samples *s, struct lp_out *o, uint64_t weight) {
    if (!s) return;
    struct lp_frames v;
    char name[64];
    for (uint32_t t = 0; t <= s->r->nthreads; t++)
        if (s->th[t].in_libprof) {
            lp_folded_frame(o, lp_thread_label(s->r, t, name, sizeof name));
            lp_out_fmt(o, ";[libprof] %llu\n", (unsigned long long)(s->th[t].in_libprof * weight));
        }
    for (size_t i = 0; i < s->nkeys; i++) {
        const struct skey *k = &s->keys[i];
        if (!k->n) continue;
        lp_folded_frame(o, lp_thread_label(s->r, k->thread, name, sizeof name));
        if (!view(s, k, &v)) lp_out_s(o, ";[unknown stack]");
        lp_folded_frames(o, s->syms, &v);
        lp_out_fmt(o, " %llu\n", (unsigned long long)(k->n * weight));
    }
}

void lp_samples_each(const struct lp_samples *s,
                     void (*fn)(void *arg, uint32_t thread, const struct lp_frames *v, uint64_t samples), void *arg) {
    if (!s) return;
    struct lp_frames v;
    for (uint32_t t = 0; t <= s->r->nthreads; t++)
        if (s->th[t].in_libprof) fn(arg, t, NULL, s->th[t].in_libprof);
    for (size_t i = 0; i < s->nkeys; i++)
        if (s->keys[i].n) {
            view(s, &s->keys[i], &v);
            fn(arg, s->keys[i].thread, &v, s->keys[i].n);
        }
}

void lp_samples_speedscope_frames(const struct lp_samples *s, uint64_t (*frame)(void *, const char *), void *arg) {
    if (!s) return;
    struct lp_frames v;
    frame(arg, "[libprof]");
    frame(arg, "[unknown stack]");
    for (size_t i = 0; i < s->nkeys; i++) {
        if (!s->keys[i].n) continue;
        view(s, &s->keys[i], &v);
        const char *names[16];
        for (uint32_t f = 0; f < v.n; f++)
            for (unsigned k = 0, nk = lp_syms_frames(s->syms, v.f[f], 1, names, 16); k < nk; k++) frame(arg, names[k]);
    }
}

void lp_samples_speedscope_profiles(const struct lp_samples *s, uint64_t (*frame)(void *, const char *), void *arg,
                                    struct lp_json *j) {
    if (!s) return;
    struct lp_frames v;
    char name[64];
    for (uint32_t t = 0; t <= s->r->nthreads; t++) {
        const struct thread_cpu *c = &s->th[t];
        if (!c->samples) continue;
        char title[96];
        snprintf(title, sizeof title, "CPU: %s", lp_thread_label(s->r, t, name, sizeof name));
        lp_json_object(j);
        lp_json_ks(j, "type", "sampled", 7);
        lp_json_ks(j, "name", title, strlen(title));
        lp_json_ks(j, "unit", "nanoseconds", 11);
        lp_json_kus(j, "startValue", LP_U(0), "endValue", LP_U(c->samples * s->period_ns), NULL);
        lp_json_karray(j, "samples");
        if (c->in_libprof) {
            lp_json_array(j);
            lp_json_u64(j, frame(arg, "[libprof]"));
            lp_json_array_end(j);
        }
        for (size_t i = 0; i < s->nkeys; i++) {
            if (!s->keys[i].n || s->keys[i].thread != t) continue;
            lp_json_array(j);
            if (!view(s, &s->keys[i], &v)) lp_json_u64(j, frame(arg, "[unknown stack]"));
            const char *names[16];
            for (uint32_t f = v.n; f-- > 0;) /* root first; a frame's inlined functions after it */
                for (unsigned k = lp_syms_frames(s->syms, v.f[f], 1, names, 16); k-- > 0;)
                    lp_json_u64(j, frame(arg, names[k]));
            lp_json_array_end(j);
        }
        lp_json_array_end(j);
        lp_json_karray(j, "weights");
        if (c->in_libprof) lp_json_u64(j, c->in_libprof * s->period_ns);
        for (size_t i = 0; i < s->nkeys; i++)
            if (s->keys[i].n && s->keys[i].thread == t) lp_json_u64(j, s->keys[i].n * s->period_ns);
        lp_json_array_end(j);
        lp_json_object_end(j);
    }
}

static void view_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    const struct lp_samples *s = a->view[LP_VIEW_CPU];
    if (!s) return;
    char name[64], track[128];
    double width = (double)s->span_ns / LP_CPU_BUCKETS;
    /* each point spans eight sample periods at least: in a narrower one a thread has 0 or 1
     * samples, and its track would read 0 % and 115 % by turns */
    unsigned group = 1;
    while (group < LP_CPU_BUCKETS && width * group < 8.0 * (double)s->period_ns) group++;
    for (uint32_t t = 0; t <= s->r->nthreads; t++) {
        const struct thread_cpu *c = &s->th[t];
        if (!c->samples || !c->bucket) continue;
        snprintf(track, sizeof track, "cpu %% (%s)", lp_thread_label(s->r, t, name, sizeof name));
        double last = -1;
        for (unsigned b = 0; b < LP_CPU_BUCKETS; b += group) {
            unsigned n = b + group <= LP_CPU_BUCKETS ? group : LP_CPU_BUCKETS - b;
            uint64_t k = 0;
            for (unsigned i = 0; i < n; i++) k += c->bucket[b + i];
            /* (a sample the timer took late lands in the next point: a busy thread's may hold one
             * more than its share, never more than all of its time) */
            double pct = 100.0 * (double)k * (double)s->period_ns / (width * n);
            if (pct > 100) pct = 100;
            if (pct == last && b + group < LP_CPU_BUCKETS) continue; /* changes only */
            last = pct;
            lp_json_event(j, "C", pid, pid, "cpu", track, strlen(track), (int64_t)((double)b * width));
            lp_json_args(j);
            lp_json_key(j, "cpu");
            lp_json_double(j, "%.1f", pct);
            lp_json_args_end(j);
            lp_json_event_end(j);
        }
    }
}

/* ---- the view (views.h): CPU samples: theirs alone (no writer streams them) */
#define SAMPLES(a) ((struct lp_samples *)(a)->view[LP_VIEW_CPU])
#define SHAPE(s) (1u << LP_SHAPE_##s)
static int view_create(struct lp_analysis *a) {
    int oom = 0;
    a->view[LP_VIEW_CPU] = lp_samples_new(a->r, &oom); /* NULL: no CPU samples */
    return oom ? -1 : 0;
}
static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    (void)s;
    return SAMPLES(a) ? lp_samples_event(SAMPLES(a), e, a->counting) : 0;
}
static int view_fit(struct lp_analysis *a) { return SAMPLES(a) ? lp_samples_fit(SAMPLES(a)) : 0; }
static int view_finish(struct lp_analysis *a) { return lp_samples_finish(SAMPLES(a)); }
static void view_destroy(struct lp_analysis *a) { lp_samples_free(SAMPLES(a)); }

// clang-format off
const struct lp_view lp_view_samples = {"cpu", SHAPE(SAMPLE), view_create, view_event, view_fit, view_finish, view_destroy, view_summary, view_csv, view_chrome, view_metadata};
// clang-format on
