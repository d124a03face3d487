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
 * The intermediate exits at once and is reaped here with __WCLONE, so the converter is an orphan
 * that init (or the nearest subreaper) reaps. A caller that must wait for the result (a crash:
 * the process may not end before its trace is safe) starts the converter directly as its child,
 * exit signal 0, and waits for it with a time limit. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lp.h"
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
    int detach; /* 1: the intermediate of a detached start */
};

/* The environment without LD_PRELOAD and LIBPROF*: the converter is not to be profiled. */
#define MAX_ENV 1024
static void clean_env(char **out) {
    size_t k = 0;
    for (char **e = environ; e && *e && k < MAX_ENV - 1; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "LIBPROF", 7)) out[k++] = *e;
    out[k] = NULL;
}

/* In the converter: only raw system calls until the exec. */
__attribute__((noreturn)) static void exec_report(const struct job *j) {
    LP_SYS(SYS_setsid, 0, 0, 0);
    int null = lpr_sys_open("/dev/null", O_RDONLY, 0); /* no stdin of the program's */
    if (null >= 0) {
        LP_SYS(SYS_dup2, null, 0, 0);
        if (null != 0) lpr_sys_close(null);
    }
    lpr_syscall6(SYS_execve, (long)report_path, (long)j->argv, (long)j->envp, 0, 0, 0);
    LP_SYS(SYS_exit_group, 127, 0, 0);
    __builtin_unreachable();
}

/* The intermediate: runs on its own stack, in our memory; makes the converter and leaves. */
static int intermediate(void *arg) {
    const struct job *j = arg;
    long pid = LP_SYS(SYS_clone, SIGCHLD, 0, 0); /* fork-like: a copy of this address space */
    if (pid == 0) exec_report(j);
    LP_SYS(SYS_exit, 0, 0, 0);
    return 0;
}

/* Run libprof-report with `args` (NULL-terminated, without argv[0]). `wait_ms` < 0: detached,
 * return at once; else wait up to `wait_ms` for it to finish. Returns its exit status, 0 when
 * detached, or -1 when it could not be started (or did not finish in time). */
int lpr_spawn_report(const char *const *args, int wait_ms) {
    if (!report_path[0]) return -1;
    char *argv[32];
    size_t n = 0;
    argv[n++] = report_path;
    for (size_t i = 0; args[i] && n < 31; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    char *envp[MAX_ENV];
    clean_env(envp);
    struct job j = {argv, envp, wait_ms < 0};
    int saved = errno;
    int rc = -1;
    if (wait_ms < 0) {
        static char stack[16384] __attribute__((aligned(16)));
        static int busy;
        if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE)) goto out; /* one start at a time */
        int pid = clone(intermediate, stack + sizeof stack, CLONE_VM | CLONE_VFORK, &j);
        if (pid > 0) {
            int st;
            lpr_syscall6(SYS_wait4, pid, (long)&st, __WCLONE, 0, 0, 0);
            rc = 0;
        }
        __atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
    } else {
        long pid = LP_SYS(SYS_clone, 0 /* exit signal 0 */, 0, 0);
        if (pid == 0) exec_report(&j);
        if (pid > 0) {
            int st = 0;
            for (int waited = 0;; waited += 10) {
                long r = lpr_syscall6(SYS_wait4, pid, (long)&st, __WCLONE | WNOHANG, 0, 0, 0);
                if (r == pid) {
                    rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
                    break;
                }
                if (r < 0 || waited >= wait_ms) break; /* left to run on its own */
                struct timespec ts = {0, 10 * 1000 * 1000};
                LP_SYS(SYS_nanosleep, &ts, NULL, 0);
            }
        }
    }
out:
    errno = saved;
    return rc;
}
