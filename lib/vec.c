/* vec.c: see vec.h. */
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
