/* html.c: libprof-report --html — one self-contained page (inline CSS, SVG and script, no
 * network): the top entry points, per-thread busy and kernel shares, the heap over time and by
 * site, a time window that recomputes its table for any stretch of the run, the iteration
 * latencies, the memory / I/O / BLAS tables, and flame graphs (allocated, at the peak, leaked,
 * temporary) with zoom and search. Plots are drawn here as SVG so the page opens anywhere. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "lib/fmt.h"
#include "lib/map.h"
#include "lib/sites.h"
#include "lib/vec.h"
#include "flame.h"
#include "html_cpu.h"
#include "page.h"
#include "report.h"

static void row_emit(void *arg, const char *name, size_t count, const int64_t *v) {
    FILE *f = arg;
    fputs("<tr><td class=\"n\">", f);
    rp_html_esc(f, name, strlen(name));
    fprintf(f, "</td><td>%zu</td>", count);
    for (int k = 0; k < 7; k++) {
        if (k == 6 && v[k] < 0) break; /* no CPU samples */
        char b[32];
        lp_fmt_ns(b, sizeof b, v[k]);
        fprintf(f, "<td data-v=\"%lld\">%s</td>", (long long)v[k], b);
    }
    fputs("</tr>\n", f);
}

static void op_row_emit(void *arg, const struct lp_op_row *r, int64_t cpu) {
    FILE *f = arg;
    fputs("<tr><td class=\"n\">", f);
    rp_html_esc(f, r->name, strlen(r->name));
    fprintf(f, "</td><td>%llu</td>", (unsigned long long)r->count);
    int64_t v[6] = {(int64_t)r->total_ns, (int64_t)r->self_ns, (int64_t)r->mean_ns,
                    (int64_t)r->p50_ns,   (int64_t)r->p99_ns,  cpu};
    for (int k = 0; k < 6; k++) {
        char b[32] = "-";
        if (v[k] >= 0) lp_fmt_ns(b, sizeof b, v[k]);
        fprintf(f, "<td data-v=\"%lld\">%s</td>", (long long)v[k], b);
    }
    for (int k = 0; k < 2; k++) {
        char b[32];
        uint64_t x = k ? r->bytes_total : r->bytes_self;
        lp_fmt_bytes(b, sizeof b, x);
        fprintf(f, "<td data-v=\"%llu\">%s</td>", (unsigned long long)x, b);
    }
    fputs("</tr>\n", f);
}

/* The slices carry the CPU sampled while they ran. */
static int has_cpu(const struct lp_slices *c) {
    if (c->cpu.period_ns) return 1;
    for (size_t i = 0; i < c->nslices; i++)
        if (c->slices[i].cpu_ns >= 0) return 1;
    return 0;
}

struct bars {
    FILE *f;
    int y;
};
static void thread_emit(void *arg, const struct rp_thread_share *t) {
    struct bars *b = arg;
    double bw = t->wall > 0 ? 600.0 * (double)t->busy / (double)t->wall : 0,
           kw = t->wall > 0 ? 600.0 * (double)t->kernel / (double)t->wall : 0;
    char w[32], c[192] = "";
    lp_fmt_ns(w, sizeof w, t->wall);
    if (t->cpu > 0) { /* the samples: CPU, and the framework tax as the share of it outside kernels */
        char ct[32];
        lp_fmt_ns(ct, sizeof ct, t->cpu);
        snprintf(c, sizeof c, ", %s CPU (%.0f%% outside kernels)", ct,
                 100.0 * (double)(t->cpu - (t->cpu_kernel < t->cpu ? t->cpu_kernel : t->cpu)) / (double)t->cpu);
    }
    if (t->gil_wait >= 0) { /* a Python program's threads: the GIL and the time blocked */
        char gw[32], gh[32], off[32];
        lp_fmt_ns(gw, sizeof gw, t->gil_wait);
        lp_fmt_ns(gh, sizeof gh, t->gil_held);
        lp_fmt_ns(off, sizeof off, t->off_cpu);
        size_t n = strlen(c);
        snprintf(c + n, sizeof c - n, "; GIL wait %s, held %s, off-CPU %s", gw, gh, off);
        if (t->wall > 0)
            fprintf(b->f,
                    "<rect x=\"160\" y=\"%d\" width=\"%.1f\" height=\"4\" fill=\"#e6550d\"><title>GIL wait "
                    "%s</title></rect><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"4\" fill=\"#636363\">"
                    "<title>off-CPU %s</title></rect>",
                    b->y + 16, 600.0 * (double)t->gil_wait / (double)t->wall, gw,
                    160 + 600.0 * (double)t->gil_wait / (double)t->wall, b->y + 16,
                    600.0 * (double)t->off_cpu / (double)t->wall, off);
    }
    fprintf(b->f, "<text x=\"0\" y=\"%d\">%lld/%lld</text>", b->y + 13, (long long)t->pid, (long long)t->tid);
    if (t->wall > 0)
        fprintf(b->f,
                "<rect x=\"160\" y=\"%d\" width=\"600\" height=\"16\" fill=\"#eee\"/>"
                "<rect x=\"160\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"#9ecae1\"><title>busy "
                "%.1f%%</title></rect>"
                "<rect x=\"160\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"#3182bd\"><title>kernel "
                "%.1f%%</title></rect>"
                "<text x=\"160\" y=\"%d\" class=\"bar-label\">%s wall, %.0f%% busy, %.0f%% kernel%s</text>\n",
                b->y, b->y, bw, bw / 6, b->y, kw, kw / 6, b->y + 31, w, bw / 6, kw / 6, c);
    else
        fprintf(b->f, "<text x=\"160\" y=\"%d\">no traced call%s</text>\n", b->y + 13, c);
    b->y += 40; /* the bar, and its label on a line of its own under it: it never runs off the page */
}

/* What the page draws of a raw trace's heap events, gathered by one pass (heap_pass): the live
 * heap's curve — the maximum of each of HEAP_POINTS slices of the run, and the peak — and the
 * time window's allocation rows (wrow: calls and bytes in each of WB slices of its span). */
enum { HEAP_POINTS = 1000, WB = 400 };
struct wrow {
    char name[64];
    int alloc; /* 1: value is bytes; 0: ns */
    uint64_t *calls, *value;
    uint64_t total;
};
struct heap_pass {
    double *mx;
    uint8_t *has;
    uint64_t span, peak;
    struct wrow *rows; /* (handed to time_window, which frees them) */
    size_t n, cap;
    uint64_t wspan;
    int oom;
};

/* The live heap over time from a raw trace: up to HEAP_POINTS points (the maximum of each
 * slice of the run), from heap_pass. */
static void heap_plot(FILE *f, const struct heap_pass *h) {
    enum { N = HEAP_POINTS };
    const double *mx = h->mx;
    const uint8_t *has = h->has;
    uint64_t span = h->span, peak = h->peak;
    if (peak > 0) {
        char pk[32], sp[32];
        lp_fmt_bytes(pk, sizeof pk, (uint64_t)peak);
        lp_fmt_ns(sp, sizeof sp, (int64_t)span);
        fprintf(f, "<h2>Heap over time</h2><p>live requested bytes; peak %s; run %s</p>\n", pk, sp);
        fprintf(f,
                "<svg id=\"heap-over-time\" width=\"820\" height=\"240\" viewBox=\"0 0 820 240\" role=\"img\" "
                "aria-label=\"heap over time\">"
                "<rect x=\"60\" y=\"10\" width=\"740\" height=\"200\" fill=\"#fafafa\" stroke=\"#ccc\"/>"
                "<text x=\"0\" y=\"20\">%s</text><text x=\"0\" y=\"210\">0</text><text x=\"60\" "
                "y=\"230\">0</text><text x=\"740\" y=\"230\">%s</text>"
                "<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\" points=\"",
                pk, sp);
        double last = 0;
        for (int b = 0; b < N; b++) {
            if (has[b]) last = mx[b];
            fprintf(f, "%.1f,%.1f ", 60 + 740.0 * b / (N - 1), 210 - 200.0 * last / (double)peak);
        }
        fputs("\"/></svg>\n", f);
    }
}

/* "heap by site over time": the live bytes of the top call stacks, stacked, over the run (the
 * series the trace's conversion made). */
static void site_plot(FILE *f, const struct lp_site_series *ss) {
    if (!ss || ss->nseries < 2) return;
    static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                         "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78",
                                         "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#dddddd"};
    uint64_t top = 1;
    for (unsigned b = 0; b < ss->buckets; b++) {
        uint64_t sum = 0;
        for (unsigned i = 0; i < ss->nseries; i++) sum += ss->v[(size_t)b * ss->nseries + i];
        if (sum > top) top = sum;
    }
    char pk[32], sp[32];
    lp_fmt_bytes(pk, sizeof pk, top);
    lp_fmt_ns(sp, sizeof sp, (int64_t)ss->span_ns);
    fprintf(f,
            "<h2>Heap by site over time</h2><p>live requested bytes of the %u call stacks that held the most, and "
            "all the others; %u samples over %s</p>\n",
            ss->nseries - 1, ss->buckets, sp);
    fprintf(f,
            "<svg id=\"sites-over-time\" width=\"820\" height=\"240\" viewBox=\"0 0 820 240\" role=\"img\" "
            "aria-label=\"heap by site over time\"><rect x=\"60\" y=\"10\" width=\"740\" height=\"200\" "
            "fill=\"#fafafa\" stroke=\"#ccc\"/><text x=\"0\" y=\"20\">%s</text><text x=\"0\" y=\"210\">0</text>"
            "<text x=\"740\" y=\"230\">%s</text>\n",
            pk, sp);
    /* each series an area between the running sums below and above it */
    for (unsigned i = 0; i < ss->nseries; i++) {
        fprintf(f, "<polygon class=\"site\" fill=\"%s\" fill-opacity=\"0.85\" points=\"", colors[i % 17]);
        for (unsigned b = 0; b < ss->buckets; b++) { /* the upper edge, left to right */
            uint64_t up = 0;
            for (unsigned k = 0; k <= i; k++) up += ss->v[(size_t)b * ss->nseries + k];
            fprintf(f, "%.1f,%.1f ", 60 + 740.0 * b / (ss->buckets - 1), 210 - 200.0 * (double)up / (double)top);
        }
        for (unsigned b = ss->buckets; b-- > 0;) { /* the lower edge, back */
            uint64_t lo = 0;
            for (unsigned k = 0; k < i; k++) lo += ss->v[(size_t)b * ss->nseries + k];
            fprintf(f, "%.1f,%.1f ", 60 + 740.0 * b / (ss->buckets - 1), 210 - 200.0 * (double)lo / (double)top);
        }
        fputs("\"><title>", f);
        rp_html_esc(f, ss->label[i], strlen(ss->label[i]));
        fputs("</title></polygon>\n", f);
    }
    fputs("</svg><ul class=\"legend\">", f);
    for (unsigned i = 0; i < ss->nseries; i++) {
        fprintf(f, "<li><span style=\"background:%s\">&nbsp;&nbsp;&nbsp;</span> ", colors[i % 17]);
        rp_html_esc(f, ss->label[i], strlen(ss->label[i]));
        fputs("</li>", f);
    }
    fputs("</ul>\n", f);
}

/* ---- the time window ------------------------------------------------------------------------- *
 * The run cut into WB buckets; per row (each allocation function — calls, bytes allocated or
 * released —, and each of the 30 entry points with the most time — calls, time) the nonzero
 * buckets as [bucket, calls, value] triples, in a JSON block the page's script sums over the
 * buckets a window covers. A few kilobytes whatever the event count; a window is exact to one
 * bucket (span / 400) at its edges. */

static struct wrow *wrow_of(struct wrow **rows, size_t *n, size_t *cap, const char *name, int alloc) {
    for (size_t i = 0; i < *n; i++)
        if ((*rows)[i].alloc == alloc && !strcmp((*rows)[i].name, name)) return &(*rows)[i];
    if (LP_RESERVE(*rows, *cap, *n + 1) != 0) return NULL;
    struct wrow *w = &(*rows)[(*n)++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->alloc = alloc;
    w->calls = calloc(WB, sizeof *w->calls);
    w->value = calloc(WB, sizeof *w->value);
    if (!w->calls || !w->value) return NULL;
    return w;
}

/* The allocation row of kind `kind` (LP_KIND_COUNT: the frees'), found once per kind, not by
 * its name at every event. */
static struct wrow *row_by_kind(struct wrow **rows, size_t *n, size_t *cap, size_t *kind_row, unsigned kind,
                                const char *name) {
    if (kind_row[kind]) return &(*rows)[kind_row[kind] - 1];
    struct wrow *w = wrow_of(rows, n, cap, name, 1);
    if (w) kind_row[kind] = (size_t)(w - *rows) + 1;
    return w;
}

static int by_total(const void *a, const void *b) {
    const struct wrow *x = a, *y = b;
    return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

/* The time window's span: the run's, or longer where a slice ends after it. */
static uint64_t window_span(const struct lp_slices *c, const struct lp_reader *r) {
    uint64_t span = 1;
    if (r) span = lp_ticks_to_ns(r, r->last_ticks) + 1;
    for (size_t i = 0; i < c->nslices; i++)
        if ((uint64_t)(c->slices[i].ts_ns + c->slices[i].dur_ns) >= span)
            span = (uint64_t)(c->slices[i].ts_ns + c->slices[i].dur_ns) + 1;
    return span;
}

/* One pass over a raw trace's heap events for what the page draws of them: the live heap's
 * curve (heap_plot) and the time window's allocation rows (time_window). `r` NULL: the span
 * alone. */
static void heap_pass(struct heap_pass *h, const struct lp_slices *c, const struct lp_reader *r) {
    memset(h, 0, sizeof *h);
    h->wspan = window_span(c, r);
    if (!r) return;
    h->span = lp_ticks_to_ns(r, r->last_ticks) + 1;
    struct lp_iter *it = lp_iter_new(r);
    if (!it) return;
    h->mx = calloc(HEAP_POINTS, sizeof *h->mx);
    h->has = calloc(HEAP_POINTS, 1);
    int curve = h->mx && h->has;
    struct lp_map live = {0};
    uint64_t cur = 0;
    size_t kind_row[LP_KIND_COUNT + 1] = {0}; /* a kind's row, 1 + its index (the last: frees) */
    struct lp_event e;
    while ((curve || !h->oom) && lp_iter_next(it, &e)) {
        uint64_t v, gone = 0, freed, born, size;
        lp_event_blocks(&e, &freed, &born, &size);
        if (!freed && !born) continue;
        /* the block released, then the one made (a realloc's, perhaps at the same address); one
         * made over a block still live replaces it */
        if (freed && lp_map_take(&live, freed, &gone)) cur -= gone;
        if (born) {
            if (lp_map_take(&live, born, &v)) cur -= v;
            if (lp_map_put(&live, born, size, NULL) < 0) {
                h->oom = 1;
                curve = 0;
                break;
            }
            cur += size;
        }
        if (curve) {
            size_t b = (size_t)((double)e.ns / (double)h->span * HEAP_POINTS);
            if (b >= HEAP_POINTS) b = HEAP_POINTS - 1;
            if (!h->has[b] || cur > h->mx[b]) h->mx[b] = (double)cur;
            h->has[b] = 1;
            if (cur > h->peak) h->peak = cur;
        }
        if (h->oom) continue;
        size_t b = (size_t)((double)e.ns / (double)h->wspan * WB);
        if (b >= WB) b = WB - 1;
        struct wrow *w;
        if (born) {
            if (!(w = row_by_kind(&h->rows, &h->n, &h->cap, kind_row, e.kind, lp_kind_names[e.kind]))) {
                h->oom = 1;
                continue;
            }
            w->calls[b]++;
            w->value[b] += size;
            w->total += size;
        }
        if (freed && e.phase == 1) { /* a free (a realloc's release is part of its row) */
            if (!(w = row_by_kind(&h->rows, &h->n, &h->cap, kind_row, LP_KIND_COUNT, "free (bytes released)"))) {
                h->oom = 1;
                continue;
            }
            w->calls[b]++;
            w->value[b] += gone;
            w->total += gone;
        }
    }
    lp_map_free(&live);
    lp_iter_free(it);
}

static void time_window(FILE *f, const struct lp_slices *c, struct heap_pass *h) {
    uint64_t span = h->wspan;
    struct wrow *rows = h->rows;
    size_t n = h->n, cap = h->cap;
    int oom = h->oom;
    h->rows = NULL; /* (freed here) */
    /* entry points: each slice in the bucket of its start */
    size_t first_call = n;
    size_t *row_of = calloc(c->nnames + 1, sizeof *row_of); /* name -> 1 + its row (0: none yet) */
    if (!row_of) oom = 1;
    for (size_t i = 0; i < c->nslices && !oom; i++) {
        const struct lp_slice *sl = &c->slices[i];
        if (!row_of[sl->name]) {
            if (!wrow_of(&rows, &n, &cap, c->names[sl->name], 0) || !rows[n - 1].calls || !rows[n - 1].value) {
                oom = 1;
                break;
            }
            row_of[sl->name] = n;
        }
        struct wrow *w = &rows[row_of[sl->name] - 1];
        size_t b = sl->ts_ns <= 0 ? 0 : (size_t)((double)sl->ts_ns / (double)span * WB);
        if (b >= WB) b = WB - 1;
        w->calls[b]++;
        w->value[b] += (uint64_t)(sl->dur_ns > 0 ? sl->dur_ns : 0);
        w->total += (uint64_t)(sl->dur_ns > 0 ? sl->dur_ns : 0);
    }
    free(row_of);
    if (!oom && n > first_call) lp_sort(rows + first_call, n - first_call, sizeof *rows, by_total);
    size_t made = n;
    if (n > first_call + 30) n = first_call + 30;
    /* each sampled thread's CPU: samples (as calls) and their time, from its buckets of the run */
    const struct lp_cpu *cpu = &c->cpu;
    for (; made > n; made--) { /* the entry points cut off above */
        free(rows[made - 1].calls);
        free(rows[made - 1].value);
    }
    for (size_t t = 0; t < cpu->nthreads && t < 16 && !oom && cpu->span_ns; t++) {
        char name[80];
        snprintf(name, sizeof name, "CPU: %s", cpu->threads[t].name);
        struct wrow *w = wrow_of(&rows, &n, &cap, name, 0);
        made = n;
        if (!w || !w->calls || !w->value) {
            oom = 1;
            break;
        }
        for (unsigned b = 0; b < LP_CPU_BUCKETS; b++) {
            uint64_t at = (uint64_t)(((double)b + 0.5) * (double)cpu->span_ns / LP_CPU_BUCKETS);
            size_t wb = (size_t)((double)at / (double)span * WB);
            if (wb >= WB) wb = WB - 1;
            w->calls[wb] += cpu->threads[t].bucket[b];
            w->value[wb] += cpu->threads[t].bucket[b] * cpu->period_ns;
            w->total += cpu->threads[t].bucket[b] * cpu->period_ns;
        }
    }
    if (!oom && n) {
        char sp[32];
        lp_fmt_ns(sp, sizeof sp, (int64_t)span);
        fprintf(f,
                "<h2 id=\"time-window\">Time window</h2><p>the run (%s) cut into %d slices of time; "
                "choose a window — drag across a chart above, or type it — and the table below counts only "
                "what started in it.</p>\n<p>from <input id=\"win-from\" type=\"number\" step=\"any\" value=\"0\"> ms "
                "to <input id=\"win-to\" type=\"number\" step=\"any\" value=\"%.3f\"> ms "
                "<button id=\"win-all\">whole run</button> <span id=\"win-said\"></span></p>\n"
                "<table id=\"window\" class=\"sortable\"><tr><th class=\"n\">name</th><th>calls</th>"
                "<th>bytes / time</th></tr></table>\n<script id=\"window-data\" type=\"application/json\">"
                "{\"span_ns\":%llu,\"buckets\":%d,\"rows\":[",
                sp, WB, (double)span / 1e6, (unsigned long long)span, WB);
        for (size_t i = 0; i < n; i++) {
            fprintf(f, "%s{\"name\":\"", i ? "," : "");
            for (const char *q = rows[i].name; *q; q++) { /* inside a script element: no '<' either */
                if (*q == '"' || *q == '\\') fputc('\\', f);
                if ((unsigned char)*q < 0x20 || *q == '<')
                    fprintf(f, "\\u%04x", (unsigned char)*q);
                else
                    fputc(*q, f);
            }
            fprintf(f, "\",\"bytes\":%d,\"b\":[", rows[i].alloc);
            int first = 1;
            for (int b = 0; b < WB; b++) {
                if (!rows[i].calls[b]) continue;
                fprintf(f, "%s%d,%llu,%llu", first ? "" : ",", b, (unsigned long long)rows[i].calls[b],
                        (unsigned long long)rows[i].value[b]);
                first = 0;
            }
            fputs("]}", f);
        }
        fputs("]}</script>\n", f);
    }
    for (size_t i = 0; i < made; i++) {
        free(rows[i].calls);
        free(rows[i].value);
    }
    free(rows);
}

/* The window's script: sums each row's buckets in [from, to), redraws the table and the CPU
 * flame graph; dragging across the heap, the sites or the CPU chart sets the window. */
#define WINDOW_JS                                                                                                      \
    "<script>\n"                                                                                                       \
    "(function(){var d=document.getElementById('window-data');if(!d)return;var D=JSON.parse(d.textContent);"           \
    "var T=document.getElementById('window'),F=document.getElementById('win-from'),"                                   \
    "E=document.getElementById('win-to'),S=document.getElementById('win-said'),ms=D.span_ns/1e6;"                      \
    "function fmt(v,b){if(b){var u=['B','KiB','MiB','GiB'],i=0;while(v>=1024&&i<3){v/=1024;i++;}"                      \
    "return (i?v.toFixed(1):v)+' '+u[i];}var t=['ns','us','ms','s'],k=0;while(v>=1000&&k<3){v/=1000;k++;}"             \
    "return (k?v.toFixed(1):v)+' '+t[k];}\n"                                                                           \
    "function show(){var a=Math.max(0,+F.value||0),z=Math.min(ms,E.value===''?ms:+E.value);"                           \
    "var lo=Math.floor(a/ms*D.buckets),hi=Math.ceil(z/ms*D.buckets);if(hi<=lo)hi=lo+1;"                                \
    "while(T.rows.length>1)T.deleteRow(1);var out=[];D.rows.forEach(function(r){var c=0,v=0;"                          \
    "for(var i=0;i<r.b.length;i+=3)if(r.b[i]>=lo&&r.b[i]<hi){c+=r.b[i+1];v+=r.b[i+2];}"                                \
    "if(c)out.push([r.name,c,v,r.bytes]);});out.sort(function(x,y){return (y[3]-x[3])||(y[2]-x[2]);});"                \
    "out.forEach(function(o){var tr=T.insertRow();tr.dataset.name=o[0];var c0=tr.insertCell();c0.className='n';"       \
    "c0.textContent=o[0];var c1=tr.insertCell();c1.textContent=o[1];c1.dataset.v=o[1];"                                \
    "var c2=tr.insertCell();c2.textContent=fmt(o[2],o[3]);c2.dataset.v=o[2];});"                                       \
    "T.dataset.lo=lo;T.dataset.hi=hi;S.textContent=(lo*ms/D.buckets).toFixed(3)+' - '+"                                \
    "(hi*ms/D.buckets).toFixed(3)+' ms';"                                                                              \
    "if(window.rpFlameWindow)rpFlameWindow(lo,hi,D.buckets);"                                                          \
    "['heap-over-time','sites-over-time','cpu-over-time'].forEach(function(id){var g=document.getElementById(id);"     \
    "if(!g)return;var r=g.querySelector('rect.win-band');if(!r){r=document.createElementNS(g.namespaceURI,'rect');"    \
    "r.setAttribute('class','win-band');r.setAttribute('y',10);r.setAttribute('height',200);"                          \
    "r.setAttribute('fill','#1f77b4');r.setAttribute('fill-opacity','0.15');r.style.pointerEvents='none';"             \
    "g.appendChild(r);}var whole=lo==0&&hi>=D.buckets;r.style.display=whole?'none':'';"                                \
    "r.setAttribute('x',60+740*lo/D.buckets);r.setAttribute('width',740*(hi-lo)/D.buckets);});}\n"                     \
    "F.addEventListener('input',show);E.addEventListener('input',show);"                                               \
    "document.getElementById('win-all').addEventListener('click',function(){F.value=0;E.value=ms.toFixed(3);show();})" \
    ";"                                                                                                                \
    "['heap-over-time','sites-over-time','cpu-over-time'].forEach(function(id){var g=document.getElementById(id);"     \
    "if(!g)return;var x0=null;function at(ev){var b=g.getBoundingClientRect(),x=(ev.clientX-b.left)*820/b.width;"      \
    "return Math.min(1,Math.max(0,(x-60)/740))*ms;}"                                                                   \
    "g.addEventListener('mousedown',function(ev){x0=at(ev);ev.preventDefault();});"                                    \
    "g.addEventListener('mouseup',function(ev){if(x0===null)return;var x1=at(ev);"                                     \
    "F.value=Math.min(x0,x1).toFixed(3);E.value=Math.max(x0,x1).toFixed(3);x0=null;show();"                            \
    "document.getElementById('time-window').scrollIntoView();});});show();})();\n"                                     \
    "</script>\n"

static void iteration_chart(FILE *f, const struct lp_slices *c, const struct rp_opts *o) {
    size_t n;
    int64_t *lat = rp_iteration_latencies(c, o, &n);
    if (!lat || !n) {
        free(lat);
        return;
    }
    int64_t mx = 1;
    for (size_t i = 0; i < n; i++) mx = lat[i] > mx ? lat[i] : mx;
    size_t show = n > 200 ? 200 : n;
    double bw = 740.0 / (double)show;
    char m[32];
    lp_fmt_ns(m, sizeof m, mx);
    fprintf(f, "<h2>Iterations</h2><p>latency of each <code>");
    rp_html_esc(f, o->iterations, strlen(o->iterations));
    fprintf(f,
            "</code> (%zu%s; the first %d are warm-up)</p>\n<svg width=\"820\" height=\"240\" viewBox=\"0 0 820 240\" "
            "role=\"img\" "
            "aria-label=\"iteration latencies\"><text x=\"0\" y=\"20\">%s</text>",
            n, n > show ? ", first 200 shown" : "", o->skip, m);
    for (size_t i = 0; i < show; i++) {
        double h = 200.0 * (double)lat[i] / (double)mx;
        char d[32];
        lp_fmt_ns(d, sizeof d, lat[i]);
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>iteration %zu: "
                "%s</title></rect>",
                60 + bw * (double)i, 210 - h, bw * 0.8, h, (int)i < o->skip ? "#bbb" : "#2ca02c", i, d);
    }
    fputs("</svg>\n", f);
    free(lat);
}

int rp_html(FILE *f, const char *label, const struct lp_slices *c, const struct lp_reader *r,
            const struct rp_page_parts *parts, const struct rp_opts *o) {
    const char *summary = parts ? parts->summary : NULL;
    const char *const *folded = parts ? (const char *const *)parts->folded : NULL;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=utf-8><title>libprof report: ", f);
    rp_html_esc(f, label, strlen(label));
    fputs(
        "</"
        "title>\n<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;font-size:"
        "13px}"
        "td,th{border-bottom:1px solid #ddd;padding:2px "
        "8px;text-align:right;white-space:nowrap}td.n,th.n{text-align:left;font-family:monospace;white-space:normal}"
        "pre{background:#f6f6f6;padding:1em;font-size:12px;overflow-x:auto}svg{font-size:12px}</style></head><body>\n",
        f);
    fputs("<h1>libprof report</h1><p>", f);
    rp_html_esc(f, label, strlen(label));
    fprintf(f, " — %zu slices</p>\n", c->nslices);
    if (c->nslices) { /* timed calls and ranges: absent from an allocation-only trace */
        fputs("<h2>Top entry points</h2><table class=\"sortable\"><tr><th "
              "class=\"n\">name</th><th>count</th><th>total</th><th>self</th><th>mean</th>"
              "<th>p50</th><th>p99</th><th>max</th>",
              f);
        if (has_cpu(c)) fputs("<th title=\"CPU sampled on the slice's thread while it ran\">cpu</th>", f);
        fputs("</tr>\n", f);
        struct rp_opts top = *o;
        if (top.top <= 0) top.top = 25;
        rp_top_rows(c, &top, row_emit, f);
        fputs("</table>\n<h2>Threads</h2><p>share of each thread's wall time spent in traced calls (light) and in "
              "kernels "
              "(dark); the rest is framework tax</p>\n<svg width=\"1000\" height=",
              f);
        /* the height needs the thread count: draw into a second pass */
        struct bars b = {f, 0};
        long pos = ftell(f);
        fputs("000000 role=img aria-label=\"threads\">\n", f);
        rp_thread_shares(c, o, thread_emit, &b);
        fputs("</svg>\n", f);
        long end = ftell(f);
        if (pos >= 0 && end >= 0 && fseek(f, pos, SEEK_SET) == 0) { /* patch the height in place */
            fprintf(f, "%06d", b.y + 4);
            fseek(f, end, SEEK_SET);
        }
    }
    if (c->nops) { /* PyTorch's operators */
        fputs("<h2>PyTorch operators</h2><p>self: outside child operators; bytes: allocated inside the operator "
              "(self: not inside a child operator)</p><table class=\"sortable\"><tr><th class=\"n\">operator</th>"
              "<th>count</th><th>total</th><th>self</th><th>mean</th><th>p50</th><th>p99</th><th>cpu</th>"
              "<th>bytes self</th><th>bytes total</th></tr>\n",
              f);
        struct rp_opts top = *o;
        if (top.top <= 0) top.top = 40;
        rp_torch_rows(c, &top, 0, op_row_emit, f);
        fputs("</table>\n", f);
    }
    rp_html_cpu(f, c, r, parts ? parts->samples : NULL, o->top); /* where the CPU went, when it has samples */
    struct heap_pass hp;
    heap_pass(&hp, c, r);
    if (r) heap_plot(f, &hp);
    if (parts) site_plot(f, &parts->sites);
    time_window(f, c, &hp);
    free(hp.mx);
    free(hp.has);
    if (o->iterations) iteration_chart(f, c, o);
    /* allocated, at the peak, leaked, temporary: each a flame graph of its own */
    static const char *const ids[4] = {"flame-alloc", "flame-peak", "flame-leaks", "flame-temp"};
    static const char *const titles[4] = {"Allocated bytes by call stack", "The heap at its peak by call stack",
                                          "Leaked bytes by call stack", "Temporary allocations by call stack"};
    static const char *const what[4] = {"bytes allocated", "bytes live at the heap's peak", "bytes never freed",
                                        "bytes of allocations released right after"};
    for (int k = 0; k < 4; k++) {
        if (!folded || !folded[k] || !folded[k][0]) continue;
        struct rp_flame *t = rp_flame_new(0);
        if (t && rp_flame_add_folded(t, folded[k]) == 0) rp_flame_svg(f, t, ids[k], titles[k], what[k], 0);
        rp_flame_free(t);
    }
    fputs(rp_flame_js, f);
    fputs(WINDOW_JS, f);
    if (summary && *summary) {
        fputs("<h2>Memory, I/O, BLAS, oneDNN, allocation sites, Python lines</h2><pre>", f);
        rp_html_esc(f, summary, strlen(summary));
        fputs("</pre>\n", f);
    }
    fputs("<p><small>written by libprof-report " LIBPROF_VERSION "</small></p></body></html>\n", f);
    return ferror(f) ? -1 : 0;
}
