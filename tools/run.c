/* run.c: libprof-report as a process among the profiled ones — where its messages go (--log), the
 * modes of the files it writes, the limits it inherits from the program that started it, and
 * --wait, the way a script waits for a trace that a background conversion is still writing, and
 * --hold-events, the process that keeps the CPU sampler's events open for a profiled program. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "libprof/format.h"

static const char *log_path;
static int log_fd = -1;

/* At exit: a log that received nothing is not left behind. */
static void drop_empty_log(void) {
    struct stat st;
    fflush(stdout);
    fflush(stderr);
    if (log_fd >= 0 && fstat(log_fd, &st) == 0 && st.st_size == 0) unlink(log_path);
}

/* The files this process creates get `mode` at most: the umask takes the rest away (a stricter
 * umask of the caller's stays). */
static void apply_mode(unsigned mode) {
    mode_t old = umask(0);
    umask(old | (0777 & ~mode));
}

int rp_setup_process(struct rp_cli *c) {
    /* Started by a profiled program, this process inherits its limits: a file-size limit must
     * give a clear error on the write that passes it, not kill the converter. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit l;
    if (getrlimit(RLIMIT_FSIZE, &l) == 0 && l.rlim_cur < l.rlim_max) {
        l.rlim_cur = l.rlim_max;
        setrlimit(RLIMIT_FSIZE, &l);
    }
    if (!c->file_mode) c->file_mode = 0600;
    apply_mode(c->file_mode);
    if (c->log) {
        log_fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (log_fd < 0) {
            fprintf(stderr, "libprof-report: cannot open %s: %s\n", c->log, strerror(errno));
            return -1;
        }
        fflush(stdout);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        log_path = c->log;
        atexit(drop_empty_log);
    }
    return 0;
}

/* Converting or merging never makes a trace readable by more users than its input was. */
void rp_inputs_mode(struct rp_cli *c, const char *const *paths, int n) {
    unsigned mode = c->file_mode;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0) mode &= (unsigned)st.st_mode & 0777;
    }
    mode |= 0600; /* whatever the input, its owner reads and writes what is written */
    if (mode != c->file_mode) {
        c->file_mode = mode;
        apply_mode(mode);
    }
}

/* ---- --wait --------------------------------------------------------------------------------------
 * A trace is complete when its raw spool is gone and the file is there. While the spool exists,
 * either its converter holds an exclusive flock on it (a background conversion, a killed child's:
 * wait on the lock), or the program that writes it is alive (wait for it to end), or neither —
 * then nobody will convert it, and --wait says so. */

static int alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap(void) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* The pid in the header of the spool open at `fd` (or its copy), 0 if unreadable. */
static int writer_of(int fd) {
    struct lp_file_header h;
    const off_t at[2] = {0, LP_HEADER_COPY_OFFSET};
    for (int i = 0; i < 2; i++)
        if (pread(fd, &h, sizeof h, at[i]) == (ssize_t)sizeof h && !memcmp(h.magic, LP_FORMAT_MAGIC, 8))
            return (int)h.pid;
    return 0;
}

int rp_wait(const char *file, double timeout, int quiet) {
    char spool[4096 + 8];
    size_t n = strlen(file);
    int raw = n > 4 && !strcmp(file + n - 4, ".lpt");
    snprintf(spool, sizeof spool, raw ? "%s" : "%s.lpt", file);
    double t0 = now_s();
    for (;;) {
        if (timeout > 0 && now_s() - t0 > timeout) {
            if (!quiet) fprintf(stderr, "libprof-report: %s: not complete after %g s\n", file, timeout);
            return 1;
        }
        int fd = open(spool, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            struct stat st;
            if (stat(file, &st) == 0) return 0; /* converted (or a raw trace whose writer is gone) */
            if (now_s() - t0 < 0.5) {           /* a conversion renames its output into place an instant */
                nap();
                continue;
            }
            fprintf(stderr, "libprof-report: %s: no such trace, and no raw trace %s being written\n", file, spool);
            return 1;
        }
        int busy = flock(fd, LOCK_SH | LOCK_NB) != 0;
        int pid = writer_of(fd);
        if (busy && timeout <= 0) { /* its converter: wait until it lets go */
            flock(fd, LOCK_SH);
            busy = 0;
        }
        close(fd);
        if (busy || alive(pid)) {
            nap();
            continue;
        }
        if (raw) return 0; /* the raw trace is the trace, and its writer is gone */
        struct stat st, out;
        if (stat(spool, &st) != 0) continue;                                /* removed just now: look again */
        if (stat(file, &out) == 0 && out.st_mtime >= st.st_mtime) return 0; /* converted, raw trace kept */
        fprintf(stderr,
                "libprof-report: %s: the program ended and nobody converts its raw trace %s "
                "(libprof-report %s --chrome %s)\n",
                file, spool, spool, file);
        return 1;
    }
}

/* ---- --hold-events --------------------------------------------------------------------------------
 * The preload's CPU sampler opens perf events that live as long as a descriptor on them, and the
 * program's table must hold none of libprof's: this process holds them (descriptors 3 .. 2+N, as
 * the preload placed them) in a table of its own. Descriptor 3+N is a page shared with the program:
 * its first word set to 1 asks us to go — we close the events, set 2, wake the program and end.
 * We also end when the program does (a pidfd on it, looked at every second). */
int rp_hold_events(const char *spec) {
    int pid = 0, n = 0;
    if (sscanf(spec, "%d:%d", &pid, &n) != 2 || pid <= 0 || n < 1 || n > 4096) {
        fprintf(stderr, "libprof-report: --hold-events takes PID:N\n");
        return 2;
    }
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    int *word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 3 + n, 0);
    close(3 + n);
    if (word == MAP_FAILED) return 1;
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    for (;;) {
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == 1) break;
        struct pollfd p = {pfd, POLLIN, 0};
        if (pfd >= 0 ? poll(&p, 1, 0) > 0 : kill(pid, 0) != 0) break; /* the program has ended */
        struct timespec second = {1, 0};
        syscall(SYS_futex, word, FUTEX_WAIT, 0, &second, NULL, 0);
    }
    for (int i = 0; i < n; i++) close(3 + i);
    __atomic_store_n(word, 2, __ATOMIC_RELEASE);
    syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
    return 0;
}
