/* map.h: an open-addressing hash map from nonzero 64-bit keys to 64-bit values, used by the
 * decoder (thread ids) and the converter (live blocks by pointer). */
#ifndef LP_MAP_H
#define LP_MAP_H

#include <stdint.h>

struct lp_map_slot {
    uint64_t key, val; /* key 0 marks an empty slot */
};

struct lp_map {
    struct lp_map_slot *slots;
    uint64_t cap, n;
    unsigned shift; /* 64 - log2(cap) */
};

#define LP_MAP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* 1 and the value in `val` if `key` is present, else 0. */
int lp_map_get(const struct lp_map *m, uint64_t key, uint64_t *val);
void lp_map_free(struct lp_map *m);
int lp_map_grow(struct lp_map *m); /* double the room: 0, or -1 when out of memory */

static inline uint64_t lp_map_slot_of(const struct lp_map *m, uint64_t k) {
    return (k * UINT64_C(0x9e3779b97f4a7c15)) >> m->shift;
}

/* Whether an insertion must first make room (lp_map_grow): the map stays at most half full. */
static inline int lp_map_full(const struct lp_map *m) { return LP_MAP_UNLIKELY((m->n + 1) * 2 > m->cap); }

/* Insert or replace `key` (nonzero) in a map with room (!lp_map_full). Returns 0 if it was new,
 * 1 if it replaced a value (copied to `old` when not NULL). */
static inline int lp_map_insert(struct lp_map *m, uint64_t key, uint64_t val, uint64_t *old) {
    uint64_t mask = m->cap - 1, h = lp_map_slot_of(m, key);
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

/* The same, making room first: -1 when out of memory. */
static inline int lp_map_put(struct lp_map *m, uint64_t key, uint64_t val, uint64_t *old) {
    if (lp_map_full(m) && lp_map_grow(m)) return -1;
    return lp_map_insert(m, key, val, old);
}

/* Remove `key`: 1 and its value in `val`, or 0 if absent. Backward-shift deletion: the slots
 * after the hole move back unless their home lies cyclically in (hole, slot]. */
static inline int lp_map_take(struct lp_map *m, uint64_t key, uint64_t *val) {
    if (LP_MAP_UNLIKELY(!m->cap)) return 0;
    struct lp_map_slot *s = m->slots;
    uint64_t mask = m->cap - 1, h = lp_map_slot_of(m, key);
    while (s[h].key != key) {
        if (!s[h].key) return 0;
        h = (h + 1) & mask;
    }
    *val = s[h].val;
    m->n--;
    uint64_t i = h;
    for (uint64_t j = (i + 1) & mask; s[j].key; j = (j + 1) & mask) {
        uint64_t home = lp_map_slot_of(m, s[j].key);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            s[i] = s[j];
            i = j;
        }
    }
    s[i].key = 0;
    return 1;
}

#endif
