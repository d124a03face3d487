/* convert.h: turning a raw trace into what people read — the Chrome trace, the CSV summary, the
 * stderr table and the flame graphs. One pass over the time-ordered events (convert.c) computes
 * every statistic and feeds each writer through one interface (struct lp_sink): writers that
 * stream events (the Chrome trace, write_chrome.c) see every event as the pass does; all of them
 * then write what the whole run added up to (write_tables.c, the flame graphs in sites.c). The
 * preload calls this at exit and libprof-report calls it on a saved .lpt — or on a spool it
 * follows while the program runs (lp_reader_follow) — so all give the same output. */
#ifndef LP_CONVERT_H
#define LP_CONVERT_H

#include <stdint.h>

#include "calls.h"
#include "out.h"
#include "outputs.h"
#include "reader.h"
#include "cudamem.h"
#include "etdump.h"
#include "gpu.h"
#include "ort.h"
#include "pycalls.h"
#include "sites.h"
#include "stats.h"
#include "torch.h"

/* A snapshot of a followed trace (libprof-report --live on a run a follower converts): when
 * `asked` turns 1 (a signal handler sets it), the pass calls load() for the paths wanted ("" for
 * none) and a forked copy of the pass writes them from what it has read so far, while the pass
 * itself goes on. The summary is the table LIBPROF_SUMMARY prints (its "leaked" is what is
 * still live). */
struct lp_snapshot {
    volatile int asked;
    int (*load)(struct lp_snapshot *s);
    char path[LP_OUT_COUNT][4096]; /* each output asked for (outputs.h), "" for none */
    char done[4096];               /* made empty once the others are all in place */
    unsigned top;                  /* the summary's rows per table (--top; 0: each table's own) */
};

struct lp_convert_opts {
    const char *path[LP_OUT_COUNT]; /* the outputs to write (outputs.h), NULL for those not asked */
    int chrome_fd;                  /* ... the Chrome trace to this open descriptor when >= 0 (no temporary name) */
    int summary_fd;                 /* the summary (human-readable tables) to this fd, or -1 */
    uint64_t alloc_min;             /* allocations at least this large become instant events */
    const char *trace_label;        /* where the trace went, for the summary's first line */
    int killed_by;                  /* the process died by this signal (known to its parent), 0 if not */
    /* Temporary allocations: 0 = heaptrack's definition (a release that directly follows, on its
     * thread, an allocation of the same size and call stack); N > 0 = memray's (a block released
     * before N more allocations were made on its thread). */
    unsigned temporary_threshold;
    int site_tracks;              /* "heap by site" counter tracks in the Chrome trace (one more pass) */
    uint64_t peak_at_ns;          /* 0: the peak; else the instant (ns since the trace's start) to show */
    int py_user_lines;            /* the per-line views charge the program's own Python frame (sites.c) */
    unsigned file_mode;           /* mode of the files written (0: 0600), no wider than a file they replace */
    int live;                     /* the trace of a process still running (libprof-report --live) */
    unsigned top;                 /* rows per table of the summary (--top; 0: each table's own) */
    uint64_t timeline_ns;         /* the Chrome trace's full-detail stretch, the run's last (0: all of it) */
    uint64_t timeline_min_ns;     /* before it, slices at least this long are kept, the others folded */
    int general_path;             /* every event through the general path, none through the allocation fast
                       * path (convert.c): the same output, slower — a check of the fast path */
    struct lp_snapshot *snapshot; /* a followed trace: snapshots asked while it runs, or NULL */
    /* Called about every million events with (events done, events total). */
    void (*progress)(uint64_t done, uint64_t total, void *arg);
    void *progress_arg;
};

/* Returns 0, or -1 with a message in `err` (outputs that could be written are complete). */
int lp_convert(const struct lp_reader *r, const struct lp_convert_opts *o, char *err, size_t errlen);

/* The views of the hook families that make more of a trace (views.h): created, fed and finished by
 * the pass; their state is struct lp_analysis's view slots below. */
#include "views.h"

/* ---- what the pass computes, as the writers read it ------------------------------------------- */

#define LP_SIZE_BUCKETS 29      /* block-size histogram: powers of two from 16 B */
#define LP_SIZE_POW2 61         /* ... as the pass counts them (convert.c folds the rest) */
#define LP_COUNTER_BUCKETS 2048 /* the heap counter track, downsampled */

struct lp_point {
    uint64_t ns, v;
};
struct lp_cbucket {
    struct lp_point min, max, last;
};

struct lp_analysis {
    const struct lp_reader *r;
    const struct lp_convert_opts *opts;
    struct fnstat fn[LP_KIND_COUNT]; /* per record kind (allocation functions, annotations) */
    struct fnstat *ranges;           /* per annotation name id */
    size_t nranges;
    uint64_t live_bytes, peak_bytes, peak_ns, live_blocks;
    uint64_t untracked_frees, reused_live;
    /* block sizes, by lp_size_bucket; during the pass by power of two up to 2^63 (the fold into
     * the last bucket is done once, at its end) */
    uint64_t size_hist[LP_SIZE_POW2];
    uint64_t events;      /* events decoded */
    uint64_t events_fast; /* ... of which the allocation fast path applied */
    int counting;         /* 0 before the last libprof_reset: heap state only, no statistics */
    uint64_t reset_ns, pauses;
    uint64_t span_ns;      /* the run's length */
    struct lp_cbucket *cb; /* heap counter buckets (only those marked in cb_used are valid) */
    uint64_t cb_used[LP_COUNTER_BUCKETS / 64];
    struct lp_calls *calls;              /* the runtime entry points (calls.c) */
    struct lp_sites *sites;              /* allocation call stacks (sites.c), NULL without them */
    void *view[LP_VIEW_COUNT];           /* each view's state, by enum lp_view_id (views.h) */
    uint64_t temporary, temporary_bytes; /* temporary allocations (opts.temporary_threshold) */
    uint64_t mpi_sync_ns[2];             /* ends of the main thread's first MPI_Barrier, MPI_Init (skew.c) */
    int general_allocs; /* a view charges allocations (PyTorch's operators): none takes the fast path */
};

/* The views the writers read besides their own parts: the CPU samples (NULL without them), CUDA
 * device memory. */
static inline struct lp_samples *lp_samples_of(const struct lp_analysis *a) { return a->view[LP_VIEW_CPU]; }
static inline struct lp_cudamem *lp_cudamem_of(const struct lp_analysis *a) { return a->view[LP_VIEW_CUDAMEM]; }

/* What the pass made of one event, beside the event itself. */
struct lp_seen {
    int counting;                    /* after the last reset: shown and counted */
    uint64_t size;                   /* bytes the event allocated or released (0: none) */
    const struct lp_call_rec *call;  /* CALL events: the record decoded ... */
    const struct lp_call_view *view; /* ... and what it means */
};

struct lp_json_sink;
/* A writer. `event` (NULL for writers that do not stream) sees every event in time order;
 * `finish` writes what the whole run added up to; both write to `out`. */
struct lp_sink {
    void (*event)(struct lp_sink *k, const struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s);
    void (*finish)(struct lp_sink *k, const struct lp_analysis *a);
    void (*release)(struct lp_sink *k);
    struct lp_out *out;
    void *self;
    /* allocations and releases of fewer bytes than this are not passed to `event` (most of a
     * trace's events: skipping them here spares a call each) */
    uint64_t alloc_min;
    /* the Chrome writer's: when set, its events go to this reader as their fields, not as text
     * into `out` (the Perfetto writer, write_perfetto.c) */
    const struct lp_json_sink *events;
};

/* The writers (write_chrome.c, write_tables.c; the flame graphs are sites.c's). Each returns 0,
 * or -1 when out of memory; `k->out` is set by the caller. */
/* timeline_ns: the trace keeps the last timeline_ns of the run at full detail and, before that,
 * the slices of at least timeline_min_ns (0: the whole run at full detail). */
int lp_sink_chrome(struct lp_sink *k, const struct lp_reader *r, const char *path, uint64_t alloc_min,
                   uint64_t timeline_ns, uint64_t timeline_min_ns);
int lp_sink_csv(struct lp_sink *k);
int lp_sink_summary(struct lp_sink *k);

#endif
