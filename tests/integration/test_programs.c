/* Real Debian programs under the preload: output and exit status unchanged, allocation counts
 * equal to what glibc's memusage counts on the same run, traces strict JSON. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(programs, .timeout = 120);

static void compare_with_memusage(const char *const *argv, const char *const *env_extra) {
    if (access(argv[0], X_OK) != 0) cr_skip_test("%s not installed", argv[0]);
    char *dir = make_tmpdir();
    struct run bare;
    run_prog(&bare, dir, env_extra, argv);

    /* memusage's run: in the same directory and with the same environment as libprof's (its
     * LIBPROF_OUTPUT too, which memusage ignores) — a program's allocations can depend on both:
     * `python3 -c` lists its working directory as it imports, and copies every variable into
     * os.environ, whose table grows at some sizes and not at others */
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *mu_env[16] = {out};
    for (int i = 0; env_extra && env_extra[i] && i < 14; i++) mu_env[i + 1] = env_extra[i];
    struct memusage mu;
    char *mu_out = NULL;
    cr_assert_eq(run_memusage(&mu, dir, mu_env, argv, &mu_out), 0);
    cr_assert_geq(mu.malloc, 0, "could not read memusage's table");

    const char *env[16] = {"LD_PRELOAD=" PRELOAD, out};
    int k = 2;
    for (int i = 0; env_extra && env_extra[i]; i++) env[k++] = env_extra[i];
    env[k] = NULL;
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, bare.status);
    cr_assert_str_eq(r.out, bare.out, "stdout changed under the preload");
    cr_assert_str_eq(r.err, bare.err, "stderr changed under the preload");
    cr_assert_str_eq(r.out, mu_out);

    char *path = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(path), "not strict JSON");
    cJSON *j = load_json(path);
    cr_assert_not_null(j);
    cJSON *m = libprof_meta(j);
    long long got_calloc = meta_fn(m, "calloc", "count");
    long long got_realloc = meta_fn(m, "realloc", "count");
    cr_expect_eq(meta_fn(m, "malloc", "count"), mu.malloc, "malloc: libprof %lld, memusage %lld",
                 meta_fn(m, "malloc", "count"), mu.malloc);
    cr_expect_eq(got_calloc < 0 ? 0 : got_calloc, mu.calloc, "calloc: libprof %lld, memusage %lld", got_calloc,
                 mu.calloc);
    cr_expect_eq(got_realloc < 0 ? 0 : got_realloc, mu.realloc, "realloc: libprof %lld, memusage %lld", got_realloc,
                 mu.realloc);
    cr_expect_eq(meta_fn(m, "free", "count"), mu.free, "free: libprof %lld, memusage %lld", meta_fn(m, "free", "count"),
                 mu.free);
    cr_expect_eq(meta_num(m, "events_dropped"), 0);
    cr_expect_eq(meta_num(m, "untracked_frees"), 0);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

Test(programs, sqlite3_counts_equal_memusage) {
    const char *argv[] = {"/usr/bin/sqlite3", ":memory:",
                          "create table t(a integer primary key, b text); "
                          "with recursive n(i) as (select 1 union all select i+1 from n where i<20000) "
                          "insert into t select i, printf('row-%d', i) from n; "
                          "create index tb on t(b); select count(*), sum(length(b)) from t;",
                          NULL};
    compare_with_memusage(argv, NULL);
}

Test(programs, sqlite3_on_a_file_database) {
    char *dir = make_tmpdir();
    char *db = strfmt("%s/db.sqlite", dir);
    const char *argv[] = {"/usr/bin/sqlite3", db,
                          "drop table if exists t; create table t(a, b); insert into t values (1, 'x'), (2, 'y'); "
                          "select group_concat(b) from t;",
                          NULL};
    compare_with_memusage(argv, NULL);
}

Test(programs, python3_counts_equal_memusage) {
    const char *argv[] = {
        "/usr/bin/python3", "-c",
        "import json; d=[{'a':i,'b':str(i)} for i in range(20000)]; print(len(json.loads(json.dumps(d))))", NULL};
    const char *env[] = {"PYTHONHASHSEED=0", NULL};
    compare_with_memusage(argv, env);
}

Test(programs, xz_pipeline_exit_status_and_output) {
    /* a shell pipeline with a two-thread xz: output identical with and without the preload, and
     * every process of the pipeline writes its own strict-JSON trace (NAME.PID.json, since their
     * parent shell is traced with the same pattern) */
    const char *argv[] = {"/bin/sh", "-c", "head -c 3000000 /usr/bin/sqlite3 | xz -T2 -3 -c | xz -d | md5sum", NULL};
    char *dir = make_tmpdir();
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    char *out = strfmt("LIBPROF_OUTPUT=%s/x.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, bare.out);
    cr_assert_str_eq(r.err, "");
    DIR *d = opendir(dir);
    struct dirent *e;
    int traces = 0;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "x.", 2) || strcmp(e->d_name + strlen(e->d_name) - 5, ".json")) continue;
        cr_expect(python_json_ok(strfmt("%s/%s", dir, e->d_name)), "%s", e->d_name);
        /* a forked shell child's few events before its exec: x.PID.exec-dash.json */
        if (!strstr(e->d_name, ".exec-")) traces++;
    }
    closedir(d);
    /* the shell (x.json, written by the _exit hook) and head, xz, xz -d, md5sum (x.PID.json) */
    cr_expect_eq(traces, 5, "sh, head, xz, xz -d, md5sum: %d traces", traces);
    cr_expect(python_json_ok(strfmt("%s/x.json", dir)), "the shell's own trace");
    run_free(&r);
    run_free(&bare);
}
