/* convert.c: the one pass over a decoded trace (see convert.h) — per-function statistics, the
 * live-heap timeline, leaks, the runtime entry points (calls.c) and allocation sites (sites.c) —
 * handing every event to the writers as it goes; then each writer writes its totals, each to a
 * temporary name renamed into place, so a reader never sees half a file.
 *
 * Frees are matched to allocations by pointer here, never on the hot path. Durations go into a
 * log-linear histogram per function (64 sub-buckets per power of two, so a percentile is within
 * 1.6 % of the true value; count, total, min and max are exact) because a trace may hold far more
 * events than memory. */
#define _GNU_SOURCE
#include "convert.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "map.h"
#include "os.h"
#include "vec.h"

/* ---- the pass ----------------------------------------------------------------------------------- */

struct pass {
    struct lp_analysis a;
    struct lp_map live; /* pointer -> requested size of every live block */
    size_t cap_ranges;
    uint64_t bucket_mult;      /* ns * bucket_mult >> 64 = counter bucket: no division per event */
    struct lp_cbucket *bucket; /* the counter bucket of times [bucket_from, bucket_to) */
    uint64_t bucket_from, bucket_to;
    uint64_t yields, peak_count; /* iterator yields so far; yields up to and including the peak */
    int oom;
    /* temporary allocations, per thread (index of lp_reader.threads) */
    struct last_alloc {
        uint64_t size;
        uint32_t stack;
        uint8_t valid;
    } * last;
    uint64_t *ring; /* memray's threshold: the last N blocks allocated per thread */
    unsigned threshold;
    uint32_t nthreads;
};

/* A block of `size` bytes from `stack` was allocated on thread `t`. */
static inline void temp_born(struct pass *p, uint32_t t, uint64_t ptr, uint64_t size, uint32_t stack) {
    if (t >= p->nthreads) return;
    if (p->threshold) {
        uint64_t *r = &p->ring[(size_t)t * p->threshold];
        memmove(r + 1, r, (p->threshold - 1) * sizeof *r);
        r[0] = ptr;
    } else {
        p->last[t] = (struct last_alloc){size, stack, 1};
    }
}

/* Block `v` (lp_live_pack) at `ptr` was released on thread `t`: temporary or not. */
static inline void temp_died(struct pass *p, uint32_t t, uint64_t ptr, uint64_t v) {
    if (t >= p->nthreads) return;
    int temporary = 0;
    if (p->threshold) {
        uint64_t *r = &p->ring[(size_t)t * p->threshold];
        for (unsigned i = 0; i < p->threshold; i++)
            if (r[i] == ptr) {
                temporary = 1;
                r[i] = 0;
                break;
            }
    } else {
        struct last_alloc *l = &p->last[t];
        temporary = l->valid && l->size == lp_live_bytes(v) && l->stack == lp_live_stack(v);
        l->valid = 0;
    }
    if (temporary && p->a.counting) {
        p->a.temporary++;
        p->a.temporary_bytes += lp_live_bytes(v);
        if (p->a.sites) lp_sites_temporary(p->a.sites, v);
    }
}

/* The counter bucket of time `ns`, entered for the first time. Events come in time order, so
 * the pass asks only when it leaves the bucket it is in. */
static __attribute__((noinline)) void enter_bucket(struct pass *p, uint64_t ns) {
    struct lp_analysis *a = &p->a;
    uint64_t b = (uint64_t)(((unsigned __int128)ns * p->bucket_mult) >> 64);
    if (b >= LP_COUNTER_BUCKETS) b = LP_COUNTER_BUCKETS - 1;
    p->bucket = &a->cb[b];
    /* the times that map to b: from ceil(b * 2^64 / mult) up to ceil((b + 1) * 2^64 / mult) */
    unsigned __int128 m = p->bucket_mult ? p->bucket_mult : 1;
    p->bucket_from = b == 0 ? 0 : (uint64_t)((((unsigned __int128)b << 64) + m - 1) / m);
    unsigned __int128 to = (((unsigned __int128)(b + 1) << 64) + m - 1) / m;
    p->bucket_to = b == LP_COUNTER_BUCKETS - 1 || to > UINT64_MAX ? UINT64_MAX : (uint64_t)to;
    if (!(a->cb_used[b / 64] & (UINT64_C(1) << (b % 64)))) {
        a->cb_used[b / 64] |= UINT64_C(1) << (b % 64);
        p->bucket->min = p->bucket->max = (struct lp_point){ns, a->live_bytes};
    }
}

static inline void heap_changed(struct pass *p, uint64_t ns) {
    struct lp_analysis *a = &p->a;
    if (!a->counting) return;
    if (a->live_bytes > a->peak_bytes) {
        a->peak_bytes = a->live_bytes;
        a->peak_ns = ns;
        p->peak_count = p->yields + 1;
    }
    if (!a->cb) return;
    if (ns >= p->bucket_to || ns < p->bucket_from || !p->bucket) enter_bucket(p, ns);
    struct lp_cbucket *c = p->bucket;
    struct lp_point pt = {ns, a->live_bytes};
    if (pt.v < c->min.v) c->min = pt;
    if (pt.v > c->max.v) c->max = pt;
    c->last = pt;
}

/* The live map's value: a block's size and its call stack, in one word (sites.h). */
static inline __attribute__((always_inline)) void block_born(struct pass *p, uint64_t ptr, uint64_t size, uint64_t ns,
                                                             uint32_t stack) {
    struct lp_analysis *a = &p->a;
    if (stack >= LP_MAX_STACK_ID) stack = 0;
    size = lp_live_size(size);
    uint64_t old = 0;
    int rc = lp_map_put(&p->live, ptr, lp_live_pack(size, stack), &old);
    if (rc < 0) {
        p->oom = 1;
        return;
    }
    if (rc == 1) { /* we missed its free (e.g. released through a path libprof does not see) */
        a->reused_live++;
        a->live_bytes -= lp_live_bytes(old);
        if (a->sites) lp_sites_died(a->sites, old);
    }
    if (a->sites && lp_sites_born(a->sites, size, stack, a->counting) != 0) p->oom = 1;
    a->live_bytes += size;
    heap_changed(p, ns);
}

/* Returns the size of the block released, or 0 when `ptr` was not known to be live. */
static inline __attribute__((always_inline)) uint64_t block_died(struct pass *p, uint64_t ptr, uint64_t ns,
                                                                 uint32_t thread) {
    struct lp_analysis *a = &p->a;
    uint64_t v;
    if (!lp_map_take(&p->live, ptr, &v)) {
        a->untracked_frees++;
        return 0;
    }
    temp_died(p, thread, ptr, v);
    if (a->sites) lp_sites_died(a->sites, v);
    uint64_t size = lp_live_bytes(v);
    a->live_bytes -= size;
    heap_changed(p, ns);
    return size;
}

/* Add one call to row `f`: `bytes` actually handed out (or released). */
static inline __attribute__((always_inline)) void account(struct pass *p, struct fnstat *f, const struct lp_event *e,
                                                          uint64_t bytes, int failed) {
    if (p->a.counting && lp_fnstat_add(f, 1, e->timed, e->dur_ns, bytes, failed) != 0) p->oom = 1;
}

static inline __attribute__((always_inline)) void born_counted(struct pass *p, const struct lp_event *e, uint64_t ptr,
                                                               uint64_t size) {
    block_born(p, ptr, size, e->ns, e->stack);
    temp_born(p, e->thread, ptr, lp_live_size(size), e->stack < LP_MAX_STACK_ID ? e->stack : 0);
    p->a.size_hist[lp_size_bucket(size)] += (uint64_t)p->a.counting;
}

/* Apply one event. Returns the size of the block concerned (allocated or freed), for writers. */
static inline __attribute__((always_inline)) uint64_t analyse(struct pass *p, const struct lp_event *e) {
    struct lp_analysis *a = &p->a;
    const uint64_t *w = e->w;
    struct fnstat *f = &a->fn[e->kind];
    switch (lp_kind_shape[e->kind]) {
    case LP_SHAPE_ALLOC:
        account(p, f, e, w[0], w[1] == 0);
        if (w[1]) born_counted(p, e, w[1], w[0]);
        return w[0];
    case LP_SHAPE_FREE: {
        uint64_t s = w[0] ? block_died(p, w[0], e->ns, e->thread) : 0;
        account(p, f, e, s, 0);
        return s;
    }
    case LP_SHAPE_RANGE: {
        account(p, f, e, 0, 0);
        uint64_t id = w[0];
        if (id > LP_MAX_NAME_ID) id = 0; /* not a name a writer can produce: "(other)" */
        if (LP_RESERVE_ZERO(a->ranges, p->cap_ranges, id + 1) != 0) {
            p->oom = 1;
            return 0;
        }
        if (id >= a->nranges) a->nranges = id + 1;
        account(p, &a->ranges[id], e, 0, 0);
        return 0;
    }
    case LP_SHAPE_MARK:
    case LP_SHAPE_COUNTER: account(p, f, e, 0, 0); return 0;
    case LP_SHAPE_CONTROL: a->pauses += e->kind == LP_EV_PAUSE; return 0;
    case LP_SHAPE_REALLOC: {
        uint64_t size = w[0], np = w[1], op = w[2];
        if (e->phase == 0) { /* release of the old block, at the call's start */
            if (op && !(np == 0 && size > 0)) return block_died(p, op, e->ns, e->thread);
            return 0;
        }
        account(p, f, e, size, np == 0 && size > 0);
        if (np) born_counted(p, e, np, size);
        return size;
    }
    default: /* CALL records: calls.c, from the loop */ return 0;
    }
}

/* ---- outputs: each file through a temporary name ----------------------------------------------- */

struct output {
    const char *path; /* NULL: an open descriptor of the caller's */
    char tmp[4096 + 32];
    struct lp_out out;
    struct lp_sink sink;
    int open;
};

/* Open `path` for writing through a temporary name, so a reader never sees half a file. */
static int open_tmp(const char *path, char *tmp, size_t len) {
    snprintf(tmp, len, "%s.tmp%ld", path, (long)getpid());
    /* A new file, never an existing one or a symlink planted at the name; the rename that
     * follows replaces a symlink at `path` rather than writing through it. */
    lp_os_unlink(tmp);
    return lp_os_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

static int output_open(struct output *o, const char *path, int fd, char *err, size_t errlen) {
    o->path = path;
    if (path) fd = open_tmp(path, o->tmp, sizeof o->tmp);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", path ? path : "output", strerror(errno));
        return -1;
    }
    lp_out_init(&o->out, fd);
    o->sink.out = &o->out;
    o->open = 1;
    return 0;
}

/* Flush and, for a file of ours, close and rename into place. 0 or -1 (message in err). */
static int output_close(struct output *o, char *err, size_t errlen) {
    if (!o->open) return 0;
    o->open = 0;
    int rc = lp_out_flush(&o->out);
    if (!o->path) {
        if (rc != 0) snprintf(err, errlen, "cannot write the output: %s", strerror(o->out.err));
        return rc;
    }
    if (lp_os_close(o->out.fd) != 0 && rc == 0) {
        rc = -1;
        o->out.err = errno;
    }
    if (rc == 0 && lp_os_rename(o->tmp, o->path) != 0) {
        rc = -1;
        o->out.err = errno;
    }
    if (rc != 0) {
        snprintf(err, errlen, "cannot write %s: %s", o->path, strerror(o->out.err));
        lp_os_unlink(o->tmp);
    }
    return rc;
}

/* The flame graphs are the sites' (sites.c): folded allocated bytes, folded leaks, speedscope. */
static void folded_finish(struct lp_sink *k, const struct lp_analysis *a) { lp_sites_folded(a->sites, k->out, 0); }
static void leaks_finish(struct lp_sink *k, const struct lp_analysis *a) {
    lp_sites_folded(a->sites, k->out, LP_FOLD_LEAKS);
}
static void peak_finish(struct lp_sink *k, const struct lp_analysis *a) {
    lp_sites_folded(a->sites, k->out, LP_FOLD_PEAK);
}
static void temp_finish(struct lp_sink *k, const struct lp_analysis *a) {
    lp_sites_folded(a->sites, k->out, LP_FOLD_TEMP);
}
static void speedscope_finish(struct lp_sink *k, const struct lp_analysis *a) {
    const struct lp_reader *r = a->r;
    const char *exe = r->exe ? r->exe : "libprof";
    uint32_t n = r->exe ? r->exe_len : 7, b = 0;
    for (uint32_t i = 0; i < n; i++)
        if (exe[i] == '/') b = i + 1;
    char name[512];
    snprintf(name, sizeof name, "%.*s allocations", (int)(n - b), exe + b);
    lp_sites_speedscope(a->sites, k->out, name);
}

/* ---- the conversion ----------------------------------------------------------------------------- */

enum { OUT_CHROME, OUT_CSV, OUT_SUMMARY, OUT_FOLDED, OUT_LEAKS, OUT_SPEEDSCOPE, OUT_PEAK, OUT_TEMP, OUT_COUNT };

int lp_convert(const struct lp_reader *r, const struct lp_convert_opts *o, char *err, size_t errlen) {
    struct pass *p = lp_os_calloc(1, sizeof *p);
    struct output *out = lp_os_calloc(OUT_COUNT, sizeof *out);
    int rc = -1;
    if (!p || !out) goto oom;
    struct lp_analysis *a = &p->a;
    a->r = r;
    a->opts = o;
    a->span_ns = lp_ticks_to_ns(r, r->last_ticks);
    a->reset_ns = r->reset_ticks ? lp_ticks_to_ns(r, r->reset_ticks) : 0;
    a->counting = a->reset_ns == 0;
    uint64_t span = a->span_ns == UINT64_MAX ? UINT64_MAX : a->span_ns + 1; /* a forged clock */
    unsigned __int128 mult = ((unsigned __int128)LP_COUNTER_BUCKETS << 64) / span;
    p->bucket_mult = mult > UINT64_MAX ? UINT64_MAX : (uint64_t)mult; /* spans under 2 us */
    a->calls = lp_calls_new(r);
    p->nthreads = r->nthreads;
    p->threshold = o->temporary_threshold > 64 ? 64 : o->temporary_threshold;
    if (p->threshold)
        p->ring = lp_os_calloc((size_t)r->nthreads * p->threshold + 1, sizeof *p->ring);
    else
        p->last = lp_os_calloc((size_t)r->nthreads + 1, sizeof *p->last);
    if (!p->ring && !p->last) goto oom;
    a->sites = lp_sites_new(r); /* NULL: no stacks in this trace */
    a->pycalls = lp_pycalls_new(r);
    a->ort = lp_ort_new(r);
    if (!a->calls || !a->pycalls || !a->ort) goto oom;

    /* the writers asked for */
    const char *flame[5] = {o->folded_path, o->folded_leaks_path, o->speedscope_path, o->folded_peak_path,
                            o->folded_temp_path};
    const char *missing_stacks = NULL;
    void (*flame_finish[5])(struct lp_sink *, const struct lp_analysis *) = {
        folded_finish, leaks_finish, speedscope_finish, peak_finish, temp_finish};
    for (int k = 0; k < 5; k++) {
        if (!flame[k]) continue;
        if (!a->sites) { /* reported after the others are written */
            missing_stacks = flame[k];
            continue;
        }
        if (output_open(&out[OUT_FOLDED + k], flame[k], -1, err, errlen) != 0) goto out;
        out[OUT_FOLDED + k].sink.finish = flame_finish[k];
    }
    if ((o->chrome_path || o->chrome_fd >= 0)) {
        a->cb = lp_os_malloc(LP_COUNTER_BUCKETS * sizeof *a->cb);
        if (!a->cb) goto oom;
        if (output_open(&out[OUT_CHROME], o->chrome_path, o->chrome_fd, err, errlen) != 0) goto out;
        if (lp_sink_chrome(&out[OUT_CHROME].sink, r, o->alloc_min) != 0) goto oom;
    }
    if (o->csv_path) {
        if (output_open(&out[OUT_CSV], o->csv_path, -1, err, errlen) != 0) goto out;
        lp_sink_csv(&out[OUT_CSV].sink);
    }
    if (o->summary_fd >= 0) {
        if (output_open(&out[OUT_SUMMARY], NULL, o->summary_fd, err, errlen) != 0) goto out;
        lp_sink_summary(&out[OUT_SUMMARY].sink);
    }

    /* the pass */
    struct lp_sink *stream[OUT_COUNT];
    int nstream = 0;
    for (int k = 0; k < OUT_COUNT; k++)
        if (out[k].open && out[k].sink.event) stream[nstream++] = &out[k].sink;
    struct lp_iter *it = lp_iter_new(r);
    if (!it) goto oom;
    struct lp_event e;
    struct lp_call_rec rec;
    struct lp_call_view view;
    uint64_t next_progress = 1u << 20;
    while (lp_iter_next(it, &e)) {
        if (!a->counting && e.ns >= a->reset_ns) { /* the last reset: statistics start here */
            a->counting = 1;
            a->peak_bytes = a->live_bytes;
            a->peak_ns = e.ns;
            p->peak_count = p->yields;
        }
        struct lp_seen seen = {a->counting, analyse(p, &e), NULL, NULL};
        p->yields++;
        a->events += e.phase;
        unsigned shape = lp_kind_shape[e.kind];
        if (shape == LP_SHAPE_CALL) {
            if (lp_calls_event(a->calls, &e, a->counting, &rec, &view) != 0) p->oom = 1;
            if (rec.call == LP_CALL_ORT_RUN && e.timed && rec.nargs >= 1 &&
                lp_ort_run(a->ort, rec.a[0], e.tid, e.start_ns, e.dur_ns) != 0)
                p->oom = 1;
            if ((rec.call == LP_CALL_MPI_BARRIER || rec.call == LP_CALL_MPI_INIT ||
                 rec.call == LP_CALL_MPI_INIT_THREAD) &&
                e.timed && e.tid == r->hdr.pid) { /* the instants a merge aligns hosts on */
                int w = rec.call != LP_CALL_MPI_BARRIER;
                if (!a->mpi_sync_ns[w]) a->mpi_sync_ns[w] = e.start_ns + e.dur_ns;
            }
            if (a->sites && e.stack && a->counting && rec.call < LP_CALL_COUNT)
                lp_sites_call(a->sites, e.stack, lp_call_family[rec.call], e.dur_ns);
            seen.call = &rec;
            seen.view = &view;
        }
        if (shape == LP_SHAPE_PYCALL && lp_pycalls_event(a->pycalls, &e, a->counting) != 0) p->oom = 1;
        int heap = shape == LP_SHAPE_ALLOC || shape == LP_SHAPE_FREE || shape == LP_SHAPE_REALLOC;
        for (int k = 0; k < nstream; k++)
            if (!heap || seen.size >= stream[k]->alloc_min) stream[k]->event(stream[k], a, &e, &seen);
        if (o->progress && a->events >= next_progress) {
            o->progress(a->events, r->events, o->progress_arg);
            next_progress += 1u << 20;
        }
    }
    lp_iter_free(it);
    a->live_blocks = p->live.n;
    lp_map_free(&p->live); /* before the sites' replay, which builds its own */
    if (p->oom || lp_calls_finish(a->calls) != 0) goto oom;
    if (a->sites && lp_sites_finish(a->sites, p->peak_count, o->peak_at_ns) != 0) goto oom;
    if (lp_pycalls_finish(a->pycalls) != 0 || lp_ort_finish(a->ort) != 0) goto oom;
    if (o->progress) o->progress(a->events, r->events, o->progress_arg);

    /* the totals, each writer's file closed and renamed into place */
    rc = 0;
    if (missing_stacks) {
        snprintf(err, errlen, "%s: the trace has no call stacks (record with LIBPROF_STACKS=16)", missing_stacks);
        rc = -1;
    }
    for (int k = 0; k < OUT_COUNT; k++) {
        if (!out[k].open) continue;
        if (out[k].sink.finish) out[k].sink.finish(&out[k].sink, a);
        if (output_close(&out[k], err, errlen) != 0) rc = -1;
    }
    goto out;
oom:
    snprintf(err, errlen, "out of memory while converting the trace");
    rc = -1;
out:
    if (out) {
        for (int k = 0; k < OUT_COUNT; k++) {
            if (out[k].open && out[k].path) { /* a failure on the way: no half-written file stays */
                lp_os_close(out[k].out.fd);
                lp_os_unlink(out[k].tmp);
            }
            if (out[k].sink.release) out[k].sink.release(&out[k].sink);
        }
    }
    if (p) {
        for (unsigned k = 0; k < LP_KIND_COUNT; k++) lp_os_free(p->a.fn[k].hist);
        for (size_t id = 0; id < p->a.nranges; id++) lp_os_free(p->a.ranges[id].hist);
        lp_os_free(p->a.ranges);
        lp_map_free(&p->live);
        lp_calls_free(p->a.calls);
        lp_sites_free(p->a.sites);
        lp_pycalls_free(p->a.pycalls);
        lp_ort_free(p->a.ort);
        lp_os_free(p->last);
        lp_os_free(p->ring);
        lp_os_free(p->a.cb);
    }
    lp_os_free(p);
    lp_os_free(out);
    return rc;
}
