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
/* The same from the registers ip, sp and bp (a walk of the calling code: no ucontext_t, which is
 * a kilobyte of stack). */
LP_HIDDEN int lpr_walk_regs(struct lpr_tls *t, uintptr_t ip, uintptr_t sp, uintptr_t bp, uint64_t *out, uint64_t *cfas,
                            uint64_t *slots, int max, int *whole, int *blocked);
/* t's stack mapping holds sp (found in /proc/self/maps, again only a few times a thread): 0, or -1. */
LP_HIDDEN int lpr_stack_bounds(struct lpr_tls *t, uintptr_t sp);
LP_HIDDEN void lpr_walk_forget(void); /* code may have been unloaded (dlclose) */

#endif
