/* lp.h: the recording core as the hook modules see it — every core header, and what the hook
 * modules declare for one another. A hook module includes only this header (through
 * hooks/hook.h) and touches the core through lpr_hook_enter / lpr_reserve / lpr_commit /
 * lpr_hook_leave. The core's own files never include it: each includes the headers of the files
 * below it (ARCHITECTURE.md draws their order), so the core has no circle. */
#ifndef LP_CORE_H
#define LP_CORE_H

#include "state.h"
#include "log.h"
#include "clock.h"
#include "config.h"
#include "real.h"
#include "os_real.h"
#include "tbuf.h"
#include "blocks.h"
#include "walk.h"
#include "stacks.h"
#include "python.h"
#include "call.h"
#include "sample.h"
#include "names.h"
#include "unhook.h"
#include "control.h"
#include "release.h"
#include "spawn.h"
#include "lineage.h"
#include "handoff.h"
#include "life.h"

/* ---- what hook modules declare for one another ---------------------------------------------- */

/* The dlsym hook's helpers: the lookups of names libprof exports (hooks/ort.c, hooks/mpi.c). */
LP_HIDDEN void *lpr_ort_dlsym(void *handle, const char *name);
/* Python's InferenceSession, seen through its methods (hooks/python.c): the strings of its records. */
LP_HIDDEN size_t lpr_ort_py_session(const void *self, const char *path, const char *providers, char *s, size_t cap);
LP_HIDDEN size_t lpr_ort_py_run(const void *self, const char *inputs, const char *outputs, const char *api, char *s,
                                size_t cap);
LP_HIDDEN void *lpr_mpi_dlsym(void *handle, const char *name);
LP_HIDDEN void *lpr_cupti_dlsym(void *handle, const char *name); /* hooks/cupti.c: a CUPTI client's own start */

/* hooks/io.c: a pipe made (pipe2's hook is hooks/unwind.c's), recorded as such. */
LP_HIDDEN void lpr_io_pipe(struct lpr_tls *t, uint64_t t0, const int fds[2], int r);

/* ---- "hooks/torch.c": PyTorch's operators --------------------------------------------------- */
LP_HIDDEN void lpr_torch_detect(void); /* libtorch may have arrived: register the operator callback */
LP_HIDDEN void lpr_torch_main(void);   /* main starts: every object of the program is initialised */
#define lpr_torch_shapes (lpr_cfg.torch_shapes)

/* ---- "hooks/annot.c": the exported ABI that include/libprof.h looks up with dlsym ---------- */

LP_EXPORT void libprof_range_push(const char *name);
LP_EXPORT void libprof_range_pop(void);
LP_EXPORT void libprof_mark(const char *name);
LP_EXPORT void libprof_counter(const char *name, double value);
LP_EXPORT void libprof_thread_name(const char *name);
LP_EXPORT void libprof_start(void);
LP_EXPORT void libprof_stop(void);
LP_EXPORT void libprof_reset(void);

/* ---- "hooks/exit.c" --------------------------------------------------------------------------- */

LP_EXPORT void exit(int status) __attribute__((noreturn));
LP_EXPORT void _exit(int status) __attribute__((noreturn));
LP_EXPORT void _Exit(int status) __attribute__((noreturn));
LP_EXPORT int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(void),
                                void (*fini)(void), void (*rtld_fini)(void), void *stack_end);

#endif
