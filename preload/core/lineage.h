/* lineage.h: this process among the others of its run (lineage.c). */
#ifndef LPR_LINEAGE_H
#define LPR_LINEAGE_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

LP_HIDDEN int lpr_lineage_names(int forked);
LP_HIDDEN void lpr_lineage_pid_inserted(void);
LP_HIDDEN int lpr_lineage_descendant(void); /* started by a traced process (its outputs' names inherited) */
LP_HIDDEN void lpr_lineage_started(uint64_t real_ns);
LP_HIDDEN void lpr_lineage_init(void);
LP_HIDDEN void lpr_lineage_forget_children(void);
LP_HIDDEN void lpr_lineage_sweep(void);
LP_HIDDEN void lpr_make_absolute(char *path, size_t len);
LP_HIDDEN int lpr_exec_env(char *const envp[], char **out, size_t outlen, char *buf, size_t buflen);

/* Child `pid`, reaped, was killed by signal `sig`: its spool converted. */
LP_HIDDEN void lpr_lineage_child_killed(int pid, int sig);

#endif
