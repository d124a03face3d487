/* slices.c: see slices.h. */
#define _GNU_SOURCE
#include "slices.h"
#include "etdump.h"
#include "ort.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"
#include "gil.h"
#include "map.h"
#include "os.h"
#include "samples.h"
#include "vec.h"

struct lp_slices_builder {
    struct lp_slices *c;
    struct lp_map names; /* string hash -> index+1 (collisions checked by comparing) */
    size_t cap, capnames;
    int oom;
};

static uint64_t hash_n(const char *s, size_t n) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
    return h | 1;
}

uint32_t lp_slices_intern_n(struct lp_slices_builder *b, const char *s, size_t n) {
    uint64_t v;
    n = strnlen(s, n); /* a name from a trace may hold a NUL: it ends there */
    for (uint64_t probe = hash_n(s, n);; probe = probe * 31 + 7) {
        probe |= 1;
        if (!lp_map_get(&b->names, probe, &v)) {
            char *copy = lp_os_strndup(s, n);
            if (!copy || LP_RESERVE(b->c->names, b->capnames, b->c->nnames + 1) != 0) {
                lp_os_free(copy);
                b->oom = 1;
                return 0;
            }
            b->c->names[b->c->nnames] = copy;
            if (lp_map_put(&b->names, probe, b->c->nnames + 1, NULL) < 0) b->oom = 1;
            return (uint32_t)b->c->nnames++;
        }
        const char *have = b->c->names[v - 1];
        if (!strncmp(have, s, n) && have[n] == '\0') return (uint32_t)(v - 1);
    }
}

uint32_t lp_slices_intern(struct lp_slices_builder *b, const char *name) {
    return lp_slices_intern_n(b, name, strlen(name));
}

void lp_slices_add(struct lp_slices_builder *b, uint32_t name, uint32_t cat, int64_t pid, int64_t tid, int64_t ts,
                   int64_t dur) {
    struct lp_slices *c = b->c;
    if (LP_RESERVE(c->slices, b->cap, c->nslices + 1) != 0) {
        b->oom = 1;
        return;
    }
    const int64_t lim = INT64_C(1) << 61;
    if (ts > lim) ts = lim;
    if (ts < -lim) ts = -lim;
    if (dur > lim) dur = lim;
    c->slices[c->nslices++] = (struct lp_slice){name, cat, pid, tid, ts, dur < 0 ? 0 : dur, -1, -1};
}

void lp_slices_set_cpu(struct lp_slices_builder *b, int64_t cpu_ns) {
    if (b->c->nslices) b->c->slices[b->c->nslices - 1].cpu_ns = cpu_ns;
}

void lp_slices_set_cpu_others(struct lp_slices_builder *b, int64_t cpu_ns) {
    if (b->c->nslices) b->c->slices[b->c->nslices - 1].cpu_others_ns = cpu_ns;
}

void lp_slices_oom(struct lp_slices_builder *b) { b->oom = 1; }

void lp_slices_free(struct lp_slices *c) {
    for (size_t i = 0; i < c->nnames; i++) lp_os_free(c->names[i]);
    lp_os_free(c->names);
    lp_os_free(c->slices);
    lp_cpu_free(&c->cpu);
    for (size_t i = 0; i < c->nops; i++) lp_os_free(c->ops[i].name);
    for (size_t i = 0; i < c->nop_shapes; i++) {
        lp_os_free(c->op_shapes[i].name);
        lp_os_free(c->op_shapes[i].shapes);
    }
    lp_os_free(c->ops);
    lp_os_free(c->op_shapes);
    memset(c, 0, sizeof *c);
}

struct lp_slices_builder *lp_slices_builder_new(struct lp_slices *out) {
    memset(out, 0, sizeof *out);
    struct lp_slices_builder *b = lp_os_calloc(1, sizeof *b);
    if (b) b->c = out;
    return b;
}

int lp_slices_builder_end(struct lp_slices_builder *b) {
    int oom = b->oom;
    lp_map_free(&b->names);
    if (oom) lp_slices_free(b->c);
    lp_os_free(b);
    return oom ? -1 : 0;
}

int lp_slices_from_reader(const struct lp_reader *r, struct lp_slices *out,
                          void (*progress)(uint64_t done, uint64_t total, void *arg), char *err, size_t errlen) {
    struct lp_slices_builder *b = lp_slices_builder_new(out);
    struct lp_iter *it = b ? lp_iter_new(r) : NULL;
    if (!it) {
        if (b) lp_slices_builder_end(b);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint32_t fam[LP_FAM_COUNT];
    for (unsigned f = 0; f < LP_FAM_COUNT; f++) fam[f] = lp_slices_intern(b, lp_family_names[f]);
    struct lp_ort *ort = r->nort_profiles ? lp_ort_new(r) : NULL;
    struct lp_etdump *etd = r->netdumps ? lp_etdump_new(r) : NULL;
    int oom = 0;
    struct lp_samples *cpu = lp_samples_new(r, &oom); /* NULL: no samples */
    if (oom) lp_slices_oom(b);
    struct lp_gil_threads gil = {0}; /* the GIL's holds: the holder track the Chrome trace has */
    struct lp_event e;
    uint64_t next_progress = 1u << 20;
    while (lp_iter_next(it, &e)) {
        if (progress && lp_iter_position(it) >= next_progress) {
            progress(lp_iter_position(it), r->events, NULL);
            next_progress += 1u << 20;
        }
        int shape = lp_kind_shape[e.kind];
        if (shape == LP_SHAPE_SAMPLE) {
            if (cpu && lp_samples_event(cpu, &e, 1) != 0) lp_slices_oom(b);
            continue;
        }
        if (!e.timed || e.phase != 1) continue;
        if (shape != LP_SHAPE_RANGE && shape != LP_SHAPE_CALL && shape != LP_SHAPE_PYCALL)
            continue; /* allocations: the memory report */
        uint32_t len;
        const char *cat, *n = lp_event_name(r, &e, &len, &cat);
        uint32_t name = lp_slices_intern_n(b, n, len);
        int f = lp_family_find(cat, strlen(cat));
        const uint64_t lim = UINT64_C(1) << 61; /* a forged clock; lp_slices_add clamps too */
        lp_slices_add(b, name, f >= 0 ? fam[f] : lp_slices_intern(b, cat), r->hdr.pid, e.tid,
                      (int64_t)(e.start_ns > lim ? lim : e.start_ns), (int64_t)(e.dur_ns > lim ? lim : e.dur_ns));
        if (cpu) lp_slices_set_cpu(b, (int64_t)lp_samples_cpu_ns(cpu, e.thread, e.start_ns, e.start_ns + e.dur_ns));
        enum lp_block kind = lp_block_kind(cat, n);
        if (kind != LP_BLOCK_NONE && lp_gil_threads_add(&gil, e.thread, kind, (int64_t)e.start_ns, (int64_t)e.dur_ns,
                                                        kind == LP_BLOCK_GIL && shape == LP_SHAPE_CALL &&
                                                            lp_gil_timed_out(lp_call_nargs(e.w[0]), e.w + 1)) != 0)
            lp_slices_oom(b);
        if (shape == LP_SHAPE_CALL && lp_call_id(e.w[0]) < LP_CALL_COUNT &&
            lp_call_family[lp_call_id(e.w[0])] == LP_FAM_MPI && lp_call_nargs(e.w[0]) >= 1) {
            unsigned call = lp_call_id(e.w[0]), na = lp_call_nargs(e.w[0]);
            int has_bytes = call != LP_CALL_MPI_INIT && call != LP_CALL_MPI_INIT_THREAD &&
                            call != LP_CALL_MPI_FINALIZE && call != LP_CALL_MPI_WAIT && call != LP_CALL_MPI_WAITALL &&
                            call != LP_CALL_MPI_WAITANY && call != LP_CALL_MPI_TEST && call != LP_CALL_MPI_BARRIER;
            if (has_bytes)
                lp_slices_mpi_bytes(out, lp_call_names[call], e.w[1],
                                    call == LP_CALL_MPI_SENDRECV && na >= 6 ? e.w[6] : 0);
        }
        if (shape == LP_SHAPE_CALL && lp_call_id(e.w[0]) == LP_CALL_ORT_RUN && cpu) /* its pool's work */
            lp_slices_set_cpu_others(
                b, (int64_t)lp_samples_cpu_others_ns(cpu, e.thread, e.start_ns, e.start_ns + e.dur_ns));
        if (ort && shape == LP_SHAPE_CALL && lp_call_id(e.w[0]) == LP_CALL_ORT_RUN && lp_call_nargs(e.w[0]) >= 1)
            lp_ort_run(ort, e.w[1], e.tid, e.start_ns, e.dur_ns);
        if (etd) { /* every slice: ExecuTorch's own, and those the ETDump's events must not cross */
            unsigned call = shape == LP_SHAPE_CALL ? lp_call_id(e.w[0]) : 0, na = call ? lp_call_nargs(e.w[0]) : 0;
            int64_t index = lp_etdump_index(call, na, na >= 3 ? e.w[3] : 0);
            if (lp_etdump_slice(etd, index, e.tid, e.start_ns, e.dur_ns) != 0) lp_slices_oom(b);
        }
    }
    /* the GIL's holder, a track of its own, as the Chrome export has it */
    lp_gil_threads_end(&gil);
    for (size_t i = 0; i < gil.holds.n; i++) {
        const struct lp_gil_hold *h = &gil.holds.h[i];
        int64_t ns = lp_gil_hold_ns(h);
        char hn[96];
        if (!ns) continue;
        int hl = lp_gil_hold_name(r, h->who, hn, sizeof hn);
        lp_slices_add(b, lp_slices_intern_n(b, hn, (size_t)hl), fam[LP_FAM_PYTHON], r->hdr.pid, LP_GIL_TRACK, h->from,
                      ns);
    }
    lp_gil_threads_free(&gil);
    /* ONNX Runtime's nodes, folded in as the Chrome export does */
    if (ort && lp_ort_finish(ort) == 0) {
        uint32_t cat = lp_slices_intern(b, "ort.node");
        size_t n = lp_ort_count(ort);
        for (size_t i = 0; i < n; i++) {
            const char *nm;
            uint32_t tid;
            uint64_t start, dur;
            lp_ort_node(ort, i, &nm, &tid, &start, &dur);
            lp_slices_add(b, lp_slices_intern(b, nm), cat, r->hdr.pid, tid, (int64_t)start, (int64_t)dur);
            for (uint32_t t = 0; cpu && t < r->nthreads; t++) /* its thread's index, by its id */
                if (r->threads[t].tid == tid && r->threads[t].owner == t) {
                    lp_slices_set_cpu(b, (int64_t)lp_samples_cpu_ns(cpu, t, start, start + dur));
                    break;
                }
        }
    }
    lp_ort_free(ort);
    /* ExecuTorch's ETDump events, on their rows beside the threads, as the Chrome export has them */
    if (etd && lp_etdump_finish(etd) == 0) {
        uint32_t cat = lp_slices_intern(b, "etdump");
        for (size_t i = 0, n = lp_etdump_count(etd); i < n; i++) {
            const char *nm;
            uint32_t track;
            uint64_t start, dur;
            lp_etdump_event(etd, i, &nm, &track, &start, &dur);
            lp_slices_add(b, lp_slices_intern(b, nm), cat, r->hdr.pid, track, (int64_t)start, (int64_t)dur);
        }
    }
    lp_etdump_free(etd);
    if (progress) progress(r->events, r->events, NULL);
    lp_iter_free(it);
    out->origin_real_ns = (int64_t)r->hdr.origin_real_ns;
    out->pid = r->hdr.pid;
    out->rank = -1;
    if (r->job) { /* launcher\0rank\0... */
        const char *rk = memchr(r->job, 0, r->job_len);
        if (rk && rk + 1 < r->job + r->job_len) out->rank = strtol(rk + 1, NULL, 10);
    }
    if (r->hostname) snprintf(out->host, sizeof out->host, "%.*s", (int)r->hostname_len, r->hostname);
    if (cpu && (lp_samples_finish(cpu) != 0 || lp_samples_export(cpu, &out->cpu) != 0)) lp_slices_oom(b);
    lp_samples_free(cpu);
    if (lp_slices_builder_end(b) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void lp_slices_mpi_bytes(struct lp_slices *c, const char *name, uint64_t bytes, uint64_t recv_bytes) {
    if (!strcmp(name, "MPI_Send") || !strcmp(name, "MPI_Isend")) {
        c->mpi_sent += bytes;
    } else if (!strcmp(name, "MPI_Recv") || !strcmp(name, "MPI_Irecv")) {
        c->mpi_recv += bytes;
    } else if (!strcmp(name, "MPI_Sendrecv")) {
        c->mpi_sent += bytes;
        c->mpi_recv += recv_bytes;
    } else if (strncmp(name, "MPI_", 4) == 0) {
        c->mpi_coll += bytes;
    }
}
