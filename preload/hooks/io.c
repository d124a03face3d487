/* io.c: the I/O family — POSIX descriptors (open/openat/creat/close, read/write, pread/pwrite,
 * readv/writev, lseek, fsync/fdatasync), stdio streams (fopen/fread/fwrite/fflush/fclose) and
 * memory mappings (mmap/munmap/mremap), and the descriptors dup, dup2, dup3, fcntl(F_DUPFD) and
 * pipe/pipe2 make (so that what is read or written through them is charged to what they name).
 *
 * Records carry the descriptor or stream and the bytes asked and done; the path is recorded
 * once, when the file is opened, and the converter keeps the descriptor -> path table (so the
 * per-file totals, Darshan's POSIX module in spirit, cost nothing here). Descriptors the program
 * inherited are named from /proc/self/fd when libprof starts.
 *
 * The 64-bit-offset names (open64, pread64, mmap64, ...) are, in the C library of a 64-bit
 * system, other names of the same functions: here too (LP_ALIAS64), so that whoever compares
 * their addresses sees what it would without libprof (memray checks that the mmap it calls is the
 * one the loader finds first, and said "Correcting symbol for mmap" when they were two).
 * glibc's fortified entry points (__open_2, __open64_2, __read_chk, ...) are separate symbols
 * there, which programs built with _FORTIFY_SOURCE call instead: each is wrapped and forwarded to
 * its own real definition. glibc's internal calls (fread -> read) do not go through these
 * symbols, so a stdio call shows as one slice; calls another library makes do, and nest. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../core/sys.h"
#include "hook.h"

/* Fortified entry points (declared by glibc's headers only under _FORTIFY_SOURCE). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *stream);

/* the list as it reads best, one group a line */
// clang-format off
#define REALS(X) \
    X(open) X(__open_2) X(__open64_2) X(openat) X(__openat_2) X(__openat64_2) \
    X(creat) X(close) X(read) X(__read_chk) X(write) X(pread) X(__pread_chk) \
    X(__pread64_chk) X(pwrite) X(readv) X(writev) X(lseek) X(fsync) X(fdatasync) \
    X(fopen) X(fread) X(__fread_chk) X(fwrite) X(fflush) X(fclose) \
    X(mmap) X(munmap) X(mremap) X(dup) X(dup2) X(dup3) X(fcntl) X(pipe)
// clang-format on
REALS(LP_REAL_SLOT)

/* ---- opening and closing ------------------------------------------------------------------- */

/* open and openat are variadic (the mode comes only with O_CREAT or O_TMPFILE): their exported
 * halves read it and pass it on, the slow halves are ordinary. */
static int mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? va_arg(ap, int) : 0;
}

#define OPEN_HOOK(fn)                                                                       \
    __attribute__((noinline)) static int fn##_slow(const char *path, int flags, int mode) { \
        if (!LP_REAL(fn)) LP_NOFN(-1);                                                      \
        LP_BEGIN(LP_FAM_IO);                                                                \
        int r = LP_REAL(fn)(path, flags, mode);                                             \
        LP_RECORD_STR(LP_CALL_OPEN, path, U(flags), I(r));                                  \
        return r;                                                                           \
    }                                                                                       \
    LP_EXPORT int fn(const char *path, int flags, ...) {                                    \
        va_list ap;                                                                         \
        va_start(ap, flags);                                                                \
        int mode = mode_arg(flags, ap);                                                     \
        va_end(ap);                                                                         \
        LP_PASS_ARGS(LP_FAM_IO, fn, (path, flags, mode));                                   \
        return fn##_slow(path, flags, mode);                                                \
    }
OPEN_HOOK(open)
LP_ALIAS64(open);

#define OPENAT_HOOK(fn)                                                                                \
    __attribute__((noinline)) static int fn##_slow(int dirfd, const char *path, int flags, int mode) { \
        if (!LP_REAL(fn)) LP_NOFN(-1);                                                                 \
        LP_BEGIN(LP_FAM_IO);                                                                           \
        int r = LP_REAL(fn)(dirfd, path, flags, mode);                                                 \
        LP_RECORD_STR(LP_CALL_OPENAT, path, I(dirfd), U(flags), I(r));                                 \
        return r;                                                                                      \
    }                                                                                                  \
    LP_EXPORT int fn(int dirfd, const char *path, int flags, ...) {                                    \
        va_list ap;                                                                                    \
        va_start(ap, flags);                                                                           \
        int mode = mode_arg(flags, ap);                                                                \
        va_end(ap);                                                                                    \
        LP_PASS_ARGS(LP_FAM_IO, fn, (dirfd, path, flags, mode));                                       \
        return fn##_slow(dirfd, path, flags, mode);                                                    \
    }
OPENAT_HOOK(openat)
LP_ALIAS64(openat);

LP_HOOK_STR(IO, OPEN, int, __open_2, (const char *path, int flags), (path, flags), -1, path, U(flags), I(r))
LP_HOOK_STR(IO, OPEN, int, __open64_2, (const char *path, int flags), (path, flags), -1, path, U(flags), I(r))
LP_HOOK_STR(IO, OPENAT, int, __openat_2, (int dirfd, const char *path, int flags), (dirfd, path, flags), -1, path,
            I(dirfd), U(flags), I(r))
LP_HOOK_STR(IO, OPENAT, int, __openat64_2, (int dirfd, const char *path, int flags), (dirfd, path, flags), -1, path,
            I(dirfd), U(flags), I(r))
LP_HOOK_STR(IO, CREAT, int, creat, (const char *path, mode_t mode), (path, mode), -1, path, U(mode), I(r))
LP_ALIAS64(creat);
LP_HOOK(IO, CLOSE, int, close, (int fd), (fd), -1, (void)0, I(fd), I(r))

/* ---- reading and writing ------------------------------------------------------------------- */

LP_HOOK(IO, READ, ssize_t, read, (int fd, void *buf, size_t n), (fd, buf, n), -1, (void)0, I(fd), U(n), I(r))
LP_HOOK(IO, READ, ssize_t, __read_chk, (int fd, void *buf, size_t n, size_t buflen), (fd, buf, n, buflen), -1, (void)0,
        I(fd), U(n), I(r))
LP_HOOK(IO, WRITE, ssize_t, write, (int fd, const void *buf, size_t n), (fd, buf, n), -1, (void)0, I(fd), U(n), I(r))
LP_HOOK(IO, PREAD, ssize_t, pread, (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off), -1, (void)0, I(fd),
        U(n), I(off), I(r))
LP_ALIAS64(pread);
LP_HOOK(IO, PREAD, ssize_t, __pread_chk, (int fd, void *buf, size_t n, off_t off, size_t buflen),
        (fd, buf, n, off, buflen), -1, (void)0, I(fd), U(n), I(off), I(r))
LP_HOOK(IO, PREAD, ssize_t, __pread64_chk, (int fd, void *buf, size_t n, off64_t off, size_t buflen),
        (fd, buf, n, off, buflen), -1, (void)0, I(fd), U(n), I(off), I(r))
LP_HOOK(IO, PWRITE, ssize_t, pwrite, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off), -1, (void)0,
        I(fd), U(n), I(off), I(r))
LP_ALIAS64(pwrite);

/* Bytes asked by a vector; read only after the call succeeded (so the vector was valid). */
static uint64_t iov_bytes(const struct iovec *iov, int cnt, ssize_t r) {
    uint64_t n = 0;
    if (r < 0) return 0;
    for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
    return n;
}

LP_HOOK(IO, READV, ssize_t, readv, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), -1, (void)0, I(fd),
        iov_bytes(iov, cnt, r), I(r))
LP_HOOK(IO, WRITEV, ssize_t, writev, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), -1, (void)0, I(fd),
        iov_bytes(iov, cnt, r), I(r))
LP_HOOK(IO, LSEEK, off_t, lseek, (int fd, off_t off, int whence), (fd, off, whence), -1, (void)0, I(fd), I(off),
        U(whence), I(r))
LP_ALIAS64(lseek);
LP_HOOK(IO, FSYNC, int, fsync, (int fd), (fd), -1, (void)0, I(fd), I(r))
LP_HOOK(IO, FDATASYNC, int, fdatasync, (int fd), (fd), -1, (void)0, I(fd), I(r))

/* ---- stdio --------------------------------------------------------------------------------- */

/* The mode string packed into one word (it is at most a few characters). */
static uint64_t mode_word(const char *m) {
    uint64_t w = 0;
    if (m) memcpy(&w, m, strnlen(m, sizeof w));
    return w;
}

LP_HOOK_STR(IO, FOPEN, FILE *, fopen, (const char *path, const char *mode), (path, mode), NULL, path, mode_word(mode),
            U(r))
LP_ALIAS64(fopen);
LP_HOOK(IO, FREAD, size_t, fread, (void *ptr, size_t size, size_t n, FILE *f), (ptr, size, n, f), 0, (void)0, U(f),
        U(size *n), U(r *size))
LP_HOOK(IO, FREAD, size_t, __fread_chk, (void *ptr, size_t ptrlen, size_t size, size_t n, FILE *f),
        (ptr, ptrlen, size, n, f), 0, (void)0, U(f), U(size *n), U(r *size))
LP_HOOK(IO, FWRITE, size_t, fwrite, (const void *ptr, size_t size, size_t n, FILE *f), (ptr, size, n, f), 0, (void)0,
        U(f), U(size *n), U(r *size))
LP_HOOK(IO, FFLUSH, int, fflush, (FILE * f), (f), EOF, (void)0, U(f), I(r))
LP_HOOK(IO, FCLOSE, int, fclose, (FILE * f), (f), EOF, (void)0, U(f), I(r))

/* ---- mappings --------------------------------------------------------------------------------
 * An allocator maps its memory through these, also while it sets itself up (chromium's built-in
 * PartitionAlloc, a statically linked jemalloc): so they never look a symbol up and never run
 * the part of libprof's set-up that may allocate (only the first part, system calls only, see
 * core/life.c). Until that set-up has found the C library's functions (lpr_io_resolve), the
 * call is made as the raw system call the C library would make. */

static void *map_result(long r) {
    if (lpr_sys_failed(r)) {
        errno = (int)-r;
        return MAP_FAILED;
    }
    return (void *)r;
}

static void *raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return map_result((long)lpr_sys_mmap(addr, len, prot, flags, fd, (uint64_t)off));
}
static int raw_munmap(void *addr, size_t len) {
    int r = lpr_sys_munmap(addr, len);
    if (r < 0) {
        errno = -r;
        return -1;
    }
    return 0;
}
static void *raw_mremap(void *old, size_t old_len, size_t new_len, int flags, void *want) {
    return map_result((long)lpr_sys_mremap(old, old_len, new_len, flags, want));
}

/* The real function if found, else the raw call; never a lookup. */
#define MAPFN(fn) (__atomic_load_n(&real_##fn, __ATOMIC_ACQUIRE) ? (__typeof__(&raw_##fn))real_##fn : raw_##fn)

static void io_resolve(void) {
    (void)LP_REAL(mmap);
    (void)LP_REAL(munmap);
    (void)LP_REAL(mremap);
}

#define MMAP_HOOK(fn, offt)                                                                                           \
    __attribute__((noinline)) static void *fn##_slow(void *addr, size_t len, int prot, int flags, int fd, offt off) { \
        LP_BEGIN(LP_FAM_IO);                                                                                          \
        void *r = MAPFN(fn)(addr, len, prot, flags, fd, off);                                                         \
        LP_RECORD(LP_FAM_IO, LP_CALL_MMAP, U(addr), U(len), U(prot), U(flags), I(fd), U(r));                          \
        return r;                                                                                                     \
    }                                                                                                                 \
    LP_EXPORT void *fn(void *addr, size_t len, int prot, int flags, int fd, offt off) {                               \
        LP_PASS_ARGS(LP_FAM_IO, fn, (addr, len, prot, flags, fd, off));                                               \
        return fn##_slow(addr, len, prot, flags, fd, off);                                                            \
    }
MMAP_HOOK(mmap, off_t)
LP_ALIAS64(mmap);

__attribute__((noinline)) static int munmap_slow(void *addr, size_t len) {
    LP_BEGIN(LP_FAM_IO);
    int r = MAPFN(munmap)(addr, len);
    LP_RECORD(LP_FAM_IO, LP_CALL_MUNMAP, U(addr), U(len), I(r));
    return r;
}

LP_EXPORT int munmap(void *addr, size_t len) {
    LP_PASS_ARGS(LP_FAM_IO, munmap, (addr, len));
    return munmap_slow(addr, len);
}

__attribute__((noinline)) static void *mremap_slow(void *old, size_t old_len, size_t new_len, int flags, void *want) {
    LP_BEGIN(LP_FAM_IO);
    void *(*f)(void *, size_t, size_t, int, ...) = __atomic_load_n(&real_mremap, __ATOMIC_ACQUIRE);
    void *r = f ? f(old, old_len, new_len, flags, want) : raw_mremap(old, old_len, new_len, flags, want);
    LP_RECORD(LP_FAM_IO, LP_CALL_MREMAP, U(old), U(old_len), U(new_len), U(r));
    return r;
}

LP_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    LP_PASS_ARGS(LP_FAM_IO, mremap, (old, old_len, new_len, flags, want));
    return mremap_slow(old, old_len, new_len, flags, want);
}

/* ---- descriptors open before libprof started ------------------------------------------------
 * Raw system calls: this runs inside libprof (guard held) and must not recurse into the hooks. */
static void io_start(void) {
    struct lpr_tls *t = &lpr_tls;
    if (t->guard || !(lpr_gate & (1u << LP_FAM_IO))) return;
    t->guard = 1;
    int saved = errno;
    int dfd = lpr_sys_open("/proc/self/fd", O_RDONLY | O_DIRECTORY, 0);
    if (dfd >= 0) {
        char buf[4096];
        long n;
        uint64_t now = lpr_ticks();
        while ((n = LP_SYS(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct dirent64 *d = (struct dirent64 *)(buf + off);
                off += d->d_reclen;
                char *end;
                long fd = strtol(d->d_name, &end, 10);
                if (*end || end == d->d_name || fd == dfd) continue;
                char link[64], path[1024];
                snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
                long len = lpr_sys_readlink(link, path, sizeof path);
                if (len <= 0) continue;
                uint64_t a = (uint64_t)fd;
                lpr_call_write(t, LP_CALL_FD, now, 0, 1, &a, path, (size_t)len);
            }
        }
        lpr_sys_close(dfd);
    }
    errno = saved;
    t->guard = 0;
}

LP_FAMILY_SETUP(io, io_resolve, io_start, NULL);

/* the hottest pass-throughs: unbound from the program when this family never records */
LP_UNHOOKABLE(IO, read);
LP_UNHOOKABLE(IO, write);
LP_UNHOOKABLE(IO, pread64);
LP_UNHOOKABLE(IO, pwrite64);
LP_UNHOOKABLE(IO, close);

/* ---- descriptors made from others ---------------------------------------------------------- */

LP_HOOK(IO, DUP, int, dup, (int fd), (fd), -1, (void)0, I(fd), I(r))
LP_HOOK(IO, DUP2, int, dup2, (int fd, int newfd), (fd, newfd), -1, (void)0, I(fd), I(newfd), I(r))
LP_HOOK(IO, DUP2, int, dup3, (int fd, int newfd, int flags), (fd, newfd, flags), -1, (void)0, I(fd), I(newfd), I(r))

/* pipe (pipe2 is hooks/unwind.c's: it records through lpr_io_pipe) */
void lpr_io_pipe(struct lpr_tls *t, uint64_t t0, const int fds[2], int r) {
    LP_RECORD_STR(LP_CALL_PIPE, "pipe", I(r == 0 ? fds[0] : -1), I(r == 0 ? fds[1] : -1), I(r));
}
__attribute__((noinline)) static int pipe_slow(int fds[2]) {
    if (!LP_REAL(pipe)) LP_NOFN(-1);
    LP_BEGIN(LP_FAM_IO);
    int r = LP_REAL(pipe)(fds);
    lpr_io_pipe(t, t0, fds, r);
    return r;
}
LP_EXPORT int pipe(int fds[2]) {
    LP_PASS_ARGS(LP_FAM_IO, pipe, (fds));
    return pipe_slow(fds);
}

/* fcntl is variadic; its third argument, when there is one, is an int or a pointer: passed on as
 * a word either way (what the C library's own fcntl reads). Only F_DUPFD and F_DUPFD_CLOEXEC
 * are recorded: every other command passes straight through. */
#define FCNTL_HOOK(fn)                                                           \
    __attribute__((noinline)) static int fn##_slow(int fd, int cmd, void *arg) { \
        if (!LP_REAL(fn)) LP_NOFN(-1);                                           \
        LP_BEGIN(LP_FAM_IO);                                                     \
        int r = LP_REAL(fn)(fd, cmd, arg);                                       \
        LP_RECORD(LP_FAM_IO, LP_CALL_FCNTL_DUPFD, I(fd), I(cmd), I(r));          \
        return r;                                                                \
    }                                                                            \
    LP_EXPORT int fn(int fd, int cmd, ...) {                                     \
        va_list ap;                                                              \
        va_start(ap, cmd);                                                       \
        void *arg = va_arg(ap, void *);                                          \
        va_end(ap);                                                              \
        if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC) {                          \
            int (*f)(int, int, ...) = (int (*)(int, int, ...))LP_REAL(fn);       \
            if (!f) LP_NOFN(-1);                                                 \
            return f(fd, cmd, arg);                                              \
        }                                                                        \
        LP_PASS_ARGS(LP_FAM_IO, fn, (fd, cmd, arg));                             \
        return fn##_slow(fd, cmd, arg);                                          \
    }
FCNTL_HOOK(fcntl)
LP_ALIAS64(fcntl);
