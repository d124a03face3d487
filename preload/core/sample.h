/* sample.h: CPU samples, LIBPROF_SAMPLE_HZ (sample.c). */
#ifndef LPR_SAMPLE_H
#define LPR_SAMPLE_H

#include <signal.h>

#include "state.h"

LP_HIDDEN void lpr_sample_init(void);
LP_HIDDEN void lpr_sample_finish(void);
LP_HIDDEN void lpr_sample_resume(void); /* after a failed exec: as before lpr_sample_finish */
/* The program's sigaction on SIGTRAP while the sampler holds it: kept (act) and read back (old). */
struct sigaction;
LP_HIDDEN void lpr_sample_program_action(const struct sigaction *act, struct sigaction *old);
LP_HIDDEN void lpr_sample_after_fork_child(void);
LP_HIDDEN int
lpr_sample_taken(void); /* this process took CPU samples (a run too short for one has no CPU flame graph) */
LP_HIDDEN int lpr_sample_trap_held(void); /* libprof's handler is on SIGTRAP (the program's is kept aside) */

#endif
