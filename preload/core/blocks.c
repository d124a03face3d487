/* blocks.c: what LIBPROF_ALLOC_SAMPLE keeps beside the records — the blocks recorded one by one,
 * so that their frees are recorded too and every other free is only counted (hooks/alloc.c
 * counts; the counts go out as TALLY records with the thread's others, tbuf.c).
 *
 * A free asks whether its block is here on every call, so the question costs one hash and one
 * load, with no lock: an open-addressed table of pointers (0 empty, 1 a removed entry), probed
 * linearly. Adding and removing take a spin lock; both are rare (a sampled block is one in
 * thousands). When live entries and removed ones fill half the table, the live ones are copied
 * into a fresh table: twice as large when they are a quarter of it or more, else of the same
 * size — the one this table replaced last time, reused (so a long run of blocks added and
 * removed does not grow it). A replaced table is never unmapped, because a free on another thread
 * may be reading it: the tables add up to at most three times the last one. A reader that slept
 * through two copies may be reading the table being cleared for reuse: a clearing is counted
 * (`cleared`) before it starts, and a reader that did not find its block looks again when the
 * count moved while it read (a seqlock's read side) — so it never misses its block, and never
 * faults.
 *
 * Why a reader never misses its block: the block was added before the program could hand its
 * pointer to the thread that frees it, and a table grows only under the lock, with the copy
 * published before the lock is released — so the free, which loads the table after the add,
 * sees a table that holds it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "blocks.h"
#include "real.h"
#include "own.h"
#include "state.h"
#include "sys.h"

struct table {
    uint64_t mask;  /* slots - 1 */
    uint64_t used;  /* entries and removed ones */
    uint64_t live;  /* entries */
    uintptr_t s[1]; /* ... mask + 1 slots */
};

#define REMOVED ((uintptr_t)1)
#define FIRST_SLOTS 4096

static struct table *tab, *spare; /* spare: the one tab replaced, of its size (or NULL) */
static uint64_t cleared;          /* tables cleared for reuse so far (see the top) */
static int lock_word;
/* How many entries have each value of the hash's low bits, whatever the table's size: a free
 * whose count is 0 (nearly all of them) looks no further (blocks.h's lpr_blocks_take). */
uint16_t lpr_blocks_hints[LP_BLOCKS_HINTS];
#define HINT(p) (&lpr_blocks_hints[lpr_blocks_hash(p) & (LP_BLOCKS_HINTS - 1)])

static inline uint64_t slot_of(uintptr_t p, uint64_t mask) { return lpr_blocks_hash(p) & mask; }

static struct table *table_new(uint64_t slots) {
    size_t bytes = sizeof(struct table) + (slots - 1) * sizeof(uintptr_t);
    void *m = lpr_own_map(LP_OWN_BLOCKS, bytes, PROT_READ | PROT_WRITE, 0);
    if (!m) return NULL;
    struct table *t = m;
    t->mask = slots - 1;
    return t;
}

static void lock(void) {
    while (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&lock_word, __ATOMIC_RELAXED)) __builtin_ia32_pause();
}
static void unlock(void) { __atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE); }

static void put(struct table *t, uintptr_t p) {
    uint64_t i = slot_of(p, t->mask);
    while (t->s[i] > REMOVED) i = (i + 1) & t->mask;
    if (t->s[i] == 0) t->used++;
    t->live++;
    __atomic_store_n(&t->s[i], p, __ATOMIC_RELEASE);
}

/* Under the lock: room for one more (see above). */
static struct table *room(void) {
    struct table *t = tab;
    if (t && (t->used + 1) * 2 <= t->mask + 1) return t;
    uint64_t slots = !t ? FIRST_SLOTS : t->live * 4 >= t->mask + 1 ? (t->mask + 1) * 2 : t->mask + 1;
    struct table *n;
    if (spare && spare->mask + 1 == slots) {
        n = spare;
        /* counted before it is cleared: the count's store is ordered before the zeroes */
        __atomic_store_n(&cleared, cleared + 1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        memset(n->s, 0, slots * sizeof n->s[0]);
        n->used = n->live = 0;
    } else if (!(n = table_new(slots))) {
        return NULL;
    }
    if (t)
        for (uint64_t i = 0; i <= t->mask; i++)
            if (t->s[i] > REMOVED) put(n, t->s[i]);
    spare = t && t->mask + 1 == slots ? t : NULL; /* (a smaller one stays mapped, unused) */
    __atomic_store_n(&tab, n, __ATOMIC_RELEASE);
    return n;
}

int lpr_blocks_add(const void *p) {
    lock();
    uint16_t *h = HINT((uintptr_t)p);
    struct table *t = *h < UINT16_MAX ? room() : NULL; /* (past 65535 blocks of one hint: counted) */
    if (t) {
        put(t, (uintptr_t)p);
        __atomic_store_n(h, (uint16_t)(*h + 1), __ATOMIC_RELEASE);
    }
    unlock();
    return t ? 0 : -1;
}

/* The slot holding p in t, or -1. */
static inline int64_t find(const struct table *t, uintptr_t p) {
    for (uint64_t i = slot_of(p, t->mask);; i = (i + 1) & t->mask) {
        uintptr_t v = __atomic_load_n(&t->s[i], __ATOMIC_ACQUIRE);
        if (v == p) return (int64_t)i;
        if (v == 0) return -1;
    }
}

int lpr_blocks_take_slow(const void *p) {
    for (;;) {
        uint64_t c = __atomic_load_n(&cleared, __ATOMIC_ACQUIRE);
        struct table *t = __atomic_load_n(&tab, __ATOMIC_ACQUIRE);
        if (!t) return 0;
        if (find(t, (uintptr_t)p) >= 0) break;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&cleared, __ATOMIC_RELAXED) == c) return 0; /* no table cleared meanwhile */
    }
    lock(); /* found: removed under the lock, from the table of now */
    struct table *t = tab;
    int64_t i = find(t, (uintptr_t)p);
    if (i >= 0) {
        __atomic_store_n(&t->s[i], REMOVED, __ATOMIC_RELEASE);
        t->live--;
        uint16_t *h = HINT((uintptr_t)p);
        __atomic_store_n(h, (uint16_t)(*h - 1), __ATOMIC_RELEASE);
    }
    unlock();
    return i >= 0;
}

uint64_t lpr_blocks_slots(void) {
    struct table *t = __atomic_load_n(&tab, __ATOMIC_ACQUIRE);
    return t ? t->mask + 1 : 0;
}

/* A forked child has one thread: a lock its parent's other threads held is free. */
void lpr_blocks_after_fork_child(void) { lock_word = 0; }

/* ---- the counts ---------------------------------------------------------------------------- */

int lpr_usable_glibc;

/* Under the tally: is the next allocator the C library's? Then a block's usable size is read
 * from its chunk header inline (alloc.c), as glibc's malloc_usable_size computes it. */
void lpr_tally_init(void) {
    Dl_info d;
    lpr_usable_glibc = lpr_real.malloc && dladdr((void *)lpr_real.malloc, &d) && d.dli_fname &&
                       strstr(d.dli_fname, "/libc.so.") != NULL;
}
