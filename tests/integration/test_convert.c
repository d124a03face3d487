/* The exit conversion (issue 14): LIBPROF_CONVERT=background lets the program end without
 * waiting — a detached libprof-report writes the same JSON and CSV and removes the spool — and
 * the conversion's own time is reported (always with LIBPROF_VERBOSE, else past one second). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

TestSuite(convert, .timeout = 120);

static const char *const sql[] = {"sqlite3", ":memory:",
                                  "create table t(a integer primary key, b text); with recursive n(i) as (select 1 "
                                  "union all select i+1 from n where i<5000) insert into t select i, "
                                  "printf('row-%d', i) from n; select count(*) from t;",
                                  NULL};

Test(convert, in_the_background) {
    char *dir = make_tmpdir();
    char *json = strfmt("%s/t.json", dir), *csv = strfmt("%s/t.csv", dir), *lpt = strfmt("%s/t.json.lpt", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), strfmt("LIBPROF_CSV=%s", csv),
                         "LIBPROF_CONVERT=background", NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, sql);
    run_prog(&r, dir, env, sql);
    cr_assert_eq(r.status, bare.status);
    cr_expect_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err);
    /* the converter works on after the program: wait for its files (renamed into place whole) */
    for (int i = 0; i < 600 && (access(json, F_OK) || access(csv, F_OK) || !access(lpt, F_OK)); i++)
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    cr_assert(python_json_ok(json), "no JSON from the background conversion");
    cr_expect_eq(access(lpt, F_OK), -1, "the spool is left behind");
    cJSON *j = load_json(json);
    cJSON *m = libprof_meta(j);
    cr_expect_gt(meta_fn(m, "malloc", "count"), 5000);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(m, "complete")));
    char *c = read_file(csv, NULL);
    cr_assert_not_null(c);
    cr_expect_not_null(strstr(c, "\nmalloc,alloc,"));
    free(c);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

Test(convert, says_how_long_it_took) {
    char *dir = make_tmpdir();
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), "LIBPROF_VERBOSE=1", NULL};
    struct run r;
    run_prog(&r, dir, env, sql);
    cr_assert_eq(r.status, 0);
    cr_expect_eq(count_lines_with(r.err, "libprof: converting "), 1, "%s", r.err);
    const char *line = strstr(r.err, "libprof: converting ");
    cr_assert_not_null(line);
    unsigned long long n = 0;
    double s = -1;
    cr_expect_eq(sscanf(line, "libprof: converting %llu events took %lf s", &n, &s), 2, "%s", line);
    cr_expect_gt(n, 10000);
    cr_expect_geq(s, 0);
    run_free(&r);
    /* without LIBPROF_VERBOSE a short conversion says nothing */
    const char *quiet[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/u.json", dir), NULL};
    run_prog(&r, dir, quiet, sql);
    cr_expect_eq(count_lines_with(r.err, "libprof: converting "), 0, "%s", r.err);
    run_free(&r);
}
