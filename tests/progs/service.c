/* service: a long-running program in miniature, for the live view. It takes 64 blocks of 1 MiB
 * and holds them, then for SECONDS (argv[1], default 3) two threads allocate and free small
 * blocks (a service's churn: about a million events a second) while the main thread sleeps; then it frees
 * everything and prints "held 64 MiB, churned" and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile int stop;

static void *churn(void *arg) {
    (void)arg;
    void *ring[64] = {0};
    unsigned i = 0;
    while (!stop) {
        free(ring[i % 64]);
        ring[i % 64] = malloc(16 + (i * 37) % 512);
        if (++i % 500 == 0) { /* about a million events a second in all, as a busy service */
            struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
        }
    }
    for (int k = 0; k < 64; k++) free(ring[k]);
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    static char *held[64];
    for (int i = 0; i < 64; i++) {
        held[i] = malloc(1 << 20);
        memset(held[i], i, 1 << 20);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churn, NULL);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 64; i++) free(held[i]);
    printf("held 64 MiB, churned\n");
    fflush(stdout); /* (its last line leaves now: what follows it is the exit) */
    return 0;
}
