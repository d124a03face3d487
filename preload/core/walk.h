/* walk.h: the sampler's stack walk (walk.c). */
#ifndef LPR_WALK_H
#define LPR_WALK_H

#include <stdint.h>

#include "state.h"

/* The sampler's stack walk (walk.c): the return addresses of the callers of the context `uc`
 * interrupted on thread `t`, innermost first, into out (at most max); their number, or -1 when
 * this thread's stack cannot be walked; *whole: the walk reached the outermost frame.
 * Async-signal-safe. */
LP_HIDDEN int lpr_walk_init(void);
LP_HIDDEN int lpr_walk_context(struct lpr_tls *t, const void *uc, uint64_t *out, int max, int *whole);
LP_HIDDEN int lpr_walk_frames(struct lpr_tls *t, const void *uc, uint64_t *out, uint64_t *cfas, uint64_t *slots,
                              int max, int *whole, int *blocked);
/* A thread's last stack as a walk joins it (stacks.c keeps it: the hooks' native frames): its
 * frames outermost first (a new stack keeps the frames it shares where they are and puts its own
 * after them), each with its CFA, the address its return address was read from, and the node of
 * the stack from the outermost frame down to it (nodes.c). CFAs fall along the entries. */
#define LPR_JOIN_MAX 256
/* The frames of a walk that are the walker's own (libprof's, from where the walk starts to the
 * hook the program called): the same few call paths every time, each frame's rule the same, so a
 * path is kept as offsets from the start's stack pointer — where each return address is, each
 * frame's CFA, where the program's rbp was saved — and checked by its return addresses. */
#define LPR_PREFIX_MAX 10
#define LPR_PREFIXES 4
struct lpr_prefix {
    uint32_t n;     /* frames (0: none kept) */
    int32_t bp_off; /* the program's rbp: at start sp + bp_off (INT32_MIN: rbp as at the start) */
    uintptr_t ip;   /* where the walk started */
    uintptr_t ra[LPR_PREFIX_MAX];
    int32_t slot_off[LPR_PREFIX_MAX], cfa_off[LPR_PREFIX_MAX];
};
struct lpr_join {
    uint32_t m;
    uint32_t root;            /* the node the outermost frame hangs from (0: not made yet) */
    int whole;                /* its outermost frame is the thread's (a stack cut short is not kept: m 0) */
    uintptr_t lo, hi;         /* the thread's stack when its slots were last read: all of them inside */
    uintptr_t own_lo, own_hi; /* the walker's own code (0, 0: no prefixes kept) */
    uint32_t pre_next;        /* the prefix replaced next */
    struct lpr_prefix pre[LPR_PREFIXES];
    uintptr_t ra[LPR_JOIN_MAX], cfa[LPR_JOIN_MAX], slot[LPR_JOIN_MAX];
    uint32_t node[LPR_JOIN_MAX];
};
/* The same from the registers ip, sp and bp (a walk of the calling code: no ucontext_t, which is
 * a kilobyte of stack). With `join` (else NULL): the walk stops at the first frame that is one of
 * `join`'s — the same return address at the same CFA — whose outer frames all still hold theirs:
 * the rest of the stack is that one's. Its entry in *joined (else -1); the frames before it are
 * what is returned. The walker's own frames at its start come from `join`'s prefixes, where one
 * holds, and are kept there otherwise. */
LP_HIDDEN int lpr_walk_regs(struct lpr_tls *t, uintptr_t ip, uintptr_t sp, uintptr_t bp, uint64_t *out, uint64_t *cfas,
                            uint64_t *slots, int max, int *whole, int *blocked, struct lpr_join *join, int *joined);
/* t's stack mapping holds sp (found in /proc/self/maps, again only a few times a thread): 0, or -1. */
LP_HIDDEN int lpr_stack_bounds(struct lpr_tls *t, uintptr_t sp);
LP_HIDDEN void lpr_walk_forget(void); /* code may have been unloaded (dlclose) */

#endif
