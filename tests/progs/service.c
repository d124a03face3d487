/* service: a long-running program in miniature, for the live view and long runs. It takes 64
 * blocks of 1 MiB and holds them, then for SECONDS (argv[1], default 3) two threads allocate and
 * free small blocks (a service's churn: about a million events a second) while the main thread
 * sleeps — or, with argv[2] "serve", serves small requests over a socket pair (a send and a recv
 * every millisecond); then it frees everything and prints "held 64 MiB, churned" (and with
 * "serve", how many mallocs, frees and requests it made itself) and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/socket.h>
#include <unistd.h>

static volatile int stop;
static unsigned long made[2];

static void *churn(void *arg) {
    unsigned long *count = arg;
    void *ring[64] = {0};
    unsigned i = 0;
    while (!stop) {
        free(ring[i % 64]);
        ring[i % 64] = malloc(16 + (i * 37) % 512);
        ++*count;
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
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churn, &made[i]);
    unsigned long requests = 0;
    int serve = argc > 2 && !strcmp(argv[2], "serve"), sv[2];
    if (serve && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
        struct timespec now, end;
        clock_gettime(CLOCK_MONOTONIC, &end);
        end.tv_sec += (time_t)seconds;
        end.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
        if (end.tv_nsec >= 1000000000) end.tv_sec++, end.tv_nsec -= 1000000000;
        char req[64] = "GET /", got[64];
        do {
            if (send(sv[0], req, sizeof req, 0) != sizeof req ||
                recv(sv[1], got, sizeof got, MSG_WAITALL) != sizeof got)
                break;
            requests++;
            struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
            clock_gettime(CLOCK_MONOTONIC, &now);
        } while (now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
        close(sv[0]);
        close(sv[1]);
    } else {
        struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        nanosleep(&ts, NULL);
    }
    stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 64; i++) free(held[i]);
    printf("held 64 MiB, churned\n");
    if (serve) printf("mallocs %lu frees %lu requests %lu\n", made[0] + made[1] + 64, made[0] + made[1] + 64, requests);
    fflush(stdout); /* (its last line leaves now: what follows it is the exit) */
    return 0;
}
