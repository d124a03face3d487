/* handoff.h: the program hands itself on — exec, a change of user, a killed child reaped (handoff.c). */
#ifndef LPR_HANDOFF_H
#define LPR_HANDOFF_H

#include "state.h"

LP_HIDDEN void lpr_exec_prepare(void);
LP_HIDDEN void lpr_exec_failed(void);
LP_HIDDEN void lpr_exec_check_static(const char *file, int search);
LP_HIDDEN void lpr_uid_change(unsigned new_euid);     /* before setuid & co. take effect */
LP_HIDDEN void lpr_child_reaped(int pid, int status); /* the wait family reaped a child */

#endif
