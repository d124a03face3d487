/* Unit tests of the raw format and its decoder (tools/lpt.c): traces are built here byte by
 * byte, independently of the runtime's writer, then decoded. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/reader.h"

struct buf {
    uint8_t *d;
    size_t n;
};

static void put(struct buf *b, const void *p, size_t n) {
    b->d = realloc(b->d, b->n + n + 8);
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void header(struct buf *b, int clock) {
    struct lp_file_header h;
    lp_header_init(&h, (uint32_t)clock);
    h.pid = 100;
    h.origin_mono_ns = 1000000;
    put(b, &h, sizeof h);
}

static void chunk(struct buf *b, uint16_t type, uint32_t tid, const void *p, uint32_t n, uint64_t sync_ticks,
                  uint64_t sync_ns) {
    struct lp_chunk_header h = {LP_CHUNK_MAGIC, type, 0, tid, n, sync_ticks, sync_ns};
    put(b, &h, sizeof h);
    put(b, p, n);
    static const uint8_t zero[8];
    if (n % 8) put(b, zero, 8 - n % 8);
}

static void string_n(struct buf *b, uint32_t key, uint32_t tid, const char *s, uint32_t n) {
    uint8_t tmp[256];
    memcpy(tmp, &key, 4);
    memcpy(tmp + 4, s, n);
    chunk(b, LP_CHUNK_STRING, tid, tmp, 4 + n, 0, 1000000);
}

static void string(struct buf *b, uint32_t key, uint32_t tid, const char *s) {
    string_n(b, key, tid, s, (uint32_t)strlen(s));
}

#define W0(kind, ts) (((uint64_t)((kind) | LP_REC_TIMED) << LP_TS_BITS) | (ts))
#define W0U(kind, ts) (((uint64_t)(kind) << LP_TS_BITS) | (ts))

/* Two threads whose events interleave in time across chunks; thread 200 frees a block that
 * thread 100 allocated, and reuses it with a realloc. */
static struct buf sample(void) {
    struct buf b = {0};
    header(&b, LP_CLOCK_MONOTONIC);
    string(&b, LP_STR_EXE, 0, "/bin/prog");
    string_n(&b, LP_STR_CMDLINE, 0, "prog\0a\0", 7);
    uint64_t t100[] = {W0(LP_EV_MALLOC, 10), 5, 64, 0xa000,               /* effect at 15 */
                       W0(LP_EV_MALLOC, 40), 5, 32, 0xb000};              /* effect at 45 */
    uint64_t t200[] = {W0(LP_EV_FREE, 20),    3,  0xa000,                 /* effect at 20 */
                       W0(LP_EV_REALLOC, 30), 20, 128,    0xc000, 0xb000, /* phases at 30 and 50 */
                       W0U(LP_EV_FREE, 60),   0};                         /* untimed: stamped at its effect */
    chunk(&b, LP_CHUNK_EVENTS, 100, t100, sizeof t100, 100, 1000100);
    chunk(&b, LP_CHUNK_EVENTS, 200, t200, sizeof t200, 110, 1000110);
    string(&b, LP_STR_THREAD_NAME, 200, "worker");
    struct lp_end e = {.end_ticks = 120, .events_written = 5};
    chunk(&b, LP_CHUNK_END, 100, &e, sizeof e, 120, 1000120);
    return b;
}

Test(format, decodes_strings_threads_and_end) {
    struct buf b = sample();
    struct lp_reader r;
    char err[128];
    cr_assert_eq(lp_reader_open_mem(&r, b.d, b.n, err, sizeof err), 0, "%s", err);
    cr_expect_eq(r.nthreads, 2);
    cr_expect_eq(r.events, 5);
    cr_expect_eq(r.truncated, 0);
    cr_assert_not_null(r.end);
    cr_expect_eq(r.end->events_written, 5);
    cr_expect_eq(r.exe_len, 9);
    cr_expect(memcmp(r.exe, "/bin/prog", 9) == 0);
    cr_expect_eq(r.cmdline_len, 7);
    int named = 0;
    for (uint32_t i = 0; i < r.nthreads; i++)
        if (r.threads[i].tid == 200 && r.threads[i].name_len == 6 && !memcmp(r.threads[i].name, "worker", 6)) named = 1;
    cr_expect(named);
    lp_reader_close(&r);
}

Test(format, iterates_in_effect_order_across_threads) {
    struct buf b = sample();
    struct lp_reader r;
    char err[128];
    cr_assert_eq(lp_reader_open_mem(&r, b.d, b.n, err, sizeof err), 0);
    struct lp_iter *it = lp_iter_new(&r);
    struct lp_event e;
    struct {
        uint16_t kind;
        uint8_t phase;
        uint64_t ns;
        uint32_t tid;
    } want[] = {{LP_EV_MALLOC, 1, 15, 100}, {LP_EV_FREE, 1, 20, 200},    {LP_EV_REALLOC, 0, 30, 200},
                {LP_EV_MALLOC, 1, 45, 100}, {LP_EV_REALLOC, 1, 50, 200}, {LP_EV_FREE, 1, 60, 200}};
    size_t i = 0;
    while (lp_iter_next(it, &e)) {
        cr_assert_lt(i, 6);
        cr_expect_eq(e.kind, want[i].kind, "event %zu kind %u", i, e.kind);
        cr_expect_eq(e.phase, want[i].phase, "event %zu phase", i);
        cr_expect_eq(e.ns, want[i].ns, "event %zu at %llu", i, (unsigned long long)e.ns);
        cr_expect_eq(e.tid, want[i].tid);
        i++;
    }
    cr_expect_eq(i, 6);
    cr_expect_eq(lp_iter_position(it), 5);
    lp_iter_free(it);
    lp_reader_close(&r);
}

Test(format, tsc_ticks_are_fitted_to_nanoseconds) {
    struct buf b = {0};
    header(&b, LP_CLOCK_TSC);
    uint64_t ev[] = {W0(LP_EV_MALLOC, 2500), 250, 8, 0x10};
    /* 2.5 ticks per ns: 10000 ticks took 4000 ns */
    chunk(&b, LP_CHUNK_EVENTS, 1, ev, sizeof ev, 10000, 1000000 + 4000);
    struct lp_reader r;
    char err[128];
    cr_assert_eq(lp_reader_open_mem(&r, b.d, b.n, err, sizeof err), 0);
    struct lp_iter *it = lp_iter_new(&r);
    struct lp_event e;
    cr_assert(lp_iter_next(it, &e));
    cr_expect(e.start_ns >= 999 && e.start_ns <= 1000, "start %llu", (unsigned long long)e.start_ns);
    cr_expect(e.dur_ns >= 99 && e.dur_ns <= 101, "dur %llu", (unsigned long long)e.dur_ns);
    lp_iter_free(it);
    lp_reader_close(&r);
}

Test(format, truncated_file_decodes_whole_chunks) {
    struct buf b = sample();
    struct lp_reader r;
    char err[128];
    /* cut in the middle of thread 200's chunk */
    size_t cut = LP_FILE_HEADER_SIZE;
    struct lp_chunk_header h;
    int chunks = 0;
    while (chunks < 4) { /* exe, cmdline, t100 events, then into t200 */
        memcpy(&h, b.d + cut, sizeof h);
        cut += sizeof h + ((h.length + 7) & ~7u);
        chunks++;
    }
    cr_assert_eq(lp_reader_open_mem(&r, b.d, cut - 9, err, sizeof err), 0);
    cr_expect_eq(r.truncated, 1);
    cr_expect_null(r.end);
    cr_expect_eq(r.events, 2, "only thread 100's chunk survives");
    lp_reader_close(&r);
    /* cut exactly at a chunk boundary: not damaged, but no END chunk */
    cr_assert_eq(lp_reader_open_mem(&r, b.d, cut - ((h.length + 7) & ~7u) - sizeof h, err, sizeof err), 0);
    cr_expect_eq(r.truncated, 0);
    cr_expect_null(r.end);
    lp_reader_close(&r);
}

Test(format, damaged_and_foreign_files) {
    struct buf b = sample();
    struct lp_reader r;
    char err[128];
    uint8_t *c = malloc(b.n);
    memcpy(c, b.d, b.n);
    c[0] = 'X';
    cr_expect_eq(lp_reader_open_mem(&r, c, b.n, err, sizeof err), -1);
    cr_expect_not_null(strstr(err, "bad magic"));
    memcpy(c, b.d, b.n);
    c[8] = LP_FORMAT_VERSION + 1;
    cr_expect_eq(lp_reader_open_mem(&r, c, b.n, err, sizeof err), -1);
    cr_expect_not_null(strstr(err, "newer"));
    cr_expect_eq(lp_reader_open_mem(&r, c, 100, err, sizeof err), -1);
    /* an invalid record kind inside an events chunk ends the trace there */
    memcpy(c, b.d, b.n);
    size_t off = LP_FILE_HEADER_SIZE;
    struct lp_chunk_header h;
    for (;;) {
        memcpy(&h, c + off, sizeof h);
        if (h.type == LP_CHUNK_EVENTS) break;
        off += sizeof h + ((h.length + 7) & ~7u);
    }
    c[off + sizeof h + 7] = 0x7e; /* kind byte of the first record: no such kind */
    /* ... that chunk is skipped as damage, and the reader goes on at the next whole chunk */
    cr_assert_eq(lp_reader_open_mem(&r, c, b.n, err, sizeof err), 0);
    cr_expect_eq(r.truncated, 0);
    cr_expect_eq(r.damaged, 1);
    cr_expect_eq(r.damaged_bytes, sizeof h + ((h.length + 7) & ~7u), "exactly the damaged chunk is skipped");
    cr_expect_eq(r.events, 3, "thread 200's chunk survives");
    cr_expect_not_null(r.end, "and the END chunk after it");
    lp_reader_close(&r);
    free(c);
}

/* What cutting a trace at an offset loses (the recorder's recovery after a full disk, where a
 * thread's chunk reserved after the failed one was written whole): the events of the whole
 * EVENTS chunks past the cut, damage before them skipped, other chunks not counted. */
Test(format, events_past_a_cut_are_counted) {
    struct buf b = sample();
    size_t first = LP_FILE_HEADER_SIZE; /* the first EVENTS chunk (thread 100's: 2 events) */
    struct lp_chunk_header h;
    for (;;) {
        memcpy(&h, b.d + first, sizeof h);
        if (h.type == LP_CHUNK_EVENTS) break;
        first += sizeof h + ((h.length + 7) & ~7u);
    }
    cr_expect_eq(lp_chunk_events(b.d, b.n, first), 5, "both threads' chunks");
    cr_expect_eq(lp_chunk_events(b.d, b.n, first + 8), 3, "inside the first: thread 200's alone");
    memset(b.d + first, 0, sizeof h + 16); /* the failed chunk: a hole where its header was */
    cr_expect_eq(lp_chunk_events(b.d, b.n, first), 3, "a hole, then thread 200's chunk");
    cr_expect_eq(lp_chunk_events(b.d, b.n, b.n), 0);
    free(b.d);
}

/* A stray write of the program's over the file header (a descriptor number reused under libprof):
 * the copy in the HEADER chunk that follows it keeps the trace readable. */
Test(format, damaged_header_is_read_from_its_copy) {
    struct buf b = {0};
    header(&b, LP_CLOCK_MONOTONIC);
    struct lp_file_header copy;
    memcpy(&copy, b.d, sizeof copy);
    chunk(&b, LP_CHUNK_HEADER, 0, &copy, sizeof copy, 0, 1000000);
    uint64_t ev[] = {W0U(LP_EV_MALLOC, 10), 64, 0xa000, W0U(LP_EV_FREE, 20), 0xa000};
    chunk(&b, LP_CHUNK_EVENTS, 100, ev, sizeof ev, 30, 1000030);
    memcpy(b.d, "abc\n", 4); /* what a program's write(fd, "abc\n", 4) did at offset 0 */
    struct lp_reader r;
    char err[128];
    cr_assert_eq(lp_reader_open_mem(&r, b.d, b.n, err, sizeof err), 0, "%s", err);
    cr_expect_eq(r.header_recovered, 1);
    cr_expect_eq(r.hdr.pid, 100);
    cr_expect_eq(r.events, 2);
    lp_reader_close(&r);
    /* junk after the END chunk (a stray write appended at the end) loses nothing */
    struct buf e = sample();
    put(&e, "abc\n", 4);
    cr_assert_eq(lp_reader_open_mem(&r, e.d, e.n, err, sizeof err), 0, "%s", err);
    cr_expect_eq(r.truncated, 0);
    cr_expect_eq(r.damaged, 0);
    cr_expect_eq(r.damaged_bytes, 4);
    cr_expect_eq(r.events, 5);
    lp_reader_close(&r);
    free(b.d);
    free(e.d);
}

/* Found by fuzzing: a name id far beyond what a writer produces must not size the name table
 * (it used to reach hundreds of megabytes). */
Test(format, absurd_name_ids_are_damage_not_allocations) {
    struct buf b = {0};
    header(&b, LP_CLOCK_MONOTONIC);
    uint8_t tmp[16];
    uint32_t key = LP_STR_NAME, id = 1u << 24;
    memcpy(tmp, &key, 4);
    memcpy(tmp + 4, &id, 4);
    memcpy(tmp + 8, "evil", 4);
    chunk(&b, LP_CHUNK_STRING, 0, tmp, 12, 0, 1000000);
    struct lp_reader r;
    char err[128];
    cr_assert_eq(lp_reader_open_mem(&r, b.d, b.n, err, sizeof err), 0);
    cr_expect_eq(r.truncated, 1);
    cr_expect_leq(r.nnames, LP_MAX_NAME_ID + 1);
    lp_reader_close(&r);
}
