/* Unit tests of lib/map.c: random puts and takes checked against a plain array, with keys
 * chosen to collide (the backward-shift deletion is where such maps go wrong); and of the table
 * of interned texts built on it (lib/pb.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/map.h"
#include "lib/pb.h"

#define KEYS 5000

Test(map, random_operations_match_a_reference) {
    static uint64_t ref[KEYS]; /* value+1, 0 = absent */
    struct lp_map m = {0};
    uint64_t x = 88172645463325252ull;
    for (int step = 0; step < 400000; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t k = x % KEYS, key = (k + 1) << 12; /* aligned like pointers: many collisions */
        uint64_t v;
        if (x & (1ull << 40)) {
            int rc = lp_map_put(&m, key, step, &v);
            cr_assert_eq(rc, ref[k] ? 1 : 0);
            if (rc == 1) cr_assert_eq(v, ref[k] - 1);
            ref[k] = (uint64_t)step + 1;
        } else {
            int rc = lp_map_take(&m, key, &v);
            cr_assert_eq(rc, ref[k] ? 1 : 0, "step %d key %llu", step, (unsigned long long)k);
            if (rc) cr_assert_eq(v, ref[k] - 1);
            ref[k] = 0;
        }
    }
    uint64_t n = 0;
    for (int k = 0; k < KEYS; k++) {
        uint64_t v;
        int rc = lp_map_get(&m, ((uint64_t)k + 1) << 12, &v);
        cr_assert_eq(rc, ref[k] ? 1 : 0);
        if (rc) cr_assert_eq(v, ref[k] - 1);
        n += ref[k] != 0;
    }
    cr_expect_eq(m.n, n);
    lp_map_free(&m);
}

/* The table of interned texts (lib/pb.c) looks up the texts last asked for by where they were:
 * a buffer asked for again with another text in it gets that text's index, not the old one's. */
Test(map, interned_texts_from_a_reused_buffer) {
    struct lp_strtab t = {0};
    char buf[32];
    strcpy(buf, "open");
    uint64_t open = lp_strtab_id(&t, buf, 4);
    strcpy(buf, "read");
    uint64_t rd = lp_strtab_id(&t, buf, 4);
    cr_assert_neq(rd, open, "the same place, another text: another index");
    cr_assert_eq(lp_strtab_id(&t, "open", 4), open);
    strcpy(buf, "open");
    cr_assert_eq(lp_strtab_id(&t, buf, 4), open);
    cr_assert_eq(lp_strtab_id(&t, buf, 2), lp_strtab_id(&t, "op", 2), "a shorter text at the same place");
    cr_assert_neq(lp_strtab_id(&t, buf, 2), open);
    cr_assert_eq(t.n, 3);
    for (uint64_t i = 0; i < t.n; i++) cr_assert_eq(lp_strtab_id(&t, t.str[i], t.len[i]), i);
    lp_strtab_free(&t);
}
