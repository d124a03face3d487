/* vec.c: see vec.h; and lp_os_strndup (os.h), the one allocation helper lib/ defines over lp_os_malloc. */
#include "vec.h"

#include <stdint.h>
#include <string.h>

#include "os.h"

int lp_vec_reserve(void *arr, size_t *cap, size_t need, size_t elem, int zero) {
    void **p = arr;
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem) return -1;
        ncap *= 2;
    }
    void *n = lp_os_realloc(*p, ncap * elem);
    if (!n) return -1;
    if (zero) memset((char *)n + *cap * elem, 0, (ncap - *cap) * elem);
    *p = n;
    *cap = ncap;
    return 0;
}

/* (os.h) A copy on lib's allocator — the C library's in the tools, the real one inside the
 * program: one definition over lp_os_malloc for both. */
char *lp_os_strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = lp_os_malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}
