/* reader.h: reading raw libprof traces (.lpt) — validation, the chunk index, the clock fit, and a
 * time-ordered event iterator over all threads. Used by libprof-report and by the preload itself
 * when it converts its spool at exit, so both decode with the same code. */
#ifndef LP_READER_H
#define LP_READER_H

#include <stddef.h>
#include <stdint.h>

#include "libprof/format.h"
#include "nodes.h"

struct lp_thread_info {
    uint32_t tid;
    uint32_t owner;   /* index of the thread whose events these are (itself; for a samples stream, its thread's) */
    uint8_t samples;  /* a stream of CPU samples (SAMPLES chunks) */
    const char *name; /* not NUL-terminated; NULL if unknown */
    uint32_t name_len;
    uint64_t events;
    uint32_t *chunks; /* indices into lp_reader.chunks, in file (= time) order */
    uint32_t nchunks;
    size_t cap;
};

struct lp_chunk_ref {
    uint64_t offset; /* of the payload */
    uint32_t length; /* payload bytes, a whole number of records */
    uint32_t thread; /* index into lp_reader.threads */
};

struct lp_syms;
struct lp_nodes;

struct lp_reader {
    const uint8_t *data;
    size_t size;
    int mapped;
    struct lp_file_header hdr;
    const char *hostname, *exe, *cmdline;
    uint32_t hostname_len, exe_len, cmdline_len;
    const char *job; /* launcher\0rank\0size\0local (LP_STR_JOB), NULL when not launched as a rank */
    uint32_t job_len;
    struct lp_thread_info *threads;
    uint32_t nthreads;
    struct lp_chunk_ref *chunks;
    uint32_t nchunks;
    struct lp_name {
        const char *s;
        uint32_t len;
    } * names; /* annotation names by id (s NULL: unknown) */
    uint32_t nnames;
    struct lp_short_ref {
        const struct lp_short *s;
        uint32_t n, tid;
    } * short_chunks; /* LIBPROF_MIN_NS tallies */
    struct lp_stack {
        const uint64_t *frames; /* its words as written (tags included: read them with lp_stack_view) */
        uint32_t n;
        uint32_t native, python; /* a pair (frames NULL): the ids of its two parts */
        uint8_t pair, flags;
    } * stacks;             /* by stack id (frames NULL and not a pair: unknown) */
    uint32_t nstacks;       /* size of `stacks` (ids below it) */
    uint32_t nstacks_found; /* distinct stack ids the trace defines */
    struct lp_nodes *nodes; /* format 17 on: the stacks as a tree (nodes.h), ids as the events name them numbered */
    struct lp_module_ref {
        struct lp_module m;
        const char *path;
        const uint8_t *build_id;
    } * modules;
    uint32_t nmodules;
    struct lp_pycode_ref {
        const char *name, *file; /* NULL: unknown */
        uint32_t name_len, file_len, firstline;
    } * pycodes; /* Python code objects by id (LP_PYFRAME words in stacks) */
    uint32_t npycodes;
    struct lp_ort_profile {
        uint64_t session;
        const char *data;
        uint32_t len;
    } * ort_profiles; /* ONNX Runtime's own profiles, one per session (ort.c) */
    uint32_t nort_profiles;
    struct lp_blob {
        const char *data;
        uint32_t len;
    } * etdumps; /* ETDumps ExecuTorch's profiler handed the program (LP_STR_ETDUMP, etdump.c), in order */
    uint32_t netdumps;
    struct lp_note {
        const char *s;
        uint32_t len;
    } * notes; /* what the recorder noted for the user (LP_STR_NOTE), in order */
    uint32_t nnotes;
    uint32_t nshort_chunks;
    uint64_t events;                    /* records found */
    const struct lp_end *end;           /* NULL when the run did not finish cleanly */
    const struct lp_sampling *sampling; /* CPU sampling: how (the last SAMPLING chunk), NULL when none */
    const struct lp_own_memory *own;    /* libprof's own memory at the end (OWN chunk), NULL when none */
    uint64_t samples;                   /* SAMPLE records found */
    int truncated;                      /* the file stops in the middle of a chunk */
    int damaged;                        /* damage inside the file was skipped (damaged_bytes): events may be missing */
    int header_recovered;               /* the file header was damaged; its copy (HEADER chunk) was used */
    uint64_t damaged_bytes;             /* bytes skipped between whole chunks (and junk after the end) */
    uint64_t valid_bytes;               /* bytes decoded before the damage */
    uint64_t last_ticks;                /* largest tick value seen (chunk syncs, end) */
    uint64_t reset_ticks;               /* time of the last libprof_reset (0 = none): statistics start there */
    /* clock fit: ns = (ticks * mult) >> 32 */
    uint64_t mult;
    uint64_t fit_ticks, fit_ns;
    struct {
        size_t threads, chunks, names, short_chunks, stacks, modules, pycodes, ort_profiles, etdumps, notes;
    } cap; /* the arrays' room */
    /* the symbol table of its addresses (symbols.c: lp_syms_of), made on first use */
    struct lp_syms *syms;
    void (*syms_free)(struct lp_syms *);
    /* a trace still being written (lp_reader_follow) */
    struct lp_follow *follow; /* NULL for a whole file */
    uint64_t watermark;       /* the latest WATERMARK chunk's ticks: every thread's records before it are in */
    uint64_t follow_wm;       /* what the iterator may yield: records stamped before this (UINT64_MAX: all) */
    int follow_done;          /* the run is over and all of it is indexed */
};

/* Open and index `path`. Returns 0, or -1 with a message in `err`. */
int lp_reader_open(struct lp_reader *r, const char *path, char *err, size_t errlen);
/* The damage rule, one for every walker of a raw file (the reader, the packer): a valid chunk
 * starts at `off` (8-byte aligned, its magic, a known type, a length inside the file, its records
 * well formed); past damage, the next offset where one does (`size` when none does). */
int lp_chunk_valid(const uint8_t *d, size_t size, uint64_t off);
uint64_t lp_chunk_resync(const uint8_t *d, size_t size, uint64_t off);
/* The events in the whole EVENTS chunks from `off` to `size` (damage between them skipped), as
 * the reader counts them: what cutting the file at `off` loses (the recorder's recovery after a
 * failed write, which other threads' later chunks may have outrun). */
uint64_t lp_chunk_events(const uint8_t *d, size_t size, uint64_t off);
/* The same for an open descriptor (the file may already be unlinked). */
int lp_reader_open_fd(struct lp_reader *r, int fd, const char *label, char *err, size_t errlen);
/* Index a trace held in memory (not copied: `data` must outlive the reader). */
int lp_reader_open_mem(struct lp_reader *r, const void *data, size_t size, char *err, size_t errlen);
void lp_reader_close(struct lp_reader *r);

/* Follow `path`, the spool of process `pid` while it is still being written: index what is
 * there. The iterator then waits for the rest as it goes (lp_reader_follow_more), and gives the
 * file's blocks back as it has read them (lp_reader_follow_release). Returns 0 or -1 (err). */
int lp_reader_follow(struct lp_reader *r, const char *path, long pid, char *err, size_t errlen);
/* Index what was written since the last look; follow_wm and follow_done say how far the pass may
 * go. 1 when there was something new (or the run just ended), 0 when not, -1 when out of memory. */
int lp_reader_follow_more(struct lp_reader *r);
/* The pass has read everything below `off`: its blocks go back to the file system (a hole). */
void lp_reader_follow_release(struct lp_reader *r, uint64_t off);
uint64_t lp_reader_follow_released(const struct lp_reader *r);

/* The annotation name with id `id` ("(other)" when unknown); its length in *len. */
const char *lp_reader_name(const struct lp_reader *r, uint64_t id, uint32_t *len);

/* Stacks the pass keys by (ids of a trace before format 17, numbers given by lp_stack_ref from
 * 17 on) are below this: the converter packs them in 22 bits. */
#define LP_MAX_STACK_ID (1u << 22)

/* Stack `id` into `v`: its number of frames, 0 when the trace does not define it. */
uint32_t lp_stack_view(const struct lp_reader *r, uint32_t id, struct lp_frames *v);
/* The stack the events name as `raw` (a STACK word) as the pass and its views key it: from format
 * 17 on a dense number, the same for every id the recorder wrote one stack under (nodes.h);
 * before, the id itself. */
uint32_t lp_stack_ref(const struct lp_reader *r, uint64_t raw);
/* Stacks keyed so far (ids below this), and the distinct stacks the trace defines. */
uint32_t lp_stack_count(const struct lp_reader *r);
uint32_t lp_stack_distinct(const struct lp_reader *r);
/* Does the trace define stack `id`? */
int lp_stack_known(const struct lp_reader *r, uint32_t id);

/* Ticks since origin to nanoseconds since origin. */
static inline uint64_t lp_ticks_to_ns(const struct lp_reader *r, uint64_t ticks) {
    return (uint64_t)(((unsigned __int128)ticks * r->mult) >> 32);
}

/* One event as the iterator yields it. A realloc yields twice: phase 0 at its start releases the
 * old block, phase 1 at its end creates the new one; every other kind yields once (phase 1).
 * The order across threads is by the time the event took effect: an allocation at its end, a
 * release at its start. That order is consistent with the allocator's own, so a block freed on
 * one thread and reused on another never appears live twice. */
struct lp_event {
    uint64_t ns;       /* effect time, ns since origin */
    uint64_t start_ns; /* call start (= ns for untimed records) */
    uint64_t dur_ns;   /* 0 for untimed records */
    uint32_t tid;
    uint32_t thread; /* index into lp_reader.threads */
    uint32_t stack;  /* call stack id (0 = none) */
    uint16_t kind;
    uint8_t phase;
    uint8_t timed;     /* dur_ns is meaningful */
    const uint64_t *w; /* payload words */
};

/* What event `e` does to the heap: the block it releases (*freed, 0 for none) and the block it
 * makes (*born of *size bytes, 0 for none). A realloc releases at phase 0 (unless it failed, or
 * returned NULL for size 0 — then the old block lives on) and makes at phase 1. */
static inline void lp_event_blocks(const struct lp_event *e, uint64_t *freed, uint64_t *born, uint64_t *size) {
    const uint64_t *w = e->w;
    *freed = *born = *size = 0;
    switch (lp_kind_shape[e->kind]) {
    case LP_SHAPE_FREE: *freed = w[0]; break;
    case LP_SHAPE_ALLOC:
        *born = w[1];
        *size = w[0];
        break;
    case LP_SHAPE_REALLOC:
        if (e->phase == 0)
            *freed = !(w[1] == 0 && w[0] > 0) ? w[2] : 0;
        else {
            *born = w[1];
            *size = w[0];
        }
        break;
    default: break;
    }
}

/* The iterator. Its fields are here only so that lp_iter_next's common case can be inlined into
 * the loops that drive it (a trace has millions of events); use the functions. */
struct lp_cursor {
    const uint64_t *p, *end;
    uint64_t key;                                   /* effect time in ticks of the current record's current phase */
    uint64_t chunk_from, chunk_to;                  /* byte range of the chunk being read ... */
    uint64_t prev_from, prev_to;                    /* ... and of the one before (released after the next) */
    uint32_t thread, owner, tid, next_chunk, stack; /* owner: the thread the events are of (lp_thread_info) */
    uint8_t phase;
    uint8_t out; /* out of records (a followed trace: until its thread writes more) */
};

struct lp_iter {
    const struct lp_reader *r;
    struct lp_cursor *c;
    struct lp_cursor *cur; /* the cursor yielding now (NULL: no records left) */
    uint64_t bound;        /* the heap top's key (UINT64_MAX: empty): cur yields while before it */
    uint32_t *heap, n;     /* the other cursors with records left, a min-heap by (key, index) */
    uint64_t consumed;
    uint64_t loads, swept; /* chunks entered; the file below `swept` is handed back (reader.c) */
    /* a followed trace: records yield only before wm; when none does, the iterator waits for the
     * file to grow, calling idle(idle_arg) between its looks */
    uint64_t wm;
    uint64_t hold;     /* the chunk of the record yielded last: not given back while it may be read */
    uint32_t ncursors; /* cursors made (the reader's threads when last looked) */
    void (*idle)(void *arg);
    void *idle_arg;
};

struct lp_iter *lp_iter_new(const struct lp_reader *r);
/* A followed trace's iterator: the same, with `idle` called while it waits for the program. */
struct lp_iter *lp_iter_follow(struct lp_reader *r, void (*idle)(void *arg), void *arg);
int lp_iter_next_slow(struct lp_iter *it, struct lp_event *ev);
void lp_iter_free(struct lp_iter *it);
static inline uint64_t lp_iter_position(const struct lp_iter *it) { return it->consumed; } /* records so far */

/* The next event in time order: 1, or 0 at the end. The common case — a one-phase record that is
 * not a call (nor a tally), followed in its chunk by another such record that is still the earliest of all
 * threads — is handled here; everything else by lp_iter_next_slow. */
static inline int lp_iter_next(struct lp_iter *it, struct lp_event *ev) {
    struct lp_cursor *c = it->cur;
    if (__builtin_expect(c == NULL, 0)) return 0;
    const uint64_t *p = c->p;
    uint64_t w0 = p[0];
    unsigned kind = lp_rec_kind(w0), timed = lp_rec_timed(w0), shape = lp_kind_shape[kind];
    if (__builtin_expect(shape == LP_SHAPE_REALLOC || shape == LP_SHAPE_CALL || shape == LP_SHAPE_TALLY, 0))
        return lp_iter_next_slow(it, ev);
    const struct lp_reader *r = it->r;
    uint64_t start = w0 & LP_TS_MASK;
    ev->kind = (uint16_t)kind;
    ev->timed = (uint8_t)timed;
    ev->phase = 1;
    ev->thread = c->owner;
    ev->tid = c->tid;
    ev->stack = c->stack;
    ev->w = p + 1 + timed;
    ev->start_ns = lp_ticks_to_ns(r, start);
    ev->ns = ev->start_ns;
    ev->dur_ns = 0;
    if (timed) {
        uint64_t end_ns = lp_ticks_to_ns(r, start + (p[1] & LP_DUR_MASK));
        ev->dur_ns = end_ns - ev->start_ns;
        if (shape != LP_SHAPE_FREE) ev->ns = end_ns; /* an allocation takes effect at its end */
    }
    /* advance */
    const uint64_t *q = p + 1 + timed + lp_kind_words[kind]; /* validated when the file was opened */
    c->p = q;
    c->stack = 0;
    it->consumed++;
    if (__builtin_expect(q < c->end, 1)) {
        uint64_t w = q[0];
        unsigned k = lp_rec_kind(w), sh = lp_kind_shape[k];
        if (k == LP_EV_STACK) { /* validated: a record follows it in this chunk */
            c->stack = lp_stack_ref(r, w & LP_TS_MASK);
            c->p = ++q;
            w = q[0];
            k = lp_rec_kind(w);
            sh = lp_kind_shape[k];
        }
        if (__builtin_expect(k != LP_EV_STACK && sh != LP_SHAPE_REALLOC, 1)) {
            uint64_t key = (w & LP_TS_MASK) + (lp_rec_timed(w) && sh != LP_SHAPE_FREE ? q[1] & LP_DUR_MASK : 0);
            c->key = key;
            c->phase = 1;
            if (__builtin_expect(key < it->bound, 1)) return 1;
        }
    }
    lp_iter_next_slow(it, NULL); /* settle the cursor, let another thread go first */
    return 1;
}

/* Runs, for a caller that decodes the commonest records itself (the converter's allocation path,
 * convert.c): the yielding cursor's chunk is read in place. lp_iter_run gives the record to yield
 * next (p; a stack word before it already read into `stack`), the end of its chunk and `bound`:
 * every record of this run whose effect time is below it comes before any other thread's. The
 * caller reads records while that holds, then hands back where it stopped — the record it did
 * not take and the stack word read for it — and how many records it took; the cursor is then
 * settled as lp_iter_next would leave it. A realloc is taken whole (both phases). 0 when there is
 * no run to give: the end, or a realloc whose release was already yielded. */
struct lp_run {
    const uint64_t *p, *end;
    uint64_t bound;
    uint32_t stack, thread, tid;
};

static inline int lp_iter_run(const struct lp_iter *it, struct lp_run *run) {
    const struct lp_cursor *c = it->cur;
    if (!c || (c->phase == 1 && lp_kind_shape[lp_rec_kind(c->p[0])] == LP_SHAPE_REALLOC)) return 0;
    *run = (struct lp_run){c->p, c->end, it->bound, c->stack, c->owner, c->tid};
    return 1;
}
void lp_iter_run_end(struct lp_iter *it, const uint64_t *p, uint32_t stack, uint64_t records);

#endif
