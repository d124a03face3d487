/* nodes.c: see nodes.h. */
#include "nodes.h"

#include <string.h>

#include "map.h"
#include "os.h"
#include "reader.h"
#include "vec.h"

struct lp_nodes {
    /* by node id: its word, its parent's id, its canonical id (the first node of its stack; 0:
     * no node of this id) */
    uint64_t *word;
    uint32_t *parent, *canon;
    size_t cap;
    uint32_t n;           /* ids below this have room */
    uint32_t distinct;    /* canonical nodes */
    struct lp_map by_key; /* hash of (canonical parent, canonical word) -> canonical id (chained on collision) */
    uint32_t *ref;        /* by canonical id: its dense number (0: not named yet) */
    size_t capref;        /* (ref's room, like cap) */
    uint32_t *rep, nrep;  /* by dense number: its canonical id */
    size_t caprep;
};

struct lp_nodes *lp_nodes_new(void) {
    return lp_os_calloc(1, sizeof(struct lp_nodes));
}

void lp_nodes_free(struct lp_nodes *t) {
    if (!t) return;
    lp_os_free(t->word);
    lp_os_free(t->parent);
    lp_os_free(t->canon);
    lp_os_free(t->ref);
    lp_os_free(t->rep);
    lp_map_free(&t->by_key);
    lp_os_free(t);
}

/* A node's word with the ids it names made canonical (a join's native part). */
static uint64_t canon_word(const struct lp_nodes *t, uint64_t w) {
    if (!LP_IS_JOIN(w)) return w;
    uint32_t nat = LP_JOIN_NATIVE(w);
    return (w & ~UINT64_C(0xffffffff)) | (nat < t->n && t->canon[nat] ? t->canon[nat] : nat);
}

static uint64_t key_hash(uint32_t parent, uint64_t word) {
    uint64_t h = (word ^ (uint64_t)parent * 0x9E3779B97F4A7C15ull) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    return h ? h : 1; /* (0 is the map's empty key) */
}

static int room(struct lp_nodes *t, uint32_t id) {
    if (id < t->n) return 0;
    size_t need = (size_t)id + 1, c1 = t->cap, c2 = t->cap, c3 = t->cap;
    if (LP_RESERVE_ZERO(t->word, c1, need) || LP_RESERVE_ZERO(t->parent, c2, need) ||
        LP_RESERVE_ZERO(t->canon, c3, need))
        return -1;
    t->cap = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    t->n = (uint32_t)(t->cap > UINT32_MAX ? UINT32_MAX : t->cap);
    return 0;
}

int lp_nodes_add(struct lp_nodes *t, uint32_t id, uint32_t parent, uint64_t word) {
    if (!id || parent >= id || (LP_IS_JOIN(word) && LP_JOIN_NATIVE(word) >= id)) return 1;
    if (room(t, id) != 0) return -1;
    if (t->canon[id] || (parent && !t->canon[parent])) return 1;
    t->word[id] = word;
    t->parent[id] = parent;
    uint32_t cp = parent ? t->canon[parent] : 0;
    uint64_t cw = canon_word(t, word), h = key_hash(cp, cw), v;
    for (;; h = h + 1 ? h + 1 : 1) { /* (a collision of two keys' hashes: the next one) */
        if (!lp_map_get(&t->by_key, h, &v)) break;
        uint32_t c = (uint32_t)v;
        uint32_t p = t->parent[c] ? t->canon[t->parent[c]] : 0;
        if (p == cp && canon_word(t, t->word[c]) == cw) {
            t->canon[id] = c; /* the same stack again */
            return 0;
        }
    }
    if (lp_map_put(&t->by_key, h, id, NULL) < 0) return -1;
    t->canon[id] = id;
    t->distinct++;
    return 0;
}

uint32_t lp_nodes_ref(struct lp_nodes *t, uint32_t raw) {
    if (!raw) return 0;
    uint32_t c = raw < t->n && t->canon[raw] ? t->canon[raw] : raw;
    if (c < t->capref && t->ref[c]) return t->ref[c];
    if (LP_RESERVE_ZERO(t->ref, t->capref, (size_t)c + 1) != 0) return 0;
    if (LP_RESERVE(t->rep, t->caprep, (size_t)t->nrep + 2) != 0) return 0;
    if (!t->nrep) t->rep[t->nrep++] = 0; /* (number 0: no stack) */
    t->rep[t->nrep] = c;
    return t->ref[c] = t->nrep++;
}

uint32_t lp_nodes_nrefs(const struct lp_nodes *t) { return t->nrep ? t->nrep : 1; }
uint32_t lp_nodes_distinct(const struct lp_nodes *t) { return t->distinct; }

/* The words of the stack of node `id`, innermost first, into out (at most max), up to its root
 * (format.h): their number; a native part hung from a root of depth d > 0 that has d frames or
 * more is cut to its innermost d, and *cut set. */
static uint32_t path(const struct lp_nodes *t, uint32_t id, uint64_t *out, uint32_t max, int *cut) {
    uint32_t n = 0, all = 0; /* (all: its frames, past the room too, up to the root) */
    *cut = 0;
    for (uint32_t hops = 0; id && id < t->n && t->canon[id] && hops < (1u << 20); hops++) {
        uint64_t w = t->word[id];
        if (LP_IS_ROOT(w)) {
            uint32_t d = LP_ROOT_DEPTH(w);
            if (d && all >= d) {
                if (n > d) n = d;
                *cut = 1;
            }
            break;
        }
        if (n < max) out[n++] = w;
        all++;
        id = t->parent[id];
    }
    return n;
}

uint32_t lp_nodes_view(const struct lp_nodes *t, uint32_t ref, struct lp_frames *v) {
    v->f = v->buf;
    v->n = 0;
    uint32_t id = ref && ref < t->nrep ? t->rep[ref] : 0;
    if (!id || id >= t->n || !t->canon[id]) return 0;
    uint64_t w = t->word[id];
    int cut;
    if (!LP_IS_JOIN(w)) {
        uint32_t n = path(t, id, v->buf, LP_STACK_MAX_FRAMES, &cut);
        for (uint32_t i = 0; i < n; i++) /* (the tags off) */
            v->buf[i] = v->buf[i] & LP_PYFRAME_BIT ? v->buf[i] & ~LP_PY_RUN_END : v->buf[i] & ~LP_NATIVE_TAGS;
        return v->n = n;
    }
    /* (a native part is read whole, up to its root, then cut: its innermost frames are the first) */
    uint64_t nat[LP_STACK_MAX_FRAMES], py[LP_STACK_MAX_DEPTH];
    int pcut;
    uint32_t nn = path(t, LP_JOIN_NATIVE(w), nat, LP_STACK_MAX_FRAMES, &cut);
    uint32_t np = path(t, t->parent[id], py, LP_STACK_MAX_DEPTH, &pcut);
    return v->n = lp_stack_join(v->buf, nat, nn, py, np, LP_JOIN_FLAGS(w) | (cut ? LP_PAIR_CUT : 0u));
}
