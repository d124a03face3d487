/* Endings by signal: the exit status is the one without libprof (128 + signal), every event
 * recorded before the signal reaches the trace, and the program cannot tell libprof's handlers
 * are there. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(signals, .timeout = 60);

/* Run crash MODE bare and preloaded; returns the trace's metadata. Whatever the ending, the
 * JSON is at the asked path, written by the preload (a fresh libprof-report for a signal) with
 * nothing said on stderr, and no raw spool is left behind. */
static cJSON *ending(const char *mode, int want_status) {
    char *dir = make_tmpdir();
    const char *argv[] = {PROG("crash"), mode, NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    run_prog(&r, dir, env, argv);
    cr_assert_eq(bare.status, want_status);
    cr_assert_eq(r.status, want_status, "%s: status %d", mode, r.status);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err);
    cr_expect_neq(access(strfmt("%s/t.json.lpt", dir), F_OK), 0, "the raw spool is left behind");
    char *json = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(json));
    cJSON *j = load_json(json);
    cr_assert_not_null(j);
    run_free(&r);
    run_free(&bare);
    return j;
}

static void check(cJSON *j, int sig) {
    cJSON *m = libprof_meta(j);
    cr_expect_eq(meta_fn(m, "malloc", "count"), 51);
    cr_expect_eq(meta_fn(m, "free", "count"), 50);
    cr_expect_eq(meta_num(m, "leaked_bytes"), 6666);
    cr_expect_eq(meta_num(m, "signal"), sig);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(m, "complete")));
    cJSON_Delete(j);
}

Test(signals, segfault_keeps_every_event) { check(ending("segv", 128 + 11), 11); }
Test(signals, abort_keeps_every_event) { check(ending("abort", 128 + 6), 6); }
Test(signals, sent_segv_still_kills) { check(ending("sentsegv", 128 + 11), 11); }
Test(signals, sigterm_writes_the_whole_trace) { check(ending("term", 128 + 15), 15); }

Test(signals, the_programs_handler_runs) {
    char *dir = make_tmpdir();
    const char *argv[] = {PROG("crash"), "handler", NULL};
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_expect_eq(r.status, 7);
    cr_expect_str_eq(r.out, "caught\n");
    /* its handler ended the process with _exit: the trace is complete */
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    cr_expect_eq(meta_num(libprof_meta(j), "exit_status"), 7);
    cJSON_Delete(j);
    run_free(&r);
}

Test(signals, handlers_are_invisible) {
    const char *argv[] = {PROG("crash"), "dispositions", NULL};
    const char *env[] = {"LD_PRELOAD=" PRELOAD, "LIBPROF_SUMMARY=0", "LIBPROF_CSV=/dev/null/x", NULL};
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    env[2] = out;
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_expect_str_eq(r.out, "segv 1 int 1 term 1\n");
    run_free(&r);
    /* Python installs its KeyboardInterrupt handler only over SIG_DFL */
    const char *py[] = {"/usr/bin/python3", "-c",
                        "import signal; print(signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGSEGV))",
                        NULL};
    struct run bare;
    run_prog(&bare, dir, NULL, py);
    run_prog(&r, dir, env, py);
    cr_expect_str_eq(r.out, bare.out);
    cr_expect_not_null(strstr(r.out, "default_int_handler"));
    run_free(&r);
    run_free(&bare);
}

/* A process ended by SIGTERM (a multiprocessing.Pool's workers all are) leaves what a normal
 * exit leaves, whatever it was asked to write: its outputs, never its raw spool or the
 * converter's log (a .pftrace run used to keep NAME.pftrace.lpt: the converter removed the raw
 * trace only after a JSON or CSV). */
Test(signals, sigterm_leaves_only_the_outputs_of_every_kind) {
    static const struct {
        const char *env[5], *files;
    } cases[] = {
        {{"LIBPROF_OUTPUT=a.pftrace"}, "a.pftrace"},
        {{"LIBPROF_OUTPUT=b.pftrace", "LIBPROF_STACKS=8", "LIBPROF_FLAMEGRAPH=1", "LIBPROF_SUMMARY=1"},
         "b.alloc.folded b.leaks.folded b.peak.folded b.pftrace b.speedscope.json"},
        {{"LIBPROF_OUTPUT=c.json", "LIBPROF_CSV=c.csv"}, "c.csv c.json"},
        {{"LIBPROF_OUTPUT=d.json", "LIBPROF_KEEP_RAW=1"}, "d.json d.json.lpz"},
        {{"LIBPROF_OUTPUT=e.lpt", "LIBPROF_SUMMARY=1"}, "e.lpt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = make_tmpdir();
        const char *env[8] = {"LD_PRELOAD=" PRELOAD};
        for (int k = 0; k < 5 && cases[i].env[k]; k++) env[k + 1] = cases[i].env[k];
        struct run r;
        run_prog(&r, dir, env, (const char *[]){PROG("crash"), "term", NULL});
        cr_expect_eq(r.status, 128 + 15, "%s: status %d", cases[i].env[0], r.status);
        char *names = dir_names(dir);
        cr_expect_str_eq(names, cases[i].files, "%s: left %s", cases[i].env[0], names);
        if (strstr(cases[i].files, ".pftrace")) /* (the summary names the trace, not the spool that went) */
            cr_expect(!strstr(r.err, ".lpt") && (!strstr(r.err, "libprof:") || strstr(r.err, ".pftrace\n")), "%s",
                      r.err);
        free(names);
        run_free(&r);
    }
}

/* A signal that comes while a thread writes its events on its way into a wait (its first wait
 * writes all it recorded: with stacks, a while) interrupts the wait as it would have a moment
 * later: CPython's time.sleep, whose handler only sets a flag, is not slept through (the child
 * slept its whole 30 s in CPython's own test of this). */
Test(signals, a_signal_during_the_write_before_a_wait_interrupts_it) {
    char *dir = make_tmpdir();
    const char *argv[] = {"/usr/bin/python3", LP_SOURCE_DIR "/tests/progs/sigwait.py", NULL};
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), "LIBPROF_STACKS=16", NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    cr_assert_str_eq(bare.out, "interrupted: True status: -2\n", "%s", bare.err);
    run_prog(&r, dir, env, argv);
    cr_expect_str_eq(r.out, bare.out, "%s", r.err);
    cr_expect_eq(r.status, 0);
    run_free(&bare);
    run_free(&r);
}

/* A signal sent to a thread on its way into a wait, its action changed right after (to SIG_IGN):
 * without libprof it finds the thread asleep and its handler runs. libprof holds signals while
 * the thread writes its records before the wait; the change of action waits until they are let
 * through, so the handler runs as it would have (the kernel used to drop the held signal when
 * its action became SIG_IGN). tests/progs/sigswitch.c sees the moment in /proc; where it does
 * not (a write too quick to see), it runs again, up to five times. */
Test(signals, a_signal_held_before_a_wait_meets_the_action_it_was_sent_under) {
    char *dir = make_tmpdir();
    const char *argv[] = {PROG("sigswitch"), NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    cr_assert_str_eq(bare.out, "window 0 handled 1\n", "%s", bare.err);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.lpt", dir), "LIBPROF_STACKS=16",
                         "LIBPROF_BUFFER_KB=65536", NULL};
    int seen = 0;
    for (int attempt = 0; attempt < 5 && !seen; attempt++) {
        run_prog(&r, dir, env, argv);
        cr_assert_eq(r.status, 0, "%s", r.err);
        seen = !strcmp(r.out, "window 1 handled 1\n");
        cr_expect(seen || !strcmp(r.out, "window 0 handled 1\n"), "the handler did not run: %s", r.out);
        run_free(&r);
    }
    cr_expect(seen, "the moment of held signals was never seen in five runs");
    run_free(&bare);
}

/* SIGKILL cannot be caught: what was flushed must still decode, and the tool must say the trace
 * was cut short. */
Test(signals, sigkill_leaves_a_decodable_spool) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("LD_PRELOAD=%s LIBPROF_OUTPUT=%s/t.json LIBPROF_BUFFER_KB=4 %s forever & "
                       "sleep 0.5; kill -9 $!; wait $!; echo killed $?",
                       PRELOAD, dir, PROG("stress"));
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct run r;
    run_prog(&r, dir, NULL, argv);
    cr_assert_str_eq(r.out, "running\nkilled 137\n", "%s", r.err);
    run_free(&r);
    char *lpt = strfmt("%s/t.json.lpt", dir), *json = strfmt("%s/k.json", dir);
    const char *conv[] = {REPORT, lpt, "--chrome", json, NULL};
    run_prog(&r, NULL, NULL, conv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "cut short"), "%s", r.err);
    cr_assert(python_json_ok(json));
    cJSON *j = load_json(json);
    cJSON *m = libprof_meta(j);
    cr_expect_gt(meta_fn(m, "malloc", "count"), 1000, "chunks flushed before the kill decode");
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(m, "complete")));
    cJSON_Delete(j);
    run_free(&r);
}

/* A setgid program runs in secure-execution mode: libprof must stay off and write nothing
 * (ld.so ignores LD_PRELOAD paths there; libprof checks AT_SECURE as well). Needs root. */
Test(signals, setgid_programs_are_not_profiled) {
    if (geteuid() != 0) cr_skip_test("needs root to make a setgid program");
    char *dir = make_tmpdir();
    char *prog = strfmt("%s/allocs-sgid", dir);
    char *cmd = strfmt("cp %s %s && chgrp nogroup %s && chmod g+s %s", PROG("allocs"), prog, prog, prog);
    if (system(cmd) != 0) cr_skip_test("cannot make a setgid copy here");
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {prog, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_expect_eq(r.status, 7);
    cr_expect_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_expect_neq(access(strfmt("%s/t.json", dir), F_OK), 0, "a setgid program was profiled");
    cr_expect_neq(access(strfmt("%s/t.json.lpt", dir), F_OK), 0);
    run_free(&r);
}
