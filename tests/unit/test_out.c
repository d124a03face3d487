/* Unit tests of tools/out.c: JSON strings must be strict JSON for any input bytes. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/out.h"

/* Encode `s` with lp_out_json_str and return what was written. */
static char *encode(const char *s, size_t n, void (*fn)(struct lp_out *, const char *, size_t)) {
    char path[] = "/tmp/libprof-out-test-XXXXXX";
    int fd = mkstemp(path);
    struct lp_out *o = malloc(sizeof *o);
    lp_out_init(o, fd);
    fn(o, s, n);
    cr_assert_eq(lp_out_flush(o), 0);
    close(fd);
    free(o);
    FILE *f = fopen(path, "rb");
    static char buf[4096];
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    buf[k] = '\0';
    fclose(f);
    unlink(path);
    return buf;
}

static void round_trip(const char *in, size_t n, const char *want) {
    char *enc = encode(in, n, lp_out_json_str);
    cJSON *j = cJSON_Parse(enc);
    cr_assert_not_null(j, "not JSON: %s", enc);
    cr_expect_str_eq(j->valuestring, want, "encoded as %s", enc);
    cJSON_Delete(j);
}

Test(out, json_escapes) {
    round_trip("plain", 5, "plain");
    round_trip("q\"b\\s/", 6, "q\"b\\s/");
    round_trip("a\nb\tc\rd", 7, "a\nb\tc\rd");
    round_trip("\x01\x1f\x7f", 3, "\x01\x1f\x7f");
    round_trip("nul\0in", 6, "nul"); /* cJSON stops at the NUL it decodes; the encoding is \u0000 */
    cr_expect_str_eq(encode("nul\0in", 6, lp_out_json_str), "\"nul\\u0000in\"");
}

Test(out, json_utf8) {
    round_trip("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15, "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80");
    /* invalid: lone continuation, overlong, surrogate, truncated sequence, 0xff */
    round_trip("a\x80z", 3, "a\xef\xbf\xbdz");
    round_trip("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd");
    round_trip("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    round_trip("x\xe2\x82", 3, "x\xef\xbf\xbd\xef\xbf\xbd");
    round_trip("\xff", 1, "\xef\xbf\xbd");
}

static void us(struct lp_out *o, const char *s, size_t n) {
    (void)n;
    lp_out_us(o, strtoull(s, NULL, 10));
}

Test(out, microseconds_with_three_decimals) {
    cr_expect_str_eq(encode("0", 0, us), "0.000");
    cr_expect_str_eq(encode("7", 0, us), "0.007");
    cr_expect_str_eq(encode("1234567", 0, us), "1234.567");
    cr_expect_str_eq(encode("18446744073709551615", 0, us), "18446744073709551.615");
}

Test(out, csv_fields) {
    cr_expect_str_eq(encode("plain", 5, lp_out_csv_str), "plain");
    cr_expect_str_eq(encode("a,b", 3, lp_out_csv_str), "\"a,b\"");
    cr_expect_str_eq(encode("say \"hi\"", 8, lp_out_csv_str), "\"say \"\"hi\"\"\"");
}

Test(out, write_failure_is_reported) {
    struct lp_out *o = malloc(sizeof *o);
    lp_out_init(o, -1);
    lp_out_s(o, "x");
    cr_expect_eq(lp_out_flush(o), -1);
    free(o);
}
