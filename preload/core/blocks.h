/* blocks.h: the blocks LIBPROF_ALLOC_SAMPLE recorded one by one (blocks.c). */
#ifndef LPR_BLOCKS_H
#define LPR_BLOCKS_H

#include <stdint.h>

#include "state.h"

/* Under LIBPROF_ALLOC_SAMPLE on the lean path, only the sampled allocations are recorded (and
 * the frees of recorded blocks, which blocks.c remembers); the rest are counted (alloc.c). */
LP_HIDDEN extern int lpr_usable_glibc; /* the next allocator is glibc's: its chunk header is read */
LP_HIDDEN void lpr_tally_init(void);
LP_HIDDEN int lpr_blocks_add(const void *p); /* 0, or -1 when no memory is left for the set */
/* 1 when p was recorded (and is forgotten now): one load for nearly every block (blocks.c) */
#define LP_BLOCKS_HINTS 4096
LP_HIDDEN extern uint16_t lpr_blocks_hints[LP_BLOCKS_HINTS];
/* (blocks are 16-byte aligned; page-aligned mapped ones still spread, through the second term) */
static inline uint64_t lpr_blocks_hash(uintptr_t p) { return (p >> 4) ^ (p >> 16); }
LP_HIDDEN int lpr_blocks_take_slow(const void *p);
static inline int lpr_blocks_take(const void *p) {
    const uint16_t *h = &lpr_blocks_hints[lpr_blocks_hash((uintptr_t)p) & (LP_BLOCKS_HINTS - 1)];
    return LP_UNLIKELY(__atomic_load_n(h, __ATOMIC_ACQUIRE)) && lpr_blocks_take_slow(p);
}
LP_HIDDEN void lpr_blocks_after_fork_child(void);
LP_HIDDEN uint64_t lpr_blocks_slots(void); /* the table's size (its tests) */

#endif
