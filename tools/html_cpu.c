/* html_cpu.c: the HTML page's CPU views (LIBPROF_SAMPLE_HZ) — where the CPU went by function and
 * by Python line, each thread's CPU over time (a chart the time window is dragged on), and, from
 * a raw trace, the CPU flame graph with each frame's samples per slice of the run, so that the
 * window redraws it. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "html_cpu.h"

#include "flame.h"
#include "page.h"
#include "lib/fmt.h"
#include "lib/samples.h"
#include "lib/vec.h"
#include "report.h"

#define FLAME_BUCKETS 100 /* the CPU flame graph's slices of the run: a window is exact to 1 % */
#define CHART_THREADS 8   /* threads drawn in the chart (the most sampled); the others summed */

static const char *const cpu_colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f"};

static void table(FILE *f, const char *title, const char *what, const struct lp_cpu_row *rows, size_t n,
                  const struct lp_cpu *cpu, size_t top) {
    if (!n) return;
    fprintf(f,
            "<h3>%s</h3><table class=\"sortable\"><tr><th class=\"n\">%s</th><th>self</th><th>self %%</th>"
            "<th>total</th><th>total %%</th></tr>\n",
            title, what);
    for (size_t i = 0; i < n && i < top; i++) {
        char a[32], b[32];
        lp_fmt_ns(a, sizeof a, (int64_t)(rows[i].self * cpu->period_ns));
        lp_fmt_ns(b, sizeof b, (int64_t)(rows[i].total * cpu->period_ns));
        double all = cpu->samples ? (double)cpu->samples : 1;
        fputs("<tr><td class=\"n\">", f);
        rp_html_esc(f, rows[i].name, strlen(rows[i].name));
        fprintf(f, "</td><td data-v=\"%llu\">%s</td><td>%.1f%%</td><td data-v=\"%llu\">%s</td><td>%.1f%%</td></tr>\n",
                (unsigned long long)rows[i].self, a, 100.0 * (double)rows[i].self / all,
                (unsigned long long)rows[i].total, b, 100.0 * (double)rows[i].total / all);
    }
    fputs("</table>\n", f);
}

static int by_samples(const void *x, const void *y) {
    const struct lp_cpu_thread *a = *(const struct lp_cpu_thread *const *)x,
                               *b = *(const struct lp_cpu_thread *const *)y;
    return a->samples < b->samples ? 1 : a->samples > b->samples ? -1 : 0;
}

/* Each thread's CPU use (percent of one CPU) in each slice of the run, as lines. */
static void chart(FILE *f, const struct lp_cpu *cpu) {
    if (!cpu->nthreads || !cpu->span_ns) return;
    const struct lp_cpu_thread **th = malloc(cpu->nthreads * sizeof *th);
    uint32_t *rest = calloc(LP_CPU_BUCKETS, sizeof *rest);
    if (!th || !rest) {
        free(th);
        free(rest);
        return;
    }
    for (size_t i = 0; i < cpu->nthreads; i++) th[i] = &cpu->threads[i];
    lp_sort(th, cpu->nthreads, sizeof *th, by_samples);
    size_t shown = cpu->nthreads > CHART_THREADS ? CHART_THREADS : cpu->nthreads;
    for (size_t i = shown; i < cpu->nthreads; i++)
        for (unsigned b = 0; b < LP_CPU_BUCKETS; b++) rest[b] += th[i]->bucket[b];
    double width = (double)cpu->span_ns / LP_CPU_BUCKETS, top = 100;
    for (unsigned b = 0; b < LP_CPU_BUCKETS && cpu->nthreads > shown; b++) /* the others: may pass 100 % */
        if (100.0 * rest[b] * (double)cpu->period_ns / width > top)
            top = 100.0 * rest[b] * (double)cpu->period_ns / width;
    char sp[32];
    lp_fmt_ns(sp, sizeof sp, (int64_t)cpu->span_ns);
    fprintf(f,
            "<h3>CPU per thread over time</h3><p>each thread's CPU use (percent of one CPU) in %d slices of the run "
            "(%s); drag across the chart to set the time window</p>\n"
            "<svg id=\"cpu-over-time\" width=\"820\" height=\"240\" viewBox=\"0 0 820 240\" role=\"img\" "
            "aria-label=\"CPU per thread over time\"><rect x=\"60\" y=\"10\" width=\"740\" height=\"200\" "
            "fill=\"#fafafa\" stroke=\"#ccc\"/><text x=\"0\" y=\"20\">%.0f%%</text><text x=\"0\" y=\"210\">0</text>"
            "<text x=\"60\" y=\"230\">0</text><text x=\"740\" y=\"230\">%s</text>\n",
            LP_CPU_BUCKETS, sp, top, sp);
    for (size_t i = 0; i <= shown; i++) {
        if (i == shown && cpu->nthreads == shown) break;
        const uint32_t *v = i < shown ? th[i]->bucket : rest;
        fprintf(f, "<polyline class=\"cpu-line\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\" points=\"",
                cpu_colors[i < shown ? i : CHART_THREADS]);
        for (unsigned b = 0; b < LP_CPU_BUCKETS; b++) {
            double pct = 100.0 * v[b] * (double)cpu->period_ns / width;
            fprintf(f, "%.1f,%.1f ", 60 + 740.0 * (b + 0.5) / LP_CPU_BUCKETS, 210 - 200.0 * pct / top);
        }
        fputs("\"><title>", f);
        if (i < shown)
            rp_html_esc(f, th[i]->name, strlen(th[i]->name));
        else
            fprintf(f, "%zu other threads", cpu->nthreads - shown);
        fputs("</title></polyline>\n", f);
    }
    fputs("</svg>\n<p>", f);
    for (size_t i = 0; i <= shown; i++) {
        if (i == shown && cpu->nthreads == shown) break;
        char t[32];
        lp_fmt_ns(t, sizeof t, (int64_t)((i < shown ? th[i]->samples : 0) * cpu->period_ns));
        fprintf(f, "<span style=\"color:%s\">&#9632;</span> ", cpu_colors[i < shown ? i : CHART_THREADS]);
        if (i < shown) {
            rp_html_esc(f, th[i]->name, strlen(th[i]->name));
            fprintf(f, " (%lld, %s) &nbsp; ", (long long)th[i]->tid, t);
        } else {
            fprintf(f, "%zu other threads", cpu->nthreads - shown);
        }
    }
    fputs("</p>\n", f);
    free(th);
    free(rest);
}

/* ---- the CPU flame graph, from a raw trace ---------------------------------------------------- */

struct build {
    struct lp_samples *s;
    struct rp_flame *t;
    char (*thread)[48]; /* each thread's name, the graph's root frames */
    uint64_t span;
    int oom;
};

static void add_sample(void *arg, uint32_t thread, uint32_t key, uint64_t ns, uint64_t weight) {
    struct build *b = arg;
    if (b->oom) return;
    const char *names[LP_STACK_MAX_FRAMES + 1], *inner[LP_STACK_MAX_FRAMES];
    size_t lens[LP_STACK_MAX_FRAMES + 1];
    unsigned n = lp_samples_frames(b->s, key, inner, LP_STACK_MAX_FRAMES);
    if (!b->thread[thread][0]) lp_samples_thread_name(b->s, thread, b->thread[thread], sizeof b->thread[thread]);
    names[0] = b->thread[thread];
    for (unsigned i = 0; i < n; i++) names[1 + i] = inner[n - 1 - i]; /* root first */
    for (unsigned i = 0; i <= n; i++) lens[i] = strlen(names[i]);
    unsigned bucket = (unsigned)((double)ns / (double)b->span * FLAME_BUCKETS);
    if (rp_flame_add(b->t, names, lens, n + 1, weight, bucket) != 0) b->oom = 1;
}

/* (`given`: the conversion's samples — every sample, as a pass of its own would gather, where
 * the trace has no reset: those before one are not named then) */
static void flame(FILE *f, const struct lp_reader *r, struct lp_samples *given, uint64_t period_ns) {
    int oom = 0;
    if (r->reset_ticks) given = NULL;
    struct build b = {given ? given : lp_samples_new(r, &oom), rp_flame_new(FLAME_BUCKETS), NULL, 0, 0};
    b.thread = calloc((size_t)r->nthreads + 1, sizeof *b.thread);
    int ready = b.s && b.t && b.thread;
    if (ready && !given) { /* a pass of its own */
        struct lp_iter *it = lp_iter_new(r);
        struct lp_event e;
        while (it && lp_iter_next(it, &e))
            if (lp_kind_shape[e.kind] == LP_SHAPE_SAMPLE && lp_samples_event(b.s, &e, 1) != 0) oom = 1;
        ready = it && !oom && lp_samples_finish(b.s) == 0;
        lp_iter_free(it);
    }
    b.span = lp_ticks_to_ns(r, r->last_ticks) + 1;
    if (ready) {
        lp_samples_each_sample(b.s, add_sample, &b);
        if (!b.oom)
            rp_flame_svg(f, b.t, "flame-cpu", "CPU by call stack", "CPU time (samples; the thread at the root)",
                         period_ns);
    }
    rp_flame_free(b.t); /* (before the samples: its names are theirs) */
    if (!given) lp_samples_free(b.s);
    free(b.thread);
}

void rp_html_cpu(FILE *f, const struct lp_slices *c, const struct lp_reader *r, struct lp_samples *samples, int top) {
    size_t rows = top > 0 ? (size_t)top : 25;
    const struct lp_cpu *cpu = &c->cpu;
    if (!cpu->period_ns) return;
    char all[32], per[32];
    lp_fmt_ns(all, sizeof all, (int64_t)(cpu->samples * cpu->period_ns));
    lp_fmt_ns(per, sizeof per, (int64_t)cpu->period_ns);
    fprintf(
        f,
        "<h2 id=\"cpu\">Where the CPU went</h2><p>%llu CPU samples on %zu thread%s, %s of user CPU (one per %s of a "
        "thread's user CPU time); self: the innermost frame, total: anywhere on the stack</p>\n",
        (unsigned long long)cpu->samples, cpu->nthreads, cpu->nthreads == 1 ? "" : "s", all, per);
    table(f, "By function", "function", cpu->fns, cpu->nfns, cpu, rows);
    table(f, "By Python line", "line", cpu->lines, cpu->nlines, cpu, rows);
    chart(f, cpu);
    if (r)
        flame(f, r, samples, cpu->period_ns);
    else
        fputs("<p>(the CPU flame graph is drawn from a raw trace: record to a <code>.lpt</code> file, or with "
              "<code>LIBPROF_FLAMEGRAPH=1</code> for NAME.cpu.folded)</p>\n",
              f);
}
