/* log.h: the only way libprof talks to the user at run time (log.c). */
#ifndef LPR_LOG_H
#define LPR_LOG_H

#include <stddef.h>

#include "state.h"

/* "log.c": libprof cannot work (stderr); a note (the trace, the log); a diagnostic (verbose). */
LP_HIDDEN void lpr_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LP_HIDDEN void lpr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LP_HIDDEN void lpr_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LP_HIDDEN void lpr_log_write(const char *buf, size_t n); /* as they are: to LIBPROF_LOG, else stderr */
LP_HIDDEN extern int lpr_verbose;
LP_HIDDEN extern char lpr_log_path[]; /* LIBPROF_LOG, expanded; empty: stderr */

/* The trace is open: notes go into it through `keep` (the spool's writer, life.c), those made
 * before it first. */
typedef int (*lpr_spool_write_fn)(uint16_t type, uint32_t tid, const void *a, size_t alen, const void *b, size_t blen);
LP_HIDDEN void lpr_notes_open(lpr_spool_write_fn keep);

#endif
