/* os_real.c: lib/os.h inside the profiled program — the real functions (real.c) and raw system calls
 * (sys.h), so that the conversion at exit, which runs lib/ code in the program's process, never
 * passes through libprof's own hooks. (libprof-report links tools/os_libc.c instead.) */
#define _GNU_SOURCE
#include "lib/os.h"

#include <linux/futex.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include "os_real.h"
#include "config.h"
#include "real.h"
#include "state.h"
#include "sys.h"

static long ret(long r) {
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

void *lp_os_malloc(size_t n) {
    lpr_real_resolve_alloc();
    return LPR_REAL(malloc)(n);
}
void *lp_os_calloc(size_t n, size_t size) {
    lpr_real_resolve_alloc();
    return LPR_REAL(calloc)(n, size);
}
void *lp_os_realloc(void *p, size_t n) {
    lpr_real_resolve_alloc();
    return LPR_REAL(realloc)(p, n);
}
void lp_os_free(void *p) {
    lpr_real_resolve_alloc();
    LPR_REAL(free)(p);
}
int lp_os_open(const char *path, int flags, int mode) { return (int)ret(lpr_sys_open(path, flags, mode)); }
int lp_os_close(int fd) { return (int)ret(lpr_sys_close(fd)); }
/* Inside the program a write past its file-size limit (RLIMIT_FSIZE) would kill it with SIGXFSZ:
 * such a write is cut at the limit, and one at the limit fails with EFBIG, as if the signal were
 * ignored. */
ssize_t lp_os_write(int fd, const void *buf, size_t n) {
    struct {
        uint64_t cur, max;
    } l;
    if (lpr_syscall6(SYS_prlimit64, 0, RLIMIT_FSIZE, 0, (long)&l, 0, 0) == 0 && l.cur != RLIM64_INFINITY) {
        struct stat st;
        long pos = LP_SYS(SYS_lseek, fd, 0, SEEK_CUR);
        if (pos >= 0 && lpr_sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            if ((uint64_t)pos >= l.cur) {
                errno = EFBIG;
                return -1;
            }
            if ((uint64_t)pos + n > l.cur) n = (size_t)(l.cur - (uint64_t)pos);
        }
    }
    return ret(lpr_sys_write(fd, buf, n));
}
void *lp_os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    long r = (long)lpr_sys_mmap(addr, len, prot, flags, fd, (uint64_t)off);
    return lpr_sys_failed(r) ? (errno = (int)-r, MAP_FAILED) : (void *)r;
}
int lp_os_munmap(void *addr, size_t len) { return (int)ret(lpr_sys_munmap(addr, len)); }
int lp_os_rename(const char *from, const char *to) { return (int)ret(lpr_sys_rename(from, to)); }
int lp_os_unlink(const char *path) { return (int)ret(lpr_sys_unlink(path)); }
void *lp_os_dlopen(const char *path, int flags) {
    lpr_real_resolve();
    return LPR_REAL(dlopen)(path, flags);
}

void *lp_os_dlsym(void *handle, const char *name) { return lpr_dlsym(handle, name); }
void *lp_os_dlopen_offline(const char *path) { /* never in the program (os.h) */
    (void)path;
    return NULL;
}

/* The writer's thread: marked as libprof's own (any hook it reaches passes through). */
struct thread_start {
    void *(*fn)(void *);
    void *arg;
};
static void *thread_main(void *p) {
    struct thread_start s = *(struct thread_start *)p;
    LPR_REAL(free)(p);
    lpr_tls.guard = 1;
    return s.fn(s.arg);
}
int lp_os_thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
    lpr_real_resolve();
    /* only the trace's owner (not a vfork child sharing its memory) */
    if (!LPR_REAL(pthread_create) || !LPR_REAL(pthread_join) || lpr_sys_getpid() != lpr_pid) return -1;
    struct thread_start *s = LPR_REAL(malloc)(sizeof *s);
    if (!s) return -1;
    *s = (struct thread_start){fn, arg};
    sigset_t all, old; /* (pthread_sigmask leaves the C library's own signals alone) */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread starts with this mask */
    int r = LPR_REAL(pthread_create)(t, NULL, thread_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) LPR_REAL(free)(s);
    return r == 0 ? 0 : -1;
}
void lp_os_thread_join(pthread_t t) { LPR_REAL(pthread_join)(t, NULL); }
void lp_os_wait(int *word, int val) { lpr_syscall6(SYS_futex, (long)word, FUTEX_WAIT_PRIVATE, val, 0, 0, 0); }
void lp_os_wake(int *word, int n) { lpr_syscall6(SYS_futex, (long)word, FUTEX_WAKE_PRIVATE, n, 0, 0, 0); }

/* Resident memory for tables a signal handler writes (os_real.h). */
void lpr_resident(void *base, size_t from, size_t to) {
    from &= ~(size_t)4095;
    if (to > from) LP_SYS(SYS_madvise, (char *)base + from, to - from, 23 /* MADV_POPULATE_WRITE, Linux 5.14 */);
}

void lpr_ahead_slow(struct lpr_ahead *a, void *base, size_t used, size_t cap) {
    if (__atomic_exchange_n(&a->busy, 1, __ATOMIC_ACQUIRE)) return; /* another thread is at it */
    size_t to = used + LPR_AHEAD;
    if (to > cap) to = cap;
    if (to > a->done) {
        lpr_resident(base, a->done, to);
        a->done = to;
    }
    __atomic_store_n(&a->busy, 0, __ATOMIC_RELEASE);
}
ssize_t lp_os_read(int fd, void *buf, size_t n) { return ret(lpr_sys_read(fd, buf, n)); }
ssize_t lp_os_pread(int fd, void *buf, size_t n, off_t off) { return ret(lpr_sys_pread(fd, buf, n, off)); }
void lp_os_sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    LP_SYS(SYS_nanosleep, &ts, NULL, 0);
}
pid_t lp_os_fork(void) {
    errno = ENOSYS; /* never inside the program */
    return -1;
}
int lp_os_reap(void) { return (int)ret(lpr_syscall6(SYS_wait4, -1, 0, WNOHANG, 0, 0, 0)); }
void lp_os_exit(int status) {
    LP_SYS(SYS_exit_group, status, 0, 0);
    __builtin_unreachable();
}
