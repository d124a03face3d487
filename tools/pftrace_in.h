/* pftrace_in.h: reading libprof's own Perfetto trace (.pftrace) into time slices (lib/slices.h),
 * the same as its Chrome JSON twin gives (see pftrace_in.c), for libprof-report. */
#ifndef RP_PFTRACE_IN_H
#define RP_PFTRACE_IN_H

#include <stddef.h>

#include "lib/slices.h"

/* The first bytes of a file (`n` of them) look like a Perfetto trace: a Trace's first packet. */
int rp_is_pftrace(const void *head, size_t n);
/* The trace's `len` bytes as the document its JSON twin is (cJSON: traceEvents, metadata), with
 * what it left out (events that are not slices, parts it could not read) and the slices never
 * ended; NULL with a message. */
struct cJSON;
struct cJSON *rp_pftrace_doc(const void *data, size_t len, size_t *skipped, size_t *unmatched, char *err,
                             size_t errlen);
/* The trace's `len` bytes into `out`: 0, or -1 with a message. */
int rp_pftrace_load(const void *data, size_t len, struct lp_slices *out, char *err, size_t errlen);

#endif
