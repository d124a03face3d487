/* live.c: libprof-report --live PID — the report of a process that is still running, from its
 * spool: the trace file the preload appends to while the program runs. What each thread has
 * written is there: all but its current chunk (LIBPROF_BUFFER_KB, 128 KiB by default: some
 * thousands of events) — a busy thread's view is milliseconds old, and a thread about to wait
 * (sleep, poll, epoll) writes what it has first. The process is not touched: the file is read, not the process, and nothing
 * is written into it. With --interval the report is printed again every S seconds until the
 * process ends (top-like); any output option makes a snapshot of the run so far. */
#define _GNU_SOURCE
#include <dirent.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libprof/format.h"
#include "cli.h"

/* The value of `name` in process `pid`'s environment (as it was exec'd), into buf; 0 if absent. */
static int env_of(long pid, const char *name, char *buf, size_t cap) {
    char path[64], env[65536];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, env, sizeof env - 1);
    close(fd);
    if (n <= 0) return 0;
    env[n] = '\0';
    size_t len = strlen(name);
    for (char *p = env; p < env + n; p += strlen(p) + 1)
        if (!strncmp(p, name, len) && p[len] == '=') {
            snprintf(buf, cap, "%s", p + len + 1);
            return 1;
        }
    return 0;
}

/* The newest file of `dir` that is a libprof trace of process `pid` (its header says so). */
static void scan(const char *dir, long pid, char *best, size_t cap, time_t *best_mtime) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < LP_FILE_HEADER_SIZE) continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct lp_file_header h;
        int ok = fd >= 0 && read(fd, &h, sizeof h) == (ssize_t)sizeof h && !memcmp(h.magic, LP_FORMAT_MAGIC, 8) &&
                 h.pid == (uint32_t)pid;
        if (fd >= 0) close(fd);
        if (ok && (!best[0] || st.st_mtime >= *best_mtime)) {
            snprintf(best, cap, "%s", path);
            *best_mtime = st.st_mtime;
        }
    }
    closedir(d);
}

/* The spool of process `pid`: libprof holds no descriptor on it between writes, so it is looked
 * for where the process's LIBPROF_OUTPUT (or LIBPROF=1's default) puts it — relative to
 * LIBPROF_DIR or the process's working directory — and in that directory itself. */
static int find_spool(long pid, char *path, size_t cap) {
    char out[4096] = "", base[4096] = "", dir[8192], host[256] = "", any[16];
    if (!env_of(pid, "LIBPROF_OUTPUT", out, sizeof out) && env_of(pid, "LIBPROF", any, sizeof any) && any[0] == '1')
        snprintf(out, sizeof out, "libprof_profiling/x");
    if (!env_of(pid, "LIBPROF_DIR", base, sizeof base)) snprintf(base, sizeof base, "/proc/%ld/cwd", pid);
    gethostname(host, sizeof host - 1);
    char d[4096] = "";
    size_t o = 0;
    const char *slash = strrchr(out, '/');
    for (const char *p = out; slash && p < slash && o + 300 < sizeof d; p++) { /* its directory, patterns expanded */
        if (*p != '%' || p + 1 >= slash) {
            d[o++] = *p;
            continue;
        }
        p++;
        if (*p == 'p')
            o += (size_t)snprintf(d + o, sizeof d - o, "%ld", pid);
        else if (*p == 'h')
            o += (size_t)snprintf(d + o, sizeof d - o, "%s", host);
        else if (*p == '%')
            d[o++] = '%';
        else
            break; /* a pattern not known from outside (%t, %e, %r): the base directory only */
    }
    d[o] = '\0';
    path[0] = '\0';
    time_t newest = 0;
    if (d[0] == '/') {
        scan(d, pid, path, cap, &newest);
    } else if (d[0]) {
        snprintf(dir, sizeof dir, "%s/%s", base, d);
        scan(dir, pid, path, cap, &newest);
    }
    if (!path[0]) scan(base, pid, path, cap, &newest);
    if (path[0]) return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH ? -ESRCH : -ENOENT;
}

int rp_live(const char *pid_text, double interval, int (*once)(const char *path), int quiet) {
    char *end;
    long pid = strtol(pid_text, &end, 10);
    if (*end || pid <= 0) {
        fprintf(stderr, "libprof-report: bad --live '%s' (a process id)\n", pid_text);
        return 2;
    }
    char path[4096];
    int rc = find_spool(pid, path, sizeof path);
    if (rc != 0) {
        if (rc == -ENOENT)
            fprintf(stderr,
                    "libprof-report: process %ld has no libprof trace open (not profiled, or already converting)\n",
                    pid);
        else
            fprintf(stderr, "libprof-report: process %ld: %s\n", pid, strerror(-rc));
        return 1;
    }
    for (int round = 0;; round++) {
        if (round && !quiet) printf("\n");
        if (interval > 0) {
            time_t now = time(NULL);
            char when[32];
            strftime(when, sizeof when, "%H:%M:%S", localtime(&now));
            printf("libprof live: process %ld at %s (every %.3g s; ^C to stop)\n", pid, when, interval);
        }
        fflush(stdout);
        if ((rc = once(path)) != 0) return rc;
        fflush(stdout);
        if (interval <= 0) return 0;
        struct timespec ts = {(time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9)};
        nanosleep(&ts, NULL);
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
        if (access(path, R_OK) != 0) return 0; /* it closed its trace: the run is over */
    }
}
