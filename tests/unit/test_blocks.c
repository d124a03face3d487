/* Unit tests of the set of recorded blocks (preload/core/blocks.c) without LD_PRELOAD: what
 * LIBPROF_ALLOC_SAMPLE's frees ask on every call. A block added is found once and only once; a
 * block never added is never found; through the table's growth, its copies at the same size, and
 * threads adding and taking at once. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "preload/core/lp.h"

/* Addresses as the heap gives them: 16-byte aligned, some page-aligned (mapped blocks). */
static const void *addr(uint64_t i, unsigned salt) {
    uint64_t base = UINT64_C(0x7f0000000000) + (uint64_t)salt * (UINT64_C(1) << 36);
    return (const void *)(uintptr_t)(i % 7 ? base + i * 48 : base + (UINT64_C(1) << 32) + i * 4096);
}

Test(blocks, found_once_and_never_unless_added) {
    enum { N = 100000 };
    for (uint64_t i = 0; i < N; i += 2) cr_assert_eq(lpr_blocks_add(addr(i, 1)), 0);
    for (uint64_t i = 0; i < N; i++)
        cr_expect_eq(lpr_blocks_take(addr(i, 1)), i % 2 == 0, "block %llu", (unsigned long long)i);
    for (uint64_t i = 0; i < N; i++)
        cr_expect_eq(lpr_blocks_take(addr(i, 1)), 0, "block %llu taken twice", (unsigned long long)i);
}

/* Millions of blocks added and taken, never more than a few hundred at once, each at a new
 * address: the removed entries fill the table again and again, and it is copied at its size
 * (it stays at its first 4096 slots). Each test runs in a process of its own. */
Test(blocks, a_long_run_of_added_and_taken_blocks) {
    enum { LIVE = 300, ROUNDS = 2000000 };
    for (uint64_t i = 0; i < ROUNDS; i++) {
        cr_assert_eq(lpr_blocks_add(addr(i, 2)), 0);
        if (i >= LIVE)
            cr_assert_eq(lpr_blocks_take(addr(i - LIVE, 2)), 1, "block %llu", (unsigned long long)(i - LIVE));
    }
    for (uint64_t i = ROUNDS - LIVE; i < ROUNDS; i++) cr_expect_eq(lpr_blocks_take(addr(i, 2)), 1);
    cr_expect_eq(lpr_blocks_take(addr(0, 2)), 0);
    cr_expect_leq(lpr_blocks_slots(), 4096, "the table grew to %llu slots for %d blocks at once",
                  (unsigned long long)lpr_blocks_slots(), LIVE);
}

struct job {
    unsigned salt;
    int missed;
};

static void *adder_taker(void *arg) {
    struct job *j = arg;
    for (uint64_t i = 0; i < 200000; i++) {
        if (lpr_blocks_add(addr(i, j->salt)) != 0) j->missed++;
        if (i >= 50 && lpr_blocks_take(addr(i - 50, j->salt)) != 1) j->missed++;
    }
    for (uint64_t i = 200000 - 50; i < 200000; i++) j->missed += lpr_blocks_take(addr(i, j->salt)) != 1;
    return NULL;
}

Test(blocks, threads_add_and_take_at_once) {
    pthread_t th[4];
    struct job jobs[4];
    for (unsigned k = 0; k < 4; k++) {
        jobs[k] = (struct job){10 + k, 0};
        cr_assert_eq(pthread_create(&th[k], NULL, adder_taker, &jobs[k]), 0);
    }
    for (unsigned k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        cr_expect_eq(jobs[k].missed, 0, "thread %u: %d blocks missed", k, jobs[k].missed);
    }
}
