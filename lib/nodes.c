/* nodes.c: see nodes.h.
 *
 * Each node gets, as it is read, a hash of its whole stack (its parent's and its word: a join's,
 * with its native part's), its frames up to its root and the depth that root asks. The stacks the
 * events name are numbered by that hash: one number for every id of one stack, checked frame by
 * frame where two ids share a hash (the recorder's duplicates, or a collision). So reading a node
 * costs no lookup; only the stacks named are looked up, once each. */
#include "nodes.h"

#include <string.h>

#include "map.h"
#include "os.h"
#include "vec.h"

struct lp_nodes {
    /* by node id: its word, its parent's id, the hash of its stack (0: no node of this id), its
     * frames up to its root (or to its top), and the depth its root asks (0: none, or a part with
     * no root: shown whole) */
    uint64_t *word, *hash;
    uint32_t *parent, *len, *depth;
    size_t cap;
    uint32_t n;            /* ids below this have room */
    uint64_t nodes;        /* nodes read */
    struct lp_map by_hash; /* a named stack's hash (chained on a collision) -> its number */
    uint32_t *ref;         /* by id: its number (0: not named yet) */
    size_t capref;         /* (ref's room, like cap) */
    uint32_t *rep, nrep;   /* by number: the first id it was named by */
    size_t caprep;
};

struct lp_nodes *lp_nodes_new(void) {
    return lp_os_calloc(1, sizeof(struct lp_nodes));
}

void lp_nodes_free(struct lp_nodes *t) {
    if (!t) return;
    lp_os_free(t->word);
    lp_os_free(t->hash);
    lp_os_free(t->parent);
    lp_os_free(t->len);
    lp_os_free(t->depth);
    lp_map_free(&t->by_hash);
    lp_os_free(t->ref);
    lp_os_free(t->rep);
    lp_os_free(t);
}

static inline int defined(const struct lp_nodes *t, uint32_t id) { return id && id < t->n && t->hash[id]; }

static uint64_t mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xff51afd7ed558ccdull;
    return (h ^ (h >> 32)) | 1; /* (never 0: 0 marks no node) */
}

static int room(struct lp_nodes *t, uint32_t id) {
    if (id < t->n) return 0;
    size_t need = (size_t)id + 1, c[5] = {t->cap, t->cap, t->cap, t->cap, t->cap};
    if (LP_RESERVE_ZERO(t->word, c[0], need) || LP_RESERVE_ZERO(t->hash, c[1], need) ||
        LP_RESERVE_ZERO(t->parent, c[2], need) || LP_RESERVE_ZERO(t->len, c[3], need) ||
        LP_RESERVE_ZERO(t->depth, c[4], need))
        return -1;
    size_t m = c[0];
    for (int i = 1; i < 5; i++)
        if (c[i] < m) m = c[i];
    t->cap = m;
    t->n = (uint32_t)(m > UINT32_MAX ? UINT32_MAX : m);
    return 0;
}

int lp_nodes_add(struct lp_nodes *t, uint32_t id, uint32_t parent, uint64_t word) {
    if (!id || parent >= id || (LP_IS_JOIN(word) && LP_JOIN_NATIVE(word) >= id)) return 1;
    if (room(t, id) != 0) return -1;
    if (t->hash[id] || (parent && !defined(t, parent)) ||
        (LP_IS_JOIN(word) && LP_JOIN_NATIVE(word) && !defined(t, LP_JOIN_NATIVE(word))))
        return 1;
    t->word[id] = word;
    t->parent[id] = parent;
    t->len[id] = LP_IS_ROOT(word) ? 0 : (parent ? t->len[parent] : 0) + 1;
    t->depth[id] = LP_IS_ROOT(word) ? LP_ROOT_DEPTH(word) : parent ? t->depth[parent] : 0;
    uint64_t h = parent ? t->hash[parent] : 0x7f4a7c15u;
    if (LP_IS_JOIN(word)) /* (a join is its native part's stack, not its id) */
        h = mix(mix(h, word & ~UINT64_C(0xffffffff)), LP_JOIN_NATIVE(word) ? t->hash[LP_JOIN_NATIVE(word)] : 0);
    else
        h = mix(h, word);
    t->hash[id] = h;
    t->nodes++;
    return 0;
}

/* Are nodes a and b the same stack? (Their hashes are equal.) */
static int same(const struct lp_nodes *t, uint32_t a, uint32_t b) {
    while (a != b) {
        if (!defined(t, a) || !defined(t, b) || t->hash[a] != t->hash[b] || t->len[a] != t->len[b]) return 0;
        uint64_t wa = t->word[a], wb = t->word[b];
        if (LP_IS_JOIN(wa) && LP_IS_JOIN(wb)) {
            if ((wa & ~UINT64_C(0xffffffff)) != (wb & ~UINT64_C(0xffffffff))) return 0;
            uint32_t na = LP_JOIN_NATIVE(wa), nb = LP_JOIN_NATIVE(wb);
            if (na != nb && (!na || !nb || !same(t, na, nb))) return 0;
        } else if (wa != wb) {
            return 0;
        }
        a = t->parent[a];
        b = t->parent[b];
    }
    return 1;
}

uint32_t lp_nodes_ref(struct lp_nodes *t, uint32_t raw) {
    if (!raw) return 0;
    if (raw < t->capref && t->ref[raw]) return t->ref[raw];
    if (LP_RESERVE_ZERO(t->ref, t->capref, (size_t)raw + 1) != 0) return 0;
    /* (a raw id not defined yet is a stack of its own: keyed by itself) */
    uint64_t h = defined(t, raw) ? t->hash[raw] : (uint64_t)raw << 32 | 2, v;
    for (;; h = h + 1 ? h + 1 : 1) { /* (two stacks with one hash: the next key) */
        if (!lp_map_get(&t->by_hash, h, &v)) break;
        if (defined(t, raw) && same(t, t->rep[v], raw)) return t->ref[raw] = (uint32_t)v;
    }
    if (LP_RESERVE(t->rep, t->caprep, (size_t)t->nrep + 2) != 0) return 0;
    if (!t->nrep) t->rep[t->nrep++] = 0; /* (number 0: no stack) */
    if (lp_map_put(&t->by_hash, h, t->nrep, NULL) < 0) return 0;
    t->rep[t->nrep] = raw;
    return t->ref[raw] = t->nrep++;
}

uint32_t lp_nodes_nrefs(const struct lp_nodes *t) { return t->nrep ? t->nrep : 1; }
uint32_t lp_nodes_distinct(const struct lp_nodes *t) {
    return (uint32_t)(t->nodes > UINT32_MAX ? UINT32_MAX : t->nodes);
}

/* The words of the stack of node `id`, innermost first, into out (at most max), up to its root
 * (format.h): their number; a native part hung from a root of depth d > 0 that has d frames or
 * more is cut to its innermost d, and *cut set. (Its length known, only what is shown is read:
 * a native part is whole, often a hundred frames, for a depth of 16.) */
static uint32_t path(const struct lp_nodes *t, uint32_t id, uint64_t *out, uint32_t max, int *cut) {
    uint32_t n = 0, want = defined(t, id) ? t->len[id] : 0, d = defined(t, id) ? t->depth[id] : 0;
    *cut = d && want >= d;
    if (*cut) want = d;
    if (want > max) want = max;
    while (n < want && defined(t, id)) {
        out[n++] = t->word[id];
        id = t->parent[id];
    }
    return n;
}

uint32_t lp_nodes_view(const struct lp_nodes *t, uint32_t ref, struct lp_frames *v) {
    v->f = v->buf;
    v->n = 0;
    uint32_t id = ref && ref < t->nrep ? t->rep[ref] : 0;
    if (!defined(t, id)) return 0;
    uint64_t w = t->word[id];
    int cut;
    if (!LP_IS_JOIN(w)) {
        uint32_t n = path(t, id, v->buf, LP_STACK_MAX_FRAMES, &cut);
        for (uint32_t i = 0; i < n; i++) /* (the tags off) */
            v->buf[i] = v->buf[i] & LP_PYFRAME_BIT ? v->buf[i] & ~LP_PY_RUN_END : v->buf[i] & ~LP_NATIVE_TAGS;
        return v->n = n;
    }
    uint64_t nat[LP_STACK_MAX_FRAMES], py[LP_STACK_MAX_DEPTH];
    int pcut;
    uint32_t nn = path(t, LP_JOIN_NATIVE(w), nat, LP_STACK_MAX_FRAMES, &cut);
    uint32_t np = path(t, t->parent[id], py, LP_STACK_MAX_DEPTH, &pcut);
    return v->n = lp_stack_join(v->buf, nat, nn, py, np, LP_JOIN_FLAGS(w) | (cut ? LP_PAIR_CUT : 0u));
}

uint32_t lp_stack_join(uint64_t *out, const uint64_t *nat, uint32_t nn, const uint64_t *py, uint32_t np,
                       uint32_t flags) {
    /* the Python runs go where the native part runs the evaluation loop */
    uint32_t p = 0, m = 0;
    int in_py = 0;
    for (uint32_t i = 0; i < nn && m < LP_STACK_MAX_FRAMES; i++) {
        uint64_t w = nat[i];
        if ((w & LP_NATIVE_EVAL) && p < np) {
            while (p < np && m < LP_STACK_MAX_FRAMES) {
                uint64_t q = py[p++];
                out[m++] = q & ~LP_PY_RUN_END;
                if (q & LP_PY_RUN_END) break;
            }
            in_py = 1;
        } else if (!in_py || !(w & LP_NATIVE_INTERP)) { /* the interpreter's own frames between runs: left out */
            out[m++] = w & ~LP_NATIVE_TAGS;
        }
    }
    if (p < np && (flags & LP_PAIR_CUT) && m < LP_STACK_MAX_FRAMES) out[m++] = LP_FRAME_ELIDED;
    while (p < np && m < LP_STACK_MAX_FRAMES) out[m++] = py[p++] & ~LP_PY_RUN_END;
    return m;
}
