/* chrome_in.h: reading Chrome trace JSON — libprof's own and other profilers' (PyTorch, ONNX
 * Runtime, uftrace --chrome, ...) — into time slices, for libprof-report. */
#ifndef LP_CHROME_IN_H
#define LP_CHROME_IN_H

#include <stddef.h>
#include <stdint.h>

struct lp_slice {
    uint32_t name;    /* index into lp_chrome.names */
    int64_t pid, tid;
    int64_t ts_ns;    /* start */
    int64_t dur_ns;
};

struct lp_chrome {
    struct lp_slice *slices;
    size_t nslices;
    char **names;
    size_t nnames;
    size_t events;    /* trace events read */
    size_t skipped;   /* events of no use here or malformed (counted, not fatal) */
    size_t unmatched; /* B without E, or E without B */
};

/* Parse `len` bytes of JSON: an object with "traceEvents" or a bare array of events. X events
 * and matched B/E pairs become slices; timestamps are microseconds (fractions kept to the ns);
 * a string or missing pid/tid is mapped to a number. Returns 0, or -1 with a message. */
int lp_chrome_load(const char *text, size_t len, struct lp_chrome *out, char *err, size_t errlen);
void lp_chrome_free(struct lp_chrome *c);

#endif
