/* calls: exercises every runtime family libprof intercepts, with known arguments, so a test can
 * check each record. Output is deterministic (no addresses, no timings).
 *
 * usage: calls DIR PLUGIN.so
 *   threads: 4 workers created and joined (pthread_create/join, thread lives), one of which
 *            ends with pthread_exit
 *   sync:    one deliberately contended mutex (held until a worker is seen blocked on it), 1000
 *            uncontended locks, 100 double locks of a recursive mutex by its owner, a condition wait, a semaphore wait (each made certain to block),
 *            a barrier of 2, a contended rwlock
 *   dl:      dlopen/dlclose of PLUGIN.so; a dlopen with RTLD_DEEPBIND
 *   io:      DIR/data.bin: open/write 3x 1000 B/fsync/lseek/read 3000 B/pread 100 B/close;
 *            fopen/fwrite 5000 B/fclose, fopen/fread 5000 B/fclose; open of a missing file (ENOENT)
 *            and read of a bad descriptor (EBADF), errno checked
 *   mmap:    1 MiB anonymous, touched, unmapped
 *   process: fork + waitpid (child exits 3), system("exit 4")
 *   wait:    nanosleep 1 ms, usleep 1000, poll 1 ms, select 1 ms
 *   more:    DIR/more.bin through openat, writev (10+20 B), lseek, readv (30 B), fdatasync, close;
 *            creat of DIR/more2.bin; a 64 KiB anonymous mapping grown to 128 KiB by mremap;
 *            epoll_wait, ppoll, pselect, clock_nanosleep of 1 ms each; a 1 ms
 *            pthread_cond_timedwait that times out; posix_spawn of /bin/true and waitid */
extern char **environ;
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER, quiet = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t bar;
static sem_t sem, held;
static int ready;
static volatile pid_t waiter_tid, main_tid, reader_tid;

/* Until thread `tid` sleeps in the kernel (blocked in a lock, a wait): the waits the test expects
 * then happen for sure, whatever the machine's load. Raw system calls only, so this polling adds
 * no records of its own. */
static void until_sleeping(pid_t tid) {
    char path[64], st[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    for (;;) {
        int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
        long n = fd >= 0 ? syscall(SYS_read, fd, st, sizeof st - 1) : -1;
        if (fd >= 0) syscall(SYS_close, fd);
        if (n > 0) {
            st[n] = '\0';
            char *p = strrchr(st, ')');
            if (p && p[1] == ' ' && p[2] == 'S') return;
        }
        struct timespec ts = {0, 2000000};
        syscall(SYS_nanosleep, &ts, NULL);
    }
}

static void *waiter(void *arg) {
    (void)arg;
    waiter_tid = (pid_t)syscall(SYS_gettid);
    sem_post(&held);                /* main holds `contended` now */
    pthread_mutex_lock(&contended); /* blocks until main releases it */
    pthread_mutex_unlock(&contended);
    return NULL;
}

static void *signaller(void *arg) {
    (void)arg;
    until_sleeping(main_tid); /* in pthread_cond_wait */
    pthread_mutex_lock(&cm);
    ready = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&cm);
    until_sleeping(main_tid); /* in sem_wait */
    sem_post(&sem);
    pthread_barrier_wait(&bar);
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    reader_tid = (pid_t)syscall(SYS_gettid);
    pthread_rwlock_rdlock(&rw); /* main holds it for writing */
    pthread_rwlock_unlock(&rw);
    return NULL;
}

static void *exiter(void *arg) { pthread_exit(arg); }

static void check(int ok, const char *what) {
    if (!ok) {
        printf("FAILED %s (errno %d)\n", what, errno);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: calls DIR PLUGIN.so\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data.bin", argv[1]);
    main_tid = (pid_t)syscall(SYS_gettid);
    sem_init(&sem, 0, 0);
    sem_init(&held, 0, 0);
    pthread_barrier_init(&bar, NULL, 2);

    /* sync: contended mutex */
    pthread_t t1, t2, t3;
    pthread_mutex_lock(&contended);
    pthread_create(&t1, NULL, waiter, NULL);
    sem_wait(&held);
    until_sleeping(waiter_tid); /* blocked on `contended` */
    pthread_mutex_unlock(&contended);
    pthread_join(t1, NULL);
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&quiet);
        pthread_mutex_unlock(&quiet);
    }
    /* a recursive mutex taken twice by its owner: no wait either */
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_t rec;
    pthread_mutex_init(&rec, &ra);
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&rec);
        pthread_mutex_lock(&rec);
        pthread_mutex_unlock(&rec);
        pthread_mutex_unlock(&rec);
    }
    pthread_mutex_destroy(&rec);
    pthread_mutexattr_destroy(&ra);
    /* condition, semaphore, barrier */
    pthread_create(&t2, NULL, signaller, NULL);
    pthread_mutex_lock(&cm);
    while (!ready) pthread_cond_wait(&cv, &cm);
    pthread_mutex_unlock(&cm);
    sem_wait(&sem);
    pthread_barrier_wait(&bar);
    pthread_join(t2, NULL);
    /* rwlock */
    pthread_rwlock_wrlock(&rw);
    pthread_create(&t3, NULL, reader, NULL);
    while (!reader_tid) syscall(SYS_sched_yield);
    until_sleeping(reader_tid); /* blocked on the write-held rwlock */
    pthread_rwlock_unlock(&rw);
    pthread_join(t3, NULL);
    pthread_t t4;
    void *ret = NULL;
    pthread_create(&t4, NULL, exiter, (void *)&main_tid);
    pthread_join(t4, &ret);
    check(ret == (void *)&main_tid, "pthread_exit value");
    printf("threads ok\n");

    /* dl */
    void *h = dlopen(argv[2], RTLD_NOW);
    check(h != NULL, "dlopen");
    check(dlclose(h) == 0, "dlclose");
    h = dlopen(argv[2], RTLD_NOW | RTLD_DEEPBIND);
    check(h != NULL, "dlopen deepbind");
    dlclose(h);
    printf("dl ok\n");

    /* io: descriptors */
    char buf[3000];
    memset(buf, 'x', sizeof buf);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    check(fd >= 0, "open");
    for (int i = 0; i < 3; i++) check(write(fd, buf + i * 1000, 1000) == 1000, "write");
    check(fsync(fd) == 0, "fsync");
    check(lseek(fd, 0, SEEK_SET) == 0, "lseek");
    check(read(fd, buf, sizeof buf) == 3000, "read");
    check(pread(fd, buf, 100, 50) == 100, "pread");
    check(close(fd) == 0, "close");
    errno = 0;
    check(open("/nonexistent/libprof-test", O_RDONLY) == -1 && errno == ENOENT, "open ENOENT");
    errno = 0;
    check(read(987, buf, 1) == -1 && errno == EBADF, "read EBADF");
    /* io: streams */
    char big[5000];
    memset(big, 'y', sizeof big);
    FILE *f = fopen(path, "w");
    check(f != NULL, "fopen w");
    check(fwrite(big, 1, sizeof big, f) == sizeof big, "fwrite");
    check(fclose(f) == 0, "fclose w");
    f = fopen(path, "r");
    check(f != NULL, "fopen r");
    check(fread(big, 50, 100, f) == 100, "fread");
    check(fclose(f) == 0, "fclose r");
    printf("io ok\n");

    /* mmap */
    size_t len = 1 << 20;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check(m != MAP_FAILED, "mmap");
    memset(m, 1, len);
    check(munmap(m, len) == 0, "munmap");
    printf("mmap ok\n");

    /* process */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(3);
    int status = 0;
    check(waitpid(pid, &status, 0) == pid && WEXITSTATUS(status) == 3, "waitpid");
    int rc = system("exit 4");
    check(WEXITSTATUS(rc) == 4, "system");
    printf("process ok\n");

    /* wait */
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    usleep(1000);
    poll(NULL, 0, 1);
    struct timeval tv = {0, 1000};
    select(0, NULL, NULL, NULL, &tv);
    printf("wait ok\n");

    /* more of each family */
    char more[4096], more2[4096];
    snprintf(more, sizeof more, "%s/more.bin", argv[1]);
    snprintf(more2, sizeof more2, "%s/more2.bin", argv[1]);
    int fd2 = openat(AT_FDCWD, more, O_CREAT | O_TRUNC | O_RDWR, 0644);
    check(fd2 >= 0, "openat");
    char a10[10] = "0123456789", b20[20] = "abcdefghijklmnopqrst";
    struct iovec wv[2] = {{a10, 10}, {b20, 20}};
    check(writev(fd2, wv, 2) == 30, "writev");
    check(lseek(fd2, 0, SEEK_SET) == 0, "lseek more");
    char r10[10], r20[20];
    struct iovec rv[2] = {{r10, 10}, {r20, 20}};
    check(readv(fd2, rv, 2) == 30 && !memcmp(r20, b20, 20), "readv");
    check(fdatasync(fd2) == 0, "fdatasync");
    check(close(fd2) == 0, "close more");
    int fd3 = creat(more2, 0644);
    check(fd3 >= 0, "creat");
    close(fd3);
    char *mm = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check(mm != MAP_FAILED, "mmap 64K");
    mm = mremap(mm, 65536, 131072, MREMAP_MAYMOVE);
    check(mm != MAP_FAILED, "mremap");
    check(munmap(mm, 131072) == 0, "munmap 128K");
    int ep = epoll_create1(0);
    struct epoll_event ev;
    check(epoll_wait(ep, &ev, 1, 1) == 0, "epoll_wait");
    close(ep);
    struct timespec ms = {0, 1000000};
    check(ppoll(NULL, 0, &ms, NULL) == 0, "ppoll");
    check(pselect(0, NULL, NULL, NULL, &ms, NULL) == 0, "pselect");
    check(clock_nanosleep(CLOCK_MONOTONIC, 0, &ms, NULL) == 0, "clock_nanosleep");
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&cm);
    check(pthread_cond_timedwait(&cv, &cm, &until) == ETIMEDOUT, "cond timedwait");
    pthread_mutex_unlock(&cm);
    pid_t sp;
    char *targv[] = {"true", NULL};
    check(posix_spawn(&sp, "/bin/true", NULL, NULL, targv, environ) == 0, "posix_spawn");
    siginfo_t si;
    check(waitid(P_PID, (id_t)sp, &si, WEXITED) == 0 && si.si_status == 0, "waitid");
    printf("more ok\n");
    return 0;
}
