/* control.h: pause, resume, reset (control.c). */
#ifndef LPR_CONTROL_H
#define LPR_CONTROL_H

#include <stdint.h>

#include "config.h"
#include "state.h"

LP_HIDDEN uint32_t lpr_control_init(const struct lpr_config *cfg);
LP_HIDDEN void lpr_control_on_signal(int sig); /* LIBPROF_SIGNAL's handler: pause or resume */
LP_HIDDEN void lpr_control_start_timers(void);
LP_HIDDEN void lpr_control_pause(unsigned reason, int from_signal);
LP_HIDDEN void lpr_control_resume(unsigned reason, int from_signal);
LP_HIDDEN void lpr_control_reset(unsigned reason);
LP_HIDDEN void lpr_control_after_fork_child(void);
LP_HIDDEN uint32_t lpr_control_child_gate(void);
LP_HIDDEN uint64_t lpr_control_markers_lost(void);

#endif
