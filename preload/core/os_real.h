/* os_real.h: memory a signal handler writes, made resident ahead (os_real.c, beside lib/os.h's
 * functions for the recorder). */
#ifndef LPR_OS_REAL_H
#define LPR_OS_REAL_H

#include <stddef.h>

#include "state.h"

/* Memory a signal handler writes must not fault there: lpr_resident makes [base + from, base +
 * to) resident now (MADV_POPULATE_WRITE; best effort); lpr_ahead keeps a table that fills from
 * its start resident LPR_AHEAD bytes ahead of `used` (when `on`), a chunk at a time. */
#define LPR_AHEAD (256 * 1024)
struct lpr_ahead {
    size_t done; /* resident up to here */
    int on, busy;
};
LP_HIDDEN void lpr_resident(void *base, size_t from, size_t to);
LP_HIDDEN void lpr_ahead_slow(struct lpr_ahead *a, void *base, size_t used, size_t cap);
static inline void lpr_ahead(struct lpr_ahead *a, void *base, size_t used, size_t cap) {
    if (LP_UNLIKELY(a->on && used + LPR_AHEAD / 2 > a->done)) lpr_ahead_slow(a, base, used, cap);
}

#endif
