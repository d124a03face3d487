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

/* The slot primitives, on a slot array of 2^(64 - shift) slots (mask = its size - 1): the
 * converter's allocation fast path calls them on values it keeps in registers, the functions
 * below on a struct lp_map. Always inlined: that loop is too big for GCC to inline them on its
 * own (churn's conversion 95 -> 97 instructions an event when it did not). */
static inline __attribute__((always_inline)) uint64_t lp_slot_home(uint64_t key, unsigned shift) {
    return (key * UINT64_C(0x9e3779b97f4a7c15)) >> shift;
}

/* The slot holding `key`, or the empty slot where it would go. `place` says which is expected —
 * an insertion usually ends on an empty slot, a lookup on the key — and tests that first. */
static inline __attribute__((always_inline)) uint64_t lp_slot_find(const struct lp_map_slot *s, uint64_t mask,
                                                                   unsigned shift, uint64_t key, int place) {
    uint64_t h = lp_slot_home(key, shift);
    if (place)
        while (s[h].key && s[h].key != key) h = (h + 1) & mask;
    else
        while (s[h].key != key && s[h].key) h = (h + 1) & mask;
    return h;
}

/* Empty slot `i` (backward-shift deletion, so no tombstones build up): the slots after it move
 * back unless their home lies cyclically in (hole, slot]. */
static inline __attribute__((always_inline)) void lp_slot_remove(struct lp_map_slot *s, uint64_t mask, unsigned shift,
                                                                 uint64_t i) {
    for (uint64_t j = (i + 1) & mask; s[j].key; j = (j + 1) & mask) {
        uint64_t home = lp_slot_home(s[j].key, shift);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            s[i] = s[j];
            i = j;
        }
    }
    s[i].key = 0;
}

static inline uint64_t lp_map_slot_of(const struct lp_map *m, uint64_t k) { return lp_slot_home(k, m->shift); }

/* Whether an insertion must first make room (lp_map_grow): the map stays at most half full. */
static inline int lp_map_full(const struct lp_map *m) { return LP_MAP_UNLIKELY((m->n + 1) * 2 > m->cap); }

/* Insert or replace `key` (nonzero) in a map with room (!lp_map_full). Returns 0 if it was new,
 * 1 if it replaced a value (copied to `old` when not NULL). */
static inline int lp_map_insert(struct lp_map *m, uint64_t key, uint64_t val, uint64_t *old) {
    struct lp_map_slot *s = m->slots;
    uint64_t h = lp_slot_find(s, m->cap - 1, m->shift, key, 1);
    int replaced = s[h].key != 0;
    if (replaced && old) *old = s[h].val;
    m->n += !replaced;
    s[h].key = key;
    s[h].val = val;
    return replaced;
}

/* The same, making room first: -1 when out of memory. */
static inline int lp_map_put(struct lp_map *m, uint64_t key, uint64_t val, uint64_t *old) {
    if (lp_map_full(m) && lp_map_grow(m)) return -1;
    return lp_map_insert(m, key, val, old);
}

/* Remove `key`: 1 and its value in `val`, or 0 if absent. */
static inline int lp_map_take(struct lp_map *m, uint64_t key, uint64_t *val) {
    if (LP_MAP_UNLIKELY(!m->cap)) return 0;
    uint64_t h = lp_slot_find(m->slots, m->cap - 1, m->shift, key, 0);
    if (!m->slots[h].key) return 0;
    *val = m->slots[h].val;
    m->n--;
    lp_slot_remove(m->slots, m->cap - 1, m->shift, h);
    return 1;
}

#endif
