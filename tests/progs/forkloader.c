/* forkloader: forks while another thread is inside the dynamic loader. A thread walks the loaded
 * objects with dl_iterate_phdr, its callback sleeping 1 ms per object (the loader's lock held all
 * the while), as a C++ unwinder or libunwind on another thread may; the main thread forks N times
 * (argv[1], default 20), each child allocates (under LIBPROF_STACKS its stack is captured, which
 * asks the loader) and exits 0. A child that inherits the loader's lock held by a thread it does not
 * have waits for ever: each child is given 20 s, then killed. Prints "forks N hung H". */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static int slow(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)info;
    (void)size;
    (void)arg;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    return 0;
}

static void *walker(void *arg) {
    (void)arg;
    while (!stop) dl_iterate_phdr(slow, NULL);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20, hung = 0;
    pthread_t t;
    pthread_create(&t, NULL, walker, NULL);
    struct timespec warm = {0, 20000000};
    nanosleep(&warm, NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int k = 0; k < 100; k++) free(malloc(64 + (size_t)k));
            _exit(0);
        }
        int st = 0, waited = 0;
        while (waitpid(pid, &st, WNOHANG) == 0 && waited < 20000) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            waited += 10;
        }
        if (waited >= 20000) {
            hung++;
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("forks %d hung %d\n", n, hung);
    return 0;
}
