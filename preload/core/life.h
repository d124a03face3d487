/* life.h: the life cycle of the recorder in one process (life.c), and the hooks' door into it. */
#ifndef LPR_LIFE_H
#define LPR_LIFE_H

#include <stdint.h>

#include "python.h"
#include "state.h"

LP_HIDDEN extern int lpr_alloc_timed; /* copy of lpr_cfg.alloc_timing for the hot path */
LP_HIDDEN extern int lpr_exit_status;
LP_HIDDEN void lpr_finish(int status);
/* The end of the run where this process can no longer allocate (a fatal signal `sig`, or _exit
 * with `status` from inside libprof): the conversion runs in a process of its own. */
LP_HIDDEN void lpr_finish_signal(int sig, int status);
LP_HIDDEN int lpr_recording(void); /* recording, and this process owns the spool */
LP_HIDDEN void lpr_stop_for_good(void);
LP_HIDDEN int lpr_convert_spool(const char *chrome, const char *csv);
LP_HIDDEN void lpr_write_end(int status, int sig);

/* Start libprof: the first hooked call of the process (`safe`: an allocation hook, which may also
 * run the pending set-up) or the constructor. */
LP_HIDDEN void lpr_init_slow(int safe);
LP_HIDDEN void lpr_follow_start(void);
LP_HIDDEN int lpr_follow_exec(const char *json, const char *csv);
LP_HIDDEN void lpr_snapshot_on_signal(int sig); /* LIBPROF_SNAPSHOT_SIGNAL's handler (life.c) */

/* The hooks' door: is this call of family `fam` to be recorded? The thread's state when it is,
 * NULL when it is to pass straight through (family off, libprof off, or re-entered). The first
 * hooked call of the process starts libprof here. */
static inline struct lpr_tls *lpr_call_begin(unsigned fam) {
    uint32_t g = lpr_gate;
    if (LP_UNLIKELY(g & (LP_GATE_UNINIT | (fam == LP_FAM_ALLOC ? LP_GATE_PENDING : 0)))) {
        lpr_init_slow(fam == LP_FAM_ALLOC);
        g = lpr_gate;
    }
    if (LP_LIKELY(!(g & (1u << fam)))) return NULL;
    struct lpr_tls *t = &lpr_tls;
    if (LP_UNLIKELY(t->guard)) return NULL;
    /* The Python line is read before the call: during it the interpreter may free the memory
     * its current frame lives in (3.11+ munmap a data-stack chunk while the frame is popped). */
    if (LP_UNLIKELY(g & LP_GATE_PY) && fam != LP_FAM_ALLOC) t->py_stack = lpr_py_location();
    return t;
}

/* The same, the guard held from here (lpr_hook_leave lets go). */
static inline struct lpr_tls *lpr_hook_enter(unsigned fam) {
    struct lpr_tls *t = lpr_call_begin(fam);
    if (t) t->guard = 1;
    return t;
}

/* ---- hook families register their set-up with the core ----------------------------------
 * A family that must do something when libprof starts says so with LP_FAMILY_SETUP
 * (preload/hooks/hook.h): `resolve` runs in the part of the start-up that may look symbols up,
 * in every process, before recording's set-up ends; `start`, after it, in a process that
 * records; `finish` when the process ends, before the buffers are written for the last time
 * (records a family still holds: PyTorch's operators started and still open). The core finds
 * them in the linker section lpr_setup (Darshan's modules register with its core the same way):
 * it names no hook file, and a new family needs no line here. */
struct lpr_setup {
    void (*resolve)(void);
    void (*start)(void);
    void (*finish)(void);
};

#endif
