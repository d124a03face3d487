/* stacks.h: call stacks — the table of interned stacks and their capture (stacks.c). */
#ifndef LPR_STACKS_H
#define LPR_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

LP_HIDDEN extern unsigned lpr_stack_depth; /* 0 = no stacks */
/* LIBPROF_ALLOC_SAMPLE: does an allocation of `size` bytes get its call stack? Points of a
 * Poisson process over the thread's allocated bytes (lib/poisson.h): a subtraction and a test,
 * a draw when a point falls in the block. */
LP_HIDDEN extern uint64_t lpr_alloc_sample; /* its mean gap in bytes; 0: every allocation */
LP_HIDDEN int lpr_alloc_sample_point(struct lpr_tls *t, uint64_t size);
static inline int lpr_alloc_sampled(struct lpr_tls *t, uint64_t size) {
    if (LP_LIKELY(!lpr_alloc_sample)) return 1;
    if (LP_LIKELY(t->sample_left > size)) {
        t->sample_left -= size;
        return 0;
    }
    return lpr_alloc_sample_point(t, size);
}
LP_HIDDEN int lpr_stacks_init(unsigned depth);
LP_HIDDEN int lpr_stacks_for_samples(void);
LP_HIDDEN int lpr_in_libprof(uintptr_t pc); /* pc lies in libprof's or its libunwind's code */
LP_HIDDEN uint32_t lpr_stack_sample(const void *uc, int walk, unsigned depth, uint64_t *flags);
LP_HIDDEN extern int (*lpr_unw_backtrace)(void **, int);
/* The calling thread's stack as an id (0: unknown): its native frames through the thread's
 * cache of call chains (called from the hook itself: the hook's call site keys the cache), then
 * its Python frames whatever the native depth (stacks.c). Called by a hook with the guard held. */
LP_HIDDEN uint32_t lpr_stack_native(void);
LP_HIDDEN uint32_t lpr_stack_python(uint32_t native);
#define LP_STACK_CAPTURE(sid) ((sid) = lpr_stack_python(lpr_stack_native()))
LP_HIDDEN void lpr_stacks_write(void);
LP_HIDDEN int lpr_stacks_table(void);
LP_HIDDEN void lpr_modules_write(void);
LP_HIDDEN void lpr_stacks_after_fork_child(void);
LP_HIDDEN uint64_t lpr_stacks_unique(void);
LP_HIDDEN uint64_t lpr_stacks_dropped(void);
LP_HIDDEN int lpr_stacks_in_unwinder(const void *pc); /* pc lies in the libunwind libprof loaded */

/* A stack given as words (a Python part, innermost first; python.c) as an id, through the
 * thread's memo of the hooks' Python parts or (`sampler`) of the sampler's. */
LP_HIDDEN uint32_t lpr_stack_intern_words(const uint64_t *f, unsigned n, int sampler);

/* The Python part of a stack, through python.c once it found an interpreter (it registers these
 * before it sets lpr_py_on): the part's words interned, the code table written before the stacks
 * that name it, whether a native frame runs the evaluation loop. */
struct lpr_stack_python {
    uint32_t (*part)(int sampler);     /* the thread's Python part as a stack id (0: none) */
    uint32_t (*with)(uint32_t native); /* that part paired with native part `native` (lpr_stack_pair) */
    void (*codes_write)(void);
    /* where the evaluation loop's code lies, and the interpreter's: [lo, hi) each (a native
     * frame's return address - 1 in them runs it) */
    uintptr_t eval_lo, eval_hi, interp_lo, interp_hi;
};
LP_HIDDEN void lpr_stacks_python(const struct lpr_stack_python *ops);
/* The stack of native part `native` and Python part `py` (the thread's memo, else the table). */
LP_HIDDEN uint32_t lpr_stack_pair(uint32_t native, uint32_t py);

LP_HIDDEN uint64_t lpr_stacks_module_bytes(void); /* the loaded objects' span, summed (written ones) */

#endif
