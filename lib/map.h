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

/* Insert or replace `key` (nonzero). Returns 0 if it was new, 1 if it replaced a value (copied to
 * `old` when not NULL), -1 when out of memory. */
int lp_map_put(struct lp_map *m, uint64_t key, uint64_t val, uint64_t *old);
/* 1 and the value in `val` if `key` is present, else 0. */
int lp_map_get(const struct lp_map *m, uint64_t key, uint64_t *val);
/* Remove `key`: 1 and its value in `val`, or 0 if absent. */
int lp_map_take(struct lp_map *m, uint64_t key, uint64_t *val);
void lp_map_free(struct lp_map *m);

#endif
