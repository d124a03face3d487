/* ownalloc: a program with its own allocator compiled in, as chromium (PartitionAlloc) and
 * programs linking jemalloc/tcmalloc/mimalloc statically have. Its malloc family is exported by
 * the executable, so it serves every library too (libprof's hooks are never called for them);
 * the allocator sets itself up on first use by mapping an arena with mmap while it holds a
 * non-recursive lock. Anything that calls malloc back while that set-up runs — a profiler doing
 * its own set-up inside the mmap hook, say — re-enters it: the program then says so and aborts
 * (a real allocator would deadlock or corrupt itself).
 *
 * The allocator's first use comes from the constructor of a library the program links
 * (ownalloc_dep.c), which the loader runs before a preloaded profiler's constructor — as
 * chromium's libraries do: its mmap is then the first call such a profiler sees, with the C
 * library already up.
 *
 * usage: ownalloc N  — makes N blocks at two call sites, frees half, prints a checksum. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARENA (64u << 20)

extern void *ownalloc_dep_block; /* ownalloc_dep.c */

static char *arena;
static size_t used;
static int lock_held, ready;

static void die(const char *msg) {
    ssize_t w = write(2, msg, strlen(msg));
    (void)w;
    abort();
}

static void take(void) {
    if (__atomic_exchange_n(&lock_held, 1, __ATOMIC_ACQUIRE))
        die("ownalloc: allocator re-entered during its own set-up\n");
}
static void give(void) { __atomic_store_n(&lock_held, 0, __ATOMIC_RELEASE); }

static void *bump(size_t n, size_t align) {
    take();
    if (!ready) { /* first use: the set-up runs under the lock, as real allocators' does */
        void *m = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) die("ownalloc: no arena\n");
        arena = m;
        ready = 1;
    }
    if (align < 16) align = 16;
    size_t start = (used + 16 + align - 1) & ~(align - 1);
    if (start + n > ARENA) {
        give();
        errno = ENOMEM;
        return NULL;
    }
    used = start + n;
    ((size_t *)(arena + start))[-1] = n; /* the size, just before the block */
    give();
    return arena + start;
}

static size_t size_of(const void *p) { return ((const size_t *)p)[-1]; }

void *malloc(size_t n) { return bump(n, 16); }
void free(void *p) { (void)p; } /* a bump allocator: memory comes back at exit */
void *calloc(size_t a, size_t b) {
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return bump(n, 16); /* fresh arena memory is zero */
}
void *realloc(void *p, size_t n) {
    void *q = bump(n, 16);
    if (q && p) memcpy(q, p, size_of(p) < n ? size_of(p) : n);
    return q;
}
void *memalign(size_t align, size_t n) { return bump(n, align); }
void *aligned_alloc(size_t align, size_t n) { return bump(n, align); }
int posix_memalign(void **out, size_t align, size_t n) {
    void *p = bump(n, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void *valloc(size_t n) { return bump(n, 4096); }
void *pvalloc(size_t n) { return bump((n + 4095) & ~(size_t)4095, 4096); }
size_t malloc_usable_size(void *p) { return p ? size_of(p) : 0; }

__attribute__((noinline)) static void *site_a(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site_b(size_t n) { return calloc(1, n); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    void **v = malloc((size_t)n * sizeof *v);
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        v[i] = i % 2 ? site_a((size_t)(i % 97) + 1) : site_b((size_t)(i % 89) + 1);
        memset(v[i], i & 0xff, 1);
        sum += (uint64_t)((unsigned char *)v[i])[0];
    }
    for (int i = 0; i < n; i += 2) free(v[i]);
    printf("ownalloc %d blocks, checksum %llu%s\n", n, (unsigned long long)sum,
           ownalloc_dep_block ? "" : " (no early block)");
    return 0;
}
