/* map.c: linear probing over (key, value) pairs kept side by side (one cache line a probe), a
 * multiplicative hash (pointers from an allocator differ in their middle bits, which one
 * multiply spreads to the top ones), at most half full, with backward-shift deletion so that no
 * tombstones accumulate over millions of malloc/free pairs. Half full rather than 70 %: clusters
 * stay short, and a release — the commonest event of a trace — shifts fewer slots back (the exit
 * conversion of churn: 318 -> 294 instructions an event); the price is 16 bytes more per live
 * block at worst (the live-block table is most of the converter's memory). */
#include "map.h"
#include "os.h"

#include <stdlib.h>

static inline uint64_t slot_of(const struct lp_map *m, uint64_t k) {
    return (k * UINT64_C(0x9e3779b97f4a7c15)) >> m->shift;
}

static int grow(struct lp_map *m) {
    uint64_t ncap = m->cap ? m->cap * 2 : 1024;
    struct lp_map_slot *s = lp_os_calloc(ncap, sizeof *s);
    if (!s) return -1;
    struct lp_map old = *m;
    m->slots = s;
    m->cap = ncap;
    m->shift = (unsigned)__builtin_clzll(ncap) + 1; /* 64 - log2(ncap) */
    for (uint64_t i = 0; i < old.cap; i++) {
        if (!old.slots[i].key) continue;
        uint64_t h = slot_of(m, old.slots[i].key);
        while (s[h].key) h = (h + 1) & (ncap - 1);
        s[h] = old.slots[i];
    }
    lp_os_free(old.slots);
    return 0;
}

int lp_map_put(struct lp_map *m, uint64_t key, uint64_t val, uint64_t *old) {
    if (LP_MAP_UNLIKELY((m->n + 1) * 2 > m->cap) && grow(m)) return -1;
    uint64_t mask = m->cap - 1, h = slot_of(m, key);
    struct lp_map_slot *s = m->slots;
    while (s[h].key) {
        if (s[h].key == key) {
            if (old) *old = s[h].val;
            s[h].val = val;
            return 1;
        }
        h = (h + 1) & mask;
    }
    s[h].key = key;
    s[h].val = val;
    m->n++;
    return 0;
}

int lp_map_get(const struct lp_map *m, uint64_t key, uint64_t *val) {
    if (!m->cap) return 0;
    uint64_t mask = m->cap - 1;
    for (uint64_t h = slot_of(m, key); m->slots[h].key; h = (h + 1) & mask) {
        if (m->slots[h].key == key) {
            *val = m->slots[h].val;
            return 1;
        }
    }
    return 0;
}

int lp_map_take(struct lp_map *m, uint64_t key, uint64_t *val) {
    if (!m->cap) return 0;
    struct lp_map_slot *s = m->slots;
    uint64_t mask = m->cap - 1, h = slot_of(m, key);
    while (s[h].key != key) {
        if (!s[h].key) return 0;
        h = (h + 1) & mask;
    }
    *val = s[h].val;
    m->n--;
    uint64_t i = h;
    for (uint64_t j = (i + 1) & mask; s[j].key; j = (j + 1) & mask) {
        /* move j back into the hole at i unless its home slot lies cyclically in (i, j] */
        uint64_t home = slot_of(m, s[j].key);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            s[i] = s[j];
            i = j;
        }
    }
    s[i].key = 0;
    return 1;
}

void lp_map_free(struct lp_map *m) {
    lp_os_free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}
