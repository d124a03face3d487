/* sites: allocation call sites with exactly known totals, for LIBPROF_STACKS.
 *   site_a:    1000 blocks of 1000 B, all freed
 *   site_b:    10 blocks of 5000 B, leaked
 *   site_c:    a static function reached through two callers: 300 x 64 B via c1 (freed),
 *              200 x 64 B via c2 (leaked)
 *   site_peak: 16 blocks of 64 KiB held together, then freed: the heap's peak is reached there
 *   site_cpp_like: calloc and realloc from a third function (bytes: 10 x 100, then grown to 300)
 * Output: "ok". Built with -O1 -g -fno-inline so every function keeps its frame and name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *keep[4096];
static int nkeep;

NOINLINE void *site_a(void) { return malloc(1000); }
NOINLINE void *site_b(void) { return malloc(5000); }
NOINLINE static void *site_c(size_t n) { return malloc(n); }
NOINLINE void *c1(void) { return site_c(64); }
NOINLINE void *c2(void) { return site_c(64); }
NOINLINE void *site_peak(void) { return malloc(65536); }
NOINLINE void *site_grow(void) {
    char *p = calloc(10, 10);
    return realloc(p, 300);
}

int main(void) {
    for (int i = 0; i < 1000; i++) free(site_a());
    for (int i = 0; i < 10; i++) keep[nkeep++] = site_b();
    for (int i = 0; i < 300; i++) free(c1());
    for (int i = 0; i < 200; i++) keep[nkeep++] = c2();
    void *hold[16];
    for (int i = 0; i < 16; i++) {
        hold[i] = site_peak();
        memset(hold[i], 1, 65536);
    }
    for (int i = 0; i < 16; i++) free(hold[i]);
    for (int i = 0; i < 10; i++) free(site_grow());
    puts("ok");
    return keep[0] == NULL; /* the leaked blocks stay reachable until exit */
}
