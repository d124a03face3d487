/* tbuf.c: per-thread event buffers, the registry that finds them all at exit, the spool file, and
 * the counts a thread kept without recording them (TALLY records).
 *
 * Each thread appends records to its own chunk (no lock, no syscall). A full chunk is written to
 * the spool with one pwritev at an offset reserved by an atomic add, so threads never wait for
 * each other and memory stays bounded however long the run is.
 *
 * Chunk memory belongs to a registry node, not to the thread: the node list is walked at exit to
 * flush threads that are still running, and a node whose thread exited is handed to the next new
 * thread. A thread's last TLS destructor flushes its chunk and gives the node back; any event
 * recorded after that (other libraries' destructors that run later) is written through directly
 * from a small TLS scratch record, so late events still reach the trace. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tbuf.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "own.h"
#include "state.h"
#include "lib/reader.h"
#include "sys.h"

struct lpr_thread {
    struct lpr_thread *next;  /* registry link; nodes are never unlinked, only reused */
    struct lpr_tls *tls;      /* the owning thread's state, valid while in_use */
    uint64_t *base;           /* record area */
    uint64_t *limit;          /* end of the record area */
    uint64_t *flushed;        /* records below this are already in the spool */
    uint64_t flushed_records; /* the owner's record count at `flushed` */
    uint64_t flushed_ns;      /* when the owner last wrote some of its records (CLOCK_MONOTONIC) */
    uint64_t flushed_ticks;   /* ... and in ticks since the origin: its records stamped before are written */
    size_t map_bytes;
    int lock; /* serialises flushes by the owner and by the exit path */
    int in_use;
    uint32_t tid;
    uint32_t nshort;                     /* entries of `shorts` with a count, since the last SHORT chunk */
    struct lpr_stack_cache *stack_cache; /* stacks.c's chains, kept with the node (as its chunk is) */
    void *family_state;                  /* a hook family's per-thread state (lpr_tbuf_family_state) */
    void *py_cache;                      /* python.c's locations (lpr_tbuf_py_cache) */
    struct {
        uint64_t count, ticks;
    } shorts[LP_CALL_COUNT]; /* LIBPROF_MIN_NS tallies */
    /* CPU samples (sample.c): a buffer of their own, written only by the owner's signal handler */
    uint64_t *sbase, *scur, *slimit;
    int slock; /* held by whoever writes them to the spool */
};

int lpr_spool_on;
uint64_t lpr_events_written, lpr_events_dropped, lpr_chunks_written;

static char spool_path[PATH_MAX + 32]; /* absolute: the program may chdir */
static int spool_pid;                  /* the process that owns the spool */
static struct lpr_thread *registry;
static uint32_t chunk_bytes;
static uint64_t spool_off;
static int spool_failed;
static uint64_t fail_off = UINT64_MAX; /* where the first failed chunk began */
static int map_failed_warned;
static pthread_key_t dtor_key;
static int dtor_key_ok;

uint32_t lpr_gettid(void) { return (uint32_t)lpr_sys_gettid(); }

static void lock(int *l) {
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(l, __ATOMIC_RELAXED)) __builtin_ia32_pause();
    }
}
static void unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* ---- the spool file ---------------------------------------------------------------------------
 * libprof holds no descriptor on the spool between writes: each chunk is written through a
 * descriptor opened (close-on-exec) for that write and closed right after. So a program that
 * dup2s onto a low descriptor, closes every descriptor before an exec (CPython's subprocess,
 * node's child_process, chromium's launcher) or lists its open descriptors never meets one of
 * libprof's. The cost is one open and one close per chunk (128 KiB by default): well under 1 % of
 * the time that chunk's events took to record.
 *
 * The program's descriptors and limits must never meet libprof's writes, so each write goes:
 *   - open with O_APPEND, and write with pwritev2(RWF_NOAPPEND) at the chunk's own offset: a
 *     stray write() of the program into that descriptor (a buggy thread writing to a number it
 *     closed) lands at the end of the file, where a later chunk overwrites it or the reader skips
 *     it, never over the header or a written chunk (kernels without RWF_NOAPPEND: plain open);
 *   - moved at once above the numbers programs use (F_DUPFD_CLOEXEC from a high floor), and
 *     checked to be the spool (device and inode) before any byte goes through it: the window in
 *     which a reused number can meet libprof's is the two system calls between open and dup;
 *   - never past the process's file-size limit (RLIMIT_FSIZE): a write that would pass it is not
 *     made — the kernel would kill the program with SIGXFSZ — and recording stops, said once;
 *   - at the descriptor limit (EMFILE), through a helper process that shares our memory but has
 *     a table of descriptors of its own (write_via_helper): nothing is lost to a full table.
 *
 * Without a held descriptor there is no flock either; a live process's spool is told apart by
 * its header, which names its pid (see claim). */

#define LP_RWF_NOAPPEND 0x20 /* linux/fs.h since 6.9; older headers lack it */
#define HIGH_FD_FLOOR 4096   /* where libprof's descriptor goes when the limit allows */

static uint64_t spool_dev, spool_ino; /* the spool's identity: a descriptor is checked against it */
static int noappend = -1;             /* pwritev2(RWF_NOAPPEND) works here: 1, doesn't: 0, unknown: -1 */

struct lpr_rlimit {
    uint64_t cur, max;
};
static uint64_t rlimit_cur(int what) {
    struct lpr_rlimit l;
    if (lpr_syscall6(SYS_prlimit64, 0, what, 0, (long)&l, 0, 0) != 0) return UINT64_MAX;
    return l.cur;
}

/* May this process take the existing file at `path`? 1 yes (ours, stale, or not a trace), 0 no
 * (the spool of another live process, or one being created this very moment), or -errno. */
static int claim(const char *path) {
    int fd = lpr_sys_open(path, O_RDONLY | O_NOFOLLOW, 0);
    if (fd == -EACCES || fd == -EPERM) return 0; /* another user's (a process that changed user): taken */
    if (fd < 0) return fd == -ENOENT ? 1 : fd;
    struct stat st;
    struct lp_file_header h;
    int rc = lpr_sys_fstat(fd, &st);
    long n = rc == 0 && S_ISREG(st.st_mode) ? lpr_read_header(fd, &h) : -EINVAL;
    lpr_sys_close(fd);
    if (rc < 0) return rc;
    if (n < 0) return (int)n;
    if (n == 0) {
        /* an empty file created in the last two seconds may be another process's spool whose
         * header is not written yet; anything else that is not a trace is overwritten, as a
         * trace at that name would be */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        return !(st.st_size == 0 && now.tv_sec - st.st_mtim.tv_sec < 2);
    }
    if ((int)h.pid == lpr_sys_getpid()) return 1; /* ours: the image before an exec */
    return lpr_pid_gone((int)h.pid);              /* its writer is gone: a stale spool */
}

/* Has process `pid` ended? No such process, or a zombie: dead, only not reaped yet (an orphan's
 * reaper may take its time). */
int lpr_pid_gone(int pid) {
    if (lpr_sys_kill(pid, 0) == -ESRCH) return 1;
    char path[48], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (lpr_sys_read_file(path, buf, sizeof buf) <= 0) return 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* Is process `pid` on its way out — exiting (the kernel's PF_EXITING), or with a SIGKILL
 * pending? Such a process is a zombie within moments, once its memory is torn down. */
int lpr_pid_ending(int pid) {
    char path[48], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (lpr_sys_read_file(path, buf, sizeof buf) <= 0) return 1;
    const char *p = strrchr(buf, ')');
    for (int field = 2; field < 9 && p; field++) p = strchr(p + 1, ' '); /* to field 9: flags */
    if (p && (strtoul(p + 1, NULL, 10) & 0x4)) return 1;                 /* PF_EXITING */
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    long n = lpr_sys_read_file(path, buf, sizeof buf);
    if (n <= 0) return 1;
    buf[n < (long)sizeof buf ? n : (long)sizeof buf - 1] = '\0';
    const char *const pending[] = {"\nSigPnd:", "\nShdPnd:"};
    for (int i = 0; i < 2; i++) {
        const char *q = strstr(buf, pending[i]);
        if (q && (strtoull(q + 8, NULL, 16) >> (SIGKILL - 1) & 1)) return 1;
    }
    return 0;
}

/* The file header of the trace open at `fd` — at offset 0, or its copy in the HEADER chunk when
 * that one is damaged: sizeof *h, 0 when neither is a libprof header, or -errno. */
long lpr_read_header(int fd, struct lp_file_header *h) {
    const uint64_t at[2] = {0, LP_HEADER_COPY_OFFSET};
    for (int i = 0; i < 2; i++) {
        long n = lpr_sys_pread(fd, h, sizeof *h, at[i]);
        if (n < 0) return n;
        if (n == (long)sizeof *h && !memcmp(h->magic, LP_FORMAT_MAGIC, 8)) return n;
    }
    return 0;
}

/* Note the identity of the file now at the spool's name (after it was made or put back). */
void lpr_spool_identify(void) {
    struct stat st;
    if (lpr_sys_stat(spool_path, &st) == 0) {
        spool_dev = st.st_dev;
        spool_ino = st.st_ino;
    }
}

/* One write of `cnt` pieces at `off`, however many system calls it takes. 0 or -errno. */
static long write_all(int fd, struct iovec *iov, int cnt, uint64_t off) {
    int idx = 0;
    while (cnt > 0) {
        long w = noappend == 1 ? lpr_syscall6(SYS_pwritev2, fd, (long)(iov + idx), cnt, (long)off, 0, LP_RWF_NOAPPEND)
                               : lpr_sys_pwritev(fd, iov + idx, cnt, off);
        if (w == -EINTR) continue;
        if (w <= 0) return w < 0 ? w : -EIO;
        off += (uint64_t)w;
        while (cnt > 0 && (size_t)w >= iov[idx].iov_len) {
            w -= (long)iov[idx].iov_len;
            idx++;
            cnt--;
        }
        if (cnt > 0) {
            iov[idx].iov_base = (char *)iov[idx].iov_base + w;
            iov[idx].iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* A descriptor on the spool for one write, moved above the program's numbers and checked to be
 * the spool; or -errno. */
static int open_spool(void) {
    int fd = lpr_sys_open(spool_path, O_WRONLY | O_NOFOLLOW | (noappend == 1 ? O_APPEND : 0), 0);
    if (fd < 0) return fd;
    uint64_t lim = rlimit_cur(RLIMIT_NOFILE);
    long floor = lim > HIGH_FD_FLOOR + 64 ? HIGH_FD_FLOOR : lim > 64 ? (long)lim - 32 : 0;
    if (floor > fd) {
        long hi = LP_SYS(SYS_fcntl, fd, F_DUPFD_CLOEXEC, floor);
        if (hi >= 0) {
            lpr_sys_close(fd);
            fd = (int)hi;
        }
    }
    struct stat st;
    if (lpr_sys_fstat(fd, &st) != 0 || st.st_dev != spool_dev || st.st_ino != spool_ino) {
        lpr_sys_close(fd); /* the number was the program's by the time we looked: never write there */
        return -EBADF;
    }
    return fd;
}

/* The helper of write_via_helper: runs on its own stack in our memory, with a copy of our table
 * of descriptors and of our limits, so what it opens and closes is invisible to the program. */
struct helper_job {
    struct iovec *iov;
    int cnt;
    uint64_t off;
    long result;
};

static int helper(void *arg) {
    struct helper_job *j = arg;
    uint64_t all = ~UINT64_C(0);
    lpr_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, 0, 8, 0, 0);
    struct lpr_rlimit l;
    if (lpr_syscall6(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)&l, 0, 0) == 0 && l.cur < l.max) {
        l.cur = l.max;
        lpr_syscall6(SYS_prlimit64, 0, RLIMIT_NOFILE, (long)&l, 0, 0, 0);
    }
    int fd = open_spool();
    if (fd == -EMFILE) { /* a full table: free a number in this copy of it (the program keeps its own) */
        lpr_sys_close(0);
        fd = open_spool();
    }
    j->result = fd < 0 ? fd : write_all(fd, j->iov, j->cnt, j->off);
    LP_SYS(SYS_exit, 0, 0, 0);
    return 0;
}

static long write_via_helper(struct iovec *iov, int cnt, uint64_t off) {
    const size_t stack = 64 * 1024;
    void *m = lpr_sys_mmap(NULL, stack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (lpr_sys_failed((long)m)) return -ENOMEM;
    struct helper_job j = {iov, cnt, off, -EMFILE};
    /* CLONE_VM | CLONE_VFORK: this thread waits until the helper is gone; exit signal 0: no
     * SIGCHLD, and wait(-1) without __WALL never sees it */
    int pid = clone(helper, (char *)m + stack, CLONE_VM | CLONE_VFORK, &j);
    if (pid > 0) {
        int st;
        while (lpr_syscall6(SYS_wait4, pid, (long)&st, __WCLONE, 0, 0, 0) == -EINTR) {}
    }
    lpr_sys_munmap(m, stack);
    return pid > 0 ? j.result : -EMFILE;
}

/* Write `cnt` pieces of `total` bytes at `off` of the spool. 0 or -errno. */
static long spool_pwrite(struct iovec *iov, int cnt, size_t total, uint64_t off) {
    if (off + total > rlimit_cur(RLIMIT_FSIZE)) return -EFBIG; /* the kernel would send SIGXFSZ */
    for (int attempt = 0; attempt < 4; attempt++) {
        int fd = open_spool();
        if (fd == -EMFILE || fd == -ENFILE) return write_via_helper(iov, cnt, off);
        if (fd == -EBADF) continue; /* our number was taken back in between: again */
        if (fd < 0) return fd;
        long rc = write_all(fd, iov, cnt, off);
        lpr_sys_close(fd);
        if (rc != -EBADF) return rc; /* EBADF: the program closed it under us */
    }
    return -EBADF;
}

/* Write the file header `h` at the start of `fd`, then a copy of it in a HEADER chunk (a damaged
 * header does not lose the trace); *total: their bytes. 0 or -errno. */
static long write_header(int fd, const struct lp_file_header *h, size_t *total) {
    struct lp_chunk_header ch = {.magic = LP_CHUNK_MAGIC, .type = LP_CHUNK_HEADER, .length = sizeof *h};
    struct iovec iov[3] = {{(void *)h, sizeof *h}, {&ch, sizeof ch}, {(void *)h, sizeof *h}};
    *total = 2 * sizeof *h + sizeof ch;
    if (*total > rlimit_cur(RLIMIT_FSIZE)) return -EFBIG;
    if (noappend < 0) noappend = 1; /* try RWF_NOAPPEND (Linux 6.9 and later) once */
    long w = write_all(fd, iov, 3, 0);
    if ((w == -EOPNOTSUPP || w == -EINVAL) && noappend == 1) {
        noappend = 0;
        w = write_all(fd, iov, 3, 0);
    }
    return w;
}

/* The spool is `fd`, named `chosen`, its header written (`total` bytes): writes may begin. */
static void spool_opened(int fd, const char *chosen, size_t total) {
    struct stat st;
    lpr_sys_fstat(fd, &st);
    spool_dev = st.st_dev;
    spool_ino = st.st_ino;
    lpr_sys_close(fd);
    snprintf(spool_path, sizeof spool_path, "%s", chosen);
    spool_pid = lpr_sys_getpid();
    spool_off = total;
    spool_failed = 0;
    fail_off = UINT64_MAX;
    __atomic_store_n(&lpr_spool_on, 1, __ATOMIC_RELEASE);
}

/* The spool made whole before it has a name: an unnamed file in `path`'s directory (O_TMPFILE)
 * gets the header, then the name (linked through /proc/self/fd: no privilege needed), so a
 * process killed while it starts leaves no empty file behind. 0 when done; -1 when the name is
 * taken or this system cannot (then the plain way below decides). */
static int create_whole(const char *path, int mode, const struct lp_file_header *h) {
    char dir[PATH_MAX], fdpath[32];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n + 2 > sizeof dir) return -1;
    if (slash)
        memcpy(dir, path, n ? n : 1), dir[n ? n : 1] = '\0';
    else
        dir[0] = '.', dir[1] = '\0';
    int fd = lpr_sys_open(dir, O_TMPFILE | O_WRONLY, mode);
    if (fd < 0) return -1;
    size_t total;
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    if (write_header(fd, h, &total) != 0 ||
        lpr_syscall6(SYS_linkat, AT_FDCWD, (long)fdpath, AT_FDCWD, (long)path, AT_SYMLINK_FOLLOW, 0) != 0) {
        lpr_sys_close(fd);
        return -1;
    }
    spool_opened(fd, path, total);
    return 0;
}

/* Create the spool at `path` and write the file header `h` to it, followed by a copy of it in a
 * HEADER chunk. If another live process owns that name (a child that inherited LIBPROF_OUTPUT
 * without %p) and `allow_rename`, ".PID" is inserted; the name taken is copied to `chosen`. A
 * symlink at the name is never followed. Returns 0 or -1 (errno set). */
int lpr_spool_create(const char *path, int allow_rename, const struct lp_file_header *h, char *chosen,
                     size_t chosen_len) {
    snprintf(chosen, chosen_len, "%s", path);
    int mode = (int)lpr_cfg.file_mode ? (int)lpr_cfg.file_mode : 0600;
    if (create_whole(chosen, mode, h) == 0) return 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = lpr_sys_open(chosen, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
        if (fd == -EEXIST) {
            int c = claim(chosen);
            if (c < 0) {
                errno = -c;
                return -1;
            }
            if (c == 1) {
                /* a file we take over keeps no wider mode than ours */
                fd = lpr_sys_open(chosen, O_WRONLY | O_TRUNC | O_NOFOLLOW, 0);
                struct stat old;
                if (fd >= 0 && lpr_sys_fstat(fd, &old) == 0)
                    LP_SYS(SYS_fchmod, fd, old.st_mode & (unsigned)mode & 0777, 0);
            } else if (!allow_rename || attempt == 1 ||
                       lpr_path_insert_pid(chosen, chosen_len, (long)lpr_sys_getpid()) != 0) {
                errno = EBUSY;
                return -1;
            } else {
                if (create_whole(chosen, mode, h) == 0) return 0;
                continue;
            }
        }
        if (fd < 0) {
            errno = -fd;
            return -1;
        }
        size_t total;
        long w = write_header(fd, h, &total);
        if (w != 0) {
            lpr_sys_close(fd);
            lpr_sys_unlink(chosen);
            errno = (int)-w;
            return -1;
        }
        spool_opened(fd, chosen, total);
        return 0;
    }
    errno = EBUSY;
    return -1;
}

const char *lpr_spool_name(void) { return spool_path; }

/* No more writes (the run is over, an exec is under way, or a forked child starts its own
 * spool); lpr_spool_resume takes them up again (the exec failed). */
void lpr_spool_stop(void) { __atomic_store_n(&lpr_spool_on, 0, __ATOMIC_RELEASE); }
void lpr_spool_resume(void) { __atomic_store_n(&lpr_spool_on, 1, __ATOMIC_RELEASE); }

/* Writes from another process than the spool's owner: a vfork child shares the owner's memory,
 * offsets included, and may write; the child of a raw clone() (fork without the C library's
 * atfork handlers) has a copy of them, so its writes would land on the owner's chunks. */
static int may_write(void) {
    int me = lpr_sys_getpid();
    if (LP_LIKELY(me == spool_pid)) return 1;
    return lpr_syscall6(SYS_kcmp, me, spool_pid, 1 /* KCMP_VM */, 0, 0, 0) == 0;
}

/* After a write failed (disk full): cut the file back to where the failed chunk began, so that
 * it ends on a whole chunk and has room again for the END chunk, which then says how many events
 * were dropped. Called once, at the end of the run. */
void lpr_spool_recover(void) {
    if (!lpr_spool_on || !__atomic_load_n(&spool_failed, __ATOMIC_RELAXED) || fail_off == UINT64_MAX) return;
    /* Threads write their chunks at offsets they reserved, at once: a chunk reserved after the
     * failed one may have been written whole before it failed. The cut takes such chunks too:
     * their events, counted as written, are counted as dropped instead. */
    /* The part past the cut is read, not mapped: it has holes where writes failed, and on a full
     * tmpfs a mapped hole is a page the kernel must allocate to read — it cannot, and the read is
     * a SIGBUS (the program died at its exit, once in fifty runs). read() returns a hole as
     * zeros, which are no chunk. */
    int fd = lpr_sys_open(spool_path, O_RDONLY | O_NOFOLLOW, 0);
    struct stat st;
    if (fd >= 0 && lpr_sys_fstat(fd, &st) == 0 && (uint64_t)st.st_size > fail_off) {
        size_t tail = (size_t)((uint64_t)st.st_size - fail_off), got = 0;
        uint8_t *m = lpr_sys_mmap(NULL, tail, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (!lpr_sys_failed((long)m)) {
            for (long n; got < tail && (n = lpr_sys_pread(fd, m + got, tail - got, fail_off + got)) > 0;)
                got += (size_t)n;
            uint64_t lost = lp_chunk_events(m, got, 0); /* (fail_off begins a chunk: 8-aligned) */
            __atomic_fetch_sub(&lpr_events_written, lost, __ATOMIC_RELAXED);
            __atomic_fetch_add(&lpr_events_dropped, lost, __ATOMIC_RELAXED);
            lpr_sys_munmap(m, tail);
        }
    }
    if (fd >= 0) lpr_sys_close(fd);
    if (lpr_sys_truncate(spool_path, fail_off) != 0) return;
    spool_off = fail_off;
    spool_failed = 0;
}

static void write_failed(uint64_t start, long why) {
    uint64_t prev = __atomic_load_n(&fail_off, __ATOMIC_RELAXED);
    while (start < prev &&
           !__atomic_compare_exchange_n(&fail_off, &prev, start, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    if (!__atomic_exchange_n(&spool_failed, 1, __ATOMIC_RELAXED)) {
        if (why == -EFBIG)
            lpr_say("the trace reached the process's file-size limit (ulimit -f); recording stops, the program "
                    "carries on");
        else
            lpr_say("cannot write the trace (%s); recording stops, the program carries on", strerror((int)-why));
    }
}

/* Append one chunk made of `a` and `b` (either may be empty) to the spool. Safe to call from any
 * thread at any time, and from a signal handler; returns 0, or -1 once writing has failed (the
 * failure is reported once). Touches neither errno nor any descriptor of the program's. */
int lpr_spool_write(uint16_t type, uint32_t tid, const void *a, size_t alen, const void *b, size_t blen) {
    if (!__atomic_load_n(&lpr_spool_on, __ATOMIC_ACQUIRE) || __atomic_load_n(&spool_failed, __ATOMIC_RELAXED))
        return -1;
    if (!may_write()) return -1;
    struct lp_chunk_header h = {
        .magic = LP_CHUNK_MAGIC,
        .type = type,
        .tid = tid,
        .length = (uint32_t)(alen + blen),
        .sync_ticks = lpr_ticks() - lpr_origin_ticks,
        .sync_mono_ns = lpr_mono_ns(),
    };
    /* Chunks are padded to 8 bytes so that every chunk's records are aligned in a mapping. */
    static const uint64_t zeros;
    size_t pad = (8 - ((alen + blen) & 7)) & 7;
    struct iovec iov[4] = {{&h, sizeof h}, {(void *)a, alen}, {(void *)b, blen}, {(void *)&zeros, pad}};
    size_t total = sizeof h + alen + blen + pad;
    uint64_t off = __atomic_fetch_add(&spool_off, total, __ATOMIC_RELAXED);
    long rc = spool_pwrite(iov, 4, total, off);
    if (rc == -EFAULT) {
        /* Memory of libprof's own that could not be read — a defect of libprof's, not of the disk:
         * this chunk alone is lost. Its place becomes a chunk every reader skips (a string of no
         * kind: the header and zeros), the loss is counted by the caller and noted in the trace. */
        static const uint64_t blank;
        h.type = LP_CHUNK_STRING;
        size_t z = alen + blen < sizeof blank ? alen + blen : sizeof blank;
        struct iovec fix[2] = {{&h, sizeof h}, {(void *)&blank, z}};
        if (spool_pwrite(fix, 2, sizeof h + z, off) == 0)
            lpr_warn("a chunk of the trace (type %u, %zu bytes) could not be read from libprof's memory: dropped",
                     (unsigned)type, alen + blen);
        else
            write_failed(off, rc);
        return -1;
    }
    if (rc != 0) {
        write_failed(off, rc);
        return -1;
    }
    __atomic_fetch_add(&lpr_chunks_written, 1, __ATOMIC_RELAXED);
    return 0;
}

/* Write the node's unflushed records (up to `upto`, the owner's `records` count there) as one
 * EVENTS chunk. Caller holds node->lock. */
static void flush_shorts(struct lpr_thread *n) {
    struct lp_short out[16]; /* (chunks of a few: a flush may run on a signal handler's small stack) */
    uint32_t k = 0;
    for (uint32_t c = 1; c < LP_CALL_COUNT; c++) {
        if (n->shorts[c].count) {
            out[k++] = (struct lp_short){c, 0, n->shorts[c].count, n->shorts[c].ticks};
            n->shorts[c].count = n->shorts[c].ticks = 0;
        }
        if (k && (k == sizeof out / sizeof out[0] || c == LP_CALL_COUNT - 1)) {
            if (lpr_spool_write(LP_CHUNK_SHORT, n->tid, out, k * sizeof out[0], NULL, 0) != 0)
                __atomic_fetch_add(&lpr_events_dropped, k, __ATOMIC_RELAXED);
            k = 0;
        }
    }
    n->nshort = 0;
}

/* Count a call under LIBPROF_MIN_NS instead of recording it (the owner thread only). */
void lpr_tbuf_count_short(struct lpr_tls *t, unsigned call, uint64_t ticks) {
    struct lpr_thread *n = t->thr;
    if (!n) return;
    n->shorts[call].count++;
    n->shorts[call].ticks += ticks;
    n->nshort = 1;
}

/* `ticks`: when `upto` was read (its records are all stamped before). */
static void flush_node(struct lpr_thread *n, uint64_t *upto, uint64_t records, uint64_t ticks) {
    if (n->nshort) flush_shorts(n);
    if (upto > n->flushed) {
        size_t words = (size_t)(upto - n->flushed);
        uint64_t recs = records - n->flushed_records;
        void (*first)(void) = __atomic_load_n(&lpr_spool_first, __ATOMIC_ACQUIRE);
        if (first) first(); /* the stacks these records name go first */
        if (lpr_spool_write(LP_CHUNK_EVENTS, n->tid, n->flushed, words * 8, NULL, 0) == 0)
            __atomic_fetch_add(&lpr_events_written, recs, __ATOMIC_RELAXED);
        else
            __atomic_fetch_add(&lpr_events_dropped, recs, __ATOMIC_RELAXED);
        n->flushed = upto;
        n->flushed_records = records;
    }
    n->flushed_ns = lpr_mono_ns();
    __atomic_store_n(&n->flushed_ticks, ticks, __ATOMIC_RELEASE);
}

static uint64_t ticks_now(void) { return lpr_ticks() - lpr_origin_ticks; }

/* The calling thread is about to wait (hooks/wait.c): what it recorded and has not written yet
 * is written now, if it last wrote more than IDLE_FLUSH_NS ago — so that a thread that goes
 * idle does not keep its last events from the spool (what libprof-report --live reads) until it
 * fills a chunk or ends. A thread that waits often writes at most 20 times a second.
 *
 * That write is inside the program's wait: it can take a while (a thread's first wait writes
 * all it recorded since it started, stacks and all), and a signal the program handles may come
 * meanwhile. Had it come while the thread slept, it would have interrupted the wait; here it
 * would be handled just before the wait began — and a program that checks for signals only up
 * to its wait (CPython's time.sleep: its handler just sets a flag) would then sleep through it.
 * So signals are held during the write, and 1 is returned when one the program handles came:
 * the wait returns EINTR at once, as it would have, once the handler has run. `during`: the
 * mask the wait itself sets (ppoll, pselect, epoll_pwait; NULL: the thread's own) — a signal it
 * blocks would not have interrupted it. libprof's own signals (the sampler's SIGTRAP, the
 * control signals) never do. */
#define IDLE_FLUSH_NS 50000000u

static uint64_t sigbit(int sig) { return sig > 0 && sig <= 64 ? UINT64_C(1) << (sig - 1) : 0; }

/* Among the signals `set` (kernel bits), one whose handler is the program's, not the default,
 * ignored, or libprof's own (one of libprof's handlers calls the program's where it has one). */
static int program_handles(uint64_t set) {
    Dl_info self, h;
    int own = dladdr((void *)lpr_tbuf_idle, &self) != 0;
    for (int sig = 1; sig <= 64; sig++) {
        if (!(set & sigbit(sig))) continue;
        struct {
            void *handler;
            unsigned long flags;
            void *restorer;
            uint64_t mask;
        } act;
        if (lpr_syscall6(SYS_rt_sigaction, sig, 0, (long)&act, 8, 0, 0) != 0) continue;
        if (act.handler == SIG_DFL || act.handler == SIG_IGN) continue;
        if (own && dladdr(act.handler, &h) && h.dli_fbase == self.dli_fbase) continue;
        return 1;
    }
    return 0;
}

/* Threads holding signals in lpr_tbuf_idle's write. A program that changes a signal's action
 * waits for them first (lpr_tbuf_held_settle, from hooks/signal.c): a signal held there then meets
 * the action it was sent under, as it would have in the wait. Without that, a thread that sent
 * SIGUSR1 to one on its way into a sleep and then set SIGUSR1 to SIG_IGN had the signal discarded
 * (the kernel drops a pending signal whose action becomes SIG_IGN), where the sleeper would have
 * run its handler. The wait is bounded: a write that takes longer is not waited for. */
static int held_now;
#define HELD_WAIT_NS 200000000u

void lpr_tbuf_held_settle(void) {
    if (!__atomic_load_n(&held_now, __ATOMIC_ACQUIRE) || lpr_tls.guard) return; /* (guard: the holder itself) */
    uint64_t until = lpr_mono_ns() + HELD_WAIT_NS;
    while (__atomic_load_n(&held_now, __ATOMIC_ACQUIRE) && lpr_mono_ns() < until) LP_SYS(SYS_sched_yield, 0, 0, 0);
}

int lpr_tbuf_idle(const sigset_t *during) {
    struct lpr_tls *t = &lpr_tls;
    if (t->state != LP_TLS_ACTIVE || t->guard || !lpr_spool_on) return 0;
    struct lpr_thread *n = t->thr;
    if ((t->cur <= n->flushed && !lpr_tally_any(&t->tally)) || lpr_mono_ns() - n->flushed_ns < IDLE_FLUSH_NS) return 0;
    /* (a fault in the write itself stays deliverable: blocked, the kernel would just kill) */
    uint64_t all = ~(sigbit(SIGSEGV) | sigbit(SIGBUS) | sigbit(SIGILL) | sigbit(SIGFPE)), old = 0, pending = 0,
             blocked = 0;
    if (lpr_syscall6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&all, (long)&old, 8, 0, 0) != 0) old = ~UINT64_C(0);
    __atomic_add_fetch(&held_now, 1, __ATOMIC_ACQ_REL);
    uint8_t g = lpr_guard_hold(t);
    lpr_tally_write(t); /* (before the lock: a full chunk flushes under it) */
    lock(&n->lock);
    flush_node(n, t->cur, t->records, ticks_now());
    unlock(&n->lock);
    int intr = 0;
    if (old != ~UINT64_C(0)) {
        if (LP_SYS(SYS_rt_sigpending, &pending, 8, 0) == 0) {
            if (during) memcpy(&blocked, during, sizeof blocked); /* (the kernel's 64 bits lead glibc's set) */
            uint64_t came = pending & ~old & ~blocked & ~sigbit(lpr_sample_signal()) & ~sigbit(lpr_cfg.signal) &
                            ~sigbit(lpr_cfg.snapshot_signal);
            intr = came && program_handles(came);
        }
        lpr_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0); /* (its handler runs here) */
    }
    __atomic_sub_fetch(&held_now, 1, __ATOMIC_ACQ_REL);
    lpr_guard_restore(t, g);
    return intr;
}

/* The node's caches are mirrored in its owner's TLS (lpr_stack_cache_of, lpr_py_cache_of): set
 * when made or when the node is attached, cleared when it is given away. */
struct lpr_stack_cache *lpr_tbuf_stack_cache(struct lpr_thread *n, size_t size) {
    if (LP_LIKELY(n->stack_cache != NULL)) return n->stack_cache;
    void *m = lpr_own_map(LP_OWN_STACKS, size, PROT_READ | PROT_WRITE, 0);
    if (!m) return NULL;
    if (n->tls == &lpr_tls) lpr_tls.scache = m;
    return n->stack_cache = m;
}

void *lpr_tbuf_family_state(struct lpr_thread *n, size_t size) {
    if (LP_LIKELY(n->family_state != NULL)) return n->family_state;
    void *m = lpr_own_map(LP_OWN_OTHER, size, PROT_READ | PROT_WRITE, 0);
    if (!m) return NULL;
    return n->family_state = m;
}

void *lpr_tbuf_py_cache(struct lpr_thread *n, size_t size) {
    if (LP_LIKELY(n->py_cache != NULL)) return n->py_cache;
    void *m = lpr_own_map(LP_OWN_PYTHON, size, PROT_READ | PROT_WRITE, 0);
    if (!m) return NULL;
    if (n->tls == &lpr_tls) lpr_tls.pycache = m;
    return n->py_cache = m;
}

uint64_t lpr_tbuf_events_written(void) { return __atomic_load_n(&lpr_events_written, __ATOMIC_RELAXED); }

static void thread_dtor(void *arg);

/* ---- the samples' buffer ---------------------------------------------------------------------
 * CPU samples are taken in a signal handler, which may interrupt the thread anywhere — in the
 * middle of a hook appending to the thread's chunk, too. So they go to a buffer of their own,
 * written only by that handler, and to the spool as SAMPLES chunks (a stream of the thread's
 * beside its events; the reader merges them by time). The buffer's lock is held while a sample
 * is stored and while the buffer is written out: the handler only tries (a sample that finds it
 * taken is dropped and counted), the exit path and a follower's scan write it under it. */

#define SAMPLE_BYTES (32 * 1024)

/* Write the samples recorded so far. Caller holds n->slock. */
static void flush_samples(struct lpr_thread *n) {
    uint64_t *cur = __atomic_load_n(&n->scur, __ATOMIC_ACQUIRE);
    if (!n->sbase || cur == n->sbase) return;
    void (*first)(void) = __atomic_load_n(&lpr_spool_first, __ATOMIC_ACQUIRE);
    if (first) first(); /* the stacks these samples name go first */
    lpr_spool_write(LP_CHUNK_SAMPLES, n->tid, n->sbase, (size_t)(cur - n->sbase) * 8, NULL, 0);
    __atomic_store_n(&n->scur, n->sbase, __ATOMIC_RELEASE);
}

static struct lpr_thread *attach_node(struct lpr_tls *t);

uint64_t *lpr_tbuf_sample_reserve(struct lpr_tls *t, unsigned words) {
    if (t->state == LP_TLS_NEW) { /* a thread's first record may be a sample */
        t->tid = lpr_gettid();
        t->thr = attach_node(t);
        if (!t->thr) {
            t->state = LP_TLS_FAILED;
            return NULL;
        }
        t->state = LP_TLS_ACTIVE;
        if (dtor_key_ok) pthread_setspecific(dtor_key, t->thr);
    }
    struct lpr_thread *n = t->state == LP_TLS_ACTIVE ? t->thr : NULL;
    if (!n) return NULL;
    if (!n->sbase) {
        void *m = lpr_own_map(LP_OWN_BUFFERS, SAMPLE_BYTES, PROT_READ | PROT_WRITE, 0);
        if (!m) return NULL;
        n->slimit = (uint64_t *)((char *)m + SAMPLE_BYTES);
        n->scur = n->sbase = m;
    }
    /* held from here to the commit: a follower's scan may write this buffer from another thread
     * (follow_scan); being written, the sample is dropped (and counted) — never waited for */
    if (__atomic_exchange_n(&n->slock, 1, __ATOMIC_ACQUIRE)) return NULL;
    uint64_t *r = n->scur;
    if (r + words > n->slimit) {
        flush_samples(n);
        r = n->scur;
    }
    return r;
}

void lpr_tbuf_sample_commit(struct lpr_tls *t, uint64_t *next) {
    __atomic_store_n(&t->thr->scur, next, __ATOMIC_RELEASE);
    unlock(&t->thr->slock);
}

/* Give the calling thread a chunk: a free registry node if there is one, else a new mapping. */
static struct lpr_thread *attach_node(struct lpr_tls *t) {
    struct lpr_thread *n;
    for (n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next) {
        if (!__atomic_load_n(&n->in_use, __ATOMIC_RELAXED) && !__atomic_exchange_n(&n->in_use, 1, __ATOMIC_ACQUIRE))
            break;
    }
    if (!n) {
        /* the node sits in front of its record area, rounded to a cache line */
        const size_t head = (sizeof *n + 63) & ~(size_t)63;
        size_t bytes = head + (size_t)chunk_bytes;
        void *m = lpr_own_map(LP_OWN_BUFFERS, bytes, PROT_READ | PROT_WRITE, 0);
        if (!m) return NULL;
        n = m;
        n->map_bytes = bytes;
        n->base = (uint64_t *)((char *)m + head);
        n->limit = n->base + chunk_bytes / 8;
        n->in_use = 1;
        n->next = __atomic_load_n(&registry, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&registry, &n->next, n, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
    }
    lock(&n->lock);
    n->tid = t->tid;
    n->tls = t;
    memset(n->shorts, 0, sizeof n->shorts);
    n->nshort = 0;
    n->flushed = n->base;
    n->flushed_records = t->records;
    n->flushed_ns = 0; /* never: the thread's first wait writes what it has (lpr_tbuf_idle) */
    n->flushed_ticks = ticks_now();
    t->cur = n->base;
    t->end = n->limit;
    t->scache = n->stack_cache;
    t->pycache = n->py_cache;
    unlock(&n->lock);
    return n;
}

/* ---- a followed spool ---------------------------------------------------------------------------
 * Once the spool is large enough (LIBPROF_FOLLOW), life.c starts a follower: libprof-report
 * converting the spool while the program runs (lp_reader_follow). It may convert a record only
 * when no thread can still write an earlier one, so the threads say how far that is: whichever
 * thread has just written a full chunk, at most every FOLLOW_FLUSH_NS, writes what each other
 * thread has held for longer than that (as the exit path does: under the node's lock, its owner
 * appending meanwhile), then a WATERMARK chunk — the earliest time a thread may still hold a
 * record from. A thread that waits in a hooked call writes on its way in (lpr_tbuf_idle); one
 * that holds nothing moves the watermark just by being looked at. No thread of libprof's own,
 * no signal: a program with no busy thread has nothing new to convert either. */
int lpr_follow_on;
uint64_t lpr_follow_at = UINT64_MAX;
void (*lpr_follow_due)(void);
void (*lpr_spool_first)(void);
static uint64_t last_scan_ns;
#define FOLLOW_FLUSH_NS 100000000u

static struct lpr_tls *live_tls(struct lpr_thread *n, struct lpr_tls *copy);

static void follow_scan(struct lpr_thread *self) {
    uint64_t now = lpr_mono_ns(), last = __atomic_load_n(&last_scan_ns, __ATOMIC_RELAXED);
    if (now - last < FOLLOW_FLUSH_NS ||
        !__atomic_compare_exchange_n(&last_scan_ns, &last, now, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    uint64_t wm = UINT64_MAX;
    for (struct lpr_thread *n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next) {
        if (!__atomic_load_n(&n->in_use, __ATOMIC_ACQUIRE)) continue;
        int counts = 1;
        if (n != self && now - n->flushed_ns >= FOLLOW_FLUSH_NS &&
            !__atomic_exchange_n(&n->lock, 1, __ATOMIC_ACQUIRE)) {
            struct lpr_tls copy;
            uint64_t ticks = ticks_now(); /* before its position is read */
            if (live_tls(n, &copy))
                flush_node(n, copy.cur, copy.records, ticks);
            else
                counts = 0; /* its thread is gone without giving the node back: it holds nothing new */
            unlock(&n->lock);
        }
        /* every thread's CPU samples so far, so that none comes after the watermark passed it */
        if (!__atomic_exchange_n(&n->slock, 1, __ATOMIC_ACQUIRE)) {
            flush_samples(n);
            unlock(&n->slock);
        }
        uint64_t f = __atomic_load_n(&n->flushed_ticks, __ATOMIC_ACQUIRE);
        if (counts && f < wm) wm = f;
    }
    if (wm != UINT64_MAX) lpr_spool_write(LP_CHUNK_WATERMARK, 0, &wm, sizeof wm, NULL, 0);
}

/* The slow half of lpr_reserve: first event of a thread, full chunk, or a thread that can no
 * longer record. */
uint64_t *lpr_reserve_slow(struct lpr_tls *t, unsigned words) {
    int saved = errno;
    uint64_t *r = NULL;
    switch (t->state) {
    case LP_TLS_NEW:
        t->tid = lpr_gettid();
        t->thr = attach_node(t);
        if (!t->thr) {
            t->state = LP_TLS_FAILED;
            if (!__atomic_exchange_n(&map_failed_warned, 1, __ATOMIC_RELAXED))
                lpr_warn("out of memory for a thread buffer; that thread's events are dropped and counted");
            break;
        }
        t->state = LP_TLS_ACTIVE;
        /* The key's value makes glibc run thread_dtor when this thread exits. */
        if (dtor_key_ok) pthread_setspecific(dtor_key, t->thr);
        r = t->cur;
        break;
    case LP_TLS_ACTIVE: {
        struct lpr_thread *n = t->thr;
        lock(&n->lock);
        flush_node(n, t->cur, t->records, ticks_now());
        n->flushed = n->base;
        t->cur = n->base;
        unlock(&n->lock);
        r = t->cur;
        if (__atomic_load_n(&lpr_follow_on, __ATOMIC_RELAXED)) follow_scan(n);
        if (LP_UNLIKELY(lpr_spool_offset() >= lpr_follow_at)) {
            void (*due)(void) = __atomic_load_n(&lpr_follow_due, __ATOMIC_ACQUIRE);
            if (due) due();
        }
        break;
    }
    case LP_TLS_LATE:
        t->cur = t->late_rec;
        r = t->cur;
        break;
    default: break;
    }
    if (r && r + words > t->end) r = NULL; /* a record larger than a chunk: cannot happen with valid settings */
    if (!r) __atomic_fetch_add(&lpr_events_dropped, 1, __ATOMIC_RELAXED);
    errno = saved;
    return r;
}

/* After a commit in late mode: write the record straight to the spool. */
void lpr_commit_late(struct lpr_tls *t) {
    t->records--; /* counted here instead */
    size_t words = (size_t)(t->cur - t->late_rec);
    if (words == 0) return;
    if (lpr_spool_write(LP_CHUNK_EVENTS, t->tid, t->late_rec, words * 8, NULL, 0) == 0)
        __atomic_fetch_add(&lpr_events_written, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&lpr_events_dropped, 1, __ATOMIC_RELAXED);
    t->cur = t->late_rec;
}

/* Names given to threads by the program's annotations (NVTX's nvtxNameOsThread), which the trace
 * shows instead of the kernel's: libprof does not rename a thread the program owns. */
#define LABELS 64
static struct {
    uint32_t tid; /* 0: free; published last */
    char name[48];
} labels[LABELS];
static unsigned nlabels;

void lpr_tbuf_thread_label(uint32_t tid, const char *name) {
    for (unsigned i = 0; i < LABELS && i < __atomic_load_n(&nlabels, __ATOMIC_ACQUIRE); i++)
        if (__atomic_load_n(&labels[i].tid, __ATOMIC_ACQUIRE) == tid) return; /* the first name stays */
    unsigned i = __atomic_fetch_add(&nlabels, 1, __ATOMIC_ACQ_REL);
    if (i >= LABELS || !tid) return;
    size_t n = strnlen(name, sizeof labels[i].name - 1);
    memcpy(labels[i].name, name, n);
    labels[i].name[n] = '\0';
    __atomic_store_n(&labels[i].tid, tid, __ATOMIC_RELEASE);
}

/* Write the name of thread `tid` to the spool: the one an annotation gave it, else the kernel's
 * (what pthread_setname_np/prctl last set). */
static void write_thread_name(uint32_t tid) {
    uint32_t key = LP_STR_THREAD_NAME;
    for (unsigned i = 0; i < LABELS && i < __atomic_load_n(&nlabels, __ATOMIC_ACQUIRE); i++)
        if (__atomic_load_n(&labels[i].tid, __ATOMIC_ACQUIRE) == tid) {
            lpr_spool_write(LP_CHUNK_STRING, tid, &key, sizeof key, labels[i].name, strlen(labels[i].name));
            return;
        }
    char path[64], name[32];
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    int fd = lpr_sys_open(path, O_RDONLY, 0);
    if (fd < 0) return;
    long n = lpr_sys_read(fd, name, sizeof name - 1);
    lpr_sys_close(fd);
    if (n <= 0) return;
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0')) n--;
    lpr_spool_write(LP_CHUNK_STRING, tid, &key, sizeof key, name, (size_t)n);
}

/* glibc calls this when a thread that recorded something exits. Re-arming the key for the first
 * rounds makes the final flush run in the last round, after other keys' destructors (which may
 * still allocate) have run. */
static void thread_dtor(void *arg) {
    struct lpr_tls *t = &lpr_tls;
    if (t->state != LP_TLS_ACTIVE || t->thr != arg) return;
    if (++t->dtor_round < PTHREAD_DESTRUCTOR_ITERATIONS) {
        pthread_setspecific(dtor_key, arg);
        return;
    }
    int saved = errno;
    uint8_t g = t->guard;
    t->guard = 1;
    struct lpr_thread *n = t->thr;
    lpr_tally_write(t);
    lock(&n->lock);
    flush_node(n, t->cur, t->records, ticks_now());
    lock(&n->slock);
    flush_samples(n);
    unlock(&n->slock);
    /* Switch to write-through before giving the node away. */
    t->cur = t->late_rec;
    t->end = t->late_rec + sizeof t->late_rec / 8;
    t->late = 1;
    t->tally.every = 1; /* (its last counts, written through one by one) */
    t->state = LP_TLS_LATE;
    t->thr = NULL;
    t->scache = t->pycache = NULL;
    n->tls = NULL;
    unlock(&n->lock);
    write_thread_name(t->tid);
    madvise(n->base, chunk_bytes, MADV_DONTNEED); /* keep RSS flat with many short threads */
    __atomic_store_n(&n->in_use, 0, __ATOMIC_RELEASE);
    t->guard = g;
    errno = saved;
}

/* Set the chunk size and arrange for thread-exit flushing. */
void lpr_tbuf_init(uint32_t buffer_bytes) {
    chunk_bytes = buffer_bytes & ~7u;
    dtor_key_ok = pthread_key_create(&dtor_key, thread_dtor) == 0;
    if (!dtor_key_ok) lpr_warn("no pthread key left; events of exiting threads are flushed only at process exit");
}

/* Flush every live thread's records (at exit; the other threads may still be running, which the
 * per-node lock and the release store in lpr_commit make safe). From a signal handler
 * (`from_signal`), a node whose lock is held — its owner was interrupted while flushing — is
 * skipped rather than waited for. */
/* Another thread's state, read without trusting that it still exists. A thread that exits after
 * its TLS destructors ran (its first record a CPU sample or a free taken during its teardown)
 * never gives its node back: its lpr_tls may since have been unmapped, or reused by another
 * thread. So it is copied through the kernel (process_vm_readv: an error, not a fault, when the
 * memory is gone) and believed only if it still names this node and its position lies in the
 * node's chunk. NULL when it does not. */
static struct lpr_tls *live_tls(struct lpr_thread *n, struct lpr_tls *copy) {
    struct lpr_tls *t = n->tls;
    if (!t) return NULL;
    if (t == &lpr_tls) {
        *copy = lpr_tls;
        return t;
    }
    struct iovec local = {copy, sizeof *copy}, remote = {t, sizeof *copy};
    if (lpr_syscall6(SYS_process_vm_readv, lpr_sys_getpid(), (long)&local, 1, (long)&remote, 1, 0) !=
        (long)sizeof *copy)
        return NULL;
    if (copy->thr != n || copy->state != LP_TLS_ACTIVE || copy->cur < n->base || copy->cur > n->limit) return NULL;
    return t;
}

/* A thread's counts not yet written (LIBPROF_ALLOC_SAMPLE), at the end: one TALLY record as a
 * chunk of its own, after the thread's last flush; the counts are then cleared in the thread (a
 * failed exec goes on counting). Caller holds node->lock. */
static void flush_tally(struct lpr_thread *n, struct lpr_tls *t, const struct lpr_tls *copy) {
    if (!lpr_tally_any(&copy->tally)) return;
    uint64_t rec[2 + LP_TALLY_WORDS];
    rec[0] = lpr_word0(LP_EV_TALLY, lpr_ticks());
    unsigned words = lpr_tally_pack(&copy->tally, rec + 1);
    if (lpr_spool_write(LP_CHUNK_EVENTS, n->tid, rec, (1 + words) * 8, NULL, 0) == 0)
        __atomic_fetch_add(&lpr_events_written, 1, __ATOMIC_RELAXED);
    struct lpr_tally zero = {.every = copy->tally.every, .last = copy->tally.last};
    if (t == &lpr_tls) {
        lpr_tls.tally = zero;
    } else { /* (through the kernel, as live_tls read it) */
        struct iovec local = {&zero, sizeof zero}, remote = {&t->tally, sizeof zero};
        lpr_syscall6(SYS_process_vm_writev, lpr_sys_getpid(), (long)&local, 1, (long)&remote, 1, 0);
    }
}

void lpr_tbuf_flush_all(int from_signal) {
    for (struct lpr_thread *n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next) {
        if (!__atomic_load_n(&n->in_use, __ATOMIC_ACQUIRE)) continue;
        if (from_signal) {
            if (__atomic_exchange_n(&n->lock, 1, __ATOMIC_ACQUIRE)) continue;
        } else {
            lock(&n->lock);
        }
        struct lpr_tls copy, *t;
        uint64_t ticks = ticks_now(); /* before its position is read */
        if ((t = live_tls(n, &copy)) != NULL) {
            flush_node(n, copy.cur, copy.records, ticks);
            flush_tally(n, t, &copy);
        }
        unlock(&n->lock);
        if (!__atomic_exchange_n(&n->slock, 1, __ATOMIC_ACQUIRE)) { /* (its handler has it: its samples are lost) */
            flush_samples(n);
            unlock(&n->slock);
        }
    }
}

/* The life of every thread libprof saw created and that is still running (an OpenMP worker, a
 * pool thread): its "thread" record ends now. Written as a one-record chunk of that thread after
 * its last flush, so its records stay in time order. */
void lpr_tbuf_close_lives(void) {
    uint64_t now = lpr_ticks();
    for (struct lpr_thread *n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next) {
        if (!__atomic_load_n(&n->in_use, __ATOMIC_ACQUIRE)) continue;
        lock(&n->lock);
        struct lpr_tls copy, *t = live_tls(n, &copy);
        if (t && t != &lpr_tls && copy.life_flow) {
            uint64_t rec[6] = {lpr_word0_timed(LP_EV_CALL, copy.life_t0),
                               lpr_word1(copy.life_t0, now),
                               lp_call_header(LP_CALL_THREAD_LIFE, 3, 0),
                               copy.life_creator,
                               copy.life_flow,
                               1};
            t->life_flow = 0;
            if (lpr_spool_write(LP_CHUNK_EVENTS, n->tid, rec, sizeof rec, NULL, 0) == 0)
                __atomic_fetch_add(&lpr_events_written, 1, __ATOMIC_RELAXED);
        }
        unlock(&n->lock);
    }
}

/* Name every thread that still holds a buffer (exited threads wrote their name on the way out). */
void lpr_tbuf_write_thread_names(void) {
    for (struct lpr_thread *n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next)
        if (__atomic_load_n(&n->in_use, __ATOMIC_ACQUIRE) && n->tls) write_thread_name(n->tid);
}

/* In a forked child: the parent's spool and the other threads' buffers are not ours to touch
 * (their threads do not exist here, and their locks may have been held at the fork). Forget
 * them all; the forking thread starts over with no buffer and a zero count, so none of the
 * parent's events can reach the child's trace. */
void lpr_tbuf_after_fork_child(void) {
    lpr_spool_stop(); /* the parent's: the child makes its own */
    registry = NULL;  /* the parent's nodes stay mapped, unused: copy-on-write, never touched */
    lpr_events_written = lpr_events_dropped = lpr_chunks_written = 0;
    map_failed_warned = 0;
    struct lpr_tls *t = &lpr_tls;
    t->cur = t->end = NULL;
    t->thr = NULL;
    t->scache = t->pycache = NULL;
    t->records = 0;
    t->range_depth = 0;
    t->life_flow = 0; /* this thread was not created in the child */
    t->late = 0;
    t->dtor_round = 0;
    t->state = LP_TLS_NEW;
    memset(&t->tally, 0, sizeof t->tally); /* the parent's counts */
}

/* Where the next chunk goes: after a failed exec the spool was copied back (core.c). */
uint64_t lpr_spool_offset(void) { return __atomic_load_n(&spool_off, __ATOMIC_RELAXED); }

/* ---- the counts a thread kept (LIBPROF_ALLOC_SAMPLE: hooks/alloc.c counts) ------------------------ */

/* The thread's counts since its last TALLY as one record, stamped now (the counts' end); the
 * counts start again from zero. The thread's own, or its final flush's. */
unsigned lpr_tally_pack(const struct lpr_tally *y, uint64_t out[1 + LP_TALLY_WORDS]) {
    uint64_t w[LP_TALLY_WORDS], mask = 0;
    _Static_assert(offsetof(struct lpr_tally, every) == LP_TALLY_WORDS * 8, "a TALLY is the tally's first words");
    memcpy(w, y, sizeof w);
    unsigned n = 1;
    for (unsigned i = 0; i < LP_TALLY_WORDS; i++)
        if (w[i]) {
            mask |= UINT64_C(1) << i;
            out[n++] = w[i];
        }
    out[0] = mask;
    return n;
}

void lpr_tally_write(struct lpr_tls *t) {
    struct lpr_tally *y = &t->tally;
    y->every = t->late ? 1 : LP_TALLY_EVERY;
    if (!lpr_tally_any(y)) return;
    uint64_t w[1 + LP_TALLY_WORDS];
    unsigned n = lpr_tally_pack(y, w);
    uint64_t *r = lpr_reserve(t, 1 + n);
    if (r == NULL) return;
    r[0] = lpr_word0(LP_EV_TALLY, lpr_ticks());
    memcpy(r + 1, w, n * 8);
    lpr_commit(t, r + 1 + n);
    memset(y, 0, offsetof(struct lpr_tally, every));
}
