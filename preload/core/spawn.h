/* spawn.h: libprof-report in a process of its own, unseen by the program (spawn.c). */
#ifndef LPR_SPAWN_H
#define LPR_SPAWN_H

#include "state.h"

LP_HIDDEN void lpr_spawn_init(const char *self_path);
LP_HIDDEN int lpr_spawn_available(void);
/* The CPU sampler's holder: libprof-report --hold-events keeps the descriptors `fds` (n of them)
 * open, with `page_fd` a memfd page whose first word asks it to go (sample.c); its pid, or -1. */
#define LPR_HOLD_MAX 257
LP_HIDDEN int lpr_spawn_holder(const int *fds, int n, int page_fd);
/* Run libprof-report with `args` (without argv[0]), holding an exclusive lock on the spool `lock`
 * for its life. wait_ms < 0: detached, 0 once started; else its exit status, LPR_SPAWN_LATE when
 * still running after wait_ms, LPR_SPAWN_BUSY when another converter holds the spool, -1 when it
 * could not start (or the spool is gone). `to_stderr`: its standard output goes to our standard
 * error (else both go to /dev/null: name a --log file in `args`). */
#define LPR_SPAWN_LATE (-2)
#define LPR_SPAWN_BUSY (-3)
LP_HIDDEN int lpr_spawn_report(const char *const *args, const char *lock, int wait_ms, int to_stderr);

#endif
