/* map.c: linear probing, grown at 3/4 load, with backward-shift deletion so that no tombstones
 * accumulate over millions of malloc/free pairs. */
#include "map.h"
#include "os.h"

#include <stdlib.h>

static uint64_t slot_of(uint64_t k, uint64_t mask) {
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    return k & mask;
}

static int grow(struct lp_map *m) {
    uint64_t ncap = m->cap ? m->cap * 2 : 1024;
    uint64_t *k = lp_os_calloc(ncap, sizeof *k), *v = lp_os_malloc(ncap * sizeof *v);
    if (!k || !v) {
        lp_os_free(k);
        lp_os_free(v);
        return -1;
    }
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        uint64_t h = slot_of(m->keys[i], ncap - 1);
        while (k[h]) h = (h + 1) & (ncap - 1);
        k[h] = m->keys[i];
        v[h] = m->vals[i];
    }
    lp_os_free(m->keys);
    lp_os_free(m->vals);
    m->keys = k;
    m->vals = v;
    m->cap = ncap;
    return 0;
}

int lp_map_put(struct lp_map *m, uint64_t key, uint64_t val, uint64_t *old) {
    if ((m->n + 1) * 4 > m->cap * 3 && grow(m)) return -1;
    uint64_t mask = m->cap - 1, h = slot_of(key, mask);
    while (m->keys[h]) {
        if (m->keys[h] == key) {
            if (old) *old = m->vals[h];
            m->vals[h] = val;
            return 1;
        }
        h = (h + 1) & mask;
    }
    m->keys[h] = key;
    m->vals[h] = val;
    m->n++;
    return 0;
}

int lp_map_get(const struct lp_map *m, uint64_t key, uint64_t *val) {
    if (!m->cap) return 0;
    uint64_t mask = m->cap - 1;
    for (uint64_t h = slot_of(key, mask); m->keys[h]; h = (h + 1) & mask) {
        if (m->keys[h] == key) {
            *val = m->vals[h];
            return 1;
        }
    }
    return 0;
}

int lp_map_take(struct lp_map *m, uint64_t key, uint64_t *val) {
    if (!m->cap) return 0;
    uint64_t mask = m->cap - 1, h = slot_of(key, mask);
    while (m->keys[h] != key) {
        if (!m->keys[h]) return 0;
        h = (h + 1) & mask;
    }
    *val = m->vals[h];
    m->n--;
    uint64_t i = h;
    for (uint64_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        /* move j back into the hole at i unless its home slot lies cyclically in (i, j] */
        uint64_t home = slot_of(m->keys[j], mask);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    return 1;
}

void lp_map_free(struct lp_map *m) {
    lp_os_free(m->keys);
    lp_os_free(m->vals);
    m->keys = m->vals = NULL;
    m->cap = m->n = 0;
}
