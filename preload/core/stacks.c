/* stacks.c: allocation call stacks (LIBPROF_STACKS=N) — capture with libunwind, deduplication
 * into a process-wide table, and the module map that lets a reader symbolise them offline.
 *
 * Capture: libunwind's unw_backtrace with its per-thread cache (the same fast path heaptrack
 * uses). libunwind is dlopen'ed RTLD_LOCAL when stacks are asked for, never linked: linked into
 * a preload it would join the program's global scope and its exported `backtrace` and
 * `_Unwind_Backtrace` would replace the C library's for the whole program.
 *
 * The store: a tree (nodes.c) — each distinct (caller, frame) pair once, a stack the node of its
 * innermost frame; events carry only that id (one word). A thread keeps the stacks it captured
 * last, one memo per kind (native part, Python part; the hooks', the sampler's), each with the
 * node of every frame: a new stack shares the outer frames of the last one and only its new inner
 * frames are looked up. The store's memory is bounded (what it forgets is made again: the reader
 * takes two ids of one stack as one), so it never fills.
 *
 * Capture cost is what stacks cost (libunwind: ~90 instructions a frame), and programs allocate
 * from the same few call chains over and over. So each thread keeps the chains it last walked
 * (lpr_stack_native): keyed by where the capture was called from and the stack pointer there,
 * each with the address of every frame's saved return address and the value found there. A
 * chain is reused only if every one of those slots still holds the same return address — read,
 * never written — checked from the innermost frame out, so each slot is read only once the
 * frames inside it are known to be the same, within the thread's live stack. On x86-64 a
 * return address is always at CFA - 8 of the frame it returns from, so the slots come from the
 * walk itself (libunwind's unw_step, which gives each frame's stack pointer). Any difference is
 * a miss and a fresh walk.
 *
 * The nodes reach the spool as they are made: before a thread's chunk of events is written, the
 * nodes made since the last such write go first (lpr_stacks_write), so every id a written event
 * names is already in the file — a process killed with SIGKILL leaves a spool that decodes with
 * its call stacks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "stacks.h"
#include "clock.h"
#include "nodes.h"
#include "config.h"
#include "log.h"
#include "os_real.h"
#include "real.h"
#include "state.h"
#include "tbuf.h"
#include "walk.h"
#include "lib/poisson.h"
#include "sys.h"

unsigned lpr_stack_depth;
int (*lpr_unw_backtrace)(void **, int);
/* 256 sets of 4 chains per thread, a key in either of two sets (a call site may be reached from
 * several callers at the same stack pointer), the least recently used of the eight replaced.
 * With one set a key, hot chains colliding in a set by the accident of where the loader put
 * things cost the walk over and over: a json encode/decode of 20,000 dicts took 1.13 G
 * instructions or 1.32 G as libprof.so's own code moved by a few functions (16 sets: 1.92 G); with
 * two sets of 128 it took 1.03 G at most placements and 1.16 G at one; with two of 256, 1.03 G
 * at all six tried. Eight ways looked through cost more than four (1.04 G against 1.03 G, and
 * 7 % more at 200,000 dicts): a hint per key names the chain that served it last, looked at
 * first (1.025 G). The cache is mapped per thread and a set's pages are touched only when used:
 * at most 690 KiB a thread. */
#define CACHE_SET_BITS 8
#define CACHE_SETS (1u << CACHE_SET_BITS)
#define CACHE_WAYS 4
#define CACHE_HINTS 256            /* the last chain each key (by a third slice of its hash) was served by */
#define SEEN_ONCE (UINT32_MAX - 1) /* chain.n: noted, not walked for the cache yet */
#define WALK_AFTER 16              /* captures of a key before its chain is walked for the cache */
#define RETRY_AFTER 256 /* captures of a key whose chain was not kept (too deep, cut) before it is tried again */
#define CACHE_FRAMES 40 /* frames a cached chain may have (deeper: walked every time) */
static int cacheable;   /* the cursor API was found, and the depth fits */
static int walker;      /* the sampler's walker (walk.c) takes the stacks */
static uintptr_t self_lo, self_hi; /* libprof's own code: frames dropped from the top */
static uintptr_t unw_lo, unw_hi;   /* libunwind's, likewise */

struct range {
    uintptr_t inside, lo, hi;
};

/* The executable segment of the object containing `inside`. */
static int find_range(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct range *r = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (r->inside >= lo && r->inside < hi) {
            r->lo = lo;
            r->hi = hi;
            return 1;
        }
    }
    return 0;
}

/* The table itself (also for the Python frames of calls, without LIBPROF_STACKS): 0, or -1
 * with one warning. Once, before any thread can intern. With CPU samples and no allocation
 * stacks, the sampler's signal handler makes the nodes: resident at once. */
int lpr_stacks_table(void) { return lpr_nodes_init(lpr_cfg.sample_hz && !lpr_cfg.stacks); }

/* libprof's own text: frames in it are left out of stacks, samples in it are told apart. */
static void self_range(void) {
    if (self_hi) return;
    struct range me = {(uintptr_t)&lpr_stacks_init, 0, 0};
    lpr_dl_iterate(find_range, &me);
    self_lo = me.lo;
    self_hi = me.hi;
}

/* libunwind, loaded once (for allocation stacks): 0, or -1 with one warning naming `who` asked. */
static int unwind_load(const char *who) {
    static int state; /* 0 not tried, 1 loaded, -1 failed */
    if (state) return state > 0 ? 0 : -1;
    state = -1;
    lpr_real_resolve();
    void *h = LPR_REAL(dlopen)("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        lpr_warn("%s: cannot load libunwind.so.8 (%s); no native call stacks", who, dlerror());
        return -1;
    }
    int (*unw_bt)(void **, int) = (int (*)(void **, int))lpr_dlsym(h, "unw_backtrace");
    int (*policy)(void *, int) = (int (*)(void *, int))lpr_dlsym(h, "_ULx86_64_set_caching_policy");
    void **space = (void **)lpr_dlsym(h, "_ULx86_64_local_addr_space");
    if (!unw_bt) {
        lpr_warn("%s: libunwind has no unw_backtrace; no native call stacks", who);
        return -1;
    }
    /* libunwind's text, known before its first call initialises it (hooks/unwind.c tells its
     * calls apart by it) */
    struct range unw = {(uintptr_t)unw_bt, 0, 0};
    lpr_dl_iterate(find_range, &unw);
    unw_lo = unw.lo;
    unw_hi = unw.hi;
    if (policy && space) policy(*space, 2 /* UNW_CACHE_PER_THREAD */);
    if (lpr_stacks_table() != 0) return -1;
    self_range();
    lpr_unw_backtrace = unw_bt;
    state = 1;
    return 0;
}

uint64_t lpr_alloc_sample;

/* A point fell in the block (or the thread draws its first gap): the next gap drawn. */
int lpr_alloc_sample_point(struct lpr_tls *t, uint64_t size) {
    if (LP_UNLIKELY(!t->sample_rng)) { /* the thread's first: a seed of its own, a first gap */
        uint64_t seed = ((uint64_t)t->tid * UINT64_C(0x9E3779B97F4A7C15)) ^ lpr_ticks() ^ (uintptr_t)t;
        t->sample_rng = seed ? seed : 1;
        t->sample_left = lp_sample_gap(&t->sample_rng, lpr_alloc_sample);
        if (t->sample_left > size) {
            t->sample_left -= size;
            return 0;
        }
    }
    t->sample_left = lp_sample_gap(&t->sample_rng, lpr_alloc_sample);
    return 1;
}

/* Allocation stacks (LIBPROF_STACKS): 0, or -1 (with one warning) when they cannot be captured. */
int lpr_stacks_init(unsigned depth) {
    if (depth == 0) return 0;
    if (depth > LP_STACK_MAX_DEPTH) depth = LP_STACK_MAX_DEPTH;
    if (unwind_load("LIBPROF_STACKS") != 0) return -1;
    lpr_stack_depth = depth;
    lpr_alloc_sample = lpr_cfg.alloc_sample;
    walker = lpr_walk_init() == 0;
    cacheable = walker && !lpr_cfg.stack_cache_off;
    if (walker) self_range();
    return 0;
}

/* The sampler's table and walk (sample.c, walk.c): 0, or -1 when samples get no native frames. */
int lpr_stacks_for_samples(void) {
    if (lpr_stacks_table() != 0 || lpr_walk_init() != 0) return -1;
    self_range();
    return 0;
}

int lpr_in_libprof(uintptr_t pc) { return (pc >= self_lo && pc < self_hi) || (pc >= unw_lo && pc < unw_hi); }

int lpr_stacks_in_unwinder(const void *pc) { return (uintptr_t)pc >= unw_lo && (uintptr_t)pc < unw_hi; }

static inline int ours(uintptr_t a) { return (a >= self_lo && a < self_hi) || (a >= unw_lo && a < unw_hi); }

/* The memos of the last stack interned, by kind (nodes.h: struct lpr_path): the hooks' Python
 * parts (their native parts: struct lpr_join), the sampler's native and Python parts. */
enum { MEMO_PY, MEMO_SAMPLE_NATIVE, MEMO_SAMPLE_PY, MEMOS };
static struct lpr_path *memo_of(int kind);
static struct lpr_node_cache *node_cache(int sampler);
static inline uint32_t with_python(uint32_t native);

/* A stack given as words (Python frames; python.c) as an id. */
uint32_t lpr_stack_intern_words(const uint64_t *f, unsigned n, int sampler) {
    return lpr_nodes_path(memo_of(sampler ? MEMO_SAMPLE_PY : MEMO_PY), f, n, node_cache(sampler), sampler);
}

/* ---- the per-thread cache of call chains (see the top) -------------------------------------- */

struct chain {
    uintptr_t ra, cfa; /* the key: return address and CFA of lpr_stack_native */
    uint32_t id, n;    /* the stack's id; slots to check */
    uint32_t seen;     /* captures of this key while noted (SEEN_ONCE) */
    uint32_t used;     /* when it served or was noted last (the thread's tick): the oldest is replaced */
    uintptr_t slot[CACHE_FRAMES + 1], val[CACHE_FRAMES + 1]; /* (+1: the end's sentinel, never equal) */
};
/* a kept chain's slot after its last: its value is 1, so a check runs to it with no count */
static const uintptr_t never_equal;

/* Room for a walk, kept with the thread's cache rather than on its stack: a hook may run inside a
 * signal handler of the program's on an alternate stack of a few KiB (CPython's faulthandler
 * gives its handlers 16 KiB, of which the kernel's frame of the signal takes 3), and a CPU sample
 * may land in that hook, its frame and handler on the same stack again. One room for the hooks
 * (never re-entered on a thread: the guard), one for the sampler's handler. */
#define WALK_WORDS (LPR_JOIN_MAX + 8)
struct walk_room {
    void *ips[WALK_WORDS];
    uint64_t cfas[WALK_WORDS], saved[WALK_WORDS];
};

struct lpr_stack_cache {
    struct chain set[CACHE_SETS][CACHE_WAYS];
    uint32_t tick;                   /* captures through the cache (chain.used) */
    struct chain *hint[CACHE_HINTS]; /* by key: the chain that served it last (or any, NULL) */
    struct walk_room hook;
    uint64_t sample[LP_STACK_MAX_DEPTH];
    struct lpr_join join; /* the hooks' last native stack, walked (capture) */
    struct lpr_path memo[MEMOS];
    struct lpr_node_cache nodes[2]; /* the hooks', the sampler's (nodes.h) */
};

/* The thread's cache, kept with its registry node (tbuf.c) and mirrored in its TLS: no call
 * once it exists. */
static inline struct lpr_stack_cache *stack_cache_of(struct lpr_tls *t) {
    if (LP_LIKELY(t->scache != NULL)) return (struct lpr_stack_cache *)t->scache;
    return t->thr ? lpr_tbuf_stack_cache(t->thr, sizeof(struct lpr_stack_cache)) : NULL;
}

/* The calling thread's cache of nodes, the hooks' or (`sampler`) the sampler's; NULL: none yet. */
static struct lpr_node_cache *node_cache(int sampler) {
    struct lpr_stack_cache *c = lpr_tls.scache;
    return c ? &c->nodes[sampler != 0] : NULL;
}

/* The calling thread's memo of `kind` (NULL: no cache; the sampler's handler never makes it). */
static struct lpr_path *memo_of(int kind) {
    struct lpr_stack_cache *c = kind >= MEMO_SAMPLE_NATIVE ? lpr_tls.scache : stack_cache_of(&lpr_tls);
    return c ? &c->memo[kind] : NULL;
}

/* ---- the Python part ----------------------------------------------------------------------------
 * A thread running Python gets its Python frames in every stack, whatever the native depth: they
 * come from the interpreter's thread state (python.c), not from where the native walk stops. The
 * stack is then a pair — the native part (its frames tagged where the interpreter runs) and the
 * Python part, each a stack of the table — joined by the reader (include/libprof/format.h), so
 * the table holds each part once: under one Python line a program reaches many native stacks,
 * and one native stack (an allocation inside a library) is reached from many Python lines. A
 * thread remembers the pairs it made last, so a loop allocating from the same line makes none. */
/* python.c's part, once it found an interpreter (lpr_stacks_python): stacks.c sits below it. */
static const struct lpr_stack_python *py_ops;

void lpr_stacks_python(const struct lpr_stack_python *ops) { __atomic_store_n(&py_ops, ops, __ATOMIC_RELEASE); }

/* The stack of native part `native` and Python part `py`: their join node, under the Python
 * part (python.c remembers the pairs each thread made last). The native part hangs from its root,
 * which tells a reader where it is cut (format.h). */
uint32_t lpr_stack_pair(uint32_t native, uint32_t py) {
    return py ? lpr_node(py, LP_JOIN(native, 0), node_cache(0), 0) : native;
}

/* The native part with the thread's Python part, where an interpreter was found (python.c). */
static inline uint32_t with_python(uint32_t native) {
    const struct lpr_stack_python *o = __atomic_load_n(&py_ops, __ATOMIC_RELAXED);
    return o ? o->with(native) : native;
}

/* libunwind's walk of the calling thread, flagged: a CPU sample taken meanwhile (sample.c) must
 * not enter libunwind again on this thread. */
static void unwinding(int on) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    *(volatile uint8_t *)&lpr_tls.in_unwind = (uint8_t)on;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static int backtrace_unw(void **buf, int n) {
    unwinding(1);
    n = lpr_unw_backtrace(buf, n);
    unwinding(0);
    for (int i = 0; i < n; i++) /* (a walk gone astray: no code there, and its top bits are tags) */
        if ((uintptr_t)buf[i] >> 61) return i;
    return n;
}

/* The callers of this point, by the CPU sampler's walker (walk.c): the unwind tables read
 * directly, rules cached by instruction for every thread — no libunwind, no signal mask, no lock
 * but the loader's when a rule is first computed. The walk starts from this very instruction
 * (its address, the stack and frame pointers read together), so the first rule is libprof's own
 * and the frames inside libprof are skipped afterwards like libunwind's. With `join`, it stops
 * where the stack becomes the thread's last one (walk.h). -1 where it cannot start (the thread's
 * stack not found), finds no frame, or is cut where a rule could not be looked up just then (the
 * loader busy in another thread): libunwind's walk then, since the same call chain must give the
 * same stack every time. */
__attribute__((noinline)) static int walk_here(void **buf, uint64_t *cfas, uint64_t *saved, int n,
                                               struct lpr_join *join, int *joined, int *whole) {
    uintptr_t ip, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
    int blocked, j = -1,
                 got = lpr_walk_regs(&lpr_tls, ip, sp, bp, (uint64_t *)buf, cfas, saved, n, whole, &blocked, join, &j);
    if (joined) *joined = j;
    return blocked || (got <= 0 && j < 0) ? -1 : got;
}

/* The node a native part's outermost frame hangs from: the depth asked, so that a reader shows
 * the innermost frames asked for (format.h: LP_NODE_ROOT). */
static uint32_t root_node(struct lpr_join *jm) {
    if (jm && jm->root) return jm->root;
    uint32_t r = lpr_node(0, LP_NODE_ROOT | lpr_stack_depth, NULL, 0);
    if (jm) jm->root = r;
    return r;
}

/* The node of the stack whose innermost program frames are f[0, n) (cfas and slots where they
 * were read: NULL from libunwind's walk) and whose rest is the thread's last stack from its frame
 * `joined` on (its index there, outermost first; -1: none, f goes to the outermost frame, or as
 * far as the walk went); the thread's last stack becomes this one: its frames from `joined` out
 * stay where they are, the new ones are put after them. 0 when a node could not be made. */
static uint32_t join_intern(struct lpr_join *jm, void *const *f, const uint64_t *cfas, const uint64_t *slots,
                            uint32_t n, int joined, int whole) {
    uint32_t keep = (uint32_t)(joined + 1), node = joined >= 0 ? jm->node[joined] : root_node(jm);
    int kept = node && cfas && keep + n <= LPR_JOIN_MAX && (joined < 0 ? whole : jm->whole);
    struct lpr_node_cache *nc = node_cache(0);
    int fresh = 0;
    for (uint32_t i = n, e = keep; i-- > 0 && node; e++) {
        node = lpr_node_under(node, (uint64_t)(uintptr_t)f[i], nc, 0, &fresh);
        if (kept) jm->ra[e] = (uintptr_t)f[i], jm->cfa[e] = cfas[i], jm->slot[e] = slots[i], jm->node[e] = node;
    }
    if (!node || !kept) {
        jm->m = 0; /* (nothing a later walk could join to: not kept) */
        return node;
    }
    jm->m = keep + n;
    jm->whole = 1;
    jm->lo = lpr_tls.stack_lo; /* (every slot kept was read inside these just now) */
    jm->hi = lpr_tls.stack_hi;
    return node;
}

/* Frames at the top of a walk that are libprof's own (and libunwind's). */
static int own_frames(void *const *f, int got) {
    int skip = 0;
    while (skip < got && ours((uintptr_t)f[skip])) skip++;
    return skip;
}

/* A walk with no room of the thread's (no cache: its registry node could not be made): the whole
 * stack, hung from the root, nothing kept. */
__attribute__((noinline)) static uint32_t native_on_stack(void) {
    void *buf[WALK_WORDS];
    int whole = 0, got = walker ? walk_here(buf, NULL, NULL, WALK_WORDS, NULL, NULL, &whole) : -1;
    if (got <= 0) got = backtrace_unw(buf, WALK_WORDS);
    int skip = own_frames(buf, got);
    uint32_t node = root_node(NULL);
    int fresh = 0;
    for (int i = got; i-- > skip && node;) node = lpr_node_under(node, (uint64_t)(uintptr_t)buf[i], NULL, 0, &fresh);
    return node;
}

/* The calling thread's stack from here, walked until it joins its last one (c->join): only the
 * frames that changed are walked and looked up. Where `ch`, the chain of key (ra, cfa) is kept
 * from the walk when every frame of the stack past the key can be checked (the whole stack, up to
 * CACHE_FRAMES of them); else it is marked as not cacheable. */
__attribute__((noinline)) static uint32_t capture(struct lpr_stack_cache *c, struct chain *ch, uintptr_t ra,
                                                  uintptr_t cfa) {
    struct walk_room *w = &c->hook;
    struct lpr_join *jm = &c->join;
    if (LP_UNLIKELY(!jm->own_hi)) jm->own_lo = self_lo, jm->own_hi = self_hi; /* (its prefixes: walk.h) */
    int joined = -1, whole = 0, got = -1;
    if (walker) got = walk_here(w->ips, w->cfas, w->saved, WALK_WORDS, jm, &joined, &whole);
    if (got < 0) { /* libunwind's walk: the whole stack, no CFAs */
        got = backtrace_unw(w->ips, WALK_WORDS);
        int skip = own_frames(w->ips, got);
        if (ch) ch->n = UINT32_MAX;
        return join_intern(jm, w->ips + skip, NULL, NULL, (uint32_t)(got - skip), -1, 0);
    }
    int skip = own_frames(w->ips, got);
    uint32_t id =
        join_intern(jm, w->ips + skip, w->cfas + skip, w->saved + skip, (uint32_t)(got - skip), joined, whole);
    if (!ch) return id;
    /* the chain: the walk's frames after the key's (inside libprof, up to the program's), then the
     * program's, which the thread's last stack now holds (only when kept: whole) */
    int k = 0;
    while (k < skip && ((uintptr_t)w->ips[k] != ra || w->cfas[k] != cfa)) k++;
    uint32_t n = 0;
    ch->id = id;
    ch->n = UINT32_MAX;
    if (k == skip || !id || !jm->m || (uint32_t)(skip - k - 1) + jm->m > CACHE_FRAMES) return id;
    for (int i = k + 1; i < skip; i++, n++) ch->slot[n] = (uintptr_t)w->saved[i], ch->val[n] = (uintptr_t)w->ips[i];
    for (uint32_t e = jm->m; e-- > 0; n++) ch->slot[n] = jm->slot[e], ch->val[n] = jm->ra[e]; /* (innermost first) */
    ch->slot[n] = (uintptr_t)&never_equal, ch->val[n] = 1;
    ch->n = n;
    return id;
}

/* Chain `ch` is key (ra, cfa)'s, walked, and every return address it saw is still where it was:
 * the stack is its. */
static inline int chain_serves(const struct chain *ch, uintptr_t ra, uintptr_t cfa) {
    if (ch->ra != ra || ch->cfa != cfa || ch->n >= SEEN_ONCE) return 0;
    uint32_t i = 0;
    for (;; i += 2) { /* (two at a time: the sentinel ends it either way) */
        if (*(const volatile uintptr_t *)ch->slot[i] != ch->val[i]) break;
        if (*(const volatile uintptr_t *)ch->slot[i + 1] != ch->val[i + 1]) {
            i++;
            break;
        }
    }
    return i == ch->n;
}

/* The id of the calling thread's stack (0: unknown), for a hook's record. Called with the
 * guard held. The native part: through the thread's cache of call chains (the chain under a
 * Python line is the same for every line, so it is cached like any other; the Python part is
 * with_python's), else walked in the thread's room (struct walk_room) until it joins the
 * thread's last stack (capture). */
__attribute__((noinline)) uint32_t lpr_stack_native(void) {
    struct lpr_stack_cache *c = stack_cache_of(&lpr_tls);
    if (!c || lpr_cfg.stack_cache_off) return native_on_stack(); /* (walked afresh: LIBPROF_STACK_CACHE_OFF) */
    if (!cacheable) return capture(c, NULL, 0, 0);
    uintptr_t ra = (uintptr_t)__builtin_return_address(0), cfa = (uintptr_t)__builtin_dwarf_cfa();
    /* two sets a key may be in (the hash's top bits, and the bits under them) */
    uint64_t h = (ra * 0x9E3779B97F4A7C15ull) ^ (cfa >> 4) * 0xff51afd7ed558ccdull;
    /* the chain this key's hint names first (the last one it served): most keys have one */
    struct chain **hint = &c->hint[(h >> 24) & (CACHE_HINTS - 1)], *ch = *hint;
    if (ch && chain_serves(ch, ra, cfa)) {
        ch->used = ++c->tick;
        return ch->id;
    }
    if (ch && ch->ra == ra && ch->cfa == cfa && ch->n == UINT32_MAX) { /* a key whose chain was not kept */
        ch->used = ++c->tick;
        return capture(c, ++ch->seen % RETRY_AFTER ? NULL : ch, ra, cfa);
    }
    struct chain *sets[2] = {c->set[h >> (64 - CACHE_SET_BITS)],
                             c->set[(h >> (64 - 2 * CACHE_SET_BITS)) & (CACHE_SETS - 1)]};
    for (unsigned s = 0; s < 2; s++)
        for (unsigned w = 0; w < CACHE_WAYS; w++) {
            ch = &sets[s][w];
            if (chain_serves(ch, ra, cfa)) {
                ch->used = ++c->tick;
                *hint = ch;
                return ch->id;
            }
        }
    /* A new key is only noted; its chain is kept once it keeps coming back (short processes full
     * of distinct call chains, a compiler, would fill the cache for nothing) */
    struct chain *old = &sets[0][0];
    for (unsigned s = 0; s < 2; s++)
        for (unsigned w = 0; w < CACHE_WAYS; w++) {
            ch = &sets[s][w];
            if (ch->ra == ra && ch->cfa == cfa && ch->n == SEEN_ONCE) {
                ch->used = ++c->tick;
                return capture(c, ++ch->seen >= WALK_AFTER ? ch : NULL, ra, cfa);
            }
            if (ch->ra == ra && ch->cfa == cfa && ch->n == UINT32_MAX) {
                ch->used = ++c->tick;
                *hint = ch;
                return capture(c, ++ch->seen % RETRY_AFTER ? NULL : ch, ra, cfa);
            }
            if (ch->used < old->used) old = ch; /* (the least recently used of the two sets) */
        }
    old->ra = ra;
    old->cfa = cfa;
    old->n = SEEN_ONCE;
    old->seen = 1;
    old->used = ++c->tick;
    return capture(c, NULL, 0, 0);
}

uint32_t lpr_stack_python(uint32_t native) { return with_python(native); }

static uint32_t sample_in(uint64_t *buf, const void *ucv, int walk, unsigned depth, uint64_t *flags);

/* A CPU sample's stack (sample.c): the callers of the interrupted context, walked by walk.c
 * (at most depth - 1 of them: the interrupted instruction is the sample's own word), with the
 * thread's Python part from the sampler's own cache. Async-signal-safe. */
__attribute__((noinline)) static uint32_t sample_on_stack(const void *ucv, int walk, unsigned depth, uint64_t *flags) {
    uint64_t buf[LP_STACK_MAX_DEPTH];
    return sample_in(buf, ucv, walk, depth, flags);
}

uint32_t lpr_stack_sample(const void *ucv, int walk, unsigned depth, uint64_t *flags) {
    struct lpr_stack_cache *c = lpr_tls.scache; /* (made by a hook, never here: nothing is allocated here) */
    return c ? sample_in(c->sample, ucv, walk, depth, flags) : sample_on_stack(ucv, walk, depth, flags);
}

static uint32_t sample_in(uint64_t *buf, const void *ucv, int walk, unsigned depth, uint64_t *flags) {
    int whole = 0, n = walk ? lpr_walk_context(&lpr_tls, ucv, buf, (int)depth - 1, &whole) : -1;
    if (n < 0) {
        n = 0;
        *flags |= LP_SAMPLE_SHALLOW;
    }
    uint32_t native = n ? lpr_nodes_path(memo_of(MEMO_SAMPLE_NATIVE), buf, (unsigned)n, node_cache(1), 1) : 0;
    const struct lpr_stack_python *o = __atomic_load_n(&py_ops, __ATOMIC_RELAXED);
    uint32_t pid = o ? o->part(1) : 0;
    if (!pid) return native;
    /* (cut: native frames may be missing) */
    return lpr_node(pid, LP_JOIN(native, whole ? 0 : LP_PAIR_CUT), node_cache(1), 1);
}

/* Write the stacks made since the last call (STACKS chunks, nodes.c), the code objects Python
 * frames name first. Async-signal-safe. */
void lpr_stacks_write(void) {
    const struct lpr_stack_python *o = __atomic_load_n(&py_ops, __ATOMIC_RELAXED);
    if (o) o->codes_write(); /* the code objects Python frames name go first */
    struct lpr_node_tags t = {0, 0, 0, 0};
    if (o) t = (struct lpr_node_tags){o->eval_lo, o->eval_hi - o->eval_lo, o->interp_lo, o->interp_hi - o->interp_lo};
    lpr_nodes_write(&t);
}

uint64_t lpr_stacks_unique(void) { return lpr_nodes_made(); }
uint64_t lpr_stacks_dropped(void) { return lpr_nodes_dropped(); }

/* ---- the module map --------------------------------------------------------------------- */

/* Objects already written (by load range), so each dlopen adds only what is new. */
#define SEEN 4096
static uint64_t seen[SEEN];
static int seen_before(uint64_t lo, uint64_t hi) {
    uint64_t key = (lo ^ (hi * 0x9E3779B97F4A7C15ull)) | 1;
    for (unsigned i = 0, s = (unsigned)(key >> 20) & (SEEN - 1); i < SEEN; i++, s = (s + 1) & (SEEN - 1)) {
        if (seen[s] == key) return 1;
        if (seen[s] == 0) {
            seen[s] = key;
            return 0;
        }
    }
    return 0; /* full: write again, the reader de-duplicates */
}

/* The address space of the modules written so far: what symbolising the trace may read. */
static uint64_t module_bytes;
uint64_t lpr_stacks_module_bytes(void) { return __atomic_load_n(&module_bytes, __ATOMIC_RELAXED); }

static int write_module(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    (void)arg;
    struct lp_module m = {.base = info->dlpi_addr, .lo = UINT64_MAX, .hi = 0};
    const char *build_id = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
            if (lo < m.lo) m.lo = lo;
            if (hi > m.hi) m.hi = hi;
        } else if (ph->p_type == PT_NOTE && !build_id) {
            const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
            while (p + sizeof(ElfW(Nhdr)) <= end) {
                const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
                const char *name = p + sizeof *nh, *desc = name + ((nh->n_namesz + 3) & ~3u);
                if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                    nh->n_descsz <= 64) {
                    build_id = desc;
                    m.build_id_len = (uint16_t)nh->n_descsz;
                    break;
                }
                p = desc + ((nh->n_descsz + 3) & ~3u);
            }
        }
    }
    if (m.hi == 0 || seen_before(m.lo, m.hi)) return 0;
    __atomic_fetch_add(&module_bytes, m.hi - m.lo, __ATOMIC_RELAXED);
    char path[4096];
    const char *name = info->dlpi_name;
    if (!name || !name[0]) { /* the main program */
        ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
        path[k > 0 ? k : 0] = '\0';
        name = path;
    }
    size_t len = strlen(name);
    if (len > 4000) len = 4000;
    m.path_len = (uint16_t)len;
    char tail[4096 + 64];
    memcpy(tail, name, len);
    if (build_id) memcpy(tail + len, build_id, m.build_id_len);
    lpr_spool_write(LP_CHUNK_MODULES, 0, &m, sizeof m, tail, len + m.build_id_len);
    return 0;
}

/* Write the loaded objects not written yet (at start, after each dlopen, at the end). Not from
 * a signal handler: dl_iterate_phdr takes the loader's lock. Serialised by a flag: a second
 * thread arriving meanwhile skips (what it would add is written by the next call). */
static int modules_busy;
void lpr_modules_write(void) {
    if ((!lpr_stack_depth && !lpr_sample_signal()) || !lpr_spool_on) return;
    if (__atomic_exchange_n(&modules_busy, 1, __ATOMIC_ACQUIRE)) return;
    int saved = errno;
    lpr_dl_iterate(write_module, NULL);
    errno = saved;
    __atomic_store_n(&modules_busy, 0, __ATOMIC_RELEASE);
}

/* A forked child writes its own spool, from nothing: every module again, and no stack made before
 * is one of its own — its one thread forgets the chains and memos that name them (nodes.c). */
void lpr_stacks_after_fork_child(void) {
    memset(seen, 0, sizeof seen);
    lpr_nodes_after_fork_child();
    struct lpr_stack_cache *c = lpr_tls.scache;
    if (c) {
        memset(c->set, 0, sizeof c->set);
        memset(c->hint, 0, sizeof c->hint);
        c->join.m = c->join.root = 0;
        for (int k = 0; k < MEMOS; k++) c->memo[k].n = 0;
        memset(c->nodes, 0, sizeof c->nodes);
    }
}
