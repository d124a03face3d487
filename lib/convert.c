/* convert.c: one pass over a decoded trace -> per-function statistics, the live-heap timeline,
 * leaks, and the three outputs (Chrome trace JSON, CSV summary, stderr table).
 *
 * Frees are matched to allocations by pointer here, never on the hot path. Durations go into a
 * log-linear histogram per function (64 sub-buckets per power of two, so a percentile is within
 * 1.6 % of the true value; count, total, min and max are exact) because a trace may hold far more
 * events than memory. */
#define _GNU_SOURCE
#include "convert.h"
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calls.h"
#include "fmt.h"
#include "sites.h"
#include "map.h"
#include "out.h"
#include "stats.h"

#define SIZE_BUCKETS 29
#define COUNTER_BUCKETS 2048
#define percentile lp_percentile

/* ---- the analysis state ------------------------------------------------------------------ */

struct point { uint64_t ns, v; };
struct cbucket { struct point min, max, last; };

struct analysis {
    struct fnstat fn[LP_KIND_COUNT];
    struct lp_map live; /* pointer -> requested size of every live block */
    struct fnstat *ranges; /* per annotation name id */
    uint32_t nranges;
    uint64_t live_bytes, peak_bytes, peak_ns;
    uint64_t untracked_frees, reused_live;
    uint64_t size_hist[SIZE_BUCKETS];
    uint64_t events;
    int counting;         /* 0 before the last libprof_reset: heap state only, no statistics */
    uint64_t reset_ns, pauses;
    uint64_t span_ns;
    uint64_t bucket_mult; /* ns * bucket_mult >> 64 = counter bucket: no division per event */
    struct cbucket *cb;  /* not zeroed: only buckets marked in cb_used are valid, so a short
                          * trace faults in only the pages it touches */
    uint64_t cb_used[COUNTER_BUCKETS / 64];
    struct lp_calls *calls; /* the runtime entry points (calls.c) */
    struct lp_sites *sites; /* allocation call stacks (sites.c), NULL without them */
    uint64_t yields, peak_count; /* iterator yields so far; yields up to and including the peak */
    int oom;
};

static unsigned size_bucket(uint64_t s) {
    if (s < 16) return 0;
    unsigned b = 63u - (unsigned)__builtin_clzll(s) - 3;
    return b < SIZE_BUCKETS ? b : SIZE_BUCKETS - 1;
}

static void heap_changed(struct analysis *a, uint64_t ns) {
    if (!a->counting) return;
    if (a->live_bytes > a->peak_bytes) {
        a->peak_bytes = a->live_bytes;
        a->peak_ns = ns;
        a->peak_count = a->yields + 1;
    }
    if (!a->cb) return;
    uint64_t b = (uint64_t)(((unsigned __int128)ns * a->bucket_mult) >> 64);
    if (b >= COUNTER_BUCKETS) b = COUNTER_BUCKETS - 1;
    struct cbucket *c = &a->cb[b];
    struct point p = {ns, a->live_bytes};
    if (!(a->cb_used[b / 64] & (UINT64_C(1) << (b % 64)))) {
        a->cb_used[b / 64] |= UINT64_C(1) << (b % 64);
        c->min = c->max = p;
    }
    if (p.v < c->min.v) c->min = p;
    if (p.v > c->max.v) c->max = p;
    c->last = p;
}

static void block_born(struct analysis *a, uint64_t ptr, uint64_t size, uint64_t ns, uint32_t stack) {
    if (a->sites && lp_sites_born(a->sites, ptr, size, stack, a->counting) != 0) a->oom = 1;
    uint64_t old = 0;
    int rc = lp_map_put(&a->live, ptr, size, &old);
    if (rc < 0) { a->oom = 1; return; }
    if (rc == 1) { /* we missed its lp_os_free(e.g. released through a path libprof does not see) */
        a->reused_live++;
        a->live_bytes -= old;
    }
    a->live_bytes += size;
    heap_changed(a, ns);
}

/* Returns the size of the block released, or 0 when `ptr` was not known to be live. */
static uint64_t block_died(struct analysis *a, uint64_t ptr, uint64_t ns) {
    uint64_t size;
    if (a->sites) lp_sites_died(a->sites, ptr);
    if (!lp_map_take(&a->live, ptr, &size)) {
        a->untracked_frees++;
        return 0;
    }
    a->live_bytes -= size;
    heap_changed(a, ns);
    return size;
}

/* Add one call to row `f`. */
static void account(struct analysis *a, struct fnstat *f, const struct lp_event *e, uint64_t bytes, int failed) {
    if (!a->counting) return;
    /* bytes: actually handed out (or released) */
    if (lp_fnstat_add(f, 1, e->timed, e->dur_ns, bytes, failed) != 0) a->oom = 1;
}

static void count_call(struct analysis *a, const struct lp_event *e, uint64_t bytes, int failed) {
    account(a, &a->fn[e->kind], e, bytes, failed);
}

/* Apply one event. Returns the size of the block concerned (allocated or freed), for exporters. */
static uint64_t analyse(struct analysis *a, const struct lp_event *e) {
    const uint64_t *w = e->w;
    switch (lp_kind_shape[e->kind]) {
    case LP_SHAPE_ALLOC:
        count_call(a, e, w[0], w[1] == 0);
        if (w[1]) {
            block_born(a, w[1], w[0], e->ns, e->stack);
            a->size_hist[size_bucket(w[0])] += (uint64_t)a->counting;
        }
        return w[0];
    case LP_SHAPE_FREE: {
        uint64_t s = w[0] ? block_died(a, w[0], e->ns) : 0;
        count_call(a, e, s, 0);
        return s;
    }
    case LP_SHAPE_RANGE: {
        count_call(a, e, 0, 0);
        uint64_t id = w[0];
        if (id > LP_MAX_NAME_ID) id = 0; /* not a name a writer can produce: "(other)" */
        if (id >= a->nranges) {
            struct fnstat *n = lp_os_realloc(a->ranges, (id + 1) * sizeof *n);
            if (!n) { a->oom = 1; return 0; }
            memset(n + a->nranges, 0, (id + 1 - a->nranges) * sizeof *n);
            a->ranges = n;
            a->nranges = (uint32_t)id + 1;
        }
        account(a, &a->ranges[id], e, 0, 0);
        return 0;
    }
    case LP_SHAPE_MARK:
    case LP_SHAPE_COUNTER:
        count_call(a, e, 0, 0);
        return 0;
    case LP_SHAPE_CONTROL:
        a->pauses += e->kind == LP_EV_PAUSE;
        return 0;
    case LP_SHAPE_CALL: /* calls.c, from the main loop */
        return 0;
    case LP_SHAPE_REALLOC: {
        uint64_t size = w[0], np = w[1], op = w[2];
        if (e->phase == 0) { /* release of the old block, at the call's start */
            if (op && !(np == 0 && size > 0)) return block_died(a, op, e->ns);
            return 0;
        }
        count_call(a, e, size, np == 0 && size > 0);
        if (np) {
            block_born(a, np, size, e->ns, e->stack);
            a->size_hist[size_bucket(size)] += (uint64_t)a->counting;
        }
        return size;
    }
    }
    return 0;
}

/* ---- outputs -------------------------------------------------------------------------- */

static const char *basename_of(const char *s, uint32_t n, uint32_t *len) {
    const char *b = s;
    for (uint32_t i = 0; i < n; i++)
        if (s[i] == '/') b = s + i + 1;
    *len = (uint32_t)(n - (uint32_t)(b - s));
    return b;
}

/* The command line with arguments separated by spaces. */
static void out_command(struct lp_out *o, const struct lp_reader *r, int json) {
    char *tmp = lp_os_malloc(r->cmdline_len + 1);
    uint32_t n = 0;
    if (tmp && r->cmdline_len) {
        memcpy(tmp, r->cmdline, r->cmdline_len);
        n = r->cmdline_len;
        while (n > 0 && tmp[n - 1] == '\0') n--;
        for (uint32_t i = 0; i < n; i++)
            if (tmp[i] == '\0') tmp[i] = ' ';
    }
    const char *s = tmp;
    if (n == 0 && r->exe) { /* no command line recorded: fall back to the executable */
        s = r->exe;
        n = r->exe_len;
    }
    if (json) lp_out_json_str(o, s ? s : "", n);
    else lp_out_write(o, s ? s : "", n);
    lp_os_free(tmp);
}

static void thread_label(const struct lp_reader *r, const struct lp_thread_info *t, char *buf, size_t len) {
    if (t->name && t->name_len) snprintf(buf, len, "%.*s", (int)t->name_len, t->name);
    else if (t->tid == r->hdr.pid) snprintf(buf, len, "main");
    else snprintf(buf, len, "thread %u", t->tid);
}

struct chrome {
    struct lp_out o;
    int first;
    uint32_t pid;
};

static void ev_begin(struct chrome *c) {
    lp_out_s(&c->o, c->first ? "\n" : ",\n");
    c->first = 0;
}

static void chrome_head(struct chrome *c, const struct lp_reader *r) {
    lp_out_s(&c->o, "{\"traceEvents\":[");
    c->first = 1;
    ev_begin(c);
    lp_out_fmt(&c->o, "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"process_name\",\"args\":{\"name\":", c->pid, c->pid);
    out_command(&c->o, r, 1);
    lp_out_s(&c->o, "}}");
    for (uint32_t i = 0; i < r->nthreads; i++) {
        char name[64];
        if (r->threads[i].tid == 0) continue; /* the process itself (libprof's timer markers) */
        thread_label(r, &r->threads[i], name, sizeof name);
        ev_begin(c);
        lp_out_fmt(&c->o, "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":", c->pid,
                   r->threads[i].tid);
        lp_out_json_str(&c->o, name, strlen(name));
        lp_out_s(&c->o, "}}");
        ev_begin(c);
        lp_out_fmt(&c->o, "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}",
                   c->pid, r->threads[i].tid, r->threads[i].tid == c->pid ? 0 : i + 1);
    }
}

static void chrome_instant(struct chrome *c, const struct lp_event *e, uint64_t size, uint64_t ptr) {
    ev_begin(c);
    lp_out_fmt(&c->o, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",\"cat\":\"%s\",\"ts\":", c->pid, e->tid,
               lp_kind_names[e->kind], lp_family_names[lp_kind_family[e->kind]]);
    lp_out_us(&c->o, e->ns);
    lp_out_s(&c->o, ",\"args\":{\"size\":");
    lp_out_u64(&c->o, size);
    lp_out_fmt(&c->o, ",\"ptr\":\"0x%llx\"", (unsigned long long)ptr);
    if (e->timed) {
        lp_out_s(&c->o, ",\"dur_ns\":");
        lp_out_u64(&c->o, e->dur_ns);
    }
    lp_out_s(&c->o, "}}");
}

static const char *const control_reasons[] = {"?", "api", "signal", "delay", "duration", "start"};

/* Pauses, resumes and resets: instants on the whole process. */
static void chrome_control(struct chrome *c, const struct lp_event *e) {
    uint64_t reason = e->w[0] < 6 ? e->w[0] : 0;
    ev_begin(c);
    lp_out_fmt(&c->o, "{\"ph\":\"i\",\"s\":\"p\",\"pid\":%u,\"tid\":%u,\"cat\":\"control\",\"name\":\"%s\",\"ts\":",
               c->pid, e->tid ? e->tid : c->pid, lp_kind_names[e->kind]);
    lp_out_us(&c->o, e->start_ns);
    lp_out_fmt(&c->o, ",\"args\":{\"reason\":\"%s\"}}", control_reasons[reason]);
}

/* Annotation records: a range is an X slice, a mark an instant, a counter a C event. */
static void chrome_annot(struct chrome *c, const struct lp_reader *r, const struct lp_event *e) {
    uint32_t len;
    const char *name = lp_reader_name(r, e->w[0], &len);
    int shape = lp_kind_shape[e->kind];
    if (shape == LP_SHAPE_COUNTER) {
        double v;
        memcpy(&v, &e->w[1], sizeof v);
        if (v != v || v - v != 0) return; /* NaN and infinities have no JSON spelling */
    }
    ev_begin(c);
    lp_out_fmt(&c->o, "{\"ph\":\"%s\",\"pid\":%u,\"tid\":%u,\"cat\":\"annot\",\"name\":",
               shape == LP_SHAPE_RANGE ? "X" : shape == LP_SHAPE_MARK ? "i" : "C", c->pid,
               shape == LP_SHAPE_COUNTER ? c->pid : e->tid);
    lp_out_json_str(&c->o, name, len);
    lp_out_s(&c->o, ",\"ts\":");
    lp_out_us(&c->o, e->start_ns);
    if (shape == LP_SHAPE_RANGE) {
        lp_out_s(&c->o, ",\"dur\":");
        lp_out_us(&c->o, e->dur_ns);
        lp_out_s(&c->o, "}");
    } else if (shape == LP_SHAPE_MARK) {
        lp_out_s(&c->o, ",\"s\":\"t\"}");
    } else {
        double v;
        memcpy(&v, &e->w[1], sizeof v);
        lp_out_fmt(&c->o, ",\"args\":{\"value\":%.17g}}", v);
    }
}

static void chrome_counter_point(struct chrome *c, uint64_t ns, uint64_t v) {
    ev_begin(c);
    lp_out_fmt(&c->o, "{\"ph\":\"C\",\"pid\":%u,\"tid\":%u,\"name\":\"heap\",\"ts\":", c->pid, c->pid);
    lp_out_us(&c->o, ns);
    lp_out_s(&c->o, ",\"args\":{\"bytes\":");
    lp_out_u64(&c->o, v);
    lp_out_s(&c->o, "}}");
}

static int cmp_point(const void *x, const void *y) {
    const struct point *a = x, *b = y;
    return a->ns < b->ns ? -1 : a->ns > b->ns;
}

/* The heap track, downsampled: per time bucket its minimum, maximum and last value, so the
 * envelope is right and the exact peak is always one of the points. */
static uint64_t chrome_counter(struct chrome *c, const struct analysis *a) {
    uint64_t points = 1;
    chrome_counter_point(c, 0, 0);
    for (unsigned b = 0; b < COUNTER_BUCKETS; b++) {
        const struct cbucket *k = &a->cb[b];
        if (!(a->cb_used[b / 64] & (UINT64_C(1) << (b % 64)))) continue;
        struct point p[3] = {k->min, k->max, k->last};
        qsort(p, 3, sizeof p[0], cmp_point);
        for (int i = 0; i < 3; i++) {
            if (i > 0 && p[i].ns == p[i - 1].ns) continue;
            chrome_counter_point(c, p[i].ns, p[i].v);
            points++;
        }
    }
    return points;
}

static void metadata_json(struct lp_out *o, const struct lp_reader *r, const struct analysis *a, uint64_t end_ns,
                          uint64_t alloc_min, uint64_t counter_points, uint64_t instants, int killed_by) {
    lp_out_fmt(o, "{\"version\":\"%s\",\"format_version\":%u,\"pid\":%u,\"ppid\":%u,\"hostname\":", LIBPROF_VERSION,
               r->hdr.version, r->hdr.pid, r->hdr.ppid);
    lp_out_json_str(o, r->hostname ? r->hostname : "", r->hostname_len);
    lp_out_s(o, ",\"executable\":");
    lp_out_json_str(o, r->exe ? r->exe : "", r->exe_len);
    lp_out_s(o, ",\"command\":");
    out_command(o, r, 1);
    lp_out_fmt(o, ",\"start_time_unix_ns\":%llu,\"duration_ns\":%llu,\"clock\":\"%s\",\"complete\":%s,",
               (unsigned long long)r->hdr.origin_real_ns, (unsigned long long)end_ns,
               r->hdr.clock == LP_CLOCK_TSC ? "tsc" : "monotonic",
               r->end && !r->truncated && !r->end->events_dropped ? "true" : "false");
    lp_out_fmt(o, "\"peak_bytes\":%llu,\"peak_time_ns\":%llu,\"leaked_bytes\":%llu,\"leaked_blocks\":%llu,",
               (unsigned long long)a->peak_bytes, (unsigned long long)a->peak_ns, (unsigned long long)a->live_bytes,
               (unsigned long long)a->live.n);
    lp_out_fmt(o, "\"untracked_frees\":%llu,\"reused_without_free\":%llu,", (unsigned long long)a->untracked_frees,
               (unsigned long long)a->reused_live);
    if (r->end && r->end->exit_status >= 0) lp_out_fmt(o, "\"exit_status\":%d,", r->end->exit_status);
    else lp_out_s(o, "\"exit_status\":null,");
    if (r->end && r->end->max_rss_kib) lp_out_fmt(o, "\"max_rss_bytes\":%llu,", (unsigned long long)r->end->max_rss_kib * 1024);
    if (r->end && r->end->signal) lp_out_fmt(o, "\"signal\":%u,", r->end->signal);
    else if (killed_by) lp_out_fmt(o, "\"signal\":%d,", killed_by);
    else lp_out_s(o, "\"signal\":null,");
    lp_out_fmt(o, "\"pauses\":%llu,\"reset_at_ns\":%llu,", (unsigned long long)a->pauses,
               (unsigned long long)a->reset_ns);
    lp_out_fmt(o, "\"events_written\":%llu,\"events_decoded\":%llu,\"events_dropped\":%llu,\"chunks\":%u,\"threads\":%u,",
               (unsigned long long)(r->end ? r->end->events_written : r->events), (unsigned long long)a->events,
               (unsigned long long)(r->end ? r->end->events_dropped : 0), r->nchunks, r->nthreads);
    lp_out_fmt(o, "\"alloc_instant_min_bytes\":%llu,\"alloc_instants\":%llu,\"heap_counter_points\":%llu,",
               (unsigned long long)alloc_min, (unsigned long long)instants, (unsigned long long)counter_points);
    lp_out_s(o, "\"functions\":{");
    int first = 1;
    for (unsigned k = 1; k < LP_KIND_COUNT; k++) {
        const struct fnstat *f = &a->fn[k];
        if (!f->count || k == LP_EV_CALL) continue;
        lp_out_fmt(o, "%s\"%s\":{\"count\":%llu,\"bytes\":%llu,\"failed\":%llu,\"timed\":%llu,\"total_ns\":%llu}",
                   first ? "" : ",", lp_kind_names[k], (unsigned long long)f->count, (unsigned long long)f->bytes,
                   (unsigned long long)f->failed, (unsigned long long)f->timed, (unsigned long long)f->total_ns);
        first = 0;
    }
    lp_out_s(o, "},\"ranges\":{");
    first = 1;
    for (uint32_t id = 0; id < a->nranges; id++) {
        const struct fnstat *f = &a->ranges[id];
        if (!f->count) continue;
        uint32_t len;
        const char *name = lp_reader_name(r, id, &len);
        if (!first) lp_out_c(o, ',');
        first = 0;
        lp_out_json_str(o, name, len);
        lp_out_fmt(o, ":{\"count\":%llu,\"total_ns\":%llu,\"p50_ns\":%llu,\"p99_ns\":%llu}",
                   (unsigned long long)f->count, (unsigned long long)f->total_ns,
                   (unsigned long long)percentile(f, 0.5), (unsigned long long)percentile(f, 0.99));
    }
    lp_out_s(o, "},\"size_histogram\":[");
    for (unsigned b = 0; b < SIZE_BUCKETS; b++) lp_out_fmt(o, "%s%llu", b ? "," : "", (unsigned long long)a->size_hist[b]);
    lp_out_s(o, "]");
    lp_calls_metadata(a->calls, o);
    if (a->sites) lp_sites_metadata(a->sites, o);
    lp_out_s(o, "}");
}

/* Timing columns are empty for a function none of whose calls were timed (allocation calls
 * without LIBPROF_ALLOC_TIMING=1); statistics are over the timed calls (lp_csv_row, calls.c). */

static void write_csv(struct lp_out *o, const struct lp_reader *r, const struct analysis *a) {
    lp_out_s(o, "name,category,count,total_ns,mean_ns,min_ns,p50_ns,p90_ns,p99_ns,max_ns,bytes,gflops\n");
    for (unsigned k = 1; k < LP_KIND_COUNT; k++) {
        if (k == LP_EV_RANGE || k == LP_EV_CALL || lp_kind_family[k] == LP_FAM_CONTROL) continue; /* ranges: per name below */
        lp_csv_row(o, lp_kind_names[k], strlen(lp_kind_names[k]), lp_family_names[lp_kind_family[k]], &a->fn[k], 0);
    }
    for (uint32_t id = 0; id < a->nranges; id++) {
        uint32_t len;
        const char *name = lp_reader_name(r, id, &len);
        lp_csv_row(o, name, len, "annot", &a->ranges[id], 0);
    }
    lp_calls_csv(a->calls, o);
    if (a->sites) lp_sites_csv(a->sites, o);
}


static void write_summary(struct lp_out *o, const struct lp_reader *r, const struct analysis *a, uint64_t end_ns,
                          const char *label) {
    uint32_t bl;
    const char *exe = basename_of(r->exe ? r->exe : "?", r->exe ? r->exe_len : 1, &bl);
    lp_out_fmt(o, "libprof: %.*s (pid %u): %.3f s, %llu events%s%s%s\n", (int)bl, exe, r->hdr.pid, (double)end_ns / 1e9,
               (unsigned long long)a->events, label ? ", trace " : "", label ? label : "",
               r->end && !r->truncated ? "" : " [trace cut short]");
    lp_out_fmt(o, "  %-15s %12s %14s %8s %9s %9s %9s\n", "function", "calls", "bytes", "failed", "mean ns", "p50 ns",
               "p99 ns");
    for (unsigned k = 1; k < LP_KIND_COUNT; k++) {
        const struct fnstat *f = &a->fn[k];
        if (!f->count || k == LP_EV_RANGE || k == LP_EV_CALL || lp_kind_family[k] == LP_FAM_CONTROL) continue;
        lp_out_fmt(o, "  %-15s %12llu %14llu %8llu", lp_kind_names[k], (unsigned long long)f->count,
                   (unsigned long long)f->bytes, (unsigned long long)f->failed);
        if (f->timed)
            lp_out_fmt(o, " %9llu %9llu %9llu\n", (unsigned long long)(f->total_ns / f->timed),
                       (unsigned long long)percentile(f, 0.5), (unsigned long long)percentile(f, 0.99));
        else
            lp_out_fmt(o, " %9s %9s %9s\n", "-", "-", "-");
    }
    for (uint32_t id = 0; id < a->nranges; id++) {
        const struct fnstat *f = &a->ranges[id];
        if (!f->count) continue;
        uint32_t len;
        const char *name = lp_reader_name(r, id, &len);
        lp_out_fmt(o, "  %-15.*s %12llu %14s %8s %9llu %9llu %9llu  (range)\n", (int)(len > 15 ? 15 : len), name,
                   (unsigned long long)f->count, "", "", (unsigned long long)(f->timed ? f->total_ns / f->timed : 0),
                   (unsigned long long)percentile(f, 0.5), (unsigned long long)percentile(f, 0.99));
    }
    char peak[32], leak[32];
    lp_fmt_bytes(peak, sizeof peak, a->peak_bytes);
    lp_fmt_bytes(leak, sizeof leak, a->live_bytes);
    lp_out_fmt(o, "  heap peak %s (%llu B) at %.3f ms; leaked %s (%llu B) in %llu blocks\n", peak,
               (unsigned long long)a->peak_bytes, (double)a->peak_ns / 1e6, leak, (unsigned long long)a->live_bytes,
               (unsigned long long)a->live.n);
    if (r->end && r->end->max_rss_kib) {
        char rss[32];
        lp_fmt_bytes(rss, sizeof rss, r->end->max_rss_kib * 1024);
        lp_out_fmt(o, "  max used (peak RSS of the process, all memory): %s; max allocated (heap peak, requested): %s\n", rss,
                   peak);
    }
    if (a->untracked_frees || a->reused_live)
        lp_out_fmt(o, "  frees of blocks not seen allocated: %llu; blocks reused without a seen free: %llu\n",
                   (unsigned long long)a->untracked_frees, (unsigned long long)a->reused_live);
    lp_calls_summary(a->calls, o);
    if (a->sites) lp_sites_summary(a->sites, o);
    if (r->end && r->end->events_dropped)
        lp_out_fmt(o, "  EVENTS DROPPED: %llu (the trace could not be written completely)\n",
                   (unsigned long long)r->end->events_dropped);
    uint64_t total = 0, maxc = 0;
    for (unsigned b = 0; b < SIZE_BUCKETS; b++) {
        total += a->size_hist[b];
        if (a->size_hist[b] > maxc) maxc = a->size_hist[b];
    }
    if (!total) return;
    lp_out_s(o, "  block sizes:\n");
    for (unsigned b = 0; b < SIZE_BUCKETS; b++) {
        uint64_t c = a->size_hist[b];
        if (!c) continue;
        char lo[16], hi[16];
        uint64_t l = b == 0 ? 0 : UINT64_C(1) << (b + 3), h = (UINT64_C(1) << (b + 4)) - 1;
        lp_fmt_bytes(lo, sizeof lo, l);
        lp_fmt_bytes(hi, sizeof hi, h);
        int bar = (int)((c * 40 + maxc - 1) / maxc);
        lp_out_fmt(o, "  %10s-%-10s %10llu %3llu%% ", lo, b == SIZE_BUCKETS - 1 ? "" : hi, (unsigned long long)c,
                   (unsigned long long)(c * 100 / total));
        for (int i = 0; i < bar; i++) lp_out_c(o, '#');
        lp_out_c(o, '\n');
    }
}

/* Open `path` for writing through a temporary name, so a reader never sees half a file. */
static int open_tmp(const char *path, char *tmp, size_t len) {
    snprintf(tmp, len, "%s.tmp%ld", path, (long)getpid());
    /* A new file, never an existing one or a symlink planted at the name; the rename that
     * follows replaces a symlink at `path` rather than writing through it. */
    lp_os_unlink(tmp);
    return lp_os_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

static int finish_tmp(struct lp_out *o, const char *tmp, const char *path, char *err, size_t errlen) {
    int rc = lp_out_flush(o);
    if (lp_os_close(o->fd) != 0 && rc == 0) {
        rc = -1;
        o->err = errno;
    }
    if (rc == 0 && lp_os_rename(tmp, path) != 0) {
        rc = -1;
        o->err = errno;
    }
    if (rc != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(o->err));
        lp_os_unlink(tmp);
    }
    return rc;
}

int lp_convert(const struct lp_reader *r, const struct lp_convert_opts *o, char *err, size_t errlen) {
    struct analysis *a = lp_os_calloc(1, sizeof *a);
    struct chrome *c = NULL;
    char tmp[4096 + 32];
    int rc = -1;
    if (!a) goto oom;
    uint64_t end_ticks = r->last_ticks;
    a->span_ns = lp_ticks_to_ns(r, end_ticks);
    a->reset_ns = r->reset_ticks ? lp_ticks_to_ns(r, r->reset_ticks) : 0;
    a->counting = a->reset_ns == 0;
    uint64_t span = a->span_ns == UINT64_MAX ? UINT64_MAX : a->span_ns + 1; /* a forged clock */
    unsigned __int128 mult = ((unsigned __int128)COUNTER_BUCKETS << 64) / span;
    a->bucket_mult = mult > UINT64_MAX ? UINT64_MAX : (uint64_t)mult; /* spans under 2 us */
    if (o->chrome_path || o->chrome_fd >= 0) {
        a->cb = lp_os_malloc(COUNTER_BUCKETS * sizeof *a->cb);
        c = lp_os_malloc(sizeof *c);
        if (!a->cb || !c) goto oom;
        c->pid = r->hdr.pid;
        int fd = o->chrome_path ? open_tmp(o->chrome_path, tmp, sizeof tmp) : o->chrome_fd;
        if (fd < 0) {
            snprintf(err, errlen, "cannot create %s: %s", o->chrome_path, strerror(errno));
            goto out;
        }
        lp_out_init(&c->o, fd);
        chrome_head(c, r);
    }
    a->calls = lp_calls_new(r);
    a->sites = lp_sites_new(r); /* NULL: no stacks in this trace */
    struct lp_iter *it = a->calls ? lp_iter_new(r) : NULL;
    if (!it) goto oom;
    struct lp_event e;
    uint64_t instants = 0, next_progress = 1u << 20;
    while (lp_iter_next(it, &e)) {
        if (!a->counting && e.ns >= a->reset_ns) { /* the last reset: statistics start here */
            a->counting = 1;
            a->peak_bytes = a->live_bytes;
            a->peak_ns = e.ns;
            a->peak_count = a->yields;
        }
        uint64_t size = analyse(a, &e);
        a->yields++;
        if (e.phase == 1) a->events++;
        if (lp_kind_shape[e.kind] == LP_SHAPE_CALL) {
            struct lp_chrome_sink sink = {c ? &c->o : NULL, c ? &c->first : NULL, c ? c->pid : 0};
            if (lp_calls_event(a->calls, &e, a->counting, c ? &sink : NULL) != 0) a->oom = 1;
        } else if (c && lp_kind_family[e.kind] == LP_FAM_CONTROL) {
            chrome_control(c, &e);
        } else if (!a->counting) {
            /* before the last reset: nothing to show */
        } else if (c && lp_kind_family[e.kind] == LP_FAM_ANNOT) {
            chrome_annot(c, r, &e);
        } else if (c && size >= o->alloc_min && e.phase == 1) {
            /* big allocations, and frees of big blocks, as instants on the thread's track */
            int shape = lp_kind_shape[e.kind];
            uint64_t ptr = shape == LP_SHAPE_FREE ? e.w[0] : e.w[1];
            if (ptr) {
                chrome_instant(c, &e, size, ptr);
                instants++;
            }
        }
        if (o->progress && a->events >= next_progress) {
            o->progress(a->events, r->events, o->progress_arg);
            next_progress += 1u << 20;
        }
    }
    lp_iter_free(it);
    if (a->oom || lp_calls_finish(a->calls) != 0) goto oom;
    if (a->sites && lp_sites_finish(a->sites, a->peak_count) != 0) goto oom;
    if (o->progress) o->progress(a->events, r->events, o->progress_arg);
    uint64_t end_ns = a->span_ns;

    rc = 0;
    if (c) {
        uint64_t points = chrome_counter(c, a);
        lp_out_s(&c->o, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{\"libprof\":");
        metadata_json(&c->o, r, a, end_ns, o->alloc_min, points, instants, o->killed_by);
        lp_out_s(&c->o, "}}\n");
        if (o->chrome_path) rc = finish_tmp(&c->o, tmp, o->chrome_path, err, errlen);
        else if (lp_out_flush(&c->o) != 0) {
            snprintf(err, errlen, "cannot write the Chrome trace: %s", strerror(c->o.err));
            rc = -1;
        }
    }
    if (o->csv_path) {
        struct lp_out *co = lp_os_malloc(sizeof *co);
        char ctmp[4096 + 32];
        int fd = co ? open_tmp(o->csv_path, ctmp, sizeof ctmp) : -1;
        if (fd < 0) {
            snprintf(err, errlen, "cannot create %s: %s", o->csv_path, co ? strerror(errno) : "out of memory");
            rc = -1;
        } else {
            lp_out_init(co, fd);
            write_csv(co, r, a);
            if (finish_tmp(co, ctmp, o->csv_path, err, errlen) != 0) rc = -1;
        }
        lp_os_free(co);
    }
    const char *flame[3] = {o->folded_path, o->folded_leaks_path, o->speedscope_path};
    for (int k = 0; k < 3; k++) {
        if (!flame[k]) continue;
        if (!a->sites) {
            snprintf(err, errlen, "%s: the trace has no call stacks (record with LIBPROF_STACKS=16)", flame[k]);
            rc = -1;
            continue;
        }
        struct lp_out *fo = lp_os_malloc(sizeof *fo);
        char ftmp[4096 + 32];
        int fd = fo ? open_tmp(flame[k], ftmp, sizeof ftmp) : -1;
        if (fd < 0) {
            snprintf(err, errlen, "cannot create %s: %s", flame[k], fo ? strerror(errno) : "out of memory");
            rc = -1;
        } else {
            lp_out_init(fo, fd);
            if (k < 2) lp_sites_folded(a->sites, fo, k == 1);
            else {
                char name[512];
                uint32_t bl;
                const char *b = basename_of(r->exe ? r->exe : "libprof", r->exe ? r->exe_len : 7, &bl);
                snprintf(name, sizeof name, "%.*s allocations", (int)bl, b);
                lp_sites_speedscope(a->sites, fo, name);
            }
            if (finish_tmp(fo, ftmp, flame[k], err, errlen) != 0) rc = -1;
        }
        lp_os_free(fo);
    }
    if (o->summary_fd >= 0) {
        struct lp_out *so = lp_os_malloc(sizeof *so);
        if (so) {
            lp_out_init(so, o->summary_fd);
            write_summary(so, r, a, end_ns, o->trace_label);
            lp_out_flush(so);
            lp_os_free(so);
        }
    }
    goto out;
oom:
    snprintf(err, errlen, "out of memory while converting the trace");
    rc = -1;
out:
    if (a) {
        for (unsigned k = 0; k < LP_KIND_COUNT; k++) lp_os_free(a->fn[k].hist);
        for (uint32_t id = 0; id < a->nranges; id++) lp_os_free(a->ranges[id].hist);
        lp_os_free(a->ranges);
        lp_map_free(&a->live);
        lp_calls_free(a->calls);
        lp_sites_free(a->sites);
        lp_os_free(a->cb);
    }
    lp_os_free(a);
    lp_os_free(c);
    return rc;
}
