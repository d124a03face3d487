/* pack.h: compact raw traces (tools/pack.c): libprof-report X.lpt --pack Y.lpz, and reading a
 * packed trace back as its raw trace, in memory. */
#ifndef RP_PACK_H
#define RP_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "libprof/format.h"

/* Pack the raw trace at `in` into `out` (mode: of the file made). Returns 0 with the records kept
 * and the bytes written, or -1 with a message in `err`. */
int rp_pack(const char *in, const char *out, unsigned mode, char *err, size_t errlen, uint64_t *events,
            uint64_t *bytes);
/* Do these first bytes start a packed trace? */
int rp_is_packed(const void *head, size_t n);
/* The raw trace a packed file holds, rebuilt in memory (*image: free() it). 0, or -1 with a
 * message in `err`. */
int rp_unpack(const char *path, uint8_t **image, size_t *size, char *err, size_t errlen);
/* The same from the packed file's bytes in memory. */
int rp_unpack_mem(const uint8_t *packed, size_t n, uint8_t **image, size_t *size, char *err, size_t errlen);

#endif
