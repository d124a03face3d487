/* write_perfetto.c: the converter's Perfetto trace writer (a struct lp_sink: LIBPROF_OUTPUT=
 * NAME.pftrace, libprof-report --perfetto) — Perfetto's native protobuf trace (trace.proto), the
 * format its UI and trace processor read first, and the one that carries what the Chrome JSON
 * cannot: the CPU samples with their call stacks on each thread's track (PerfSample packets, as
 * Linux perf's samples are recorded by Perfetto itself), and the allocation stacks as a heap
 * profile (a ProfilePacket, as heapprofd's).
 *
 * One stream of events for both timelines: this writer runs the Chrome writer (write_chrome.c)
 * as the reader of its JSON writer (an lp_json_sink, json.h) and takes each event as it is made,
 * as its fields and typed arguments, no text made — slices, instants, async ranges, counter
 * samples, flows, names of threads and processes, and the metadata. So the two files always show
 * the same slices, counters and flows, and the long-run rules (the bounded window, folded
 * counters) hold alike; a followed run's window comes back from its segments' tapes as the same
 * calls. No text is read. Each Chrome event becomes TrackEvents:
 *   - a track per process and per thread (TrackDescriptor with a ProcessDescriptor or a
 *     ThreadDescriptor), per counter ("NAME KEY", as Perfetto names a JSON counter) and per
 *     async range id;
 *   - X: a SLICE_BEGIN and a SLICE_END; i: an INSTANT; b/e: BEGIN/END on the range's track;
 *     C: a COUNTER per key; s/f: flow ids on the slices that enclose the two ends;
 *   - names, categories and argument names interned, arguments as debug annotations (objects
 *     and arrays nested); metadata.libprof as the annotations of one instant "libprof metadata"
 *     at the start of the process track.
 * Perfetto wants the events of a track in time order, and a slice's begin before those of the
 * slices inside it, while the Chrome stream gives each slice when it ends: the pass's events are
 * kept (their encoded fields, a few dozen bytes each), each track's sorted, and all written at the
 * end as one packet sequence whose timestamps rise — its interned data in its first packet
 * (pftrace_out.c). The counters the Chrome writer gives as it finishes (the heap's, the sites',
 * the thousands of a trace's commonest events, each track's in time order) are written as they
 * come instead, on a packet sequence a track; the CPU samples and the heap profile are
 * pftrace_profile.c's. The file: a ClockSnapshot, the counters, the timeline, the heap profile.
 * This file is the sink: the events into tracks and records (pftrace.h). */
#define _GNU_SOURCE
#include "write_perfetto.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "cc.h"
#include "deflate.h"
#include "json.h"
#include "map.h"
#include "os.h"
#include "pb.h"
#include "pftrace.h"
#include "samples.h"
#include "vec.h"
#include "views.h"
#include "write_chrome.h"

/* ---- tracks and their events ------------------------------------------------------------------- */

/* A track known by a text (a counter's, an async range's): its key hashes the text (top bit
 * clear: the keys of threads and processes have it set). */
static struct track *named(struct pf *f, uint8_t kind, uint32_t pid, const char *name, size_t n) {
    uint64_t h = lp_text_hash(name, n) ^ ((uint64_t)pid * 0x9e3779b97f4a7c15ull) ^ kind, key, v;
    for (;; h += 2) { /* a collision: the next key */
        key = (h | 1) & ~(UINT64_C(1) << 63);
        if (!lp_map_get(&f->track_of, key, &v)) break;
        struct track *t = &f->t[v - 1];
        if (t->kind == kind && t->pid == pid && t->name && strlen(t->name) == n && !memcmp(t->name, name, n)) return t;
    }
    struct track *t = lp_pf_track(f, key, kind, pid, 0);
    if (t && !(t->name = lp_os_strndup(name, n))) f->oom = 1;
    return t;
}

/* ---- the Chrome writer's events, structured (an lp_json_sink) ----------------------------------- */

static size_t keep(char *dst, size_t cap, const char *s, size_t n) {
    if (!s) n = 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, s, n);
    dst[n] = '\0';
    return n;
}

/* An event begins: its name and category interned into its fields (a slice's, an instant's, a
 * range's begin, a flow's end point), and kept for its end. */
static void ev_begin(void *self, const struct lp_json_ev *e) {
    struct pf *f = self;
    size_t cl = e->cat ? strlen(e->cat) : 0;
    f->ev = *e;
    f->depth = f->overdepth = 0;
    f->nest[0] = (struct level){0, 0, 0, 0};
    f->klen = 0;
    if (e->ph != 'X' && e->ph != 'i' && e->ph != 'I') { /* (what ev_value and ev_end read of the others) */
        f->nlen = keep(f->name, sizeof f->name, e->name, e->nlen);
        f->clen = keep(f->cat, sizeof f->cat, e->cat, cl);
    }
    if (e->ph == 'C' || e->ph == 'M' || e->ph == 'e' || e->ph == 'm') return;
    if (e->name) lp_pb_uint(&f->body, TE_NAME_IID, lp_strtab_id(&f->names, e->name, e->nlen) + 1);
    if (e->cat) lp_pb_uint(&f->body, TE_CATEGORY_IIDS, lp_strtab_id(&f->cats, e->cat, cl) + 1);
}

/* An argument's key: a debug annotation opened (its name interned at the top, as the event's own
 * arguments' names repeat), or kept (a counter's, a name's). */
static void ev_key(void *self, const char *k, size_t n) {
    struct pf *f = self;
    if (f->ev.ph == 'C' || f->ev.ph == 'M') {
        f->klen = keep(f->key, sizeof f->key, k, n);
        return;
    }
    struct lp_pb *b = &f->body;
    struct level *x = &f->nest[f->depth];
    x->any = 1;
    if (f->depth == 0) {
        x->at = lp_pb_open(b, TE_DEBUG_ANNOTATIONS);
        lp_pb_uint(b, DA_NAME_IID, lp_strtab_id(&f->keys, k, n) + 1);
    } else {
        x->at = lp_pb_open(b, DA_DICT_ENTRIES);
        lp_pb_bytes(b, DA_NAME, k, n);
    }
}

/* The track of counter f->name's key f->key: "NAME KEY" (as Perfetto names a JSON counter's). */
static struct track *counter_track(struct pf *f) {
    char buf[sizeof f->name + sizeof f->key];
    size_t n = f->nlen + 1 + f->klen;
    memcpy(buf, f->name, f->nlen);
    buf[f->nlen] = ' ';
    memcpy(buf + f->nlen + 1, f->key, f->klen);
    /* the tracks of the last few counters, looked up first: a counter's samples come in runs
     * (the heap's thousands), or in turns (the per-site heap's) */
    for (unsigned i = 0; i < COUNTER_CACHE; i++) {
        const struct counter_seen *c = &f->counters[i];
        if (c->len == n && c->pid == f->ev.pid && c->track && !memcmp(f->t[c->track - 1].name, buf, n))
            return &f->t[c->track - 1];
    }
    struct track *t = named(f, T_COUNTER, (uint32_t)f->ev.pid, buf, n);
    if (t) {
        if (f->klen == 5 && !memcmp(f->key, "bytes", 5)) t->bytes = 1;
        f->counters[f->counter_next++ % COUNTER_CACHE] =
            (struct counter_seen){n, (uint32_t)f->ev.pid, (uint32_t)(t - f->t) + 1};
    }
    return t;
}

/* A counter's value `v` at `ts` on track `t`: written at once while the Chrome writer finishes
 * (where the heap's and the sites' thousands come from), else kept in its record (a trace's
 * commonest event, with no fields of its own to keep in the arena). */
static void counter_add(struct pf *f, struct track *t, const struct lp_json_val *v, uint64_t ts) {
    uint64_t x;
    int dbl = !(v->kind == LP_JV_I64 || (v->kind == LP_JV_U64 && v->u <= (uint64_t)INT64_MAX));
    if (!dbl) {
        x = v->kind == LP_JV_I64 ? (uint64_t)v->i : v->u;
    } else {
        double d = v->kind == LP_JV_U64 ? (double)v->u : v->d;
        memcpy(&x, &d, sizeof x);
    }
    if (f->streaming)
        lp_pf_counter(f, t, dbl, ts, x);
    else
        lp_pf_add(f, t, dbl ? R_COUNTER_D : R_COUNTER, ts, x);
}

/* A counter's value, the argument of a C event. */
static void counter_value(struct pf *f, const struct lp_json_val *v) {
    counter_add(f, counter_track(f), v, f->ev.ts_ns < 0 ? 0 : (uint64_t)f->ev.ts_ns);
}

/* A counter's sample given whole (the heap's thousands): its track found once per Chrome track
 * and marked in it. The same track and value as the C event it stands for. */
static void ev_sample(void *self, struct lp_json_track *jt, uint64_t ts, uint64_t v) {
    struct pf *f = self;
    struct track *t;
    if (jt->sink_track && jt->sink_track <= f->nt) {
        t = &f->t[jt->sink_track - 1];
    } else {
        f->ev.pid = jt->pid;
        f->nlen = keep(f->name, sizeof f->name, jt->name, strlen(jt->name));
        f->klen = keep(f->key, sizeof f->key, jt->key, strlen(jt->key));
        if ((t = counter_track(f))) jt->sink_track = (size_t)(t - f->t) + 1;
    }
    counter_add(f, t, &(struct lp_json_val){.kind = LP_JV_U64, .u = v}, ts);
}

/* A process's or a thread's name (sort indexes: Perfetto orders threads itself). */
static void meta_value(struct pf *f, const struct lp_json_val *v) {
    if (v->kind != LP_JV_STR || f->klen != 4 || memcmp(f->key, "name", 4)) return;
    struct track *t = !strcmp(f->name, "process_name")  ? lp_pf_process(f, (uint32_t)f->ev.pid)
                      : !strcmp(f->name, "thread_name") ? lp_pf_thread(f, (uint32_t)f->ev.pid, f->ev.tid)
                                                        : NULL;
    if (!t) return;
    lp_os_free(t->name);
    if (!(t->name = lp_os_strndup(v->s, v->n))) f->oom = 1;
}

static void ev_value(void *self, const struct lp_json_val *v) {
    struct pf *f = self;
    if (f->ev.ph == 'C') {
        if (v->kind <= LP_JV_DOUBLE) counter_value(f, v);
        return;
    }
    if (f->ev.ph == 'M') {
        meta_value(f, v);
        return;
    }
    struct lp_pb *b = &f->body;
    struct level *x = &f->nest[f->depth];
    if (v->kind == LP_JV_END) { /* an array or object closes: its holder with it */
        if (f->overdepth) {
            f->overdepth--;
            return;
        }
        if (!f->depth) return;
        if (!x->any) lp_pb_bytes(b, DA_STRING, x->arr ? "[]" : "{}", 2);
        f->depth--;
        lp_pb_close(b, x->holder);
        return;
    }
    if (f->overdepth) return; /* (deeper than any of our writers goes) */
    size_t at = x->arr ? lp_pb_open(b, DA_ARRAY_VALUES) : x->at;
    x->any = 1;
    switch (v->kind) {
    case LP_JV_U64:
        if (v->u <= (uint64_t)INT64_MAX)
            lp_pb_sint(b, DA_INT, (int64_t)v->u);
        else
            lp_pb_uint(b, DA_UINT, v->u);
        break;
    case LP_JV_I64: lp_pb_sint(b, DA_INT, v->i); break;
    case LP_JV_DOUBLE: lp_pb_double(b, DA_DOUBLE, v->d); break;
    case LP_JV_BOOL: lp_pb_uint(b, DA_BOOL, v->u); break;
    case LP_JV_STR: /* interned: a program's arguments repeat (file names, modes, frames) */
        lp_pb_uint(b, DA_STRING_IID, lp_strtab_id(&f->values, v->s, v->n) + 1);
        break;
    case LP_JV_NULL: lp_pb_bytes(b, DA_STRING, "null", 4); break;
    case LP_JV_ARRAY:
    case LP_JV_OBJECT:
        if (f->depth + 1 >= NEST_MAX) {
            f->overdepth++;
            lp_pb_bytes(b, DA_STRING, "...", 3);
            break;
        }
        f->nest[++f->depth] = (struct level){0, at, v->kind == LP_JV_ARRAY, 0};
        return; /* (closed by its END) */
    }
    lp_pb_close(b, at);
}

/* A run of arguments made of one call stack (lp_json_memo): its annotations, encoded, kept by
 * the stack's id and repeated — a stack's frames are interned one by one only the first time. */
static int ev_memo(void *self, uint64_t key) {
    struct pf *f = self;
    uint64_t v;
    f->memo_open = 0;
    if (f->depth || f->overdepth || f->ev.ph == 'C' || f->ev.ph == 'M') return 0; /* (the event's own only) */
    if (lp_map_get(&f->memo_of, key, &v)) {
        const struct memo *m = &f->memos[v - 1];
        lp_pb_put(&f->body, f->memo_bytes + m->off, m->len);
        return 1;
    }
    f->memo_open = 1;
    f->memo_key = key;
    f->memo_start = f->body.n;
    return 0;
}

static void ev_memo_end(void *self) {
    struct pf *f = self;
    if (!f->memo_open || f->depth || f->body.oom) {
        f->memo_open = 0;
        return;
    }
    f->memo_open = 0;
    size_t n = f->body.n - f->memo_start;
    if (LP_RESERVE(f->memos, f->capmemos, f->nmemos + 1) != 0 ||
        LP_RESERVE(f->memo_bytes, f->capmemo_bytes, f->nmemo_bytes + n) != 0 ||
        lp_map_put(&f->memo_of, f->memo_key, f->nmemos + 1, NULL) < 0)
        return; /* (not kept: made again the next time) */
    f->memos[f->nmemos++] = (struct memo){f->nmemo_bytes, n};
    memcpy(f->memo_bytes + f->nmemo_bytes, f->body.d + f->memo_start, n);
    f->nmemo_bytes += n;
}

/* A flow's id: Chrome's (cat, name, id). */
static uint64_t flow_key(const struct lp_json_ev *e, const char *cat, size_t cl, const char *name, size_t nl) {
    uint64_t h = (e->has_id ? e->id + 1 : 0) * 0x9e3779b97f4a7c15ull;
    h = h * 31 + lp_text_hash(cat, cl);
    return h * 31 + lp_text_hash(name, nl);
}

/* The event ends: it joins its track. */
static void ev_end(void *self, const struct lp_json_ev *e) {
    struct pf *f = self;
    f->memo_open = 0;
    uint32_t pid = (uint32_t)e->pid;
    uint64_t ts = e->ts_ns < 0 ? 0 : (uint64_t)e->ts_ns;
    switch (e->ph) {
    case 'X':
    case 'i':
    case 'I': {
        int scoped = e->ph != 'X' && (e->scope == 'p' || e->scope == 'g');
        lp_pf_add(f, scoped ? lp_pf_process(f, pid) : lp_pf_thread(f, pid, e->tid), e->ph == 'X' ? R_SLICE : R_INSTANT,
                  ts, e->ph == 'X' && e->has_dur ? e->dur_ns : 0);
        return;
    }
    case 'b':
    case 'e': {
        char key[256];
        int kl = snprintf(key, sizeof key, "%s#", f->cat);
        if (e->has_id && kl < (int)sizeof key)
            kl += snprintf(key + kl, sizeof key - (size_t)kl, "%llu", (unsigned long long)e->id);
        struct track *t = named(f, T_ASYNC, pid, key, (size_t)(kl < (int)sizeof key ? kl : (int)sizeof key - 1));
        if (e->ph == 'b' && t && !t->label && f->nlen && !(t->label = lp_os_strndup(f->name, f->nlen))) f->oom = 1;
        lp_pf_add(f, t, e->ph == 'b' ? R_BEGIN : R_END, ts, 0);
        return;
    }
    case 's':
    case 'f': { /* (its name and category written when no slice takes the flow) */
        struct rec *r = lp_pf_add(f, lp_pf_thread(f, pid, e->tid),
                                  e->ph == 'f' && !e->bind_enclosing ? R_FLOW_NEXT : R_FLOW_ENCLOSING, ts, 0);
        lp_pf_add_flow(f, r, flow_key(e, f->cat, f->clen, f->name, f->nlen));
        return;
    }
    case 'm': { /* metadata.libprof: the annotations of an instant at the start of the process track */
        lp_pb_uint(&f->body, TE_NAME_IID, lp_strtab_id(&f->names, "libprof metadata", 16) + 1);
        struct rec *r =
            lp_pf_add(f, lp_pf_process(f, f->pid), R_INSTANT, f->first_ts == UINT64_MAX ? 0 : f->first_ts, 0);
        if (r) r->seq = 0; /* first at its time */
        return;
    }
    default: break; /* C, M: taken by their values (the Chrome writer makes no other kind) */
    }
    f->body.n = 0;
}

static void finish(struct lp_sink *k, const struct lp_analysis *a) {
    struct pf *f = k->self;
    struct lp_out *o = k->out;
    lp_pf_job_wait(f, &f->load);
    /* the clocks, in a ClockSnapshot first: the trace's time is CLOCK_MONOTONIC (libprof's own
     * clock is anchored to it at the run's start); the heap profile's dump time, which Perfetto
     * reads as CLOCK_MONOTONIC_COARSE, is the same clock; and CLOCK_BOOTTIME and CLOCK_REALTIME
     * where the trace knows them — Perfetto relates every trace to boot time, and a trace of the
     * same machine Perfetto recorded itself then lines up with this one */
    const uint64_t t0 = f->clock0; /* (the run's start: before every event) */
    struct lp_pb *b = lp_pf_packet(f);
    size_t cs = lp_pb_open(b, PKT_CLOCK_SNAPSHOT);
    const struct {
        unsigned id;
        uint64_t at;
    } clocks[4] = {{CLOCK_MONOTONIC_ID, t0},
                   {CLOCK_MONOTONIC_COARSE_ID, t0},
                   {CLOCK_BOOTTIME_ID, f->boot0},
                   {CLOCK_REALTIME_ID, f->real0}};
    for (int i = 0; i < 4; i++) {
        if (!clocks[i].at) continue;
        size_t c = lp_pb_open(b, CS_CLOCKS);
        lp_pb_uint(b, CLK_ID, clocks[i].id);
        lp_pb_uint(b, CLK_TIMESTAMP, clocks[i].at);
        lp_pb_close(b, c);
    }
    lp_pb_uint(b, CS_PRIMARY_TRACE_CLOCK, CLOCK_MONOTONIC_ID);
    lp_pb_close(b, cs);
    lp_pf_packet_out(f, o);
    /* the heap profile, made beside the rest (its time: the run's end) */
    lp_pf_heap_begin(f, a, f->last_ts > a->span_ns ? f->last_ts : a->span_ns);
    /* the Chrome writer's last events (the counters written as they come) and the samples */
    f->o = o;
    f->r = a->r;
    f->streaming = 1;
    f->chrome.finish(&f->chrome, a);
    f->streaming = 0;
    if (lp_samples_of(a)) lp_pf_samples(f, a);
    if (f->oom) goto oom;
    /* the timeline's sequence: its interned data, first */
    struct lp_pb *in = &f->interned;
    lp_pf_interned_table(in, ID_EVENT_CATEGORIES, &f->cats);
    lp_pf_interned_table(in, ID_EVENT_NAMES, &f->names);
    lp_pf_interned_table(in, ID_DEBUG_ANNOTATION_NAMES, &f->keys);
    lp_pf_interned_table(in, ID_DEBUG_ANNOTATION_STRING_VALUES, &f->values);
    b = lp_pf_packet(f);
    lp_pb_uint(b, PKT_TIMESTAMP, t0);
    lp_pb_uint(b, PKT_SEQUENCE_ID, SEQ);
    lp_pb_uint(b, PKT_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
    lp_pb_msg(b, PKT_INTERNED_DATA, in);
    lp_pf_packet_out(f, o);
    for (size_t i = 0; i < f->nt; i++)
        if (f->t[i].kind != T_SAMPLES && !f->t[i].described) lp_pf_descriptor(f, o, a->r, &f->t[i]);
    for (size_t i = 0; i < f->nt; i++)
        if (lp_pf_order(f, &f->t[i]) != 0) goto oom;
    lp_pf_merge(f, o);
    lp_pf_bundle_out(f, o, 1);
    lp_pf_heap_out(f, o);
    lp_pf_workers_quit(f); /* (their threads end while the file is closed: joined at release) */
    if (!f->oom && !f->names.oom && !f->cats.oom && !f->keys.oom && !f->values.oom && !f->cpu.names.oom) return;
oom:
    lp_pf_writers_end(f);
    lp_pf_heap_out(f, NULL);
    o->err = ENOMEM; /* the file is not kept */
    o->failed = 1;
}

static void event_fwd(struct lp_sink *k, const struct lp_analysis *a, const struct lp_event *e,
                      const struct lp_seen *s) {
    struct pf *f = k->self;
    f->chrome.event(&f->chrome, a, e, s);
}

static void release(struct lp_sink *k) {
    struct pf *f = k->self;
    if (!f) return;
    lp_pf_job_wait(f, &f->load);
    lp_pf_writers_end(f);
    lp_pf_heap_out(f, NULL); /* (a conversion stopped half-way: its jobs done) */
    lp_pf_workers_end(f);
    if (f->chrome.release) f->chrome.release(&f->chrome);
    for (size_t i = 0; i < f->nt; i++) {
        lp_os_free(f->t[i].name);
        lp_os_free(f->t[i].label);
        lp_os_free(f->t[i].r);
        lp_os_free(f->t[i].it);
    }
    lp_os_free(f->t);
    lp_map_free(&f->track_of);
    lp_os_free(f->arena);
    lp_os_free(f->flows);
    lp_strtab_free(&f->names);
    lp_strtab_free(&f->cats);
    lp_strtab_free(&f->keys);
    lp_strtab_free(&f->values);
    lp_strtab_free(&f->cpu.names);
    lp_pb_free(&f->body);
    lp_pb_free(&f->interned);
    for (int i = 0; i <= WRITERS_MAX; i++) {
        lp_pb_free(&f->bundle[i].raw);
        lp_os_free(f->bundle[i].z);
        lp_deflate_end(&f->bundle[i].dz);
    }
    lp_map_free(&f->memo_of);
    lp_os_free(f->memos);
    lp_os_free(f->memo_bytes);
    lp_os_free(f->sort_tmp);
    lp_os_free(f->sort_runs);
    lp_os_free(f);
    k->self = NULL;
}

/* The deflater loaded (dlopen and a first use: a few tenths of a millisecond) beside the pass,
 * not after it: finish waits for this job before anything else loads or uses it. */
static void load_job(void *arg) {
    (void)arg;
    lp_deflate_load();
}

int lp_sink_perfetto(struct lp_sink *k, const struct lp_reader *r, const char *path, uint64_t alloc_min,
                     uint64_t timeline_ns, uint64_t timeline_min_ns) {
    struct pf *f = lp_os_calloc(1, sizeof *f);
    if (!f) return -1;
    k->self = f;
    k->event = event_fwd;
    k->finish = finish;
    k->release = release;
    f->pid = r->hdr.pid;
    f->clock0 = r->hdr.origin_mono_ns;
    f->real0 = r->hdr.origin_real_ns;
    f->boot0 = r->hdr.origin_boot_ns;
    f->first_ts = UINT64_MAX;
    f->compress = 1;
    /* threads deflating: one processor left to the writer's own thread, three at most — of the
     * processors this process may run on (a program pinned to one gets none; on two, measured:
     * one thread within noise of none, two slower: their compressors and buffers are memory
     * first touched) */
    cpu_set_t on;
    long cpus = sched_getaffinity(0, sizeof on, &on) == 0 ? CPU_COUNT(&on) : sysconf(_SC_NPROCESSORS_ONLN);
    f->writers = cpus <= 1 ? 0 : cpus - 1 > WRITERS_MAX ? WRITERS_MAX : (unsigned)cpus - 1;
    /* the workers started now, the deflater loaded by one — not for a followed trace: its
     * snapshots fork the pass, and a child has none of its parent's threads (they start at its
     * end there) */
    f->load = (struct lp_pf_job){load_job, NULL, JOB_IDLE};
    if (!r->follow) lp_pf_job_queue(f, &f->load);
    f->cpu = (struct frames){.b = &f->interned,
                             .f_strings = ID_FUNCTION_NAMES,
                             .f_paths = ID_MAPPING_PATHS,
                             .f_mappings = ID_MAPPINGS,
                             .f_frames = ID_FRAMES,
                             .f_callstacks = ID_CALLSTACKS,
                             .base = 1};
    lp_pf_frames_begin(&f->cpu);
    lp_pf_bundle_room(&f->bundle[0]);
    lp_out_init(&f->json, -1);
    f->sink = (struct lp_json_sink){f, ev_begin, ev_key, ev_value, ev_end, ev_memo, ev_memo_end, ev_sample};
    f->chrome.out = &f->json;
    f->chrome.events = &f->sink;
    if (lp_sink_chrome(&f->chrome, r, path, alloc_min, timeline_ns, timeline_min_ns) != 0) return -1;
    k->alloc_min = f->chrome.alloc_min;
    return 0;
}
