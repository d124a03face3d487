/* sampled: allocation sites with exactly known totals and many calls, for LIBPROF_ALLOC_SAMPLE
 * (the estimates of a sampled run against the exact totals of a run with every stack).
 *   site_small: 1,000,000 blocks of 48 B, freed at once (a storm of small allocations)
 *   site_mid:   100,000 blocks of 1000 B, freed at once
 *   site_leak:  10,000 blocks of 4096 B, leaked
 *   site_big:   64 blocks of 1 MiB, freed at once (each larger than any sampling gap tested)
 * Output: "ok". Its sites are noinline, so each keeps its frame and name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *leaked[10000];

NOINLINE void *site_small(void) { return malloc(48); }
NOINLINE void *site_mid(void) { return malloc(1000); }
NOINLINE void *site_leak(void) { return malloc(4096); }
NOINLINE void *site_big(void) { return malloc(1 << 20); }

int main(void) {
    for (int i = 0; i < 1000000; i++) {
        char *p = site_small();
        p[0] = (char)i;
        free(p);
    }
    for (int i = 0; i < 100000; i++) {
        char *p = site_mid();
        p[0] = (char)i;
        free(p);
    }
    for (int i = 0; i < 10000; i++) {
        leaked[i] = site_leak();
        memset(leaked[i], 1, 16);
    }
    for (int i = 0; i < 64; i++) {
        char *p = site_big();
        p[0] = (char)i;
        free(p);
    }
    puts("ok");
    return 0;
}
