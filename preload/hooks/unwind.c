/* unwind.c: libunwind's memory-validation pipe, refused — so that stacks hold no descriptor.
 *
 * At its first use libunwind (1.6) opens a pipe with pipe2() and keeps it for good: when a walk
 * has left DWARF-described frames it checks that an address is readable by mincore() and then by
 * write()ing one byte from it into the pipe (syscall(SYS_write, pipe, addr, 1): EFAULT if not),
 * and caches the pages that passed. The two descriptors are the program's to see (a program that
 * lists its descriptors, such as CPython's test_subprocess.test_pass_fds_redirected, finds them
 * in every preloaded child), and closing them later is unsafe: libunwind would read, write and
 * close whatever the program opened under those numbers next.
 *
 * So libunwind's own pipe2() — only calls from inside the libunwind libprof loaded — fails
 * (EMFILE) and its descriptors stay -1, and its check write (syscall() from inside libunwind,
 * SYS_write on descriptor -1) is answered here by the kernel without a descriptor:
 * rt_sigprocmask with an invalid `how` first copies the 8-byte set from the address (EFAULT when
 * any of it is unreadable) and then refuses the `how` (EINVAL) without touching the signal mask.
 * EINVAL: readable; anything else: EBADF, which libunwind takes as "unreadable". The same verdict
 * as the pipe's, from a system call every sandbox allows (libunwind itself makes thousands), and
 * libunwind caches the pages that passed as before. Every other pipe2() and syscall() is the
 * kernel's, through the raw system call (what the C library's are). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

#include "../core/sys.h"
#include "hook.h"

LP_EXPORT int pipe2(int fds[2], int flags);
LP_EXPORT int pipe2(int fds[2], int flags) {
    if (LP_UNLIKELY(lpr_stacks_in_unwinder(__builtin_return_address(0)))) {
        errno = EMFILE;
        return -1;
    }
    struct lpr_tls *t = lpr_call_begin(LP_FAM_IO); /* recorded as pipe (io.c) */
    uint64_t t0 = t ? lpr_ticks() : 0;
    long r = LP_SYS(SYS_pipe2, fds, flags, 0);
    if (lpr_sys_failed(r)) {
        errno = (int)-r;
        lpr_io_pipe(t, t0, fds, -1);
        return -1;
    }
    lpr_io_pipe(t, t0, fds, 0);
    return 0;
}

#if defined(__x86_64__) || defined(__aarch64__) /* lpr_syscall6 is its own instruction there, not syscall() */
LP_EXPORT long syscall(long n, ...);
LP_EXPORT long syscall(long n, ...) {
    va_list ap;
    va_start(ap, n);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long), d = va_arg(ap, long), e = va_arg(ap, long),
         f = va_arg(ap, long);
    va_end(ap);
    /* (the descriptor is an int: its register's upper half is not defined) */
    if (LP_UNLIKELY(n == SYS_write && (int)a == -1 && lpr_stacks_in_unwinder(__builtin_return_address(0)))) {
        if (lpr_syscall6(SYS_rt_sigprocmask, -1, b, 0, 8, 0, 0) == -EINVAL) return c;
        errno = EBADF;
        return -1;
    }
    long r = lpr_syscall6(n, a, b, c, d, e, f);
    if (lpr_sys_failed(r)) {
        errno = (int)-r;
        return -1;
    }
    return r;
}
#endif
