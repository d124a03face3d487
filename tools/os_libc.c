/* os_libc.c: lib/os.h for the tools — the C library's own functions. (Inside the profiled
 * program, preload/core/os_real.c provides them instead.) */
#define _GNU_SOURCE
#include "lib/os.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void *lp_os_malloc(size_t n) { return malloc(n); }
void *lp_os_calloc(size_t n, size_t size) { return calloc(n, size); }
void *lp_os_realloc(void *p, size_t n) { return realloc(p, n); }
void lp_os_free(void *p) { free(p); }
int lp_os_open(const char *path, int flags, int mode) { return open(path, flags, mode); }
int lp_os_close(int fd) { return close(fd); }
ssize_t lp_os_write(int fd, const void *buf, size_t n) { return write(fd, buf, n); }
void *lp_os_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return mmap(addr, len, prot, flags, fd, off);
}
int lp_os_munmap(void *addr, size_t len) { return munmap(addr, len); }
int lp_os_rename(const char *from, const char *to) { return rename(from, to); }
int lp_os_unlink(const char *path) { return unlink(path); }
int lp_os_thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread starts with this mask */
    int r = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r == 0 ? 0 : -1;
}
void lp_os_thread_join(pthread_t t) { pthread_join(t, NULL); }
void *lp_os_dlopen(const char *path, int flags) { return dlopen(path, flags); }
void *lp_os_dlopen_offline(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
void *lp_os_dlsym(void *handle, const char *name) { return dlsym(handle, name); }

ssize_t lp_os_read(int fd, void *buf, size_t n) { return read(fd, buf, n); }
ssize_t lp_os_pread(int fd, void *buf, size_t n, off_t off) { return pread(fd, buf, n, off); }
void lp_os_sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
pid_t lp_os_fork(void) { return fork(); }
int lp_os_reap(void) { return (int)waitpid(-1, NULL, WNOHANG); }
void lp_os_exit(int status) { _exit(status); }

void lp_os_wait(int *word, int val) { syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0); }
void lp_os_wake(int *word, int n) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0); }
