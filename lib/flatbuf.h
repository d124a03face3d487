/* flatbuf.h: reading FlatBuffers without their library — enough for ExecuTorch's program (.pte,
 * read by the recorder in the program's memory) and its ETDump (read by the converter from the
 * trace). A table starts with the signed offset of its vtable (table - offset); the vtable holds
 * its own size, the table's, then one 16-bit offset per field (0: absent, the default applies).
 * Offsets to tables, vectors and strings are unsigned, from where they are stored; a vector or a
 * string starts with its 32-bit length. Every read is checked against [lo, hi) — the converter
 * reads files that may be damaged; the recorder passes the whole address space. Header-only:
 * the recorder and the tools each take their own copy (no allocation, no libc beyond memcpy). */
#ifndef LP_FLATBUF_H
#define LP_FLATBUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct lp_fb {
    const uint8_t *lo, *hi;
};

/* in integers: pointers of different objects (the whole address space) do not compare in C */
static inline int lp_fb_in(const struct lp_fb *b, const uint8_t *p, size_t n) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)b->lo, hi = (uintptr_t)b->hi;
    return p && a >= lo && a < hi && hi - a >= n;
}

/* Where field `id` of table `t` is stored; NULL when absent (or the table is damaged). */
static inline const uint8_t *lp_fb_field(const struct lp_fb *b, const uint8_t *t, unsigned id) {
    if (!lp_fb_in(b, t, 4)) return NULL;
    int32_t so;
    memcpy(&so, t, 4);
    const uint8_t *vt = (const uint8_t *)((uintptr_t)t - (uintptr_t)(intptr_t)so);
    uint16_t vsz, off;
    if (!lp_fb_in(b, vt, 4)) return NULL;
    memcpy(&vsz, vt, 2);
    if (vsz < 4 || (vsz & 1) || !lp_fb_in(b, vt, vsz) || 6u + 2u * id > vsz) return NULL;
    memcpy(&off, vt + 4 + 2 * id, 2);
    return off && lp_fb_in(b, t + off, 1) ? t + off : NULL;
}

/* What the offset stored at `p` points to (a table, a vector, a string). */
static inline const uint8_t *lp_fb_deref(const struct lp_fb *b, const uint8_t *p) {
    if (!lp_fb_in(b, p, 4)) return NULL;
    uint32_t o;
    memcpy(&o, p, 4);
    const uint8_t *q = (const uint8_t *)((uintptr_t)p + o);
    return o && lp_fb_in(b, q, 4) ? q : NULL;
}

static inline const uint8_t *lp_fb_table(const struct lp_fb *b, const uint8_t *t, unsigned id) {
    return lp_fb_deref(b, lp_fb_field(b, t, id));
}

/* A vector field: its first element, its length in *n (elements of `size` bytes); NULL, 0 if absent. */
static inline const uint8_t *lp_fb_vec(const struct lp_fb *b, const uint8_t *t, unsigned id, size_t size, uint32_t *n) {
    const uint8_t *v = lp_fb_table(b, t, id);
    uint32_t len = 0;
    if (v) memcpy(&len, v, 4);
    if (!v || !lp_fb_in(b, v + 4, (size_t)len * size)) {
        *n = 0;
        return NULL;
    }
    *n = len;
    return v + 4;
}

/* Element i of a vector of tables. */
static inline const uint8_t *lp_fb_at(const struct lp_fb *b, const uint8_t *v, uint32_t i) {
    return v ? lp_fb_deref(b, v + 4 * (size_t)i) : NULL;
}

/* A string field: its bytes (NUL-terminated in a valid buffer), its length in *len; NULL if absent. */
static inline const char *lp_fb_str(const struct lp_fb *b, const uint8_t *t, unsigned id, uint32_t *len) {
    const uint8_t *s = lp_fb_table(b, t, id);
    uint32_t n = 0;
    if (s) memcpy(&n, s, 4);
    if (!s || !lp_fb_in(b, s + 4, (size_t)n)) {
        *len = 0;
        return NULL;
    }
    *len = n;
    return (const char *)s + 4;
}

/* Scalar fields, `def` when absent. */
static inline uint64_t lp_fb_u64(const struct lp_fb *b, const uint8_t *t, unsigned id, uint64_t def) {
    const uint8_t *p = lp_fb_field(b, t, id);
    if (!lp_fb_in(b, p, 8)) return def;
    memcpy(&def, p, 8);
    return def;
}
static inline int32_t lp_fb_i32(const struct lp_fb *b, const uint8_t *t, unsigned id, int32_t def) {
    const uint8_t *p = lp_fb_field(b, t, id);
    if (!lp_fb_in(b, p, 4)) return def;
    memcpy(&def, p, 4);
    return def;
}
static inline uint8_t lp_fb_u8(const struct lp_fb *b, const uint8_t *t, unsigned id, uint8_t def) {
    const uint8_t *p = lp_fb_field(b, t, id);
    return lp_fb_in(b, p, 1) ? *p : def;
}

#endif
