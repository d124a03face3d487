/* Unit tests of preload/core/config.c: values, sizes, families, path patterns, env loading. */
#include <criterion/criterion.h>
#include <string.h>

#include "preload/core/lp.h"

Test(config, booleans) {
    int b = -1;
    cr_expect_eq(lpr_parse_bool("1", &b), 0);
    cr_expect_eq(b, 1);
    cr_expect_eq(lpr_parse_bool("YES", &b), 0);
    cr_expect_eq(b, 1);
    cr_expect_eq(lpr_parse_bool("off", &b), 0);
    cr_expect_eq(b, 0);
    cr_expect_eq(lpr_parse_bool("2", &b), -1);
    cr_expect_eq(lpr_parse_bool("", &b), -1);
    cr_expect_eq(lpr_parse_bool("truee", &b), -1);
}

Test(config, sizes) {
    uint64_t v = 7;
    cr_expect_eq(lpr_parse_size("64K", 0, UINT64_MAX, &v), 0);
    cr_expect_eq(v, 65536);
    cr_expect_eq(lpr_parse_size("2MiB", 0, UINT64_MAX, &v), 0);
    cr_expect_eq(v, 2u << 20);
    cr_expect_eq(lpr_parse_size("0", 0, UINT64_MAX, &v), 0);
    cr_expect_eq(v, 0);
    cr_expect_eq(lpr_parse_size("1g", 0, UINT64_MAX, &v), 0);
    cr_expect_eq(v, 1u << 30);
    v = 7;
    cr_expect_eq(lpr_parse_size("-5", 0, UINT64_MAX, &v), -1);
    cr_expect_eq(lpr_parse_size(" 5", 0, UINT64_MAX, &v), -1);
    cr_expect_eq(lpr_parse_size("5x", 0, UINT64_MAX, &v), -1);
    cr_expect_eq(lpr_parse_size("", 0, UINT64_MAX, &v), -1);
    cr_expect_eq(lpr_parse_size("99999999999999999999999", 0, UINT64_MAX, &v), -1);
    cr_expect_eq(lpr_parse_size("17179869184G", 0, UINT64_MAX, &v), -1); /* overflows on shift */
    cr_expect_eq(lpr_parse_size("3", 4, 10, &v), -1);
    cr_expect_eq(v, 7, "untouched on error");
}

Test(config, families) {
    uint32_t m = 99;
    char bad[32];
    cr_expect_eq(lpr_parse_families("alloc", &m, bad, sizeof bad), 0);
    cr_expect_eq(m, 1u << LP_FAM_ALLOC);
    cr_expect_eq(lpr_parse_families("none", &m, bad, sizeof bad), 0);
    cr_expect_eq(m, 0);
    cr_expect_eq(lpr_parse_families("all", &m, bad, sizeof bad), 0);
    cr_expect_eq(m, (1u << LP_FAM_COUNT) - 1);
    cr_expect_eq(lpr_parse_families("ALLOC,,", &m, bad, sizeof bad), 0);
    cr_expect_eq(m, 1u << LP_FAM_ALLOC);
    cr_expect_eq(lpr_parse_families("alloc,gpu", &m, bad, sizeof bad), -1);
    cr_expect_str_eq(bad, "gpu");
    cr_expect_eq(lpr_parse_families("io,blas,dnnl", &m, bad, sizeof bad), 0);
    cr_expect_eq(m, (1u << LP_FAM_IO) | (1u << LP_FAM_BLAS) | (1u << LP_FAM_DNNL));
    cr_expect_eq(lpr_parse_families("-io,-sync", &m, bad, sizeof bad), 0);
    cr_expect_eq(m, ((1u << LP_FAM_COUNT) - 1) & ~((1u << LP_FAM_IO) | (1u << LP_FAM_SYNC)));
    cr_expect_eq(lpr_parse_families("all,-alloc", &m, bad, sizeof bad), 0);
    cr_expect_eq(m, ((1u << LP_FAM_COUNT) - 1) & ~(1u << LP_FAM_ALLOC));
    cr_expect_eq(lpr_parse_families("-", &m, bad, sizeof bad), -1);
}

static const struct lpr_pattern_ctx ctx = {.pid = 4242, .start_time = 1700000000, .host = "box", .exe = "sqlite3"};

Test(config, patterns) {
    char out[64];
    cr_expect_eq(lpr_expand_pattern("t_%p_%h_%t_%e_%%.json", &ctx, out, sizeof out), 0);
    cr_expect_str_eq(out, "t_4242_box_1700000000_sqlite3_%.json");
    cr_expect_eq(lpr_expand_pattern("plain", &ctx, out, sizeof out), 0);
    cr_expect_str_eq(out, "plain");
    cr_expect_eq(lpr_expand_pattern("bad%q", &ctx, out, sizeof out), -1);
    cr_expect_eq(lpr_expand_pattern("trailing%", &ctx, out, sizeof out), -1);
    cr_expect_eq(lpr_expand_pattern("%e%e%e%e%e%e%e%e%e", &ctx, out, 20), -1, "too long must fail");
}

Test(config, insert_pid) {
    char p[64] = "dir.d/trace.json";
    cr_expect_eq(lpr_path_insert_pid(p, sizeof p, 77), 0);
    cr_expect_str_eq(p, "dir.d/trace.77.json");
    char q[64] = "dir.d/trace";
    lpr_path_insert_pid(q, sizeof q, 77);
    cr_expect_str_eq(q, "dir.d/trace.77");
    char h[64] = "/x/.hidden";
    lpr_path_insert_pid(h, sizeof h, 5);
    cr_expect_str_eq(h, "/x/.hidden.5");
}

static const char *const *fake_env;
static const char *fake_get(const char *name) {
    size_t n = strlen(name);
    for (int i = 0; fake_env[i]; i++)
        if (!strncmp(fake_env[i], name, n) && fake_env[i][n] == '=') return fake_env[i] + n + 1;
    return NULL;
}

Test(config, nothing_set_is_off) {
    struct lpr_config c;
    fake_env = (const char *[]){NULL};
    lpr_config_load(&c, fake_get, &ctx);
    cr_expect_eq(c.enabled, 0);
}

Test(config, libprof_1_gives_default_json_and_csv) {
    struct lpr_config c;
    fake_env = (const char *[]){"LIBPROF=1", NULL};
    lpr_config_load(&c, fake_get, &ctx);
    cr_expect_eq(c.enabled, 1);
    cr_expect_str_eq(c.output, "libprof_profiling/profile_sqlite3_1700000000_4242.json");
    cr_expect_str_eq(c.csv, "libprof_profiling/profile_sqlite3_1700000000_4242.csv");
    cr_expect_eq(c.raw_output, 0);
    cr_expect_eq(c.alloc_min, 65536);
    cr_expect_eq(c.buffer_bytes, 128 * 1024);
}

Test(config, explicit_values) {
    struct lpr_config c;
    fake_env = (const char *[]){"LIBPROF_OUTPUT=/tmp/x_%p.lpt", "LIBPROF_BUFFER_KB=16",    "LIBPROF_ALLOC_MIN=1K",
                                "LIBPROF_EVENTS=none",          "LIBPROF_CLOCK=monotonic", NULL};
    lpr_config_load(&c, fake_get, &ctx);
    cr_expect_eq(c.enabled, 1);
    cr_expect_str_eq(c.output, "/tmp/x_4242.lpt");
    cr_expect_eq(c.raw_output, 1);
    cr_expect_eq(c.buffer_bytes, 16 * 1024);
    cr_expect_eq(c.alloc_min, 1024);
    cr_expect_eq(c.families, 0);
    cr_expect_eq(c.clock, LP_CLOCK_MONOTONIC);
    cr_expect_str_eq(c.csv, "");
}

Test(config, libprof_0_wins) {
    struct lpr_config c;
    fake_env = (const char *[]){"LIBPROF=0", "LIBPROF_OUTPUT=/tmp/x.json", NULL};
    lpr_config_load(&c, fake_get, &ctx);
    cr_expect_eq(c.enabled, 0);
}
