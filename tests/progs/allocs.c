/* allocs: a program whose allocation calls are known exactly, for checking libprof's counts,
 * peak and leaks. It prints with write(2) only (stdio would allocate its own buffer).
 *
 * Calls made (the tests assert these numbers):
 *   malloc 105 (1 fails), calloc 6, realloc 5, reallocarray 1, free 118 (3 of NULL),
 *   posix_memalign 2, aligned_alloc 1, memalign 1, valloc 1, pvalloc 1
 *   peak live requested bytes = 1048576 + 666, leaked = 666 bytes in 3 blocks
 * Exit status 7, so the tests can check that it passes through. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void say(const char *s) {
    ssize_t w = write(1, s, strlen(s));
    (void)w;
}

/* Keep the compiler from pairing or eliding our calls. */
static void *volatile sink;

int main(void) {
    /* leaks first: they stay live through the peak */
    sink = malloc(111);
    sink = calloc(1, 222);
    sink = realloc(NULL, 333);

    void *p[100];
    for (int i = 0; i < 100; i++) p[i] = malloc(100);
    for (int i = 0; i < 100; i++) free(p[i]);

    for (int i = 0; i < 5; i++) {
        void *c = calloc(10, 1000);
        free(c);
    }

    void *r = realloc(NULL, 10);
    r = realloc(r, 1000);
    r = realloc(r, 100000);
    free(r);

    void *ra = reallocarray(NULL, 10, 10);
    free(ra);

    void *q = malloc(50);
    q = realloc(q, 0); /* glibc frees q and returns NULL */
    sink = q;

    free(NULL);
    free(NULL);
    free(NULL);

    for (int i = 0; i < 2; i++) {
        void *a;
        if (posix_memalign(&a, 64, 4096) == 0) free(a);
    }
    void *a1 = aligned_alloc(64, 128);
    free(a1);
    void *a2 = memalign(4096, 100);
    free(a2);
    void *a3 = valloc(200);
    free(a3);
    void *a4 = pvalloc(300);
    free(a4);

    void *big = malloc(1 << 20);
    memset(big, 1, 1 << 20);
    free(big);

    /* A failing malloc must leave ENOMEM in errno, with or without libprof. */
    errno = 0;
    void *huge = malloc(SIZE_MAX / 2);
    say(huge == NULL && errno == ENOMEM ? "enomem ok\n" : "enomem WRONG\n");
    /* free() must not disturb errno (glibc guarantees it since 2.33). */
    errno = 1234;
    void *z = malloc(8);
    free(z);
    say(errno == 1234 ? "errno ok\n" : "errno WRONG\n");
    say("done\n");
    return 7;
}
