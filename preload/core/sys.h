/* sys.h: the system calls libprof makes for itself, issued directly (no C library wrapper).
 *
 * Why raw: libprof exports open, close, pwrite, mmap ... itself, so a call through the C
 * library's name from inside libprof would land in libprof's own hook (and, unguarded, in the
 * user's trace). A raw system call reaches the kernel and nothing else: no hook, no lock, no
 * allocation, no errno (each returns the result or -errno), so it is safe inside a signal
 * handler, inside a forked child of a threaded parent and inside a program's own allocator.
 * Every call libprof's core makes on its own behalf goes through here or through a real function
 * resolved once. */
#ifndef LP_SYS_H
#define LP_SYS_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__)
static inline long lpr_syscall6(long n, long a, long b, long c, long d, long e, long f) {
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
static inline long lpr_syscall6(long n, long a, long b, long c, long d, long e, long f) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
    return x0;
}
#else
/* Not the C library's syscall() as a fallback: libprof exports a hook of that name
 * (hooks/unwind.c), which its own calls would reach. */
#error "libprof's raw system calls are written for x86-64 and aarch64"
#endif

#define LP_SYS(n, a, b, c) lpr_syscall6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)

static inline int lpr_sys_open(const char *path, int flags, int mode) {
    return (int)lpr_syscall6(SYS_openat, AT_FDCWD, (long)path, flags | O_CLOEXEC, mode, 0, 0);
}
static inline int lpr_sys_close(int fd) { return (int)LP_SYS(SYS_close, fd, 0, 0); }
static inline long lpr_sys_read(int fd, void *buf, size_t n) { return LP_SYS(SYS_read, fd, buf, n); }
static inline long lpr_sys_write(int fd, const void *buf, size_t n) { return LP_SYS(SYS_write, fd, buf, n); }
static inline long lpr_sys_pread(int fd, void *buf, size_t n, uint64_t off) {
    return lpr_syscall6(SYS_pread64, fd, (long)buf, (long)n, (long)off, 0, 0);
}
/* pwritev's offset travels as (low, high) words; on a 64-bit kernel the low word is all of it. */
static inline long lpr_sys_pwritev(int fd, const struct iovec *iov, int cnt, uint64_t off) {
    return lpr_syscall6(SYS_pwritev, fd, (long)iov, cnt, (long)off, 0, 0);
}
static inline int lpr_sys_fstat(int fd, struct stat *st) { return (int)LP_SYS(SYS_fstat, fd, st, 0); }
static inline int lpr_sys_stat(const char *path, struct stat *st) {
    return (int)lpr_syscall6(SYS_newfstatat, AT_FDCWD, (long)path, (long)st, AT_SYMLINK_NOFOLLOW, 0, 0);
}
static inline int lpr_sys_truncate(const char *path, uint64_t len) { return (int)LP_SYS(SYS_truncate, path, len, 0); }
static inline int lpr_sys_unlink(const char *path) { return (int)LP_SYS(SYS_unlinkat, AT_FDCWD, path, 0); }
static inline int lpr_sys_rename(const char *from, const char *to) {
    return (int)lpr_syscall6(SYS_renameat, AT_FDCWD, (long)from, AT_FDCWD, (long)to, 0, 0);
}
static inline int lpr_sys_mkdir(const char *path, int mode) { return (int)LP_SYS(SYS_mkdirat, AT_FDCWD, path, mode); }
static inline long lpr_sys_readlink(const char *path, char *buf, size_t n) {
    return lpr_syscall6(SYS_readlinkat, AT_FDCWD, (long)path, (long)buf, (long)n, 0, 0);
}
static inline int lpr_sys_getpid(void) { return (int)LP_SYS(SYS_getpid, 0, 0, 0); }
static inline int lpr_sys_gettid(void) { return (int)LP_SYS(SYS_gettid, 0, 0, 0); }
static inline int lpr_sys_kill(int pid, int sig) { return (int)LP_SYS(SYS_kill, pid, sig, 0); }
static inline long lpr_sys_copy_file_range(int in, int out, size_t n) {
    return lpr_syscall6(SYS_copy_file_range, in, 0, out, 0, (long)n, 0);
}
static inline void *lpr_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, uint64_t off) {
    return (void *)lpr_syscall6(SYS_mmap, (long)addr, (long)len, prot, flags, fd, (long)off);
}
static inline int lpr_sys_munmap(void *addr, size_t len) { return (int)LP_SYS(SYS_munmap, addr, len, 0); }
static inline void *lpr_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *want) {
    return (void *)lpr_syscall6(SYS_mremap, (long)old, (long)old_len, (long)new_len, flags, (long)want, 0);
}
/* A small file (/proc's) into `buf`, NUL-terminated: its length, or -1. */
static inline long lpr_sys_read_file(const char *path, char *buf, size_t cap) {
    int fd = lpr_sys_open(path, O_RDONLY, 0);
    if (fd < 0) return -1;
    long n = lpr_sys_read(fd, buf, cap - 1);
    lpr_sys_close(fd);
    if (n < 0) return -1;
    buf[n] = '\0';
    return n;
}
/* One entry of what getdents64 fills a buffer with (the kernel's struct linux_dirent64). */
struct lpr_dirent64 {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};
/* A raw mmap-family result in the C library's convention: MAP_FAILED and errno on failure. */
static inline int lpr_sys_failed(long r) { return r < 0 && r > -4096; }

#endif
