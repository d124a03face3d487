/* deflate.h: a buffer as one zlib stream (RFC 1950), by the fastest deflater the system has —
 * ISA-L's igzip, libdeflate or zlib, loaded on first use (see deflate.c). Perfetto's trace
 * writer deflates its bundles of packets with it. */
#ifndef LP_DEFLATE_H
#define LP_DEFLATE_H

#include <stddef.h>
#include <stdint.h>

/* One compressor's state: one for each thread deflating at once (zero it before first use). */
struct lp_deflate {
    void *state;
};

/* The deflater, loaded the first time (call it once before threads deflate): its library's
 * name ("libisal.so.2", "libdeflate.so.0", "libz.so.1"), or NULL when none loads. */
const char *lp_deflate_load(void);
/* Room enough for `n` bytes deflated, whatever the deflater. */
size_t lp_deflate_bound(size_t n);
/* `in` (`n` bytes) as a zlib stream into `out` (`cap` bytes): its length, 0 when it failed
 * (no deflater, no memory, no room). */
size_t lp_deflate(struct lp_deflate *d, const void *in, size_t n, void *out, size_t cap);
void lp_deflate_end(struct lp_deflate *d);
/* A zlib stream (`n` bytes) inflated, by zlib: its length and *out (lp_os_free it), or 0 when it
 * is not one, zlib does not load or memory ran out (*out NULL). */
size_t lp_inflate(const void *in, size_t n, uint8_t **out);

#endif
