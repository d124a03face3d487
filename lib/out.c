/* out.c: buffered output and string encoders for the exporters (Chrome JSON, CSV, tables). */
#define _GNU_SOURCE
#include "out.h"
#include "os.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void lp_out_init(struct lp_out *o, int fd) {
    o->fd = fd;
    o->tap = NULL;
    o->tap_arg = NULL;
    o->failed = 0;
    o->err = 0;
    o->n = 0;
    o->total = 0;
}

static void drain(struct lp_out *o) {
    size_t off = 0;
    if (o->tap) {
        o->tap(o->tap_arg, o->buf, o->n);
        off = o->n;
    }
    while (off < o->n && !o->failed) {
        ssize_t w = lp_os_write(o->fd, o->buf + off, o->n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            o->failed = 1;
            o->err = w < 0 ? errno : ENOSPC;
            break;
        }
        off += (size_t)w;
    }
    o->total += o->n;
    o->n = 0;
}

void lp_out_write(struct lp_out *o, const void *p, size_t n) {
    const char *s = p;
    if (n <= sizeof o->buf - o->n) { /* nearly always: one copy */
        memcpy(o->buf + o->n, s, n);
        o->n += n;
        return;
    }
    while (n > 0) {
        if (o->n == sizeof o->buf) drain(o);
        size_t k = sizeof o->buf - o->n;
        if (k > n) k = n;
        memcpy(o->buf + o->n, s, k);
        o->n += k;
        s += k;
        n -= k;
    }
}

void lp_out_s(struct lp_out *o, const char *s) { lp_out_write(o, s, strlen(s)); }

void lp_out_c(struct lp_out *o, char c) {
    if (o->n == sizeof o->buf) drain(o);
    o->buf[o->n++] = c;
}

/* Two decimal digits a step (out.h's formatters): half the divisions of one digit a step. */
const char lp_digits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                             "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                             "8081828384858687888990919293949596979899";

void lp_out_u64(struct lp_out *o, uint64_t v) {
    char tmp[24];
    char *p = lp_fmt_u64(tmp + sizeof tmp, v);
    lp_out_write(o, p, (size_t)(tmp + sizeof tmp - p));
}

void lp_out_i64(struct lp_out *o, int64_t v) {
    if (v < 0) {
        lp_out_c(o, '-');
        lp_out_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        lp_out_u64(o, (uint64_t)v);
    }
}

void lp_out_fmt(struct lp_out *o, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    lp_out_write(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void lp_out_us(struct lp_out *o, uint64_t ns) {
    char tmp[32];
    char *p = lp_fmt_us(tmp + sizeof tmp, ns);
    lp_out_write(o, p, (size_t)(tmp + sizeof tmp - p));
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if it is not valid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
    } else
        return 0;
    if (n < len) return 0;
    unsigned cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

/* The bytes a JSON string holds as they are: printable ASCII but the quote and the backslash. */
static const unsigned char json_plain[256] = {
    [0x20] = 1,
    [0x21] = 1,
    [0x23 ... 0x5b] = 1,
    [0x5d ... 0x7e] = 1,
};

void lp_out_json_str(struct lp_out *o, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    lp_out_c(o, '"');
    size_t i = 0;
    while (i < n) {
        /* a run of characters written as they are, in one copy */
        size_t run = i;
        while (run < n && json_plain[s[run]]) run++;
        if (run > i) {
            lp_out_write(o, s + i, run - i);
            i = run;
            continue;
        }
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            lp_out_c(o, '\\');
            lp_out_c(o, (char)c);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            switch (c) {
            case '\n': lp_out_write(o, "\\n", 2); break;
            case '\t': lp_out_write(o, "\\t", 2); break;
            case '\r': lp_out_write(o, "\\r", 2); break;
            default: lp_out_write(o, e, 6);
            }
            i++;
        } else {
            size_t l = utf8_len(s + i, n - i);
            if (l == 0) {
                lp_out_write(o, "\xef\xbf\xbd", 3); /* U+FFFD for each bad byte */
                i++;
            } else {
                lp_out_write(o, s + i, l);
                i += l;
            }
        }
    }
    lp_out_c(o, '"');
}

void lp_out_csv_str(struct lp_out *o, const char *s, size_t n) {
    int quote = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r') quote = 1;
    if (!quote) {
        lp_out_write(o, s, n);
        return;
    }
    lp_out_c(o, '"');
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') lp_out_c(o, '"');
        lp_out_c(o, s[i]);
    }
    lp_out_c(o, '"');
}

int lp_out_flush(struct lp_out *o) {
    if (o->n) drain(o);
    return o->failed ? -1 : 0;
}
