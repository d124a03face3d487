/* lines.c: native frames with their source lines (built -g -O2): an allocation made in a helper
 * inlined into a noinline leaf, some of it leaked, and a CPU loop to sample. The tests compare
 * what libprof names each frame with `addr2line -f -i` on the same addresses.
 * usage: lines [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline __attribute__((always_inline)) void *inl_alloc(size_t n) {
    return malloc(n); /* the allocation: inlined into leaf_alloc */
}

__attribute__((noinline)) void *leaf_alloc(size_t n) {
    char *p = inl_alloc(n);
    if (p) memset(p, 1, n);
    return p;
}

__attribute__((noinline)) double spin(long n) {
    volatile double x = 0;
    for (long i = 0; i < n; i++) x = x * 0.999 + (double)(i & 7);
    return x;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 200;
    void *keep[64];
    for (long r = 0; r < rounds; r++) {
        void *p = leaf_alloc(4096 + (size_t)(r & 7) * 64);
        if (r < 64)
            keep[r] = p; /* leaked: the leak view */
        else
            free(p);
    }
    double x = spin(rounds * 200000);
    printf("%ld %.1f %p\n", rounds, x, keep[0]);
    return 0;
}
