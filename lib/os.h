/* os.h: the C-library calls of lib/ that libprof also intercepts. lib/ runs in two places: in
 * libprof-report, where these are the C library's own (tools/os_libc.c), and inside the profiled
 * program for the conversion at exit, where the C library's names would land in libprof's own
 * hooks (malloc, open, write, mmap, dlopen are all exported by libprof.so): there they are the
 * real functions resolved once, or raw system calls (preload/core/os_real.c). So nothing in lib/
 * calls malloc, free, open, close, read, write, mmap, rename, nanosleep, fork or dlopen directly; every other C library
 * function (snprintf, qsort, memcpy, fstat ...) is called as usual. dlsym too is exported by libprof
 * (the way to ONNX Runtime's entry through a dlopen'ed library): lp_os_dlsym.
 *
 * Each returns what the C library function returns and sets errno the same way. */
#ifndef LP_OS_H
#define LP_OS_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

void *lp_os_malloc(size_t n);
void *lp_os_calloc(size_t n, size_t size);
void *lp_os_realloc(void *p, size_t n);
void lp_os_free(void *p);
int lp_os_open(const char *path, int flags, int mode);
int lp_os_close(int fd);
ssize_t lp_os_write(int fd, const void *buf, size_t n);
void *lp_os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int lp_os_munmap(void *addr, size_t len);
int lp_os_rename(const char *from, const char *to);
int lp_os_unlink(const char *path);
ssize_t lp_os_read(int fd, void *buf, size_t n);
ssize_t lp_os_pread(int fd, void *buf, size_t n, off_t off);
void lp_os_sleep_ms(unsigned ms);
/* Processes: only libprof-report's follower makes them (a snapshot is a forked copy of its pass,
 * lib/convert.c); inside the program lp_os_fork fails with ENOSYS. */
pid_t lp_os_fork(void);
int lp_os_reap(void); /* a child that has ended, waited for without blocking: its pid, else 0 or -1 */
void lp_os_exit(int status) __attribute__((noreturn));
/* A thread for a writer's work that can go on beside its own (the Perfetto trace's deflate), run
 * with every signal blocked, so the program's signals still go to the program's threads. Inside
 * the program it is started by the C library's pthread_create (not through libprof's hook, so no
 * "thread" slice), only in the process that owns the trace, and never writes into the trace.
 * 0, or -1 when none could start (the caller then does the work itself); lp_os_thread_join waits
 * for it to end. */
int lp_os_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
void lp_os_thread_join(pthread_t t);
/* Waiting between those threads: a futex word — lp_os_wait sleeps while *word is `val` (or
 * returns at once), lp_os_wake wakes up to `n` of its sleepers. Not the C library's pthread locks
 * and conditions: inside the program, libprof's own hooks take those. */
void lp_os_wait(int *word, int val);
void lp_os_wake(int *word, int n);
/* A lock on them (0: free, 1: held, 2: held with sleepers), as Drepper's "Futexes Are Tricky". */
static inline void lp_lock(int *m) {
    int c = 0;
    if (__atomic_compare_exchange_n(m, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    if (c != 2) c = __atomic_exchange_n(m, 2, __ATOMIC_ACQUIRE);
    while (c != 0) {
        lp_os_wait(m, 2);
        c = __atomic_exchange_n(m, 2, __ATOMIC_ACQUIRE);
    }
}
static inline void lp_unlock(int *m) {
    if (__atomic_fetch_sub(m, 1, __ATOMIC_RELEASE) != 1) {
        __atomic_store_n(m, 0, __ATOMIC_RELEASE);
        lp_os_wake(m, 1);
    }
}
void *lp_os_dlopen(const char *path, int flags);
/* A library only libprof-report loads (elfutils' libdw: the source lines of native frames); NULL
 * inside the program, whose process gets nothing more loaded into it at its exit. */
void *lp_os_dlopen_offline(const char *path);
void *lp_os_dlsym(void *handle, const char *name);

/* A copy of the first `n` bytes of `s`, NUL-terminated (strndup over lp_os_malloc). */
char *lp_os_strndup(const char *s, size_t n);

#endif
