/* Crashes (issue 14): whatever kills the program — a fault on any thread, abort, a bus error, a
 * division by zero, an unhandled SIGQUIT or SIGHUP, the program's own handler re-raising — the
 * JSON and the CSV appear at the asked paths with every event recorded before the signal, and
 * the program ends exactly as it would have without libprof: same status, same core dump, same
 * output, nothing more on stderr. tests/progs/crashers.c is the held-out set of programs. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(crashes, .timeout = 120);

struct ending {
    cJSON *json, *meta;
    long long csv_malloc, csv_free; /* the CSV's counts */
};

/* The count column of row `name` in the CSV text (-1 when absent). */
static long long csv_count(const char *csv, const char *name) {
    char *needle = strfmt("\n%s,", name);
    const char *row = strstr(csv, needle);
    free(needle);
    if (!row) return -1;
    const char *p = strchr(row + 1, ','); /* after the name */
    p = p ? strchr(p + 1, ',') : NULL;    /* after the category */
    return p ? atoll(p + 1) : -1;
}

/* Run crashers MODE bare and preloaded in fresh directories, compare the endings, load what the
 * preloaded run left at the asked paths. */
static struct ending die(const char *mode, int sig) {
    char *bdir = make_tmpdir(), *dir = make_tmpdir();
    const char *argv[] = {PROG("crashers"), mode, NULL};
    struct run bare, r;
    run_prog(&bare, bdir, NULL, argv);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir),
                         strfmt("LIBPROF_CSV=%s/t.csv", dir), NULL};
    run_prog(&r, dir, env, argv);
    cr_assert_eq(bare.status, 128 + sig, "%s: bare status %d", mode, bare.status);
    cr_assert_eq(r.status, bare.status, "%s: status %d, bare %d", mode, r.status, bare.status);
    cr_expect_eq(r.core, bare.core, "%s: core dump %d, bare %d", mode, r.core, bare.core);
    cr_expect_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err, "%s: stderr", mode);
    cr_expect_neq(access(strfmt("%s/t.json.lpt", dir), F_OK), 0, "%s: the raw spool is left behind", mode);
    char *json = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(json), "%s: no valid JSON at the asked path", mode);
    struct ending e = {load_json(json), NULL, -1, -1};
    cr_assert_not_null(e.json);
    e.meta = libprof_meta(e.json);
    cr_expect_eq(meta_num(e.meta, "signal"), sig, "%s", mode);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(e.meta, "complete")), "%s: trace not complete", mode);
    char *csv = read_file(strfmt("%s/t.csv", dir), NULL);
    cr_assert_not_null(csv, "%s: no CSV at the asked path", mode);
    e.csv_malloc = csv_count(csv, "malloc");
    e.csv_free = csv_count(csv, "free");
    cr_expect_eq(e.csv_malloc, meta_fn(e.meta, "malloc", "count"), "%s: CSV and JSON disagree", mode);
    cr_expect_eq(e.csv_free, meta_fn(e.meta, "free", "count"), "%s: CSV and JSON disagree", mode);
    free(csv);
    run_free(&r);
    run_free(&bare);
    return e;
}

/* The main thread's known allocations: 1000 malloc, 990 free. */
static void exact(const char *mode, int sig) {
    struct ending e = die(mode, sig);
    cr_expect_eq(meta_fn(e.meta, "malloc", "count"), 1000, "%s", mode);
    cr_expect_eq(meta_fn(e.meta, "free", "count"), 990, "%s", mode);
    cJSON_Delete(e.json);
}

Test(crashes, segv) { exact("segv", SIGSEGV); }
Test(crashes, abort) { exact("abort", SIGABRT); }
Test(crashes, bus_error) { exact("bus", SIGBUS); }
Test(crashes, division_by_zero) { exact("fpe", SIGFPE); }
Test(crashes, the_programs_handler_runs_first) { exact("rehandle", SIGSEGV); }
Test(crashes, unhandled_quit) { exact("quit", SIGQUIT); }
Test(crashes, unhandled_hup) { exact("hup", SIGHUP); }

Test(crashes, fault_on_a_second_thread) {
    struct ending e = die("thread", SIGSEGV);
    cr_expect_eq(meta_fn(e.meta, "malloc", "count"), 1500);
    cr_expect_eq(meta_fn(e.meta, "free", "count"), 1490);
    cJSON_Delete(e.json);
}

/* The other thread allocates until the end: its count is whatever it reached, but every pair it
 * finished is whole, and its last malloc may lack its free — never the other way round. */
Test(crashes, fault_while_another_thread_allocates) {
    struct ending e = die("racing", SIGSEGV);
    long long m = meta_fn(e.meta, "malloc", "count"), f = meta_fn(e.meta, "free", "count");
    cr_expect_gt(m, 1000);
    cr_expect(m - f == 10 || m - f == 11, "malloc %lld, free %lld", m, f);
    cJSON_Delete(e.json);
}

/* With core dumps allowed, the preloaded run dumps core exactly when the bare one does. */
Test(crashes, core_dumps_as_without_libprof) {
    run_core_limit = 256L << 20;
    const char *modes[] = {"segv", "abort", "quit", "hup"};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        char *bdir = make_tmpdir(), *dir = make_tmpdir();
        const char *argv[] = {PROG("crashers"), modes[i], NULL};
        struct run bare, r;
        run_prog(&bare, bdir, NULL, argv);
        const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), NULL};
        run_prog(&r, dir, env, argv);
        cr_expect_eq(r.status, bare.status, "%s", modes[i]);
        cr_expect_eq(r.core, bare.core, "%s: core %d, bare %d", modes[i], r.core, bare.core);
        cr_expect_eq(access(strfmt("%s/core", dir), F_OK), access(strfmt("%s/core", bdir), F_OK), "%s", modes[i]);
        cr_expect(python_json_ok(strfmt("%s/t.json", dir)), "%s", modes[i]);
        run_free(&r);
        run_free(&bare);
    }
    run_core_limit = 0;
}

/* SIGKILL runs no handler: the spool keeps the chunks already written, and the call stacks those
 * chunks name are in it too (written before each chunk), so it decodes with them. */
Test(crashes, a_killed_spool_decodes_with_its_stacks) {
    char *dir = make_tmpdir();
    const char *argv[] = {PROG("crashers"), "kill", NULL};
    char *lpt = strfmt("%s/t.lpt", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=8",
                         "LIBPROF_BUFFER_KB=4", NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 128 + SIGKILL);
    char *folded = strfmt("%s/f.txt", dir);
    const char *conv[] = {REPORT, lpt, "--folded", folded, "-q", NULL};
    struct run c;
    run_prog(&c, NULL, NULL, conv);
    cr_assert_eq(c.status, 0, "%s", c.err);
    char *text = read_file(folded, NULL);
    cr_assert_not_null(text);
    /* the 20000 blocks of 32 bytes from grow_here, less at most the last unwritten chunks */
    const char *line = strstr(text, "grow_here");
    cr_assert_not_null(line, "no grow_here frame in:\n%.2000s", text);
    const char *end = strchr(line, '\n');
    const char *sp = end ? end : line + strlen(line);
    while (sp > line && sp[-1] != ' ') sp--;
    long long bytes = atoll(sp);
    cr_expect_gt(bytes, 32 * 19000LL, "grow_here: %lld bytes", bytes);
    cr_expect_leq(bytes, 32 * 20000LL, "grow_here: %lld bytes", bytes);
    free(text);
    run_free(&c);
    run_free(&r);
}
