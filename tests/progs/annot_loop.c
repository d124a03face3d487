/* annot_loop: N libprof_range_push/pop pairs in a tight loop; prints ns per pair.
 * usage: annot_loop [N]   (default 10 M). Used by scripts/bench for the cost of annotations,
 * without libprof (the header's no-op path) and with it. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "libprof.h"

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    struct timespec a, b;
    libprof_range_push("warm-up"); /* resolves the API once */
    libprof_range_pop();
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        libprof_range_push("step");
        libprof_range_pop();
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    printf("%.2f\n", ns);
    return 0;
}
