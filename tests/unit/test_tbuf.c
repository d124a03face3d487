/* Unit tests of the recording core (preload/core/tbuf.c) without LD_PRELOAD: threads append
 * records through the same inline hot path the hooks use, with tiny chunks so that chunk flushes,
 * thread-exit flushes and the exit-time flush of live threads all happen; the spool is then
 * decoded with tools/lpt.c. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/core/lp.h"
#include "lib/reader.h"
#include <stdio.h>

#define THREADS 8
#define PER_THREAD 20000

static char path[] = "/tmp/libprof-tbuf-XXXXXX";

static void record(uint64_t size, uint64_t ptr) {
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC);
    cr_assert_not_null(t);
    uint64_t t0 = lpr_ticks();
    uint64_t *r = lpr_reserve(t, 4);
    cr_assert_not_null(r);
    r[0] = lpr_word0_timed(LP_EV_MALLOC, t0);
    r[1] = lpr_word1(t0, lpr_ticks());
    r[2] = size;
    r[3] = ptr;
    lpr_commit(t, r + 4);
    lpr_hook_leave(t);
}

static void *worker(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < PER_THREAD; i++) record(i, (id << 32) | i);
    return NULL;
}

static void setup(void) {
    int fd = mkstemp(path);
    close(fd);
    unlink(path); /* a fresh name: the spool is created there */
    lpr_clock_init(-1);
    lpr_tbuf_init(4096);
    char chosen[256];
    struct lp_file_header h;
    lp_header_init(&h, (uint32_t)lpr_clock_kind);
    h.origin_mono_ns = lpr_origin_mono_ns;
    h.pid = (uint32_t)getpid();
    cr_assert_eq(lpr_spool_create(path, 0, &h, chosen, sizeof chosen), 0);
    lpr_gate = 1u << LP_FAM_ALLOC;
}

static void teardown(void) {
    lpr_gate = 0;
    lpr_spool_stop();
    if (!getenv("KEEP")) unlink(path);
}

TestSuite(tbuf, .init = setup, .fini = teardown, .timeout = 60);

Test(tbuf, every_event_of_every_thread_reaches_the_file_in_order) {
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    /* the main thread records too and is still alive: only the exit-time flush gets these */
    for (uint64_t i = 0; i < 1000; i++) record(i, i);
    lpr_tbuf_flush_all(0);
    cr_expect_eq(lpr_events_written, THREADS * PER_THREAD + 1000);
    cr_expect_eq(lpr_events_dropped, 0);

    struct lp_reader r;
    char err[256];
    cr_assert_eq(lp_reader_open(&r, path, err, sizeof err), 0, "%s", err);
    cr_expect_eq(r.events, THREADS * PER_THREAD + 1000);
    cr_expect_eq(r.truncated, 0);
    cr_expect_eq(r.nthreads, THREADS + 1, "threads in the trace: %u", r.nthreads);
    cr_expect_gt(r.nchunks, THREADS * PER_THREAD * 32 / 4096, "small chunks must have been flushed many times");
    /* per thread: the sequence numbers arrive complete and in order; time never runs backwards */
    uint64_t next[THREADS + 1] = {0};
    uint64_t last_ns = 0;
    struct lp_iter *it = lp_iter_new(&r);
    struct lp_event e;
    while (lp_iter_next(it, &e)) {
        uint64_t id = e.w[1] >> 32, seq = e.w[1] & 0xffffffffu;
        cr_assert_leq(id, THREADS);
        cr_assert_eq(seq, next[id], "thread %llu: got %llu, want %llu", (unsigned long long)id, (unsigned long long)seq,
                     (unsigned long long)next[id]);
        cr_assert_eq(e.w[0], seq);
        next[id]++;
        cr_assert_geq(e.ns, last_ns);
        last_ns = e.ns;
    }
    for (int i = 0; i <= THREADS; i++) cr_expect_eq(next[i], i == 0 ? 1000 : PER_THREAD);
    lp_iter_free(it);
    lp_reader_close(&r);
}

Test(tbuf, reentered_hooks_do_not_record) {
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ALLOC);
    cr_assert_not_null(t);
    cr_expect_null(lpr_hook_enter(LP_FAM_ALLOC), "a nested call must pass through");
    lpr_hook_leave(t);
    lpr_gate = 0;
    cr_expect_null(lpr_hook_enter(LP_FAM_ALLOC), "gate closed");
}

Test(tbuf, buffers_of_exited_threads_are_reused) {
    /* 200 short threads, one after another: the registry must not grow past a few nodes */
    for (uintptr_t i = 0; i < 200; i++) {
        pthread_t th;
        pthread_create(&th, NULL, worker, (void *)(i + 1));
        pthread_join(th, NULL);
    }
    lpr_tbuf_flush_all(0);
    cr_expect_eq(lpr_events_written, 200 * PER_THREAD);
    struct lp_reader r;
    char err[256];
    cr_assert_eq(lp_reader_open(&r, path, err, sizeof err), 0, "%s", err);
    cr_expect_eq(r.events, 200 * PER_THREAD);
    lp_reader_close(&r);
}

/* Threads interning the same names at once agree on their ids, and each name is spooled once. */
static void *intern_many(void *arg) {
    uint32_t *ids = arg;
    char name[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "name-%d", i);
        ids[i] = lpr_name_id(name);
    }
    return NULL;
}

Test(tbuf, names_are_interned_once_across_threads) {
    static uint32_t ids[4][200];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, intern_many, ids[i]);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 200; i++) {
        cr_assert_neq(ids[0][i], 0);
        for (int t = 1; t < 4; t++) cr_assert_eq(ids[t][i], ids[0][i], "name-%d", i);
        for (int j = 0; j < i; j++) cr_assert_neq(ids[0][j], ids[0][i]);
    }
    struct lp_reader r;
    char err[256];
    cr_assert_eq(lp_reader_open(&r, path, err, sizeof err), 0, "%s", err);
    int spooled = 0;
    for (uint32_t id = 0; id < r.nnames; id++) spooled += r.names[id].s != NULL;
    cr_expect_eq(spooled, 200);
    uint32_t len;
    const char *n = lp_reader_name(&r, ids[0][42], &len);
    cr_expect(len == 7 && !memcmp(n, "name-42", 7));
    lp_reader_close(&r);
}
