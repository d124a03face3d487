/* The annotation API (include/libprof.h + the preload's libprof_* functions), from C, C++ and
 * Python ctypes: programs behave the same with and without libprof, and their ranges, marks and
 * counters appear in the trace, properly nested, checked by an independent Python reader. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(annot, .timeout = 60);

/* Run tests/integration/check_trace.py on `path`; returns its summary (caller deletes). */
static cJSON *check_trace(const char *path) {
    char *err;
    cJSON *j = check_trace_py(path, &err);
    cr_assert_not_null(j, "trace check failed: %s", err);
    return j;
}

static long long count(cJSON *summary, const char *kind, const char *name) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(summary, kind), name);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : 0;
}

/* Run `argv` bare and under the preload writing DIR/t.json; outputs must match. */
static cJSON *profile(const char *const *argv, const char *const *extra_env, char **dir_out) {
    char *dir = make_tmpdir();
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir), *csv = strfmt("LIBPROF_CSV=%s/t.csv", dir);
    const char *env[8] = {"LD_PRELOAD=" PRELOAD, out, csv};
    int k = 3;
    for (int i = 0; extra_env && extra_env[i]; i++) env[k++] = extra_env[i];
    env[k] = NULL;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, bare.status);
    cr_assert_str_eq(r.out, bare.out);
    cr_assert_str_eq(r.err, "");
    run_free(&bare);
    run_free(&r);
    *dir_out = dir;
    return check_trace(strfmt("%s/t.json", dir));
}

Test(annot, c_program_ranges_marks_counters_and_thread_names) {
    const char *argv[] = {PROG("annotated"), NULL};
    char *dir;
    cJSON *s = profile(argv, NULL, &dir);
    cr_expect_eq(count(s, "slices", "inference"), 5);
    cr_expect_eq(count(s, "slices", "layer \"1\""), 5);
    cr_expect_eq(count(s, "slices", "layer 2"), 5);
    cr_expect_eq(count(s, "slices", "background"), 3);
    cr_expect_eq(count(s, "instants", "half"), 5);
    cr_expect_eq(count(s, "counters", "iteration"), 5);
    int worker = 0;
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(s, "threads")) worker += !strcmp(t->valuestring, "annot-worker");
    cr_expect_eq(worker, 1, "thread named through libprof_thread_name");
    cJSON_Delete(s);
    char *csv = read_file(strfmt("%s/t.csv", dir), NULL);
    cr_assert_not_null(csv);
    cr_expect_not_null(strstr(csv, "\ninference,annot,5,"), "%s", csv);
    cr_expect_not_null(strstr(csv, "\n\"layer \"\"1\"\"\",annot,5,"), "%s", csv);
    cr_expect_not_null(strstr(csv, "\nmark,annot,5,"), "%s", csv);
    cr_expect_null(strstr(csv, "\nrange,"), "ranges are reported per name, not as one row");
}

Test(annot, cpp_scopes_pop_when_exceptions_unwind) {
    const char *argv[] = {PROG("annotated_cpp"), NULL};
    char *dir;
    cJSON *s = profile(argv, NULL, &dir);
    cr_expect_eq(count(s, "slices", "request"), 4);
    cr_expect_eq(count(s, "slices", "parse"), 4);
    cJSON_Delete(s);
}

Test(annot, python_ctypes_calls_the_preloaded_functions) {
    const char *argv[] = {"/usr/bin/python3", "-c",
                          "import ctypes\n"
                          "lib = ctypes.CDLL(None)\n"
                          "for i in range(3):\n"
                          "    lib.libprof_range_push(b'inference')\n"
                          "    lib.libprof_range_push(b'matmul')\n"
                          "    lib.libprof_range_pop()\n"
                          "    lib.libprof_range_pop()\n"
                          "lib.libprof_counter(b'loss', ctypes.c_double(0.25))\n"
                          "print('ok')\n",
                          NULL};
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "ok\n");
    cJSON *s = check_trace(strfmt("%s/t.json", dir));
    cr_expect_eq(count(s, "slices", "inference"), 3);
    cr_expect_eq(count(s, "slices", "matmul"), 3);
    cr_expect_eq(count(s, "counters", "loss"), 1);
    cJSON_Delete(s);
    run_free(&r);
}

Test(annot, family_can_be_switched_off) {
    const char *argv[] = {PROG("annotated"), NULL};
    char *dir;
    cJSON *s = profile(argv, (const char *[]){"LIBPROF_EVENTS=alloc", NULL}, &dir);
    cr_expect_eq(count(s, "slices", "inference"), 0);
    cr_expect_eq(count(s, "instants", "half"), 0);
    cJSON_Delete(s);
}

/* make install puts the header, pkg-config file, man page, library and commands in place; a
 * program compiled against the installed header, run through the installed command, is traced. */
Test(annot, installed_files_work_together) {
    char *root = make_tmpdir();
    char *cmd =
        strfmt("make -s -C %s install BUILD=%s PREFIX=/usr DESTDIR=%s >/dev/null && "
               "PKG_CONFIG_SYSROOT_DIR=%s PKG_CONFIG_PATH=%s/usr/lib/pkgconfig pkg-config --cflags --libs libprof",
               LP_SOURCE_DIR, LP_BUILD_DIR, root, root, root);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct run r;
    run_prog(&r, NULL, NULL, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *flags = strdup(r.out);
    flags[strcspn(flags, "\n")] = '\0';
    cr_expect_not_null(strstr(flags, "/usr/include"), "%s", flags);
    run_free(&r);
    const char *files[] = {"/usr/lib/libprof.so",
                           "/usr/bin/libprof",
                           "/usr/bin/libprof-report",
                           "/usr/include/libprof.h",
                           "/usr/include/libprof/format.h",
                           "/usr/share/man/man1/libprof.1",
                           "/usr/share/man/man1/libprof-report.1",
                           NULL};
    for (int i = 0; files[i]; i++) cr_expect_eq(access(strfmt("%s%s", root, files[i]), R_OK), 0, "%s", files[i]);
    char *build = strfmt("cc %s -o %s/annotated %s/tests/progs/annotated.c -lpthread && "
                         "LIBPROF_SO=%s/usr/lib/libprof.so %s/usr/bin/libprof -q -o %s/t.json -- %s/annotated",
                         flags, root, LP_SOURCE_DIR, root, root, root, root);
    const char *argv2[] = {"/bin/sh", "-c", build, NULL};
    run_prog(&r, root, NULL, argv2);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "done 5\n");
    cJSON *s = check_trace(strfmt("%s/t.json", root));
    cr_expect_eq(count(s, "slices", "inference"), 5);
    cJSON_Delete(s);
    run_free(&r);
}
