/* chrome_in.c: Chrome trace JSON → slices. Parsing is cJSON's; what is done here is the
 * tolerance real traces need: B/E pairs matched per thread, string thread ids (PyTorch writes
 * "tid": "stream 7"), missing fields, and events this tool has no use for (skipped, counted). */
#define _GNU_SOURCE
#include "chrome_in.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/map.h"
#include "lib/vec.h"

/* The parser's state beside the slice builder: string ids, open B events. */
struct parse {
    struct lp_slices_builder *b;
    struct lp_slices *c;
    struct lp_map ids; /* string pid/tid hash -> small number */
    struct open_b {
        int64_t pid, tid, ts;
        uint32_t name, cat;
    } * open;
    size_t nopen, capopen;
    int oom;
};

static uint64_t hash_str(const char *s) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (; *s; s++) h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    return h | 1;
}

/* A pid or tid: integers as they are, strings mapped to numbers from 1,000,000,000 up, absent 0. */
static int64_t id_of(struct parse *l, const cJSON *j) {
    if (cJSON_IsNumber(j)) /* beyond int64 (or NaN): no real thread has that id */
        return isfinite(j->valuedouble) && fabs(j->valuedouble) < 9e18 ? (int64_t)j->valuedouble : -1;
    if (!cJSON_IsString(j)) return 0;
    uint64_t h = hash_str(j->valuestring), v;
    if (lp_map_get(&l->ids, h, &v)) return (int64_t)v;
    v = 1000000000u + l->ids.n;
    if (lp_map_put(&l->ids, h, v, NULL) < 0) l->oom = 1;
    return (int64_t)v;
}

static int64_t us_to_ns(const cJSON *j) {
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble)) return INT64_MIN;
    double ns = j->valuedouble * 1000.0;
    if (ns > 9e18 || ns < -9e18) return INT64_MIN;
    return (int64_t)llround(ns);
}

static void event(struct parse *l, const cJSON *e) {
    l->c->events++;
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    if (!cJSON_IsObject(e) || !cJSON_IsString(ph) || !ph->valuestring[0]) {
        l->c->skipped++;
        return;
    }
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    const char *name = cJSON_IsString(nm) ? nm->valuestring : "";
    int64_t pid = id_of(l, cJSON_GetObjectItemCaseSensitive(e, "pid"));
    int64_t tid = id_of(l, cJSON_GetObjectItemCaseSensitive(e, "tid"));
    int64_t ts = us_to_ns(cJSON_GetObjectItemCaseSensitive(e, "ts"));
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(e, "cat");
    const char *cat = cJSON_IsString(ct) ? ct->valuestring : "";
    char p = ph->valuestring[0];
    if ((p != 'X' && p != 'B' && p != 'E') || ts == INT64_MIN) {
        l->c->skipped++;
        return;
    }
    if (p == 'X' && !strcmp(cat, "mpi")) { /* libprof's MPI slices: their bytes (the per-rank view) */
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *by = cJSON_GetObjectItemCaseSensitive(args, "bytes"),
                    *rb = cJSON_GetObjectItemCaseSensitive(args, "recv_bytes");
        lp_slices_mpi_bytes(l->c, name, cJSON_IsNumber(by) && by->valuedouble > 0 ? (uint64_t)by->valuedouble : 0,
                            cJSON_IsNumber(rb) && rb->valuedouble > 0 ? (uint64_t)rb->valuedouble : 0);
    }
    if (p == 'X') {
        int64_t dur = us_to_ns(cJSON_GetObjectItemCaseSensitive(e, "dur"));
        lp_slices_add(l->b, lp_slices_intern(l->b, name), lp_slices_intern(l->b, cat), pid, tid, ts,
                      dur == INT64_MIN ? 0 : dur);
        /* libprof's: the CPU sampled while it ran */
        const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "cpu_ns");
        if (cJSON_IsNumber(cpu) && cpu->valuedouble >= 0 && cpu->valuedouble < 9e18)
            lp_slices_set_cpu(l->b, (int64_t)cpu->valuedouble);
        const cJSON *oth =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "cpu_others_ns");
        if (cJSON_IsNumber(oth) && oth->valuedouble >= 0 && oth->valuedouble < 9e18)
            lp_slices_set_cpu_others(l->b, (int64_t)oth->valuedouble);
    } else if (p == 'B') {
        if (LP_RESERVE(l->open, l->capopen, l->nopen + 1) != 0) {
            l->oom = 1;
            return;
        }
        l->open[l->nopen++] = (struct open_b){pid, tid, ts, lp_slices_intern(l->b, name), lp_slices_intern(l->b, cat)};
    } else { /* E closes the innermost open B of the same thread */
        for (size_t i = l->nopen; i-- > 0;) {
            if (l->open[i].pid != pid || l->open[i].tid != tid) continue;
            lp_slices_add(l->b, l->open[i].name, l->open[i].cat, pid, tid, l->open[i].ts, ts - l->open[i].ts);
            memmove(&l->open[i], &l->open[i + 1], (l->nopen - i - 1) * sizeof *l->open);
            l->nopen--;
            return;
        }
        l->c->unmatched++;
    }
}

static uint64_t num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9e18 ? (uint64_t)v->valuedouble : 0;
}

static int cpu_rows(const cJSON *a, const char *key, struct lp_cpu_row **out, size_t *n) {
    *n = 0;
    int count = cJSON_GetArraySize(a);
    if (!cJSON_IsArray(a) || count <= 0) return 0;
    if (!(*out = calloc((size_t)count, sizeof **out))) return -1;
    const cJSON *row;
    cJSON_ArrayForEach(row, a) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(row, key);
        if (!cJSON_IsString(nm)) continue;
        struct lp_cpu_row *r = &(*out)[(*n)++];
        if (!(r->name = strdup(nm->valuestring))) return -1;
        r->self = num(row, "self");
        r->total = num(row, "total");
    }
    return 0;
}

/* libprof's metadata on CPU samples (sampling, cpu_functions, cpu_python_lines) into out->cpu;
 * 0, or -1 when out of memory. */
static int cpu_of(const cJSON *meta, int64_t pid, struct lp_cpu *out) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(meta, "sampling");
    if (!cJSON_IsObject(g) || !num(g, "period_ns")) return 0;
    out->period_ns = num(g, "period_ns");
    out->span_ns = num(g, "span_ns");
    out->samples = num(g, "samples");
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(g, "threads"), *t;
    int n = cJSON_GetArraySize(th);
    if (cJSON_IsArray(th) && n > 0) {
        if (!(out->threads = calloc((size_t)n, sizeof *out->threads))) return -1;
        cJSON_ArrayForEach(t, th) {
            struct lp_cpu_thread *o = &out->threads[out->nthreads++];
            o->pid = pid;
            o->tid = (int64_t)num(t, "tid");
            o->samples = num(t, "samples");
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, "name"), *b;
            snprintf(o->name, sizeof o->name, "%s", cJSON_IsString(nm) ? nm->valuestring : "?");
            unsigned k = 0;
            cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(t, "buckets")) {
                if (k >= LP_CPU_BUCKETS) break;
                o->bucket[k++] =
                    cJSON_IsNumber(b) && b->valuedouble >= 0 && b->valuedouble < 4e9 ? (uint32_t)b->valuedouble : 0;
            }
        }
    }
    if (cpu_rows(cJSON_GetObjectItemCaseSensitive(meta, "cpu_functions"), "function", &out->fns, &out->nfns) != 0 ||
        cpu_rows(cJSON_GetObjectItemCaseSensitive(meta, "cpu_python_lines"), "line", &out->lines, &out->nlines) != 0)
        return -1;
    out->fns_cut = num(g, "functions") > out->nfns; /* the metadata lists the first ones */
    return 0;
}

/* metadata.libprof.torch's operator table (ops, by_shapes); 0, or -1 when out of memory. */
static int op_rows(const cJSON *a, struct lp_op_row **out, size_t *n) {
    *n = 0;
    int count = cJSON_GetArraySize(a);
    if (!cJSON_IsArray(a) || count <= 0) return 0;
    if (!(*out = calloc((size_t)count, sizeof **out))) return -1;
    const cJSON *row;
    cJSON_ArrayForEach(row, a) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(row, "name"),
                    *sh = cJSON_GetObjectItemCaseSensitive(row, "shapes");
        if (!cJSON_IsString(nm)) continue;
        struct lp_op_row *r = &(*out)[(*n)++];
        if (!(r->name = strdup(nm->valuestring)) || (cJSON_IsString(sh) && !(r->shapes = strdup(sh->valuestring))))
            return -1;
        r->count = num(row, "count");
        r->total_ns = num(row, "total_ns");
        r->self_ns = num(row, "self_ns");
        r->mean_ns = num(row, "mean_ns");
        r->p50_ns = num(row, "p50_ns");
        r->p99_ns = num(row, "p99_ns");
        r->bytes_self = num(row, "bytes_self");
        r->bytes_total = num(row, "bytes_total");
    }
    return 0;
}

int lp_chrome_load(const char *text, size_t len, struct lp_slices *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        snprintf(err, errlen, "not JSON (error near byte %td)",
                 cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - text : (ptrdiff_t)0);
        return -1;
    }
    int rc = lp_chrome_load_tree(root, out, err, errlen);
    cJSON_Delete(root);
    return rc;
}

int lp_chrome_load_tree(const cJSON *root, struct lp_slices *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const cJSON *events = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (!cJSON_IsArray(events)) {
        snprintf(err, errlen, "JSON but not a Chrome trace (no traceEvents array)");
        return -1;
    }
    struct parse l = {.b = lp_slices_builder_new(out), .c = out};
    if (!l.b) {
        snprintf(err, errlen, "out of memory reading the trace");
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, events) event(&l, e);
    /* libprof's metadata: where the trace sits in wall-clock time (for --merge) */
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"), "libprof");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(meta, "start_time_unix_ns");
    const cJSON *pidj = cJSON_GetObjectItemCaseSensitive(meta, "pid");
    if (cJSON_IsNumber(st) && st->valuedouble > 0 && st->valuedouble < 9e18)
        out->origin_real_ns = (int64_t)st->valuedouble;
    if (cJSON_IsNumber(pidj) && pidj->valuedouble > 0 && pidj->valuedouble < 4e9) out->pid = (int64_t)pidj->valuedouble;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(meta, "job"),
                *rk = cJSON_GetObjectItemCaseSensitive(job, "rank");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(job, "host");
    int64_t rank = cJSON_IsNumber(rk) && rk->valuedouble >= 0 && rk->valuedouble < 1e9 ? (int64_t)rk->valuedouble : -1;
    char hostname[64] = "";
    if (cJSON_IsString(host)) snprintf(hostname, sizeof hostname, "%s", host->valuestring);
    uint64_t sent = out->mpi_sent, recv = out->mpi_recv, coll = out->mpi_coll;
    struct lp_cpu cpu = {0};
    if (cpu_of(meta, out->pid, &cpu) != 0) l.oom = 1;
    struct lp_op_row *ops = NULL, *op_shapes = NULL;
    size_t nops = 0, nop_shapes = 0;
    const cJSON *torch = cJSON_GetObjectItemCaseSensitive(meta, "torch");
    if (op_rows(cJSON_GetObjectItemCaseSensitive(torch, "ops"), &ops, &nops) != 0 ||
        op_rows(cJSON_GetObjectItemCaseSensitive(torch, "by_shapes"), &op_shapes, &nop_shapes) != 0)
        l.oom = 1;
    out->unmatched += l.nopen;
    free(l.open);
    lp_map_free(&l.ids);
    if (l.oom) lp_slices_oom(l.b);
    int64_t origin = out->origin_real_ns, pid = out->pid;
    size_t nevents = out->events, skipped = out->skipped, unmatched = out->unmatched;
    if (lp_slices_builder_end(l.b) != 0) {
        lp_cpu_free(&cpu);
        for (size_t i = 0; i < nops; i++) free(ops[i].name);
        for (size_t i = 0; i < nop_shapes; i++) {
            free(op_shapes[i].name);
            free(op_shapes[i].shapes);
        }
        free(ops);
        free(op_shapes);
        snprintf(err, errlen, "out of memory reading the trace");
        return -1;
    }
    out->cpu = cpu;
    out->ops = ops;
    out->nops = nops;
    out->op_shapes = op_shapes;
    out->nop_shapes = nop_shapes;
    out->origin_real_ns = origin;
    out->pid = pid;
    out->rank = rank;
    snprintf(out->host, sizeof out->host, "%s", hostname);
    out->mpi_sent = sent;
    out->mpi_recv = recv;
    out->mpi_coll = coll;
    out->events = nevents;
    out->skipped = skipped;
    out->unmatched = unmatched;
    return 0;
}
