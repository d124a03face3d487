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
 * samples, flows, names of threads and processes. So the two files always show the same slices,
 * counters and flows, and the long-run rules (the bounded window, folded counters) hold alike;
 * the only text it reads is a followed run's segments (events the Chrome writer kept as JSON text
 * while the run went on) and metadata.libprof. Each Chrome event becomes TrackEvents:
 *   - a track per process and per thread (TrackDescriptor with a ProcessDescriptor or a
 *     ThreadDescriptor), per counter ("NAME KEY", as Perfetto names a JSON counter) and per
 *     async range id;
 *   - X: a SLICE_BEGIN and a SLICE_END; i: an INSTANT; b/e: BEGIN/END on the range's track;
 *     C: a COUNTER per key; s/f: flow ids on the slices that enclose the two ends;
 *   - names, categories and argument names interned, arguments as debug annotations (objects
 *     and arrays nested); metadata.libprof as the annotations of one instant "libprof metadata"
 *     at the start of the process track.
 * Perfetto wants the events of a track in time order, and a slice's begin before those of the
 * slices inside it, while the Chrome stream gives each slice when it ends: the events are kept
 * (their encoded fields, a few dozen bytes each), each track's sorted, and all written at the end
 * as one packet sequence whose timestamps rise — its interned data in its first packet. */
#define _GNU_SOURCE
#include "write_perfetto.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "calls.h"
#include "cc.h"
#include "deflate.h"
#include "views.h"
#include "write_chrome.h"
#include "json.h"
#include "map.h"
#include "os.h"
#include "pb.h"
#include "samples.h"
#include "sites.h"
#include "symbols.h"
#include "vec.h"

/* trace.proto's field numbers (protos/perfetto/trace/…, as documented by Perfetto) */
enum {
    TRACE_PACKET = 1,
    PKT_CLOCK_SNAPSHOT = 6,
    PKT_TIMESTAMP = 8,
    PKT_SEQUENCE_ID = 10,
    PKT_TRACK_EVENT = 11,
    PKT_INTERNED_DATA = 12,
    PKT_SEQUENCE_FLAGS = 13,
    PKT_PROFILE_PACKET = 37,
    PKT_COMPRESSED_PACKETS = 50,
    PKT_TRACK_DESCRIPTOR = 60,
    PKT_PERF_SAMPLE = 66,
    CS_CLOCKS = 1,
    CS_PRIMARY_TRACE_CLOCK = 2,
    CLK_ID = 1,
    CLK_TIMESTAMP = 2,
    CLOCK_REALTIME_ID = 1, /* BuiltinClock */
    CLOCK_MONOTONIC_ID = 3,
    CLOCK_MONOTONIC_COARSE_ID = 4,
    CLOCK_BOOTTIME_ID = 6,
    SEQ_INCREMENTAL_STATE_CLEARED = 1,
    SEQ_NEEDS_INCREMENTAL_STATE = 2,
    TE_CATEGORY_IIDS = 3,
    TE_DEBUG_ANNOTATIONS = 4,
    TE_TYPE = 9,
    TE_NAME_IID = 10,
    TE_TRACK_UUID = 11,
    TE_COUNTER_VALUE = 30,
    TE_DOUBLE_COUNTER_VALUE = 44,
    TE_FLOW_IDS = 47,
    TYPE_SLICE_BEGIN = 1,
    TYPE_SLICE_END = 2,
    TYPE_INSTANT = 3,
    TYPE_COUNTER = 4,
    DA_NAME_IID = 1,
    DA_BOOL = 2,
    DA_UINT = 3,
    DA_INT = 4,
    DA_DOUBLE = 5,
    DA_STRING = 6,
    DA_STRING_IID = 17,
    DA_NAME = 10,
    DA_DICT_ENTRIES = 11,
    DA_ARRAY_VALUES = 12,
    TD_UUID = 1,
    TD_NAME = 2,
    TD_PROCESS = 3,
    TD_THREAD = 4,
    TD_PARENT_UUID = 5,
    TD_COUNTER = 8,
    PD_PID = 1,
    PD_CMDLINE = 2,
    PD_NAME = 6,
    THD_PID = 1,
    THD_TID = 2,
    THD_NAME = 5,
    CD_UNIT = 3,
    UNIT_SIZE_BYTES = 3,
    ID_EVENT_CATEGORIES = 1,
    ID_EVENT_NAMES = 2,
    ID_DEBUG_ANNOTATION_NAMES = 3,
    ID_DEBUG_ANNOTATION_STRING_VALUES = 29,
    ID_FUNCTION_NAMES = 5,
    ID_FRAMES = 6,
    ID_CALLSTACKS = 7,
    ID_MAPPING_PATHS = 17,
    ID_MAPPINGS = 19,
    PS_PID = 2,
    PS_TID = 3,
    PS_CALLSTACK_IID = 4,
    PP_STRINGS = 1,
    PP_FRAMES = 2,
    PP_CALLSTACKS = 3,
    PP_MAPPINGS = 4,
    PP_PROCESS_DUMPS = 5,
    PP_CONTINUED = 6,
    PP_INDEX = 7,
    PHS_PID = 1,
    PHS_SAMPLES = 2,
    PHS_TIMESTAMP = 9,
    HS_CALLSTACK_ID = 1,
    HS_SELF_ALLOCATED = 2,
    HS_SELF_FREED = 3,
    HS_ALLOC_COUNT = 5,
    HS_FREE_COUNT = 6,
};

#define SEQ 1u        /* the one packet sequence */
#define MAPPING_IID 1 /* every frame's mapping: functions are named already (symbolised here) */
/* a bundle's packets before deflate: under Perfetto's 512 KiB after, even were they not to deflate
 * at all; a long trace starts a thread a bundle */
#define BUNDLE_BYTES (256u << 10)

/* (R_COUNTER, R_COUNTER_D: the value, int64 or a double's bits, is the record's `dur`) */
enum { R_SLICE, R_INSTANT, R_BEGIN, R_END, R_COUNTER, R_COUNTER_D, R_FLOW_ENCLOSING, R_FLOW_NEXT, R_SAMPLE };

/* One event of a track: its fields encoded in `arena` (off, len). */
struct rec {
    uint64_t ts, dur; /* R_SAMPLE: dur is the callstack iid, off the tid */
    uint64_t off;
    uint32_t len, seq;
    uint32_t flows; /* 1 + index in `flows` of its first flow id, 0: none */
    uint8_t type;
};
struct flow {
    uint64_t id;
    uint32_t next; /* 1 + index of the next of the same event, 0: none */
};
/* The order a track's events are written in: rec's begin (or whole) or end. */
struct item {
    uint64_t ts;
    int64_t k1, k2;
    uint32_t rec, cls; /* cls: 0 an end, 1 a begin or an instant, 2 a flow's end point */
    uint8_t end;
};

enum { T_PROCESS, T_THREAD, T_COUNTER, T_ASYNC, T_SAMPLES };
struct track {
    uint8_t kind, bytes;
    uint32_t pid;
    uint64_t tid;
    char *name;  /* its key's text (a counter's, an async range's), or the thread's or process's name */
    char *label; /* an async track's name: its first range's */
    uint64_t uuid, parent;
    struct rec *r;
    size_t n, cap;
    struct item *it; /* NULL: its records are in the order they are written (nit of them) */
    size_t nit, at;
};

/* The frames of a profile — Perfetto's Frame, Callstack and Mapping messages and their strings —
 * in one of the two places they go: the sequence's interned data (the CPU samples) or a
 * ProfilePacket's own tables (the heap profile); the same messages under other field numbers.
 * One frame a function (the names are what a flame graph groups by, symbolised here), all in
 * one mapping. */
struct frames {
    struct lp_pb *b;
    unsigned f_strings, f_paths, f_mappings, f_frames, f_callstacks;
    uint64_t base; /* a function name's iid: its index + base (the strings may hold the path first) */
    struct lp_strtab names;
    uint64_t stacks;
};

/* An argument's nesting level in the event being made: the annotation its next value goes in
 * (`at`, opened by its key), the one that holds it (`holder`), whether it is an array, whether
 * anything is in it. */
struct level {
    size_t at, holder;
    uint8_t arr, any;
};
#define NEST_MAX 16

#define WRITERS_MAX 3 /* threads deflating bundles at once */
struct pf {
    struct lp_sink chrome; /* the Chrome writer: its events structured through `sink` */
    struct lp_json_sink sink;
    struct lp_out json; /* the Chrome writer's text: the metadata after its events */
    /* the event being made, and its arguments' nesting */
    struct lp_json_ev ev;
    char name[256], cat[128], key[128];
    size_t nlen, clen, klen;
    int depth, overdepth;
    struct level nest[NEST_MAX];
    /* the last counters' tracks (counter_value) */
#define COUNTER_CACHE 16
    struct counter_seen {
        size_t len;
        uint32_t pid, track; /* 1 + index in t, 0: none */
    } counters[COUNTER_CACHE];
    unsigned counter_next;
    /* the runs of arguments kept by key (ev_memo): key -> 1 + index in memos, their bytes */
    struct lp_map memo_of;
    struct memo {
        size_t off, len;
    } * memos;
    size_t nmemos, capmemos;
    uint8_t *memo_bytes;
    size_t nmemo_bytes, capmemo_bytes;
    int memo_open; /* a run being made: its key and where it starts in `body` */
    uint64_t memo_key;
    size_t memo_start;
    /* events given as text: between events or in one */
    int mode, depth_text, in_str, esc;
    char *obj, *tail;
    size_t nobj, capobj, ntail, captail;
    /* what it became */
    struct track *t;
    size_t nt, capt;
    struct lp_map track_of; /* key -> 1 + index */
    uint8_t *arena;
    size_t narena, caparena;
    struct flow *flows;
    size_t nflows, capflows;
    uint32_t seq;
    struct lp_strtab names, cats, keys, values;
    struct frames cpu; /* the CPU samples' frames, in the interned data */
    struct lp_pb body, interned;
    size_t pkt_at;         /* the packet being written in `bundle` */
    struct item *sort_tmp; /* sort_items' room */
    size_t *sort_runs, capsort_tmp, capsort_runs;
    char *sbuf; /* decoded strings */
    size_t nsbuf, capsbuf;
    uint64_t first_ts, last_ts;
    uint64_t clock0;       /* CLOCK_MONOTONIC at the trace's time 0: every timestamp written is clock0 + its ns */
    uint64_t real0, boot0; /* CLOCK_REALTIME and CLOCK_BOOTTIME then (0: not known) */
    uint32_t pid;
    int oom;
    /* the packets' bundles */
    struct bundle {
        struct lp_pb raw; /* its packets */
        uint8_t *z;       /* deflated */
        size_t nz, capz;
        struct lp_deflate dz; /* its compressor (one each: bundles are deflated at once) */
        pthread_t th;         /* the thread deflating it */
    } bundle[WRITERS_MAX + 1];
    /* a ring: the bundle being filled (cur), and before it the `busy` ones being deflated on
     * threads of their own, at most `writers` */
    unsigned cur, busy, writers;
    unsigned bundles; /* out so far: the first INLINE_BUNDLES are deflated here (see bundle_out) */
    int compress;     /* bundles deflated (when a deflater loads: deflate.c) */
    const char *meta; /* metadata.libprof's value in `tail` */
    size_t metalen;
};

enum { M_ARRAY, M_OBJ };

/* ---- tracks and their events ------------------------------------------------------------------- */

static struct track *track(struct pf *f, uint64_t key, uint8_t kind, uint32_t pid, uint64_t tid);

static struct track *process(struct pf *f, uint32_t pid) {
    return track(f, UINT64_C(1) << 63 | UINT64_C(1) << 62 | pid, T_PROCESS, pid, 0);
}

/* The track of `key` (never 0), made when new. */
static struct track *track(struct pf *f, uint64_t key, uint8_t kind, uint32_t pid, uint64_t tid) {
    uint64_t v;
    if (lp_map_get(&f->track_of, key, &v)) return &f->t[v - 1];
    struct track *p = kind == T_PROCESS ? NULL : process(f, pid);
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

static struct track *thread(struct pf *f, uint32_t pid, uint64_t tid) {
    return track(f, UINT64_C(1) << 63 | (uint64_t)pid << 32 | (tid & 0xffffffffu), T_THREAD, pid, tid);
}

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
    struct track *t = track(f, key, kind, pid, 0);
    if (t && !(t->name = lp_os_strndup(name, n))) f->oom = 1;
    return t;
}

/* A new event of track `t`; its fields are what f->body holds (moved into the arena). */
static struct rec *add(struct pf *f, struct track *t, uint8_t type, uint64_t ts, uint64_t dur) {
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

static void add_flow(struct pf *f, struct rec *r, uint64_t id) {
    if (!r || LP_RESERVE(f->flows, f->capflows, f->nflows + 1) != 0) {
        f->oom = 1;
        return;
    }
    f->flows[f->nflows] = (struct flow){id, r->flows};
    r->flows = (uint32_t)++f->nflows;
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

/* A counter's value `v` at `ts` on track `t`, kept in its record (a trace's commonest event,
 * with no fields of its own to keep in the arena). */
static void counter_add(struct pf *f, struct track *t, const struct lp_json_val *v, uint64_t ts) {
    if (v->kind == LP_JV_I64 || (v->kind == LP_JV_U64 && v->u <= (uint64_t)INT64_MAX)) {
        add(f, t, R_COUNTER, ts, v->kind == LP_JV_I64 ? (uint64_t)v->i : v->u);
    } else {
        double d = v->kind == LP_JV_U64 ? (double)v->u : v->d;
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        add(f, t, R_COUNTER_D, ts, bits);
    }
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
    struct track *t = !strcmp(f->name, "process_name")  ? process(f, (uint32_t)f->ev.pid)
                      : !strcmp(f->name, "thread_name") ? thread(f, (uint32_t)f->ev.pid, f->ev.tid)
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
        add(f, scoped ? process(f, pid) : thread(f, pid, e->tid), e->ph == 'X' ? R_SLICE : R_INSTANT, ts,
            e->ph == 'X' && e->has_dur ? e->dur_ns : 0);
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
        add(f, t, e->ph == 'b' ? R_BEGIN : R_END, ts, 0);
        return;
    }
    case 's':
    case 'f': { /* (its name and category written when no slice takes the flow) */
        struct rec *r =
            add(f, thread(f, pid, e->tid), e->ph == 'f' && !e->bind_enclosing ? R_FLOW_NEXT : R_FLOW_ENCLOSING, ts, 0);
        add_flow(f, r, flow_key(e, f->cat, f->clen, f->name, f->nlen));
        return;
    }
    case 'm': { /* metadata.libprof: the annotations of an instant at the start of the process track */
        lp_pb_uint(&f->body, TE_NAME_IID, lp_strtab_id(&f->names, "libprof metadata", 16) + 1);
        struct rec *r = add(f, process(f, f->pid), R_INSTANT, f->first_ts == UINT64_MAX ? 0 : f->first_ts, 0);
        if (r) r->seq = 0; /* first at its time */
        return;
    }
    default: break; /* C, M: taken by their values (the Chrome writer makes no other kind) */
    }
    f->body.n = 0;
}

static struct lp_pb *packet(struct pf *f);
static void packet_out(struct pf *f, struct lp_out *o);
static void bundle_out(struct pf *f, struct lp_out *o, int last);

/* ---- the CPU samples and the heap profile ------------------------------------------------------ */

/* The mapping every frame names, and its path. */
static void frames_begin(struct frames *t) {
    size_t at = lp_pb_open(t->b, t->f_paths);
    lp_pb_uint(t->b, 1, 1);
    lp_pb_bytes(t->b, 2, "[symbolised by libprof]", 23);
    lp_pb_close(t->b, at);
    at = lp_pb_open(t->b, t->f_mappings);
    lp_pb_uint(t->b, 1, MAPPING_IID);
    lp_pb_uint(t->b, 7, 1); /* path_string_ids */
    lp_pb_close(t->b, at);
}

/* The frame of function `name`: its iid (the name's), written when new. */
static uint64_t frames_frame(struct frames *t, const char *name) {
    size_t before = t->names.n, len = strlen(name);
    uint64_t iid = lp_strtab_id(&t->names, name, len) + t->base;
    if (t->names.n != before) {
        size_t at = lp_pb_open(t->b, t->f_strings);
        lp_pb_uint(t->b, 1, iid);
        lp_pb_bytes(t->b, 2, name, len);
        lp_pb_close(t->b, at);
        at = lp_pb_open(t->b, t->f_frames);
        lp_pb_uint(t->b, 1, iid);
        lp_pb_uint(t->b, 2, iid);
        lp_pb_uint(t->b, 3, MAPPING_IID);
        lp_pb_uint(t->b, 4, iid); /* rel_pc: one per frame */
        lp_pb_close(t->b, at);
    }
    return iid;
}

/* Frame `iid` as a callstack's field (Callstack.frame_ids), encoded once: its bytes, little
 * end first, and their count in the top byte (iids below 2^42: a profile has fewer frames). */
static inline uint64_t frame_field(uint64_t iid) {
    uint8_t buf[16] = {0}, *e = lp_pb_varint_at(buf + 1, iid);
    uint64_t v = 0;
    buf[0] = 2 << 3;
    memcpy(&v, buf, 7);
    return v | (uint64_t)(e - buf) << 56;
}

/* A new callstack of frames `fields` (frame_field's, innermost first): its iid. Its room made
 * once, each frame a copy of its bytes (a heap profile can have a million callstacks, a few
 * dozen frames each). */
static uint64_t frames_callstack(struct frames *t, const uint64_t *fields, unsigned n) {
    uint64_t iid = ++t->stacks;
    size_t at = lp_pb_open(t->b, t->f_callstacks);
    struct lp_pb *b = t->b;
    if (b->cap - b->n < 11 + (size_t)n * 8 && !lp_pb_room(b, 11 + (size_t)n * 8)) return iid;
    uint8_t *p = b->d + b->n;
    *p++ = 1 << 3;
    p = lp_pb_varint_at(p, iid);
    for (unsigned i = n; i-- > 0;) { /* the outermost first */
        uint64_t v = fields[i];
        memcpy(p, &v, 8); /* (the room above: 8 a frame) */
        p += v >> 56;
    }
    b->n = (size_t)(p - b->d);
    lp_pb_close(b, at);
    return iid;
}

/* A new callstack of `n` functions (innermost first): its iid. */
static uint64_t frames_stack(struct frames *t, const char **names, unsigned n) {
    uint64_t ids[LP_STACK_MAX_FRAMES + 1];
    if (n > LP_STACK_MAX_FRAMES + 1) n = LP_STACK_MAX_FRAMES + 1;
    for (unsigned i = 0; i < n; i++) ids[i] = frame_field(frames_frame(t, names[i]));
    return frames_callstack(t, ids, n);
}

struct samples_arg {
    struct pf *f;
    const struct lp_analysis *a;
    struct track *t;
    struct lp_map cs; /* sample key + 1 -> callstack iid */
};

static void one_sample(void *arg, uint32_t thread, uint32_t key, uint64_t ns, uint64_t weight) {
    struct samples_arg *s = arg;
    struct pf *f = s->f;
    const struct lp_reader *r = s->a->r;
    uint64_t iid;
    if (!lp_map_get(&s->cs, (uint64_t)key + 1, &iid)) {
        const char *names[LP_STACK_MAX_FRAMES + 1];
        unsigned n = lp_samples_frames(lp_samples_of(s->a), key, names, LP_STACK_MAX_FRAMES);
        if (!n) names[n++] = "[unknown stack]";
        iid = frames_stack(&f->cpu, names, n);
        if (lp_map_put(&s->cs, (uint64_t)key + 1, iid, NULL) < 0) f->oom = 1;
    }
    uint64_t tid = thread < r->nthreads && r->threads[thread].tid ? r->threads[thread].tid : r->hdr.pid;
    for (uint64_t w = 0; w < weight; w++) { /* (a weight above 1: samples the timer merged) */
        struct rec *x = add(f, s->t, R_SAMPLE, ns, iid);
        if (x) x->off = tid;
    }
}

static void samples(struct pf *f, const struct lp_analysis *a) {
    struct samples_arg s = {f, a, track(f, UINT64_C(1) << 63 | UINT64_C(1) << 61, T_SAMPLES, f->pid, 0), {0}};
    lp_samples_each_sample(lp_samples_of(a), one_sample, &s);
    lp_map_free(&s.cs);
}

/* The allocation stacks (LIBPROF_STACKS) as one heap profile of the process at the end of the
 * run, as heapprofd's dumps are: per call stack the bytes and blocks allocated and freed (what is
 * left unfreed is what leaked). Its strings, frames and callstacks are its own. A profile of a
 * large program is tens of MiB (a PyTorch run: 700 thousand callstacks, 30 frames each), so it
 * is written as heapprofd splits one: a chain of ProfilePackets, each a few dozen KiB of the
 * tables and samples (`continued` on all but the last, `index` counting them), which go out
 * with the other packets' bundles (deflated on threads as they come) instead of being made
 * whole in memory first. A packet's callstacks name only frames of it or of the packets before,
 * and its samples only its own callstacks or those before. */
#define PROFILE_PACKET_BYTES (48u << 10)
struct heap_arg {
    const struct lp_reader *r;
    struct lp_syms *syms;
    struct pf *f;
    struct lp_out *o;
    uint64_t end_ns, index;
    struct frames frames; /* the tables of the packet being made: in place in the bundle */
    size_t pkt_at, pp_at; /* where its TracePacket's and ProfilePacket's contents start */
    int open;
    struct lp_pb *dump;   /* its samples (written after the tables) */
    struct lp_map iid_of; /* frame word -> its frame's iid: stacks share most of their frames */
    /* the last frames found, by word, looked at before the map (a profile of many stacks looks
     * up the same few thousand frames tens of millions of times) */
#define HEAP_SEEN_BITS 12
    struct heap_seen {
        uint64_t w1, field; /* w1: the word + 1, 0: empty; field: the frame's frame_field */
    } * seen;
    int oom;
};

/* A ProfilePacket of the chain begins, in place in the current bundle (the lengths of the
 * TracePacket and of the ProfilePacket take four bytes each: closed without moving it). */
static void heap_begin(struct heap_arg *h) {
    struct lp_pb *b = &h->f->bundle[h->f->cur].raw;
    h->pkt_at = lp_pb_open4(b, TRACE_PACKET);
    lp_pb_uint(b, PKT_TIMESTAMP, h->f->clock0 + h->end_ns);
    lp_pb_uint(b, PKT_SEQUENCE_ID, SEQ);
    h->pp_at = lp_pb_open4(b, PKT_PROFILE_PACKET);
    h->frames.b = b;
    h->open = 1;
}

/* The packet's samples after its tables, and its end (`last`: the chain's). */
static void heap_packet(struct heap_arg *h, int last) {
    struct pf *f = h->f;
    if (!h->open) heap_begin(h);
    struct lp_pb *b = h->frames.b;
    if (h->dump->n || last) {
        size_t d = lp_pb_open4(b, PP_PROCESS_DUMPS);
        lp_pb_uint(b, PHS_PID, f->pid);
        lp_pb_uint(b, PHS_TIMESTAMP, f->clock0 + h->end_ns); /* (CLOCK_MONOTONIC_COARSE's domain) */
        lp_pb_put(b, h->dump->d, h->dump->n);
        lp_pb_close4(b, d);
    }
    if (!last) lp_pb_uint(b, PP_CONTINUED, 1);
    lp_pb_uint(b, PP_INDEX, h->index++);
    lp_pb_close4(b, h->pp_at);
    lp_pb_close4(b, h->pkt_at);
    if (h->dump->oom) f->oom = 1;
    h->dump->n = 0;
    h->open = 0;
    if (b->n >= BUNDLE_BYTES) bundle_out(f, h->o, 0);
}

static void heap_site(void *arg, uint32_t stack, const struct lp_site_totals *t) {
    struct heap_arg *h = arg;
    if (!t->calls) return;
    if (!h->open) heap_begin(h);
    struct lp_frames v;
    uint64_t ids[LP_STACK_MAX_FRAMES];
    unsigned n = 0;
    if (lp_stack_view(h->r, stack, &v)) {
        /* (the commonest loop of a large profile: tens of millions of frames, most of them seen) */
        struct heap_seen *const seen_at = h->seen;
        const uint64_t *const fr = v.f;
        n = v.n < LP_STACK_MAX_FRAMES ? v.n : LP_STACK_MAX_FRAMES;
        for (unsigned i = 0; i < n; i++) {
            uint64_t w = fr[i], iid;
            struct heap_seen *seen = &seen_at[(w * 0x9e3779b97f4a7c15ull) >> (64 - HEAP_SEEN_BITS)];
            if (LP_LIKELY(seen->w1 == w + 1) && w != UINT64_MAX) { /* (an empty slot's w1 is 0) */
                ids[i] = seen->field;
                continue;
            }
            if (w == UINT64_MAX || !lp_map_get(&h->iid_of, w + 1, &iid)) {
                iid = frames_frame(&h->frames, lp_syms_function(h->syms, w, 1));
                if (w != UINT64_MAX && lp_map_put(&h->iid_of, w + 1, iid, NULL) < 0) h->oom = 1;
            }
            ids[i] = frame_field(iid);
            if (w != UINT64_MAX) seen->w1 = w + 1, seen->field = ids[i];
        }
    }
    if (!n) ids[n++] = frame_field(frames_frame(&h->frames, "[unknown stack]"));
    uint64_t cs = frames_callstack(&h->frames, ids, n);
    if (h->frames.b->n - h->pp_at + h->dump->n >= PROFILE_PACKET_BYTES) /* (it and those before) */
        heap_packet(h, 0);
    size_t at = lp_pb_open(h->dump, PHS_SAMPLES);
    lp_pb_uint(h->dump, HS_CALLSTACK_ID, cs);
    lp_pb_uint(h->dump, HS_SELF_ALLOCATED, t->bytes);
    lp_pb_uint(h->dump, HS_SELF_FREED, t->bytes - t->live_bytes);
    lp_pb_uint(h->dump, HS_ALLOC_COUNT, t->calls);
    lp_pb_uint(h->dump, HS_FREE_COUNT, t->calls - t->live_blocks);
    lp_pb_close(h->dump, at);
}

static void heap_profile(struct pf *f, struct lp_out *o, const struct lp_analysis *a, uint64_t end_ns) {
    struct lp_sites *sites = lp_alloc_sites(a->r, a->sites);
    if (!sites) return;
    struct lp_pb dump = {0};
    /* (its strings hold the mapping's path and the function names: those start at 2) */
    struct heap_arg h = {.r = a->r,
                         .syms = lp_syms_of(a->r),
                         .f = f,
                         .o = o,
                         .end_ns = end_ns,
                         .frames = {.b = NULL, /* (heap_begin's) */
                                    .f_strings = PP_STRINGS,
                                    .f_paths = PP_STRINGS,
                                    .f_mappings = PP_MAPPINGS,
                                    .f_frames = PP_FRAMES,
                                    .f_callstacks = PP_CALLSTACKS,
                                    .base = 2},
                         .dump = &dump,
                         .seen = lp_os_calloc(1u << HEAP_SEEN_BITS, sizeof *h.seen)};
    if (!h.syms || !h.seen) {
        lp_os_free(h.seen);
        f->oom = 1;
        return;
    }
    heap_begin(&h);
    frames_begin(&h.frames);
    lp_sites_each(sites, heap_site, &h);
    heap_packet(&h, 1);
    if (h.frames.names.oom || h.oom) f->oom = 1;
    lp_pb_free(&dump);
    lp_strtab_free(&h.frames.names);
    lp_map_free(&h.iid_of);
    lp_os_free(h.seen);
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

/* Bundle `b` to `o`: its deflated packets as one packet, else its packets as they are. */
static void bundle_write(struct pf *f, struct bundle *b, struct lp_out *o) {
    if (b->nz) {
        uint8_t head[24], *p = head;
        size_t body = varint_len((uint64_t)PKT_COMPRESSED_PACKETS << 3 | 2) + varint_len(b->nz) + b->nz;
        p = lp_pb_varint_at(p, (uint64_t)TRACE_PACKET << 3 | 2);
        p = lp_pb_varint_at(p, body);
        p = lp_pb_varint_at(p, (uint64_t)PKT_COMPRESSED_PACKETS << 3 | 2);
        p = lp_pb_varint_at(p, b->nz);
        lp_out_write(o, head, (size_t)(p - head));
        lp_out_write(o, b->z, b->nz);
    } else {
        lp_out_write(o, b->raw.d, b->raw.n);
    }
    if (b->raw.oom) f->oom = 1;
    b->raw.n = 0;
    b->nz = 0;
}

static void *writer_main(void *arg) {
    struct bundle *b = arg;
    deflate_bundle(b);
    return NULL;
}

#define RING (f->writers + 1)
/* A trace of a few bundles is deflated where it is made: threads save it nothing (sqlite's 2
 * bundles, two processors: the same wall time, and without them less memory and processor time —
 * a thread and a compressor per bundle). A longer trace's bundles after these go to the threads. */
#define INLINE_BUNDLES 2

/* The oldest bundle being deflated, written when it is done. */
static void writer_done(struct pf *f, struct lp_out *o) {
    struct bundle *b = &f->bundle[(f->cur + RING - f->busy) % RING];
    lp_os_thread_join(b->th);
    f->busy--;
    bundle_write(f, b, o);
}

/* The current bundle out (`last`: the trace's last). Deflate is most of the cost of writing
 * the packets: past the first INLINE_BUNDLES, a bundle is deflated on a thread of its own while
 * the next ones are made (up to `writers` at once), the last here while the threads end theirs;
 * all are written in order. Without a thread, each here. */
static void bundle_out(struct pf *f, struct lp_out *o, int last) {
    struct bundle *b = &f->bundle[f->cur];
    int z = b->raw.n && f->compress && lp_deflate_load();
    if (z && !last && f->writers && ++f->bundles > INLINE_BUNDLES) {
        if (f->busy == f->writers) writer_done(f, o); /* (the next in the ring is free then) */
        if (lp_os_thread_start(&b->th, writer_main, b) == 0) {
            f->busy++;
            f->cur = (f->cur + 1) % RING;
            return;
        }
    }
    if (z) deflate_bundle(b);
    while (f->busy) writer_done(f, o); /* the bundles before, first */
    if (b->raw.n) bundle_write(f, b, o);
}

/* Every bundle's thread ended (a conversion that stops half-way). */
static void writers_end(struct pf *f) {
    for (; f->busy; f->busy--) lp_os_thread_join(f->bundle[(f->cur + RING - f->busy) % RING].th);
}

/* A packet begins (a Trace.packet written in place in the bundle); packet_out ends it. */
static struct lp_pb *packet(struct pf *f) {
    struct lp_pb *b = &f->bundle[f->cur].raw;
    f->pkt_at = lp_pb_open(b, TRACE_PACKET);
    return b;
}

static void packet_out(struct pf *f, struct lp_out *o) {
    struct lp_pb *b = &f->bundle[f->cur].raw;
    lp_pb_close(b, f->pkt_at);
    if (b->n >= BUNDLE_BYTES) bundle_out(f, o, 0);
}

static void descriptor(struct pf *f, struct lp_out *o, const struct lp_reader *r, const struct track *t) {
    struct lp_pb *b = packet(f);
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
    packet_out(f, o);
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
static int order(struct pf *f, struct track *t) {
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
                for (uint32_t k = r->flows; k; k = f->flows[k - 1].next) add_flow(f, s, f->flows[k - 1].id);
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
                for (uint32_t q = fl->flows; q; q = f->flows[q - 1].next) add_flow(f, r, f->flows[q - 1].id);
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

/* Item `it` of track `t` as a packet: its lengths known before, each field written once, in
 * room made once (a trace has as many packets as events). */
static void emit(struct pf *f, struct lp_out *o, const struct track *t, const struct item *it) {
    const struct rec *r = &t->r[it->rec];
    if ((r->type == R_FLOW_ENCLOSING || r->type == R_FLOW_NEXT) && !r->flows) return; /* bound to a slice */
    size_t msg, field;
    unsigned type = 0;
    if (r->type == R_SAMPLE) {
        field = PKT_PERF_SAMPLE;
        msg = 3 + varint_len(f->pid) + varint_len(r->off) + varint_len(r->dur);
    } else if (r->type == R_COUNTER || r->type == R_COUNTER_D) {
        field = PKT_TRACK_EVENT;
        type = TYPE_COUNTER;
        msg = 2 + 1 + varint_len(t->uuid) + 2 + (r->type == R_COUNTER ? varint_len(r->dur) : 8);
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
    const uint64_t ts = f->clock0 + it->ts;
    size_t pkt = 1 + varint_len(ts) + 2 + varint_len(field << 3 | 2) + varint_len(msg) + msg;
    struct lp_pb *b = &f->bundle[f->cur].raw;
    size_t need = 1 + varint_len(pkt) + pkt;
    if (b->cap - b->n < need && !lp_pb_room(b, need)) return;
    uint8_t *p = b->d + b->n;
    *p++ = TRACE_PACKET << 3 | 2;
    p = lp_pb_varint_at(p, pkt);
    *p++ = PKT_TIMESTAMP << 3;
    p = lp_pb_varint_at(p, ts);
    *p++ = PKT_SEQUENCE_ID << 3;
    *p++ = SEQ;
    /* (no sequence_flags: the interned data is set once, in the first packet, never cleared) */
    p = lp_pb_varint_at(p, field << 3 | 2);
    p = lp_pb_varint_at(p, msg);
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
        if (r->type == R_COUNTER) {
            p = lp_pb_varint_at(p, TE_COUNTER_VALUE << 3);
            p = lp_pb_varint_at(p, r->dur);
        } else if (r->type == R_COUNTER_D) {
            p = lp_pb_varint_at(p, TE_DOUBLE_COUNTER_VALUE << 3 | 1);
            for (int i = 0; i < 8; i++) *p++ = (uint8_t)(r->dur >> (8 * i));
        } else if (!it->end) {
            memcpy(p, f->arena + r->off, r->len);
            p += r->len;
            for (uint32_t k = r->flows; k; k = f->flows[k - 1].next) {
                p = lp_pb_varint_at(p, TE_FLOW_IDS << 3 | 1);
                for (int i = 0; i < 8; i++) *p++ = (uint8_t)(f->flows[k - 1].id >> (8 * i));
            }
        }
    }
    b->n = (size_t)(p - b->d);
    if (b->n >= BUNDLE_BYTES) bundle_out(f, o, 0);
    if (r->type == R_SLICE && !r->dur && !it->end) { /* a slice of no length: its end at once */
        struct item end = *it;
        end.end = 1;
        emit(f, o, t, &end);
    }
}

static void interned_table(struct lp_pb *b, unsigned field, const struct lp_strtab *t) {
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
static void merge(struct pf *f, struct lp_out *o) {
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

static void finish(struct lp_sink *k, const struct lp_analysis *a) {
    struct pf *f = k->self;
    f->chrome.finish(&f->chrome, a);
    if (lp_samples_of(a)) samples(f, a);
    struct lp_out *o = k->out;
    if (f->oom) goto oom;
    /* the sequence's interned data, first */
    struct lp_pb *in = &f->interned;
    interned_table(in, ID_EVENT_CATEGORIES, &f->cats);
    interned_table(in, ID_EVENT_NAMES, &f->names);
    interned_table(in, ID_DEBUG_ANNOTATION_NAMES, &f->keys);
    interned_table(in, ID_DEBUG_ANNOTATION_STRING_VALUES, &f->values);
    /* the clocks, in a ClockSnapshot first: the trace's time is CLOCK_MONOTONIC (libprof's own
     * clock is anchored to it at the run's start); the heap profile's dump time, which Perfetto
     * reads as CLOCK_MONOTONIC_COARSE, is the same clock; and CLOCK_BOOTTIME and CLOCK_REALTIME
     * where the trace knows them — Perfetto relates every trace to boot time, and a trace of the
     * same machine Perfetto recorded itself then lines up with this one */
    const uint64_t t = f->first_ts == UINT64_MAX ? 0 : f->first_ts, t0 = f->clock0 + t;
    struct lp_pb *b = packet(f);
    size_t cs = lp_pb_open(b, PKT_CLOCK_SNAPSHOT);
    const struct {
        unsigned id;
        uint64_t at;
    } clocks[4] = {{CLOCK_MONOTONIC_ID, t0},
                   {CLOCK_MONOTONIC_COARSE_ID, t0},
                   {CLOCK_BOOTTIME_ID, f->boot0 ? f->boot0 + t : 0},
                   {CLOCK_REALTIME_ID, f->real0 ? f->real0 + t : 0}};
    for (int i = 0; i < 4; i++) {
        if (!clocks[i].at) continue;
        size_t c = lp_pb_open(b, CS_CLOCKS);
        lp_pb_uint(b, CLK_ID, clocks[i].id);
        lp_pb_uint(b, CLK_TIMESTAMP, clocks[i].at);
        lp_pb_close(b, c);
    }
    lp_pb_uint(b, CS_PRIMARY_TRACE_CLOCK, CLOCK_MONOTONIC_ID);
    lp_pb_close(b, cs);
    packet_out(f, o);
    b = packet(f);
    lp_pb_uint(b, PKT_TIMESTAMP, t0);
    lp_pb_uint(b, PKT_SEQUENCE_ID, SEQ);
    lp_pb_uint(b, PKT_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
    lp_pb_msg(b, PKT_INTERNED_DATA, in);
    packet_out(f, o);
    for (size_t i = 0; i < f->nt; i++)
        if (f->t[i].kind != T_SAMPLES) descriptor(f, o, a->r, &f->t[i]);
    for (size_t i = 0; i < f->nt; i++)
        if (order(f, &f->t[i]) != 0) goto oom;
    merge(f, o);
    /* the timeline's last bundle deflated on the thread while the heap profile is made here */
    bundle_out(f, o, 0);
    heap_profile(f, o, a, f->last_ts);
    bundle_out(f, o, 1);
    if (!f->oom && !f->names.oom && !f->cats.oom && !f->keys.oom && !f->values.oom && !f->cpu.names.oom) return;
oom:
    writers_end(f);
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
    writers_end(f);
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
    lp_os_free(f->obj);
    lp_os_free(f->tail);
    lp_os_free(f->sbuf);
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
    f->cpu = (struct frames){.b = &f->interned,
                             .f_strings = ID_FUNCTION_NAMES,
                             .f_paths = ID_MAPPING_PATHS,
                             .f_mappings = ID_MAPPINGS,
                             .f_frames = ID_FRAMES,
                             .f_callstacks = ID_CALLSTACKS,
                             .base = 1};
    frames_begin(&f->cpu);
    lp_out_init(&f->json, -1);
    f->sink = (struct lp_json_sink){f, ev_begin, ev_key, ev_value, ev_end, ev_memo, ev_memo_end, ev_sample};
    f->chrome.out = &f->json;
    f->chrome.events = &f->sink;
    if (lp_sink_chrome(&f->chrome, r, path, alloc_min, timeline_ns, timeline_min_ns) != 0) return -1;
    k->alloc_min = f->chrome.alloc_min;
    return 0;
}
