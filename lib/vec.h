/* vec.h: the one growable array of lib/ and tools/ — capacity doubled as elements arrive, so
 * appending is amortised O(1); every array of the decoder, converter and report grows through
 * here rather than through its own copy of the doubling loop. */
#ifndef LP_VEC_H
#define LP_VEC_H

#include <stddef.h>
#include <stdlib.h>

/* Make room for `need` elements of `elem` bytes at *arr (capacity *cap, in elements): the
 * capacity is doubled (at least 16) until it holds `need`. `zero`: new elements are zeroed.
 * Returns 0, or -1 when out of memory (*arr and *cap unchanged). */
int lp_vec_reserve(void *arr, size_t *cap, size_t need, size_t elem, int zero);

/* Room for `need` elements at `arr` (an lvalue pointer), capacity variable `cap` (size_t); the
 * common case, room already there, decided here without a call. (`need` and `cap` are read
 * twice: no side effects in them.) */
#define LP_RESERVE(arr, cap, need) \
    ((size_t)(need) <= (cap) ? 0 : lp_vec_reserve(&(arr), &(cap), (need), sizeof *(arr), 0))
/* The same with the new elements zeroed: arrays indexed by an id that may skip values. */
#define LP_RESERVE_ZERO(arr, cap, need) \
    ((size_t)(need) <= (cap) ? 0 : lp_vec_reserve(&(arr), &(cap), (need), sizeof *(arr), 1))

/* qsort for the arrays above: an empty one may be NULL, which qsort must not be given. */
static inline void lp_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    if (n > 1) qsort(base, n, size, cmp);
}

#endif
