/* threads: N named worker threads each make M malloc/free pairs and exit before main does.
 * Each worker also owns a pthread key whose destructor re-arms itself for every destructor
 * round and allocates in each: the last round runs after libprof's own thread-exit flush, so
 * those events take libprof's write-through path for late events.
 *
 * usage: threads N M     -> malloc N*(M+4), free N*(M+4) from workers; prints "ok N" */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int m_ops;
static pthread_key_t key;
static __thread int rounds;

static void key_dtor(void *arg) {
    void *p = malloc(77);
    free(p);
    if (++rounds < PTHREAD_DESTRUCTOR_ITERATIONS) pthread_setspecific(key, arg);
}

static void *worker(void *arg) {
    char name[16];
    snprintf(name, sizeof name, "worker-%d", (int)(long)arg);
    pthread_setname_np(pthread_self(), name);
    for (int j = 0; j < m_ops; j++) {
        void *p = malloc((size_t)(j % 100) + 1);
        free(p);
    }
    pthread_setspecific(key, (void *)1);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    m_ops = argc > 2 ? atoi(argv[2]) : 1000;
    pthread_key_create(&key, key_dtor);
    pthread_t t[256];
    if (n > 256) n = 256;
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, (void *)(long)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("ok %d\n", n);
    return 0;
}
