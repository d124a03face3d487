/* reliab: programs that services and daemons resemble, for the reliability tests
 * (tests/integration/test_reliab.c). Each mode allocates a known number of blocks and says
 * what it did on stdout, so a test can compare the trace with the truth.
 *
 *   fsize N        allocate N blocks and write no file (run under a file-size limit)
 *   daemon N DIR   double fork, setsid, chdir /, close every descriptor, stdio to /dev/null;
 *                  the grandchild allocates N blocks and writes "done" into DIR/daemon.done
 *   daemon-exec PROG N   the same, and the grandchild execs PROG fsize N from /
 *   fds N          hold every descriptor the limit allows, allocate N blocks (chunks must be
 *                  written meanwhile), close them, allocate N more
 *   stray N        one thread allocates N blocks while another writes "abc\n" to every
 *                  descriptor number from 3 to 63 and closes the ones it did not open, over
 *                  and over: a buggy thread of the kind that hits a profiler's descriptors
 *   status K       allocate a little and return K from main */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile void *sink;

static void churn(long n) {
    for (long i = 0; i < n; i++) {
        void *p = malloc(16 + (size_t)(i & 255));
        sink = p;
        free(p);
    }
}

static int daemonize(void) {
    pid_t p = fork();
    if (p < 0) return -1;
    if (p > 0) {
        waitpid(p, NULL, 0);
        return 1; /* the original process */
    }
    setsid();
    if (fork() != 0) _exit(0); /* the intermediate */
    if (chdir("/") != 0) _exit(1);
    for (int fd = 0; fd < 1024; fd++) close(fd);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    return 0;
}

static volatile int stop;
static long stray_hits;

static void *stray_thread(void *arg) {
    (void)arg;
    while (!stop) {
        for (int fd = 3; fd < 64; fd++) {
            if (write(fd, "abc\n", 4) == 4) stray_hits++;
            close(fd); /* descriptors it never opened */
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: reliab MODE ARGS\n");
        return 2;
    }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    if (!strcmp(mode, "fsize")) {
        churn(n);
        printf("mallocs %ld\n", n);
        return 0;
    }
    if (!strcmp(mode, "daemon") && argc > 3) {
        int who = daemonize();
        if (who != 0) return who < 0;
        churn(n);
        char path[4096];
        snprintf(path, sizeof path, "%s/daemon.done", argv[3]);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "done %d\n", getpid());
            fclose(f);
        }
        return 0;
    }
    if (!strcmp(mode, "daemon-exec") && argc > 3) {
        int who = daemonize();
        if (who != 0) return who < 0;
        execl(argv[2], argv[2], "fsize", argv[3], (char *)NULL);
        return 127;
    }
    if (!strcmp(mode, "fds")) {
        int held[65536], k = 0;
        while (k < 65536) {
            int fd = open("/dev/null", O_RDONLY);
            if (fd < 0) break;
            held[k++] = fd;
        }
        int full = errno == EMFILE;
        churn(n);
        for (int i = 0; i < k; i++) close(held[i]);
        churn(n);
        printf("held %d full %d mallocs %ld\n", k, full, 2 * n);
        return 0;
    }
    if (!strcmp(mode, "stray")) {
        for (int fd = 3; fd < 1024; fd++) close(fd); /* what we were started with: not the thread's to hit */
        pthread_t t;
        pthread_create(&t, NULL, stray_thread, NULL);
        churn(n);
        stop = 1;
        pthread_join(t, NULL);
        printf("mallocs %ld\n", n + 0 * stray_hits); /* the thread's own stack is its only block */
        return 0;
    }
    if (!strcmp(mode, "status")) {
        churn(10);
        return (int)n;
    }
    fprintf(stderr, "reliab: unknown mode %s\n", mode);
    return 2;
}
