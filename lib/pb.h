/* pb.h: the protocol buffer encoder of libprof's binary outputs (pprof's profile.proto, Perfetto's
 * trace.proto): a growable byte buffer with the field kinds those formats use — varints, fixed64,
 * doubles, length-delimited bytes and messages — and a table that gives each distinct text an
 * index (string tables, interned names). Written by hand: a few dozen lines do what a protobuf
 * library would, and the preload can use them at exit (lp_os_* memory only). */
#ifndef LP_PB_H
#define LP_PB_H

#include <stddef.h>
#include <stdint.h>

#include "map.h"

struct lp_pb {
    uint8_t *d;
    size_t n, cap;
    int oom; /* a growth failed: the buffer is incomplete */
};

void lp_pb_put(struct lp_pb *b, const void *p, size_t n);
/* Room for `n` more bytes: 1, or 0 when it could not grow (oom set). */
int lp_pb_room(struct lp_pb *b, size_t n);
/* Inline: a trace is mostly small fields (a packet's timestamp, an event's track and name). */
static inline uint8_t *lp_pb_varint_at(uint8_t *p, uint64_t v) {
    while (v > 0x7f) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}
static inline void lp_pb_varint(struct lp_pb *b, uint64_t v) {
    if (b->cap - b->n >= 10 || lp_pb_room(b, 10)) b->n = (size_t)(lp_pb_varint_at(b->d + b->n, v) - b->d);
}
/* Field `field` as a varint (written even when 0: proto2 tells 0 from absent). */
static inline void lp_pb_uint(struct lp_pb *b, unsigned field, uint64_t v) {
    if (b->cap - b->n >= 20 || lp_pb_room(b, 20))
        b->n = (size_t)(lp_pb_varint_at(lp_pb_varint_at(b->d + b->n, (uint64_t)field << 3), v) - b->d);
}
/* int64: two's complement, ten bytes when < 0 */
static inline void lp_pb_sint(struct lp_pb *b, unsigned field, int64_t v) { lp_pb_uint(b, field, (uint64_t)v); }
void lp_pb_fixed64(struct lp_pb *b, unsigned field, uint64_t v);
void lp_pb_double(struct lp_pb *b, unsigned field, double v);
void lp_pb_bytes(struct lp_pb *b, unsigned field, const void *p, size_t n);
/* Message `m` as field `field` of `b`; `m` is emptied for the next one. */
void lp_pb_msg(struct lp_pb *b, unsigned field, struct lp_pb *m);
/* A message written in place: lp_pb_open gives where its length goes, lp_pb_close writes it
 * (moving the contents when the length needs more than one byte). */
static inline size_t lp_pb_open(struct lp_pb *b, unsigned field) {
    if (b->cap - b->n >= 11 || lp_pb_room(b, 11)) {
        uint8_t *p = lp_pb_varint_at(b->d + b->n, (uint64_t)field << 3 | 2);
        *p++ = 0; /* the length's first byte */
        b->n = (size_t)(p - b->d);
    }
    return b->n;
}
void lp_pb_close_long(struct lp_pb *b, size_t at);
/* A message whose length takes four bytes whatever it is (a varint with redundant bytes, as
 * Perfetto's own protozero writes one it fills in place): for a message of many KiB, made where
 * it goes, that closes without moving it. Up to 2^28 - 1 bytes (beyond: oom set). */
static inline size_t lp_pb_open4(struct lp_pb *b, unsigned field) {
    if (b->cap - b->n >= 14 || lp_pb_room(b, 14)) {
        uint8_t *p = lp_pb_varint_at(b->d + b->n, (uint64_t)field << 3 | 2);
        b->n = (size_t)(p - b->d) + 4;
    }
    return b->n;
}
void lp_pb_close4(struct lp_pb *b, size_t at);
/* (inline: most messages are a few dozen bytes, their length one byte) */
static inline void lp_pb_close(struct lp_pb *b, size_t at) {
    if (b->n - at < 0x80 && !b->oom)
        b->d[at - 1] = (uint8_t)(b->n - at);
    else
        lp_pb_close_long(b, at);
}
void lp_pb_free(struct lp_pb *b);

/* Texts, each with an index in order of arrival. */
#define LP_STRTAB_SEEN 64
struct lp_strtab {
    struct lp_map map; /* text hash -> 1 + index (texts compared on a hit) */
    char **str;
    size_t *len;
    size_t n, cap, caplen;
    int oom;
    /* the texts last asked for, by where they were: a writer asks again and again for the same
     * few (an argument's name, a call's) from the same place, where a compare is cheaper than
     * hashing the text and finding it in the map; the compare keeps it right where a buffer
     * that was looked up holds another text now */
    struct lp_strtab_seen {
        const char *at;
        size_t n, id;
    } seen[LP_STRTAB_SEEN];
};
/* The index of `s` (`n` bytes), added when new (a copy is kept); on out of memory, oom set and 0. */
uint64_t lp_strtab_id(struct lp_strtab *t, const char *s, size_t n);
void lp_strtab_free(struct lp_strtab *t);
/* A hash of the text, never 0 (a map key). */
uint64_t lp_text_hash(const char *s, size_t n);

#endif
