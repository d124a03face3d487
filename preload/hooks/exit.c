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

/* Returning from main calls exit from inside the C library, past the exit hook: the status main
 * returns is noted on its way out, by running main through a wrapper. __libc_start_main is how
 * every dynamically linked C program reaches main (the executable's _start calls it). */
typedef int (*main_fn)(int, char **, char **);
static main_fn program_main;

static int main_wrapper(int argc, char **argv, char **envp) {
    lpr_torch_main(); /* a program linked to libtorch: its initialisers have run */
    int status = program_main(argc, argv, envp);
    lpr_exit_status = status;
    return status;
}

int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void *stack_end) {
    typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void), void *);
    start_fn real = (start_fn)lpr_dlsym(RTLD_NEXT, "__libc_start_main");
    program_main = main;
    return real(main_wrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

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
