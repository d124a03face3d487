/* Reliability: what services and daemons meet — a file-size limit, a double-fork daemon that
 * changes directory, a full table of descriptors, a thread that writes to descriptors it does not
 * own, a caller that reads the program's stderr through a pipe while a background conversion
 * runs, many processes converting at once, a killed child nobody reaps, the exit status of main,
 * a statically linked program. In each case the program behaves as without libprof, and the trace
 * is complete or says what is missing. tests/progs/reliab.c is the program. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

TestSuite(reliab, .timeout = 180);

static cJSON *meta_of(const char *path) {
    cr_assert(python_json_ok(path), "%s is not valid JSON", path);
    cJSON *j = load_json(path);
    cr_assert_not_null(j);
    return j;
}

/* `libprof-report --wait FILE`: 0 once the trace is complete. */
static int wait_trace(const char *file) {
    struct run w;
    const char *argv[] = {REPORT, "--wait", file, "--timeout", "60", NULL};
    run_prog(&w, NULL, NULL, argv);
    int rc = w.status;
    if (rc) fprintf(stderr, "wait %s: %s", file, w.err);
    run_free(&w);
    return rc;
}

/* A file-size limit (bash's ulimit -f 400: 400 KiB) smaller than the spool: the program ends as it would
 * bare (status 0, not SIGXFSZ's 153), one line says recording stopped, and the trace is there,
 * cut short, with the number of events dropped. */
Test(reliab, file_size_limit_stops_recording_never_kills) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("ulimit -f 400; exec %s fsize 400000", PROG("reliab"));
    const char *argv[] = {"/bin/bash", "-c", cmd, NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), NULL};
    run_prog(&r, dir, env, argv);
    cr_assert_eq(bare.status, 0);
    cr_assert_eq(r.status, 0, "status %d (153 = SIGXFSZ): %s", r.status, r.err);
    cr_expect_str_eq(r.out, bare.out);
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 1, "%s", r.err);
    cr_expect_eq(count_lines_with(r.err, "file-size limit"), 1, "%s", r.err);
    cJSON *j = meta_of(strfmt("%s/t.json", dir));
    cJSON *m = libprof_meta(j);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(m, "complete")));
    cr_expect_gt(meta_num(m, "events_dropped"), 0);
    cr_expect_gt(meta_fn(m, "malloc", "count"), 0, "what was written before the limit is there");
    cr_expect_eq(meta_num(m, "exit_status"), 0);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* The grandchild pid a daemon mode wrote in DIR/daemon.done, waiting for it. */
static int daemon_pid(const char *dir) {
    char *path = strfmt("%s/daemon.done", dir);
    for (int i = 0; i < 600; i++) {
        char *t = read_file(path, NULL);
        int pid = 0;
        if (t && sscanf(t, "done %d", &pid) == 1) {
            free(t);
            return pid;
        }
        free(t);
        usleep(50 * 1000);
    }
    return 0;
}

/* A classic double-fork daemon (setsid, chdir /, every descriptor closed, stdio to /dev/null)
 * with a relative LIBPROF_OUTPUT: every process of the lineage writes where the run began, none
 * into /. */
Test(reliab, daemon_writes_where_the_run_began) {
    char *dir = make_tmpdir();
    const char *argv[] = {PROG("reliab"), "daemon", "300000", dir, NULL};
    struct run r;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, "LIBPROF_OUTPUT=t_%p.json", NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    int pid = daemon_pid(dir);
    cr_assert_gt(pid, 0, "the daemon did not finish");
    char *trace = strfmt("%s/t_%d.json", dir, pid);
    cr_assert_eq(wait_trace(trace), 0);
    cr_expect_neq(access(strfmt("/t_%d.json", pid), F_OK), 0, "the daemon's trace went to /");
    cJSON *j = meta_of(trace);
    cr_expect_geq(meta_fn(libprof_meta(j), "malloc", "count"), 300000);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(libprof_meta(j), "complete")));
    cJSON_Delete(j);
    run_free(&r);
}

/* The same daemon execs a program from /: the new image's relative pattern is resolved where
 * the run began too (LIBPROF_DIR goes with the exec). */
Test(reliab, daemon_exec_from_root_writes_where_the_run_began) {
    char *dir = make_tmpdir();
    const char *argv[] = {PROG("reliab"), "daemon-exec", PROG("reliab"), "200000", NULL};
    struct run r;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, "LIBPROF_OUTPUT=out/t_%p.json", NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    /* the exec'd image ends with the grandchild's trace under the plain name: wait for any */
    char *out = strfmt("%s/out", dir);
    int found = 0;
    for (int i = 0; i < 600 && !found; i++) {
        DIR *d = opendir(out);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            int pid;
            char tail[16];
            if (sscanf(e->d_name, "t_%d.%15s", &pid, tail) == 2 && !strcmp(tail, "json")) {
                char *trace = strfmt("%s/%s", out, e->d_name);
                if (wait_trace(trace) == 0) {
                    cJSON *j = meta_of(trace);
                    long long n = meta_fn(libprof_meta(j), "malloc", "count");
                    found = n >= 200000 ? pid : found;
                    cJSON_Delete(j);
                }
            }
        }
        if (d) closedir(d);
        if (!found) usleep(50 * 1000);
    }
    cr_expect(found, "no trace of the exec'd daemon program under %s", out);
    cr_expect_neq(access(strfmt("/out/t_%d.json", found), F_OK), 0, "a trace went to /out");
    run_free(&r);
}

/* A program holding every descriptor its limit allows while it allocates: the chunks written
 * meanwhile go through a helper of libprof's with a table of its own, nothing is dropped, and
 * the program's own count of descriptors is what it is without libprof. */
Test(reliab, full_descriptor_table_loses_nothing) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("ulimit -n 32; exec %s fds 300000", PROG("reliab"));
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), "LIBPROF_BUFFER_KB=16", NULL};
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, bare.out, "the program opened as many descriptors as bare");
    cr_expect_not_null(strstr(r.out, "full 1"), "%s", r.out);
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 0, "%s", r.err);
    cJSON *j = meta_of(strfmt("%s/t.json", dir));
    cJSON *m = libprof_meta(j);
    cr_expect_eq(meta_num(m, "events_dropped"), 0);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(m, "complete")));
    cr_expect_geq(meta_fn(m, "malloc", "count"), 600000);
    cr_expect_eq(meta_fn(m, "malloc", "count"), meta_fn(m, "free", "count") + meta_num(m, "leaked_blocks"));
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* A thread that writes "abc\n" to, and closes, every descriptor number from 3 to 63 while the
 * main thread allocates (chunks are written all along): the trace decodes, complete, with every
 * allocation; the program's output is as bare. Several runs: the race is a matter of timing. */
Test(reliab, stray_writes_and_closes_do_not_damage_the_trace) {
    for (int run = 0; run < 4; run++) {
        char *dir = make_tmpdir();
        const char *argv[] = {PROG("reliab"), "stray", "400000", NULL};
        struct run r;
        const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), "LIBPROF_BUFFER_KB=8",
                             NULL};
        run_prog(&r, dir, env, argv);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_expect_str_eq(r.out, "mallocs 400000\n");
        cr_expect_eq(count_lines_with(r.err, "libprof:"), 0, "%s", r.err);
        cJSON *j = meta_of(strfmt("%s/t.json", dir));
        cJSON *m = libprof_meta(j);
        cr_expect_eq(meta_num(m, "events_dropped"), 0);
        cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(m, "complete")), "run %d: not complete", run);
        cr_expect_geq(meta_fn(m, "malloc", "count"), 400000);
        cJSON_Delete(j);
        run_free(&r);
    }
}

/* LIBPROF_CONVERT=background, the program's stderr read through a pipe (run_prog reads both
 * outputs to their end): the converter holds none of the program's descriptors, so its summary
 * goes to NAME.log, never into what the caller captured; --wait then finds the trace whole. */
Test(reliab, background_conversion_holds_nothing_of_the_callers) {
    char *dir = make_tmpdir();
    const char *argv[] = {PROG("reliab"), "fsize", "1000000", NULL};
    struct run r;
    char *json = strfmt("%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), "LIBPROF_CONVERT=background",
                         "LIBPROF_SUMMARY=1", NULL};
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "mallocs 1000000\n");
    cr_expect_str_eq(r.err, "", "the converter wrote into the caller's pipe");
    cr_assert_eq(wait_trace(json), 0);
    cr_expect_neq(access(strfmt("%s.lpt", json), F_OK), 0, "the spool is left");
    cJSON *j = meta_of(json);
    cr_expect_geq(meta_fn(libprof_meta(j), "malloc", "count"), 1000000);
    cJSON_Delete(j);
    char *log = read_file(strfmt("%s.log", json), NULL);
    cr_assert_not_null(log, "the summary asked for is in t.json.log");
    cr_expect_not_null(strstr(log, "malloc"), "%s", log);
    run_free(&r);
}

/* Many processes of one run, background conversions, killed children: one converter per spool —
 * no "No such file", no "cannot remove", no spool left, every trace there once. */
Test(reliab, one_spool_one_converter) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("for i in 1 2 3 4 5 6 7 8; do %s status 0 & done; "
                       "timeout -s KILL 0.2 sleep 5; %s status 0; wait",
                       PROG("reliab"), PROG("reliab"));
    const char *argv[] = {"/bin/bash", "-c", cmd, NULL};
    struct run r;
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir),
                         "LIBPROF_CONVERT=background", NULL};
    run_prog(&r, dir, env, argv);
    cr_expect_eq(count_lines_with(r.err, "libprof"), 0, "%s", r.err);
    /* wait for every trace of the run, then look at what is there */
    int traces = 0, logs = 0, spools = 0;
    char *t = strfmt("%s/t", dir);
    for (int pass = 0; pass < 2; pass++) {
        DIR *d = opendir(t);
        cr_assert_not_null(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t n = strlen(e->d_name);
            if (n > 4 && !strcmp(e->d_name + n - 4, ".lpt") && pass == 0) {
                char *json = strfmt("%s/%.*s", t, (int)(n - 4), e->d_name);
                cr_expect_eq(wait_trace(json), 0, "%s", json);
            }
            if (pass == 1) {
                traces += n > 5 && !strcmp(e->d_name + n - 5, ".json");
                logs += n > 4 && !strcmp(e->d_name + n - 4, ".log");
                spools += n > 4 && !strcmp(e->d_name + n - 4, ".lpt");
                if (n > 4 && !strcmp(e->d_name + n - 4, ".log"))
                    fprintf(stderr, "%s: %s", e->d_name, read_file(strfmt("%s/%s", t, e->d_name), NULL));
            }
        }
        closedir(d);
    }
    cr_expect_eq(spools, 0, "raw spools left behind");
    cr_expect_eq(logs, 0, "a converter had something to say");
    cr_expect_geq(traces, 11, "bash, 9 reliab, timeout, sleep: %d traces", traces);
    run_free(&r);
}

/* A child killed by SIGKILL whose killer dies with it (timeout -s KILL kills its process group)
 * and whose shell execs its last command: the last process of the run converts it. */
Test(reliab, killed_orphan_is_converted_by_the_run) {
    char *dir = make_tmpdir();
    const char *argv[] = {"/bin/bash", "-c", "timeout -s KILL 0.3 sleep 5; /bin/true", NULL};
    struct run r;
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir), NULL};
    run_prog(&r, dir, env, argv);
    char *t = strfmt("%s/t", dir);
    char *sleep_json = NULL;
    for (int i = 0; i < 200 && !sleep_json; i++) {
        DIR *d = opendir(t);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL)
            if (!strncmp(e->d_name, "sleep_", 6) && strlen(e->d_name) > 4 &&
                (!strcmp(e->d_name + strlen(e->d_name) - 4, ".lpt") ||
                 !strcmp(e->d_name + strlen(e->d_name) - 5, ".json"))) { /* (not its converter's .log) */
                size_t n = strlen(e->d_name);
                sleep_json =
                    strfmt("%s/%.*s", t, (int)(n > 4 && !strcmp(e->d_name + n - 4, ".lpt") ? n - 4 : n), e->d_name);
            }
        if (d) closedir(d);
        if (!sleep_json) usleep(20 * 1000);
    }
    cr_assert_not_null(sleep_json, "no trace of sleep at all");
    if (wait_trace(sleep_json) != 0) { /* (what a converter said, and which processes are left: to tell why) */
        char *log = read_file(strfmt("%s.log", sleep_json), NULL);
        system(strfmt("ls -la %s >&2; ps -eo pid,ppid,stat,args | grep -E 'sleep|timeout|libprof-report' >&2", t));
        cr_assert_fail("sleep's raw trace is not converted; its converter's log: %s", log ? log : "(none)");
    }
    cr_expect_neq(access(strfmt("%s.lpt", sleep_json), F_OK), 0);
    cJSON *j = meta_of(sleep_json);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(libprof_meta(j), "complete")), "a killed process's trace is partial");
    cJSON_Delete(j);
    run_free(&r);
}

/* The status main returns (not through exit()), and a program that only returns 1. */
Test(reliab, exit_status_when_main_returns) {
    char *dir = make_tmpdir();
    struct run r;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/s.json", dir), NULL},
             (const char *[]){PROG("reliab"), "status", "5", NULL});
    cr_assert_eq(r.status, 5);
    cJSON *j = meta_of(strfmt("%s/s.json", dir));
    cr_expect_eq(meta_num(libprof_meta(j), "exit_status"), 5);
    cJSON_Delete(j);
    run_free(&r);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/f.json", dir), NULL},
             (const char *[]){"/bin/false", NULL});
    cr_assert_eq(r.status, 1);
    j = meta_of(strfmt("%s/f.json", dir));
    cr_expect_eq(meta_num(libprof_meta(j), "exit_status"), 1);
    cJSON_Delete(j);
    run_free(&r);
}

/* The output directory removed while the program runs: the line says the trace is lost, not
 * that a raw trace was kept where there is none. */
Test(reliab, removed_output_directory_is_said_as_it_is) {
    char *dir = make_tmpdir();
    char *code = strfmt("import shutil; shutil.rmtree('%s/out')", dir);
    struct run r;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/out/t.json", dir), NULL},
             (const char *[]){"/usr/bin/python3", "-c", code, NULL});
    cr_assert_eq(r.status, 0);
    cr_expect_eq(count_lines_with(r.err, "raw trace kept"), 0, "%s", r.err);
    cr_expect_eq(count_lines_with(r.err, "the trace is lost"), 1, "%s", r.err);
    run_free(&r);
}

/* A profiled process that execs a statically linked program notes once, in its own trace, that it
 * cannot be profiled (nothing on the program's stderr); the program runs as it would. */
Test(reliab, static_program_is_named_once) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("%s status 0; %s status 3", PROG("static_reliab"), PROG("static_reliab"));
    const char *argv[] = {"/bin/bash", "-c", cmd, NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), NULL}, argv);
    cr_assert_eq(bare.status, 3);
    cr_expect_eq(r.status, 3);
    cr_expect_str_eq(r.err, bare.err);
    int noted = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".json")) noted += notes_with(strfmt("%s/%s", dir, e->d_name), "statically linked");
    if (d) closedir(d);
    cr_expect_eq(noted, 2, "one note per process that execs it");
    run_free(&r);
    run_free(&bare);
}

/* fork while another thread is inside the dynamic loader (dl_iterate_phdr holding its lock): the
 * child, whose first allocations capture their stacks (libunwind asks the loader), must not wait
 * for a lock held by a thread it does not have. Each fork waits until no other thread is inside
 * the loader through libprof; before, every such child hung (a forked CPython test worker did). */
Test(reliab, fork_while_another_thread_is_in_the_loader, .timeout = 240) {
    char *dir = make_tmpdir();
    const char *argv[] = {PROG("forkloader"), "20", NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    cr_assert_str_eq(bare.out, "forks 20 hung 0\n");
    run_prog(
        &r, dir,
        (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), "LIBPROF_STACKS=16", NULL},
        argv);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, bare.out);
    run_free(&r);
    run_free(&bare);
}
