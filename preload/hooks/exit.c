/* exit.c: the ways a process ends. exit() notes its status for the trace; _exit() and _Exit(),
 * which skip destructors (dash ends every script that way), write the trace first.
 *
 * _exit may also be called from a signal handler. If this thread was inside libprof or inside a
 * recorded allocation call (the guard is set), converting here could deadlock: the records are
 * flushed and a fresh libprof-report converts them, as after a crash (lpr_finish_signal). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../core/sys.h"
#include "hook.h"

LP_REAL_SLOT(exit)

LP_EXPORT void exit(int status) {
    lpr_exit_status = status;
    LP_REAL(exit)(status);
    __builtin_unreachable();
}

__attribute__((noreturn)) static void finish_then_exit_group(int status) {
    if (!lpr_tls.guard)
        lpr_finish(status);
    else
        lpr_finish_signal(0, status);
    LP_SYS(SYS_exit_group, status, 0, 0);
    __builtin_unreachable();
}

LP_EXPORT void _exit(int status) { finish_then_exit_group(status); }
LP_EXPORT void _Exit(int status) { finish_then_exit_group(status); }
