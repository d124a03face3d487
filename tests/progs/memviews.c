/* memviews: known temporaries, a known heap at its peak, blocks made after the peak (issue 17).
 *   keep():       50 blocks of 64 bytes and their 400-byte array, live until the end
 *   temp_a():     300 x (malloc 100, free): each released right after its allocation
 *   temp_b():     120 x (malloc 4000, free)
 *   big():        one 1 MiB block, freed after the peak: the heap's peak is keep's 3600 bytes + it
 *   after_peak(): 10 x 200 bytes, made after the peak, freed at the end
 * Every call is the program's own function, so call stacks name them. Prints "done". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void **keep(int n) {
    void **v = malloc((size_t)n * sizeof(void *));
    for (int i = 0; i < n; i++) v[i] = malloc(64);
    return v;
}
__attribute__((noinline)) static void temp_a(int n) {
    for (int i = 0; i < n; i++) {
        char *volatile p = malloc(100);
        memset(p, 1, 100);
        free(p);
    }
}
__attribute__((noinline)) static void temp_b(int n) {
    for (int i = 0; i < n; i++) {
        char *volatile p = malloc(4000);
        p[0] = 1;
        free(p);
    }
}
__attribute__((noinline)) static char *big(void) {
    char *volatile p = malloc(1 << 20);
    memset(p, 2, 1 << 20);
    return p;
}
__attribute__((noinline)) static void after_peak(void **out, int n) {
    for (int i = 0; i < n; i++) out[i] = malloc(200);
}

int main(void) {
    void **k = keep(50);
    temp_a(300);
    temp_b(120);
    char *b = big();
    free(b);
    void *later[10];
    after_peak(later, 10);
    for (int i = 0; i < 10; i++) free(later[i]);
    for (int i = 0; i < 50; i++) free(k[i]);
    free(k);
    puts("done");
    return 0;
}
