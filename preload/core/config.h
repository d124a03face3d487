/* config.h: the LIBPROF_* environment, read once (config.c), and what this process is. */
#ifndef LPR_CONFIG_H
#define LPR_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

struct lpr_config {
    int enabled;               /* something asked for a profile */
    int master;                /* LIBPROF: 1 default paths, 0 everything off, -1 unset */
    int raw_output;            /* output names a .lpt: the spool file is the trace */
    int output_kind;           /* the timeline it is written as (LP_OUT_CHROME, LP_OUT_PERFETTO: NAME.pftrace) */
    int packed_output;         /* output named a .lpz: the raw trace (NAME.lpt while it runs), packed at exit */
    int summary;               /* LIBPROF_SUMMARY: table on stderr at exit */
    int verbose;               /* LIBPROF_VERBOSE */
    int keep_raw;              /* LIBPROF_KEEP_RAW: keep the spool beside a JSON trace */
    int clock;                 /* enum lp_clock requested (LIBPROF_CLOCK), -1 = best available */
    int alloc_timing;          /* LIBPROF_ALLOC_TIMING: two timestamps per allocation call */
    int start_paused;          /* LIBPROF_START=paused */
    int signal;                /* LIBPROF_SIGNAL: toggles recording (0 = none) */
    int snapshot_signal;       /* LIBPROF_SNAPSHOT_SIGNAL: writes a snapshot of the run so far (0 = none) */
    uint64_t delay_ns;         /* LIBPROF_DELAY */
    uint64_t duration_ns;      /* LIBPROF_DURATION */
    int children;              /* LIBPROF_CHILDREN: 0 = child processes are not profiled */
    uint32_t families;         /* LIBPROF_EVENTS mask */
    uint32_t buffer_bytes;     /* LIBPROF_BUFFER_KB * 1024 */
    uint64_t buffer_kb;        /* LIBPROF_BUFFER_KB as given */
    uint64_t alloc_min;        /* LIBPROF_ALLOC_MIN */
    uint64_t min_ns;           /* LIBPROF_MIN_NS: shorter calls are counted, not recorded */
    uint64_t stacks;           /* LIBPROF_STACKS: frames per allocation event (0 = none) */
    uint64_t alloc_sample;     /* LIBPROF_ALLOC_SAMPLE: mean bytes between allocations with a stack (0: all) */
    uint64_t sample_hz;        /* LIBPROF_SAMPLE_HZ: CPU samples a second of a thread's CPU time (0: off) */
    uint64_t sample_depth;     /* LIBPROF_SAMPLE_DEPTH: native frames per sample (0: the default) */
    int stack_cache_off;       /* LIBPROF_STACK_CACHE_OFF: walk every stack afresh */
    int lines;                 /* LIBPROF_LINES: native frames by source line (the conversion apart) */
    int flamegraph;            /* LIBPROF_FLAMEGRAPH: folded + speedscope files beside the trace */
    int python;                /* LIBPROF_PYTHON: read the CPython interpreter's frames (default 1) */
    char python_calls[512];    /* LIBPROF_PYTHON_CALLS: functions recorded as slices (POSIX ERE) */
    int python_malloc;         /* LIBPROF_PYTHON_MALLOC=1: PYTHONMALLOC=malloc for the interpreter */
    int py_user_lines;         /* LIBPROF_PY_LINES=user: per-line views charge the program's own frame */
    int ort_nodes;             /* LIBPROF_ORT_NODES: ONNX Runtime's per-node profiling (default 1) */
    int gpu_times;             /* LIBPROF_GPU_TIMES: CUPTI for the GPU's own times (default 1) */
    int torch_shapes;          /* LIBPROF_TORCH_SHAPES: PyTorch operators carry their input shapes */
    uint64_t timeline_ns;      /* LIBPROF_TIMELINE: the Chrome trace's full-detail stretch (0: the whole run) */
    uint64_t timeline_min_ns;  /* LIBPROF_TIMELINE_MIN_NS: before it, slices this long are kept */
    int convert_background;    /* LIBPROF_CONVERT=background: a detached libprof-report converts */
    uint64_t follow_mb;        /* LIBPROF_FOLLOW: a follower converts the spool once it passes this (0: never) */
    uint64_t file_mode;        /* LIBPROF_FILE_MODE: mode of the files libprof creates (0600) */
    char dir[PATH_MAX];        /* LIBPROF_DIR: relative output paths are resolved against it */
    char log_pat[PATH_MAX];    /* LIBPROF_LOG as given (lpr_log_path: expanded) */
    char output_pat[PATH_MAX]; /* LIBPROF_OUTPUT as given (patterns unexpanded) */
    char csv_pat[PATH_MAX];    /* LIBPROF_CSV as given */
    int output_defaulted;      /* output_pat/csv_pat are LIBPROF=1's defaults, not the user's */
    char master_raw[16];       /* LIBPROF as given (lineage.c compares it with the parent's) */
    char output[PATH_MAX];     /* expanded trace path ("" = none, e.g. summary only) */
    char csv[PATH_MAX];        /* expanded CSV path ("" = none) */
};

/* The variables the preload reads: one row each in config.c's table, which the loader, the
 * wrapper's --help and the documentation test all read (name, argument, default, one line of
 * help). */
struct lpr_var {
    const char *name, *arg, *dflt, *help;
    unsigned type;       /* how the value is read (config.c) */
    unsigned off;        /* where it goes in struct lpr_config */
    uint64_t lo, hi;     /* bounds of a number; a string's room */
    const char *choices; /* a choice's words, comma-separated, in the order of their values */
};
LP_HIDDEN extern const struct lpr_var lpr_vars[];
LP_HIDDEN extern const unsigned lpr_nvars;

typedef const char *(*lpr_getenv_fn)(const char *name);

/* What the %-patterns of a path expand to. */
struct lpr_pattern_ctx {
    long pid;
    long start_time;
    const char *host;
    const char *exe;
    const char *rank; /* the launcher's rank of this process (%r), NULL when there is none */
    const char *cwd;  /* the current directory at start (relative paths without LIBPROF_DIR), or NULL */
};

/* The job this process belongs to, from its launcher's environment (names.c). */
struct lpr_job {
    char rank[16], size[16], local_rank[16];
    const char *launcher; /* "openmpi", "pmix", "mpich", "slurm", "torchrun", NULL */
};
LP_HIDDEN void lpr_job_from_env(struct lpr_job *j, lpr_getenv_fn get);

/* This process: its configuration (loaded by life.c at start), its pid, its executable, its host
 * and what %p %h %t %e expand to here, its job. */
LP_HIDDEN extern struct lpr_config lpr_cfg;
LP_HIDDEN extern long lpr_pid;
LP_HIDDEN extern char lpr_exe_path[PATH_MAX];
LP_HIDDEN extern char lpr_host[256];
LP_HIDDEN extern struct lpr_pattern_ctx lpr_pattern;
LP_HIDDEN extern struct lpr_job lpr_job;

LP_HIDDEN void lpr_config_load(struct lpr_config *cfg, lpr_getenv_fn get, const struct lpr_pattern_ctx *ctx);
LP_HIDDEN int lpr_parse_bool(const char *s, int *out);
LP_HIDDEN int lpr_parse_size(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
LP_HIDDEN int lpr_parse_seconds(const char *s, uint64_t *ns);
LP_HIDDEN int lpr_parse_signal(const char *s, int *sig);
LP_HIDDEN int lpr_parse_families(const char *s, uint32_t *mask, char *bad, size_t badlen);
LP_HIDDEN int lpr_expand_pattern(const char *pat, const struct lpr_pattern_ctx *ctx, char *out, size_t outlen);
/* An output pattern expanded into `out` (PATH_MAX bytes), resolved against `dir` when relative. */
LP_HIDDEN int lpr_expand_path(const char *pat, const char *dir, const struct lpr_pattern_ctx *ctx, char *out);
LP_HIDDEN int lpr_path_insert_pid(char *path, size_t len, long pid);

#endif
