/* own.c: libprof's own memory (own.h). Every long-lived mapping of the recorder goes through
 * lpr_own_map, which notes it under its part (thread buffers, the stack tree, the walker's
 * tables, Python's code table...). At the end the regions are asked which of their pages are
 * resident (mincore), and the answer goes into the trace (a SELF chunk) for the summary's
 * "libprof's memory" line and metadata.libprof.memory: the user sees what libprof took from the
 * process, part by part, next to the process's own peak. Reserved address space that was never
 * touched costs nothing and is shown apart.
 *
 * Regions are never unmapped (the buffers of ended threads are reused), so the registry only
 * grows: a fixed array, a slot taken with an atomic increment. Past its end a region still
 * counts as reserved, and all of it as resident (an upper bound, said in the chunk's flags). */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "own.h"
#include "sys.h"

#define REGIONS 4096

static struct region {
    uintptr_t base;
    uint64_t bytes;
    uint32_t part; /* + 1; 0: the slot is being filled */
} regions[REGIONS];
static uint32_t nregions;
static uint64_t unlisted[LP_OWN_PARTS]; /* bytes past the registry's end, by part */

/* libprof's own zeroed static data (.bss: buffers of fixed size), as the linker bounds it */
extern char __bss_start[] __attribute__((visibility("hidden")));
extern char _end[] __attribute__((visibility("hidden")));

void *lpr_own_map(unsigned part, size_t bytes, int prot, int flags) {
    if (part >= LP_OWN_PARTS) part = LP_OWN_OTHER;
    bytes = (bytes + 4095) & ~(size_t)4095; /* (what the kernel maps: whole pages) */
    void *m = lpr_sys_mmap(NULL, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (lpr_sys_failed((long)m)) return NULL;
    uint32_t i = __atomic_fetch_add(&nregions, 1, __ATOMIC_RELAXED);
    if (i < REGIONS) {
        regions[i].base = (uintptr_t)m;
        regions[i].bytes = bytes;
        __atomic_store_n(&regions[i].part, part + 1, __ATOMIC_RELEASE);
    } else {
        __atomic_fetch_add(&unlisted[part], bytes, __ATOMIC_RELAXED);
    }
    return m;
}

/* The resident bytes of [base, base + bytes) (pages: mincore's vector, a piece at a time). */
static uint64_t resident(uintptr_t base, uint64_t bytes) {
    static unsigned char vec[4096]; /* (one caller at a time: the end of the process) */
    const uint64_t page = 4096;
    uintptr_t lo = base & ~(page - 1), hi = (base + bytes + page - 1) & ~(page - 1);
    uint64_t n = 0;
    for (uintptr_t at = lo; at < hi;) {
        uint64_t pages = (hi - at) / page;
        if (pages > sizeof vec) pages = sizeof vec;
        if (LP_SYS(SYS_mincore, at, pages * page, vec) != 0) return bytes; /* (unknown: all of it) */
        for (uint64_t i = 0; i < pages; i++) n += vec[i] & 1;
        at += pages * page;
    }
    return n * page;
}

void lpr_own_measure(struct lp_own_memory *m) {
    memset(m, 0, sizeof *m);
    m->parts = LP_OWN_PARTS;
    uint32_t n = __atomic_load_n(&nregions, __ATOMIC_ACQUIRE);
    if (n > REGIONS) {
        n = REGIONS;
        m->flags |= LP_OWN_UPPER_BOUND;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = __atomic_load_n(&regions[i].part, __ATOMIC_ACQUIRE);
        if (!p) continue;
        m->reserved[p - 1] += regions[i].bytes;
        m->resident[p - 1] += resident(regions[i].base, regions[i].bytes);
    }
    for (unsigned p = 0; p < LP_OWN_PARTS; p++) {
        uint64_t u = __atomic_load_n(&unlisted[p], __ATOMIC_RELAXED);
        m->reserved[p] += u;
        m->resident[p] += u;
    }
    uintptr_t lo = (uintptr_t)__bss_start, hi = (uintptr_t)_end;
    if (hi > lo) {
        m->reserved[LP_OWN_STATIC] += hi - lo;
        m->resident[LP_OWN_STATIC] += resident(lo, hi - lo);
    }
}
