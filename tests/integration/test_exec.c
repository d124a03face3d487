/* exec: the image that execs leaves its trace as NAME.exec-EXE.json and the new program takes
 * NAME; a cleaned environment gets libprof back (unless LIBPROF_CHILDREN=0); a failed exec
 * changes nothing for the program and loses nothing from the trace. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(exec, .timeout = 60);

static const char *exe_of(cJSON *j) {
    const char *e = cJSON_GetObjectItem(libprof_meta(j), "executable")->valuestring;
    const char *s = strrchr(e, '/');
    return s ? s + 1 : e;
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(exec, a_launcher_that_execs_leaves_the_name_to_the_program) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    char *cmd = strfmt("exec %s", PROG("allocs"));
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 7);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_assert_str_eq(r.err, "");
    cJSON *prog = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(prog);
    cr_expect_str_eq(exe_of(prog), "allocs");
    cr_expect_eq(meta_fn(libprof_meta(prog), "malloc", "count"), 105);
    char *sh = strfmt("%s/t.exec-dash.json", dir);
    if (access(sh, F_OK) != 0) sh = strfmt("%s/t.exec-sh.json", dir);
    cr_assert(python_json_ok(sh), "no trace of the shell before its exec");
    cJSON *s = load_json(sh);
    cr_expect_eq(meta_num(libprof_meta(s), "pid"), meta_num(libprof_meta(prog), "pid"));
    cJSON_Delete(s);
    cJSON_Delete(prog);
    cr_expect_eq(count_files(dir), 2, "no spool left behind");
    run_free(&r);
}

Test(exec, a_cleaned_environment_gets_libprof_back) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {"/usr/bin/env", "-i", PROG("allocs"), NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 7);
    cJSON *prog = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(prog, "env -i removed libprof and it was not put back");
    cr_expect_str_eq(exe_of(prog), "allocs");
    cr_expect_eq(meta_fn(libprof_meta(prog), "malloc", "count"), 105);
    cJSON_Delete(prog);
    cr_expect(python_json_ok(strfmt("%s/t.exec-env.json", dir)));
    run_free(&r);
}

Test(exec, children_off_means_not_put_back) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_CHILDREN=0", NULL};
    const char *argv[] = {"/usr/bin/env", "-i", PROG("allocs"), NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 7);
    cr_expect_neq(access(strfmt("%s/t.json", dir), F_OK), 0, "allocs was profiled");
    cr_expect(python_json_ok(strfmt("%s/t.exec-env.json", dir)));
    run_free(&r);
}

Test(exec, a_failed_exec_changes_nothing) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_ALLOC_MIN=0", NULL};
    const char *argv[] = {PROG("execfail"), NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "execv 1 execvp 1 execl 1\n");
    cr_assert_str_eq(r.out, bare.out);
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    int before = 0, after = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *size = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "size");
        if (!size || strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "malloc")) continue;
        before += size->valuedouble == 1111;
        after += size->valuedouble == 2222;
    }
    cr_expect_eq(before, 10);
    cr_expect_eq(after, 10);
    cJSON_Delete(j);
    cr_expect_eq(count_files(dir), 1, "exec-name files or the spool left behind");
    run_free(&r);
    run_free(&bare);
}

Test(exec, posix_spawn_with_a_cleaned_environment_is_profiled) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {PROG("spawner"), PROG("allocs"), NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 7, "%s", r.err);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    int n, child = 0;
    char **kids = child_traces(dir, "t", &n);
    for (int i = 0; i < n; i++) {
        cJSON *j = load_json(kids[i]);
        cr_assert_not_null(j);
        if (!strcmp(exe_of(j), "allocs")) {
            child++;
            cr_expect_eq(meta_fn(libprof_meta(j), "malloc", "count"), 105);
        }
        cJSON_Delete(j);
    }
    cr_expect_eq(child, 1, "the spawned program was not profiled");
    run_free(&r);
}

Test(exec, system_children_are_profiled) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    char *script = strfmt("import os; print(os.waitstatus_to_exitcode(os.system('%s')))", PROG("allocs"));
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {"/usr/bin/python3", "-c", script, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n7\n");
    int n, found = 0;
    char **kids = child_traces(dir, "t", &n);
    for (int i = 0; i < n; i++) {
        cJSON *j = load_json(kids[i]);
        cr_assert_not_null(j);
        if (!strcmp(exe_of(j), "allocs")) found++;
        cJSON_Delete(j);
    }
    cr_expect_eq(found, 1, "the program run by system() was not profiled");
    run_free(&r);
}

/* A child that changes user and then execs (subprocess.run(user=...)): the new image, which may
 * not read its traced parent's environment nor take over its files, gets a name of its own where
 * it can write (a sticky directory open to all); where it cannot write, it runs untraced without a
 * word — its stderr, which the parent captures, is what it would be without libprof — and the
 * reason is in the trace of the process that changed user. */
Test(exec, a_child_that_changes_user_keeps_its_stderr) {
    if (geteuid() != 0) cr_skip_test("needs root to change user");
    const char *py =
        "import subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-c', 'print(1)'], user=65534, capture_output=True, text=True)\n"
        "print(repr(r.stdout), repr(r.stderr))\n";
    for (int open_to_all = 1; open_to_all >= 0; open_to_all--) {
        char *dir = make_tmpdir();
        chmod(dir, open_to_all ? 01777 : 0755);
        struct run r;
        run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), NULL},
                 (const char *[]){"/usr/bin/python3", "-c", py, NULL});
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_expect_str_eq(r.out, "'1\\n' ''\n", "the child's output as the parent captured it");
        cr_expect_str_eq(r.err, "");
        int own = 0, said = 0;
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.' || !strcmp(e->d_name, "t.json")) continue;
            size_t l = strlen(e->d_name);
            cr_expect(l > 5 && !strcmp(e->d_name + l - 5, ".json"), "left behind: %s", e->d_name);
            /* the forked child's trace up to its exec (it changed user), or the new image's own */
            cJSON *j = load_json(strfmt("%s/%s", dir, e->d_name));
            cJSON *n = j ? cJSON_GetObjectItem(libprof_meta(j), "notes") : NULL, *x;
            cJSON_ArrayForEach(x, n) said |= strstr(x->valuestring, "takes user id 65534") != NULL;
            const char *cmd = j ? cJSON_GetObjectItem(libprof_meta(j), "command")->valuestring : "";
            size_t cl = strlen(cmd);
            own += cl > 11 && !strcmp(cmd + cl - 11, "-c print(1)"); /* the new image: its command line */
            cJSON_Delete(j);
        }
        if (d) closedir(d);
        if (open_to_all)
            cr_expect_eq(own, 1, "the child has no trace of its own in a directory it can write");
        else
            cr_expect(said && own == 0, "no note of the change of user in the forked child's trace");
        run_free(&r);
    }
}
