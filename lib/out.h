/* out.h: a buffered writer over a file descriptor with JSON and CSV string encoders. It uses
 * write(2) only, so the preload can use it at exit without stdio. */
#ifndef LP_OUT_H
#define LP_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct lp_out {
    int fd;
    /* when set, what fills the buffer goes to tap(tap_arg, bytes, n) instead of fd: a writer
     * that reads another's output as it is made (the Perfetto trace takes the Chrome trace's
     * metadata so) */
    void (*tap)(void *arg, const char *p, size_t n);
    void *tap_arg;
    int failed; /* a write failed (errno saved in err) */
    int err;
    size_t n;
    uint64_t total;
    char buf[1 << 16];
};

void lp_out_init(struct lp_out *o, int fd);
void lp_out_write(struct lp_out *o, const void *p, size_t n);
void lp_out_s(struct lp_out *o, const char *s);
void lp_out_c(struct lp_out *o, char c);
void lp_out_u64(struct lp_out *o, uint64_t v);
void lp_out_i64(struct lp_out *o, int64_t v);
void lp_out_fmt(struct lp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Nanoseconds as microseconds with exactly three decimals ("1234.567"), as Chrome traces want. */
void lp_out_us(struct lp_out *o, uint64_t ns);
/* A JSON string literal: quotes, escapes, control characters as \u00XX, invalid UTF-8 replaced
 * by U+FFFD. */
void lp_out_json_str(struct lp_out *o, const char *s, size_t n);
/* A CSV field (RFC 4180): quoted when it holds a comma, quote or line break. */
void lp_out_csv_str(struct lp_out *o, const char *s, size_t n);
/* The decimal digits of v (or ns as "us.fff"), written backwards so as to end at `end`; returns
 * where they start. Room: 20 bytes (24 for lp_fmt_us). Inline: a trace is mostly numbers. */
extern const char lp_digits2[201]; /* "00" "01" ... "99" */
static inline char *lp_fmt_u64(char *end, uint64_t v) {
    char *p = end;
    while (v >= 10000) { /* four digits a division */
        uint64_t q = v / 10000;
        unsigned r = (unsigned)(v - q * 10000), hi = r / 100, lo = r - hi * 100;
        p -= 4;
        memcpy(p, lp_digits2 + hi * 2, 2);
        memcpy(p + 2, lp_digits2 + lo * 2, 2);
        v = q;
    }
    if (v >= 100) {
        unsigned hi = (unsigned)v / 100, lo = (unsigned)v - hi * 100;
        p -= 2;
        memcpy(p, lp_digits2 + lo * 2, 2);
        v = hi;
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, lp_digits2 + v * 2, 2);
    } else {
        *--p = (char)('0' + v);
    }
    return p;
}
static inline char *lp_fmt_us(char *end, uint64_t ns) {
    uint64_t us = ns / 1000;
    unsigned f = (unsigned)(ns - us * 1000), h = f / 100, r = (f - h * 100) * 2;
    end[-1] = lp_digits2[r + 1];
    end[-2] = lp_digits2[r];
    end[-3] = (char)('0' + h);
    end[-4] = '.';
    return lp_fmt_u64(end - 4, us);
}
/* Flush; returns 0, or -1 if any write failed. */
int lp_out_flush(struct lp_out *o);

#endif
