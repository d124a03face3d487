/* call_loop: N calls of one intercepted entry point in a tight loop; prints ns per call.
 * usage: call_loop read|pread|mutex|fwrite [N]   (default 1 M)
 *   read   read(2) of 1 byte from /dev/zero     pread  pread(2) of 1 byte at offset 0
 *   mutex  an uncontended pthread_mutex_lock + unlock
 *   fwrite fwrite of 16 bytes to /dev/null (buffered: mostly no system call)
 * Used by scripts/bench: the cost libprof adds per timed call = preloaded - bare. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: call_loop read|pread|mutex|fwrite [N]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    int fd = open("/dev/zero", O_RDONLY);
    FILE *null = fopen("/dev/null", "w");
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    char c[16] = {0};
    if (fd < 0 || !null) return 1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (!strcmp(argv[1], "read")) {
        for (long i = 0; i < n; i++)
            if (read(fd, c, 1) != 1) return 1;
    } else if (!strcmp(argv[1], "pread")) {
        for (long i = 0; i < n; i++)
            if (pread(fd, c, 1, 0) != 1) return 1;
    } else if (!strcmp(argv[1], "mutex")) {
        for (long i = 0; i < n; i++) {
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
        }
    } else if (!strcmp(argv[1], "fwrite")) {
        for (long i = 0; i < n; i++) fwrite(c, 1, sizeof c, null);
    } else {
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f\n", ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n);
    return 0;
}
