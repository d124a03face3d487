/* annotated: a C program using include/libprof.h. Runs identically with and without libprof.
 * Per run: main records 5 "inference" ranges, each holding one `layer "1"` and one "layer 2"
 * range, 5 "half" marks and 5 "iteration" counter values; a worker thread named "annot-worker"
 * records 3 "background" ranges. Prints "done 5". */
#include <pthread.h>
#include <stdio.h>

#include "libprof.h"

static volatile unsigned long sink;

static void busy(int n) {
    for (int i = 0; i < n * 1000; i++) sink += (unsigned long)i;
}

static void *worker(void *arg) {
    (void)arg;
    libprof_thread_name("annot-worker");
    for (int i = 0; i < 3; i++) {
        LIBPROF_SCOPE("background");
        busy(20);
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    int it;
    for (it = 0; it < 5; it++) {
        libprof_range_push("inference");
        {
            LIBPROF_SCOPE("layer \"1\"");
            busy(50);
        }
        {
            LIBPROF_SCOPE("layer 2");
            busy(30);
            libprof_mark("half");
        }
        libprof_counter("iteration", it);
        libprof_range_pop();
    }
    pthread_join(t, NULL);
    printf("done %d\n", it);
    return 0;
}
