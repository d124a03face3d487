/* pftrace.h: what the parts of the Perfetto trace writer share (lib/write_perfetto.c, the sink: the
 * events into tracks; pftrace_profile.c, the CPU samples' stacks and the heap profile;
 * pftrace_out.c, the file: tracks sorted, packets merged in time order, bundled, deflated by
 * the workers) —
 * a track and its records, the writer's state (trace.proto's field numbers: pftrace_proto.h). Not a public
 * interface: the writer's own insides, split by concern. */
#ifndef LP_PFTRACE_H
#define LP_PFTRACE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "deflate.h"
#include "json.h"
#include "map.h"
#include "out.h"
#include "pb.h"
#include "pftrace_proto.h"

#define SEQ 1u                       /* the timeline's packet sequence */
#define SEQ_TRACK(t) (1 + (t)->uuid) /* a counter track's values written as they come: one each */
#define MAPPING_IID 1                /* every frame's mapping: functions are named already (symbolised here) */
/* a bundle's packets before deflate: under Perfetto's 512 KiB after, even were they not to deflate
 * at all; the workers take one at a time */
#define BUNDLE_BYTES (128u << 10)
#define BUNDLE_SLACK (16u << 10) /* (the packet that takes a bundle past BUNDLE_BYTES: most are short) */

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
    uint8_t described; /* its descriptor written (before its first counter value written at once) */
    uint8_t streamed;  /* counter values written at once (lp_pf_counter), the last at streamed_ts */
    uint64_t streamed_ts;
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

#define WRITERS_MAX 3 /* worker threads at most */
#define BUNDLE_SLOTS (WRITERS_MAX + 2)
/* A job for the workers: fn(arg), run once by a worker or, where none has taken it when its
 * result is needed, by the thread that waits for it. */
struct lp_pf_job {
    void (*fn)(void *);
    void *arg;
    int state; /* (under the pool's lock) JOB_IDLE, _QUEUED, _RUNNING, _DONE */
};
enum { JOB_IDLE, JOB_QUEUED, JOB_RUNNING, JOB_DONE };
struct heap_job;
struct pf {
    struct lp_sink chrome; /* the Chrome writer: its events structured through `sink` */
    struct lp_json_sink sink;
    struct lp_out json; /* the Chrome writer's text (none: its events come through `sink`) */
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
    uint64_t first_ts, last_ts;
    uint64_t clock0;       /* CLOCK_MONOTONIC at the trace's time 0: every timestamp written is clock0 + its ns */
    uint64_t real0, boot0; /* CLOCK_REALTIME and CLOCK_BOOTTIME then (0: not known) */
    uint32_t pid;
    int oom;
    /* while the Chrome writer finishes: counter values written as they come, not kept (to `o`;
     * `r`: the trace, for the descriptors) */
    int streaming;
    struct lp_out *o;
    const struct lp_reader *r;
    /* the workers: threads that take jobs in order (pftrace_out.c) — the deflater's loading
     * (beside the pass), the heap profile, bundles to deflate */
    pthread_t worker[WRITERS_MAX];
    unsigned nworkers;
    int pool, quit; /* pool: started */
    int mu;         /* the lock on the queue and the jobs' states (lp_lock) */
    int work, done; /* futex words: changed when a job is queued, when one is done */
#define JOBS_MAX 16
    struct lp_pf_job *q[JOBS_MAX];
    unsigned qhead, qtail;
    struct lp_pf_job load;
    /* the packets' bundles */
    struct bundle {
        struct lp_pb raw; /* its packets */
        uint8_t *z;       /* deflated */
        size_t nz, capz;
        struct lp_deflate dz; /* its compressor (one each: bundles are deflated at once) */
        struct lp_pf_job job; /* its deflate, given to the workers */
    } bundle[BUNDLE_SLOTS];
    /* a ring of RING slots: the bundle being filled (cur), and before it the `busy` ones given
     * to the workers, written in order when done */
    unsigned cur, busy, writers; /* writers: the workers to start (0: all done here) */
    int compress;                /* bundles deflated (when a deflater loads: deflate.c) */
    struct heap_job *heap;       /* the heap profile, the workers' first job (pftrace_profile.c) */
};

/* the profiles (pftrace_profile.c) */
void lp_pf_frames_begin(struct frames *t);
void lp_pf_samples(struct pf *f, const struct lp_analysis *a);
/* the heap profile: begun (on a thread of its own where one starts, else at once) while the
 * timeline is written; its packets written after it */
void lp_pf_heap_begin(struct pf *f, const struct lp_analysis *a, uint64_t end_ns);
void lp_pf_heap_out(struct pf *f, struct lp_out *o);
/* the tracks (pftrace_out.c): the track of `key`, made when new; a record added to one (its
 * fields what f->body holds), a flow's id to a record */
struct track *lp_pf_track(struct pf *f, uint64_t key, uint8_t kind, uint32_t pid, uint64_t tid);
struct track *lp_pf_process(struct pf *f, uint32_t pid);
struct track *lp_pf_thread(struct pf *f, uint32_t pid, uint64_t tid);
struct rec *lp_pf_add(struct pf *f, struct track *t, uint8_t type, uint64_t ts, uint64_t dur);
void lp_pf_add_flow(struct pf *f, struct rec *r, uint64_t id);
/* a counter's value (`dbl`: v is a double's bits) written at once, on its track's own sequence */
void lp_pf_counter(struct pf *f, struct track *t, int dbl, uint64_t ts, uint64_t v);
/* the file (pftrace_out.c) */
struct lp_pb *lp_pf_packet(struct pf *f);
void lp_pf_packet_out(struct pf *f, struct lp_out *o);
void lp_pf_bundle_out(struct pf *f, struct lp_out *o, int last);
void lp_pf_bundle_deflate(struct pf *f, struct bundle *b);
void lp_pf_bundle_room(struct bundle *b);
void lp_pf_write_packets(struct lp_out *o, const uint8_t *d, size_t n, int deflated);
void lp_pf_writers_end(struct pf *f);
/* the workers: a job queued (0), or -1 where none can take it (it is the caller's then); a job
 * waited for (run here when no worker has taken it; nothing when never queued); told to end once
 * their queue is empty (none queued after), and ended */
int lp_pf_job_queue(struct pf *f, struct lp_pf_job *j);
void lp_pf_job_wait(struct pf *f, struct lp_pf_job *j);
void lp_pf_workers_quit(struct pf *f);
void lp_pf_workers_end(struct pf *f);
void lp_pf_descriptor(struct pf *f, struct lp_out *o, const struct lp_reader *r, struct track *t);
int lp_pf_order(struct pf *f, struct track *t);
void lp_pf_merge(struct pf *f, struct lp_out *o);
void lp_pf_interned_table(struct lp_pb *b, unsigned field, const struct lp_strtab *t);

#endif
