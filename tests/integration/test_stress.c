/* Load cases for the recording core (tests/progs/stress): many threads at once, many short
 * threads, fork while other threads allocate, malloc in a signal handler. Each must finish
 * (Criterion's timeout catches a hang), print what it prints without libprof, and leave a trace
 * with exactly the program's events. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TestSuite(stress, .timeout = 120);

/* `extra`: one more variable for libprof, or NULL. */
static cJSON *run_mode_with(const char *mode, const char *want_out, char **dir_out, const char *extra) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, extra, NULL};
    const char *argv[] = {PROG("stress"), mode, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s: status %d, %s", mode, r.status, r.err);
    cr_assert_str_eq(r.out, want_out);
    cr_assert_str_eq(r.err, "");
    run_free(&r);
    char *path = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(path));
    cJSON *j = load_json(path);
    cr_assert_not_null(j);
    cr_expect_eq(meta_num(libprof_meta(j), "events_dropped"), 0);
    cr_expect_eq(meta_num(libprof_meta(j), "events_decoded"), meta_num(libprof_meta(j), "events_written"));
    *dir_out = dir;
    return j;
}

static cJSON *run_mode(const char *mode, const char *want_out, char **dir_out) {
    return run_mode_with(mode, want_out, dir_out, NULL);
}

/* forkmt's 20 children, each in its own trace with its 10 mallocs of 4242 bytes. */
static void expect_forkmt_children(const char *dir) {
    int children;
    char **kids = child_traces(dir, "t", &children);
    for (int i = 0; i < children; i++) {
        cJSON *c = load_json(kids[i]);
        cr_assert_not_null(c, "%s", kids[i]);
        cr_expect_eq(meta_fn(libprof_meta(c), "malloc", "count"), 10, "%s", kids[i]);
        cr_expect_eq(meta_fn(libprof_meta(c), "malloc", "bytes"), 42420, "%s", kids[i]);
        cJSON_Delete(c);
    }
    cr_expect_eq(children, 20);
}

Test(stress, sixty_four_threads_at_once) {
    char *dir;
    cJSON *j = run_mode("threads64", "ok\n", &dir);
    cJSON *m = libprof_meta(j);
    cr_expect_eq(meta_fn(m, "malloc", "count"), 64 * 20000 + 1);
    cr_expect_geq(meta_fn(m, "free", "count"), 64 * 20000);
    cr_expect_geq(meta_num(m, "threads"), 65);
    cJSON_Delete(j);
}

Test(stress, a_thousand_short_lived_threads) {
    char *dir;
    cJSON *j = run_mode("short1000", "ok\n", &dir);
    cJSON *m = libprof_meta(j);
    cr_expect_eq(meta_fn(m, "malloc", "count"), 1000 * 100 + 1);
    cr_expect_eq(meta_num(m, "untracked_frees"), 0);
    cJSON_Delete(j);
}

Test(stress, fork_while_other_threads_allocate) {
    char *dir;
    cJSON *j = run_mode("forkmt", "children 20\n", &dir);
    /* the parent never allocates 4242 bytes; each child exactly 10 times, in its own file */
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *size = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "size");
        cr_expect(!size || size->valuedouble != 4242);
    }
    cJSON_Delete(j);
    expect_forkmt_children(dir);
}

Test(stress, malloc_in_a_signal_handler) {
    char *dir;
    cJSON *j = run_mode("signal", "ok\n", &dir);
    /* the handler's own calls are recorded unless they interrupt a recorded call (then they pass
     * through): at least the main loop's 200000 and the stdio buffer */
    cr_expect_geq(meta_fn(libprof_meta(j), "malloc", "count"), 200001);
    cJSON_Delete(j);
}

Test(stress, dlclose_of_a_library_that_allocated) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_ALLOC_MIN=0", NULL};
    const char *argv[] = {PROG("dlhost"), LP_BUILD_DIR "/progs", NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "ok 2\n");
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    int plugin = 0, ctor = 0, freed_after = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *size = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "size");
        if (!size) continue;
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        if (!strcmp(name, "malloc")) plugin += size->valuedouble == 3333, ctor += size->valuedouble == 3001;
        if (!strcmp(name, "free")) freed_after += size->valuedouble == 3333;
    }
    cr_expect_eq(plugin, 10);
    cr_expect_eq(ctor, 2);
    cr_expect_eq(freed_after, 10, "every plugin block's free matched, also after dlclose");
    cr_expect_eq(meta_num(libprof_meta(j), "untracked_frees"), 0);
    cJSON_Delete(j);
    run_free(&r);
}

/* Endings from another thread: exit() called by a worker, and pthread_exit() in main. */
static void ending_case(const char *mode, int status, long long exit_status) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {PROG("stress"), mode, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, status, "%s: %d %s", mode, r.status, r.err);
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j, "no trace");
    cr_expect_geq(meta_fn(libprof_meta(j), "malloc", "count"), 1000);
    cr_expect_eq(meta_num(libprof_meta(j), "exit_status"), exit_status);
    cJSON_Delete(j);
    run_free(&r);
}

Test(stress, exit_from_another_thread) { ending_case("exitthread", 4, 4); }
Test(stress, pthread_exit_in_main) { ending_case("mainexit", 0, -1); }

/* LIBPROF_ALLOC_SAMPLE: most allocations are counted on their thread, not recorded, and the
 * counts are written every 1024 calls, when a thread ends, and at exit — from threads that
 * are still running then too. Every call is in the totals all the same, in the threads' counts
 * and in forked children's own traces; and the trace is a small part of the exact run's. */
Test(stress, counted_allocations_of_threads_and_children_add_up) {
    char *dir;
    const char *sample = "LIBPROF_ALLOC_SAMPLE=65536";
    cJSON *j = run_mode_with("threads64", "ok\n", &dir, sample);
    cJSON *m = libprof_meta(j), *st = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "stacks"), "sampled");
    cr_expect_eq(meta_fn(m, "malloc", "count"), 64 * 20000 + 1);
    cr_expect_geq(meta_fn(m, "free", "count"), 64 * 20000);
    cr_expect_eq(meta_num(m, "untracked_frees"), 0);
    cr_assert_not_null(st, "the trace does not say its allocations are sampled");
    cr_expect_gt(cJSON_GetObjectItem(st, "allocations_counted_only")->valuedouble, 64 * 19000);
    cr_expect_lt(meta_num(m, "events_written"), 64 * 40000 / 20, "every allocation recorded after all: %lld events",
                 meta_num(m, "events_written"));
    cJSON_Delete(j);

    j = run_mode_with("short1000", "ok\n", &dir, sample); /* each thread's last counts, when it ends */
    m = libprof_meta(j);
    cr_expect_eq(meta_fn(m, "malloc", "count"), 1000 * 100 + 1);
    cr_expect_geq(meta_fn(m, "free", "count"), 1000 * 100);
    long long bytes = meta_fn(m, "malloc", "bytes"); /* (and the stdout buffer) */
    cr_expect(bytes > 1000 * 100 * 777 && bytes <= 1000 * 100 * 777 + 65536, "%lld bytes", bytes);
    cr_expect_eq(meta_num(m, "untracked_frees"), 0);
    cJSON_Delete(j);

    j = run_mode_with("forkmt", "children 20\n", &dir, sample);
    cJSON_Delete(j);
    expect_forkmt_children(dir);
}
