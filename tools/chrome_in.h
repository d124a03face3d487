/* chrome_in.h: reading Chrome trace JSON — libprof's own and other profilers' (PyTorch, ONNX
 * Runtime, uftrace --chrome, ...) — into time slices (lib/slices.h), for libprof-report. */
#ifndef LP_CHROME_IN_H
#define LP_CHROME_IN_H

#include <stddef.h>
#include <stdint.h>

#include "lib/slices.h"

/* Parse `len` bytes of JSON: an object with "traceEvents" or a bare array of events. X events
 * and matched B/E pairs become slices; timestamps are microseconds (fractions kept to the ns);
 * a string or missing pid/tid is mapped to a number. Returns 0, or -1 with a message. */
int lp_chrome_load(const char *text, size_t len, struct lp_slices *out, char *err, size_t errlen);
/* The same from the document already parsed (a .pftrace's, read as its JSON twin: pftrace_in.c). */
struct cJSON;
int lp_chrome_load_tree(const struct cJSON *root, struct lp_slices *out, char *err, size_t errlen);

#endif
