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
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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

/* ---- a followed run: the look asked of its follower ------------------------------------------
 * A run whose spool a follower converts (libprof-report --follow) gives back what it has read:
 * the look comes from the follower's pass. The follower listens on an abstract unix socket —
 * named by the spool's device and inode, so no file is made — and --live sends it its own
 * command line (parsed there by cli.c like any), its working directory, and its standard output
 * and error (as descriptors: the summary and any message go straight to them). A copy of the
 * follower's pass writes the outputs asked and, when the report's tables are wanted, the Chrome
 * trace of the run so far into the connection; its end is the look's end. */

static int address(const char *spool, struct sockaddr_un *a, socklen_t *len) {
    struct stat st;
    if (stat(spool, &st) != 0) return -1;
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "libprof-follow:%llx:%llx", (unsigned long long)st.st_dev,
                     (unsigned long long)st.st_ino);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    return 0;
}

int rp_live_listen(const char *spool) {
    struct sockaddr_un a;
    socklen_t len;
    if (address(spool, &a, &len) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && (bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 8) != 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int rp_live_ask(const char *spool, int argc, char **argv) {
    struct sockaddr_un a;
    socklen_t len;
    if (address(spool, &a, &len) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -2;
    if (connect(fd, (struct sockaddr *)&a, len) != 0) {
        int e = errno;
        close(fd);
        return e == ECONNREFUSED || e == ENOENT ? -1 : -2;
    }
    /* the request: its length, then the working directory and each argument, each ended by NUL */
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
    size_t n = strlen(cwd) + 1;
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 1;
    char *msg = malloc(4 + n), *p = msg + 4;
    if (!msg || n > UINT32_MAX) {
        free(msg);
        close(fd);
        return -2;
    }
    uint32_t n32 = (uint32_t)n;
    memcpy(msg, &n32, 4);
    p = stpcpy(p, cwd) + 1;
    for (int i = 0; i < argc; i++) p = stpcpy(p, argv[i]) + 1;
    int fds[2] = {STDOUT_FILENO, STDERR_FILENO};
    char ctl[CMSG_SPACE(sizeof fds)];
    memset(ctl, 0, sizeof ctl);
    struct iovec v = {msg, 4 + n};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent = sendmsg(fd, &m, MSG_NOSIGNAL);
    size_t done = sent > 0 ? (size_t)sent : 0;
    while (sent > 0 && done < 4 + n && (sent = send(fd, msg + done, 4 + n - done, MSG_NOSIGNAL)) > 0)
        done += (size_t)sent;
    free(msg);
    if (done != 4 + n) {
        close(fd);
        return -2;
    }
    shutdown(fd, SHUT_WR);
    return fd;
}

void rp_live_request_free(struct rp_live_request *q) {
    if (q->conn >= 0) close(q->conn);
    if (q->out_fd >= 0) close(q->out_fd);
    if (q->err_fd >= 0) close(q->err_fd);
    free(q->buf);
    free(q->argv);
    memset(q, 0, sizeof *q);
    q->conn = q->out_fd = q->err_fd = -1;
}

int rp_live_take(int listen_fd, struct rp_live_request *q) {
    memset(q, 0, sizeof *q);
    q->conn = q->out_fd = q->err_fd = -1;
    if (listen_fd < 0 || (q->conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC)) < 0) return 0;
    struct timeval tv = {5, 0}; /* (an asker that connects and says nothing is not waited for long) */
    setsockopt(q->conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint32_t n = 0;
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    struct iovec v = {&n, 4};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t got = recvmsg(q->conn, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); got > 0 && c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
            int fds[2];
            memcpy(fds, CMSG_DATA(c), sizeof fds);
            q->out_fd = fds[0], q->err_fd = fds[1];
        }
    if (got != 4 || n == 0 || n > (1u << 20) || q->out_fd < 0 || !(q->buf = malloc(n + 1))) goto bad;
    if (recv(q->conn, q->buf, n, MSG_WAITALL) != (ssize_t)n) goto bad;
    q->buf[n] = '\0';
    int argc = 0;
    for (uint32_t i = 0; i < n; i++) argc += q->buf[i] == '\0';
    if (argc < 2 || !(q->argv = calloc((size_t)argc + 1, sizeof *q->argv))) goto bad;
    char *p = q->buf;
    snprintf(q->cwd, sizeof q->cwd, "%s", p);
    p += strlen(p) + 1;
    for (q->argc = 0; p < q->buf + n; p += strlen(p) + 1) q->argv[q->argc++] = p;
    return 1;
bad:
    rp_live_request_free(q);
    return 0;
}
