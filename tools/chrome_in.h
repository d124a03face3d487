/* chrome_in.h: reading Chrome trace JSON — libprof's own and other profilers' (PyTorch, ONNX
 * Runtime, uftrace --chrome, ...) — into time slices, for libprof-report. */
#ifndef LP_CHROME_IN_H
#define LP_CHROME_IN_H

#include <stddef.h>
#include <stdint.h>

struct lp_slice {
    uint32_t name;    /* index into lp_chrome.names */
    uint32_t cat;     /* category ("cat"), also an index into lp_chrome.names */
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
    int64_t origin_real_ns; /* CLOCK_REALTIME of ts 0 when the trace says (libprof's do), else 0 */
    int64_t pid;            /* the process, when the trace names one (libprof's metadata), else 0 */
};

/* Building an lp_chrome from another source (a raw libprof trace): names interned once each. */
struct lp_chrome_builder;
struct lp_chrome_builder *lp_chrome_builder_new(struct lp_chrome *out);
uint32_t lp_chrome_intern(struct lp_chrome_builder *b, const char *name);
void lp_chrome_add(struct lp_chrome_builder *b, uint32_t name, uint32_t cat, int64_t pid, int64_t tid, int64_t ts_ns,
                   int64_t dur_ns);
/* Frees the builder; returns -1 (and frees `out`'s contents) if memory ran out on the way. */
int lp_chrome_builder_end(struct lp_chrome_builder *b);

/* Parse `len` bytes of JSON: an object with "traceEvents" or a bare array of events. X events
 * and matched B/E pairs become slices; timestamps are microseconds (fractions kept to the ns);
 * a string or missing pid/tid is mapped to a number. Returns 0, or -1 with a message. */
int lp_chrome_load(const char *text, size_t len, struct lp_chrome *out, char *err, size_t errlen);
void lp_chrome_free(struct lp_chrome *c);

#endif
