/* python.h: the CPython interpreter's frames, read from outside (python.c). */
#ifndef LPR_PYTHON_H
#define LPR_PYTHON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

LP_HIDDEN void lpr_python_detect(void);
LP_HIDDEN int lpr_py_frames(uint64_t *out, uint8_t *end, int max);
LP_HIDDEN uint32_t lpr_py_part(int sampler);
LP_HIDDEN uint32_t lpr_py_with(uint32_t native);
LP_HIDDEN int lpr_py_thread_running(void);
LP_HIDDEN uint32_t lpr_py_location(void);
LP_HIDDEN void lpr_pycode_write(void);
LP_HIDDEN void lpr_python_after_fork_child(void);
LP_HIDDEN uint64_t lpr_py_codes(void);
LP_HIDDEN int lpr_py_codes_full(void);
LP_HIDDEN int lpr_py_minor(void);
LP_HIDDEN void *lpr_py_sym(const char *name);
LP_HIDDEN void *lpr_py_profile_of(void *tstate);
LP_HIDDEN extern void (*lpr_py_new_thread)(void); /* set by hooks/python.c; called after pthread_create */
#define LPR_PY_MAX_CODES (1u << 20)
LP_HIDDEN uint32_t lpr_py_top_code(void);
LP_HIDDEN uint32_t lpr_py_frame_code(const void *frame);
LP_HIDDEN const char *lpr_py_code_name(uint32_t id, size_t *len);
LP_HIDDEN const char *lpr_py_code_file(uint32_t id, size_t *len);
LP_HIDDEN uintptr_t lpr_py_frame_arg(const void *frame, unsigned i);
LP_HIDDEN size_t lpr_py_str(uintptr_t o, char *out, size_t cap);
LP_HIDDEN size_t lpr_py_items(uintptr_t o, const uintptr_t **items);
LP_HIDDEN const char *lpr_py_type_name(uintptr_t o);
LP_HIDDEN void lpr_python_known_loaded(const char *path); /* hooks/python.c: after each dlopen */
LP_HIDDEN extern void (*lpr_py_ready)(void);              /* set by hooks/python.c */
LP_HIDDEN void lpr_py_check_ready(void);
LP_HIDDEN void lpr_py_ready_retry(void);
LP_HIDDEN uint32_t lpr_py_location(void);

/* CPython waits for the GIL (take_gil, 3.8-3.13 with a GIL) in a timed wait on the GIL's
 * condition variable, which lies in the interpreter's _PyRuntime object with the GIL's mutex
 * right after it (struct _gil_runtime_state: cond, then mutex). No other wait of the interpreter
 * has both: a wait with them is a wait for the GIL. The range is set once the interpreter is
 * found (python_detect.c; 0 before, and for interpreters libprof cannot read). */
LP_HIDDEN extern uintptr_t lpr_py_gil_lo, lpr_py_gil_span;
static inline int lpr_py_gil_wait(const void *cond, const void *mutex) {
    uintptr_t c = (uintptr_t)cond;
    return c - lpr_py_gil_lo < lpr_py_gil_span && (uintptr_t)mutex == c + sizeof(pthread_cond_t);
}

/* A SIGSEGV or SIGBUS reaches libprof's own handler first (hooks/signal.c keeps it up to date,
 * through lpr_py_faults_ours): a probed load may then fault, and the handler steps over it
 * (python.c). */
LP_HIDDEN extern int lpr_faults_ours;
LP_HIDDEN void lpr_py_faults_ours(int ours);
/* The fault at `uc` is a probed load's: stepped over (it yields 0, lpr_tls.probe_fault set); 1. */
LP_HIDDEN int lpr_py_fault_fixup(void *uc);

#endif
