/* nodes.c: the recorder's call stacks as a tree (nodes.h).
 *
 * A node is (parent id, frame word); ids are handed out in order and every node reaches the
 * spool as a STACKS entry, in id order, before the records that name it are written
 * (lpr_nodes_write, called before each chunk of events: stacks.c). So the file holds each
 * distinct (caller, frame) pair once per time it was made, and a stack is one id in a record.
 *
 * Finding a node made before: a hash table of buckets of eight slots (a tag of the key's hash |
 * id), one cache line each — a lookup reads one bucket, and the node's key back from a ring of
 * the last RING nodes made. The ring is what bounds the memory: a
 * node older than that is forgotten, and if its stack comes again it is made again under a new
 * id — the reader takes both ids as one stack (lib/nodes.c). A thread's memos (struct lpr_path)
 * keep the nodes of the stacks it captured last, written or not, so the stacks a program keeps
 * coming back to are found there first; the table serves what is shared between threads and
 * captures of other kinds. Nothing fills: the table is a cache, the ring turns over.
 *
 * No lock. A node is made by taking its id (a compare-and-swap on the next id, only while its
 * ring slot's previous node is written: otherwise the maker writes what is pending itself, or
 * waits for the thread writing — a signal handler never waits: its stack is dropped and
 * counted), writing its slot (its id last, cleared first: a reader checks the id before and
 * after reading the key, as a sequence lock), then publishing it in the table. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "nodes.h"
#include "log.h"
#include "own.h"
#include "os_real.h"
#include "tbuf.h"
#include "sys.h"

#define RING_BITS 18
#define RING (1u << RING_BITS) /* nodes kept to be found again (16 B each: 4 MiB) */
#define SLOT_BITS 19
#define SLOTS (1u << SLOT_BITS) /* the table at its largest: tag << 32 | id (8 B each: 4 MiB) */
#define SLOTS_FIRST \
    (1u << 15)      /* at first (256 KiB): a program of a few thousand stacks keeps it in
                                 * its caches, and touches no more of it */
#define BUCKET 8    /* slots a key may be in: one cache line */
#define MARGIN 4096 /* ids taken with room left in the ring: makers start writing then */

struct node {
    uint64_t word;
    uint32_t parent;
    uint32_t id; /* written last; 0 while the node is being made */
};

static struct node *ring;
static uint64_t *slot;
static uint32_t next_id = 1;  /* the next id to hand out */
static uint32_t written = 1;  /* ids below this are in the spool */
static uint32_t floor_id = 1; /* ids below this are not this spool's (a forked child's parent's) */
static uint64_t dropped;
/* The part of the table in use: its first slot_mask + 1 slots. Four times as many once as many
 * nodes were made as it has slots; a node put in the smaller part is then looked for elsewhere
 * and made again (the table is a cache), once. */
static uint32_t slot_mask = SLOTS_FIRST - 1;
static int writing;

int lpr_nodes_init(int resident) {
    if (ring) return 0;
    const int prot = PROT_READ | PROT_WRITE;
    struct node *r = lpr_own_map(LP_OWN_STACKS, RING * sizeof *r, prot, MAP_NORESERVE);
    uint64_t *s = lpr_own_map(LP_OWN_STACKS, SLOTS * 8ull, prot, MAP_NORESERVE); /* (page-aligned: lines) */
    if (!r || !s) {
        lpr_warn("out of memory for the stack table; recording without call stacks");
        return -1;
    }
    if (resident) {
        lpr_resident(r, 0, RING * sizeof *r);
        lpr_resident(s, 0, SLOTS * 8ull);
    }
    slot = s;
    __atomic_store_n(&ring, r, __ATOMIC_RELEASE);
    return 0;
}

int lpr_nodes_ready(void) { return __atomic_load_n(&ring, __ATOMIC_ACQUIRE) != NULL; }

uint64_t lpr_nodes_memory(void) { return ring ? RING * sizeof(struct node) + SLOTS * 8ull : 0; }
uint64_t lpr_nodes_made(void) { return __atomic_load_n(&next_id, __ATOMIC_RELAXED) - floor_id; }
uint64_t lpr_nodes_dropped(void) { return __atomic_load_n(&dropped, __ATOMIC_RELAXED); }

static inline uint64_t key_hash(uint32_t parent, uint64_t w) {
    uint64_t h = (w ^ ((uint64_t)parent << 29 | parent)) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

/* Node `id` is (parent, w), still in its ring slot and one of this spool's. */
static inline int holds(uint32_t id, uint32_t parent, uint64_t w) {
    if (id < floor_id) return 0;
    const struct node *n = &ring[id & (RING - 1)];
    if (__atomic_load_n(&n->id, __ATOMIC_ACQUIRE) != id) return 0;
    uint64_t nw = __atomic_load_n(&n->word, __ATOMIC_RELAXED);
    uint32_t np = __atomic_load_n(&n->parent, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return nw == w && np == parent && __atomic_load_n(&n->id, __ATOMIC_RELAXED) == id;
}

/* Is slot value v's node gone (its ring slot taken by a later one, or not this spool's)? Told
 * from the ids alone: the ring holds the last RING ids handed out. */
static inline int gone(uint64_t v, uint32_t next) {
    uint32_t id = (uint32_t)v;
    return id < floor_id || next - id > RING;
}

static uint32_t lookup_or_make(uint64_t h, uint64_t tag, uint32_t parent, uint64_t w, int handler, int *fresh);

/* A new id, once its ring slot's previous node is in the spool; 0 (`handler`: it would wait). */
static uint32_t take_id(int handler) {
    uint32_t id = __atomic_load_n(&next_id, __ATOMIC_RELAXED);
    for (unsigned spins = 0;;) {
        uint32_t w = __atomic_load_n(&written, __ATOMIC_ACQUIRE);
        if (id - w >= RING - MARGIN) { /* (the nodes not written yet would fill the ring) */
            if (!handler || id - w < RING) lpr_nodes_write(NULL);
            w = __atomic_load_n(&written, __ATOMIC_ACQUIRE);
            if (id - w >= RING) {
                if (handler || ++spins > 100000) return 0;
                LP_SYS(SYS_sched_yield, 0, 0, 0);
                id = __atomic_load_n(&next_id, __ATOMIC_RELAXED);
                continue;
            }
        }
        if (id == UINT32_MAX) return 0; /* (4 G nodes: the ids are spent) */
        if (__atomic_compare_exchange_n(&next_id, &id, id + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return id;
    }
}

uint32_t lpr_node_under(uint32_t parent, uint64_t w, struct lpr_node_cache *c, int handler, int *fresh) {
    uint64_t h = key_hash(parent, w), tag = h & ~UINT64_C(0xffffffff);
    _Static_assert(LPR_NODE_CACHE == 1 << 12, "the cache's index: the hash's top 12 bits");
    __typeof__(&c->e[0]) ce = c ? &c->e[h >> (64 - 12)] : NULL;
    if (!*fresh && ce && ce->word == w && ce->parent == parent && ce->id) return ce->id;
    uint32_t id = lookup_or_make(h, tag, parent, w, handler, fresh);
    if (ce && id) ce->word = w, ce->parent = parent, ce->id = id;
    return id;
}

uint32_t lpr_node(uint32_t parent, uint64_t w, struct lpr_node_cache *c, int handler) {
    int fresh = 0;
    return lpr_node_under(parent, w, c, handler, &fresh);
}

/* (lpr_node past its cache) A node under a parent just made (*fresh) cannot be in the table: it
 * is made without a look, and put in its bucket without reading it (a slot chosen by the hash) —
 * a new stack's frames below the first new one cost no wait on the table's memory. */
static uint32_t lookup_or_make(uint64_t h, uint64_t tag, uint32_t parent, uint64_t w, int handler, int *fresh) {
    uint32_t mask = __atomic_load_n(&slot_mask, __ATOMIC_RELAXED);
    uint64_t *b = &slot[((uint32_t)h & mask) & ~(BUCKET - 1)];
    uint32_t put = (uint32_t)(h >> 32) & (BUCKET - 1);
    if (!*fresh) {
        for (uint32_t i = 0; i < BUCKET; i++) {
            uint64_t v = __atomic_load_n(&b[i], __ATOMIC_ACQUIRE);
            if (!((v ^ tag) >> 32) && v && holds((uint32_t)v, parent, w)) return (uint32_t)v;
        }
        /* not there: where it goes — an empty slot, or one whose node is gone, or the oldest */
        uint32_t next = __atomic_load_n(&next_id, __ATOMIC_RELAXED), oldest = UINT32_MAX;
        for (uint32_t i = 0; i < BUCKET && oldest; i++) {
            uint64_t v = __atomic_load_n(&b[i], __ATOMIC_RELAXED);
            uint32_t age = !v || gone(v, next) ? 0 : (uint32_t)v;
            if (age < oldest) oldest = age, put = i;
        }
    }
    uint32_t id = take_id(handler);
    if (!id) {
        __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
        *fresh = 0;
        return 0;
    }
    *fresh = 1;
    struct node *n = &ring[id & (RING - 1)];
    __atomic_store_n(&n->id, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&n->word, w, __ATOMIC_RELAXED);
    __atomic_store_n(&n->parent, parent, __ATOMIC_RELAXED);
    __atomic_store_n(&n->id, id, __ATOMIC_RELEASE);
    /* (a slot taken meanwhile by another node is simply overwritten: the table is a cache) */
    __atomic_store_n(&b[put], tag | id, __ATOMIC_RELEASE);
    if (LP_UNLIKELY(id - floor_id > mask) && mask < SLOTS - 1) /* (racing makers: the same larger mask) */
        __atomic_store_n(&slot_mask, (mask + 1) * 4 - 1 < SLOTS - 1 ? (mask + 1) * 4 - 1 : SLOTS - 1, __ATOMIC_RELAXED);
    return id;
}

uint32_t lpr_nodes_path(struct lpr_path *m, const uint64_t *f, unsigned n, struct lpr_node_cache *c, int handler) {
    if (n == 0) return 0;
    if (n > LPR_PATH_MAX) n = LPR_PATH_MAX; /* (the outermost frames kept: the stack as the tree has it) */
    uint32_t k = 0, node = 0;
    if (m) {
        uint32_t most = m->n < n ? m->n : n;
        while (k < most && m->word[k] == f[n - 1 - k]) k++;
        node = k ? m->node[k - 1] : 0;
    }
    int fresh = 0;
    for (uint32_t j = k; j < n; j++) {
        uint64_t w = f[n - 1 - j];
        if (!(node = lpr_node_under(node, w, c, handler, &fresh))) {
            if (m) m->n = j;
            return 0;
        }
        if (m) m->word[j] = w, m->node[j] = node;
    }
    if (m) m->n = n;
    return node;
}

static uint64_t wbuf[8190]; /* (a multiple of 3 words: whole entries) */

void lpr_nodes_write(const struct lpr_node_tags *tags) {
    static struct lpr_node_tags last; /* (the last ranges given: NULL keeps them) */
    if (!ring || __atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE)) return;
    if (tags) last = *tags;
    const struct lpr_node_tags t = last;
    uint32_t upto = __atomic_load_n(&next_id, __ATOMIC_ACQUIRE), id = __atomic_load_n(&written, __ATOMIC_RELAXED);
    size_t used = 0;
    for (; id != upto; id++) {
        const struct node *n = &ring[id & (RING - 1)];
        if (__atomic_load_n(&n->id, __ATOMIC_ACQUIRE) != id) break; /* being made: the next call takes it */
        uint64_t w = n->word;
        /* where a native frame runs the interpreter (format.h); Python words and joins have none */
        if (!(w & LP_PYFRAME_BIT))
            w |= w - 1 - t.eval_lo < t.eval_span       ? LP_NATIVE_EVAL
                 : w - 1 - t.interp_lo < t.interp_span ? LP_NATIVE_INTERP
                                                       : 0;
        if (used + 3 > sizeof wbuf / 8) {
            lpr_spool_write(LP_CHUNK_STACKS, 0, wbuf, used * 8, NULL, 0);
            used = 0;
        }
        wbuf[used++] = (uint64_t)id | (uint64_t)LP_STACK_NODE << 32;
        wbuf[used++] = n->parent;
        wbuf[used++] = w;
    }
    if (used) lpr_spool_write(LP_CHUNK_STACKS, 0, wbuf, used * 8, NULL, 0);
    __atomic_store_n(&written, id, __ATOMIC_RELEASE);
    __atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
}

void lpr_nodes_after_fork_child(void) {
    uint32_t n = __atomic_load_n(&next_id, __ATOMIC_RELAXED);
    floor_id = n;
    written = n;
    writing = 0;
    dropped = 0;
}
