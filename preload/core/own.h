/* own.h: libprof's own memory — the long-lived mappings the recorder makes, each under the part
 * of libprof it serves, and how much of them is resident (own.c). */
#ifndef LPR_OWN_H
#define LPR_OWN_H

#include <stddef.h>
#include <stdint.h>

#include <libprof/format.h>

#include "lp.h"

/* An anonymous private mapping of `bytes` for `part` (enum lp_own_part), kept to the end of the
 * process (or reused: never unmapped); `flags` are added to MAP_PRIVATE | MAP_ANONYMOUS. NULL
 * when the kernel refuses. Async-signal-safe. */
LP_HIDDEN void *lpr_own_map(unsigned part, size_t bytes, int prot, int flags);
/* Fill `m` with what libprof holds now: every part's mappings, reserved and resident (mincore).
 * Async-signal-safe (the END of a crashing process). */
LP_HIDDEN void lpr_own_measure(struct lp_own_memory *m);

#endif
