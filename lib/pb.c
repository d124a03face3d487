/* pb.c: see pb.h. */
#include "pb.h"

#include <string.h>

#include "os.h"
#include "vec.h"

int lp_pb_room(struct lp_pb *b, size_t n) {
    if (b->oom || LP_RESERVE(b->d, b->cap, b->n + n) != 0) {
        b->oom = 1;
        return 0;
    }
    return 1;
}

void lp_pb_put(struct lp_pb *b, const void *p, size_t n) {
    if (b->cap - b->n < n && !lp_pb_room(b, n)) return;
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

void lp_pb_fixed64(struct lp_pb *b, unsigned field, uint64_t v) {
    uint8_t t[8];
    for (int i = 0; i < 8; i++) t[i] = (uint8_t)(v >> (8 * i));
    lp_pb_varint(b, (uint64_t)field << 3 | 1);
    lp_pb_put(b, t, 8);
}

void lp_pb_double(struct lp_pb *b, unsigned field, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    lp_pb_fixed64(b, field, u);
}

void lp_pb_bytes(struct lp_pb *b, unsigned field, const void *p, size_t n) {
    lp_pb_varint(b, (uint64_t)field << 3 | 2);
    lp_pb_varint(b, n);
    lp_pb_put(b, p, n);
}

void lp_pb_msg(struct lp_pb *b, unsigned field, struct lp_pb *m) {
    lp_pb_bytes(b, field, m->d, m->n);
    if (m->oom) b->oom = 1;
    m->n = 0;
}

void lp_pb_close4(struct lp_pb *b, size_t at) {
    size_t len = b->n - at;
    if (b->oom) return;
    if (len >= (size_t)1 << 28) {
        b->oom = 1;
        return;
    }
    uint8_t *p = b->d + at - 4;
    p[0] = (uint8_t)(len | 0x80);
    p[1] = (uint8_t)(len >> 7 | 0x80);
    p[2] = (uint8_t)(len >> 14 | 0x80);
    p[3] = (uint8_t)(len >> 21);
}

void lp_pb_close_long(struct lp_pb *b, size_t at) {
    if (b->oom) return;
    size_t len = b->n - at, extra = 0;
    for (size_t v = len >> 7; v; v >>= 7) extra++;
    if (extra) {
        if (LP_RESERVE(b->d, b->cap, b->n + extra) != 0) {
            b->oom = 1;
            return;
        }
        memmove(b->d + at + extra, b->d + at, len);
        b->n += extra;
    }
    uint8_t *p = b->d + at - 1;
    size_t v = len;
    for (size_t i = 0; i <= extra; i++, v >>= 7) p[i] = (uint8_t)((v & 0x7f) | (i < extra ? 0x80 : 0));
}

void lp_pb_free(struct lp_pb *b) {
    lp_os_free(b->d);
    memset(b, 0, sizeof *b);
}

uint64_t lp_text_hash(const char *s, size_t n) {
    /* eight bytes a step (a trace interns every frame of every stack: byte by byte, hashing was
     * most of the cost), each word mixed in by a multiply and a fold */
    uint64_t h = 0xcbf29ce484222325ull ^ (n * 0x9e3779b97f4a7c15ull), w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    if (n) {
        w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
    }
    h ^= h >> 32;
    return h | 1;
}

uint64_t lp_strtab_id(struct lp_strtab *t, const char *s, size_t n) {
    struct lp_strtab_seen *seen = &t->seen[((uintptr_t)s >> 3 ^ n) % LP_STRTAB_SEEN];
    if (seen->at == s && seen->n == n && !memcmp(t->str[seen->id], s, n)) return seen->id;
    uint64_t h = lp_text_hash(s, n), v;
    for (;; h += 2) { /* a collision: the next key */
        if (!lp_map_get(&t->map, h, &v)) break;
        if (t->len[v - 1] == n && !memcmp(t->str[v - 1], s, n)) {
            *seen = (struct lp_strtab_seen){s, n, v - 1};
            return v - 1;
        }
    }
    char *copy = lp_os_strndup(s, n);
    if (!copy || LP_RESERVE(t->str, t->cap, t->n + 1) != 0 || LP_RESERVE(t->len, t->caplen, t->n + 1) != 0 ||
        lp_map_put(&t->map, h, t->n + 1, NULL) < 0) {
        lp_os_free(copy);
        t->oom = 1;
        return 0;
    }
    t->str[t->n] = copy;
    t->len[t->n] = n;
    *seen = (struct lp_strtab_seen){s, n, t->n};
    return t->n++;
}

void lp_strtab_free(struct lp_strtab *t) {
    for (size_t i = 0; i < t->n; i++) lp_os_free(t->str[i]);
    lp_os_free(t->str);
    lp_os_free(t->len);
    lp_map_free(&t->map);
    memset(t, 0, sizeof *t);
}
