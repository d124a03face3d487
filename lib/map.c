/* map.c: linear probing over (key, value) pairs kept side by side (one cache line a probe), a
 * multiplicative hash (pointers from an allocator differ in their middle bits, which one
 * multiply spreads to the top ones), at most half full, with backward-shift deletion so that no
 * tombstones accumulate over millions of malloc/free pairs. Half full rather than 70 %: clusters
 * stay short, and a release — the commonest event of a trace — shifts fewer slots back (the exit
 * conversion of churn: 318 -> 294 instructions an event); the price is 16 bytes more per live
 * block at worst (the live-block table is most of the converter's memory). Insertion and removal
 * are inline (map.h): the exit conversion makes one of them per allocation event. */
#include "map.h"
#include "os.h"

#include <stdlib.h>

int lp_map_grow(struct lp_map *m) {
    uint64_t ncap = m->cap ? m->cap * 2 : 1024;
    struct lp_map_slot *s = lp_os_calloc(ncap, sizeof *s);
    if (!s) return -1;
    struct lp_map old = *m;
    m->slots = s;
    m->cap = ncap;
    m->shift = (unsigned)__builtin_clzll(ncap) + 1; /* 64 - log2(ncap) */
    for (uint64_t i = 0; i < old.cap; i++) {
        if (!old.slots[i].key) continue;
        uint64_t h = lp_map_slot_of(m, old.slots[i].key);
        while (s[h].key) h = (h + 1) & (ncap - 1);
        s[h] = old.slots[i];
    }
    lp_os_free(old.slots);
    return 0;
}

int lp_map_get(const struct lp_map *m, uint64_t key, uint64_t *val) {
    if (!m->cap) return 0;
    uint64_t mask = m->cap - 1;
    for (uint64_t h = lp_map_slot_of(m, key); m->slots[h].key; h = (h + 1) & mask) {
        if (m->slots[h].key == key) {
            *val = m->slots[h].val;
            return 1;
        }
    }
    return 0;
}

void lp_map_free(struct lp_map *m) {
    lp_os_free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}
