/* lineage.c: how a profiled process relates to the others of its run — the recorder's
 * counterpart of hooks/exec.c and hooks/process.c. The names it takes (a descendant's .PID, a
 * forked child's own name, never an earlier process's trace when a pid comes back), what it
 * leaves behind across an exec (the outgoing image's trace; libprof put back into a cleaned
 * environment), what it does when it gives up root, and the traces of processes that were
 * killed before they could write their own (converted by their parent, or by the next process of
 * the run that exits). The life of one process (start-up, fork, flush, conversion) is life.c's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lineage.h"
#include "config.h"
#include "log.h"
#include "spawn.h"
#include "state.h"
#include "tbuf.h"
#include "sys.h"
#include "lib/convert.h"
#include "lib/reader.h"

extern char **environ;

static int pid_named;           /* the output names carry this process's pid (%p, or .PID inserted) */
static uint64_t start_real_ns;  /* CLOCK_REALTIME when this process's spool was made */
static char inj_self[PATH_MAX]; /* this libprof.so's path (see save_exec_env) */
static void save_exec_env(void);

#define spool_path lpr_spool_name()

/* ---- names ------------------------------------------------------------------------------------ */

/* The name a forked child gives `path` (expanded from `pattern`): the pattern expanded again
 * with the child's pid when it has %p, else the parent's name with ".PID" inserted. */
static void child_name(char *path, size_t len, const char *pattern) {
    if (!path[0]) return;
    pid_named = 1;
    char tmp[PATH_MAX];
    if (pattern && *pattern && strstr(pattern, "%p") && lpr_expand_path(pattern, lpr_cfg.dir, &lpr_pattern, tmp) == 0 &&
        strlen(tmp) < len) {
        memcpy(path, tmp, strlen(tmp) + 1);
        return;
    }
    lpr_path_insert_pid(path, len, lpr_pid);
}

/* Is `entry` ("NAME=value") in the environment our parent process started with? A parent whose
 * environment we may not read (it runs as another user: we were started by a process that changed
 * user, subprocess.run(user=...)) is taken to have it — its trace may be at that name, and a file
 * of another user's is one we could not take over anyway. */
static int parent_env_has(const char *entry) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%ld/environ", (long)getppid());
    int fd = lpr_sys_open(path, O_RDONLY, 0);
    if (fd == -EACCES || fd == -EPERM) return 1;
    if (fd < 0) return 0;
    size_t want = strlen(entry) + 1, have = 0; /* bytes of the current entry matched so far */
    int match = 1, found = 0;
    long n;
    while (!found && (n = lpr_sys_read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n && !found; i++) {
            char c = buf[i];
            if (match && have < want && c == (have + 1 == want ? '\0' : entry[have])) {
                have++;
                if (have == want) found = 1;
            } else {
                match = 0;
            }
            if (c == '\0') {
                have = 0;
                match = 1;
            }
        }
    }
    lpr_sys_close(fd);
    return found;
}

static int descendant; /* started by a traced process, whose outputs' names we inherited */
int lpr_lineage_descendant(void) { return descendant; }

/* A process started by a traced process (make running gcc, a shell running a pipeline) inherits
 * LIBPROF_OUTPUT. If the pattern has no %p, the parent's trace and ours would share one name, so
 * ours gets ".PID" inserted before the extension. */
static void name_descendant(void) {
    const char *o = lpr_cfg.output_defaulted ? "" : lpr_cfg.output_pat, *c = lpr_cfg.csv_pat;
    const char *const vars[] = {"LIBPROF_OUTPUT", "LIBPROF_CSV", "LIBPROF"};
    const char *vals[] = {o, c, lpr_cfg.master_raw};
    int inherited = 0;
    for (size_t i = 0; i < 3 && !inherited; i++) {
        char entry[PATH_MAX + 32];
        if (!vals[i][0]) continue;
        snprintf(entry, sizeof entry, "%s=%s", vars[i], vals[i]);
        inherited = parent_env_has(entry);
    }
    if (!inherited) return;
    descendant = 1;
    if (lpr_cfg.output[0] && o[0] && !strstr(o, "%p"))
        lpr_path_insert_pid(lpr_cfg.output, sizeof lpr_cfg.output, lpr_pid);
    if (lpr_cfg.csv[0] && !lpr_cfg.output_defaulted && c[0] && !strstr(c, "%p"))
        lpr_path_insert_pid(lpr_cfg.csv, sizeof lpr_cfg.csv, lpr_pid);
    pid_named = 1;
}

/* Outputs named after the pid must not overwrite the trace of an earlier process that had the
 * same pid (pids are reused within a long run: 32768 of them here). Such a name that already
 * exists gets ".2", ".3" ... inserted. Returns 0, or -1 when no free name was found. */
static int avoid_reused_pid(void) {
    if (!pid_named) return 0;
    char out[sizeof lpr_cfg.output], csv[sizeof lpr_cfg.csv];
    struct stat st;
    for (long k = 1; k < 100; k++) {
        snprintf(out, sizeof out, "%s", lpr_cfg.output);
        snprintf(csv, sizeof csv, "%s", lpr_cfg.csv);
        if (k > 1 && ((out[0] && lpr_path_insert_pid(out, sizeof out, k)) ||
                      (csv[0] && lpr_path_insert_pid(csv, sizeof csv, k))))
            return -1;
        int taken = (out[0] && lpr_sys_stat(out, &st) == 0) || (csv[0] && lpr_sys_stat(csv, &st) == 0);
        if (!lpr_cfg.raw_output && out[0]) { /* a killed process's spool holds the name too */
            char spool[sizeof out + 8];
            snprintf(spool, sizeof spool, "%s.lpt", out);
            taken |= lpr_sys_stat(spool, &st) == 0;
        }
        if (!taken) {
            snprintf(lpr_cfg.output, sizeof lpr_cfg.output, "%s", out);
            snprintf(lpr_cfg.csv, sizeof lpr_cfg.csv, "%s", csv);
            return 0;
        }
    }
    return -1;
}

/* Make `path` absolute against the current directory: the spool is reopened for every write and
 * the outputs are written at exit, after the program may have changed directory. */
void lpr_make_absolute(char *path, size_t len) {
    if (!path[0] || path[0] == '/') return;
    char cwd[PATH_MAX], tmp[PATH_MAX];
    long n = LP_SYS(SYS_getcwd, cwd, sizeof cwd, 0);
    if (n <= 0 || cwd[0] != '/') return;
    if (snprintf(tmp, sizeof tmp, "%s/%s", cwd, path) >= (int)sizeof tmp) return;
    snprintf(path, len, "%s", tmp);
}

/* The names this process's outputs take (before its spool is made): `forked`, a forked child's
 * own; else the pattern's, made absolute, with .PID for a descendant of a process that writes
 * the same name; and in both cases never an earlier process's trace. 0, or -1 (said why). */
int lpr_lineage_names(int forked) {
    if (forked) {
        if (lpr_cfg.raw_output || lpr_cfg.output[0] || lpr_cfg.csv[0]) {
            child_name(lpr_cfg.output, sizeof lpr_cfg.output, lpr_cfg.output_pat);
            child_name(lpr_cfg.csv, sizeof lpr_cfg.csv, lpr_cfg.csv_pat);
        }
    } else {
        lpr_make_absolute(lpr_cfg.output, sizeof lpr_cfg.output);
        lpr_make_absolute(lpr_cfg.csv, sizeof lpr_cfg.csv);
        pid_named = strstr(lpr_cfg.output_pat, "%p") || strstr(lpr_cfg.csv_pat, "%p");
        name_descendant();
    }
    if (avoid_reused_pid() != 0) {
        lpr_say("every variant of %s is taken; not profiling", lpr_cfg.output[0] ? lpr_cfg.output : lpr_cfg.csv);
        return -1;
    }
    return 0;
}

/* Another live process owned the spool's name: the outputs take ".PID" too. */
void lpr_lineage_pid_inserted(void) {
    if (lpr_cfg.output[0]) lpr_path_insert_pid(lpr_cfg.output, sizeof lpr_cfg.output, lpr_pid);
    if (lpr_cfg.csv[0]) lpr_path_insert_pid(lpr_cfg.csv, sizeof lpr_cfg.csv, lpr_pid);
    pid_named = 1;
}

/* The spool exists since `real_ns` (CLOCK_REALTIME): spools of this run begin after it. */
void lpr_lineage_started(uint64_t real_ns) { start_real_ns = real_ns; }

/* At the end of the start-up (safe to look symbols up): what an exec'd program needs to be
 * profiled too, and where libprof-report is for converting a killed child's trace. */
void lpr_lineage_init(void) {
    save_exec_env();
    lpr_spawn_init(inj_self);
}

/* ---- LIBPROF_CHILDREN=0 ------------------------------------------------------------------------ */

/* LIBPROF_CHILDREN=0: take libprof out of the environment that child processes inherit —
 * its entry in LD_PRELOAD (other preloads stay) and every LIBPROF* variable. This runs in the
 * constructor, once the C library is up; the program itself then sees the cleaned environment. */
static int is_self(const char *entry, size_t n);

void lpr_lineage_forget_children(void) {
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
        if (k)
            setenv("LD_PRELOAD", keep, 1);
        else
            unsetenv("LD_PRELOAD");
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
    int fd = lpr_sys_open(path, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0) return 0;
    struct lp_file_header h;
    long n = lpr_read_header(fd, &h);
    lpr_sys_close(fd);
    return n == (long)sizeof h && (int)h.pid == pid;
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
    if (!is_csv && dot && lpr_cfg.csv[0] && lpr_cfg.output[0]) { /* LIBPROF=1: NAME.csv beside NAME.json */
        size_t a = strlen(lpr_cfg.output), b = strlen(lpr_cfg.csv);
        with_csv = a > 5 && a - 5 == b - 4 && !strcmp(lpr_cfg.output + a - 5, ".json") &&
                   !strncmp(lpr_cfg.output, lpr_cfg.csv, a - 5);
        snprintf(csv, sizeof csv, "%.*s.csv", (int)(dot - out), out);
    }
    /* what the child's own conversion left half-written */
    snprintf(tmp, sizeof tmp, "%s.tmp%d", out, pid);
    lpr_sys_unlink(tmp);
    if (with_csv) {
        snprintf(tmp, sizeof tmp, "%s.tmp%d", csv, pid);
        lpr_sys_unlink(tmp);
    }
    /* in a process of its own, so that the parent (chromium's browser, a test runner) does not
     * wait for it; in this process only when libprof-report cannot be found */
    char sigtxt[16];
    snprintf(sigtxt, sizeof sigtxt, "%d", sig);
    const char *args[20];
    int k = 0;
    args[k++] = spool;
    int timeline = lp_output_timeline(out);
    args[k++] = is_csv ? "--csv" : lp_outputs[timeline].option;
    args[k++] = out;
    if (with_csv) {
        args[k++] = "--csv";
        args[k++] = csv;
    }
    if (sig) {
        args[k++] = "--killed-by";
        args[k++] = sigtxt;
    }
    char log[PATH_MAX + 128];
    snprintf(log, sizeof log, "%s.log", out);
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", (unsigned)lpr_cfg.file_mode);
    args[k++] = "--file-mode";
    args[k++] = mode;
    args[k++] = "--remove-raw";
    args[k++] = "--log";
    args[k++] = log;
    args[k++] = "-q";
    args[k] = NULL;
    char why[32] = "";
    if (sig) snprintf(why, sizeof why, " (signal %d)", sig);
    int rc = lpr_spawn_report(args, spool, -1, 0);
    if (rc == LPR_SPAWN_BUSY) return; /* another process of the run is converting it */
    struct stat st;
    if (rc == 0 || lpr_sys_stat(spool, &st) != 0) {
        /* the trace says it is cut short (complete: false); a line only with LIBPROF_VERBOSE */
        if (rc == 0) lpr_info("process %d ended%s before writing its trace: what it wrote goes to %s", pid, why, out);
        return;
    }
    /* no libprof-report to run: here, holding the spool's lock as a converter would */
    int lk = lpr_sys_open(spool, O_RDONLY | O_NOFOLLOW, 0);
    if (lk < 0) return;
    if (LP_SYS(SYS_flock, lk, LOCK_EX | LOCK_NB, 0) != 0) {
        lpr_sys_close(lk);
        return;
    }
    struct lp_reader r;
    char err[256];
    if (lp_reader_open(&r, spool, err, sizeof err) != 0) {
        lpr_sys_close(lk);
        lpr_warn("process %d ended without writing its trace (signal %d); its raw trace is kept in %s (%s)", pid, sig,
                 spool, err);
        return;
    }
    struct lp_convert_opts o = {.path = {[LP_OUT_CSV] = is_csv     ? out
                                                        : with_csv ? csv
                                                                   : NULL},
                                .alloc_min = r.hdr.alloc_min,
                                .killed_by = sig,
                                .file_mode = (unsigned)lpr_cfg.file_mode};
    if (!is_csv) o.path[timeline] = out; /* the trace: Chrome JSON, or Perfetto's for NAME.pftrace */
    rc = lp_convert(&r, &o, err, sizeof err);
    lp_reader_close(&r);
    lpr_sys_close(lk);
    if (rc == 0) {
        lpr_sys_unlink(spool);
        lpr_info("process %d ended without writing its trace (signal %d); converted, cut short, to %s", pid, sig, out);
    } else {
        lpr_warn("process %d ended without writing its trace (signal %d); its raw trace is kept in %s (%s)", pid, sig,
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
    int dfd = lpr_sys_open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY, 0);
    if (dfd < 0) return;
    char buf[8192];
    long k;
    int stop = 0;
    while (!stop && (k = LP_SYS(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < k && !stop;) {
            const struct lpr_dirent64 *d = (const void *)(buf + off);
            off += d->reclen;
            size_t len = strlen(d->name);
            if (len < 5 || strcmp(d->name + len - 4, ".lpt") || (needle && !strstr(d->name, needle))) continue;
            char path[PATH_MAX + 64];
            if (snprintf(path, sizeof path, "%s/%s", dir, d->name) >= (int)sizeof path || !strcmp(path, spool_path))
                continue;
            stop = fn(path, arg);
        }
    }
    lpr_sys_close(dfd);
}

struct reaped {
    int pid, sig;
};

static int convert_if_reaped(const char *path, void *arg) {
    struct reaped *c = arg;
    if (!spool_of(path, c->pid)) return 0;
    convert_orphan(path, c->pid, c->sig);
    return 1;
}

/* Child `pid`, reaped, was killed by signal `sig`: its spool converted (handoff.c asks). */
void lpr_lineage_child_killed(int pid, int sig) {
    int saved = errno;
    uint8_t g = lpr_guard_hold(&lpr_tls);
    char pidtxt[24];
    snprintf(pidtxt, sizeof pidtxt, "%d", pid);
    struct reaped c = {pid, sig};
    each_spool(pidtxt, convert_if_reaped, &c); /* the child's name carries its pid (%p, .PID) */
    lpr_guard_restore(&lpr_tls, g);
    errno = saved;
}

/* At exit: spools of this run whose process is gone without converting them — killed while no
 * profiled parent was there to reap it (an orphan of a killed shell, say). "Of this run": begun
 * after this process began; "gone": no such pid any more, or a zombie nobody reaped (a live
 * process, even one converting its own trace at exit, is never touched). */
/* Does the spool open at `fd` end with its END chunk (its process finished: a raw trace kept on
 * purpose, LIBPROF_KEEP_RAW, or one its own converter is working on)? */
static int ends_whole(int fd) {
    struct stat st;
    struct lp_chunk_header ch;
    const uint64_t tail = sizeof ch + sizeof(struct lp_end);
    if (lpr_sys_fstat(fd, &st) != 0 || (uint64_t)st.st_size < LP_FILE_HEADER_SIZE + tail) return 0;
    if (lpr_sys_pread(fd, &ch, sizeof ch, (uint64_t)st.st_size - tail) != (long)sizeof ch) return 0;
    return ch.magic == LP_CHUNK_MAGIC && ch.type == LP_CHUNK_END && ch.length == sizeof(struct lp_end);
}

static int convert_if_orphan(const char *path, void *arg) {
    uint64_t since = *(uint64_t *)arg;
    int fd = lpr_sys_open(path, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0) return 0;
    struct lp_file_header h;
    long n = lpr_read_header(fd, &h);
    int whole = ends_whole(fd);
    lpr_sys_close(fd);
    if (n != (long)sizeof h || h.origin_real_ns < since || !h.pid || whole) return 0;
    /* killed together with this process's child that killed it (timeout -s KILL kills its group):
     * it may still be tearing down when this exit sweeps — waited for, a second at most */
    for (int i = 0; i < 100 && !lpr_pid_gone((int)h.pid) && lpr_pid_ending((int)h.pid); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        LP_SYS(SYS_nanosleep, &ts, NULL, 0);
    }
    if (!lpr_pid_gone((int)h.pid)) return 0;
    convert_orphan(path, (int)h.pid, 0);
    return 0;
}

/* When this process started (CLOCK_REALTIME, ns): the kernel's start time, which an exec keeps —
 * so `bash -c 'cmd; last'`, whose bash becomes `last`, still sweeps for cmd's children. 0 when
 * unknown. */
static uint64_t process_start_real_ns(void) {
    char buf[1024];
    if (lpr_sys_read_file("/proc/self/stat", buf, sizeof buf) <= 0) return 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p) return 0;
    for (int field = 2; field < 22 && p; field++) p = strchr(p + 1, ' '); /* to field 22: starttime */
    if (!p) return 0;
    unsigned long long ticks = strtoull(p + 1, NULL, 10), hz = getauxval(AT_CLKTCK);
    struct timespec boot, real;
    if (!hz || clock_gettime(CLOCK_BOOTTIME, &boot) != 0 || clock_gettime(CLOCK_REALTIME, &real) != 0) return 0;
    uint64_t boot_ns = (uint64_t)boot.tv_sec * 1000000000u + (uint64_t)boot.tv_nsec;
    uint64_t real_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
    uint64_t start_boot = ticks * (1000000000u / hz), margin = 2 * (1000000000u / hz); /* the tick's rounding */
    if (start_boot > boot_ns || boot_ns - start_boot + margin > real_ns) return 0;
    return real_ns - (boot_ns - start_boot) - margin;
}

void lpr_lineage_sweep(void) {
    if (lpr_cfg.raw_output) return;
    uint64_t since = start_real_ns, born = process_start_real_ns();
    if (born && born < since) since = born;
    each_spool(NULL, convert_if_orphan, &since);
}

/* What an exec'd program needs to be profiled too, saved at start-up while the environment is
 * still the one libprof was started with: libprof's own path and every LIBPROF* variable. */
static char inj_arena[8192];
static const char *inj_vars[48];
static int inj_count;

static char dir_entry[PATH_MAX + 16]; /* "LIBPROF_DIR=..." for an exec from another directory */

static void save_exec_env(void) {
    if (lpr_cfg.dir[0] == '/') snprintf(dir_entry, sizeof dir_entry, "LIBPROF_DIR=%s", lpr_cfg.dir);
    Dl_info self;
    if (dladdr((void *)lpr_lineage_init, &self) && self.dli_fname && self.dli_fname[0] == '/')
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
int lpr_exec_env(char *const envp[], char **out, size_t outlen, char *buf, size_t buflen) {
    if (!inj_self[0] || !lpr_cfg.enabled || !lpr_cfg.children) return 0; /* set-up not done, or not wanted */
    const char *pre = NULL;
    size_t n = 0;
    for (; envp && envp[n]; n++)
        if (!strncmp(envp[n], "LD_PRELOAD=", 11)) pre = envp[n] + 11;
    int need_pre = !pre || !preload_has_self(pre), need_vars = 0;
    for (int i = 0; i < inj_count; i++) need_vars |= !has_var(envp, inj_vars[i]);
    /* relative output paths stay where this run began, whatever directory the exec happens in */
    char cwd[PATH_MAX];
    int need_dir = dir_entry[0] && !has_var(envp, dir_entry) && LP_SYS(SYS_getcwd, cwd, sizeof cwd, 0) > 0 &&
                   strcmp(cwd, dir_entry + 12) != 0;
    if (!need_pre && !need_vars && !need_dir) return 0;
    if (n + (size_t)inj_count + 3 > outlen) return 0;
    size_t k = 0;
    if (need_pre) {
        int w = snprintf(buf, buflen, "LD_PRELOAD=%s%s%s", inj_self, pre && *pre ? ":" : "", pre ? pre : "");
        if (w < 0 || (size_t)w >= buflen) return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!need_pre || strncmp(envp[i], "LD_PRELOAD=", 11)) out[k++] = envp[i];
    if (need_pre) out[k++] = buf;
    for (int i = 0; i < inj_count; i++)
        if (!has_var(envp, inj_vars[i])) out[k++] = (char *)inj_vars[i];
    if (need_dir) out[k++] = dir_entry;
    out[k] = NULL;
    return 1;
}
