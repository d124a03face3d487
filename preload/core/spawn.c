/* spawn.c: running libprof-report in a process of its own, without the program noticing — to
 * convert the trace of a child that was killed before it could, and (LIBPROF_CONVERT=background,
 * crashes) a process's own trace.
 *
 * The program must not see that process: not as a child its wait(-1) could reap, not as a
 * SIGCHLD, not through an inherited descriptor, not as a copy of itself running its atfork
 * handlers. So the converter is started by two raw clone() calls and no C library fork:
 *   1. an intermediate with exit signal 0 (never a SIGCHLD; wait(-1) without __WALL ignores it),
 *      sharing our memory and stopping us until it is gone (CLONE_VM | CLONE_VFORK), on a small
 *      stack of its own;
 *   2. from it, the converter: a fork-like copy that makes its own session and execs
 *      libprof-report with libprof taken out of its environment (so it is not profiled).
 * The intermediate is reaped here with __WCLONE; the converter, its child, is never ours (the
 * kernel would make an exec'd child of ours signal SIGCHLD whatever exit signal it was cloned
 * with). For a detached start the intermediate exits at once, leaving the converter to init (or
 * the nearest subreaper). A caller that must wait for the result (a crash: the process may not
 * end before its trace is safe) has the intermediate wait for the converter, up to a time limit,
 * and hand back its exit status through the memory they share.
 *
 * One spool, one converter: the intermediate takes an exclusive flock on the spool before it
 * makes the converter, which inherits it (descriptor 3) and holds it until it exits. A second
 * start on the same spool (a parent reaping a killed child while the next exiting process sweeps
 * for it) finds the lock taken and starts nothing; `libprof-report --wait` waits on that lock.
 * The converter keeps none of the program's descriptors: standard input is /dev/null, standard
 * output and error too for a detached one (its messages go to the --log file its caller names),
 * every other descriptor but the lock is closed. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"
#include "state.h"
#include "sys.h"

extern char **environ;

static char report_path[PATH_MAX];

/* Where libprof-report is: beside libprof.so (the build tree), or in ../bin (an installation). */
void lpr_spawn_init(const char *self) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", self);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    const char *const tries[] = {"%s/libprof-report", "%s/../bin/libprof-report"};
    for (size_t i = 0; i < 2; i++) {
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, tries[i], dir) >= (int)sizeof p) continue;
        if (LP_SYS(SYS_access, p, X_OK, 0) == 0) {
            snprintf(report_path, sizeof report_path, "%s", p);
            return;
        }
    }
}

int lpr_spawn_available(void) { return report_path[0] != '\0'; }

struct job {
    char *const *argv;
    char **envp;
    const char *lock; /* the spool to lock for the converter's life (NULL: none) */
    int lock_fd;
    int wait_ms;   /* < 0: detached */
    int to_stderr; /* its standard output is our standard error */
    int result;    /* set by the intermediate: see lpr_spawn_report */
    uint64_t mask; /* the caller's signal mask, for the converter */
};

/* The environment without LD_PRELOAD and LIBPROF* (but LIBPROF_LINES, which the conversion reads):
 * the converter is not to be profiled. */
#define MAX_ENV 1024
static void clean_env(char **out) {
    size_t k = 0;
    for (char **e = environ; e && *e && k < MAX_ENV - 1; e++)
        if ((strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "LIBPROF", 7)) || !strncmp(*e, "LIBPROF_LINES=", 14))
            out[k++] = *e; /* (how frames are named is the converter's to read) */
    out[k] = NULL;
}

/* In the converter: only raw system calls until the exec. */
__attribute__((noreturn)) static void exec_report(const struct job *j) {
    LP_SYS(SYS_setsid, 0, 0, 0);
    lpr_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&j->mask, 0, 8, 0, 0);
    /* the lock first, as descriptor 3 (without close-on-exec: it lives through the exec) */
    if (j->lock_fd >= 0 && j->lock_fd != 3) LP_SYS(SYS_dup2, j->lock_fd, 3, 0);
    if (j->lock_fd >= 0) LP_SYS(SYS_fcntl, 3, F_SETFD, 0);
    int null = lpr_sys_open("/dev/null", O_RDWR, 0); /* no stdin of the program's */
    if (null >= 0) {
        LP_SYS(SYS_dup2, null, 0, 0);
        if (!j->to_stderr) { /* detached: nothing of the program's held open, nothing written into it */
            LP_SYS(SYS_dup2, null, 1, 0);
            LP_SYS(SYS_dup2, null, 2, 0);
        }
    }
    if (j->to_stderr) LP_SYS(SYS_dup2, 2, 1, 0);
    LP_SYS(SYS_close_range, j->lock_fd >= 0 ? 4 : 3, ~0U, 0); /* and nothing else of the program's */
    lpr_syscall6(SYS_execve, (long)report_path, (long)j->argv, (long)j->envp, 0, 0, 0);
    LP_SYS(SYS_exit_group, 127, 0, 0);
    __builtin_unreachable();
}

/* The intermediate: runs on its own stack, in our memory; makes the converter and, if asked,
 * waits for it. Only raw system calls. */
static int intermediate(void *arg) {
    struct job *j = arg;
    /* no handler of the program's may run here, on this small stack, in its memory (a SIGCHLD
     * handler would, when the converter ends): every signal blocked; the converter unblocks
     * them before its exec (exec keeps the mask) */
    uint64_t all = ~UINT64_C(0), old = 0;
    lpr_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, 8, 0, 0);
    j->mask = old;
    /* this process's own limits (a copy of the program's): the converter is not the program */
    struct {
        uint64_t cur, max;
    } l;
    const int lims[2] = {RLIMIT_NOFILE, RLIMIT_FSIZE};
    for (int i = 0; i < 2; i++)
        if (lpr_syscall6(SYS_prlimit64, 0, lims[i], 0, (long)&l, 0, 0) == 0 && l.cur < l.max) {
            l.cur = l.max;
            lpr_syscall6(SYS_prlimit64, 0, lims[i], (long)&l, 0, 0, 0);
        }
    j->lock_fd = -1;
    if (j->lock) {
        int fd = lpr_sys_open(j->lock, O_RDONLY | O_NOFOLLOW, 0);
        if (fd == -EMFILE) { /* the program's table is full: this is a copy of it */
            lpr_sys_close(0);
            fd = lpr_sys_open(j->lock, O_RDONLY | O_NOFOLLOW, 0);
        }
        struct stat a, b;
        if (fd < 0) {
            j->result = -1; /* no spool (any more): nothing to convert */
            LP_SYS(SYS_exit, 0, 0, 0);
        }
        /* another converter has it, or had it and removed it while we opened it */
        if (LP_SYS(SYS_flock, fd, LOCK_EX | LOCK_NB, 0) != 0 || lpr_sys_fstat(fd, &a) != 0 ||
            lpr_sys_stat(j->lock, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
            j->result = LPR_SPAWN_BUSY;
            LP_SYS(SYS_exit, 0, 0, 0);
        }
        j->lock_fd = fd;
    }
    long pid = LP_SYS(SYS_clone, SIGCHLD, 0, 0); /* fork-like: a copy of this address space */
    if (pid == 0) exec_report(j);
    j->result = pid > 0 ? 0 : -1;
    if (pid > 0 && j->wait_ms >= 0) {
        int st = 0;
        for (int waited = 0;; waited += 10) {
            long r = lpr_syscall6(SYS_wait4, pid, (long)&st, WNOHANG, 0, 0, 0);
            if (r == pid) {
                j->result = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
                break;
            }
            if (r < 0 && r != -EINTR) {
                j->result = -1;
                break;
            }
            if (waited >= j->wait_ms) { /* it carries on by itself */
                j->result = LPR_SPAWN_LATE;
                break;
            }
            struct timespec ts = {0, 10 * 1000 * 1000};
            LP_SYS(SYS_nanosleep, &ts, NULL, 0);
        }
    }
    LP_SYS(SYS_exit, 0, 0, 0);
    return 0;
}

/* Run libprof-report with `args` (NULL-terminated, without argv[0]); see spawn.h. Only raw system
 * calls and no allocation: a crashing process's signal handler calls it. One start at a time of
 * each kind (each has its intermediate's stack); a second one meanwhile fails. */
int lpr_spawn_report(const char *const *args, const char *lock, int wait_ms, int to_stderr) {
    if (!report_path[0]) return -1;
    static char stacks[2][16384] __attribute__((aligned(16)));
    static int busy[2];
    static char *envps[2][MAX_ENV]; /* static: a signal handler's stack may be small */
    int kind = wait_ms >= 0;
    if (__atomic_exchange_n(&busy[kind], 1, __ATOMIC_ACQUIRE)) return -1;
    char *argv[32];
    size_t n = 0;
    argv[n++] = report_path;
    for (size_t i = 0; args[i] && n < 31; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    clean_env(envps[kind]);
    struct job j = {argv, envps[kind], lock, -1, wait_ms, to_stderr, -1, 0};
    int saved = errno;
    /* CLONE_VFORK: we resume when the intermediate has exited, its result written */
    int pid = clone(intermediate, stacks[kind] + sizeof stacks[kind], CLONE_VM | CLONE_VFORK, &j);
    int rc = -1;
    if (pid > 0) {
        int st;
        lpr_syscall6(SYS_wait4, pid, (long)&st, __WCLONE, 0, 0, 0);
        rc = j.result;
    }
    __atomic_store_n(&busy[kind], 0, __ATOMIC_RELEASE);
    errno = saved;
    return rc;
}

/* ---- the CPU sampler's holder ------------------------------------------------------------------
 * `libprof-report --hold-events PID:N` keeps the sampler's perf events (sample.c) open in a table
 * of descriptors of its own: descriptors 3 .. 3+N-1, and 3+N a page of memory it shares with us
 * (a memfd) whose first word asks it to go. Started as the converter is, but without copying our
 * memory: the intermediate (CLONE_VM | CLONE_VFORK) starts a second process that shares our memory
 * and stops the intermediate until it has exec'd; that one moves the descriptors into place and
 * execs. The intermediate then exits, so the holder is not our child (no SIGCHLD, nothing for
 * wait(-1)); it goes when asked or when we end (it watches us through a pidfd). */
struct hold_job {
    const int *fds;
    int n, page_fd;
    char *const *argv;
    char **envp;
    int pid; /* the holder's, set by the intermediate */
};

static char hold_stack[2][16384] __attribute__((aligned(16)));

/* Shares our memory until its exec: raw system calls only. */
static int hold_exec(void *arg) {
    struct hold_job *j = arg;
    LP_SYS(SYS_setsid, 0, 0, 0); /* no terminal's signals */
    /* into 3 .. 3+n: first out of the way (above every target), then down, without close-on-exec */
    int tmp[LPR_HOLD_MAX + 1], m = j->n + 1;
    for (int i = 0; i < m; i++) {
        int from = i < j->n ? j->fds[i] : j->page_fd;
        tmp[i] = (int)LP_SYS(SYS_fcntl, from, F_DUPFD, 3 + m);
    }
    for (int i = 0; i < m; i++) LP_SYS(SYS_dup2, tmp[i], 3 + i, 0);
    int null = lpr_sys_open("/dev/null", O_RDWR, 0);
    if (null >= 0)
        for (int k = 0; k < 3; k++) LP_SYS(SYS_dup2, null, k, 0);
    LP_SYS(SYS_close_range, 3 + m, ~0U, 0);
    lpr_syscall6(SYS_execve, (long)report_path, (long)j->argv, (long)j->envp, 0, 0, 0);
    LP_SYS(SYS_exit, 127, 0, 0);
    return 0;
}

static int hold_intermediate(void *arg) {
    struct hold_job *j = arg;
    uint64_t all = ~UINT64_C(0);
    lpr_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, 0, 8, 0, 0);
    j->pid = clone(hold_exec, hold_stack[1] + sizeof hold_stack[1], CLONE_VM | CLONE_VFORK | SIGCHLD, j);
    LP_SYS(SYS_exit, 0, 0, 0);
    return 0;
}

int lpr_spawn_holder(const int *fds, int n, int page_fd) {
    if (!report_path[0] || n < 1 || n > LPR_HOLD_MAX) return -1;
    static char *envp[MAX_ENV];
    char spec[32];
    snprintf(spec, sizeof spec, "%d:%d", lpr_sys_getpid(), n);
    char *argv[] = {report_path, "--hold-events", spec, NULL};
    clean_env(envp);
    struct hold_job j = {fds, n, page_fd, argv, envp, -1};
    int saved = errno;
    int pid = clone(hold_intermediate, hold_stack[0] + sizeof hold_stack[0], CLONE_VM | CLONE_VFORK, &j);
    if (pid > 0) {
        int st;
        while (lpr_syscall6(SYS_wait4, pid, (long)&st, __WCLONE, 0, 0, 0) == -EINTR) {}
    }
    errno = saved;
    return pid > 0 ? j.pid : -1;
}
