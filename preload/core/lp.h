/* Private interface of the libprof preload: the recording core that every hook module sits on.
 *
 * Functions are grouped under the file that owns them. A hook module includes only this header,
 * and touches the core through lpr_hook_enter / lpr_reserve / lpr_commit / lpr_hook_leave. */
#ifndef LP_CORE_H
#define LP_CORE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <time.h>

#include <dlfcn.h>

#include "libprof/format.h"
#include "lib/cc.h"

#define LP_HIDDEN __attribute__((visibility("hidden")))
#define LP_EXPORT __attribute__((visibility("default")))
#define LP_TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- "real.c": the C library's functions libprof calls for itself ------------------------ */

#include <link.h>
#include <signal.h>
#include <pthread.h>

struct dl_phdr_info; /* <link.h> */
struct lpr_real_fns {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void *(*dlopen)(const char *, int);
    int (*dlclose)(void *);
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    int (*pthread_join)(pthread_t, void **);
    int (*sigaction)(int, const struct sigaction *, struct sigaction *);
    void (*(*signal)(int, void (*)(int)))(int);
    int (*dl_iterate_phdr)(int (*)(struct dl_phdr_info *, size_t, void *), void *);
};
/* dl_iterate_phdr with the thread marked inside the loader (real.c); libprof calls it by this name. */
LP_HIDDEN int lpr_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data);
LP_HIDDEN extern struct lpr_real_fns lpr_real;
/* The C library's (the next) `fn`, never libprof's hook of that name: LPR_REAL(malloc)(n). */
#define LPR_REAL(fn) (lpr_real.fn)
LP_HIDDEN extern __thread int lpr_real_resolving; /* inside the allocation functions' dlsym */
LP_HIDDEN void lpr_real_resolve_alloc(void);      /* the malloc family, once */
LP_HIDDEN void lpr_real_resolve(void);            /* everything, once */

/* ---- "config.c": the LIBPROF_* environment, read once -------------------------------------- */

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

/* ---- "real.c": the C library's dlsym --------------------------------------------------------
 * libprof exports dlsym (hooks/dl.c), so its own lookups call the C library's by this name
 * (RTLD_NEXT stays relative to libprof): never `dlsym` in libprof's code. */
LP_HIDDEN void *lpr_dlsym(void *handle, const char *name);
typedef void *(*lpr_dlsym_fn)(void *, const char *);
LP_HIDDEN lpr_dlsym_fn lpr_dlsym_real(void);
/* The dlsym hook's helpers: the lookups of names libprof exports (hooks/ort.c, hooks/mpi.c). */
LP_HIDDEN void *lpr_ort_dlsym(void *handle, const char *name);
/* Python's InferenceSession, seen through its methods (hooks/python.c): the strings of its records. */
LP_HIDDEN size_t lpr_ort_py_session(const void *self, const char *path, const char *providers, char *s, size_t cap);
LP_HIDDEN size_t lpr_ort_py_run(const void *self, const char *inputs, const char *outputs, const char *api, char *s,
                                size_t cap);
LP_HIDDEN void *lpr_mpi_dlsym(void *handle, const char *name);
LP_HIDDEN void *lpr_cupti_dlsym(void *handle, const char *name); /* hooks/cupti.c: a CUPTI client's own start */

/* ---- "log.c": the only way libprof talks to the user at run time --------------------------- */

/* "log.c": libprof cannot work (stderr); a note (the trace, the log); a diagnostic (verbose). */
LP_HIDDEN void lpr_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LP_HIDDEN void lpr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LP_HIDDEN void lpr_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LP_HIDDEN void lpr_notes_flush(void);
LP_HIDDEN void lpr_log_write(const char *buf, size_t n); /* as they are: to LIBPROF_LOG, else stderr */
LP_HIDDEN extern int lpr_verbose;
LP_HIDDEN extern char lpr_log_path[]; /* LIBPROF_LOG, expanded; empty: stderr */

/* ---- "clock.c": timestamps ----------------------------------------------------------------- */

LP_HIDDEN extern int lpr_clock_kind;          /* enum lp_clock in use */
LP_HIDDEN extern uint64_t lpr_origin_ticks;   /* record timestamps are relative to this */
LP_HIDDEN extern uint64_t lpr_origin_mono_ns; /* CLOCK_MONOTONIC at the same moment */
LP_HIDDEN void lpr_clock_init(int requested);
LP_HIDDEN uint64_t lpr_mono_ns(void);
LP_HIDDEN uint64_t lpr_real_ns(void);

/* The timestamp of the hot path: the TSC where it is invariant (about 10 ns here, against 25 ns
 * for clock_gettime through the vDSO), CLOCK_MONOTONIC otherwise. */
static inline uint64_t lpr_ticks(void) {
#if defined(__x86_64__)
    if (LP_LIKELY(lpr_clock_kind == LP_CLOCK_TSC)) return __rdtsc();
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The TSC itself, for hooks that have checked lpr_clock_kind == LP_CLOCK_TSC (lpr_alloc_lean). */
static inline uint64_t lpr_tsc(void) {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return lpr_ticks();
#endif
}

/* ---- "tbuf.c": per-thread buffers, the thread registry and the spool file ------------------ */

#define LP_RANGE_DEPTH 64

/* The allocations and frees a thread counted and did not record (LIBPROF_ALLOC_SAMPLE): a TALLY
 * record's payload as it is written (format.h), then when to write it. */
struct lpr_tally {
    uint64_t w[LP_TALLY_HIST];
    uint32_t hist[LP_TALLY_HIST_BUCKETS];
    uint64_t every; /* a count of mallocs (or frees) that writes it: 0 until the thread's first
                     * record (the first one writes), 1 past its TLS destructors (each one) */
    uintptr_t last; /* the block the thread allocated last (0 once it freed one): temporaries */
};
static inline int lpr_tally_any(const struct lpr_tally *y) {
    return (y->w[LP_TALLY_MALLOC_N] | y->w[LP_TALLY_CALLOC_N] | y->w[LP_TALLY_REALLOC_N] | y->w[LP_TALLY_FREE_N] |
            y->w[LP_TALLY_NET] | y->w[LP_TALLY_BLOCKS]) != 0; /* (a recorded realloc's counted old block) */
}

/* Thread-local recording state. It lives in initial-exec TLS so the hot path reaches it with one
 * %fs-relative access; everything a flush needs lives in the registry node `thr`. */
struct lpr_tls {
    uint64_t *cur; /* next free word of the chunk */
    uint64_t *end; /* end of the chunk */
    uint8_t guard; /* inside a hook or inside libprof itself: record nothing */
    uint8_t late;  /* thread past its last TLS destructor: every commit writes through */
    uint8_t state; /* enum lpr_tls_state */
    uint8_t dtor_round;
    uint32_t tid;
    uint32_t py_stack;            /* the Python frames at the start of the call being recorded (python.c) */
    uint8_t in_unwind;            /* inside libunwind for libprof (stacks.c): a sample must not walk again */
    uint8_t in_loader;            /* inside dlopen, dlclose or dl_iterate_phdr (hooks/dl.c): nor then */
    uint8_t stack_scans;          /* lookups of the thread's stack mapping (walk.c) */
    uint8_t probe_fault;          /* a probed load faulted (python.c: lpr_py_fault_fixup stepped over it) */
    uintptr_t stack_lo, stack_hi; /* the stack mapping the thread's samples walk in (walk.c) */
    void *scache, *pycache;       /* the registry node's stack and Python caches, once made (tbuf.c) */
    uint64_t records;             /* records committed by this thread (for the END statistics) */
    struct lpr_thread *thr;       /* registry node owning the chunk memory */
    uint64_t late_rec[24];        /* scratch for records written after the thread's destructors ran */
    uint64_t life_t0, life_creator, life_flow; /* thread.c: a thread libprof saw created (flow != 0) */
    uint64_t sample_left, sample_rng;          /* LIBPROF_ALLOC_SAMPLE: bytes to the next sampled one (stacks.c) */
    struct lpr_tally tally;                    /* ... and what was counted, not recorded (hooks/alloc.c) */
    uint32_t range_depth;                      /* open annotation ranges (annot.c), including unrecorded deep ones */
    uint32_t range_id[LP_RANGE_DEPTH];
    uint64_t range_t0[LP_RANGE_DEPTH];
};

enum lpr_tls_state { LP_TLS_NEW = 0, LP_TLS_ACTIVE, LP_TLS_LATE, LP_TLS_FAILED };

LP_HIDDEN extern LP_TLS struct lpr_tls lpr_tls;

/* The gate: one word read by every hook. Bit f is set while family f records; LP_GATE_UNINIT
 * is set until the first hook call has read the environment. Off costs one load and one test. */
#define LP_GATE_UNINIT (1u << 31)
/* Set by a hook family that must see every call even when nothing records (the allocation
 * family, once dlsym has taken blocks from its bootstrap pool). Kept across gate changes. */
#define LP_GATE_SLOWPATH (1u << 30)
LP_HIDDEN extern volatile uint32_t lpr_gate;

/* Set while the part of libprof's set-up that may allocate or look symbols up (libunwind,
 * the module map, signal handlers, unhooking) has not run: only the allocation family's hooks
 * and libprof's constructor do it, never a hook that a program's own allocator may call while it
 * initialises itself (mmap, a lock, a read of /proc). Only the allocation hooks test this bit. */
#define LP_GATE_PENDING (1u << 29)
#define LP_GATE_STICKY (LP_GATE_SLOWPATH | LP_GATE_PENDING)
/* Set beside the allocation family's bit when its records are plain (lpr_alloc_lean): the
 * allocation hooks' lean path needs one test of the gate for everything. */
#define LP_GATE_LEAN (1u << 28)
/* Set beside the families while a Python interpreter libprof can read is in the process
 * (python.c): a call hook then reads the calling Python line, with no other load to know it. */
#define LP_GATE_PY (1u << 27)
/* Set instead of LP_GATE_LEAN when the plain allocation records are sampled (lpr_alloc_tally):
 * the hooks then take their tally path, and the lean path pays nothing for it. */
#define LP_GATE_TALLY (1u << 26)
_Static_assert(LP_FAM_COUNT <= 26, "the families' bits stay below the gate's own");

LP_HIDDEN extern int lpr_alloc_lean;
LP_HIDDEN extern int lpr_alloc_tally; /* blocks.c: LIBPROF_ALLOC_SAMPLE on the lean path */
LP_HIDDEN extern int lpr_py_on;       /* python.c: an interpreter libprof can read is in the process */

/* Open or close families without losing the sticky bits. */
static inline void lpr_gate_set(uint32_t families) {
    uint32_t old = lpr_gate, want;
    if ((families & (1u << LP_FAM_ALLOC)) && lpr_alloc_lean) families |= lpr_alloc_tally ? LP_GATE_TALLY : LP_GATE_LEAN;
    if (families && __atomic_load_n(&lpr_py_on, __ATOMIC_RELAXED)) families |= LP_GATE_PY;
    do {
        want = families | (old & LP_GATE_STICKY);
    } while (!__atomic_compare_exchange_n(&lpr_gate, &old, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
}

LP_HIDDEN uint64_t *lpr_reserve_slow(struct lpr_tls *t, unsigned words);
LP_HIDDEN void lpr_commit_late(struct lpr_tls *t);
/* Start libprof: the first hooked call of the process (`safe`: an allocation hook, which may also
 * run the pending set-up) or the constructor. */
LP_HIDDEN void lpr_init_slow(int safe);
LP_HIDDEN int lpr_spool_create(const char *path, int allow_rename, const struct lp_file_header *h, char *chosen,
                               size_t chosen_len);
LP_HIDDEN int lpr_spool_write(uint16_t type, uint32_t tid, const void *a, size_t alen, const void *b, size_t blen);
LP_HIDDEN const char *lpr_spool_name(void);
LP_HIDDEN void lpr_spool_identify(void);
LP_HIDDEN long lpr_read_header(int fd, struct lp_file_header *h);
LP_HIDDEN int lpr_pid_gone(int pid);
LP_HIDDEN int lpr_pid_ending(int pid); /* exiting, or killed: gone within moments */
LP_HIDDEN void lpr_spool_stop(void);
LP_HIDDEN void lpr_spool_resume(void);
LP_HIDDEN uint64_t lpr_spool_offset(void);
/* a followed spool (tbuf.c, life.c): the follower runs; the spool offset that starts it */
LP_HIDDEN extern int lpr_follow_on;
LP_HIDDEN extern uint64_t lpr_follow_at;
LP_HIDDEN void lpr_follow_start(void);
LP_HIDDEN int lpr_follow_exec(const char *json, const char *csv);
LP_HIDDEN void lpr_snapshot_on_signal(int sig); /* LIBPROF_SNAPSHOT_SIGNAL's handler (life.c) */
LP_HIDDEN void lpr_tbuf_flush_all(int from_signal);
/* the thread is about to wait: write what it recorded, now and then; 1: a signal the program
 * handles came meanwhile (the wait returns EINTR). `during`: the mask the wait sets, or NULL */
LP_HIDDEN int lpr_tbuf_idle(const sigset_t *during);
/* The calling thread's samples buffer (from the sampler's signal handler): room for `words` words
 * (NULL: the sample is dropped), then its commit. */
LP_HIDDEN uint64_t *lpr_tbuf_sample_reserve(struct lpr_tls *t, unsigned words);
LP_HIDDEN void lpr_tbuf_sample_commit(struct lpr_tls *t, uint64_t *next);
LP_HIDDEN void lpr_tbuf_write_thread_names(void);
/* Thread `tid`'s name in the trace, as an annotation gave it (hooks/nvtx.c); the first one stays. */
LP_HIDDEN void lpr_tbuf_thread_label(uint32_t tid, const char *name);
LP_HIDDEN void lpr_tbuf_close_lives(void);
LP_HIDDEN void lpr_tbuf_init(uint32_t buffer_bytes);
LP_HIDDEN void lpr_tbuf_after_fork_child(void);
LP_HIDDEN void lpr_spool_recover(void);
LP_HIDDEN uint64_t lpr_tbuf_events_written(void);
LP_HIDDEN uint32_t lpr_gettid(void);
LP_HIDDEN extern int lpr_spool_on; /* a spool is open for writing (this process's own) */
LP_HIDDEN extern uint64_t lpr_events_written, lpr_events_dropped, lpr_chunks_written;

/* Enter a hook of family `fam`: returns the thread's state when this call is to be recorded,
 * NULL when it is to pass straight through (family off, libprof off, or re-entered). */
static inline struct lpr_tls *lpr_call_begin(unsigned fam);
static inline struct lpr_tls *lpr_hook_enter(unsigned fam) {
    struct lpr_tls *t = lpr_call_begin(fam);
    if (t) t->guard = 1;
    return t;
}

static inline void lpr_hook_leave(struct lpr_tls *t) { t->guard = 0; }

/* The thread is inside the dynamic loader (dlopen, dlclose, dl_iterate_phdr): a CPU sample then
 * takes no native stack (the loader's lock is not to be taken again from a signal handler). The
 * threads inside are counted too, and a fork waits until no other thread is (real.c): a child
 * would inherit the loader's lock held by a thread it does not have, and its first stack capture
 * (libunwind asks dl_iterate_phdr) or dlopen would wait for ever. */
LP_HIDDEN extern int lpr_loader_users, lpr_loader_gate;
LP_HIDDEN void lpr_loader_wait(void);
static inline void lpr_loader_enter(void) {
    if (LP_UNLIKELY(__atomic_load_n(&lpr_loader_gate, __ATOMIC_ACQUIRE)) && !lpr_tls.in_loader) lpr_loader_wait();
    __atomic_fetch_add(&lpr_loader_users, 1, __ATOMIC_SEQ_CST);
    if (LP_UNLIKELY(__atomic_load_n(&lpr_loader_gate, __ATOMIC_SEQ_CST)) && !lpr_tls.in_loader) {
        __atomic_fetch_sub(&lpr_loader_users, 1, __ATOMIC_SEQ_CST); /* a fork began meanwhile: after it */
        lpr_loader_wait();
        __atomic_fetch_add(&lpr_loader_users, 1, __ATOMIC_SEQ_CST);
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    (*(volatile uint8_t *)&lpr_tls.in_loader)++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline void lpr_loader_leave(void) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    (*(volatile uint8_t *)&lpr_tls.in_loader)--;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&lpr_loader_users, 1, __ATOMIC_RELEASE);
}
/* Around the real fork (hooks/process.c): no other thread inside the loader (waited for, bounded),
 * none let in until it returns, in the parent and in the child. */
LP_HIDDEN void lpr_loader_fork_begin(void);
LP_HIDDEN void lpr_loader_fork_end(int child);

/* Hold the guard around libprof's own use of malloc/free: the compiler knows those builtins do
 * not read program memory and would otherwise drop a plain store before them. */
static inline uint8_t lpr_guard_hold(struct lpr_tls *t) {
    uint8_t g = t->guard;
    *(volatile uint8_t *)&t->guard = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return g;
}
static inline void lpr_guard_restore(struct lpr_tls *t, uint8_t g) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    *(volatile uint8_t *)&t->guard = g;
}

/* Room for one record of `words` words in the thread's chunk, or NULL if it cannot be recorded
 * (then the event is counted as dropped). A thread without a chunk has cur and end both NULL,
 * which the one comparison sends to the slow path too (as integers: no null-pointer arithmetic). */
static inline uint64_t *lpr_reserve(struct lpr_tls *t, unsigned words) {
    uint64_t *r = t->cur;
    if (LP_UNLIKELY((uintptr_t)r + words * 8u > (uintptr_t)t->end)) return lpr_reserve_slow(t, words);
    return r;
}

/* Publish a record written at `r`. The release store lets a flushing thread (at exit) read
 * every record below `cur` complete. */
static inline void lpr_commit(struct lpr_tls *t, uint64_t *next) {
    __atomic_store_n(&t->cur, next, __ATOMIC_RELEASE);
    t->records++;
    if (LP_UNLIKELY(t->late)) lpr_commit_late(t);
}

static inline uint64_t lpr_word0(unsigned kind, uint64_t ticks) {
    return ((uint64_t)kind << LP_TS_BITS) | ((ticks - lpr_origin_ticks) & LP_TS_MASK);
}

static inline uint64_t lpr_word0_timed(unsigned kind, uint64_t ticks) { return lpr_word0(kind | LP_REC_TIMED, ticks); }

static inline uint64_t lpr_word1(uint64_t t0, uint64_t t1) {
    /* t1 < t0 only when a thread migrated between cores whose TSCs differ by a few ticks */
    if (LP_UNLIKELY(t1 < t0)) return 0;
    uint64_t d = t1 - t0;
    return d > LP_DUR_MASK ? LP_DUR_MASK : d;
}

/* ---- "call.c": records of the runtime entry points ----------------------------------------
 * Every hook is written with preload/hooks/hook.h: ask lpr_call_begin whether to record, take two
 * timestamps around the real call, hand the argument words to lpr_call_record(_args).
 *
 * The guard is NOT held while the real function runs, so interposed calls it makes (a GEMM that
 * opens an OpenMP region, a library that reads a file) are recorded too, as slices nested
 * inside the outer one: a thread's calls are strictly nested in time, so its slices nest. */

LP_HIDDEN uint32_t lpr_py_location(void);

static inline struct lpr_tls *lpr_call_begin(unsigned fam) {
    uint32_t g = lpr_gate;
    if (LP_UNLIKELY(g & (LP_GATE_UNINIT | (fam == LP_FAM_ALLOC ? LP_GATE_PENDING : 0)))) {
        lpr_init_slow(fam == LP_FAM_ALLOC);
        g = lpr_gate;
    }
    if (LP_LIKELY(!(g & (1u << fam)))) return NULL;
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) return NULL;
    /* The Python line is read before the call: during it the interpreter may free the memory
     * its current frame lives in (3.11+ munmap a data-stack chunk while the frame is popped). */
    if (LP_UNLIKELY(g & LP_GATE_PY) && fam != LP_FAM_ALLOC) t->py_stack = lpr_py_location();
    return t;
}

/* Append a CALL record: timed from t0 to t1 (t1 == 0: an instant at t0), `nargs` argument words,
 * and an optional string (cut to LP_CALL_MAX_STR bytes). Keeps errno. */
LP_HIDDEN void lpr_call_record(struct lpr_tls *t, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs,
                               const uint64_t *args, const char *str, size_t slen);
/* The same without the checks, for libprof's own records made while it holds the guard. */
LP_HIDDEN void lpr_call_write(struct lpr_tls *t, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs,
                              const uint64_t *args, const char *str, size_t slen);
/* With the call stack `stack` (LIBPROF_STACKS, captured by the hook): BLAS and oneDNN calls. */
LP_HIDDEN void lpr_call_record_stack(struct lpr_tls *t, uint32_t stack, unsigned call, uint64_t t0, uint64_t t1,
                                     unsigned nargs, const uint64_t *args);
LP_HIDDEN void lpr_call_write_stack(struct lpr_tls *t, uint32_t stack, unsigned call, uint64_t t0, uint64_t t1,
                                    unsigned nargs, const uint64_t *args, const char *str, size_t slen);
LP_HIDDEN extern uint64_t lpr_min_ticks; /* LIBPROF_MIN_NS in clock ticks (0 = record everything) */

/* The word that gives the next record of this thread its call stack. */
static inline uint64_t lpr_word_stack(uint32_t id) { return ((uint64_t)LP_EV_STACK << LP_TS_BITS) | id; }

/* The common case of lpr_call_record, inlined into the hooks: a timed call with arguments and no
 * string. Nothing here touches errno (lpr_reserve's slow path keeps it), so it is not saved. */
static inline void lpr_call_record_args(struct lpr_tls *t, unsigned fam, unsigned call, uint64_t t0, uint64_t t1,
                                        unsigned nargs, const uint64_t *args) {
    uint32_t g = lpr_gate;
    if (LP_UNLIKELY(t->guard || !(g & (1u << fam)) || lpr_min_ticks || t->late)) {
        lpr_call_record(t, call, t0, t1, nargs, args, NULL, 0);
        return;
    }
    t->guard = 1;
    uint32_t py = LP_UNLIKELY(g & LP_GATE_PY) ? t->py_stack : 0; /* the Python line, read as the call began */
    unsigned sw = py != 0;
    uint64_t *r = lpr_reserve(t, 3 + nargs + sw);
    if (LP_LIKELY(r != NULL)) {
        if (sw) {
            *r++ = lpr_word_stack(py);
            t->py_stack = 0;
        }
        r[0] = lpr_word0_timed(LP_EV_CALL, t0);
        r[1] = lpr_word1(t0, t1);
        r[2] = lp_call_header(call, nargs, 0);
        for (unsigned i = 0; i < nargs; i++) r[3 + i] = args[i];
        lpr_commit(t, r + 3 + nargs);
    }
    t->guard = 0;
}
LP_HIDDEN void lpr_call_init(uint64_t min_ns);
/* Tally of calls under LIBPROF_MIN_NS, kept in the thread's registry node (tbuf.c). */
LP_HIDDEN void lpr_tbuf_count_short(struct lpr_tls *t, unsigned call, uint64_t ticks);

/* Find the next definition of `name` after libprof: dlsym(RTLD_NEXT), then every loaded object
 * in load order (a library dlopen'ed RTLD_LOCAL, such as the BLAS numpy brings, is not in the
 * global scope). NULL when nothing loaded defines it. */
LP_HIDDEN void *lpr_resolve(const char *name);
/* lpr_resolve once into *slot; an absent function stays NULL and is looked up again later
 * (BLAS may be loaded after the first call that needed it). */
static inline void *lpr_next(void **slot, const char *name) {
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (LP_UNLIKELY(!f)) {
        f = lpr_resolve(name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* ---- "stacks.c": allocation call stacks (LIBPROF_STACKS) ---------------------------------- */

LP_HIDDEN extern unsigned lpr_stack_depth; /* 0 = no stacks */
/* LIBPROF_ALLOC_SAMPLE: does an allocation of `size` bytes get its call stack? Points of a
 * Poisson process over the thread's allocated bytes (lib/poisson.h): a subtraction and a test,
 * a draw when a point falls in the block. */
LP_HIDDEN extern uint64_t lpr_alloc_sample; /* its mean gap in bytes; 0: every allocation */
LP_HIDDEN int lpr_alloc_sample_point(struct lpr_tls *t, uint64_t size);
static inline int lpr_alloc_sampled(struct lpr_tls *t, uint64_t size) {
    if (LP_LIKELY(!lpr_alloc_sample)) return 1;
    if (LP_LIKELY(t->sample_left > size)) {
        t->sample_left -= size;
        return 0;
    }
    return lpr_alloc_sample_point(t, size);
}
LP_HIDDEN int lpr_stacks_init(unsigned depth);
/* Under LIBPROF_ALLOC_SAMPLE on the lean path, only the sampled allocations are recorded (and
 * the frees of recorded blocks, which blocks.c remembers); the rest are counted (alloc.c). */
LP_HIDDEN extern int lpr_usable_glibc; /* the next allocator is glibc's: its chunk header is read */
LP_HIDDEN void lpr_tally_init(void);
LP_HIDDEN int lpr_blocks_add(const void *p); /* 0, or -1 when no memory is left for the set */
/* 1 when p was recorded (and is forgotten now): one load for nearly every block (blocks.c) */
#define LP_BLOCKS_HINTS 4096
LP_HIDDEN extern uint16_t lpr_blocks_hints[LP_BLOCKS_HINTS];
/* (blocks are 16-byte aligned; page-aligned mapped ones still spread, through the second term) */
static inline uint64_t lpr_blocks_hash(uintptr_t p) { return (p >> 4) ^ (p >> 16); }
LP_HIDDEN int lpr_blocks_take_slow(const void *p);
static inline int lpr_blocks_take(const void *p) {
    const uint16_t *h = &lpr_blocks_hints[lpr_blocks_hash((uintptr_t)p) & (LP_BLOCKS_HINTS - 1)];
    return LP_UNLIKELY(__atomic_load_n(h, __ATOMIC_ACQUIRE)) && lpr_blocks_take_slow(p);
}
LP_HIDDEN void lpr_blocks_after_fork_child(void);
LP_HIDDEN uint64_t lpr_blocks_slots(void);         /* the table's size (its tests) */
LP_HIDDEN void lpr_tally_write(struct lpr_tls *t); /* the thread's counts as a TALLY record, if any */
/* A TALLY's payload (its mask, then the words it names) from counts: its number of words. */
LP_HIDDEN unsigned lpr_tally_pack(const struct lpr_tally *y, uint64_t out[1 + LP_TALLY_WORDS]);
LP_HIDDEN int lpr_stacks_for_samples(void);
LP_HIDDEN int lpr_in_libprof(uintptr_t pc); /* pc lies in libprof's or its libunwind's code */
LP_HIDDEN uint32_t lpr_stack_sample(const void *uc, int walk, unsigned depth, uint64_t *flags);
LP_HIDDEN extern int (*lpr_unw_backtrace)(void **, int);
LP_HIDDEN uint32_t lpr_stack_intern(void **buf, int got);
/* The calling thread's stack as an id (0: unknown): its native frames through the thread's
 * cache of call chains (called from the hook itself: the hook's call site keys the cache), then
 * its Python frames whatever the native depth (stacks.c). Called by a hook with the guard held. */
LP_HIDDEN uint32_t lpr_stack_native(void);
LP_HIDDEN uint32_t lpr_stack_python(uint32_t native);
#define LP_STACK_CAPTURE(sid) ((sid) = lpr_stack_python(lpr_stack_native()))
struct lpr_stack_cache;
struct lpr_thread;
LP_HIDDEN size_t lpr_stack_cache_size(void);
/* The stack cache of a thread's registry node, made on first use (NULL: no memory). */
LP_HIDDEN struct lpr_stack_cache *lpr_tbuf_stack_cache(struct lpr_thread *node);
LP_HIDDEN void lpr_stacks_write(void);
LP_HIDDEN int lpr_stacks_table(void);
LP_HIDDEN void lpr_modules_write(void);
LP_HIDDEN void lpr_stacks_after_fork_child(void);
LP_HIDDEN uint64_t lpr_stacks_unique(void);
LP_HIDDEN uint64_t lpr_stacks_dropped(void);
LP_HIDDEN int lpr_stacks_in_unwinder(const void *pc); /* pc lies in the libunwind libprof loaded */

/* ---- "python.c": the CPython interpreter's frames ------------------------------------------- */

LP_HIDDEN void lpr_python_detect(void);
/* hooks/io.c: a pipe made (pipe2's hook is hooks/unwind.c's), recorded as such. */
struct lpr_tls;
LP_HIDDEN void lpr_io_pipe(struct lpr_tls *t, uint64_t t0, const int fds[2], int r);
/* ---- "hooks/torch.c": PyTorch's operators --------------------------------------------------- */
LP_HIDDEN void lpr_torch_detect(void); /* libtorch may have arrived: register the operator callback */
LP_HIDDEN void lpr_torch_main(void);   /* main starts: every object of the program is initialised */
#define lpr_torch_shapes (lpr_cfg.torch_shapes)
/* core/real.c: a handle on an object already loaded (the C library's dlopen, RTLD_NOLOAD), released
 * with lpr_dl_release: libprof's own lookups, not the program's dlopen. */
LP_HIDDEN void *lpr_dl_handle(const char *path);
LP_HIDDEN void lpr_dl_release(void *h);
LP_HIDDEN int lpr_py_frames(uint64_t *out, uint8_t *end, int max);
LP_HIDDEN int lpr_py_part(uint64_t *buf, uint32_t *id, int sampler);
LP_HIDDEN int lpr_py_thread_running(void);
LP_HIDDEN int lpr_py_is_eval(uintptr_t ret);
LP_HIDDEN int lpr_py_is_interp(uintptr_t ret);
LP_HIDDEN uint32_t lpr_py_location(void);
LP_HIDDEN void lpr_pycode_write(void);
LP_HIDDEN void lpr_python_after_fork_child(void);
LP_HIDDEN uint64_t lpr_py_codes(void);
LP_HIDDEN int lpr_py_codes_full(void);
LP_HIDDEN int lpr_py_minor(void);
LP_HIDDEN void *lpr_py_sym(const char *name);
LP_HIDDEN void *lpr_py_profile_of(void *tstate);
LP_HIDDEN extern void (*lpr_py_new_thread)(void); /* set by hooks/python.c; called after pthread_create */
#define LPR_PY_MAX_CODES (1u << 20)
LP_HIDDEN uint32_t lpr_py_top_code(void);
LP_HIDDEN uint32_t lpr_py_frame_code(const void *frame);
LP_HIDDEN const char *lpr_py_code_name(uint32_t id, size_t *len);
LP_HIDDEN const char *lpr_py_code_file(uint32_t id, size_t *len);
LP_HIDDEN uintptr_t lpr_py_frame_arg(const void *frame, unsigned i);
LP_HIDDEN size_t lpr_py_str(uintptr_t o, char *out, size_t cap);
LP_HIDDEN size_t lpr_py_items(uintptr_t o, const uintptr_t **items);
LP_HIDDEN const char *lpr_py_type_name(uintptr_t o);
LP_HIDDEN void lpr_python_known_loaded(const char *path); /* hooks/python.c: after each dlopen */
LP_HIDDEN extern void (*lpr_py_ready)(void);              /* set by hooks/python.c */
LP_HIDDEN void lpr_py_check_ready(void);
LP_HIDDEN void lpr_py_ready_retry(void);
/* The per-thread state of a hook family that needs more than the TLS holds (one per thread,
 * `size` bytes, zeroed, made on first use; NULL: no memory). */
LP_HIDDEN void *lpr_tbuf_family_state(struct lpr_thread *node, size_t size);
LP_HIDDEN void *lpr_tbuf_py_cache(struct lpr_thread *node, size_t size); /* python.c's, likewise */
/* The same two through the thread's own state, without a call once they exist. */
static inline struct lpr_stack_cache *lpr_stack_cache_of(struct lpr_tls *t) {
    if (LP_LIKELY(t->scache != NULL)) return (struct lpr_stack_cache *)t->scache;
    return t->thr ? lpr_tbuf_stack_cache(t->thr) : NULL;
}
static inline void *lpr_py_cache_of(struct lpr_tls *t, size_t size) {
    if (LP_LIKELY(t->pycache != NULL)) return t->pycache;
    return t->thr ? lpr_tbuf_py_cache(t->thr, size) : NULL;
}
LP_HIDDEN uint32_t lpr_stack_intern_words(const uint64_t *f, unsigned n);

/* ---- "sample.c": CPU samples (LIBPROF_SAMPLE_HZ) ---------------------------------------------- */

LP_HIDDEN void lpr_sample_init(void);
LP_HIDDEN void lpr_sample_finish(void);
LP_HIDDEN void lpr_sample_resume(void); /* after a failed exec: as before lpr_sample_finish */
/* The program's sigaction on SIGTRAP while the sampler holds it: kept (act) and read back (old). */
struct sigaction;
LP_HIDDEN void lpr_sample_program_action(const struct sigaction *act, struct sigaction *old);
LP_HIDDEN void lpr_sample_after_fork_child(void);
LP_HIDDEN int lpr_sample_signal(void); /* the signal the sampler uses while it samples, else 0 */
LP_HIDDEN int
lpr_sample_taken(void); /* this process took CPU samples (a run too short for one has no CPU flame graph) */
LP_HIDDEN int lpr_sample_trap_held(void); /* libprof's handler is on SIGTRAP (the program's is kept aside) */
/* The sampler's stack walk (walk.c): the return addresses of the callers of the context `uc`
 * interrupted on thread `t`, innermost first, into out (at most max); their number, or -1 when
 * this thread's stack cannot be walked; *whole: the walk reached the outermost frame.
 * Async-signal-safe. */
LP_HIDDEN int lpr_walk_init(void);
/* Memory a signal handler writes must not fault there: lpr_resident makes [base + from, base +
 * to) resident now (MADV_POPULATE_WRITE; best effort); lpr_ahead keeps a table that fills from
 * its start resident LPR_AHEAD bytes ahead of `used` (when `on`), a chunk at a time. */
#define LPR_AHEAD (256 * 1024)
struct lpr_ahead {
    size_t done; /* resident up to here */
    int on, busy;
};
LP_HIDDEN void lpr_resident(void *base, size_t from, size_t to);
LP_HIDDEN void lpr_ahead_slow(struct lpr_ahead *a, void *base, size_t used, size_t cap);
static inline void lpr_ahead(struct lpr_ahead *a, void *base, size_t used, size_t cap) {
    if (LP_UNLIKELY(a->on && used + LPR_AHEAD / 2 > a->done)) lpr_ahead_slow(a, base, used, cap);
}
LP_HIDDEN int lpr_walk_context(struct lpr_tls *t, const void *uc, uint64_t *out, int max, int *whole);
LP_HIDDEN int lpr_walk_frames(struct lpr_tls *t, const void *uc, uint64_t *out, uint64_t *cfas, uint64_t *slots,
                              int max, int *whole, int *blocked);
/* t's stack mapping holds sp (found in /proc/self/maps, again only a few times a thread): 0, or -1. */
LP_HIDDEN int lpr_stack_bounds(struct lpr_tls *t, uintptr_t sp);
/* A SIGSEGV or SIGBUS reaches libprof's own handler first (hooks/signal.c keeps it up to date): a
 * probed load may then fault, and the handler steps over it (python.c). */
LP_HIDDEN extern int lpr_faults_ours;
/* The fault at `uc` is a probed load's: stepped over (it yields 0, lpr_tls.probe_fault set); 1. */
LP_HIDDEN int lpr_py_fault_fixup(void *uc);
LP_HIDDEN void lpr_walk_forget(void); /* code may have been unloaded (dlclose) */

/* ---- "unhook.c": libprof off for good: hot pass-through hooks unbound from the program ---- */

LP_HIDDEN void lpr_unhook(uint32_t families); /* keeps the hooks of `families` */
/* A hook that may be unbound when its family never records (hooks/hook.h, LP_UNHOOKABLE). */
struct lpr_unhookable {
    unsigned family;
    const char *name;
    void *hook;       /* the hook's own address (a hidden alias: no relocation against the export) */
    int (*may)(void); /* NULL, or asked at start-up: may it be unbound now? */
};

/* ---- "control.c": pause, resume, reset ------------------------------------------------------ */

LP_HIDDEN uint32_t lpr_control_init(const struct lpr_config *cfg);
LP_HIDDEN void lpr_control_on_signal(int sig); /* LIBPROF_SIGNAL's handler: pause or resume */
LP_HIDDEN void lpr_control_start_timers(void);
LP_HIDDEN void lpr_control_pause(unsigned reason, int from_signal);
LP_HIDDEN void lpr_control_resume(unsigned reason, int from_signal);
LP_HIDDEN void lpr_control_reset(unsigned reason);
LP_HIDDEN void lpr_control_after_fork_child(void);
LP_HIDDEN uint32_t lpr_control_child_gate(void);
LP_HIDDEN uint64_t lpr_control_markers_lost(void);

/* ---- "names.c": interned annotation names -------------------------------------------------- */

LP_HIDDEN uint32_t lpr_name_id(const char *name);
/* ---- "release.c": which release of a runtime is loaded (tables of layouts by release) -------- */
/* __version__ of a Python package's version.py ("" when unreadable). */
LP_HIDDEN void lpr_release_of_package(const char *version_py, char *v, size_t cap);
/* The row of `rows` (n of `stride` bytes, each starting with its "major.minor") release `v` is
 * of ("2.11.0+cu130" is of "2.11"), or -1. */
LP_HIDDEN long lpr_release_row(const char *v, const void *rows, size_t n, size_t stride);
/* The releases of the table, "1.13, 2.11", for a message. */
LP_HIDDEN void lpr_release_list(const void *rows, size_t n, size_t stride, char *out, size_t cap);
LP_HIDDEN void lpr_names_after_fork_child(void);

/* ---- "hooks/annot.c": the exported ABI that include/libprof.h looks up with dlsym ---------- */

LP_EXPORT void libprof_range_push(const char *name);
LP_EXPORT void libprof_range_pop(void);
LP_EXPORT void libprof_mark(const char *name);
LP_EXPORT void libprof_counter(const char *name, double value);
LP_EXPORT void libprof_thread_name(const char *name);
LP_EXPORT void libprof_start(void);
LP_EXPORT void libprof_stop(void);
LP_EXPORT void libprof_reset(void);

/* ---- "hooks/exit.c" --------------------------------------------------------------------------- */

LP_EXPORT void exit(int status) __attribute__((noreturn));
LP_EXPORT void _exit(int status) __attribute__((noreturn));
LP_EXPORT void _Exit(int status) __attribute__((noreturn));
LP_EXPORT int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(void),
                                void (*fini)(void), void (*rtld_fini)(void), void *stack_end);

/* ---- hook families register their set-up with the core ----------------------------------
 * A family that must do something when libprof starts says so with LP_FAMILY_SETUP
 * (preload/hooks/hook.h): `resolve` runs in the part of the start-up that may look symbols up,
 * in every process, before recording's set-up ends; `start`, after it, in a process that
 * records; `finish` when the process ends, before the buffers are written for the last time
 * (records a family still holds: PyTorch's operators started and still open). The core finds them in the linker section lpr_setup (Darshan's modules register
 * with its core the same way): it names no hook file, and a new family needs no line here. */
struct lpr_setup {
    void (*resolve)(void);
    void (*start)(void);
    void (*finish)(void);
};

/* ---- "spawn.c": libprof-report in a process of its own, unseen by the program --------------- */

LP_HIDDEN void lpr_spawn_init(const char *self_path);
LP_HIDDEN int lpr_spawn_available(void);
/* The CPU sampler's holder: libprof-report --hold-events keeps the descriptors `fds` (n of them)
 * open, with `page_fd` a memfd page whose first word asks it to go (sample.c); its pid, or -1. */
#define LPR_HOLD_MAX 257
LP_HIDDEN int lpr_spawn_holder(const int *fds, int n, int page_fd);
/* Run libprof-report with `args` (without argv[0]), holding an exclusive lock on the spool `lock`
 * for its life. wait_ms < 0: detached, 0 once started; else its exit status, LPR_SPAWN_LATE when
 * still running after wait_ms, LPR_SPAWN_BUSY when another converter holds the spool, -1 when it
 * could not start (or the spool is gone). `to_stderr`: its standard output goes to our standard
 * error (else both go to /dev/null: name a --log file in `args`). */
#define LPR_SPAWN_LATE (-2)
#define LPR_SPAWN_BUSY (-3)
LP_HIDDEN int lpr_spawn_report(const char *const *args, const char *lock, int wait_ms, int to_stderr);

/* ---- "life.c": the life cycle of the recorder in one process ------------------------------- */

LP_HIDDEN extern int lpr_alloc_timed; /* copy of lpr_cfg.alloc_timing for the hot path */
/* Allocation records are plain: no stacks, untimed, TSC timestamps (hooks/alloc.c's lean path,
 * LP_GATE_LEAN). Set once, before LP_GATE_PENDING is cleared. */
LP_HIDDEN extern int lpr_exit_status;
LP_HIDDEN void lpr_finish(int status);
/* The end of the run where this process can no longer allocate (a fatal signal `sig`, or _exit
 * with `status` from inside libprof): the conversion runs in a process of its own. */
LP_HIDDEN void lpr_finish_signal(int sig, int status);
LP_HIDDEN int lpr_recording(void); /* recording, and this process owns the spool */
LP_HIDDEN void lpr_stop_for_good(void);
LP_HIDDEN int lpr_convert_spool(const char *chrome, const char *csv);
LP_HIDDEN void lpr_write_end(int status, int sig);

/* ---- "lineage.c": this process among the others of its run -------------------------------- */

LP_HIDDEN int lpr_lineage_names(int forked);
LP_HIDDEN void lpr_lineage_pid_inserted(void);
LP_HIDDEN int lpr_lineage_descendant(void); /* started by a traced process (its outputs' names inherited) */
LP_HIDDEN void lpr_lineage_started(uint64_t real_ns);
LP_HIDDEN void lpr_lineage_init(void);
LP_HIDDEN void lpr_lineage_forget_children(void);
LP_HIDDEN void lpr_lineage_sweep(void);
LP_HIDDEN void lpr_make_absolute(char *path, size_t len);
LP_HIDDEN void lpr_exec_prepare(void);
LP_HIDDEN void lpr_exec_failed(void);
LP_HIDDEN void lpr_exec_check_static(const char *file, int search);
LP_HIDDEN int lpr_exec_env(char *const envp[], char **out, size_t outlen, char *buf, size_t buflen);
LP_HIDDEN void lpr_uid_change(unsigned new_euid);     /* before setuid & co. take effect */
LP_HIDDEN void lpr_child_reaped(int pid, int status); /* the wait family reaped a child */

#endif
