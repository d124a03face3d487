/* Recording control: libprof_start/stop/reset, LIBPROF_START=paused with LIBPROF_SIGNAL,
 * LIBPROF_DELAY and LIBPROF_DURATION. tests/progs/phases allocates blocks of 1001, 1002 and
 * 1003 bytes in three phases; the trace must hold exactly the phases that were recorded. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TestSuite(control, .timeout = 60);

struct phases {
    int a, b, c; /* malloc instants of 1001, 1002, 1003 bytes */
    int paused, resumed, reset;
    cJSON *meta;
    cJSON *trace;
};

static struct phases run_phases(const char *mode, const char *const *extra_env) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[8] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_ALLOC_MIN=0"};
    int k = 3;
    for (int i = 0; extra_env && extra_env[i]; i++) env[k++] = extra_env[i];
    env[k] = NULL;
    const char *argv[] = {PROG("phases"), mode, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "ok\n");
    cr_assert_str_eq(r.err, "");
    char *path = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(path));
    struct phases p = {0};
    p.trace = load_json(path);
    cr_assert_not_null(p.trace);
    p.meta = libprof_meta(p.trace);
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(p.trace, "traceEvents")) {
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        if (!strcmp(name, "libprof paused")) p.paused++;
        if (!strcmp(name, "libprof resumed")) p.resumed++;
        if (!strcmp(name, "libprof reset")) p.reset++;
        if (strcmp(name, "malloc")) continue;
        double size = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "size")->valuedouble;
        p.a += size == 1001;
        p.b += size == 1002;
        p.c += size == 1003;
    }
    run_free(&r);
    return p;
}

Test(control, stop_and_start_from_the_program) {
    struct phases p = run_phases("api", NULL);
    cr_expect_eq(p.a, 100);
    cr_expect_eq(p.b, 0, "allocations while stopped must not be recorded");
    cr_expect_eq(p.c, 100);
    cr_expect_eq(p.paused, 1);
    cr_expect_eq(p.resumed, 1);
    /* B's blocks were allocated while paused: their frees are untracked, the heap stays exact */
    cr_expect_eq(meta_num(p.meta, "untracked_frees"), 100);
    cr_expect_eq(meta_num(p.meta, "leaked_bytes"), 0);
    cr_expect_eq(meta_num(p.meta, "peak_bytes"), 1003);
    cr_expect_eq(meta_num(p.meta, "pauses"), 1);
    cJSON_Delete(p.trace);
}

Test(control, reset_drops_what_came_before) {
    struct phases p = run_phases("reset", NULL);
    cr_expect_eq(p.a, 0);
    cr_expect_eq(p.b, 100);
    cr_expect_eq(p.c, 100);
    cr_expect_eq(p.reset, 1);
    cr_expect_eq(meta_fn(p.meta, "malloc", "count"), 200);
    cr_expect_eq(meta_num(p.meta, "peak_bytes"), 100 * 1002 + 1003);
    cr_expect_gt(meta_num(p.meta, "reset_at_ns"), 0);
    cJSON_Delete(p.trace);
}

Test(control, signal_toggles_a_paused_start) {
    struct phases p = run_phases("signal", (const char *[]){"LIBPROF_START=paused", "LIBPROF_SIGNAL=SIGUSR2", NULL});
    cr_expect_eq(p.a, 0);
    cr_expect_eq(p.b, 100);
    cr_expect_eq(p.c, 0);
    cr_expect_eq(p.paused, 2); /* at start, then by the second signal */
    cr_expect_eq(p.resumed, 1);
    cJSON_Delete(p.trace);
}

Test(control, delay_skips_the_start) {
    struct phases p = run_phases("sleep", (const char *[]){"LIBPROF_DELAY=0.5", NULL});
    cr_expect_eq(p.a, 0);
    cr_expect_eq(p.b, 100);
    cr_expect_eq(p.c, 100);
    cJSON_Delete(p.trace);
}

Test(control, duration_ends_recording) {
    struct phases p = run_phases("sleep", (const char *[]){"LIBPROF_DURATION=0.5", NULL});
    cr_expect_eq(p.a, 100);
    cr_expect_eq(p.b, 0);
    cr_expect_eq(p.c, 0);
    cJSON_Delete(p.trace);
}

Test(control, the_programs_own_signal_handler_keeps_working) {
    const char *argv[] = {PROG("phases"), "handler", NULL};
    struct run bare, r;
    run_prog(&bare, NULL, NULL, argv);
    char *dir = make_tmpdir(), *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_SIGNAL=SIGUSR2", NULL};
    run_prog(&r, dir, env, argv);
    cr_expect_eq(r.status, bare.status);
    cr_expect_str_eq(r.out, "handled 2\n");
    cr_expect_str_eq(r.out, bare.out);
    /* a signal the program already ignores is refused, with one warning */
    char *cmd = strfmt("trap '' USR2; exec %s api", PROG("phases"));
    const char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    run_prog(&r, dir, env, sh);
    cr_expect_eq(r.status, 0);
    cr_expect_eq(count_lines_with(r.err, "libprof: LIBPROF_SIGNAL: the program already handles signal"), 1, "%s",
                 r.err);
    run_free(&r);
    run_free(&bare);
}
