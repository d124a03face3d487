/* tbuf.c: per-thread event buffers, the registry that finds them all at exit, and the spool file.
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
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lp.h"

LP_TLS struct lp_tls lp_tls;

struct lp_thread {
    struct lp_thread *next; /* registry link; nodes are never unlinked, only reused */
    struct lp_tls *tls;     /* the owning thread's state, valid while in_use */
    uint64_t *base;         /* record area */
    uint64_t *limit;        /* end of the record area */
    uint64_t *flushed;      /* records below this are already in the spool */
    uint64_t flushed_records; /* the owner's record count at `flushed` */
    size_t map_bytes;
    int lock;               /* serialises flushes by the owner and by the exit path */
    int in_use;
    uint32_t tid;
    uint32_t nshort;        /* entries of `shorts` with a count, since the last SHORT chunk */
    struct { uint64_t count, ticks; } shorts[LP_CALL_COUNT]; /* LIBPROF_MIN_NS tallies */
};

int lp_spool_fd = -1;
uint64_t lp_events_written, lp_events_dropped, lp_chunks_written;

static struct lp_thread *registry;
static uint32_t chunk_bytes;
static uint64_t spool_off;
static int spool_failed;
static uint64_t fail_off = UINT64_MAX; /* where the first failed chunk began */
static int map_failed_warned;
static pthread_key_t dtor_key;
static int dtor_key_ok;

uint32_t lp_gettid(void) { return (uint32_t)syscall(SYS_gettid); }

static void lock(int *l) {
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(l, __ATOMIC_RELAXED)) __builtin_ia32_pause();
    }
}
static void unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* Open the spool at `path` and take an exclusive lock on it, so that two live processes never
 * write one file: if another process (a child that inherited LIBPROF_OUTPUT without %p) holds it,
 * and `allow_rename`, the name gets ".PID" inserted and the new name is copied to `chosen`.
 * Returns 0 or -1 (errno set). */
int lp_spool_open(const char *path, int allow_rename, char *chosen, size_t chosen_len) {
    snprintf(chosen, chosen_len, "%s", path);
    for (int attempt = 0; attempt < 2; attempt++) {
        /* O_NOFOLLOW: a symlink planted at the name (in /tmp, say) is never written through */
        int fd = open(chosen, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) return -1;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (ftruncate(fd, 0) != 0) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
            }
            lp_spool_fd = fd;
            spool_off = 0;
            spool_failed = 0;
            return 0;
        }
        close(fd);
        if (!allow_rename || attempt == 1 || lp_path_insert_pid(chosen, chosen_len, (long)getpid()) != 0) {
            errno = EBUSY;
            return -1;
        }
    }
    errno = EBUSY;
    return -1;
}

/* After a write failed (disk full): cut the file back to where the failed chunk began, so that
 * it ends on a whole chunk and has room again for the END chunk, which then says how many events
 * were dropped. Called once, at the end of the run. */
void lp_spool_recover(void) {
    if (lp_spool_fd < 0 || !__atomic_load_n(&spool_failed, __ATOMIC_RELAXED) || fail_off == UINT64_MAX) return;
    if (ftruncate(lp_spool_fd, (off_t)fail_off) != 0) return;
    spool_off = fail_off;
    spool_failed = 0;
}

/* Append one chunk made of `a` and `b` (either may be empty) to the spool. Safe to call from any
 * thread at any time; returns 0, or -1 once writing has failed (the failure is reported once). */
int lp_spool_write(uint16_t type, uint32_t tid, const void *a, size_t alen, const void *b, size_t blen) {
    if (lp_spool_fd < 0 || __atomic_load_n(&spool_failed, __ATOMIC_RELAXED)) return -1;
    int saved = errno;
    struct lp_chunk_header h = {
        .magic = LP_CHUNK_MAGIC,
        .type = type,
        .tid = tid,
        .length = (uint32_t)(alen + blen),
        .sync_ticks = lp_ticks() - lp_origin_ticks,
        .sync_mono_ns = lp_mono_ns(),
    };
    /* Chunks are padded to 8 bytes so that every chunk's records are aligned in a mapping. */
    static const uint64_t zeros;
    size_t pad = (8 - ((alen + blen) & 7)) & 7;
    struct iovec iov[4] = {{&h, sizeof h}, {(void *)a, alen}, {(void *)b, blen}, {(void *)&zeros, pad}};
    size_t total = sizeof h + alen + blen + pad;
    uint64_t off = __atomic_fetch_add(&spool_off, total, __ATOMIC_RELAXED);
    const uint64_t start = off;
    int idx = 0, cnt = 4;
    while (cnt > 0) {
        ssize_t w = pwritev(lp_spool_fd, iov + idx, cnt, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            uint64_t prev = __atomic_load_n(&fail_off, __ATOMIC_RELAXED);
            while (start < prev && !__atomic_compare_exchange_n(&fail_off, &prev, start, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
            if (!__atomic_exchange_n(&spool_failed, 1, __ATOMIC_RELAXED))
                lp_warn("cannot write the trace (%s); recording stops, the program carries on",
                        w < 0 ? strerror(errno) : "short write");
            errno = saved;
            return -1;
        }
        off += (uint64_t)w;
        while (cnt > 0 && (size_t)w >= iov[idx].iov_len) {
            w -= (ssize_t)iov[idx].iov_len;
            idx++;
            cnt--;
        }
        if (cnt > 0) {
            iov[idx].iov_base = (char *)iov[idx].iov_base + w;
            iov[idx].iov_len -= (size_t)w;
        }
    }
    __atomic_fetch_add(&lp_chunks_written, 1, __ATOMIC_RELAXED);
    errno = saved;
    return 0;
}

/* Write the node's unflushed records (up to `upto`, the owner's `records` count there) as one
 * EVENTS chunk. Caller holds node->lock. */
static void flush_shorts(struct lp_thread *n) {
    struct lp_short out[LP_CALL_COUNT];
    uint32_t k = 0;
    for (uint32_t c = 1; c < LP_CALL_COUNT; c++) {
        if (!n->shorts[c].count) continue;
        out[k++] = (struct lp_short){c, 0, n->shorts[c].count, n->shorts[c].ticks};
        n->shorts[c].count = n->shorts[c].ticks = 0;
    }
    n->nshort = 0;
    if (k && lp_spool_write(LP_CHUNK_SHORT, n->tid, out, k * sizeof out[0], NULL, 0) != 0)
        __atomic_fetch_add(&lp_events_dropped, k, __ATOMIC_RELAXED);
}

/* Count a call under LIBPROF_MIN_NS instead of recording it (the owner thread only). */
void lp_tbuf_count_short(struct lp_tls *t, unsigned call, uint64_t ticks) {
    struct lp_thread *n = t->thr;
    if (!n) return;
    n->shorts[call].count++;
    n->shorts[call].ticks += ticks;
    n->nshort = 1;
}

static void flush_node(struct lp_thread *n, uint64_t *upto, uint64_t records) {
    if (n->nshort) flush_shorts(n);
    if (upto <= n->flushed) return;
    size_t words = (size_t)(upto - n->flushed);
    uint64_t recs = records - n->flushed_records;
    if (lp_spool_write(LP_CHUNK_EVENTS, n->tid, n->flushed, words * 8, NULL, 0) == 0)
        __atomic_fetch_add(&lp_events_written, recs, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&lp_events_dropped, recs, __ATOMIC_RELAXED);
    n->flushed = upto;
    n->flushed_records = records;
}

uint64_t lp_tbuf_events_written(void) { return __atomic_load_n(&lp_events_written, __ATOMIC_RELAXED); }

static void thread_dtor(void *arg);

/* Give the calling thread a chunk: a free registry node if there is one, else a new mapping. */
static struct lp_thread *attach_node(struct lp_tls *t) {
    struct lp_thread *n;
    for (n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next) {
        if (!__atomic_load_n(&n->in_use, __ATOMIC_RELAXED) && !__atomic_exchange_n(&n->in_use, 1, __ATOMIC_ACQUIRE))
            break;
    }
    if (!n) {
        /* the node sits in front of its record area, rounded to a cache line */
        const size_t head = (sizeof *n + 63) & ~(size_t)63;
        size_t bytes = head + (size_t)chunk_bytes;
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return NULL;
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
    t->cur = n->base;
    t->end = n->limit;
    unlock(&n->lock);
    return n;
}

/* The slow half of lp_reserve: first event of a thread, full chunk, or a thread that can no
 * longer record. */
uint64_t *lp_reserve_slow(struct lp_tls *t, unsigned words) {
    int saved = errno;
    uint64_t *r = NULL;
    switch (t->state) {
    case LP_TLS_NEW:
        t->tid = lp_gettid();
        t->thr = attach_node(t);
        if (!t->thr) {
            t->state = LP_TLS_FAILED;
            if (!__atomic_exchange_n(&map_failed_warned, 1, __ATOMIC_RELAXED))
                lp_warn("out of memory for a thread buffer; that thread's events are dropped and counted");
            break;
        }
        t->state = LP_TLS_ACTIVE;
        /* The key's value makes glibc run thread_dtor when this thread exits. */
        if (dtor_key_ok) pthread_setspecific(dtor_key, t->thr);
        r = t->cur;
        break;
    case LP_TLS_ACTIVE: {
        struct lp_thread *n = t->thr;
        lock(&n->lock);
        flush_node(n, t->cur, t->records);
        n->flushed = n->base;
        t->cur = n->base;
        unlock(&n->lock);
        r = t->cur;
        break;
    }
    case LP_TLS_LATE:
        t->cur = t->late_rec;
        r = t->cur;
        break;
    default:
        break;
    }
    if (r && r + words > t->end) r = NULL; /* a record larger than a chunk: cannot happen with valid settings */
    if (!r) __atomic_fetch_add(&lp_events_dropped, 1, __ATOMIC_RELAXED);
    errno = saved;
    return r;
}

/* After a commit in late mode: write the record straight to the spool. */
void lp_commit_late(struct lp_tls *t) {
    t->records--; /* counted here instead */
    size_t words = (size_t)(t->cur - t->late_rec);
    if (words == 0) return;
    if (lp_spool_write(LP_CHUNK_EVENTS, t->tid, t->late_rec, words * 8, NULL, 0) == 0)
        __atomic_fetch_add(&lp_events_written, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&lp_events_dropped, 1, __ATOMIC_RELAXED);
    t->cur = t->late_rec;
}

/* Write the kernel's name of thread `tid` (what pthread_setname_np/prctl last set) to the spool. */
static void write_thread_name(uint32_t tid) {
    char path[64], name[32];
    snprintf(path, sizeof path, "/proc/self/task/%u/comm", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, name, sizeof name - 1);
    close(fd);
    if (n <= 0) return;
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0')) n--;
    uint32_t key = LP_STR_THREAD_NAME;
    lp_spool_write(LP_CHUNK_STRING, tid, &key, sizeof key, name, (size_t)n);
}

/* glibc calls this when a thread that recorded something exits. Re-arming the key for the first
 * rounds makes the final flush run in the last round, after other keys' destructors (which may
 * still allocate) have run. */
static void thread_dtor(void *arg) {
    struct lp_tls *t = &lp_tls;
    if (t->state != LP_TLS_ACTIVE || t->thr != arg) return;
    if (++t->dtor_round < PTHREAD_DESTRUCTOR_ITERATIONS) {
        pthread_setspecific(dtor_key, arg);
        return;
    }
    int saved = errno;
    uint8_t g = t->guard;
    t->guard = 1;
    struct lp_thread *n = t->thr;
    lock(&n->lock);
    flush_node(n, t->cur, t->records);
    /* Switch to write-through before giving the node away. */
    t->cur = t->late_rec;
    t->end = t->late_rec + sizeof t->late_rec / 8;
    t->late = 1;
    t->state = LP_TLS_LATE;
    t->thr = NULL;
    n->tls = NULL;
    unlock(&n->lock);
    write_thread_name(t->tid);
    madvise(n->base, chunk_bytes, MADV_DONTNEED); /* keep RSS flat with many short threads */
    __atomic_store_n(&n->in_use, 0, __ATOMIC_RELEASE);
    t->guard = g;
    errno = saved;
}

/* Set the chunk size and arrange for thread-exit flushing. */
void lp_tbuf_init(uint32_t buffer_bytes) {
    chunk_bytes = buffer_bytes & ~7u;
    dtor_key_ok = pthread_key_create(&dtor_key, thread_dtor) == 0;
    if (!dtor_key_ok) lp_warn("no pthread key left; events of exiting threads are flushed only at process exit");
}

/* Flush every live thread's records (at exit; the other threads may still be running, which the
 * per-node lock and the release store in lp_commit make safe). From a signal handler
 * (`from_signal`), a node whose lock is held — its owner was interrupted while flushing — is
 * skipped rather than waited for. */
void lp_tbuf_flush_all(int from_signal) {
    for (struct lp_thread *n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next) {
        if (!__atomic_load_n(&n->in_use, __ATOMIC_ACQUIRE)) continue;
        if (from_signal) {
            if (__atomic_exchange_n(&n->lock, 1, __ATOMIC_ACQUIRE)) continue;
        } else {
            lock(&n->lock);
        }
        if (n->tls) {
            uint64_t *cur = __atomic_load_n(&n->tls->cur, __ATOMIC_ACQUIRE);
            flush_node(n, cur, __atomic_load_n(&n->tls->records, __ATOMIC_RELAXED));
        }
        unlock(&n->lock);
    }
}

/* The life of every thread libprof saw created and that is still running (an OpenMP worker, a
 * pool thread): its "thread" record ends now. Written as a one-record chunk of that thread after
 * its last flush, so its records stay in time order. */
void lp_tbuf_close_lives(void) {
    uint64_t now = lp_ticks();
    for (struct lp_thread *n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next) {
        if (!__atomic_load_n(&n->in_use, __ATOMIC_ACQUIRE)) continue;
        lock(&n->lock);
        struct lp_tls *t = n->tls;
        if (t && t != &lp_tls && t->life_flow) {
            uint64_t rec[6] = {lp_word0_timed(LP_EV_CALL, t->life_t0), lp_word1(t->life_t0, now),
                               lp_call_header(LP_CALL_THREAD_LIFE, 3, 0), t->life_creator, t->life_flow, 1};
            t->life_flow = 0;
            if (lp_spool_write(LP_CHUNK_EVENTS, n->tid, rec, sizeof rec, NULL, 0) == 0)
                __atomic_fetch_add(&lp_events_written, 1, __ATOMIC_RELAXED);
        }
        unlock(&n->lock);
    }
}

/* Name every thread that still holds a buffer (exited threads wrote their name on the way out). */
void lp_tbuf_write_thread_names(void) {
    for (struct lp_thread *n = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); n; n = n->next)
        if (__atomic_load_n(&n->in_use, __ATOMIC_ACQUIRE) && n->tls) write_thread_name(n->tid);
}

/* In a forked child: the parent's spool and the other threads' buffers are not ours to touch
 * (their threads do not exist here, and their locks may have been held at the fork). Forget
 * them all; the forking thread starts over with no buffer and a zero count, so none of the
 * parent's events can reach the child's trace. */
void lp_tbuf_after_fork_child(void) {
    if (lp_spool_fd >= 0) close(lp_spool_fd);
    lp_spool_fd = -1;
    registry = NULL; /* the parent's nodes stay mapped, unused: copy-on-write, never touched */
    lp_events_written = lp_events_dropped = lp_chunks_written = 0;
    map_failed_warned = 0;
    struct lp_tls *t = &lp_tls;
    t->cur = t->end = NULL;
    t->thr = NULL;
    t->records = 0;
    t->range_depth = 0;
    t->life_flow = 0; /* this thread was not created in the child */
    t->late = 0;
    t->dtor_round = 0;
    t->state = LP_TLS_NEW;
}

/* Chunks start after the file header, which core.c writes itself. */
void lp_spool_set_offset(uint64_t off) { spool_off = off; }
