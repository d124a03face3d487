/* exec.c: the exec family. Before the process image is replaced, its trace is written (as
 * "NAME.exec-EXE.json"; the new program takes NAME); if the exec fails, recording goes on. With
 * LIBPROF_CHILDREN=1 an environment that lost libprof gets it back, so the new program is
 * profiled too (uftrace does the same).
 *
 * glibc's execv/execvp/execl* call execve internally, not through the PLT, so each is wrapped
 * here and routed to one place. In a vfork child (another pid sharing our memory) only the
 * environment is touched, with no allocation. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <unistd.h>

#include "hook.h"

extern char **environ;

#define MAX_ENV 1024 /* pointers on the stack; a larger environment is left as it is */

typedef int (*execve_fn)(const char *, char *const[], char *const[]);

#define REALS(X) X(execve) X(execvpe) X(fexecve) X(posix_spawn) X(posix_spawnp)
REALS(LP_REAL_SLOT)

/* The environment an exec or spawn is to get: `envp`, or a copy in `f` with libprof put back.
 * `f` lives in the caller's frame (the stack: vfork children must not allocate). */
struct env_fix {
    char *env[MAX_ENV];
    char pre[PATH_MAX * 2 + 16];
};

static char *const *fixed_env(struct env_fix *f, char *const envp[]) {
    return lpr_exec_env(envp, f->env, MAX_ENV, f->pre, sizeof f->pre) ? f->env : envp;
}

/* The command line of an exec or spawn, for its record: path, then argv[1..] (on the stack). */
static size_t command_line(char *buf, size_t len, const char *path, char *const argv[]) {
    size_t o = 0;
    for (const char *p = path ? path : ""; *p && o < len; p++) buf[o++] = *p;
    for (size_t i = 1; argv && argv[0] && argv[i] && o < len; i++) {
        buf[o++] = ' ';
        for (const char *p = argv[i]; *p && o < len; p++) buf[o++] = *p;
    }
    return o;
}

/* An exec is an instant of the process family: what ran next (the trace ends here). */
static void record_exec(const char *path, char *const argv[]) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_PROC);
    if (!t) return;
    char buf[LP_CALL_MAX_STR];
    size_t n = command_line(buf, sizeof buf, path, argv);
    lpr_call_record(t, LP_CALL_EXEC, lpr_ticks(), 0, 0, NULL, buf, n);
}

/* execve (search = 0) or execvpe (search = 1), with libprof's trace written first and the
 * environment fixed. */
static int run_exec(int search, const char *path, char *const argv[], char *const envp[]) {
    execve_fn fn = search ? LP_REAL(execvpe) : LP_REAL(execve);
    if (!fn) LP_NOFN(-1);
    struct env_fix f;
    char *const *use = fixed_env(&f, envp);
    lpr_exec_check_static(path, search);
    record_exec(path, argv);
    lpr_exec_prepare();
    int rc = fn(path, argv, use);
    lpr_exec_failed(); /* still here: it failed */
    return rc;
}

LP_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) { return run_exec(0, path, argv, envp); }
LP_EXPORT int execv(const char *path, char *const argv[]) { return run_exec(0, path, argv, environ); }
LP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    return run_exec(1, file, argv, envp);
}
LP_EXPORT int execvp(const char *file, char *const argv[]) { return run_exec(1, file, argv, environ); }

LP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    if (!LP_REAL(fexecve)) LP_NOFN(-1);
    struct env_fix f;
    char *const *use = fixed_env(&f, envp);
    record_exec("(fexecve)", argv);
    lpr_exec_prepare();
    int rc = LP_REAL(fexecve)(fd, argv, use);
    lpr_exec_failed();
    return rc;
}

/* The variadic forms: collect the arguments on the stack (no allocation: vfork children). */
#define COLLECT_ARGS(first, ap, argv, n)                                                                             \
    do {                                                                                                             \
        va_start(ap, first);                                                                                         \
        (argv)[0] = (char *)(first);                                                                                 \
        (n) = 1;                                                                                                     \
        while ((n) < (int)(sizeof(argv) / sizeof(argv)[0]) - 1 && ((argv)[(n)] = va_arg(ap, char *)) != NULL) (n)++; \
        (argv)[(n)] = NULL;                                                                                          \
    } while (0)

LP_EXPORT int execl(const char *path, const char *arg, ...) {
    char *argv[1024];
    va_list ap;
    int n;
    COLLECT_ARGS(arg, ap, argv, n);
    va_end(ap);
    return run_exec(0, path, argv, environ);
}

LP_EXPORT int execlp(const char *file, const char *arg, ...) {
    char *argv[1024];
    va_list ap;
    int n;
    COLLECT_ARGS(arg, ap, argv, n);
    va_end(ap);
    return run_exec(1, file, argv, environ);
}

LP_EXPORT int execle(const char *path, const char *arg, ...) {
    char *argv[1024];
    va_list ap;
    int n;
    COLLECT_ARGS(arg, ap, argv, n);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return run_exec(0, path, argv, envp);
}

/* posix_spawn runs its child through glibc's internal exec, out of our reach: the environment is
 * fixed here, in the parent, before the child is made. */
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                        char *const[], char *const[]);

static int run_spawn(spawn_fn fn, pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                     const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    if (!fn) return ENOSYS;
    struct env_fix f;
    char *const *use = fixed_env(&f, envp);
    struct lpr_tls *t = lpr_call_begin(LP_FAM_PROC);
    uint64_t t0 = t ? lpr_ticks() : 0;
    pid_t child = 0;
    int r = fn(pid ? pid : &child, path, fa, attr, argv, use);
    if (t) {
        char buf[LP_CALL_MAX_STR];
        size_t n = command_line(buf, sizeof buf, path, argv);
        uint64_t a[2] = {(uint64_t)(int64_t)r, (uint64_t)(int64_t)(r == 0 ? (pid ? *pid : child) : 0)};
        lpr_call_record(t, LP_CALL_POSIX_SPAWN, t0, lpr_ticks(), 2, a, buf, n);
    }
    return r;
}

LP_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    lpr_exec_check_static(path, 0);
    return run_spawn(LP_REAL(posix_spawn), pid, path, fa, attr, argv, envp);
}

LP_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    lpr_exec_check_static(file, 1);
    return run_spawn(LP_REAL(posix_spawnp), pid, file, fa, attr, argv, envp);
}
