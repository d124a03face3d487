/* analysis.h: what the one pass over a trace (convert.c) hands its outputs — the options it was
 * given, what it computed (struct lp_analysis), what it made of each event (struct lp_seen) — and
 * the shape of a writer (struct lp_sink). The writers (write_*.c), the table of outputs
 * (outputs.c) and the views (views.c) read this header and nothing of the pass itself, so the
 * pass sits above all of them: convert.c -> outputs.c -> the writers -> the views -> this. */
#ifndef LP_ANALYSIS_H
#define LP_ANALYSIS_H

#include <stdint.h>

#include "libprof/format.h"
#include "stats.h"

struct lp_reader;
struct lp_event;
struct lp_out;
struct lp_calls;
struct lp_sites;
struct lp_call_rec;
struct lp_call_view;
struct lp_snapshot;
struct lp_json_sink;

/* The outputs libprof writes from a trace; their table is outputs.h's. */
enum lp_output_kind {
    LP_OUT_CHROME,       /* Chrome trace JSON: the timeline */
    LP_OUT_CSV,          /* one row per function, entry point, shape, file, site, operator */
    LP_OUT_SUMMARY,      /* the human-readable tables (to a descriptor: stderr, a log, stdout) */
    LP_OUT_FOLDED,       /* allocated bytes by call stack, collapsed stacks */
    LP_OUT_FOLDED_LEAKS, /* leaked bytes, collapsed stacks */
    LP_OUT_SPEEDSCOPE,   /* the flame graphs (allocations, each thread's CPU) as one speedscope file */
    LP_OUT_FOLDED_PEAK,  /* bytes live at the heap's peak (or at --at) */
    LP_OUT_FOLDED_TEMP,  /* bytes of temporary allocations (the HTML page's) */
    LP_OUT_CPU_FOLDED,   /* the CPU samples, collapsed stacks, the thread as the root frame */
    LP_OUT_PPROF,        /* the CPU samples, pprof */
    LP_OUT_PPROF_HEAP,   /* the allocation stacks, pprof */
    LP_OUT_PERFETTO,     /* Perfetto's protobuf trace: the timeline with the CPU samples on it */
    LP_OUT_CUDA_PEAK,    /* CUDA device memory live at its peak, collapsed stacks */
    LP_OUT_WALL_FOLDED,  /* wall-clock time: the CPU samples and the blocked time, collapsed stacks */
    LP_OUT_COUNT
};

/* What of the trace an output is made of (both bits: either will do). */
#define LP_NEEDS_STACKS 1u  /* allocation stacks (LIBPROF_STACKS) */
#define LP_NEEDS_SAMPLES 2u /* CPU samples (LIBPROF_SAMPLE_HZ) */

/* Output k of opts `o` to descriptor `fd` rather than a file. */
#define LP_CONVERT_FD(o, k, d) ((o)->fd[k] = (d), (o)->fds |= 1u << (k))

struct lp_convert_opts {
    const char *path[LP_OUT_COUNT]; /* the outputs to write (outputs.h), NULL for those not asked */
    int fd[LP_OUT_COUNT];           /* ... or to this open descriptor, for each output of `fds` (no temporary name) */
    unsigned fds;                   /* the outputs given a descriptor (1 << k; the summary: only so) */
    int chrome_tape;                /* the Chrome trace as the tape of its writer's calls (json.h): a merge's input */
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
    /* the "heap by site" series of the top site_series_top stacks (by their own highest) over
     * site_series_buckets instants, made from the pass's sites into *site_series (left zeroed
     * when the trace has no allocation stacks or the conversion stops half-way), or NULL */
    struct lp_site_series *site_series;
    unsigned site_series_top, site_series_buckets;
    /* the CPU samples view handed over when the conversion ends (the caller frees it with
     * lp_samples_free, and keeps the reader open while it uses it), or left NULL; or NULL */
    struct lp_samples **samples_out;
    /* Called about every million events with (events done, events total). */
    void (*progress)(uint64_t done, uint64_t total, void *arg);
    void *progress_arg;
};

/* ---- what the pass computes, as the writers read it ------------------------------------------- */

#define LP_SIZE_BUCKETS 29      /* block-size histogram: powers of two from 16 B */
#define LP_SIZE_POW2 61         /* ... as the pass counts them (convert.c folds the rest) */
#define LP_COUNTER_BUCKETS 2048 /* the heap counter track, downsampled */
#define LP_VIEW_SLOTS 12        /* room for the views (views.h: LP_VIEW_COUNT at most this) */

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
    void *view[LP_VIEW_SLOTS];           /* each view's state, by enum lp_view_id (views.h) */
    uint64_t temporary, temporary_bytes; /* temporary allocations (opts.temporary_threshold) */
    uint64_t mpi_sync_ns[2];             /* ends of the main thread's first MPI_Barrier, MPI_Init (skew.c) */
    int general_allocs; /* a view charges allocations (PyTorch's operators): none takes the fast path */
};

/* What the pass made of one event, beside the event itself. */
struct lp_seen {
    int counting;                    /* after the last reset: shown and counted */
    uint64_t size;                   /* bytes the event allocated or released (0: none) */
    const struct lp_call_rec *call;  /* CALL events: the record decoded ... */
    const struct lp_call_view *view; /* ... and what it means */
};

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
    /* the Chrome writer's: its calls recorded on a tape into `out` (json.h), not text (a merge's
     * input, tools/merge.c) */
    int tape;
};

#endif
