/* life.c: the life cycle of the recorder in one process — start-up at the first hooked call (in
 * two parts, see lpr_init_slow), a forked child's fresh start, and the flush and conversion at
 * the end (exit, _exit, a fatal signal). How this process relates to others — the names it
 * takes, what it leaves across an exec, what it does for a killed child — is lineage.c's.
 *
 * Start-up is lazy (like glibc's memusage): the first hooked call of the process reads the
 * environment, so allocations made by other libraries' constructors are not missed. Until then
 * the gate word holds LP_GATE_UNINIT and every hook passes straight through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "life.h"
#include "blocks.h"
#include "call.h"
#include "clock.h"
#include "config.h"
#include "control.h"
#include "lineage.h"
#include "log.h"
#include "names.h"
#include "own.h"
#include "python.h"
#include "real.h"
#include "sample.h"
#include "spawn.h"
#include "stacks.h"
#include "state.h"
#include "tbuf.h"
#include "unhook.h"
#include "sys.h"
#include "lib/convert.h"

int lpr_alloc_timed;

static int init_state;  /* 0 = not started, 1 = running, 2 = done */
static int heavy_state; /* the pending set-up (LP_GATE_PENDING): 0 = not run, 1 = running, 2 = done */
static int fini_done;
static char spool_path[PATH_MAX + 32];

extern char **environ;

static const char *env_get(const char *name) { return getenv(name); }

/* mkdir -p of the directory part of `path`, with the files' mode and its x bits: 0700 for 0600
 * (the umask may take more away). */
static int make_parent_dirs(const char *path) {
    unsigned fm = (unsigned)lpr_cfg.file_mode, dm = fm | ((fm & 0444) >> 2);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp) return 0;
    *slash = '\0';
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = lpr_sys_mkdir(tmp, (int)dm);
        if (rc != 0 && rc != -EEXIST) {
            errno = -rc;
            return -1;
        }
        *p = '/';
    }
    int rc = lpr_sys_mkdir(tmp, (int)dm);
    if (rc != 0 && rc != -EEXIST) {
        errno = -rc;
        return -1;
    }
    return 0;
}

/* Read /proc/self/cmdline into `buf` (arguments NUL-separated). Returns its length. */
static size_t read_cmdline(char *buf, size_t len) {
    int fd = lpr_sys_open("/proc/self/cmdline", O_RDONLY, 0);
    if (fd < 0) return 0;
    size_t n = 0;
    while (n < len) {
        long r = lpr_sys_read(fd, buf + n, len - n);
        if (r == -EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    lpr_sys_close(fd);
    return n;
}

static void write_string(uint32_t key, const char *s, size_t n) {
    lpr_spool_write(LP_CHUNK_STRING, 0, &key, sizeof key, s, n);
}

static int start_spool(int forked);
static void prepare_spawned(void);
static void follow_arm(void);
static void snapshot_names(void);

/* Is this process recording and the owner of its spool (not a vfork child, not finished)? */
int lpr_recording(void) {
    return __atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2 && lpr_spool_on && !fini_done &&
           lpr_sys_getpid() == lpr_pid;
}

/* Recording ends here for good (a trace that could not be kept across an exec). */
void lpr_stop_for_good(void) {
    fini_done = 1;
    lpr_gate_set(0);
}

/* In a forked child (glibc runs this before fork returns there): keep tracing, into a file of
 * the child's own, with empty buffers. Only system calls and string formatting happen here, so
 * it is safe in the child of a multi-threaded parent. */
static void atfork_child(void) {
    uint8_t g = lpr_tls.guard;
    lpr_tls.guard = 1;
    lpr_tbuf_after_fork_child();
    lpr_blocks_after_fork_child();
    lpr_control_after_fork_child();
    lpr_python_after_fork_child();
    lpr_stacks_after_fork_child();
    lpr_pid = lpr_sys_getpid();
    lpr_pattern.pid = lpr_pid;
    lpr_clock_init(lpr_clock_kind);
    fini_done = 0;
    if (start_spool(1) == 0) {
        lpr_sample_after_fork_child();
        lpr_names_after_fork_child(); /* modules: at the end (the loader's lock may be held here) */
        lpr_gate_set(lpr_control_child_gate());
    } else {
        lpr_gate_set(0);
        fini_done = 1;
    }
    lpr_tls.guard = g;
}

/* Create the spool with its file header (`forked`: a forked child, whose names are already its
 * own). Returns 0 or -1 (warning already given). */
static int start_spool(int forked) {
    char chosen[PATH_MAX + 32];
    int temp = 0;
    if (lpr_lineage_names(forked) != 0) return -1; /* which names this process takes */
    if (lpr_cfg.raw_output) {
        snprintf(spool_path, sizeof spool_path, "%s", lpr_cfg.output);
    } else if (lpr_cfg.output[0]) {
        snprintf(spool_path, sizeof spool_path, "%s.lpt", lpr_cfg.output);
    } else if (lpr_cfg.csv[0]) {
        snprintf(spool_path, sizeof spool_path, "%s.lpt", lpr_cfg.csv);
    } else { /* summary only: a private name in TMPDIR */
        const char *dir = getenv("TMPDIR");
        snprintf(spool_path, sizeof spool_path, "%s/libprof-%ld-%llx.lpt", dir && *dir ? dir : "/tmp", lpr_pid,
                 (unsigned long long)(lpr_ticks() & 0xffffffffffull));
        lpr_make_absolute(spool_path, sizeof spool_path);
        temp = 1;
    }
    /* A descendant that may not write where its traced parent does (it runs as another user:
     * test_subprocess's children, a server dropping root) stays untraced without a word: its
     * stderr may be what its parent reads, and the change of user is in the parent's trace.
     * Anyone else is told. */
    void (*tell)(const char *, ...) = lpr_lineage_descendant() ? lpr_warn : lpr_say;
    if (lpr_cfg.output[0] && make_parent_dirs(lpr_cfg.output) != 0) {
        (errno == EACCES || errno == EPERM ? tell : lpr_say)("cannot create the directory for %s (%s); not profiling",
                                                             lpr_cfg.output, strerror(errno));
        return -1;
    }
    if (lpr_cfg.csv[0] && make_parent_dirs(lpr_cfg.csv) != 0) {
        (errno == EACCES || errno == EPERM ? tell : lpr_say)(
            "cannot create the directory for %s (%s); not writing the CSV", lpr_cfg.csv, strerror(errno));
        lpr_cfg.csv[0] = '\0';
    }

    struct lp_file_header h;
    lp_header_init(&h, (uint32_t)lpr_clock_kind);
    h.pid = (uint32_t)lpr_pid;
    h.ppid = (uint32_t)getppid();
    h.origin_ticks = lpr_origin_ticks;
    h.origin_mono_ns = lpr_origin_mono_ns;
    h.origin_real_ns = lpr_real_ns();
    h.origin_boot_ns = lpr_origin_boot_ns();
    h.families = lpr_cfg.families;
    h.buffer_bytes = lpr_cfg.buffer_bytes;
    h.alloc_min = lpr_cfg.alloc_min;
    h.alloc_stacks = (uint32_t)lpr_cfg.stacks;
    h.alloc_sample = lpr_cfg.stacks ? lpr_cfg.alloc_sample : 0;
    /* what the spool calls that is not its own: the stacks before the records naming them, the
     * follower's start (tbuf.c sits below both) */
    __atomic_store_n(&lpr_spool_first, lpr_stacks_write, __ATOMIC_RELEASE);
    __atomic_store_n(&lpr_follow_due, lpr_follow_start, __ATOMIC_RELEASE);
    /* The header is written at offset 0 as a chunk-less prefix; chunks follow it. */
    if (lpr_spool_create(spool_path, !temp, &h, chosen, sizeof chosen) != 0) {
        (errno == EACCES || errno == EPERM ? tell : lpr_say)("cannot create %s (%s); not profiling", spool_path,
                                                             strerror(errno));
        return -1;
    }
    if (strcmp(chosen, spool_path) != 0) {
        /* Another live process (our parent, most likely) owns the name: take a per-pid name. */
        snprintf(spool_path, sizeof spool_path, "%s", chosen);
        lpr_lineage_pid_inserted();
    }
    lpr_lineage_started(h.origin_real_ns);
    write_string(LP_STR_HOSTNAME, lpr_host, strlen(lpr_host));
    if (lpr_job.launcher) { /* "launcher\0rank\0size\0local rank" */
        char job[96];
        int n = snprintf(job, sizeof job, "%s%c%s%c%s%c%s", lpr_job.launcher, 0, lpr_job.rank, 0, lpr_job.size, 0,
                         lpr_job.local_rank);
        if (n > 0 && (size_t)n < sizeof job) write_string(LP_STR_JOB, job, (size_t)n);
    }
    write_string(LP_STR_EXE, lpr_exe_path, strlen(lpr_exe_path));
    char cmd[8192];
    size_t n = read_cmdline(cmd, sizeof cmd);
    write_string(LP_STR_CMDLINE, cmd, n);
    lpr_notes_open(lpr_spool_write); /* notes go into the trace, those made before it first */
    prepare_spawned();
    follow_arm();
    snapshot_names();
    return 0;
}

static void init_heavy(void);

/* Start-up, in two parts.
 * The first hooked call of the process (or the constructor, whichever comes first) reads the
 * environment, picks the clock and creates the spool: system calls and string formatting only,
 * so it is safe wherever a hook runs, even inside a program's own allocator that is setting
 * itself up. Recording starts there.
 * The rest may allocate or look symbols up (dlsym, dlopen of libunwind, dl_iterate_phdr,
 * pthread_atfork, sigaction): it runs from libprof's constructor or from an allocation hook,
 * whichever comes first (LP_GATE_PENDING) — never from the mmap family or any other hook an
 * allocator may call on its way up (chromium's built-in allocator hung there, issue 12). */
void lpr_init_slow(int safe) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 0 && environ != NULL) {
        /* environ NULL: too early (inside the dynamic loader): try again next call */
        int expect = 0;
        if (__atomic_compare_exchange_n(&init_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            int saved = errno;
            uint8_t g = lpr_tls.guard;
            lpr_tls.guard = 1;
            uint32_t gate = 0;
            lpr_pid = lpr_sys_getpid();
            if (getauxval(AT_SECURE)) goto done; /* setuid/setgid: never trace, never write files */

            long n = lpr_sys_readlink("/proc/self/exe", lpr_exe_path, sizeof lpr_exe_path - 1);
            lpr_exe_path[n > 0 ? n : 0] = '\0';
            if (gethostname(lpr_host, sizeof lpr_host) != 0) snprintf(lpr_host, sizeof lpr_host, "localhost");
            lpr_host[sizeof lpr_host - 1] = '\0';
            const char *base = strrchr(lpr_exe_path, '/');
            lpr_job_from_env(&lpr_job, env_get);
            static char cwd[PATH_MAX];
            if (LP_SYS(SYS_getcwd, cwd, sizeof cwd, 0) <= 0) cwd[0] = '\0';
            struct lpr_pattern_ctx ctx = lpr_pattern = (struct lpr_pattern_ctx){
                .pid = lpr_pid,
                .start_time = (long)(lpr_real_ns() / 1000000000u),
                .host = lpr_host,
                .exe = base ? base + 1 : (lpr_exe_path[0] ? lpr_exe_path : "unknown"),
                .rank = lpr_job.rank[0] ? lpr_job.rank : NULL,
                .cwd = cwd,
            };
            lpr_config_load(&lpr_cfg, env_get, &ctx);
            if (!lpr_cfg.enabled) goto done;

            lpr_alloc_timed = lpr_cfg.alloc_timing;
            lpr_clock_init(lpr_cfg.clock);
            lpr_call_init(lpr_cfg.min_ns);
            lpr_tbuf_init(lpr_cfg.buffer_bytes);
            if (start_spool(0) != 0) goto done;
            gate = lpr_control_init(&lpr_cfg);
            lpr_info("recording %s%s%s to %s (clock %s, %u KiB chunks)", lpr_cfg.output[0] ? lpr_cfg.output : "",
                     lpr_cfg.csv[0] ? " and CSV " : "", lpr_cfg.csv, spool_path,
                     lpr_clock_kind == LP_CLOCK_TSC ? "tsc" : "monotonic", lpr_cfg.buffer_bytes / 1024);
        done:
            __atomic_fetch_or(&lpr_gate, LP_GATE_PENDING, __ATOMIC_RELAXED);
            lpr_gate_set(gate); /* clears LP_GATE_UNINIT: recording starts */
            __atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
            lpr_tls.guard = g;
            errno = saved;
        }
    }
    if (safe && __atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2) init_heavy();
}

/* The families' set-up (hook.h, LP_FAMILY_SETUP), found in the section the linker gathers. */
extern const struct lpr_setup __start_lpr_setup[] __attribute__((weak, visibility("hidden")));
extern const struct lpr_setup __stop_lpr_setup[] __attribute__((weak, visibility("hidden")));

enum { SETUP_RESOLVE, SETUP_START, SETUP_FINISH };
static void setup_each(int what) {
    for (const struct lpr_setup *s = __start_lpr_setup; s && s < __stop_lpr_setup; s++) {
        void (*fn)(void) = what == SETUP_START ? s->start : what == SETUP_FINISH ? s->finish : s->resolve;
        if (fn) fn();
    }
}

/* The set-up that may allocate or look symbols up; once, from a safe place (see lpr_init_slow). */
static void init_heavy(void) {
    int expect = 0;
    if (!__atomic_compare_exchange_n(&heavy_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    int saved = errno;
    uint8_t g = lpr_tls.guard;
    lpr_tls.guard = 1;
    lpr_real_resolve();
    setup_each(SETUP_RESOLVE); /* every family's real functions */
    int on = lpr_spool_on;
    if (on) {
        lpr_lineage_init(); /* what an exec'd program or a converter needs: libprof's own path */
        if (lpr_cfg.stacks && lpr_stacks_init(lpr_cfg.stacks) == 0) lpr_modules_write();
        lpr_python_detect(); /* an interpreter linked in (python3, libpython3.X.so) */
        /* CPython serves objects of up to 512 bytes from its own arenas: asked, every object
         * allocation goes to malloc instead (before the interpreter reads its environment) */
        if (lpr_cfg.python_malloc) setenv("PYTHONMALLOC", "malloc", 0);
        pthread_atfork(NULL, NULL, atfork_child);
        lpr_sample_init();                                                /* LIBPROF_SAMPLE_HZ */
        if (lpr_sample_signal() && !lpr_stack_depth) lpr_modules_write(); /* samples' stacks are symbolised */
        /* (sampled stacks keep the lean path: it counts down to the next sampled byte) */
        lpr_alloc_lean = (!lpr_stack_depth || lpr_alloc_sample) && !lpr_alloc_timed && lpr_clock_kind == LP_CLOCK_TSC;
        lpr_alloc_tally = lpr_alloc_lean && lpr_alloc_sample; /* then the rest are counted (blocks.c) */
        if (lpr_alloc_tally) lpr_tally_init();
        if (lpr_alloc_lean && (lpr_gate & (1u << LP_FAM_ALLOC)))
            __atomic_fetch_or(&lpr_gate, lpr_alloc_tally ? LP_GATE_TALLY : LP_GATE_LEAN, __ATOMIC_RELAXED);
    }
    /* hooks that can never record leave the program's way: all of them when libprof is off for
     * good, else those of the families LIBPROF_EVENTS left out */
    lpr_unhook(on ? lpr_cfg.families : 0);
    __atomic_fetch_and(&lpr_gate, ~LP_GATE_PENDING, __ATOMIC_RELEASE);
    __atomic_store_n(&heavy_state, 2, __ATOMIC_RELEASE);
    lpr_tls.guard = g;
    if (on) setup_each(SETUP_START); /* the families' own start: signal handlers, inherited descriptors */
    errno = saved;
}

__attribute__((constructor)) static void lpr_constructor(void) {
    lpr_init_slow(1);
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2) {
        lpr_control_start_timers();
        if (lpr_cfg.enabled && !lpr_cfg.children) {
            uint8_t g = lpr_tls.guard;
            lpr_tls.guard = 1; /* setenv's allocations are libprof's, not the program's */
            lpr_lineage_forget_children();
            lpr_tls.guard = g;
        }
    }
}

/* LIBPROF_FLAMEGRAPH's files beside `base` (lib/outputs.h: the rows with a file of their own,
 * NAME.alloc.folded ...) into names[k], those the run can make (its stacks, its samples) only when
 * `possible`, else every one; "" for the rest. */
static void flame_names(char (*names)[PATH_MAX + 32], const char *base, int possible, int stacks, int samples) {
    for (int k = 0; k < LP_OUT_COUNT; k++) {
        names[k][0] = '\0';
        if (lp_outputs[k].flame && (!possible || lp_output_possible(lp_outputs[k].needs, stacks, samples)))
            lp_output_beside(names[k], sizeof names[k], base, lp_outputs[k].flame);
    }
}

/* Write the spool's conversions (Chrome JSON, CSV, summary, flame graphs). Returns 0 or -1. */
int lpr_convert_spool(const char *chrome, const char *csv) {
    struct lp_reader r;
    char err[256];
    static char flame[LP_OUT_COUNT][PATH_MAX + 32];
    const char *base = chrome ? chrome : lpr_cfg.raw_output ? lpr_cfg.output : csv ? csv : spool_path;
    flame_names(flame, base, 1, lpr_stack_depth != 0, lpr_sample_taken());
    if (lp_reader_open(&r, spool_path, err, sizeof err) != 0) {
        lpr_say("cannot read back %s: %s", spool_path, err);
        return -1;
    }
    /* the summary asked for: on stderr, or in the log the user named */
    int sum_fd = !lpr_cfg.summary  ? -1
                 : lpr_log_path[0] ? lpr_sys_open(lpr_log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)
                                   : STDERR_FILENO;
    int summary_to = sum_fd >= 0 ? sum_fd : (lpr_cfg.summary ? STDERR_FILENO : -1);
    struct lp_convert_opts o = {.fd = {[LP_OUT_SUMMARY] = summary_to},
                                .fds = summary_to >= 0 ? 1u << LP_OUT_SUMMARY : 0,
                                .alloc_min = lpr_cfg.alloc_min,
                                .trace_label = lpr_cfg.output[0] ? lpr_cfg.output : NULL,
                                .site_tracks = lpr_cfg.flamegraph && lpr_stack_depth, /* one more pass */
                                .file_mode = (unsigned)lpr_cfg.file_mode,
                                .py_user_lines = lpr_cfg.py_user_lines,
                                .timeline_ns = lpr_cfg.timeline_ns,
                                .timeline_min_ns = lpr_cfg.timeline_min_ns};
    for (int k = 0; k < LP_OUT_COUNT; k++)
        o.path[k] = k == lpr_cfg.output_kind            ? chrome
                    : k == LP_OUT_CSV                   ? csv
                    : lpr_cfg.flamegraph && flame[k][0] ? flame[k]
                                                        : NULL;
    int rc = lp_convert(&r, &o, err, sizeof err);
    if (sum_fd > STDERR_FILENO) lpr_sys_close(sum_fd);
    if (rc != 0) lpr_say("%s", err);
    lp_reader_close(&r);
    return rc;
}

static int convert_at_exit(void) {
    return lpr_convert_spool(lpr_cfg.raw_output ? NULL : (lpr_cfg.output[0] ? lpr_cfg.output : NULL),
                             lpr_cfg.csv[0] ? lpr_cfg.csv : NULL);
}

/* The conversion at exit goes to a process of its own where it would weigh on the program's
 * memory — a trace past CONVERT_APART, or one to symbolise (call stacks, CPU samples: the symbol
 * tables of the libraries their frames are in) against libraries past SYMBOLS_APART (a small
 * program's is cheaper here: no second process to start, no trace to read back): its memory is then libprof-report's, not the
 * program's (PyTorch's import grew by 50 MiB at its exit converting its own trace). The program
 * waits for it as for its own conversion; where it cannot start, the conversion is done here. */
#define CONVERT_APART (16u << 20)
#define SYMBOLS_APART \
    (64u << 20) /* the libraries' span past which their symbols weigh (sqlite3 and its
                                   * libraries: 10 MiB; PyTorch's import: 2.8 GiB) */
static int convert_apart(void);

/* The same conversion by libprof-report in a process of its own (spawn.c): after a fatal signal,
 * where this process can no longer allocate safely, and with LIBPROF_CONVERT=background. The
 * names are made at start, since a signal handler can format nothing. */
static char spawn_flame[LP_OUT_COUNT][PATH_MAX + 32];
/* a detached converter's messages go to NAME.log (only when it has any); it is told the mode of
 * the files it writes, since its environment has no LIBPROF* */
static char spawn_log[PATH_MAX + 64];
static char spawn_mode[8], spawn_timeline[48], spawn_timeline_min[24];
static char spawn_packed[PATH_MAX + 8]; /* LIBPROF_KEEP_RAW: the spool, packed (.lpz for .lpt) */

/* The packed name of raw trace `lpt` into dst: its .lpt suffix made .lpz (else .lpz added). */
static void packed_name(char *dst, size_t len, const char *lpt) {
    size_t n = strlen(lpt);
    if (n > 4 && !strcmp(lpt + n - 4, ".lpt")) n -= 4;
    snprintf(dst, len, "%.*s.lpz", (int)n, lpt);
}

/* The spool kept (LIBPROF_KEEP_RAW) becomes its packed trace, spawn_packed (libprof-report --pack
 * in a process of its own: zstd never enters the program), the .lpt removed; where that cannot
 * be done the .lpt stays, said once. Waits up to a minute (packing runs at tens of millions of
 * events a second), then lets the packer finish alone. */
static void pack_kept(void) {
    const char *a[] = {spool_path, "--pack", spawn_packed, "--remove-raw", "--file-mode", spawn_mode, "-q", NULL};
    int rc = lpr_spawn_available() ? lpr_spawn_report(a, spool_path, 60000, 0) : -1;
    if (rc != 0 && rc != LPR_SPAWN_LATE)
        lpr_warn("the raw trace stays unpacked in %s (no libprof-report to pack it)", spool_path);
}

static void prepare_spawned(void) {
    /* as lpr_convert_spool names them: beside the JSON, the raw output, the CSV or the spool */
    const char *base = lpr_cfg.output[0] ? lpr_cfg.output : lpr_cfg.csv[0] ? lpr_cfg.csv : spool_path;
    flame_names(spawn_flame, base, 0, 0, 0);
    snprintf(spawn_log, sizeof spawn_log, "%s.log", base);
    snprintf(spawn_mode, sizeof spawn_mode, "%04o", (unsigned)lpr_cfg.file_mode);
    packed_name(spawn_packed, sizeof spawn_packed, spool_path);
    snprintf(spawn_timeline, sizeof spawn_timeline, "%.9f", (double)lpr_cfg.timeline_ns / 1e9);
    snprintf(spawn_timeline_min, sizeof spawn_timeline_min, "%llu", (unsigned long long)lpr_cfg.timeline_min_ns);
}

/* Does the run ask for anything beyond the raw spool? */
static int wants_conversion(void) {
    return !lpr_cfg.raw_output || lpr_cfg.csv[0] || lpr_cfg.summary || lpr_cfg.flamegraph;
}

/* Start libprof-report on the closed spool; see lpr_spawn_report for `wait_ms` and the result.
 * Async-signal-safe: the arguments are static strings. */
static char follow_pid[24];
static char follower_file[PATH_MAX + 48]; /* SPOOL.follower: the follower's pid, while it converts */
static int follow_started;                /* a follower converts the spool (lpr_follow_start) */

static int convert_spawned(int wait_ms, int follow) {
    const char *a[32];
    int n = 0;
    a[n++] = spool_path;
    if (follow) {
        a[n++] = "--follow";
        a[n++] = follow_pid;
    }
    if (!lpr_cfg.raw_output && lpr_cfg.output[0]) {
        a[n++] = lp_outputs[lpr_cfg.output_kind].option;
        a[n++] = lpr_cfg.output;
    }
    if (lpr_cfg.csv[0]) {
        a[n++] = "--csv";
        a[n++] = lpr_cfg.csv;
    }
    /* (a follower starts before any sample may have been taken) */
    int sampled = lpr_sample_taken() || (follow && lpr_cfg.sample_hz);
    for (int k = 0; k < LP_OUT_COUNT && lpr_cfg.flamegraph; k++)
        if (spawn_flame[k][0] && lp_output_possible(lp_outputs[k].needs, lpr_stack_depth != 0, sampled)) {
            a[n++] = lp_outputs[k].option;
            a[n++] = spawn_flame[k];
        }
    if (lpr_cfg.summary) a[n++] = "--summary"; /* detached: into its log file */
    a[n++] = "--file-mode";
    a[n++] = spawn_mode;
    a[n++] = "--timeline";
    a[n++] = spawn_timeline;
    a[n++] = "--timeline-min-ns";
    a[n++] = spawn_timeline_min;
    if (lpr_cfg.py_user_lines) {
        a[n++] = "--py-lines";
        a[n++] = "user";
    }
    if (!lpr_cfg.raw_output && lpr_cfg.keep_raw) { /* kept packed */
        a[n++] = "--pack";
        a[n++] = spawn_packed;
    }
    if (!lpr_cfg.raw_output) a[n++] = "--remove-raw";
    if (wait_ms < 0 || follow) {
        a[n++] = "--log";
        a[n++] = spawn_log;
    }
    a[n++] = "-q";
    a[n] = NULL;
    return lpr_spawn_report(a, spool_path, wait_ms, wait_ms >= 0);
}

/* elfutils' libdw is installed: frames get their source lines, which only libprof-report reads
 * (lib/dwarf.h: nothing more is loaded into the program) */
static int lines_possible(void) {
    static const char *const at[] = {"/usr/lib/x86_64-linux-gnu/libdw.so.1", "/usr/lib/aarch64-linux-gnu/libdw.so.1",
                                     "/usr/lib64/libdw.so.1", "/usr/lib/libdw.so.1"};
    struct stat st;
    for (size_t i = 0; i < sizeof at / sizeof *at; i++)
        if (lpr_sys_stat(at[i], &st) == 0) return 1;
    return 0;
}

static int convert_apart(void) {
    return !lpr_cfg.python_calls[0] && lpr_spawn_available() &&
           (lpr_spool_offset() > CONVERT_APART ||
            ((lpr_stack_depth || lpr_sample_taken()) &&
             (lpr_stacks_module_bytes() > SYMBOLS_APART || (lpr_cfg.lines && lines_possible()))));
}

/* ---- the follower -------------------------------------------------------------------------------
 * A long run's spool is converted while the program runs (LIBPROF_FOLLOW): once it passes the
 * size, the thread that writes the chunk crossing it starts libprof-report --follow, detached as
 * the background converter is (tbuf.c then keeps it told how far it may go). The follower holds
 * the spool's lock, gives the blocks it has read back to the file system and removes the spool
 * once it has written the outputs; the exit only writes the last chunks and waits for that. A
 * raw trace that is itself the output, or is to be kept (LIBPROF_KEEP_RAW), is never followed. */
void lpr_follow_start(void) {
    if (__atomic_exchange_n(&lpr_follow_at, UINT64_MAX, __ATOMIC_ACQ_REL) == UINT64_MAX) return; /* once */
    if (!lpr_spawn_available() || lpr_sys_getpid() != lpr_pid) return;
    uint8_t g = lpr_guard_hold(&lpr_tls);
    snprintf(follow_pid, sizeof follow_pid, "%ld", (long)lpr_pid);
    snprintf(follower_file, sizeof follower_file, "%s.follower", spool_path);
    int rc = convert_spawned(-1, 1);
    if (rc == 0) {
        follow_started = 1;
        __atomic_store_n(&lpr_follow_on, 1, __ATOMIC_RELEASE);
        lpr_info("a follower converts %s while the program runs", spool_path);
    } else if (rc == LPR_SPAWN_BUSY) { /* a --live look holds the spool: again a little later */
        __atomic_store_n(&lpr_follow_at, lpr_spool_offset() + (16u << 20), __ATOMIC_RELEASE);
    }
    lpr_guard_restore(&lpr_tls, g);
}

/* Arm the follower for a new spool (at start, in a forked child). */
static void follow_arm(void) {
    follow_started = 0;
    lpr_follow_on = 0;
    lpr_follow_at =
        lpr_cfg.follow_mb && !lpr_cfg.raw_output && !lpr_cfg.keep_raw && !lpr_cfg.python_calls[0] && wants_conversion()
            ? lpr_cfg.follow_mb << 20
            : UINT64_MAX;
}

/* How long an exit waits for its follower, which has at most the last second or so to read: past
 * this it is stuck somehow, and the program must not be. */
#define FOLLOW_WAIT_MS 600000

/* The follower's pid from its file (0 when not there). */
static long follower_pid(void) {
    char buf[24];
    int fd = lpr_sys_open(follower_file, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    long n = lpr_sys_read(fd, buf, sizeof buf - 1), pid = 0;
    lpr_sys_close(fd);
    for (long i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) pid = pid * 10 + (buf[i] - '0');
    return pid;
}

/* Wait (up to `wait_ms`, -1: for good) for the follower to finish: the spool gone and
 * the follower process ended (its messages written). 0 when it
 * did; -1 when the follower is gone without (nobody holds the spool's lock); 1 when out of time.
 * System calls only: a crashing process's handler waits here too. */
static int follow_wait(int wait_ms) {
    long pid = 0; /* once known: the follower is done when it has exited (its messages written) */
    for (long waited = 0;; waited += 5) {
        struct stat st;
        if (!pid) pid = follower_pid();
        if (lpr_sys_stat(spool_path, &st) != 0) {
            /* gone or a zombie: the follower is not our child (started through an intermediate
             * that exits at once), and whatever adopted it may take a second or two to reap it */
            if (!pid || lpr_pid_gone((int)pid)) return 0;
        } else {
            int fd = lpr_sys_open(spool_path, O_RDONLY | O_CLOEXEC, 0);
            if (fd >= 0) {
                long locked = LP_SYS(SYS_flock, fd, LOCK_EX | LOCK_NB, 0);
                lpr_sys_close(fd);
                if (locked == 0) return lpr_sys_stat(spool_path, &st) != 0 ? 0 : -1;
            }
        }
        if (wait_ms >= 0 && waited >= wait_ms) return 1;
        struct timespec ts = {0, 5 * 1000 * 1000};
        LP_SYS(SYS_nanosleep, &ts, NULL, 0);
    }
}

/* Before an exec, with a follower: it converts the outgoing image's trace to the run's names,
 * which then move to the exec names (`json`, `csv`; "" for none). 1 when a follower ran. */
int lpr_follow_exec(const char *json, const char *csv) {
    if (!follow_started) return 0;
    lpr_spool_stop();
    if (follow_wait(FOLLOW_WAIT_MS) == 0) {
        if (json[0] && lpr_cfg.output[0]) lpr_sys_rename(lpr_cfg.output, json);
        if (csv[0] && lpr_cfg.csv[0]) lpr_sys_rename(lpr_cfg.csv, csv);
    }
    follow_started = 0;
    return 1;
}

/* LIBPROF_SNAPSHOT_SIGNAL: a libprof-report of its own writes the run so far (--live, which asks
 * the follower when there is one) to NAME.snapshot-N.json (.csv), N counting from 1, while the
 * program goes on. A signal handler: the names are made by hand from parts made at start. */
static char snap_json[PATH_MAX + 48], snap_csv[PATH_MAX + 48], snap_log[PATH_MAX + 48], snap_pid[24];
static size_t snap_json_at, snap_csv_at, snap_log_at; /* where N goes */
static unsigned snap_count;

static void snapshot_names(void) {
    char base[PATH_MAX + 32];
    lp_output_beside(base, sizeof base,
                     lpr_cfg.output[0] ? lpr_cfg.output
                     : lpr_cfg.csv[0]  ? lpr_cfg.csv
                                       : spool_path,
                     "");
    snap_json_at = (size_t)snprintf(snap_json, sizeof snap_json, "%s.snapshot-", base);
    snap_log_at = (size_t)snprintf(snap_log, sizeof snap_log, "%s.snapshot-", base);
    snap_csv_at = 0;
    if (lpr_cfg.csv[0]) {
        lp_output_beside(base, sizeof base, lpr_cfg.csv, "");
        snap_csv_at = (size_t)snprintf(snap_csv, sizeof snap_csv, "%s.snapshot-", base);
    }
    snprintf(snap_pid, sizeof snap_pid, "%ld", (long)lpr_pid);
}

/* dst[at..] = the digits of n, then ext (lp_fmt_u64 formats without a library call). */
static void put_number(char *dst, size_t at, size_t cap, unsigned n, const char *ext) {
    char digits[24], *p = lp_fmt_u64(digits + sizeof digits, n);
    while (p < digits + sizeof digits && at + 1 < cap) dst[at++] = *p++;
    for (; *ext && at + 1 < cap; ext++) dst[at++] = *ext;
    dst[at] = '\0';
}

void lpr_snapshot_on_signal(int sig) {
    (void)sig;
    int saved = errno;
    if (lpr_recording() && lpr_spawn_available() && snap_json_at) {
        unsigned n = __atomic_add_fetch(&snap_count, 1, __ATOMIC_RELAXED);
        put_number(snap_log, snap_log_at, sizeof snap_log, n, ".log");
        const char *a[16];
        int k = 0;
        a[k++] = "--live";
        a[k++] = snap_pid;
        if (!lpr_cfg.raw_output && lpr_cfg.output[0]) {
            int pf = lpr_cfg.output_kind == LP_OUT_PERFETTO;
            put_number(snap_json, snap_json_at, sizeof snap_json, n, pf ? ".pftrace" : ".json");
            a[k++] = lp_outputs[lpr_cfg.output_kind].option;
            a[k++] = snap_json;
        }
        if (snap_csv_at) {
            put_number(snap_csv, snap_csv_at, sizeof snap_csv, n, ".csv");
            a[k++] = "--csv";
            a[k++] = snap_csv;
        }
        if (k == 2) { /* no trace and no CSV (a summary only, or a raw trace): the summary, to the log */
            a[k++] = "--log";
            a[k++] = snap_log;
        }
        a[k++] = "--file-mode";
        a[k++] = spawn_mode;
        a[k++] = "-q";
        a[k] = NULL;
        lpr_spawn_report(a, NULL, -1, 0);
    }
    errno = saved;
}

/* The follower's messages (its log): where an exit conversion's would have gone (stderr, or
 * LIBPROF_LOG's file). */
static void follow_log(void) {
    int fd = lpr_sys_open(spawn_log, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return;
    char buf[4096];
    long n;
    while ((n = lpr_sys_read(fd, buf, sizeof buf)) > 0) lpr_log_write(buf, (size_t)n);
    lpr_sys_close(fd);
    lpr_sys_unlink(spawn_log);
}

/* How long a crashing process waits for its trace's conversion before it dies anyway (the
 * converter then finishes on its own). */
#define CRASH_WAIT_MS 60000

/* The peak resident set of the process so far ("max used", beside the heap's "max allocated"). */
static uint64_t max_rss_kib(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0 ? (uint64_t)ru.ru_maxrss : 0;
}

void lpr_write_end(int status, int sig) {
    struct lp_end e = {
        .end_ticks = lpr_ticks() - lpr_origin_ticks,
        .events_written = lpr_tbuf_events_written(),
        .events_dropped = __atomic_load_n(&lpr_events_dropped, __ATOMIC_RELAXED),
        .chunks_written = __atomic_load_n(&lpr_chunks_written, __ATOMIC_RELAXED),
        .exit_status = status,
        .signal = (uint32_t)sig,
        .stacks_unique = lpr_stacks_unique(),
        .stacks_dropped = lpr_stacks_dropped(),
        .max_rss_kib = max_rss_kib(),
    };
    struct lp_own_memory own;
    lpr_own_measure(&own);
    lpr_spool_write(LP_CHUNK_OWN, 0, &own, sizeof own, NULL, 0);
    lpr_spool_write(LP_CHUNK_END, lpr_gettid(), &e, sizeof e, NULL, 0);
}

/* write(2) of the pieces of a message, NULL-terminated: the only output a signal handler has. */
static void say(const char *const *parts) {
    for (int i = 0; parts[i]; i++) lpr_sys_write(STDERR_FILENO, parts[i], strlen(parts[i]));
}

/* A fatal signal: the async-signal-safe part of lpr_finish — flush what every thread recorded
 * and close the spool with an END chunk naming the signal — then the conversion, by a fresh
 * libprof-report (this process may be anywhere, even inside malloc: it must not allocate), for
 * up to CRASH_WAIT_MS. The caller then lets the signal's default action run. */
void lpr_finish_signal(int sig, int status) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || !lpr_spool_on) return;
    if (lpr_sys_getpid() != lpr_pid) return;
    if (__atomic_exchange_n(&fini_done, 1, __ATOMIC_ACQ_REL)) return;
    lpr_tls.guard = 1;
    lpr_gate_set(0);
    lpr_sample_finish();
    lpr_tbuf_flush_all(1);
    lpr_spool_recover();
    lpr_stacks_write();
    lpr_write_end(status, sig);
    if (!wants_conversion()) return; /* the raw spool is the trace asked for */
    lpr_spool_stop();
    if (follow_started) { /* it converts the rest */
        follow_wait(CRASH_WAIT_MS);
        return;
    }
    char num[4] = {(char)('0' + sig / 10 % 10), (char)('0' + sig % 10), '\0', '\0'};
    const char *sn = num + (sig < 10);
    int rc = lpr_spawn_available() ? convert_spawned(CRASH_WAIT_MS, 0) : -1;
    if (rc == 0) return;
    if (rc == LPR_SPAWN_LATE) {
        say((const char *const[]){"libprof: ", sig ? "signal " : "", sig ? sn : "_exit",
                                  ": the trace is still being converted from ", spool_path, "\n", NULL});
        return;
    }
    struct stat st;
    if (lpr_sys_stat(spool_path, &st) != 0)
        say((const char *const[]){"libprof: ", sig ? "signal " : "", sig ? sn : "_exit",
                                  ": the trace is lost: ", spool_path, " was removed while the program ran\n", NULL});
    else
        say((const char *const[]){"libprof: ", sig ? "signal " : "", sig ? sn : "_exit", ": raw trace kept in ",
                                  spool_path, " (convert it with libprof-report)\n", NULL});
}

/* Flush every thread, close the spool with an END chunk that records `status` (-1 = unknown),
 * and write the conversions. Runs once per process, from the destructor or from an _exit()
 * hook; a forked child of a raw fork/clone syscall (another pid) does nothing. */
void lpr_finish(int status) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || !lpr_spool_on) return;
    if (lpr_sys_getpid() != lpr_pid) return; /* a vfork child, or a raw clone */
    if (__atomic_exchange_n(&fini_done, 1, __ATOMIC_ACQ_REL)) return;
    int saved = errno;
    setup_each(SETUP_FINISH); /* the families' last records */
    lpr_tls.guard = 1;
    lpr_gate_set(0);
    lpr_sample_finish();
    lpr_tbuf_flush_all(0);
    lpr_tbuf_close_lives();
    lpr_spool_recover(); /* after a full disk: end the file on a whole chunk, make room for END */
    lpr_modules_write();
    lpr_stacks_write();
    lpr_tbuf_write_thread_names();
    lpr_write_end(status, 0);
    int rc = 0, spawned = 0, sc;
    if (wants_conversion()) {
        lpr_spool_stop();
        int fw = follow_started ? (lpr_cfg.convert_background ? 1 : follow_wait(FOLLOW_WAIT_MS)) : -2;
        if (fw == 0) {
            spawned = 1; /* converted, the spool removed */
            follow_log();
        } else if (fw == 1) {
            spawned = 1;
            if (lpr_cfg.convert_background)
                lpr_info("the follower finishes %s in the background", spool_path);
            else
                lpr_warn("the follower of %s has not finished after %d s; it finishes on its own", spool_path,
                         FOLLOW_WAIT_MS / 1000);
        } else if (fw == -1) {
            lpr_warn("the follower of %s ended before the trace; converting what is left of it", spool_path);
            rc = convert_at_exit();
        } else if (lpr_cfg.convert_background && lpr_spawn_available() && convert_spawned(-1, 0) == 0) {
            spawned = 1; /* the converter removes the spool when it is done */
            lpr_info("converting %s in the background", spool_path);
        } else if (convert_apart() && (sc = convert_spawned(FOLLOW_WAIT_MS, 0)) != -1 && sc != LPR_SPAWN_BUSY) {
            spawned = sc == 0 || sc == LPR_SPAWN_LATE; /* (it removes the spool when it is done) */
            rc = sc == 0 || sc == LPR_SPAWN_LATE ? 0 : 1;
            if (sc == LPR_SPAWN_LATE)
                lpr_warn("the conversion of %s has not finished after %d s; it finishes on its own", spool_path,
                         FOLLOW_WAIT_MS / 1000);
        } else {
            uint64_t t0 = lpr_mono_ns();
            rc = convert_at_exit();
            uint64_t dt = lpr_mono_ns() - t0;
            /* a long conversion says so, once (and LIBPROF_VERBOSE always shows it) */
            if (dt > 1000000000u || lpr_verbose)
                lpr_warn("converting %llu events took %.3f s%s", (unsigned long long)lpr_tbuf_events_written(),
                         (double)dt / 1e9,
                         dt > 1000000000u ? " (LIBPROF_CONVERT=background lets the program end without waiting)" : "");
        }
    }
    lpr_spool_stop();
    if (rc == 0 && !spawned && !lpr_cfg.raw_output && !lpr_cfg.keep_raw)
        lpr_sys_unlink(spool_path);
    else if (rc == 0 && !spawned && (!lpr_cfg.raw_output || lpr_cfg.packed_output))
        pack_kept(); /* LIBPROF_KEEP_RAW, or LIBPROF_OUTPUT=NAME.lpz */
    else if (rc != 0 && !lpr_cfg.raw_output) {
        struct stat st;
        if (lpr_sys_stat(spool_path, &st) == 0)
            lpr_say("raw trace kept in %s (convert it with libprof-report)", spool_path);
        else
            lpr_say("the trace is lost: %s was removed while the program ran", spool_path);
    }
    lpr_lineage_sweep(); /* traces of this run's killed processes */
    lpr_info("trace: %s%s%s (%llu events, %llu dropped)", lpr_cfg.raw_output ? spool_path : lpr_cfg.output,
             lpr_cfg.csv[0] ? ", csv: " : "", lpr_cfg.csv, (unsigned long long)lpr_tbuf_events_written(),
             (unsigned long long)__atomic_load_n(&lpr_events_dropped, __ATOMIC_RELAXED));
    errno = saved;
}

/* The status given to exit(), when the program called it (returning from main does not). */
int lpr_exit_status = -1;

/* Runs from _dl_fini; a preloaded library is finalized after the program and its libraries, so
 * nearly every event reaches the trace. */
__attribute__((destructor)) static void lpr_destructor(void) { lpr_finish(lpr_exit_status); }
