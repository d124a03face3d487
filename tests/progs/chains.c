/* chains: allocations whose call chains look alike to a stack cache — the same allocating call
 * (same return address, same stack pointer) reached through different callers, and frames of
 * varying size (alloca) — for the test that the per-thread cache of call chains never returns
 * a chain that is not the current one.
 *
 * usage: chains       (prints nothing; allocates 3000 blocks from via_a, 2000 from via_b, 1000 from
 *                      via_alloca with a frame of a different size each time)
 *        chains jit   (3000 blocks of 32 bytes from jit_a and 2000 of 40 from jit_b, each called
 *                      by code without unwind tables — as a JIT's output — at a fixed address:
 *                      every walk ends at it) */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

__attribute__((noinline)) static void jit_a(size_t n) { leaf(n); }
__attribute__((noinline)) static void jit_b(size_t n) { leaf(n); }

/* "JIT" code: n in rdi, the function to call in rsi; no unwind tables anywhere */
static int jit(void) {
    static const unsigned char code[] = {
        0x48, 0x83, 0xec, 0x08, /* sub $8, %rsp (the call's stack 16-byte aligned) */
        0xff, 0xd6,             /* call *%rsi */
        0x48, 0x83, 0xc4, 0x08, /* add $8, %rsp */
        0xc3,                   /* ret */
    };
    void *at = mmap((void *)0x3f0000000, 4096, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (at != (void *)0x3f0000000) {
        fprintf(stderr, "chains: no page at 0x3f0000000\n");
        return 1;
    }
    memcpy(at, code, sizeof code);
    if (mprotect(at, 4096, PROT_READ | PROT_EXEC) != 0) return 1;
    void (*call)(size_t, void (*)(size_t)) = (void (*)(size_t, void (*)(size_t)))at;
    for (int i = 0; i < 1000; i++) {
        call(32, jit_a);
        call(40, jit_b);
        call(32, jit_a);
        call(40, jit_b);
        call(32, jit_a);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "jit")) return jit();
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
