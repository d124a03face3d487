/* chains: allocations whose call chains look alike to a stack cache — the same allocating call
 * (same return address, same stack pointer) reached through different callers, and frames of
 * varying size (alloca) — for the test that the per-thread cache of call chains never returns
 * a chain that is not the current one.
 *
 * usage: chains   (prints nothing; allocates 3000 blocks from via_a, 2000 from via_b, 1000 from
 *                  via_alloca with a frame of a different size each time) */
#include <alloca.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

__attribute__((noinline)) static void leaf(size_t n) {
    void *p = malloc(n);
    sink = p;
    free(p);
}

/* via_a and via_b have the same frame size and call leaf from the same depth: leaf's stack
 * pointer, and so the capture's key, is the same in both */
__attribute__((noinline)) static void via_a(size_t n) {
    leaf(n);
    __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void via_b(size_t n) {
    leaf(n);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void via_alloca(size_t k) {
    char *pad = alloca(16 * (k % 5 + 1));
    memset(pad, (int)k, 16);
    sink = pad;
    leaf(48);
}

int main(void) {
    for (int i = 0; i < 1000; i++) {
        via_a(32);
        via_b(40);
        via_a(32);
        via_b(40);
        via_a(32);
        via_alloca((size_t)i);
    }
    return 0;
}
