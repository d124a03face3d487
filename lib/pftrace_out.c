/* pftrace_out.c: the Perfetto writer's bottom floor (see pftrace.h) — the tracks and their
 * records, which the sink and the profiles fill, or counter values written at once; then the
 * file: the tracks' descriptors, each track's records sorted into the order Perfetto wants, all
 * merged into one packet sequence in time order, written in bundles; and the workers, threads
 * that deflate the bundles and make the heap profile beside the converting thread. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "analysis.h"
#include "cc.h"
#include "deflate.h"
#include "os.h"
#include "pftrace.h"
#include "reader.h"
#include "vec.h"

/* ---- tracks and their records (the sink's and the profiles' events go into them) ---- */

/* The track of `key` (never 0), made when new. */
struct track *lp_pf_track(struct pf *f, uint64_t key, uint8_t kind, uint32_t pid, uint64_t tid) {
    uint64_t v;
    if (lp_map_get(&f->track_of, key, &v)) return &f->t[v - 1];
    struct track *p = kind == T_PROCESS ? NULL : lp_pf_process(f, pid);
    if (kind != T_PROCESS && !p) return NULL;
    uint64_t parent = p ? p->uuid : 0;
    if (f->oom || LP_RESERVE(f->t, f->capt, f->nt + 1) != 0 || lp_map_put(&f->track_of, key, f->nt + 1, NULL) < 0) {
        f->oom = 1;
        return NULL;
    }
    struct track *t = &f->t[f->nt++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->pid = pid;
    t->tid = tid;
    t->uuid = f->nt;
    t->parent = parent;
    return t;
}

/* A new event of track `t`; its fields are what f->body holds (moved into the arena). */
struct rec *lp_pf_add(struct pf *f, struct track *t, uint8_t type, uint64_t ts, uint64_t dur) {
    if (!t || f->oom || LP_RESERVE(t->r, t->cap, t->n + 1) != 0 ||
        LP_RESERVE(f->arena, f->caparena, f->narena + f->body.n) != 0 || f->body.oom) {
        f->oom = 1;
        f->body.n = 0;
        return NULL;
    }
    struct rec *r = &t->r[t->n++];
    *r = (struct rec){ts, dur, f->narena, (uint32_t)f->body.n, f->seq++, 0, type};
    if (f->body.n) memcpy(f->arena + f->narena, f->body.d, f->body.n);
    f->narena += f->body.n;
    f->body.n = 0;
    if (ts < f->first_ts) f->first_ts = ts;
    if (type == R_SLICE && ts + dur > f->last_ts) f->last_ts = ts + dur;
    if (ts > f->last_ts) f->last_ts = ts;
    return r;
}

void lp_pf_add_flow(struct pf *f, struct rec *r, uint64_t id) {
    if (!r || LP_RESERVE(f->flows, f->capflows, f->nflows + 1) != 0) {
        f->oom = 1;
        return;
    }
    f->flows[f->nflows] = (struct flow){id, r->flows};
    r->flows = (uint32_t)++f->nflows;
}

struct track *lp_pf_process(struct pf *f, uint32_t pid) {
    return lp_pf_track(f, UINT64_C(1) << 63 | UINT64_C(1) << 62 | pid, T_PROCESS, pid, 0);
}

struct track *lp_pf_thread(struct pf *f, uint32_t pid, uint64_t tid) {
    return lp_pf_track(f, UINT64_C(1) << 63 | (uint64_t)pid << 32 | (tid & 0xffffffffu), T_THREAD, pid, tid);
}

/* ---- writing ----------------------------------------------------------------------------------
 * Packets are written in bundles, each compressed with deflate into one packet of its own
 * (TracePacket.compressed_packets, a zlib stream), as Perfetto's tracing service writes them: a
 * trace's packets are mostly the same few fields, and deflate takes them to a fifth or less.
 * The deflater is the fastest the system has (deflate.c); without one, or when it fails, the
 * packets are written as they are. */

/* The bytes of `v` as a varint. */
static inline size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v > 0x7f) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Bundle `b`'s packets as one zlib stream into b->z (b->nz: its length, 0 when it failed). */
static void deflate_bundle(struct bundle *b) {
    size_t cap = lp_deflate_bound(b->raw.n);
    b->nz = LP_RESERVE(b->z, b->capz, cap) == 0 ? lp_deflate(&b->dz, b->raw.d, b->raw.n, b->z, cap) : 0;
}

/* Bundle `b` deflated, where the trace is and a deflater loads (else b->nz stays 0). */
void lp_pf_bundle_deflate(struct pf *f, struct bundle *b) {
    if (b->raw.n && f->compress && lp_deflate_load()) deflate_bundle(b);
}

/* Packets to `o`: a bundle's deflated bytes as one packet of their own (`deflated`), else the
 * packets as they are. */
void lp_pf_write_packets(struct lp_out *o, const uint8_t *d, size_t n, int deflated) {
    if (deflated) {
        uint8_t head[24], *p = head;
        size_t body = varint_len((uint64_t)PKT_COMPRESSED_PACKETS << 3 | 2) + varint_len(n) + n;
        p = lp_pb_varint_at(p, (uint64_t)TRACE_PACKET << 3 | 2);
        p = lp_pb_varint_at(p, body);
        p = lp_pb_varint_at(p, (uint64_t)PKT_COMPRESSED_PACKETS << 3 | 2);
        p = lp_pb_varint_at(p, n);
        lp_out_write(o, head, (size_t)(p - head));
    }
    lp_out_write(o, d, n);
}

/* Bundle `b` to `o`, deflated or not, and emptied. */
static void bundle_write(struct pf *f, struct bundle *b, struct lp_out *o) {
    if (b->nz)
        lp_pf_write_packets(o, b->z, b->nz, 1);
    else
        lp_pf_write_packets(o, b->raw.d, b->raw.n, 0);
    if (b->raw.oom) f->oom = 1;
    b->raw.n = 0;
    b->nz = 0;
}

/* Room for a whole bundle in the one now filled, made at once (grown a doubling at a time, its
 * bytes would be copied and its pages touched twice). */
void lp_pf_bundle_room(struct bundle *b) {
    if (b->raw.cap < BUNDLE_BYTES + BUNDLE_SLACK) lp_pb_room(&b->raw, BUNDLE_BYTES + BUNDLE_SLACK - b->raw.n);
}

/* ---- the workers ------------------------------------------------------------------------------
 * Threads started once, at the first job (beside the pass: the deflater's loading), that take
 * jobs in the order given — the heap profile, the bundles to deflate. A job whose result is needed
 * before a worker took it is taken back and done by the thread that needs it: the converting
 * thread never waits while there is work it could do, and no thread is started a bundle. */

static void *worker_main(void *arg) {
    struct pf *f = arg;
    lp_lock(&f->mu);
    for (;;) {
        while (!f->quit && f->qhead == f->qtail) { /* (a job queued meanwhile changes the word) */
            int seen = f->work;
            lp_unlock(&f->mu);
            lp_os_wait(&f->work, seen);
            lp_lock(&f->mu);
        }
        if (f->qhead == f->qtail) break; /* (ending, nothing left) */
        struct lp_pf_job *j = f->q[f->qhead++ % JOBS_MAX];
        if (j->state != JOB_QUEUED) continue; /* taken back */
        j->state = JOB_RUNNING;
        lp_unlock(&f->mu);
        j->fn(j->arg);
        lp_lock(&f->mu);
        j->state = JOB_DONE;
        f->done++;
        lp_os_wake(&f->done, INT_MAX);
    }
    lp_unlock(&f->mu);
    return NULL;
}

int lp_pf_job_queue(struct pf *f, struct lp_pf_job *j) {
    if (!f->writers || f->quit) return -1;
    if (!f->pool) {
        f->pool = 1;
        while (f->nworkers < f->writers && lp_os_thread_start(&f->worker[f->nworkers], worker_main, f) == 0)
            f->nworkers++;
    }
    if (!f->nworkers) return -1;
    lp_lock(&f->mu);
    int ok = f->qtail - f->qhead < JOBS_MAX;
    if (ok) {
        j->state = JOB_QUEUED;
        f->q[f->qtail++ % JOBS_MAX] = j;
        f->work++;
    }
    lp_unlock(&f->mu);
    if (ok) lp_os_wake(&f->work, 1);
    return ok ? 0 : -1;
}

void lp_pf_job_wait(struct pf *f, struct lp_pf_job *j) {
    if (!f->pool) return;
    lp_lock(&f->mu);
    if (j->state == JOB_QUEUED) { /* no worker has it: done here */
        j->state = JOB_RUNNING;
        lp_unlock(&f->mu);
        j->fn(j->arg);
        lp_lock(&f->mu);
    } else {
        while (j->state == JOB_RUNNING) {
            int seen = f->done;
            lp_unlock(&f->mu);
            lp_os_wait(&f->done, seen);
            lp_lock(&f->mu);
        }
    }
    j->state = JOB_IDLE;
    lp_unlock(&f->mu);
}

void lp_pf_workers_quit(struct pf *f) {
    if (!f->pool || f->quit) return;
    lp_lock(&f->mu);
    f->quit = 1;
    f->work++;
    lp_unlock(&f->mu);
    lp_os_wake(&f->work, INT_MAX);
}

void lp_pf_workers_end(struct pf *f) {
    if (!f->pool) return;
    lp_pf_workers_quit(f);
    for (unsigned i = 0; i < f->nworkers; i++) lp_os_thread_join(f->worker[i]);
    f->pool = 0;
    f->nworkers = 0;
}

/* ---- the bundles ---- */

static void deflate_job(void *arg) { deflate_bundle(arg); }

#define RING (f->writers + 2)
/* The oldest bundle given to the workers, written when done (done here if none took it). */
static void writer_done(struct pf *f, struct lp_out *o) {
    struct bundle *b = &f->bundle[(f->cur + RING - f->busy) % RING];
    lp_pf_job_wait(f, &b->job);
    f->busy--;
    bundle_write(f, b, o);
}

/* The oldest bundles the workers are done with, written. */
static void writers_reap(struct pf *f, struct lp_out *o) {
    while (f->busy) {
        struct bundle *b = &f->bundle[(f->cur + RING - f->busy) % RING];
        lp_lock(&f->mu);
        int done = b->job.state == JOB_DONE;
        lp_unlock(&f->mu);
        if (!done) break;
        writer_done(f, o);
    }
}

/* The current bundle out (`last`: the trace's last). Deflate is most of the cost of writing
 * the packets: a bundle is given to the workers while the next ones are made; when the ring is
 * full, the oldest is waited for (or deflated here, where no worker has taken it yet); the last
 * is deflated here while the workers end theirs — all written in order. Without workers, each
 * here. Where a bundle is cut never depends on who deflates it: the file is the same. */
void lp_pf_bundle_out(struct pf *f, struct lp_out *o, int last) {
    struct bundle *b = &f->bundle[f->cur];
    int z = b->raw.n && f->compress && lp_deflate_load();
    if (f->busy) writers_reap(f, o);
    if (z && !last && f->writers) {
        while (f->busy + 1 >= RING) writer_done(f, o);
        b->job = (struct lp_pf_job){deflate_job, b, JOB_IDLE};
        if (lp_pf_job_queue(f, &b->job) == 0) {
            f->busy++;
            f->cur = (f->cur + 1) % RING;
            lp_pf_bundle_room(&f->bundle[f->cur]);
            return;
        }
    }
    if (z) deflate_bundle(b);
    while (f->busy) writer_done(f, o); /* the bundles before, first */
    if (b->raw.n) bundle_write(f, b, o);
}

/* Every bundle given to the workers, done (a conversion that stops half-way). */
void lp_pf_writers_end(struct pf *f) {
    for (; f->busy; f->busy--) lp_pf_job_wait(f, &f->bundle[(f->cur + RING - f->busy) % RING].job);
}

/* A packet begins (a Trace.packet written in place in the bundle); packet_out ends it. */
struct lp_pb *lp_pf_packet(struct pf *f) {
    struct lp_pb *b = &f->bundle[f->cur].raw;
    f->pkt_at = lp_pb_open(b, TRACE_PACKET);
    return b;
}

void lp_pf_packet_out(struct pf *f, struct lp_out *o) {
    struct lp_pb *b = &f->bundle[f->cur].raw;
    lp_pb_close(b, f->pkt_at);
    if (b->n >= BUNDLE_BYTES) lp_pf_bundle_out(f, o, 0);
}

void lp_pf_descriptor(struct pf *f, struct lp_out *o, const struct lp_reader *r, struct track *t) {
    struct lp_pb *b = lp_pf_packet(f);
    t->described = 1;
    size_t at = lp_pb_open(b, PKT_TRACK_DESCRIPTOR);
    lp_pb_uint(b, TD_UUID, t->uuid);
    if (t->parent) lp_pb_uint(b, TD_PARENT_UUID, t->parent);
    if (t->kind == T_PROCESS) {
        size_t p = lp_pb_open(b, TD_PROCESS);
        lp_pb_uint(b, PD_PID, t->pid);
        if (t->pid == r->hdr.pid && r->exe) lp_pb_bytes(b, PD_CMDLINE, r->exe, r->exe_len);
        if (t->name) lp_pb_bytes(b, PD_NAME, t->name, strlen(t->name));
        lp_pb_close(b, p);
    } else if (t->kind == T_THREAD) {
        size_t p = lp_pb_open(b, TD_THREAD);
        lp_pb_uint(b, THD_PID, t->pid);
        lp_pb_uint(b, THD_TID, t->tid);
        if (t->name) lp_pb_bytes(b, THD_NAME, t->name, strlen(t->name));
        lp_pb_close(b, p);
    } else {
        const char *name = t->label ? t->label : t->name;
        if (name) lp_pb_bytes(b, TD_NAME, name, strlen(name));
        if (t->kind == T_COUNTER) {
            size_t p = lp_pb_open(b, TD_COUNTER);
            if (t->bytes) lp_pb_uint(b, CD_UNIT, UNIT_SIZE_BYTES);
            lp_pb_close(b, p);
        }
    }
    lp_pb_close(b, at);
    lp_pb_uint(b, PKT_SEQUENCE_ID, SEQ);
    lp_pf_packet_out(f, o);
}

static inline int item_less(const struct item *a, const struct item *b) {
    if (a->ts != b->ts) return a->ts < b->ts;
    if (a->cls != b->cls) return a->cls < b->cls;
    if (a->k1 != b->k1) return a->k1 < b->k1;
    return a->k2 < b->k2;
}

/* A stable merge sort of a track's items that takes the runs already in order as they are: the
 * events arrive nearly sorted (a track's counters and instants in order, a thread's slices in the
 * order they end), so a track costs a pass or a few merges, not n log n compares through a
 * function pointer. 0, or -1 when out of memory. */
static int sort_items(struct pf *f, struct item *it, size_t n) {
    size_t i = 1;
    while (i < n && !item_less(&it[i], &it[i - 1])) i++;
    if (i >= n) return 0;
    /* (the room it needs is kept from track to track: a big one is mapped afresh each time) */
    if (LP_RESERVE(f->sort_tmp, f->capsort_tmp, n) != 0 || LP_RESERVE(f->sort_runs, f->capsort_runs, n + 1) != 0)
        return -1;
    struct item *src = it, *dst = f->sort_tmp;
    size_t *runs = f->sort_runs, nr = 0;
    runs[nr++] = 0;
    for (i = 1; i < n; i++)
        if (item_less(&it[i], &it[i - 1])) runs[nr++] = i;
    runs[nr] = n;
    while (nr > 1) { /* merge runs pairwise, src into dst */
        size_t w = 0;
        for (size_t r = 0; r < nr; r += 2) {
            size_t a = runs[r], m = runs[r + 1], e = r + 2 <= nr ? runs[r + 2] : n, k = a, b = m;
            if (r + 1 >= nr) { /* an odd run out: copied */
                memcpy(dst + a, src + a, (n - a) * sizeof *dst);
                runs[w++] = a;
                break;
            }
            while (a < m && b < e) dst[k++] = item_less(&src[b], &src[a]) ? src[b++] : src[a++];
            memcpy(dst + k, src + a, (m - a) * sizeof *dst);
            k += m - a;
            memcpy(dst + k, src + b, (e - b) * sizeof *dst);
            runs[w++] = runs[r];
        }
        runs[w] = n;
        nr = w;
        struct item *x = src;
        src = dst;
        dst = x;
    }
    if (src != it) memcpy(it, src, n * sizeof *it);
    return 0;
}

/* A track's events in the order they are written: a slice's begin before the slices inside it
 * (at the same time, the longer first), ends before begins at the same time, the inner first;
 * other tracks in time, then arrival, order. The flows' end points are bound to the slices. */
int lp_pf_order(struct pf *f, struct track *t) {
    if (t->kind != T_THREAD) { /* (in time, then arrival, order: a counter's records already are) */
        size_t i = 1;
        while (i < t->n && t->r[i].ts >= t->r[i - 1].ts) i++;
        if (i >= t->n) {
            t->nit = t->n;
            return 0;
        }
    }
    size_t need = 0;
    for (size_t i = 0; i < t->n; i++) need += t->r[i].type == R_SLICE && t->r[i].dur ? 2 : 1;
    t->it = lp_os_malloc((need ? need : 1) * sizeof *t->it);
    if (!t->it) return -1;
    for (size_t i = 0; i < t->n; i++) {
        const struct rec *r = &t->r[i];
        int64_t seq = r->seq;
        if (t->kind != T_THREAD) {
            t->it[t->nit++] = (struct item){r->ts, seq, 0, (uint32_t)i, 1, 0};
        } else if (r->type == R_FLOW_ENCLOSING || r->type == R_FLOW_NEXT) {
            t->it[t->nit++] = (struct item){r->ts, seq, 0, (uint32_t)i, 2, 0};
        } else {
            t->it[t->nit++] = (struct item){r->ts, -(int64_t)r->dur, seq, (uint32_t)i, 1, 0};
            if (r->type == R_SLICE && r->dur)
                t->it[t->nit++] = (struct item){r->ts + r->dur, -(int64_t)r->ts, -seq, (uint32_t)i, 0, 1};
        }
    }
    if (sort_items(f, t->it, t->nit) != 0) return -1;
    if (t->kind != T_THREAD) return 0;
    /* the flows: on the innermost slice open at their time (or the next to begin) */
    uint32_t stack[256], depth = 0, *pending = NULL;
    size_t npending = 0, cappending = 0;
    for (size_t i = 0; i < t->nit; i++) {
        struct item *it = &t->it[i];
        struct rec *r = &t->r[it->rec];
        if (it->cls == 2) {
            if (r->type == R_FLOW_ENCLOSING && depth && depth <= 256) {
                struct rec *s = &t->r[stack[depth - 1]];
                for (uint32_t k = r->flows; k; k = f->flows[k - 1].next) lp_pf_add_flow(f, s, f->flows[k - 1].id);
                r->flows = 0;
            } else if (r->type == R_FLOW_NEXT && LP_RESERVE(pending, cappending, npending + 1) == 0) {
                pending[npending++] = it->rec;
            }
            /* otherwise the flow stays on an instant of its own */
        } else if (it->end) {
            if (depth) depth--;
        } else if (r->type == R_SLICE) {
            for (size_t k = 0; k < npending; k++) {
                struct rec *fl = &t->r[pending[k]];
                for (uint32_t q = fl->flows; q; q = f->flows[q - 1].next) lp_pf_add_flow(f, r, f->flows[q - 1].id);
                fl->flows = 0;
            }
            npending = 0;
            if (r->dur) {
                if (depth < 256) stack[depth] = it->rec;
                depth++;
            }
        }
    }
    lp_os_free(pending);
    return 0;
}

/* A packet begins in bundle `b`: its length, time and sequence, and the head of its message
 * (`field`, `msg` bytes long), in room made for all of it. Returns where the message goes (NULL:
 * out of memory, nothing written). Packets' lengths are known before: each field is written once,
 * in room made once (a trace has as many packets as events). */
static uint8_t *head(struct lp_pb *b, uint64_t ts, uint64_t seq, size_t field, size_t msg) {
    size_t pkt = 1 + varint_len(ts) + 1 + varint_len(seq) + varint_len(field << 3 | 2) + varint_len(msg) + msg;
    size_t need = 1 + varint_len(pkt) + pkt;
    if (b->cap - b->n < need && !lp_pb_room(b, need)) return NULL;
    uint8_t *p = b->d + b->n;
    *p++ = TRACE_PACKET << 3 | 2;
    p = lp_pb_varint_at(p, pkt);
    *p++ = PKT_TIMESTAMP << 3;
    p = lp_pb_varint_at(p, ts);
    *p++ = PKT_SEQUENCE_ID << 3;
    p = lp_pb_varint_at(p, seq);
    /* (no sequence_flags: a sequence's state is set once, in its first packet, never cleared) */
    p = lp_pb_varint_at(p, field << 3 | 2);
    return lp_pb_varint_at(p, msg);
}

/* A counter's value (`dbl`: v is a double's bits) at `ts` on track `t`, as a packet of sequence
 * `seq`; a full bundle out. */
static void counter_out(struct pf *f, struct lp_out *o, const struct track *t, int dbl, uint64_t ts, uint64_t v,
                        uint64_t seq) {
    struct lp_pb *b = &f->bundle[f->cur].raw;
    uint8_t *p =
        head(b, f->clock0 + ts, seq, PKT_TRACK_EVENT, 2 + 1 + varint_len(t->uuid) + 2 + (dbl ? 8 : varint_len(v)));
    if (!p) return;
    *p++ = TE_TYPE << 3;
    *p++ = TYPE_COUNTER;
    *p++ = TE_TRACK_UUID << 3;
    p = lp_pb_varint_at(p, t->uuid);
    if (dbl) {
        p = lp_pb_varint_at(p, TE_DOUBLE_COUNTER_VALUE << 3 | 1);
        for (int i = 0; i < 8; i++) *p++ = (uint8_t)(v >> (8 * i));
    } else {
        p = lp_pb_varint_at(p, TE_COUNTER_VALUE << 3);
        p = lp_pb_varint_at(p, v);
    }
    b->n = (size_t)(p - b->d);
    if (b->n >= BUNDLE_BYTES) lp_pf_bundle_out(f, o, 0);
}

/* A counter's value written at once (while the Chrome writer finishes: the heap's and the
 * sites' thousands) — its track described first — on a packet sequence of the track's own: a
 * sequence's packets come in time order, and a track's values come in theirs (one that does not
 * goes with the timeline, merged). The timeline, the counters and the heap profile are thus each
 * written as they are made; Perfetto's trace processor orders a trace's sequences by time. */
void lp_pf_counter(struct pf *f, struct track *t, int dbl, uint64_t ts, uint64_t v) {
    if (!t || f->oom) return;
    if (t->streamed && ts < t->streamed_ts) {
        lp_pf_add(f, t, dbl ? R_COUNTER_D : R_COUNTER, ts, v);
        return;
    }
    if (!t->described) lp_pf_descriptor(f, f->o, f->r, t);
    t->streamed = 1;
    t->streamed_ts = ts;
    counter_out(f, f->o, t, dbl, ts, v, SEQ_TRACK(t));
    if (ts < f->first_ts) f->first_ts = ts;
    if (ts > f->last_ts) f->last_ts = ts;
}

/* Item `it` of track `t` as a packet. */
static void emit(struct pf *f, struct lp_out *o, const struct track *t, const struct item *it) {
    const struct rec *r = &t->r[it->rec];
    if ((r->type == R_FLOW_ENCLOSING || r->type == R_FLOW_NEXT) && !r->flows) return; /* bound to a slice */
    size_t msg, field;
    unsigned type = 0;
    if (r->type == R_SAMPLE) {
        field = PKT_PERF_SAMPLE;
        msg = 3 + varint_len(f->pid) + varint_len(r->off) + varint_len(r->dur);
    } else if (r->type == R_COUNTER || r->type == R_COUNTER_D) {
        counter_out(f, o, t, r->type == R_COUNTER_D, it->ts, r->dur, SEQ);
        return;
    } else {
        field = PKT_TRACK_EVENT;
        type = it->end || r->type == R_END                ? TYPE_SLICE_END
               : r->type == R_SLICE || r->type == R_BEGIN ? TYPE_SLICE_BEGIN
                                                          : TYPE_INSTANT;
        msg = 2 + 1 + varint_len(t->uuid);
        if (!it->end) {
            msg += r->len;
            for (uint32_t k = r->flows; k; k = f->flows[k - 1].next) msg += 2 + 8;
        }
    }
    struct lp_pb *b = &f->bundle[f->cur].raw;
    uint8_t *p = head(b, f->clock0 + it->ts, SEQ, field, msg);
    if (!p) return;
    if (r->type == R_SAMPLE) {
        *p++ = PS_PID << 3;
        p = lp_pb_varint_at(p, f->pid);
        *p++ = PS_TID << 3;
        p = lp_pb_varint_at(p, r->off);
        *p++ = PS_CALLSTACK_IID << 3;
        p = lp_pb_varint_at(p, r->dur);
    } else {
        *p++ = TE_TYPE << 3;
        *p++ = (uint8_t)type;
        *p++ = TE_TRACK_UUID << 3;
        p = lp_pb_varint_at(p, t->uuid);
        if (!it->end) {
            memcpy(p, f->arena + r->off, r->len);
            p += r->len;
            for (uint32_t k = r->flows; k; k = f->flows[k - 1].next) {
                p = lp_pb_varint_at(p, TE_FLOW_IDS << 3 | 1);
                for (int i = 0; i < 8; i++) *p++ = (uint8_t)(f->flows[k - 1].id >> (8 * i));
            }
        }
    }
    b->n = (size_t)(p - b->d);
    if (b->n >= BUNDLE_BYTES) lp_pf_bundle_out(f, o, 0);
    if (r->type == R_SLICE && !r->dur && !it->end) { /* a slice of no length: its end at once */
        struct item end = *it;
        end.end = 1;
        emit(f, o, t, &end);
    }
}

void lp_pf_interned_table(struct lp_pb *b, unsigned field, const struct lp_strtab *t) {
    for (size_t i = 0; i < t->n; i++) {
        size_t at = lp_pb_open(b, field);
        lp_pb_uint(b, 1, i + 1);
        lp_pb_bytes(b, 2, t->str[i], t->len[i]);
        lp_pb_close(b, at);
    }
}

/* The time of track `t`'s next event to write. */
static inline uint64_t next_ts(const struct track *t) { return t->it ? t->it[t->at].ts : t->r[t->at].ts; }

/* The tracks' events merged into one sequence in time order (a heap of tracks by their next
 * event's time). */
void lp_pf_merge(struct pf *f, struct lp_out *o) {
    /* heap[i]: a track's index, and the time of its next event (read once per event) */
    struct top {
        uint64_t ts;
        size_t t;
    } *heap = lp_os_malloc((f->nt ? f->nt : 1) * sizeof *heap);
    size_t n = 0;
    if (!heap) {
        f->oom = 1;
        return;
    }
    for (size_t i = 0; i < f->nt; i++) {
        if (!f->t[i].nit) continue;
        size_t c = n++;
        heap[c] = (struct top){next_ts(&f->t[i]), i};
        while (c && heap[(c - 1) / 2].ts > heap[c].ts) {
            size_t p = (c - 1) / 2;
            struct top x = heap[p];
            heap[p] = heap[c];
            heap[c] = x;
            c = p;
        }
    }
    while (n) {
        struct track *t = &f->t[heap[0].t];
        /* the top track's events up to the next track's first (a track's come in runs: the
         * heap's thousands) — where the heap would keep it on top anyway */
        uint64_t next = n > 1 ? heap[1].ts : UINT64_MAX;
        if (n > 2 && heap[2].ts < next) next = heap[2].ts;
        do {
            struct item direct, *it = t->it ? &t->it[t->at] : &direct;
            if (!t->it) direct = (struct item){t->r[t->at].ts, 0, 0, (uint32_t)t->at, 1, 0};
            t->at++;
            emit(f, o, t, it);
        } while (t->at < t->nit && next_ts(t) <= next);
        if (t->at == t->nit)
            heap[0] = heap[--n];
        else
            heap[0].ts = next_ts(t);
        for (size_t c = 0;;) { /* sift down */
            size_t l = 2 * c + 1, m = c;
            if (l < n && heap[l].ts < heap[m].ts) m = l;
            if (l + 1 < n && heap[l + 1].ts < heap[m].ts) m = l + 1;
            if (m == c) break;
            struct top x = heap[m];
            heap[m] = heap[c];
            heap[c] = x;
            c = m;
        }
    }
    lp_os_free(heap);
}
