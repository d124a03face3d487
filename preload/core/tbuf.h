/* tbuf.h: per-thread buffers, the thread registry and the spool file (tbuf.c); the hot path's
 * reserve and commit. */
#ifndef LPR_TBUF_H
#define LPR_TBUF_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "state.h"

LP_HIDDEN uint64_t *lpr_reserve_slow(struct lpr_tls *t, unsigned words);
LP_HIDDEN void lpr_commit_late(struct lpr_tls *t);
LP_HIDDEN int lpr_spool_create(const char *path, int allow_rename, const struct lp_file_header *h, char *chosen,
                               size_t chosen_len);
LP_HIDDEN int lpr_spool_write(uint16_t type, uint32_t tid, const void *a, size_t alen, const void *b, size_t blen);
LP_HIDDEN const char *lpr_spool_name(void);
LP_HIDDEN void lpr_spool_identify(void);
LP_HIDDEN long lpr_read_header(int fd, struct lp_file_header *h);
LP_HIDDEN int lpr_pid_gone(int pid);
LP_HIDDEN int lpr_pid_ending(int pid); /* exiting, or killed: gone within moments */
LP_HIDDEN void lpr_spool_stop(void);
LP_HIDDEN void lpr_spool_resume(void);
LP_HIDDEN uint64_t lpr_spool_offset(void);
/* a followed spool (tbuf.c, life.c): the follower runs; the spool offset that starts it */
LP_HIDDEN extern int lpr_follow_on;
LP_HIDDEN extern uint64_t lpr_follow_at;

LP_HIDDEN void lpr_tbuf_flush_all(int from_signal);
/* the thread is about to wait: write what it recorded, now and then; 1: a signal the program
 * handles came meanwhile (the wait returns EINTR). `during`: the mask the wait sets, or NULL */
LP_HIDDEN int lpr_tbuf_idle(const sigset_t *during);
/* The program changes a signal's action: first, any thread holding signals in lpr_tbuf_idle's
 * write has let them through (bounded). */
LP_HIDDEN void lpr_tbuf_held_settle(void);
/* The calling thread's samples buffer (from the sampler's signal handler): room for `words` words
 * (NULL: the sample is dropped), then its commit. */
LP_HIDDEN uint64_t *lpr_tbuf_sample_reserve(struct lpr_tls *t, unsigned words);
LP_HIDDEN void lpr_tbuf_sample_commit(struct lpr_tls *t, uint64_t *next);
LP_HIDDEN void lpr_tbuf_write_thread_names(void);
/* Thread `tid`'s name in the trace, as an annotation gave it (hooks/nvtx.c); the first one stays. */
LP_HIDDEN void lpr_tbuf_thread_label(uint32_t tid, const char *name);
LP_HIDDEN void lpr_tbuf_close_lives(void);
LP_HIDDEN void lpr_tbuf_init(uint32_t buffer_bytes);
LP_HIDDEN void lpr_tbuf_after_fork_child(void);
LP_HIDDEN void lpr_spool_recover(void);
LP_HIDDEN uint64_t lpr_tbuf_events_written(void);
LP_HIDDEN uint32_t lpr_gettid(void);
LP_HIDDEN extern int lpr_spool_on; /* a spool is open for writing (this process's own) */
LP_HIDDEN extern uint64_t lpr_events_written, lpr_events_dropped, lpr_chunks_written;

/* Room for one record of `words` words in the thread's chunk, or NULL if it cannot be recorded
 * (then the event is counted as dropped). A thread without a chunk has cur and end both NULL,
 * which the one comparison sends to the slow path too (as integers: no null-pointer arithmetic). */
static inline uint64_t *lpr_reserve(struct lpr_tls *t, unsigned words) {
    uint64_t *r = t->cur;
    if (LP_UNLIKELY((uintptr_t)r + words * 8u > (uintptr_t)t->end)) return lpr_reserve_slow(t, words);
    return r;
}

/* Publish a record written at `r`. The release store lets a flushing thread (at exit) read
 * every record below `cur` complete. */
static inline void lpr_commit(struct lpr_tls *t, uint64_t *next) {
    __atomic_store_n(&t->cur, next, __ATOMIC_RELEASE);
    t->records++;
    if (LP_UNLIKELY(t->late)) lpr_commit_late(t);
}

static inline uint64_t lpr_word0(unsigned kind, uint64_t ticks) {
    return ((uint64_t)kind << LP_TS_BITS) | ((ticks - lpr_origin_ticks) & LP_TS_MASK);
}

static inline uint64_t lpr_word0_timed(unsigned kind, uint64_t ticks) { return lpr_word0(kind | LP_REC_TIMED, ticks); }

/* The word that gives the next record of this thread its call stack. */
static inline uint64_t lpr_word_stack(uint32_t id) { return ((uint64_t)LP_EV_STACK << LP_TS_BITS) | id; }

static inline uint64_t lpr_word1(uint64_t t0, uint64_t t1) {
    /* t1 < t0 only when a thread migrated between cores whose TSCs differ by a few ticks */
    if (LP_UNLIKELY(t1 < t0)) return 0;
    uint64_t d = t1 - t0;
    return d > LP_DUR_MASK ? LP_DUR_MASK : d;
}

/* Tally of calls under LIBPROF_MIN_NS, kept in the thread's registry node (tbuf.c). */
LP_HIDDEN void lpr_tbuf_count_short(struct lpr_tls *t, unsigned call, uint64_t ticks);

LP_HIDDEN void lpr_tally_write(struct lpr_tls *t); /* the thread's counts as a TALLY record, if any */
/* A TALLY's payload (its mask, then the words it names) from counts: its number of words. */
LP_HIDDEN unsigned lpr_tally_pack(const struct lpr_tally *y, uint64_t out[1 + LP_TALLY_WORDS]);

/* The per-thread state of a hook family that needs more than the TLS holds (one per thread,
 * `size` bytes, zeroed, made on first use; NULL: no memory). */
LP_HIDDEN void *lpr_tbuf_family_state(struct lpr_thread *node, size_t size);
LP_HIDDEN void *lpr_tbuf_py_cache(struct lpr_thread *node, size_t size); /* python.c's, likewise */
/* The Python cache through the thread's own state, without a call once it exists. */
static inline void *lpr_py_cache_of(struct lpr_tls *t, size_t size) {
    if (LP_LIKELY(t->pycache != NULL)) return t->pycache;
    return t->thr ? lpr_tbuf_py_cache(t->thr, size) : NULL;
}

/* What the spool calls but does not own, set by life.c (which sits above both): what goes before
 * records that may name it (the stacks interned since: stacks.c), and the follower's start once
 * the spool reaches lpr_follow_at. NULL: nothing. */
LP_HIDDEN extern void (*lpr_spool_first)(void);
LP_HIDDEN extern void (*lpr_follow_due)(void);
/* The stack cache of a thread's registry node (`size` bytes: stacks.c's), made on first use
 * (NULL: no memory). */
struct lpr_stack_cache;
LP_HIDDEN struct lpr_stack_cache *lpr_tbuf_stack_cache(struct lpr_thread *node, size_t size);

#endif
