/* write_tables.c: the converter's table writers (struct lp_sink, totals only) — the CSV summary
 * (one row per function, entry point, shape, file, site; schema in the README) and the
 * human-readable table printed with LIBPROF_SUMMARY=1 and by libprof-report. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "write_tables.h"

#include "analysis.h"
#include "calls.h"
#include "sites.h"
#include "views.h"
#include "samples.h"
#include "fmt.h"

/* Timing columns are empty for a function none of whose calls were timed (allocation calls
 * without LIBPROF_ALLOC_TIMING=1); statistics are over the timed calls (lp_csv_row, calls.c). */
static void csv_finish(struct lp_sink *k, const struct lp_analysis *a) {
    struct lp_out *o = k->out;
    lp_out_s(o, "name,category,count,total_ns,mean_ns,min_ns,p50_ns,p90_ns,p99_ns,max_ns,bytes,gflops,temporary\n");
    for (unsigned kind = 1; kind < LP_KIND_COUNT; kind++) {
        /* ranges: per name below; calls: calls.c */
        if (kind == LP_EV_RANGE || kind == LP_EV_CALL || lp_kind_family[kind] == LP_FAM_CONTROL) continue;
        lp_csv_row(o, lp_kind_names[kind], strlen(lp_kind_names[kind]), lp_family_names[lp_kind_family[kind]],
                   &a->fn[kind], 0);
    }
    for (size_t id = 0; id < a->nranges; id++) {
        uint32_t len;
        const char *name = lp_reader_name(a->r, id, &len);
        lp_csv_row(o, name, len, "annot", &a->ranges[id], 0);
    }
    lp_calls_csv(a->calls, o);
    if (a->sites) lp_sites_csv(a->sites, o);
    for (unsigned v = 0; v < lp_nviews; v++) /* the families' views (views.c) */
        if (lp_views[v]->csv) lp_views[v]->csv(a, o);
}

int lp_sink_csv(struct lp_sink *k) {
    k->finish = csv_finish;
    return 0;
}

static void size_histogram(struct lp_out *o, const struct lp_analysis *a) {
    uint64_t total = 0, maxc = 0;
    for (unsigned b = 0; b < LP_SIZE_BUCKETS; b++) {
        total += a->size_hist[b];
        if (a->size_hist[b] > maxc) maxc = a->size_hist[b];
    }
    if (!total) return;
    lp_out_s(o, "  block sizes:\n");
    for (unsigned b = 0; b < LP_SIZE_BUCKETS; b++) {
        uint64_t c = a->size_hist[b];
        if (!c) continue;
        char lo[16], hi[16];
        uint64_t l = b == 0 ? 0 : UINT64_C(1) << (b + 3), h = (UINT64_C(1) << (b + 4)) - 1;
        lp_fmt_bytes(lo, sizeof lo, l);
        lp_fmt_bytes(hi, sizeof hi, h);
        int bar = (int)((c * 40 + maxc - 1) / maxc);
        lp_out_fmt(o, "  %10s-%-10s %10llu %3llu%% ", lo, b == LP_SIZE_BUCKETS - 1 ? "" : hi, (unsigned long long)c,
                   (unsigned long long)(c * 100 / total));
        for (int i = 0; i < bar; i++) lp_out_c(o, '#');
        lp_out_c(o, '\n');
    }
}

/* "libprof's memory": what libprof's own mappings held at the end, the parts that hold most
 * first, and the address space reserved around them (costs nothing until touched). */
static void own_memory(struct lp_out *o, const struct lp_own_memory *m) {
    uint64_t res = 0, rsv = 0;
    unsigned order[LP_OWN_PARTS], n = 0;
    for (unsigned p = 0; p < LP_OWN_PARTS; p++) {
        res += m->resident[p], rsv += m->reserved[p];
        if (m->resident[p] < 64 * 1024) continue;
        unsigned i = n++;
        for (; i > 0 && m->resident[order[i - 1]] < m->resident[p]; i--) order[i] = order[i - 1];
        order[i] = p;
    }
    char v[32];
    lp_fmt_bytes(v, sizeof v, rsv);
    lp_out_fmt(o, "  libprof's memory: %s%.1f MiB resident at the end", m->flags & LP_OWN_UPPER_BOUND ? "at most " : "",
               (double)res / (1024.0 * 1024.0));
    for (unsigned i = 0; i < n; i++) /* (all in MiB: parts compared at a glance) */
        lp_out_fmt(o, "%s%s %.1f MiB", i ? ", " : " (", lp_own_part_names[order[i]],
                   (double)m->resident[order[i]] / (1024.0 * 1024.0));
    lp_out_fmt(o, "%s; %s of address space reserved\n", n ? ")" : "", v);
}

static void summary_finish(struct lp_sink *k, const struct lp_analysis *a) {
    struct lp_out *o = k->out;
    const struct lp_reader *r = a->r;
    const char *label = a->opts->trace_label;
    const char *exe = r->exe ? r->exe : "?";
    uint32_t n = r->exe ? r->exe_len : 1, b = 0;
    for (uint32_t i = 0; i < n; i++)
        if (exe[i] == '/') b = i + 1;
    lp_out_fmt(o, "libprof: %.*s (pid %u): %.3f s, %llu events%s%s%s\n", (int)(n - b), exe + b, r->hdr.pid,
               (double)a->span_ns / 1e9, (unsigned long long)a->events, label ? ", trace " : "", label ? label : "",
               a->opts->live             ? " [so far: the program is running]"
               : r->end && !r->truncated ? (r->damaged ? " [damaged parts skipped]" : "")
                                         : " [trace cut short]");
    lp_out_fmt(o, "  %-15s %12s %14s %8s %9s %9s %9s\n", "function", "calls", "bytes", "failed", "mean ns", "p50 ns",
               "p99 ns");
    for (unsigned kind = 1; kind < LP_KIND_COUNT; kind++) {
        const struct fnstat *f = &a->fn[kind];
        if (!f->count || kind == LP_EV_RANGE || kind == LP_EV_CALL || lp_kind_family[kind] == LP_FAM_CONTROL) continue;
        lp_out_fmt(o, "  %-15s %12llu %14llu %8llu", lp_kind_names[kind], (unsigned long long)f->count,
                   (unsigned long long)f->bytes, (unsigned long long)f->failed);
        if (f->timed)
            lp_out_fmt(o, " %9llu %9llu %9llu\n", (unsigned long long)(f->total_ns / f->timed),
                       (unsigned long long)lp_percentile(f, 0.5), (unsigned long long)lp_percentile(f, 0.99));
        else
            lp_out_fmt(o, " %9s %9s %9s\n", "-", "-", "-");
    }
    for (size_t id = 0; id < a->nranges; id++) {
        const struct fnstat *f = &a->ranges[id];
        if (!f->count) continue;
        uint32_t len;
        const char *name = lp_reader_name(r, id, &len);
        lp_out_fmt(o, "  %-15.*s %12llu %14s %8s %9llu %9llu %9llu  (range)\n", (int)(len > 15 ? 15 : len), name,
                   (unsigned long long)f->count, "", "", (unsigned long long)(f->timed ? f->total_ns / f->timed : 0),
                   (unsigned long long)lp_percentile(f, 0.5), (unsigned long long)lp_percentile(f, 0.99));
    }
    char peak[32], leak[32];
    lp_fmt_bytes(peak, sizeof peak, a->peak_bytes);
    lp_fmt_bytes(leak, sizeof leak, a->live_bytes);
    lp_out_fmt(o,
               a->opts->live ? "  heap peak %s (%llu B) at %.3f ms; live now %s (%llu B) in %llu blocks\n"
                             : "  heap peak %s (%llu B) at %.3f ms; leaked %s (%llu B) in %llu blocks\n",
               peak, (unsigned long long)a->peak_bytes, (double)a->peak_ns / 1e6, leak,
               (unsigned long long)a->live_bytes, (unsigned long long)a->live_blocks);
    if (r->end && r->end->max_rss_kib) {
        char rss[32];
        lp_fmt_bytes(rss, sizeof rss, r->end->max_rss_kib * 1024);
        lp_out_fmt(o,
                   "  max used (peak RSS of the process, all memory): %s; max allocated (heap peak, requested): %s\n",
                   rss, peak);
    }
    if (r->own) own_memory(o, r->own);
    if (a->temporary) {
        char tb[32];
        lp_fmt_bytes(tb, sizeof tb, a->temporary_bytes);
        uint64_t allocs = a->fn[LP_EV_MALLOC].count + a->fn[LP_EV_CALLOC].count + a->fn[LP_EV_REALLOC].count +
                          a->fn[LP_EV_REALLOCARRAY].count + a->fn[LP_EV_POSIX_MEMALIGN].count +
                          a->fn[LP_EV_ALIGNED_ALLOC].count + a->fn[LP_EV_MEMALIGN].count + a->fn[LP_EV_VALLOC].count +
                          a->fn[LP_EV_PVALLOC].count;
        lp_out_fmt(o, "  temporary allocations: %llu (%.1f%% of allocation calls), %s (%s)\n",
                   (unsigned long long)a->temporary, allocs ? 100.0 * (double)a->temporary / (double)allocs : 0.0, tb,
                   a->opts->temporary_threshold ? "released within the next allocations of their thread"
                                                : "released right after, on their thread");
    }
    if (a->untracked_frees || a->reused_live)
        lp_out_fmt(o, "  frees of blocks not seen allocated: %llu; blocks reused without a seen free: %llu\n",
                   (unsigned long long)a->untracked_frees, (unsigned long long)a->reused_live);
    unsigned top = a->opts->top; /* rows per table (0: each table's own) */
    lp_calls_summary(a->calls, o, top);
    if (a->sites) lp_sites_summary(a->sites, o, top);
    for (unsigned v = 0; v < lp_nviews; v++) /* the families' views (views.c) */
        if (lp_views[v]->summary) lp_views[v]->summary(a, o, top);
    if (r->end && r->end->events_dropped)
        lp_out_fmt(o, "  EVENTS DROPPED: %llu (the trace could not be written completely)\n",
                   (unsigned long long)r->end->events_dropped);
    for (uint32_t i = 0; i < r->nnotes; i++) /* what libprof noted while it worked */
        lp_out_fmt(o, "  note: %.*s\n", (int)r->notes[i].len, r->notes[i].s);
    size_histogram(o, a);
}

int lp_sink_summary(struct lp_sink *k) {
    k->finish = summary_finish;
    return 0;
}
