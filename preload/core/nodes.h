/* nodes.h: the recorder's call stacks as a tree (nodes.c) — a node is a frame word under the node
 * of its caller, a stack the node of its innermost frame: a new stack costs what its new frames
 * cost, never a copy of what it shares with a stack seen before. */
#ifndef LPR_NODES_H
#define LPR_NODES_H

#include <stdint.h>

#include "state.h"

/* The deepest stack a path memo keeps (a native part, or a Python part, at most). */
#define LPR_PATH_MAX 136

/* The last stack a capture of one kind interned, outermost frame first, each with the node of
 * the stack from the outermost down to it: the next one of its kind shares its outer frames
 * (the same callers) and looks up only the frames below them. Kept per thread and per kind by
 * the callers (stacks.c), never shared: a memo is only ever used by its own thread, and by the
 * sampler's handler only if it is the sampler's. */
struct lpr_path {
    uint32_t n;
    uint32_t node[LPR_PATH_MAX];
    uint64_t word[LPR_PATH_MAX];
};

/* A thread's own cache of the nodes it looked up last, in front of the table (kept by the
 * callers beside their memos, one per kind of caller: a signal handler's never the hooks'): a
 * lookup found there reads no shared line (a PyTorch import finds 89 % of what it finds in the
 * table in one of 4096 entries). */
#define LPR_NODE_CACHE 4096
struct lpr_node_cache {
    struct {
        uint64_t word;
        uint32_t parent, id;
    } e[LPR_NODE_CACHE];
};

/* The table and its ring, reserved (0, or -1 with one warning). `resident`: touched now, since a
 * signal handler will write them (a first touch there is a page fault inside the handler). */
LP_HIDDEN int lpr_nodes_init(int resident);
LP_HIDDEN int lpr_nodes_ready(void);
/* The node of word `w` under node `parent` (0: a root): found (in cache `c` first, which may be
 * NULL), or made. 0 when none could be made: the ring is full of nodes not written yet and the
 * caller may not wait (`handler`: a signal handler's), counted as dropped. */
LP_HIDDEN uint32_t lpr_node(uint32_t parent, uint64_t w, struct lpr_node_cache *c, int handler);
/* The same along a stack, outermost frame first: *fresh (0 at the first frame) says `parent` was
 * just made by this caller — so this node cannot exist yet and is made without a look — and is
 * set when this node is made. */
LP_HIDDEN uint32_t lpr_node_under(uint32_t parent, uint64_t w, struct lpr_node_cache *c, int handler, int *fresh);
/* The node of the stack `f` (n words, innermost first) through memo `m` (NULL: none); 0 for an
 * empty stack or when a node could not be made. */
LP_HIDDEN uint32_t lpr_nodes_path(struct lpr_path *m, const uint64_t *f, unsigned n, struct lpr_node_cache *c,
                                  int handler);

/* Where native frames run the interpreter, for the tags a written node's word gets (format.h:
 * LP_NATIVE_EVAL, LP_NATIVE_INTERP); spans 0: none. */
struct lpr_node_tags {
    uintptr_t eval_lo, eval_span, interp_lo, interp_span;
};
/* Write the nodes made since the last call (STACKS chunks), in id order, up to the first one
 * still being made. One writer at a time: a thread that finds another writing goes on.
 * Async-signal-safe. */
LP_HIDDEN void lpr_nodes_write(const struct lpr_node_tags *tags);
LP_HIDDEN uint64_t lpr_nodes_made(void);    /* nodes made (written or to be) */
LP_HIDDEN uint64_t lpr_nodes_dropped(void); /* stacks given no node */
LP_HIDDEN uint64_t lpr_nodes_memory(void);  /* bytes reserved for the table and its ring */
/* A forked child: its spool starts empty, so no node made before is one of its own (the
 * callers forget every node they keep: their memos, their caches); its counters start at 0. */
LP_HIDDEN void lpr_nodes_after_fork_child(void);

#endif
