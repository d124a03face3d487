/* stress: load cases for the recording core. Output is deterministic; counts are in comments.
 *
 * usage: stress MODE
 *   threads64  64 threads at once, each 20000 malloc/free pairs of 1..256 bytes  -> "ok"
 *   short1000  1000 short-lived threads (10 at a time), each 100 mallocs of 777 bytes, freed
 *   forkmt     4 threads allocate in a loop while main forks 20 children; each child mallocs
 *              10 blocks of 4242 bytes and exits; main waits for all       -> "children 20"
 *   signal     a 1 ms interval timer whose handler mallocs and frees 333 bytes, while main makes
 *              200000 malloc/free pairs of 64 bytes                        -> "ok"
 *   forever    malloc/free pairs until killed (prints "running" first)
 *   exitthread a thread makes 1000 pairs, then calls exit(4) while main is blocked   -> status 4
 *   mainexit   main starts a thread making 1000 pairs and calls pthread_exit(); the process ends
 *              when the thread does (status 0) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;
static void *volatile sink;

static void *pairs(void *arg) {
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        void *p = malloc((size_t)(i % 256) + 1);
        sink = p;
        free(p);
    }
    return NULL;
}

static void *short_lived(void *arg) {
    (void)arg;
    void *p[100];
    for (int i = 0; i < 100; i++) p[i] = malloc(777);
    for (int i = 0; i < 100; i++) free(p[i]);
    return NULL;
}

static void *spin(void *arg) {
    (void)arg;
    while (!stop) {
        void *p = malloc(96);
        sink = p;
        free(p);
    }
    return NULL;
}

static void *exiter(void *arg) {
    pairs(arg);
    exit(4);
}

static void on_alarm(int sig) {
    (void)sig;
    void *p = malloc(333); /* not async-signal-safe in theory; real programs do it anyway */
    sink = p;
    free(p);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "threads64";
    if (!strcmp(mode, "threads64")) {
        pthread_t t[64];
        for (int i = 0; i < 64; i++) pthread_create(&t[i], NULL, pairs, (void *)20000L);
        for (int i = 0; i < 64; i++) pthread_join(t[i], NULL);
    } else if (!strcmp(mode, "short1000")) {
        for (int b = 0; b < 100; b++) {
            pthread_t t[10];
            for (int i = 0; i < 10; i++) pthread_create(&t[i], NULL, short_lived, NULL);
            for (int i = 0; i < 10; i++) pthread_join(t[i], NULL);
        }
    } else if (!strcmp(mode, "forkmt")) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, spin, NULL);
        int done = 0;
        for (int c = 0; c < 20; c++) {
            pid_t pid = fork();
            if (pid == 0) {
                void *p[10];
                for (int i = 0; i < 10; i++) p[i] = malloc(4242);
                for (int i = 0; i < 10; i++) free(p[i]);
                exit(0);
            }
            int st;
            if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0) done++;
        }
        stop = 1;
        for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
        printf("children %d\n", done);
        return 0;
    } else if (!strcmp(mode, "exitthread")) {
        pthread_t t;
        pthread_create(&t, NULL, exiter, (void *)1000L);
        pthread_join(t, NULL); /* never returns: the thread exits the process */
    } else if (!strcmp(mode, "mainexit")) {
        pthread_t t;
        pthread_create(&t, NULL, pairs, (void *)1000L);
        pthread_exit(NULL);
    } else if (!strcmp(mode, "forever")) {
        printf("running\n");
        fflush(stdout);
        for (;;) pairs((void *)1000000L);
    } else if (!strcmp(mode, "signal")) {
        signal(SIGALRM, on_alarm);
        struct itimerval it = {{0, 1000}, {0, 1000}};
        setitimer(ITIMER_REAL, &it, NULL);
        pairs((void *)200000L);
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
    }
    printf("ok\n");
    return 0;
}
