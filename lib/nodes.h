/* nodes.h: a trace's call stacks as a tree — the STACKS chunks' nodes (format 17 on). A node is
 * one frame word and the node of its caller (0: none); a stack is the node of its innermost
 * frame, so a new stack costs the file only the frames below the deepest one it shares with a
 * stack written before. A join node (LP_NODE_JOIN) is the stack of a thread running Python: its
 * parent the Python part, its word the native part's node (include/libprof/format.h).
 *
 * The recorder's table forgets (it is bounded): one stack may be written twice, under two ids.
 * The reader numbers the stacks the events name densely, in the order they are first named, one
 * number for every id of one stack (lp_nodes_ref): what the pass and every view of stacks key by,
 * through lp_stack_view. Used by reader.c, which gives the views: the frames of a stack as they
 * read it, and the one way a native part and a Python part join, are defined here. */
#ifndef LP_NODES_H
#define LP_NODES_H

#include <stdint.h>

#include "libprof/format.h"

struct lp_nodes;

/* The frames of a stack as its users read them: innermost first, a pair's parts joined, tags
 * taken off (include/libprof/format.h). */
struct lp_frames {
    const uint64_t *f;
    uint32_t n;
    uint64_t buf[LP_STACK_MAX_FRAMES];
};
/* A thread's stack from its native part and its Python part (each innermost first, tags on),
 * joined as format.h says; `flags` the pair's. Into out (LP_STACK_MAX_FRAMES words): its length. */
uint32_t lp_stack_join(uint64_t *out, const uint64_t *nat, uint32_t nn, const uint64_t *py, uint32_t np,
                       uint32_t flags);

struct lp_nodes *lp_nodes_new(void);
void lp_nodes_free(struct lp_nodes *t);
/* Node `id` is `word` under node `parent` (which, as a join's native part, comes before it).
 * 0; 1 when it is damage (an id already defined, a parent not defined before it: ignored); -1
 * when out of memory. */
int lp_nodes_add(struct lp_nodes *t, uint32_t id, uint32_t parent, uint64_t word);
/* The dense number of stack `raw` (a node id as events name it), given when first asked; 0 for
 * no stack (raw 0) or when out of memory. A raw id not defined (yet) is a stack of its own. */
uint32_t lp_nodes_ref(struct lp_nodes *t, uint32_t raw);
/* Numbers given so far, plus one (the room an array by number needs). */
uint32_t lp_nodes_nrefs(const struct lp_nodes *t);
/* Nodes read (the recorder's duplicates counted). */
uint32_t lp_nodes_distinct(const struct lp_nodes *t);
/* Stack number `ref`'s frames into v (lp_stack_view's contract); 0 when it names no defined node. */
uint32_t lp_nodes_view(const struct lp_nodes *t, uint32_t ref, struct lp_frames *v);

#endif
