/* core.c: the life cycle of the preload: start-up at the first hooked call, fork, and the flush
 * and conversion at exit.
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

#include "lp.h"
#include "sys.h"
#include "lib/convert.h"

volatile uint32_t lp_gate = LP_GATE_UNINIT;
struct lp_config lp_cfg;
int lp_alloc_timed;
long lp_pid;

static int init_state;  /* 0 = not started, 1 = running, 2 = done */
static int heavy_state; /* the pending set-up (LP_GATE_PENDING): 0 = not run, 1 = running, 2 = done */
static int fini_done;
static char spool_path[PATH_MAX + 32];
static int spool_gone; /* the spool's name was given up before an exec (see lp_exec_prepare) */
static int exec_fd = -1; /* the spool's content while an exec is under way */
static int pid_named;    /* the output names carry this process's pid (%p, or .PID inserted) */
static uint64_t start_real_ns; /* CLOCK_REALTIME when the spool was made */
static char exe_path[PATH_MAX];
static char host[256];

extern char **environ;

static const char *env_get(const char *name) { return getenv(name); }

/* mkdir -p of the directory part of `path`. */
static int make_parent_dirs(const char *path) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp) return 0;
    *slash = '\0';
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = lp_sys_mkdir(tmp, 0755);
        if (rc != 0 && rc != -EEXIST) { errno = -rc; return -1; }
        *p = '/';
    }
    int rc = lp_sys_mkdir(tmp, 0755);
    if (rc != 0 && rc != -EEXIST) { errno = -rc; return -1; }
    return 0;
}

/* Read /proc/self/cmdline into `buf` (arguments NUL-separated). Returns its length. */
static size_t read_cmdline(char *buf, size_t len) {
    int fd = lp_sys_open("/proc/self/cmdline", O_RDONLY, 0);
    if (fd < 0) return 0;
    size_t n = 0;
    while (n < len) {
        long r = lp_sys_read(fd, buf + n, len - n);
        if (r == -EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    lp_sys_close(fd);
    return n;
}

static void write_string(uint32_t key, const char *s, size_t n) {
    lp_spool_write(LP_CHUNK_STRING, 0, &key, sizeof key, s, n);
}

static int start_spool(int forked);
static void save_exec_env(void);
static struct lp_pattern_ctx pattern_ctx;

/* The name a forked child gives `path` (expanded from `pattern`): the pattern expanded again
 * with the child's pid when it has %p, else the parent's name with ".PID" inserted. */
static void child_name(char *path, size_t len, const char *pattern) {
    if (!path[0]) return;
    pid_named = 1;
    if (pattern && *pattern && strstr(pattern, "%p") && lp_expand_pattern(pattern, &pattern_ctx, path, len) == 0) return;
    lp_path_insert_pid(path, len, lp_pid);
}

/* In a forked child (glibc runs this before fork returns there): keep tracing, into a file of
 * the child's own, with empty buffers. Only system calls and string formatting happen here, so
 * it is safe in the child of a multi-threaded parent. */
static void atfork_child(void) {
    uint8_t g = lp_tls.guard;
    lp_tls.guard = 1;
    lp_tbuf_after_fork_child();
    lp_control_after_fork_child();
    lp_stacks_after_fork_child();
    lp_pid = lp_sys_getpid();
    pattern_ctx.pid = lp_pid;
    if (lp_cfg.raw_output || lp_cfg.output[0] || lp_cfg.csv[0]) {
        child_name(lp_cfg.output, sizeof lp_cfg.output, getenv("LIBPROF_OUTPUT"));
        child_name(lp_cfg.csv, sizeof lp_cfg.csv, getenv("LIBPROF_CSV"));
    }
    lp_clock_init(lp_clock_kind);
    fini_done = 0;
    if (start_spool(1) == 0) {
        lp_names_after_fork_child(); /* modules: at the end (the loader's lock may be held here) */
        lp_gate_set(lp_control_child_gate());
    } else {
        lp_gate_set(0);
        fini_done = 1;
    }
    lp_tls.guard = g;
}

/* Is `entry` ("NAME=value") in the environment our parent process started with? */
static int parent_env_has(const char *entry) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%ld/environ", (long)getppid());
    int fd = lp_sys_open(path, O_RDONLY, 0);
    if (fd < 0) return 0;
    size_t want = strlen(entry) + 1, have = 0; /* bytes of the current entry matched so far */
    int match = 1, found = 0;
    long n;
    while (!found && (n = lp_sys_read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n && !found; i++) {
            char c = buf[i];
            if (match && have < want && c == (have + 1 == want ? '\0' : entry[have])) {
                have++;
                if (have == want) found = 1;
            } else {
                match = 0;
            }
            if (c == '\0') { have = 0; match = 1; }
        }
    }
    lp_sys_close(fd);
    return found;
}

/* A process started by a traced process (make running gcc, a shell running a pipeline) inherits
 * LIBPROF_OUTPUT. If the pattern has no %p, the parent's trace and ours would share one name, so
 * ours gets ".PID" inserted before the extension. */
static void name_descendant(void) {
    static const char *const vars[] = {"LIBPROF_OUTPUT", "LIBPROF_CSV", "LIBPROF"};
    int inherited = 0;
    for (size_t i = 0; i < 3 && !inherited; i++) {
        const char *v = getenv(vars[i]);
        char entry[PATH_MAX + 32];
        if (!v || !*v) continue;
        snprintf(entry, sizeof entry, "%s=%s", vars[i], v);
        inherited = parent_env_has(entry);
    }
    if (!inherited) return;
    const char *o = getenv("LIBPROF_OUTPUT"), *c = getenv("LIBPROF_CSV");
    if (lp_cfg.output[0] && o && *o && !strstr(o, "%p")) lp_path_insert_pid(lp_cfg.output, sizeof lp_cfg.output, lp_pid);
    if (lp_cfg.csv[0] && c && *c && !strstr(c, "%p")) lp_path_insert_pid(lp_cfg.csv, sizeof lp_cfg.csv, lp_pid);
    pid_named = 1;
}

/* Outputs named after the pid must not overwrite the trace of an earlier process that had the
 * same pid (pids are reused within a long run: 32768 of them here). Such a name that already
 * exists gets ".2", ".3" ... inserted. Returns 0, or -1 when no free name was found. */
static int avoid_reused_pid(void) {
    if (!pid_named) return 0;
    char out[sizeof lp_cfg.output], csv[sizeof lp_cfg.csv];
    struct stat st;
    for (long k = 1; k < 100; k++) {
        snprintf(out, sizeof out, "%s", lp_cfg.output);
        snprintf(csv, sizeof csv, "%s", lp_cfg.csv);
        if (k > 1 && ((out[0] && lp_path_insert_pid(out, sizeof out, k)) || (csv[0] && lp_path_insert_pid(csv, sizeof csv, k))))
            return -1;
        int taken = (out[0] && lp_sys_stat(out, &st) == 0) || (csv[0] && lp_sys_stat(csv, &st) == 0);
        if (!lp_cfg.raw_output && out[0]) { /* a killed process's spool holds the name too */
            char spool[sizeof out + 8];
            snprintf(spool, sizeof spool, "%s.lpt", out);
            taken |= lp_sys_stat(spool, &st) == 0;
        }
        if (!taken) {
            snprintf(lp_cfg.output, sizeof lp_cfg.output, "%s", out);
            snprintf(lp_cfg.csv, sizeof lp_cfg.csv, "%s", csv);
            return 0;
        }
    }
    return -1;
}

/* Make `path` absolute against the current directory: the spool is reopened for every write and
 * the outputs are written at exit, after the program may have changed directory. */
static void make_absolute(char *path, size_t len) {
    if (!path[0] || path[0] == '/') return;
    char cwd[PATH_MAX], tmp[PATH_MAX];
    long n = LP_SYS(SYS_getcwd, cwd, sizeof cwd, 0);
    if (n <= 0 || cwd[0] != '/') return;
    if (snprintf(tmp, sizeof tmp, "%s/%s", cwd, path) >= (int)sizeof tmp) return;
    snprintf(path, len, "%s", tmp);
}

/* Create the spool with its file header (`forked`: a forked child, whose names are already its
 * own). Returns 0 or -1 (warning already given). */
static int start_spool(int forked) {
    char chosen[PATH_MAX + 32];
    int temp = 0;
    if (!forked) {
        make_absolute(lp_cfg.output, sizeof lp_cfg.output);
        make_absolute(lp_cfg.csv, sizeof lp_cfg.csv);
        const char *o = getenv("LIBPROF_OUTPUT"), *c = getenv("LIBPROF_CSV");
        pid_named = (o && strstr(o, "%p")) || (c && strstr(c, "%p"));
        name_descendant();
    }
    if (avoid_reused_pid() != 0) {
        lp_warn("every variant of %s is taken; not profiling", lp_cfg.output[0] ? lp_cfg.output : lp_cfg.csv);
        return -1;
    }
    if (lp_cfg.raw_output) {
        snprintf(spool_path, sizeof spool_path, "%s", lp_cfg.output);
    } else if (lp_cfg.output[0]) {
        snprintf(spool_path, sizeof spool_path, "%s.lpt", lp_cfg.output);
    } else if (lp_cfg.csv[0]) {
        snprintf(spool_path, sizeof spool_path, "%s.lpt", lp_cfg.csv);
    } else { /* summary only: a private name in TMPDIR */
        const char *dir = getenv("TMPDIR");
        snprintf(spool_path, sizeof spool_path, "%s/libprof-%ld-%llx.lpt", dir && *dir ? dir : "/tmp", lp_pid,
                 (unsigned long long)(lp_ticks() & 0xffffffffffull));
        make_absolute(spool_path, sizeof spool_path);
        temp = 1;
    }
    if (lp_cfg.output[0] && make_parent_dirs(lp_cfg.output) != 0) {
        lp_warn("cannot create the directory for %s (%s); not profiling", lp_cfg.output, strerror(errno));
        return -1;
    }
    if (lp_cfg.csv[0] && make_parent_dirs(lp_cfg.csv) != 0) {
        lp_warn("cannot create the directory for %s (%s); not writing the CSV", lp_cfg.csv, strerror(errno));
        lp_cfg.csv[0] = '\0';
    }

    struct lp_file_header h;
    lp_header_init(&h, (uint32_t)lp_clock_kind);
    h.pid = (uint32_t)lp_pid;
    h.ppid = (uint32_t)getppid();
    h.origin_ticks = lp_origin_ticks;
    h.origin_mono_ns = lp_origin_mono_ns;
    h.origin_real_ns = start_real_ns = lp_real_ns();
    h.families = lp_cfg.families;
    h.buffer_bytes = lp_cfg.buffer_bytes;
    h.alloc_min = lp_cfg.alloc_min;
    /* The header is written at offset 0 as a chunk-less prefix; chunks follow it. */
    if (lp_spool_create(spool_path, !temp, &h, chosen, sizeof chosen) != 0) {
        lp_warn("cannot create %s (%s); not profiling", spool_path, strerror(errno));
        return -1;
    }
    if (strcmp(chosen, spool_path) != 0) {
        /* Another live process (our parent, most likely) owns the name: take a per-pid name. */
        snprintf(spool_path, sizeof spool_path, "%s", chosen);
        if (lp_cfg.output[0]) lp_path_insert_pid(lp_cfg.output, sizeof lp_cfg.output, lp_pid);
        if (lp_cfg.csv[0]) lp_path_insert_pid(lp_cfg.csv, sizeof lp_cfg.csv, lp_pid);
    }
    write_string(LP_STR_HOSTNAME, host, strlen(host));
    write_string(LP_STR_EXE, exe_path, strlen(exe_path));
    char cmd[8192];
    size_t n = read_cmdline(cmd, sizeof cmd);
    write_string(LP_STR_CMDLINE, cmd, n);
    return 0;
}

static void init_heavy(void);
static void sweep_orphans(void);
static char inj_self[PATH_MAX]; /* this libprof.so's path (see save_exec_env) */

/* Start-up, in two parts.
 * The first hooked call of the process (or the constructor, whichever comes first) reads the
 * environment, picks the clock and creates the spool: system calls and string formatting only,
 * so it is safe wherever a hook runs, even inside a program's own allocator that is setting
 * itself up. Recording starts there.
 * The rest may allocate or look symbols up (dlsym, dlopen of libunwind, dl_iterate_phdr,
 * pthread_atfork, sigaction): it runs from libprof's constructor or from an allocation hook,
 * whichever comes first (LP_GATE_PENDING) — never from the mmap family or any other hook an
 * allocator may call on its way up (chromium's built-in allocator hung there, issue 12). */
void lp_init_slow(int safe) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 0 && environ != NULL) {
        /* environ NULL: too early (inside the dynamic loader): try again next call */
        int expect = 0;
        if (__atomic_compare_exchange_n(&init_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            int saved = errno;
            uint8_t g = lp_tls.guard;
            lp_tls.guard = 1;
            uint32_t gate = 0;
            lp_pid = lp_sys_getpid();
            if (getauxval(AT_SECURE)) goto done; /* setuid/setgid: never trace, never write files */

            long n = lp_sys_readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
            exe_path[n > 0 ? n : 0] = '\0';
            if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
            host[sizeof host - 1] = '\0';
            const char *base = strrchr(exe_path, '/');
            struct lp_pattern_ctx ctx = pattern_ctx = (struct lp_pattern_ctx){
                .pid = lp_pid,
                .start_time = (long)(lp_real_ns() / 1000000000u),
                .host = host,
                .exe = base ? base + 1 : (exe_path[0] ? exe_path : "unknown"),
            };
            lp_config_load(&lp_cfg, env_get, &ctx);
            if (!lp_cfg.enabled) goto done;

            lp_alloc_timed = lp_cfg.alloc_timing;
            lp_clock_init(lp_cfg.clock);
            lp_call_init(lp_cfg.min_ns);
            lp_tbuf_init(lp_cfg.buffer_bytes);
            if (start_spool(0) != 0) goto done;
            gate = lp_control_init(&lp_cfg);
            lp_info("recording %s%s%s to %s (clock %s, %u KiB chunks)", lp_cfg.output[0] ? lp_cfg.output : "",
                    lp_cfg.csv[0] ? " and CSV " : "", lp_cfg.csv, spool_path,
                    lp_clock_kind == LP_CLOCK_TSC ? "tsc" : "monotonic", lp_cfg.buffer_bytes / 1024);
        done:
            __atomic_fetch_or(&lp_gate, LP_GATE_PENDING, __ATOMIC_RELAXED);
            lp_gate_set(gate); /* clears LP_GATE_UNINIT: recording starts */
            __atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
            lp_tls.guard = g;
            errno = saved;
        }
    }
    if (safe && __atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2) init_heavy();
}

/* The set-up that may allocate or look symbols up; once, from a safe place (see lp_init_slow). */
static void init_heavy(void) {
    int expect = 0;
    if (!__atomic_compare_exchange_n(&heavy_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    int saved = errno;
    uint8_t g = lp_tls.guard;
    lp_tls.guard = 1;
    if (lp_alloc_resolve) lp_alloc_resolve();
    if (lp_io_resolve) lp_io_resolve();
    int on = lp_spool_on;
    if (on) {
        save_exec_env();
        lp_spawn_init(inj_self);
        if (lp_cfg.stacks && lp_stacks_init(lp_cfg.stacks) == 0) lp_modules_write();
        pthread_atfork(NULL, NULL, atfork_child);
        if (lp_signals_init) lp_signals_init();
        lp_control_init_signal(&lp_cfg);
    }
    /* hooks that can never record leave the program's way: all of them when libprof is off for
     * good, else those of the families LIBPROF_EVENTS left out */
    lp_unhook(on ? lp_cfg.families : 0);
    __atomic_fetch_and(&lp_gate, ~LP_GATE_PENDING, __ATOMIC_RELEASE);
    __atomic_store_n(&heavy_state, 2, __ATOMIC_RELEASE);
    lp_tls.guard = g;
    /* descriptors the program already has (stdin/out/err, inherited ones): their paths */
    if (!g && on && (lp_gate & (1u << LP_FAM_IO)) && lp_io_start) lp_io_start();
    errno = saved;
}

/* LIBPROF_CHILDREN=0: take libprof out of the environment that child processes inherit —
 * its entry in LD_PRELOAD (other preloads stay) and every LIBPROF* variable. This runs in the
 * constructor, once the C library is up; the program itself then sees the cleaned environment. */
static int is_self(const char *entry, size_t n);

static void forget_children(void) {
    const char *pre = getenv("LD_PRELOAD");
    if (pre) {
        char keep[PATH_MAX * 2];
        size_t k = 0;
        const char *p = pre;
        while (*p) {
            size_t n = strcspn(p, ": ");
            if (n && !is_self(p, n) && k + n + 2 < sizeof keep) {
                if (k) keep[k++] = ':';
                memcpy(keep + k, p, n);
                k += n;
            }
            p += n;
            if (*p) p++;
        }
        keep[k] = '\0';
        if (k) setenv("LD_PRELOAD", keep, 1);
        else unsetenv("LD_PRELOAD");
    }
    for (;;) { /* unsetenv reshuffles environ: rescan until no LIBPROF* is left */
        char name[128] = "";
        for (char **e = environ; *e; e++) {
            if (strncmp(*e, "LIBPROF", 7)) continue;
            size_t n = strcspn(*e, "=");
            if (n < sizeof name) {
                memcpy(name, *e, n);
                name[n] = '\0';
            }
            break;
        }
        if (!name[0]) break;
        unsetenv(name);
    }
}

__attribute__((constructor)) static void lp_constructor(void) {
    lp_init_slow(1);
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2) {
        lp_control_start_timers();
        if (lp_cfg.enabled && !lp_cfg.children) {
            uint8_t g = lp_tls.guard;
            lp_tls.guard = 1; /* setenv's allocations are libprof's, not the program's */
            forget_children();
            lp_tls.guard = g;
        }
    }
}

/* LIBPROF_FLAMEGRAPH: NAME.ext -> NAME.alloc.folded, NAME.leaks.folded, NAME.speedscope.json */
static void flame_name(char *dst, size_t len, const char *trace, const char *suffix) {
    snprintf(dst, len, "%s", trace);
    char *slash = strrchr(dst, '/'), *dot = strrchr(dst, '.');
    if (dot && (!slash || dot > slash)) *dot = '\0';
    size_t n = strlen(dst);
    snprintf(dst + n, len - n, "%s", suffix);
}

/* Write the spool's conversions (Chrome JSON, CSV, summary, flame graphs). Returns 0 or -1. */
static int convert_to(const char *chrome, const char *csv) {
    struct lp_reader r;
    char err[256];
    static char fold[PATH_MAX + 32], leaks[PATH_MAX + 32], ss[PATH_MAX + 32];
    int flame = lp_cfg.flamegraph && lp_stack_depth;
    if (flame) {
        const char *base = chrome ? chrome : lp_cfg.raw_output ? lp_cfg.output : csv ? csv : spool_path;
        flame_name(fold, sizeof fold, base, ".alloc.folded");
        flame_name(leaks, sizeof leaks, base, ".leaks.folded");
        flame_name(ss, sizeof ss, base, ".speedscope.json");
    }
    if (lp_reader_open(&r, spool_path, err, sizeof err) != 0) {
        lp_warn("cannot read back %s: %s", spool_path, err);
        return -1;
    }
    struct lp_convert_opts o = {.chrome_path = chrome,
                                .chrome_fd = -1,
                                .csv_path = csv,
                                .summary_fd = lp_cfg.summary ? STDERR_FILENO : -1,
                                .alloc_min = lp_cfg.alloc_min,
                                .trace_label = lp_cfg.output[0] ? lp_cfg.output : NULL,
                                .folded_path = flame ? fold : NULL,
                                .folded_leaks_path = flame ? leaks : NULL,
                                .speedscope_path = flame ? ss : NULL};
    int rc = lp_convert(&r, &o, err, sizeof err);
    if (rc != 0) lp_warn("%s", err);
    lp_reader_close(&r);
    return rc;
}

static int convert_at_exit(void) {
    return convert_to(lp_cfg.raw_output ? NULL : (lp_cfg.output[0] ? lp_cfg.output : NULL),
                      lp_cfg.csv[0] ? lp_cfg.csv : NULL);
}

/* The peak resident set of the process so far ("max used", beside the heap's "max allocated"). */
static uint64_t max_rss_kib(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0 ? (uint64_t)ru.ru_maxrss : 0;
}

static void write_end(int status, int sig) {
    struct lp_end e = {
        .end_ticks = lp_ticks() - lp_origin_ticks,
        .events_written = lp_tbuf_events_written(),
        .events_dropped = __atomic_load_n(&lp_events_dropped, __ATOMIC_RELAXED),
        .chunks_written = __atomic_load_n(&lp_chunks_written, __ATOMIC_RELAXED),
        .exit_status = status,
        .signal = (uint32_t)sig,
        .stacks_unique = lp_stacks_unique(),
        .stacks_dropped = lp_stacks_dropped(),
        .max_rss_kib = max_rss_kib(),
    };
    lp_spool_write(LP_CHUNK_END, lp_gettid(), &e, sizeof e, NULL, 0);
}

/* A fatal signal: the async-signal-safe part of lp_finish — flush what every thread recorded
 * and close the raw spool with an END chunk naming the signal. No conversion (it allocates):
 * the spool stays on disk for libprof-report. */
void lp_finish_signal(int sig) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || !lp_spool_on) return;
    if (lp_sys_getpid() != lp_pid) return;
    if (__atomic_exchange_n(&fini_done, 1, __ATOMIC_ACQ_REL)) return;
    lp_tls.guard = 1;
    lp_gate_set(0);
    lp_tbuf_flush_all(1);
    lp_spool_recover();
    lp_stacks_write();
    write_end(-1, sig);
    if (!lp_cfg.raw_output) { /* say where the trace is: write(2) only, no formatting library */
        char num[4] = {(char)('0' + sig / 10 % 10), (char)('0' + sig % 10), ':', ' '};
        const char *parts[] = {"libprof: signal ", num + (sig < 10), "raw trace kept in ", spool_path,
                               " (convert it with libprof-report)\n"};
        for (int i = 0; i < 5; i++) {
            size_t n = i == 1 ? (size_t)(sig < 10 ? 3 : 4) : strlen(parts[i]); /* num has no NUL */
            lp_sys_write(STDERR_FILENO, parts[i], n);
        }
    }
}

int lp_finish_with_signal; /* the terminating signal lp_finish records, if any */

/* Flush every thread, close the spool with an END chunk that records `status` (-1 = unknown),
 * and write the conversions. Runs once per process, from the destructor or from an _exit()
 * hook; a forked child of a raw fork/clone syscall (another pid) does nothing. */
void lp_finish(int status) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || !lp_spool_on) return;
    if (lp_sys_getpid() != lp_pid) return; /* a vfork child, or a raw clone */
    if (__atomic_exchange_n(&fini_done, 1, __ATOMIC_ACQ_REL)) return;
    int saved = errno;
    lp_tls.guard = 1;
    lp_gate_set(0);
    lp_tbuf_flush_all(0);
    lp_tbuf_close_lives();
    lp_spool_recover(); /* after a full disk: end the file on a whole chunk, make room for END */
    lp_modules_write();
    lp_stacks_write();
    lp_tbuf_write_thread_names();
    write_end(status, lp_finish_with_signal);
    int rc = 0;
    if (!lp_cfg.raw_output || lp_cfg.csv[0] || lp_cfg.summary || lp_cfg.flamegraph) rc = convert_at_exit();
    lp_spool_stop();
    if (rc == 0 && !lp_cfg.raw_output && !lp_cfg.keep_raw) lp_sys_unlink(spool_path);
    else if (rc != 0 && !lp_cfg.raw_output)
        lp_warn("raw trace kept in %s (convert it with libprof-report)", spool_path);
    sweep_orphans();
    lp_info("trace: %s%s%s (%llu events, %llu dropped)", lp_cfg.raw_output ? spool_path : lp_cfg.output,
            lp_cfg.csv[0] ? ", csv: " : "", lp_cfg.csv, (unsigned long long)lp_tbuf_events_written(),
            (unsigned long long)__atomic_load_n(&lp_events_dropped, __ATOMIC_RELAXED));
    errno = saved;
}

/* ---- giving up privileges -------------------------------------------------------------------
 * A process that changes its user (a daemon dropping root, CPython's subprocess with user=)
 * reopens its spool and writes its outputs as the new user from then on. If that user can write
 * where the trace goes, the spool is handed to it and recording goes on; otherwise the trace is
 * written now, while the process still can, and recording ends there (said once). */

/* Can `uid` create files in the directory of `path`? By the mode bits: owner or other write
 * permission (group membership is not looked up: a group-writable directory counts as no). */
static int dir_writable_by(const char *path, unsigned uid) {
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return 0;
    if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    struct stat st;
    if (lp_sys_stat(dir, &st) != 0) return 0;
    if (uid == 0) return 1;
    return (st.st_uid == uid && (st.st_mode & S_IWUSR)) || (st.st_mode & S_IWOTH);
}

void lp_uid_change(unsigned new_euid) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || !lp_spool_on || fini_done) return;
    if (lp_sys_getpid() != lp_pid) return;
    unsigned cur = (unsigned)LP_SYS(SYS_geteuid, 0, 0, 0);
    if (new_euid == cur) return;
    int ok = dir_writable_by(spool_path, new_euid) && (!lp_cfg.output[0] || dir_writable_by(lp_cfg.output, new_euid)) &&
             (!lp_cfg.csv[0] || dir_writable_by(lp_cfg.csv, new_euid));
    if (ok) {
        int rc = (int)LP_SYS(SYS_chown, spool_path, new_euid, -1);
        if (rc == 0) return;
        struct stat st;
        if (lp_sys_stat(spool_path, &st) == 0 && st.st_uid == new_euid) return;
    }
    lp_warn("the process takes user id %u, which cannot write %s: its trace ends here", new_euid,
            lp_cfg.output[0] ? lp_cfg.output : spool_path);
    lp_finish(-1);
}

/* ---- children that were killed -------------------------------------------------------------
 * A child killed by SIGKILL (a test runner's timeout, chromium shutting down its renderers)
 * cannot write its own trace; one killed in the middle of its conversion leaves a half-written
 * temporary file. When a profiled parent reaps a child that died by a signal, it looks for that
 * child's spool beside its own outputs and converts it (cut short at the child's last written
 * chunk: metadata.libprof.complete is false and .signal says which signal), so no raw file is
 * left behind unasked. Only JSON/CSV spools are converted; a raw trace (.lpt output) is the
 * trace the user asked for. */

/* Does the spool at `path` belong to process `pid`? */
static int spool_of(const char *path, int pid) {
    int fd = lp_sys_open(path, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0) return 0;
    struct lp_file_header h;
    long n = lp_sys_pread(fd, &h, sizeof h, 0);
    lp_sys_close(fd);
    return n == (long)sizeof h && !memcmp(h.magic, LP_FORMAT_MAGIC, 8) && (int)h.pid == pid;
}

static void convert_orphan(const char *spool, int pid, int sig) {
    char out[PATH_MAX + 64], tmp[PATH_MAX + 96], csv[PATH_MAX + 64];
    size_t n = strlen(spool);
    if (n < 5 || n >= sizeof out) return;
    memcpy(out, spool, n - 4);
    out[n - 4] = '\0'; /* NAME.json, or NAME.csv */
    const char *dot = strrchr(out, '.');
    int is_csv = dot && !strcmp(dot, ".csv");
    int with_csv = 0;
    if (!is_csv && dot && lp_cfg.csv[0] && lp_cfg.output[0]) { /* LIBPROF=1: NAME.csv beside NAME.json */
        size_t a = strlen(lp_cfg.output), b = strlen(lp_cfg.csv);
        with_csv = a == b && a > 5 && !strncmp(lp_cfg.output, lp_cfg.csv, a - 5);
        snprintf(csv, sizeof csv, "%.*s.csv", (int)(dot - out), out);
    }
    /* what the child's own conversion left half-written */
    snprintf(tmp, sizeof tmp, "%s.tmp%d", out, pid);
    lp_sys_unlink(tmp);
    if (with_csv) {
        snprintf(tmp, sizeof tmp, "%s.tmp%d", csv, pid);
        lp_sys_unlink(tmp);
    }
    /* in a process of its own, so that the parent (chromium's browser, a test runner) does not
     * wait for it; in this process only when libprof-report cannot be found */
    char sigtxt[16];
    snprintf(sigtxt, sizeof sigtxt, "%d", sig);
    const char *args[16];
    int k = 0;
    args[k++] = spool;
    args[k++] = is_csv ? "--csv" : "--chrome";
    args[k++] = out;
    if (with_csv) {
        args[k++] = "--csv";
        args[k++] = csv;
    }
    if (sig) {
        args[k++] = "--killed-by";
        args[k++] = sigtxt;
    }
    args[k++] = "--remove-raw";
    args[k++] = "-q";
    args[k] = NULL;
    if (lp_spawn_report(args, -1) == 0) {
        lp_info("process %d ended without writing its trace (signal %d): converting %s", pid, sig, spool);
        return;
    }
    struct lp_reader r;
    char err[256];
    if (lp_reader_open(&r, spool, err, sizeof err) != 0) {
        lp_warn("process %d ended without writing its trace (signal %d); its raw trace is kept in %s (%s)", pid, sig,
                spool, err);
        return;
    }
    struct lp_convert_opts o = {.chrome_path = is_csv ? NULL : out, .chrome_fd = -1,
                                .csv_path = is_csv ? out : with_csv ? csv : NULL, .summary_fd = -1,
                                .alloc_min = r.hdr.alloc_min, .killed_by = sig};
    int rc = lp_convert(&r, &o, err, sizeof err);
    lp_reader_close(&r);
    if (rc == 0) {
        lp_sys_unlink(spool);
        lp_info("process %d ended without writing its trace (signal %d); converted, cut short, to %s", pid, sig, out);
    } else {
        lp_warn("process %d ended without writing its trace (signal %d); its raw trace is kept in %s (%s)", pid, sig,
                spool, err);
    }
}

/* Call `fn` for every spool (*.lpt, not ours) in the directory of our own spool whose name
 * contains `needle` (NULL: any); stops when `fn` returns nonzero. */
static void each_spool(const char *needle, int (*fn)(const char *path, void *arg), void *arg) {
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", spool_path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    int dfd = lp_sys_open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY, 0);
    if (dfd < 0) return;
    char buf[8192];
    long k;
    int stop = 0;
    while (!stop && (k = LP_SYS(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < k && !stop;) {
            struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; } *d = (void *)(buf + off);
            off += d->reclen;
            size_t len = strlen(d->name);
            if (len < 5 || strcmp(d->name + len - 4, ".lpt") || (needle && !strstr(d->name, needle))) continue;
            char path[PATH_MAX + 64];
            if (snprintf(path, sizeof path, "%s/%s", dir, d->name) >= (int)sizeof path || !strcmp(path, spool_path)) continue;
            stop = fn(path, arg);
        }
    }
    lp_sys_close(dfd);
}

struct reaped { int pid, sig; };

static int convert_if_reaped(const char *path, void *arg) {
    struct reaped *c = arg;
    if (!spool_of(path, c->pid)) return 0;
    convert_orphan(path, c->pid, c->sig);
    return 1;
}

/* A child `pid` was reaped with wait status `status` (from the wait family's hooks). */
void lp_child_reaped(int pid, int status) {
    if (pid <= 0 || !WIFSIGNALED(status)) return;
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || !lp_spool_on || fini_done) return;
    if (lp_cfg.raw_output || lp_sys_getpid() != lp_pid) return;
    int saved = errno;
    uint8_t g = lp_guard_hold(&lp_tls);
    char pidtxt[24];
    snprintf(pidtxt, sizeof pidtxt, "%d", pid);
    struct reaped c = {pid, WTERMSIG(status)};
    each_spool(pidtxt, convert_if_reaped, &c); /* the child's name carries its pid (%p, .PID) */
    lp_guard_restore(&lp_tls, g);
    errno = saved;
}

/* At exit: spools of this run whose process is gone without converting them — killed while no
 * profiled parent was there to reap it (an orphan of a killed shell, say). "Of this run": begun
 * after this process began; "gone": no such pid any more (a zombie still counts as alive, so a
 * process still converting its own trace is never touched). */
static int convert_if_orphan(const char *path, void *arg) {
    uint64_t since = *(uint64_t *)arg;
    int fd = lp_sys_open(path, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0) return 0;
    struct lp_file_header h;
    long n = lp_sys_pread(fd, &h, sizeof h, 0);
    lp_sys_close(fd);
    if (n != (long)sizeof h || memcmp(h.magic, LP_FORMAT_MAGIC, 8) || h.origin_real_ns < since || !h.pid) return 0;
    if (lp_sys_kill((int)h.pid, 0) != -ESRCH) return 0;
    convert_orphan(path, (int)h.pid, 0);
    return 0;
}

static void sweep_orphans(void) {
    if (lp_cfg.raw_output) return;
    uint64_t since = start_real_ns;
    each_spool(NULL, convert_if_orphan, &since);
}

/* ---- exec ------------------------------------------------------------------------------------
 * The image that execs writes its trace under its name with ".exec-EXE" inserted; the program
 * that replaces it (same pid) takes the plain name. So a launcher script that ends with
 * `exec real-program` gives the user the real program's trace where they asked for it. */

static char exec_json[PATH_MAX + 64], exec_csv[PATH_MAX + 64], exec_lpt[PATH_MAX + 64];

static void exec_name(char *dst, size_t len, const char *src) {
    dst[0] = '\0';
    if (!src[0]) return;
    char tag[96];
    const char *slash = strrchr(exe_path, '/');
    snprintf(tag, sizeof tag, "exec-%s", slash ? slash + 1 : "unknown");
    snprintf(dst, len, "%s", src);
    char *s2 = strrchr(dst, '/');
    char *dot = strrchr(dst, '.');
    if (!dot || (s2 && dot < s2)) dot = dst + strlen(dst);
    char tail[PATH_MAX];
    snprintf(tail, sizeof tail, "%s", dot);
    size_t head = (size_t)(dot - dst);
    snprintf(dst + head, len - head, ".%s%s", tag, tail);
}

/* Before an exec in this process: everything recorded so far becomes the outgoing image's
 * trace. The spool must not outlive a successful exec (nobody would remove it), yet a failed
 * exec must find everything again; so the spool's content is held through one close-on-exec
 * descriptor while its name is given up: a successful exec closes it and the file is gone, a
 * failed one writes it back (lp_exec_failed). Writes of other threads in that window are counted
 * as dropped. */
void lp_exec_prepare(void) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || !lp_spool_on || fini_done) return;
    if (lp_sys_getpid() != lp_pid) return;
    int saved = errno;
    uint8_t g = lp_tls.guard;
    lp_tls.guard = 1;
    lp_tbuf_flush_all(0);
    lp_spool_recover();
    lp_tbuf_write_thread_names();
    lp_modules_write();
    lp_stacks_write();
    write_end(-1, 0);
    exec_name(exec_json, sizeof exec_json, lp_cfg.raw_output ? "" : lp_cfg.output);
    exec_name(exec_csv, sizeof exec_csv, lp_cfg.csv);
    exec_lpt[0] = '\0';
    if (!lp_cfg.raw_output) convert_to(exec_json[0] ? exec_json : NULL, exec_csv[0] ? exec_csv : NULL);
    lp_spool_stop();
    if (lp_cfg.raw_output || lp_cfg.keep_raw) { /* the raw trace is wanted: it moves to the exec name */
        exec_name(exec_lpt, sizeof exec_lpt, spool_path);
        if (lp_sys_rename(spool_path, exec_lpt) != 0) exec_lpt[0] = '\0';
    } else {
        exec_fd = lp_sys_open(spool_path, O_RDONLY, 0);
        lp_sys_unlink(spool_path);
    }
    spool_gone = 1;
    lp_tls.guard = g;
    errno = saved;
}

/* Write the held spool content back under its name; 0 or -1. */
static int restore_spool(int from) {
    int to = lp_sys_open(spool_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
    if (to < 0) return -1;
    long n;
    while ((n = lp_sys_copy_file_range(from, to, 1 << 30)) > 0) {}
    if (n < 0) { /* no copy_file_range here: copy through a buffer */
        char buf[16384];
        uint64_t off = 0;
        while ((n = lp_sys_pread(from, buf, sizeof buf, off)) > 0 && lp_sys_write(to, buf, (size_t)n) == n) off += (uint64_t)n;
    }
    lp_sys_close(to);
    return n == 0 ? 0 : -1;
}

/* The exec failed: the process goes on and its trace at exit will cover everything, under the
 * plain name again; the outgoing-image files are removed. */
void lp_exec_failed(void) {
    if (!spool_gone || lp_sys_getpid() != lp_pid) return;
    int saved = errno;
    uint8_t g = lp_tls.guard;
    lp_tls.guard = 1;
    int back = 0;
    if (exec_lpt[0]) back = lp_sys_rename(exec_lpt, spool_path) == 0;
    else if (exec_fd >= 0) back = restore_spool(exec_fd) == 0;
    if (exec_fd >= 0) lp_sys_close(exec_fd);
    exec_fd = -1;
    if (back) {
        spool_gone = 0;
        lp_spool_resume();
    } else {
        lp_warn("the trace could not be kept across a failed exec; recording stops");
        fini_done = 1;
        lp_gate_set(0);
    }
    if (exec_json[0]) lp_sys_unlink(exec_json);
    if (exec_csv[0]) lp_sys_unlink(exec_csv);
    exec_lpt[0] = exec_json[0] = exec_csv[0] = '\0';
    lp_tls.guard = g;
    errno = saved;
}

/* What an exec'd program needs to be profiled too, saved at start-up while the environment is
 * still the one libprof was started with: libprof's own path and every LIBPROF* variable. */
static char inj_arena[8192];
static const char *inj_vars[48];
static int inj_count;

static void save_exec_env(void) {
    Dl_info self;
    if (dladdr((void *)lp_init_slow, &self) && self.dli_fname && self.dli_fname[0] == '/')
        snprintf(inj_self, sizeof inj_self, "%s", self.dli_fname);
    size_t used = 0;
    for (char **e = environ; *e && inj_count < 48; e++) {
        if (strncmp(*e, "LIBPROF", 7)) continue;
        size_t n = strlen(*e) + 1;
        if (used + n > sizeof inj_arena) break;
        memcpy(inj_arena + used, *e, n);
        inj_vars[inj_count++] = inj_arena + used;
        used += n;
    }
}

static int has_var(char *const envp[], const char *entry) {
    size_t n = strcspn(entry, "=") + 1;
    for (int i = 0; envp && envp[i]; i++)
        if (!strncmp(envp[i], entry, n)) return 1;
    return 0;
}

/* Is the LD_PRELOAD entry of `n` bytes at `entry` this libprof.so? */
static int is_self(const char *entry, size_t n) {
    return inj_self[0] && n == strlen(inj_self) && !strncmp(entry, inj_self, n);
}

/* Does the LD_PRELOAD value `v` name libprof? */
static int preload_has_self(const char *v) {
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ": ");
        if (is_self(p, n)) return 1;
        p += n;
        if (*p) p++;
    }
    return 0;
}

/* LIBPROF_CHILDREN=1 (the default): if `envp`, about to be passed to an exec, lost libprof (a
 * program that cleans its children's environment), build in `out` (room for `outlen` pointers)
 * a copy with libprof's LD_PRELOAD entry and the LIBPROF* variables put back, using `buf` for
 * the new LD_PRELOAD string. Returns 1 when `out` is to be used, 0 when `envp` is fine as it is
 * (or cannot be extended). No allocation: this runs in vfork children too. */
int lp_exec_env(char *const envp[], char **out, size_t outlen, char *buf, size_t buflen) {
    if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) != 2 || !lp_cfg.enabled || !lp_cfg.children || !inj_self[0])
        return 0;
    const char *pre = NULL;
    size_t n = 0;
    for (; envp && envp[n]; n++)
        if (!strncmp(envp[n], "LD_PRELOAD=", 11)) pre = envp[n] + 11;
    int need_pre = !pre || !preload_has_self(pre), need_vars = 0;
    for (int i = 0; i < inj_count; i++) need_vars |= !has_var(envp, inj_vars[i]);
    if (!need_pre && !need_vars) return 0;
    if (n + (size_t)inj_count + 2 > outlen) return 0;
    int w = snprintf(buf, buflen, "LD_PRELOAD=%s%s%s", inj_self, pre && *pre ? ":" : "", pre ? pre : "");
    if (w < 0 || (size_t)w >= buflen) return 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], "LD_PRELOAD=", 11)) out[k++] = envp[i];
    out[k++] = buf;
    for (int i = 0; i < inj_count; i++)
        if (!has_var(envp, inj_vars[i])) out[k++] = (char *)inj_vars[i];
    out[k] = NULL;
    return 1;
}

/* The status given to exit(), when the program called it (returning from main does not). */
int lp_exit_status = -1;

/* Runs from _dl_fini; a preloaded library is finalized after the program and its libraries, so
 * nearly every event reaches the trace. */
__attribute__((destructor)) static void lp_destructor(void) { lp_finish(lp_exit_status); }
