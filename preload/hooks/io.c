/* io.c: the I/O family — POSIX descriptors (open/openat/creat/close, read/write, pread/pwrite,
 * readv/writev, lseek, fsync/fdatasync), stdio streams (fopen/fread/fwrite/fflush/fclose) and
 * memory mappings (mmap/munmap/mremap).
 *
 * Records carry the descriptor or stream and the bytes asked and done; the path is recorded
 * once, when the file is opened, and the converter keeps the descriptor -> path table (so the
 * per-file totals, Darshan's POSIX module in spirit, cost nothing here). Descriptors the program
 * inherited are named from /proc/self/fd when libprof starts.
 *
 * The 64-bit-offset aliases (open64, pread64, ...) and glibc's fortified entry points
 * (__open_2, __read_chk, ...) are separate symbols that programs built with
 * _FILE_OFFSET_BITS=64 or _FORTIFY_SOURCE call instead, so each is wrapped and forwarded to its
 * own real definition. glibc's internal calls (fread -> read) do not go through these symbols,
 * so a stdio call shows as one slice; calls another library makes do, and nest. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../core/lp.h"
#include "../core/sys.h"

/* Fortified entry points (declared by glibc's headers only under _FORTIFY_SOURCE). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *stream);

#define REALS(X) \
    X(open) X(open64) X(__open_2) X(__open64_2) X(openat) X(openat64) X(__openat_2) X(__openat64_2) \
    X(creat) X(creat64) X(close) X(read) X(__read_chk) X(write) X(pread) X(pread64) X(__pread_chk) \
    X(__pread64_chk) X(pwrite) X(pwrite64) X(readv) X(writev) X(lseek) X(lseek64) X(fsync) \
    X(fdatasync) X(fopen) X(fopen64) X(fread) X(__fread_chk) X(fwrite) X(fflush) X(fclose) X(mmap) \
    X(mmap64) X(munmap) X(mremap)
#define X(fn) static void *real_##fn;
REALS(X)
#undef X
#define REAL(fn) ((__typeof__(&fn))lpr_next(&real_##fn, #fn))

/* A wrapper whose real function is missing fails the way a missing system call would. */
#define NOFN(ret) do { errno = ENOSYS; return ret; } while (0)

#define BEGIN struct lpr_tls *t = lpr_call_begin(LP_FAM_IO); uint64_t t0 = t ? lpr_ticks() : 0
#define RECORD(call, ...) do { \
        if (t) { uint64_t a_[] = {__VA_ARGS__}; \
                 lpr_call_record_args(t, LP_FAM_IO, call, t0, lpr_ticks(), sizeof a_ / 8, a_); } \
    } while (0)
#define RECORD_PATH(call, path, ...) do { \
        if (t) { uint64_t a_[] = {__VA_ARGS__}; const char *p_ = (path); \
                 lpr_call_record(t, call, t0, lpr_ticks(), sizeof a_ / 8, a_, p_, p_ ? strlen(p_) : 0); } \
    } while (0)

#define I(x) ((uint64_t)(int64_t)(x)) /* signed values travel sign-extended */
#define U(x) ((uint64_t)(uintptr_t)(x))

/* ---- opening and closing ------------------------------------------------------------------- */

static int mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? va_arg(ap, int) : 0;
}

#define OPEN_WRAPPER(fn)                                                                     \
    __attribute__((noinline)) static int fn##_slow(const char *path, int flags, int mode) {  \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        int r = REAL(fn)(path, flags, mode);                                                 \
        RECORD_PATH(LP_CALL_OPEN, path, U(flags), I(r));                                     \
        return r;                                                                            \
    }                                                                                        \
    LP_EXPORT int fn(const char *path, int flags, ...) {                                     \
        va_list ap;                                                                          \
        va_start(ap, flags);                                                                 \
        int mode = mode_arg(flags, ap);                                                      \
        va_end(ap);                                                                          \
        LP_PASS(LP_FAM_IO, fn, path, flags, mode);                                           \
        return fn##_slow(path, flags, mode);                                                 \
    }
OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)

#define OPENAT_WRAPPER(fn)                                                                   \
    __attribute__((noinline)) static int fn##_slow(int dirfd, const char *path, int flags, int mode) { \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        int r = REAL(fn)(dirfd, path, flags, mode);                                          \
        RECORD_PATH(LP_CALL_OPENAT, path, I(dirfd), U(flags), I(r));                         \
        return r;                                                                            \
    }                                                                                        \
    LP_EXPORT int fn(int dirfd, const char *path, int flags, ...) {                          \
        va_list ap;                                                                          \
        va_start(ap, flags);                                                                 \
        int mode = mode_arg(flags, ap);                                                      \
        va_end(ap);                                                                          \
        LP_PASS(LP_FAM_IO, fn, dirfd, path, flags, mode);                                    \
        return fn##_slow(dirfd, path, flags, mode);                                          \
    }
OPENAT_WRAPPER(openat)
OPENAT_WRAPPER(openat64)

#define OPEN2_WRAPPER(fn)                                                                    \
    __attribute__((noinline)) static int fn##_slow(const char *path, int flags) { \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        int r = REAL(fn)(path, flags);                                                       \
        RECORD_PATH(LP_CALL_OPEN, path, U(flags), I(r));                                     \
        return r;                                                                            \
    }                                                                                \
    LP_EXPORT int fn(const char *path, int flags) { \
        LP_PASS(LP_FAM_IO, fn, path, flags); \
        return fn##_slow(path, flags); \
    }
OPEN2_WRAPPER(__open_2)
OPEN2_WRAPPER(__open64_2)

#define OPENAT2_WRAPPER(fn)                                                                  \
    __attribute__((noinline)) static int fn##_slow(int dirfd, const char *path, int flags) { \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        int r = REAL(fn)(dirfd, path, flags);                                                \
        RECORD_PATH(LP_CALL_OPENAT, path, I(dirfd), U(flags), I(r));                         \
        return r;                                                                            \
    }                                                                                \
    LP_EXPORT int fn(int dirfd, const char *path, int flags) { \
        LP_PASS(LP_FAM_IO, fn, dirfd, path, flags); \
        return fn##_slow(dirfd, path, flags); \
    }
OPENAT2_WRAPPER(__openat_2)
OPENAT2_WRAPPER(__openat64_2)

#define CREAT_WRAPPER(fn)                                                                    \
    __attribute__((noinline)) static int fn##_slow(const char *path, mode_t mode) { \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        int r = REAL(fn)(path, mode);                                                        \
        RECORD_PATH(LP_CALL_CREAT, path, U(mode), I(r));                                     \
        return r;                                                                            \
    }                                                                                \
    LP_EXPORT int fn(const char *path, mode_t mode) { \
        LP_PASS(LP_FAM_IO, fn, path, mode); \
        return fn##_slow(path, mode); \
    }
CREAT_WRAPPER(creat)
CREAT_WRAPPER(creat64)

__attribute__((noinline)) static int close_slow(int fd) {
    if (!REAL(close)) NOFN(-1);
    BEGIN;
    int r = REAL(close)(fd);
    RECORD(LP_CALL_CLOSE, I(fd), I(r));
    return r;
}

LP_EXPORT int close(int fd) {
    LP_PASS(LP_FAM_IO, close, fd);
    return close_slow(fd);
}

/* ---- reading and writing ------------------------------------------------------------------- */

__attribute__((noinline)) static ssize_t read_slow(int fd, void *buf, size_t n) {
    if (!REAL(read)) NOFN(-1);
    BEGIN;
    ssize_t r = REAL(read)(fd, buf, n);
    RECORD(LP_CALL_READ, I(fd), U(n), I(r));
    return r;
}

LP_EXPORT ssize_t read(int fd, void *buf, size_t n) {
    LP_PASS(LP_FAM_IO, read, fd, buf, n);
    return read_slow(fd, buf, n);
}

__attribute__((noinline)) static ssize_t __read_chk_slow(int fd, void *buf, size_t n, size_t buflen) {
    if (!REAL(__read_chk)) NOFN(-1);
    BEGIN;
    ssize_t r = REAL(__read_chk)(fd, buf, n, buflen);
    RECORD(LP_CALL_READ, I(fd), U(n), I(r));
    return r;
}

LP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen) {
    LP_PASS(LP_FAM_IO, __read_chk, fd, buf, n, buflen);
    return __read_chk_slow(fd, buf, n, buflen);
}

__attribute__((noinline)) static ssize_t write_slow(int fd, const void *buf, size_t n) {
    if (!REAL(write)) NOFN(-1);
    BEGIN;
    ssize_t r = REAL(write)(fd, buf, n);
    RECORD(LP_CALL_WRITE, I(fd), U(n), I(r));
    return r;
}

LP_EXPORT ssize_t write(int fd, const void *buf, size_t n) {
    LP_PASS(LP_FAM_IO, write, fd, buf, n);
    return write_slow(fd, buf, n);
}

#define PREAD_WRAPPER(fn, offt)                                                              \
    __attribute__((noinline)) static ssize_t fn##_slow(int fd, void *buf, size_t n, offt off) { \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        ssize_t r = REAL(fn)(fd, buf, n, off);                                               \
        RECORD(LP_CALL_PREAD, I(fd), U(n), I(off), I(r));                                    \
        return r;                                                                            \
    }                                                                                \
    LP_EXPORT ssize_t fn(int fd, void *buf, size_t n, offt off) { \
        LP_PASS(LP_FAM_IO, fn, fd, buf, n, off); \
        return fn##_slow(fd, buf, n, off); \
    }
PREAD_WRAPPER(pread, off_t)
PREAD_WRAPPER(pread64, off64_t)

#define PREAD_CHK_WRAPPER(fn, offt)                                                          \
    __attribute__((noinline)) static ssize_t fn##_slow(int fd, void *buf, size_t n, offt off, size_t buflen) { \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        ssize_t r = REAL(fn)(fd, buf, n, off, buflen);                                       \
        RECORD(LP_CALL_PREAD, I(fd), U(n), I(off), I(r));                                    \
        return r;                                                                            \
    }                                                                                \
    LP_EXPORT ssize_t fn(int fd, void *buf, size_t n, offt off, size_t buflen) { \
        LP_PASS(LP_FAM_IO, fn, fd, buf, n, off, buflen); \
        return fn##_slow(fd, buf, n, off, buflen); \
    }
PREAD_CHK_WRAPPER(__pread_chk, off_t)
PREAD_CHK_WRAPPER(__pread64_chk, off64_t)

#define PWRITE_WRAPPER(fn, offt)                                                             \
    __attribute__((noinline)) static ssize_t fn##_slow(int fd, const void *buf, size_t n, offt off) { \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        ssize_t r = REAL(fn)(fd, buf, n, off);                                               \
        RECORD(LP_CALL_PWRITE, I(fd), U(n), I(off), I(r));                                   \
        return r;                                                                            \
    }                                                                                \
    LP_EXPORT ssize_t fn(int fd, const void *buf, size_t n, offt off) { \
        LP_PASS(LP_FAM_IO, fn, fd, buf, n, off); \
        return fn##_slow(fd, buf, n, off); \
    }
PWRITE_WRAPPER(pwrite, off_t)
PWRITE_WRAPPER(pwrite64, off64_t)

/* Bytes asked by a vector; read only after the call succeeded (so the vector was valid). */
static uint64_t iov_bytes(const struct iovec *iov, int cnt, ssize_t r) {
    uint64_t n = 0;
    if (r < 0) return 0;
    for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
    return n;
}

__attribute__((noinline)) static ssize_t readv_slow(int fd, const struct iovec *iov, int cnt) {
    if (!REAL(readv)) NOFN(-1);
    BEGIN;
    ssize_t r = REAL(readv)(fd, iov, cnt);
    RECORD(LP_CALL_READV, I(fd), t ? iov_bytes(iov, cnt, r) : 0, I(r));
    return r;
}

LP_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt) {
    LP_PASS(LP_FAM_IO, readv, fd, iov, cnt);
    return readv_slow(fd, iov, cnt);
}

__attribute__((noinline)) static ssize_t writev_slow(int fd, const struct iovec *iov, int cnt) {
    if (!REAL(writev)) NOFN(-1);
    BEGIN;
    ssize_t r = REAL(writev)(fd, iov, cnt);
    RECORD(LP_CALL_WRITEV, I(fd), t ? iov_bytes(iov, cnt, r) : 0, I(r));
    return r;
}

LP_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    LP_PASS(LP_FAM_IO, writev, fd, iov, cnt);
    return writev_slow(fd, iov, cnt);
}

#define LSEEK_WRAPPER(fn, offt)                                                              \
    __attribute__((noinline)) static offt fn##_slow(int fd, offt off, int whence) { \
        if (!REAL(fn)) NOFN(-1);                                                             \
        BEGIN;                                                                               \
        offt r = REAL(fn)(fd, off, whence);                                                  \
        RECORD(LP_CALL_LSEEK, I(fd), I(off), U(whence), I(r));                               \
        return r;                                                                            \
    }                                                                                \
    LP_EXPORT offt fn(int fd, offt off, int whence) { \
        LP_PASS(LP_FAM_IO, fn, fd, off, whence); \
        return fn##_slow(fd, off, whence); \
    }
LSEEK_WRAPPER(lseek, off_t)
LSEEK_WRAPPER(lseek64, off64_t)

__attribute__((noinline)) static int fsync_slow(int fd) {
    if (!REAL(fsync)) NOFN(-1);
    BEGIN;
    int r = REAL(fsync)(fd);
    RECORD(LP_CALL_FSYNC, I(fd), I(r));
    return r;
}

LP_EXPORT int fsync(int fd) {
    LP_PASS(LP_FAM_IO, fsync, fd);
    return fsync_slow(fd);
}

__attribute__((noinline)) static int fdatasync_slow(int fd) {
    if (!REAL(fdatasync)) NOFN(-1);
    BEGIN;
    int r = REAL(fdatasync)(fd);
    RECORD(LP_CALL_FDATASYNC, I(fd), I(r));
    return r;
}

LP_EXPORT int fdatasync(int fd) {
    LP_PASS(LP_FAM_IO, fdatasync, fd);
    return fdatasync_slow(fd);
}

/* ---- stdio --------------------------------------------------------------------------------- */

/* The mode string packed into one word (it is at most a few characters). */
static uint64_t mode_word(const char *m) {
    uint64_t w = 0;
    if (m) memcpy(&w, m, strnlen(m, sizeof w));
    return w;
}

#define FOPEN_WRAPPER(fn)                                                                    \
    __attribute__((noinline)) static FILE * fn##_slow(const char *path, const char *mode) { \
        if (!REAL(fn)) NOFN(NULL);                                                           \
        BEGIN;                                                                               \
        FILE *r = REAL(fn)(path, mode);                                                      \
        RECORD_PATH(LP_CALL_FOPEN, path, t ? mode_word(mode) : 0, U(r));                     \
        return r;                                                                            \
    }                                                                                \
    LP_EXPORT FILE * fn(const char *path, const char *mode) { \
        LP_PASS(LP_FAM_IO, fn, path, mode); \
        return fn##_slow(path, mode); \
    }
FOPEN_WRAPPER(fopen)
FOPEN_WRAPPER(fopen64)

__attribute__((noinline)) static size_t fread_slow(void *ptr, size_t size, size_t n, FILE *f) {
    if (!REAL(fread)) NOFN(0);
    BEGIN;
    size_t r = REAL(fread)(ptr, size, n, f);
    RECORD(LP_CALL_FREAD, U(f), U(size * n), U(r * size));
    return r;
}

LP_EXPORT size_t fread(void *ptr, size_t size, size_t n, FILE *f) {
    LP_PASS(LP_FAM_IO, fread, ptr, size, n, f);
    return fread_slow(ptr, size, n, f);
}

__attribute__((noinline)) static size_t __fread_chk_slow(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *f) {
    if (!REAL(__fread_chk)) NOFN(0);
    BEGIN;
    size_t r = REAL(__fread_chk)(ptr, ptrlen, size, n, f);
    RECORD(LP_CALL_FREAD, U(f), U(size * n), U(r * size));
    return r;
}

LP_EXPORT size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *f) {
    LP_PASS(LP_FAM_IO, __fread_chk, ptr, ptrlen, size, n, f);
    return __fread_chk_slow(ptr, ptrlen, size, n, f);
}

__attribute__((noinline)) static size_t fwrite_slow(const void *ptr, size_t size, size_t n, FILE *f) {
    if (!REAL(fwrite)) NOFN(0);
    BEGIN;
    size_t r = REAL(fwrite)(ptr, size, n, f);
    RECORD(LP_CALL_FWRITE, U(f), U(size * n), U(r * size));
    return r;
}

LP_EXPORT size_t fwrite(const void *ptr, size_t size, size_t n, FILE *f) {
    LP_PASS(LP_FAM_IO, fwrite, ptr, size, n, f);
    return fwrite_slow(ptr, size, n, f);
}

__attribute__((noinline)) static int fflush_slow(FILE *f) {
    if (!REAL(fflush)) NOFN(EOF);
    BEGIN;
    int r = REAL(fflush)(f);
    RECORD(LP_CALL_FFLUSH, U(f), I(r));
    return r;
}

LP_EXPORT int fflush(FILE *f) {
    LP_PASS(LP_FAM_IO, fflush, f);
    return fflush_slow(f);
}

__attribute__((noinline)) static int fclose_slow(FILE *f) {
    if (!REAL(fclose)) NOFN(EOF);
    BEGIN;
    int r = REAL(fclose)(f);
    RECORD(LP_CALL_FCLOSE, U(f), I(r));
    return r;
}

LP_EXPORT int fclose(FILE *f) {
    LP_PASS(LP_FAM_IO, fclose, f);
    return fclose_slow(f);
}

/* ---- mappings --------------------------------------------------------------------------------
 * An allocator maps its memory through these, also while it sets itself up (chromium's built-in
 * PartitionAlloc, a statically linked jemalloc): so they never look a symbol up and never run
 * the part of libprof's set-up that may allocate (only the first part, system calls only, see
 * core.c). Until that set-up has found the C library's functions (lpr_io_resolve), the call is
 * made as the raw system call the C library would make. */

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
static void *raw_mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
    return raw_mmap(addr, len, prot, flags, fd, (off_t)off);
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

void lpr_io_resolve(void) {
    (void)REAL(mmap);
    (void)REAL(mmap64);
    (void)REAL(munmap);
    (void)REAL(mremap);
}

#define MMAP_WRAPPER(fn, offt)                                                               \
    __attribute__((noinline)) static void * fn##_slow(void *addr, size_t len, int prot, int flags, int fd, offt off) { \
        BEGIN;                                                                           \
        void *r = MAPFN(fn)(addr, len, prot, flags, fd, off);                                \
        RECORD(LP_CALL_MMAP, U(addr), U(len), U(prot), U(flags), I(fd), U(r));               \
        return r;                                                                            \
    }                                                                                        \
    LP_EXPORT void * fn(void *addr, size_t len, int prot, int flags, int fd, offt off) {     \
        LP_PASS(LP_FAM_IO, fn, addr, len, prot, flags, fd, off);                             \
        return fn##_slow(addr, len, prot, flags, fd, off);                                   \
    }
MMAP_WRAPPER(mmap, off_t)
MMAP_WRAPPER(mmap64, off64_t)

__attribute__((noinline)) static int munmap_slow(void *addr, size_t len) {
    BEGIN;
    int r = MAPFN(munmap)(addr, len);
    RECORD(LP_CALL_MUNMAP, U(addr), U(len), I(r));
    return r;
}

LP_EXPORT int munmap(void *addr, size_t len) {
    LP_PASS(LP_FAM_IO, munmap, addr, len);
    return munmap_slow(addr, len);
}

__attribute__((noinline)) static void *mremap_slow(void *old, size_t old_len, size_t new_len, int flags, void *want) {
    BEGIN;
    void *(*f)(void *, size_t, size_t, int, ...) = __atomic_load_n(&real_mremap, __ATOMIC_ACQUIRE);
    void *r = f ? f(old, old_len, new_len, flags, want) : raw_mremap(old, old_len, new_len, flags, want);
    RECORD(LP_CALL_MREMAP, U(old), U(old_len), U(new_len), U(r));
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
    LP_PASS(LP_FAM_IO, mremap, old, old_len, new_len, flags, want);
    return mremap_slow(old, old_len, new_len, flags, want);
}

/* ---- descriptors open before libprof started ------------------------------------------------
 * Raw system calls: this runs inside libprof (guard held) and must not recurse into the hooks. */
void lpr_io_start(void) {
    struct lpr_tls *t = &lpr_tls;
    if (t->guard) return;
    t->guard = 1;
    int saved = errno;
    int dfd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        char buf[4096];
        long n;
        uint64_t now = lpr_ticks();
        while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct dirent64 *d = (struct dirent64 *)(buf + off);
                off += d->d_reclen;
                char *end;
                long fd = strtol(d->d_name, &end, 10);
                if (*end || end == d->d_name || fd == dfd) continue;
                char link[64], path[1024];
                snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
                long len = syscall(SYS_readlink, link, path, sizeof path);
                if (len <= 0) continue;
                uint64_t a = (uint64_t)fd;
                lpr_call_write(t, LP_CALL_FD, now, 0, 1, &a, path, (size_t)len);
            }
        }
        syscall(SYS_close, dfd);
    }
    errno = saved;
    t->guard = 0;
}
