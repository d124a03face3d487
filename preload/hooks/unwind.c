/* unwind.c: libunwind's memory-validation pipe, refused — so that stacks hold no descriptor.
 *
 * At its first use libunwind (1.6) opens a pipe with pipe2() and keeps it for good: when a walk
 * falls back from DWARF to frame-chain heuristics it checks that an address is readable by
 * write()ing one byte from it into the pipe. The two descriptors are the program's to see (a
 * program that lists its descriptors, such as CPython's test_subprocess.test_pass_fds_redirected,
 * finds them in every preloaded child), and closing them later is unsafe: libunwind would read,
 * write and close whatever the program opened under those numbers next.
 *
 * So libunwind's own pipe2() — only calls from inside the libunwind libprof loaded — fails
 * (EMFILE) and leaves its descriptors at -1: a validation then fails (EBADF), which libunwind
 * takes as "unreadable" and ends that walk at the frame it could not prove; DWARF-described frames
 * (nearly all) never validate. Every other pipe2() is the kernel's, through the raw system call
 * (what the C library's pipe2 is). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "../core/sys.h"
#include "hook.h"

LP_EXPORT int pipe2(int fds[2], int flags);
LP_EXPORT int pipe2(int fds[2], int flags) {
    if (LP_UNLIKELY(lpr_stacks_in_unwinder(__builtin_return_address(0)))) {
        errno = EMFILE;
        return -1;
    }
    long r = LP_SYS(SYS_pipe2, fds, flags, 0);
    if (lpr_sys_failed(r)) {
        errno = (int)-r;
        return -1;
    }
    return 0;
}
