/* gpu.c: see gpu.h. The records arrive in the order CUPTI delivered its buffers, not in time
 * order: they are kept (a program queues thousands of kernels a second, not millions) and sorted
 * by stream and start at the end. The arrows' starts: every timed call of the GPU families, by its
 * start — the key the recorder pushed as CUPTI's external correlation id. */
#define _GNU_SOURCE
#include "gpu.h"
#include "json.h"

#include <stdio.h>
#include <string.h>

#include "calls.h"
#include "describe.h"
#include "fmt.h"
#include "map.h"
#include "os.h"
#include "stats.h"
#include "vec.h"
#include "views.h"
#include "analysis.h"

enum { OP_KERNEL, OP_MEMCPY, OP_MEMSET };

struct op {
    uint64_t start, end, bytes; /* ns since origin */
    uint64_t from_ns;           /* the launching slice's start, and its thread (0: not known) */
    uint32_t from_tid, name, device, stream, corr, track;
    uint32_t grid[3], block[3], shared, regs;
    uint8_t kind, dir;
};

struct gemm { /* cuBLAS GEMMs of one shape, and their kernels' GPU time */
    uint64_t m, n, k, batch, type, count, flop, gpu_ns;
};

struct track {
    uint32_t device, stream;
    uint64_t ops, busy_ns, first_ns, last_ns;
};

struct lp_gpu {
    const struct lp_reader *r;
    struct op *op;
    size_t nop, capop;
    struct lp_map calls;  /* a GPU family call's start ns + 1 -> its thread | (its GEMM shape + 1) << 32 */
    struct lp_map shapes; /* a GEMM shape's hash -> index in gemm + 1 */
    struct gemm *gemm;
    size_t ngemm, capgemm;
    struct lp_map corr;   /* CUPTI's correlation id + 1 -> the call's start in ticks since origin + 1 */
    struct lp_map byname; /* kernel name id + 1 -> index in kern */
    struct kern {
        uint32_t name;
        struct fnstat f;
    } * kern;
    size_t nkern, capkern;
    struct fnstat copy[16], sets; /* copies by CUPTI's direction, sets */
    struct track *track;
    size_t ntrack, captrack;
    uint64_t dropped, linked, busy_ns, kernels, copies, nsets;
};

static const char *const dir_names[16] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                          "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
static const char *dir_name(unsigned d) { return d < 16 && dir_names[d] ? dir_names[d] : "unknown"; }

struct lp_gpu *lp_gpu_new(const struct lp_reader *r) {
    struct lp_gpu *g = lp_os_calloc(1, sizeof *g);
    if (g) g->r = r;
    return g;
}

void lp_gpu_free(struct lp_gpu *g) {
    if (!g) return;
    lp_map_free(&g->calls);
    lp_map_free(&g->shapes);
    lp_os_free(g->gemm);
    lp_map_free(&g->corr);
    lp_map_free(&g->byname);
    for (size_t i = 0; i < g->nkern; i++) lp_fnstat_free(&g->kern[i].f);
    for (unsigned i = 0; i < 16; i++) lp_fnstat_free(&g->copy[i]);
    lp_fnstat_free(&g->sets);
    lp_os_free(g->kern);
    lp_os_free(g->op);
    lp_os_free(g->track);
    lp_os_free(g);
}

int lp_gpu_any(const struct lp_gpu *g) { return g && (g->nop || g->dropped); }

/* CUPTI's CLOCK_MONOTONIC ns into the trace's ns since origin */
static uint64_t since_origin(const struct lp_gpu *g, uint64_t mono) {
    uint64_t o = g->r->hdr.origin_mono_ns;
    return mono > o ? mono - o : 0;
}

/* The index of GEMM shape (m, n, k, batch, type), made on first sight; -1: out of memory. */
static long gemm_of(struct lp_gpu *g, uint64_t m, uint64_t n, uint64_t k, uint64_t batch, uint64_t type) {
    uint64_t h = (((m * 0x9E3779B97F4A7C15u ^ n) * 0x9E3779B97F4A7C15u ^ k) * 0x9E3779B97F4A7C15u ^ batch) *
                     0x9E3779B97F4A7C15u ^
                 type,
             ix;
    h |= 1; /* (0 is the map's empty key) */
    for (;; h += 2) {
        if (!lp_map_get(&g->shapes, h, &ix)) break;
        const struct gemm *x = &g->gemm[ix - 1];
        if (x->m == m && x->n == n && x->k == k && x->batch == batch && x->type == type) return (long)ix - 1;
    }
    if (LP_RESERVE(g->gemm, g->capgemm, g->ngemm + 1) != 0 || lp_map_put(&g->shapes, h, g->ngemm + 1, NULL) < 0)
        return -1;
    uint64_t b = batch ? batch : 1;
    g->gemm[g->ngemm] = (struct gemm){m, n, k, b, type, 0, 2 * m * n * k * b, 0};
    return (long)g->ngemm++;
}

int lp_gpu_call(struct lp_gpu *g, const struct lp_event *e, const struct lp_call_rec *c) {
    const uint64_t *a = c->a;
    if (lp_call_role[c->call] != LP_ROLE_GPU) { /* a call that may queue GPU work: an arrow's start */
        if (!e->timed) return 0;
        uint64_t shape = 0;
        if (lp_call_family[c->call] == LP_FAM_CUBLAS && c->nargs >= 7 && (int64_t)a[c->nargs - 1] == 0) {
            long ix = gemm_of(g, a[0], a[1], a[2], a[5], a[6]);
            if (ix < 0) return -1;
            g->gemm[ix].count++;
            shape = (uint64_t)ix + 1;
        }
        return lp_map_put(&g->calls, e->start_ns + 1, e->tid | shape << 32, NULL) < 0 ? -1 : 0;
    }
    struct op o = {0};
    switch (c->call) {
    case LP_CALL_GPU_CORRELATION:
        if (c->nargs < 2) return 0;
        return lp_map_put(&g->corr, a[0] + 1, a[1] + 1, NULL) < 0 ? -1 : 0;
    case LP_CALL_GPU_DROPPED:
        if (c->nargs >= 1) g->dropped += a[0];
        return 0;
    case LP_CALL_GPU_KERNEL:
        if (c->nargs < 14) return 0;
        o = (struct op){.kind = OP_KERNEL, .name = (uint32_t)a[0], .start = a[1], .end = a[2]};
        o.device = (uint32_t)a[3], o.stream = (uint32_t)a[4], o.corr = (uint32_t)a[5];
        for (int i = 0; i < 3; i++) o.grid[i] = (uint32_t)a[6 + i], o.block[i] = (uint32_t)a[9 + i];
        o.shared = (uint32_t)a[12], o.regs = (uint32_t)a[13];
        break;
    case LP_CALL_GPU_MEMCPY:
        if (c->nargs < 7) return 0;
        o = (struct op){.kind = OP_MEMCPY, .bytes = a[0], .dir = (uint8_t)(a[1] < 16 ? a[1] : 0)};
        o.start = a[2], o.end = a[3], o.device = (uint32_t)a[4], o.stream = (uint32_t)a[5], o.corr = (uint32_t)a[6];
        break;
    case LP_CALL_GPU_MEMSET:
        if (c->nargs < 6) return 0;
        o = (struct op){.kind = OP_MEMSET, .bytes = a[0], .start = a[1], .end = a[2]};
        o.device = (uint32_t)a[3], o.stream = (uint32_t)a[4], o.corr = (uint32_t)a[5];
        break;
    default: return 0;
    }
    o.start = since_origin(g, o.start);
    o.end = since_origin(g, o.end);
    if (o.end < o.start) o.end = o.start;
    if (LP_RESERVE(g->op, g->capop, g->nop + 1) != 0) return -1;
    g->op[g->nop++] = o;
    return 0;
}

static int by_track_start(const void *x, const void *y) {
    const struct op *a = x, *b = y;
    if (a->track != b->track) return a->track < b->track ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}
static int by_device_start(const void *x, const void *y) {
    const struct op *a = x, *b = y;
    if (a->device != b->device) return a->device < b->device ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}

static long track_of(struct lp_gpu *g, uint32_t device, uint32_t stream) {
    for (size_t i = 0; i < g->ntrack; i++)
        if (g->track[i].device == device && g->track[i].stream == stream) return (long)i;
    if (LP_RESERVE(g->track, g->captrack, g->ntrack + 1) != 0) return -1;
    g->track[g->ntrack] = (struct track){device, stream, 0, 0, UINT64_MAX, 0};
    return (long)g->ntrack++;
}

int lp_gpu_finish(struct lp_gpu *g) {
    if (!g->nop) return 0;
    /* each device's busy time: the union of its operations (streams overlap) */
    lp_sort(g->op, g->nop, sizeof *g->op, by_device_start);
    uint64_t lo = 0, hi = 0;
    for (size_t i = 0; i < g->nop; i++) {
        const struct op *o = &g->op[i];
        if (i == 0 || o->device != g->op[i - 1].device || o->start > hi) {
            g->busy_ns += hi - lo;
            lo = o->start, hi = o->end;
        } else if (o->end > hi) {
            hi = o->end;
        }
    }
    g->busy_ns += hi - lo;
    for (size_t i = 0; i < g->nop; i++) {
        struct op *o = &g->op[i];
        long t = track_of(g, o->device, o->stream);
        if (t < 0) return -1;
        o->track = (uint32_t)t;
        struct track *k = &g->track[t];
        uint64_t dur = o->end - o->start;
        k->ops++;
        k->busy_ns += dur;
        if (o->start < k->first_ns) k->first_ns = o->start;
        if (o->end > k->last_ns) k->last_ns = o->end;
        uint64_t ext, tid;
        if (o->corr && lp_map_get(&g->corr, (uint64_t)o->corr + 1, &ext)) {
            uint64_t ns = lp_ticks_to_ns(g->r, ext - 1);
            if (lp_map_get(&g->calls, ns + 1, &tid)) {
                o->from_ns = ns, o->from_tid = (uint32_t)tid;
                g->linked++;
                if (tid >> 32) g->gemm[(tid >> 32) - 1].gpu_ns += o->end - o->start; /* a GEMM's kernel */
            }
        }
        struct fnstat *f;
        if (o->kind == OP_KERNEL) {
            uint64_t ix;
            if (!lp_map_get(&g->byname, (uint64_t)o->name + 1, &ix)) {
                if (LP_RESERVE_ZERO(g->kern, g->capkern, g->nkern + 1) != 0) return -1;
                ix = g->nkern++;
                g->kern[ix].name = o->name;
                if (lp_map_put(&g->byname, (uint64_t)o->name + 1, ix, NULL) < 0) return -1;
            }
            f = &g->kern[ix].f;
            g->kernels++;
        } else if (o->kind == OP_MEMCPY) {
            f = &g->copy[o->dir];
            g->copies++;
        } else {
            f = &g->sets;
            g->nsets++;
        }
        if (lp_fnstat_add(f, 1, 1, dur, o->bytes, 0) != 0) return -1;
    }
    lp_sort(g->op, g->nop, sizeof *g->op, by_track_start);
    return 0;
}

static const char *kname(const struct lp_gpu *g, uint32_t id, uint32_t *len) {
    const char *s = lp_reader_name(g->r, id, len);
    if (!s) *len = 9, s = "<unknown>";
    return s;
}

/* A grid's or a block's three dimensions, as an array. */
static void dims(struct lp_json *j, const uint32_t d[3]) {
    lp_json_array(j);
    for (int i = 0; i < 3; i++) lp_json_u64(j, d[i]);
    lp_json_array_end(j);
}

static void view_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    const struct lp_gpu *g = a->view[LP_VIEW_GPU];
    if (!lp_gpu_any(g)) return;
    for (size_t k = 0; k < g->ntrack; k++) {
        char name[64];
        int n = snprintf(name, sizeof name, "GPU %u stream %u", g->track[k].device, g->track[k].stream);
        lp_json_meta_name(j, pid, LP_GPU_TRACK(k), "thread_name", name, (size_t)n);
        lp_json_meta_sort(j, pid, LP_GPU_TRACK(k), 1000000 + k);
    }
    for (size_t i = 0; i < g->nop; i++) {
        const struct op *o = &g->op[i];
        uint32_t len;
        char nm[32];
        const char *name = nm;
        if (o->kind == OP_KERNEL)
            name = kname(g, o->name, &len);
        else
            len = (uint32_t)snprintf(nm, sizeof nm, o->kind == OP_MEMCPY ? "memcpy %s" : "memset", dir_name(o->dir));
        uint64_t tid = LP_GPU_TRACK(o->track);
        lp_json_event(j, "X", pid, tid, "gpu", name, len, (int64_t)o->start);
        lp_json_dur(j, o->end - o->start);
        lp_json_args(j);
        lp_json_key(j, "device");
        lp_json_u64(j, o->device);
        lp_json_key(j, "stream");
        lp_json_u64(j, o->stream);
        lp_json_key(j, "correlation");
        lp_json_u64(j, o->corr);
        if (o->kind == OP_KERNEL) {
            lp_json_key(j, "grid");
            dims(j, o->grid);
            lp_json_key(j, "block");
            dims(j, o->block);
            lp_json_key(j, "shared_bytes");
            lp_json_u64(j, o->shared);
            lp_json_key(j, "registers");
            lp_json_u64(j, o->regs);
        } else {
            lp_json_key(j, "bytes");
            lp_json_u64(j, o->bytes);
            if (o->end > o->start) {
                lp_json_key(j, "GB/s");
                lp_json_double(j, "%.3f", (double)o->bytes / (double)(o->end - o->start));
            }
        }
        lp_json_args_end(j);
        lp_json_event_end(j);
        if (!o->from_tid) continue;
        /* the arrow from the call that queued it: bound to the slices enclosing its two ends */
        uint64_t id = (UINT64_C(5) << 44) + i;
        lp_json_event(j, "s", pid, o->from_tid, "gpu", "launch", 6, (int64_t)o->from_ns);
        lp_json_id(j, id);
        lp_json_event_end(j);
        lp_json_event(j, "f", pid, tid, "gpu", "launch", 6, (int64_t)o->start);
        lp_json_flow_end(j, id);
        lp_json_event_end(j);
    }
}

static int by_total(const void *x, const void *y) {
    const struct kern *a = x, *b = y;
    return a->f.total_ns < b->f.total_ns ? 1 : a->f.total_ns > b->f.total_ns ? -1 : 0;
}

static void view_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    uint64_t span = a->span_ns;
    const struct lp_gpu *g = a->view[LP_VIEW_GPU];
    if (!lp_gpu_any(g)) return;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    if (!span) span = 1;
    lp_fmt_ns(b1, sizeof b1, (int64_t)g->busy_ns);
    lp_out_fmt(o, "  GPU (CUPTI): %llu kernels, %llu copies, %llu sets on %zu streams; busy %s (%.1f%% of the run)%s\n",
               (unsigned long long)g->kernels, (unsigned long long)g->copies, (unsigned long long)g->nsets, g->ntrack,
               b1, 100.0 * (double)g->busy_ns / (double)span, g->dropped ? "; CUPTI dropped records" : "");
    if (g->dropped) lp_out_fmt(o, "  CUPTI dropped %llu records\n", (unsigned long long)g->dropped);
    lp_sort(((struct lp_gpu *)g)->kern, g->nkern, sizeof *g->kern, by_total);
    lp_out_fmt(o, "  %8s %10s %10s %10s %10s  %s\n", "count", "GPU total", "mean", "p50", "p99", "kernel");
    for (size_t i = 0; i < g->nkern && i < lp_top(top, 15); i++) {
        const struct fnstat *f = &g->kern[i].f;
        uint32_t len;
        const char *name = kname(g, g->kern[i].name, &len);
        lp_fmt_ns(b1, sizeof b1, (int64_t)f->total_ns);
        lp_fmt_ns(b2, sizeof b2, (int64_t)(f->total_ns / (f->timed ? f->timed : 1)));
        lp_fmt_ns(b3, sizeof b3, (int64_t)lp_percentile(f, 0.50));
        lp_fmt_ns(b4, sizeof b4, (int64_t)lp_percentile(f, 0.99));
        lp_out_fmt(o, "  %8llu %10s %10s %10s %10s  %.*s\n", (unsigned long long)f->count, b1, b2, b3, b4,
                   (int)(len > 100 ? 100 : len), name);
    }
    for (unsigned d = 0; d < 16; d++) {
        const struct fnstat *f = &g->copy[d];
        if (!f->count) continue;
        lp_fmt_ns(b1, sizeof b1, (int64_t)f->total_ns);
        lp_fmt_bytes(b5, sizeof b5, f->bytes);
        lp_out_fmt(o, "  %8llu %10s %21s  memcpy %s (%s)\n", (unsigned long long)f->count, b1, "", dir_name(d), b5);
    }
    if (g->sets.count) {
        lp_fmt_ns(b1, sizeof b1, (int64_t)g->sets.total_ns);
        lp_fmt_bytes(b5, sizeof b5, g->sets.bytes);
        lp_out_fmt(o, "  %8llu %10s %21s  memset (%s)\n", (unsigned long long)g->sets.count, b1, "", b5);
    }
    int heading = 0;
    for (size_t i = 0; i < g->ngemm; i++) {
        const struct gemm *m = &g->gemm[i];
        if (!m->gpu_ns) continue;
        if (!heading++)
            lp_out_fmt(o, "  %8s %10s %10s %8s  %s\n", "GEMMs", "GPU total", "GFLOP/s", "type",
                       "cuBLAS shape (m n k batch)");
        lp_fmt_ns(b1, sizeof b1, (int64_t)m->gpu_ns);
        lp_out_fmt(o, "  %8llu %10s %10.1f %8llu  %llu %llu %llu %llu\n", (unsigned long long)m->count, b1,
                   (double)m->flop * (double)m->count / (double)m->gpu_ns, (unsigned long long)m->type,
                   (unsigned long long)m->m, (unsigned long long)m->n, (unsigned long long)m->k,
                   (unsigned long long)m->batch);
    }
    for (size_t k = 0; k < g->ntrack; k++) {
        const struct track *t = &g->track[k];
        lp_fmt_ns(b1, sizeof b1, (int64_t)t->busy_ns);
        lp_out_fmt(o, "  GPU %u stream %u: %llu operations, busy %s (%.1f%% of the run)\n", t->device, t->stream,
                   (unsigned long long)t->ops, b1, 100.0 * (double)t->busy_ns / (double)span);
    }
}

static void view_csv(const struct lp_analysis *a, struct lp_out *o) {
    const struct lp_gpu *g = a->view[LP_VIEW_GPU];
    if (!lp_gpu_any(g)) return;
    for (size_t i = 0; i < g->nkern; i++) {
        uint32_t len;
        const char *name = kname(g, g->kern[i].name, &len);
        lp_csv_row(o, name, len, "gpu", &g->kern[i].f, 0);
    }
    for (unsigned d = 0; d < 16; d++) {
        if (!g->copy[d].count) continue;
        char nm[32];
        int n = snprintf(nm, sizeof nm, "memcpy %s", dir_name(d));
        lp_csv_row(o, nm, (size_t)n, "gpu", &g->copy[d], 0);
    }
    if (g->sets.count) lp_csv_row(o, "memset", 6, "gpu", &g->sets, 0);
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    const struct lp_gpu *g = a->view[LP_VIEW_GPU];
    if (!lp_gpu_any(g)) return;
    lp_json_kobject(j, "gpu");
    lp_json_ks(j, "source", "cupti", 5);
    lp_json_kus(j, "kernels", LP_U(g->kernels), "memcpys", LP_U(g->copies), "memsets", LP_U(g->nsets), "dropped",
                LP_U(g->dropped), "linked", LP_U(g->linked), "busy_ns", LP_U(g->busy_ns), NULL);
    lp_json_karray(j, "by_kernel");
    for (size_t i = 0; i < g->nkern; i++) {
        const struct fnstat *f = &g->kern[i].f;
        uint32_t len;
        const char *name = kname(g, g->kern[i].name, &len);
        lp_json_object(j);
        lp_json_ks(j, "name", name, len);
        lp_json_kus(j, "count", LP_U(f->count), "total_ns", LP_U(f->total_ns), "mean_ns",
                    LP_U(f->total_ns / (f->timed ? f->timed : 1)), "p50_ns", LP_U(lp_percentile(f, 0.50)), "p99_ns",
                    LP_U(lp_percentile(f, 0.99)), NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_karray(j, "copies");
    for (unsigned d = 0; d < 16; d++) {
        const struct fnstat *f = &g->copy[d];
        if (!f->count) continue;
        lp_json_object(j);
        lp_json_ks(j, "direction", dir_name(d), strlen(dir_name(d)));
        lp_json_kus(j, "count", LP_U(f->count), "bytes", LP_U(f->bytes), "total_ns", LP_U(f->total_ns), NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_karray(j, "gemms");
    for (size_t i = 0; i < g->ngemm; i++) {
        const struct gemm *m = &g->gemm[i];
        if (!m->gpu_ns) continue; /* (no kernel of its seen: no GPU, or GPU times off) */
        lp_json_object(j);
        lp_json_kus(j, "m", LP_U(m->m), "n", LP_U(m->n), "k", LP_U(m->k), "batch", LP_U(m->batch), "type",
                    LP_U(m->type), "count", LP_U(m->count), "flop", LP_U(m->flop * m->count), "gpu_ns", LP_U(m->gpu_ns),
                    NULL);
        lp_json_kd(j, "gflops", "%.3f", (double)m->flop * (double)m->count / (double)m->gpu_ns);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_kobject(j, "memset");
    lp_json_kus(j, "count", LP_U(g->sets.count), "bytes", LP_U(g->sets.bytes), "total_ns", LP_U(g->sets.total_ns),
                NULL);
    lp_json_object_end(j);
    lp_json_karray(j, "streams");
    for (size_t k = 0; k < g->ntrack; k++) {
        const struct track *t = &g->track[k];
        lp_json_object(j);
        lp_json_kus(j, "device", LP_U(t->device), "stream", LP_U(t->stream), "track", LP_U(LP_GPU_TRACK(k)), "ops",
                    LP_U(t->ops), "busy_ns", LP_U(t->busy_ns), NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_object_end(j);
}

/* ---- the view (views.h): the GPU's own kernels, copies and sets, from CUPTI's records; the GPU families'
 * calls are their arrows' starts */
#define GPU(a) ((struct lp_gpu *)(a)->view[LP_VIEW_GPU])
#define SHAPE(s) (1u << LP_SHAPE_##s)
static int view_create(struct lp_analysis *a) { return (a->view[LP_VIEW_GPU] = lp_gpu_new(a->r)) ? 0 : -1; }
static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    unsigned fam = lp_call_family[s->call->call];
    return fam == LP_FAM_CUDA || fam == LP_FAM_CUBLAS || fam == LP_FAM_NCCL ? lp_gpu_call(GPU(a), e, s->call) : 0;
}
static int view_finish(struct lp_analysis *a) { return lp_gpu_finish(GPU(a)); }
static void view_destroy(struct lp_analysis *a) { lp_gpu_free(GPU(a)); }

// clang-format off
const struct lp_view lp_view_gpu = {"gpu", SHAPE(CALL), view_create, view_event, NULL, view_finish, view_destroy, view_summary, view_csv, view_chrome, view_metadata};
// clang-format on
