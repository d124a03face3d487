/* The exit conversion: LIBPROF_CONVERT=background lets the program end without waiting — a
 * detached libprof-report writes the same JSON and CSV and removes the spool — and the
 * conversion's own time is reported where the user asks (LIBPROF_VERBOSE, LIBPROF_LOG), never on
 * the program's stderr otherwise. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
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

/* libprof's messages never reach the program's stderr unasked: LIBPROF_LOG=FILE takes every one of
 * them (here the conversion's time, which LIBPROF_VERBOSE asks for), appended, and stderr is the
 * program's alone; a note is kept in the trace as well. */
Test(convert, messages_go_to_the_log_the_user_names) {
    char *dir = make_tmpdir();
    char *log = strfmt("%s/lp-%%p.log", dir);
    struct run bare, r;
    run_prog(&bare, dir, NULL, sql);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), "LIBPROF_VERBOSE=1",
                         strfmt("LIBPROF_LOG=%s", log), NULL};
    run_prog(&r, dir, env, sql);
    cr_assert_eq(r.status, 0);
    cr_expect_str_eq(r.err, bare.err);
    glob_t g;
    cr_assert_eq(glob(strfmt("%s/lp-*.log", dir), 0, NULL, &g), 0, "no log written");
    cr_assert_eq(g.gl_pathc, 1);
    char *text = read_file(g.gl_pathv[0], NULL);
    cr_assert_not_null(text);
    cr_expect_eq(count_lines_with(text, "libprof: converting "), 1, "%s", text);
    cr_expect_gt(count_lines_with(text, "libprof: "), 1, "%s", text);
    globfree(&g);
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

/* The converter's allocation fast path (convert.c) applies runs of malloc/free/realloc records
 * in place of the general path; it must change nothing. Real traces — threads interleaving,
 * stacks, timed reallocs, blocks big enough for the writers, a reset, Python frames — converted
 * both ways give the same files, byte for byte (the JSON but for the count of events the fast
 * path took, which must be most of them one way and none the other). The general path also
 * leaves the "heap by site" track to a pass over the events of its own, where the fast one has
 * the pass keep its series as it goes: the same track both ways, and its last instant adds up to
 * what leaked (the heap's bytes at the end; a sampled trace's sites are estimates). */

/* The "heap by site" track of Chrome trace `j`: its instants, and the sum of the last one. */
static int heap_by_site(cJSON *j, double *last_sum) {
    int n = 0;
    cJSON *ev = cJSON_GetObjectItem(j, "traceEvents"), *e;
    cJSON_ArrayForEach(e, ev) {
        cJSON *name = cJSON_GetObjectItem(e, "name"), *args = cJSON_GetObjectItem(e, "args"), *a;
        if (!cJSON_IsString(name) || strcmp(name->valuestring, "heap by site")) continue;
        n++;
        *last_sum = 0;
        cJSON_ArrayForEach(a, args) *last_sum += a->valuedouble;
    }
    return n;
}

static void both_ways(const char *dir, const char *name) {
    const char *lpt = strfmt("%s/%s.lpt", dir, name);
    const char *ext[] = {"json", "csv", "fold", "peak", "leaks", "html"};
    char *path[2][6];
    for (int w = 0; w < 2; w++) {
        for (int k = 0; k < 6; k++) path[w][k] = strfmt("%s/%s.%d.%s", dir, name, w, ext[k]);
        int stacks = strstr(name, "stacks") != NULL;
        const char *argv[] = {REPORT,
                              lpt,
                              "--chrome",
                              path[w][0],
                              "--csv",
                              path[w][1],
                              "--html",
                              path[w][5],
                              w ? "--general-path" : "--summary",
                              stacks ? "--folded" : NULL,
                              path[w][2],
                              "--folded-peak",
                              path[w][3],
                              "--folded-leaks",
                              path[w][4],
                              NULL};
        struct run r;
        run_prog(&r, dir, NULL, argv);
        cr_assert_eq(r.status, 0, "%s: %s", name, r.err);
        run_free(&r);
    }
    for (int k = 0; k < 6; k++) {
        if (k >= 2 && k <= 4 && !strstr(name, "stacks")) continue;
        size_t n0 = 0, n1 = 0;
        char *a = read_file(path[0][k], &n0), *b = read_file(path[1][k], &n1);
        cr_assert(a && b, "%s: no %s", name, ext[k]);
        if (k == 0) { /* the one difference: events_fast_path */
            cJSON *ja = load_json(path[0][0]), *jb = load_json(path[1][0]);
            double fast = meta_num(libprof_meta(ja), "events_fast_path");
            double all = meta_num(libprof_meta(ja), "events_decoded");
            cr_expect_gt(fast, all / 2, "%s: the fast path took %.0f of %.0f events", name, fast, all);
            cr_expect_eq(meta_num(libprof_meta(jb), "events_fast_path"), 0, "%s", name);
            double last = -1;
            int instants = heap_by_site(ja, &last);
            if (strstr(name, "stacks")) {
                cr_expect_eq(instants, 401, "%s: %d instants of heap by site", name, instants);
                if (!strstr(name, "sampled"))
                    cr_expect_eq(last, meta_num(libprof_meta(ja), "leaked_bytes"),
                                 "%s: heap by site ends at %.0f bytes, %.0f leaked", name, last,
                                 meta_num(libprof_meta(ja), "leaked_bytes"));
            }
            cJSON_Delete(ja);
            cJSON_Delete(jb);
            char *fa = strstr(a, "\"events_fast_path\":"), *fb = strstr(b, "\"events_fast_path\":");
            cr_assert(fa && fb, "%s", name);
            char *ea = strchr(fa, ','), *eb = strchr(fb, ',');
            cr_expect_eq((size_t)(fa - a), (size_t)(fb - b), "%s: JSON differs before events_fast_path", name);
            cr_expect_eq(memcmp(a, b, (size_t)(fa - a)), 0, "%s: JSON differs before events_fast_path", name);
            cr_expect_str_eq(ea, eb, "%s: JSON differs after events_fast_path", name);
        } else {
            cr_expect_eq(n0, n1, "%s: %s sizes %zu and %zu", name, ext[k], n0, n1);
            cr_expect(n0 == n1 && memcmp(a, b, n0) == 0, "%s: %s differs", name, ext[k]);
        }
        free(a);
        free(b);
    }
}

/* `var`: one more variable ("LIBPROF_ALLOC_SAMPLE=4096"), or NULL */
static void record_with(const char *dir, const char *name, const char *var, const char *const *argv) {
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/%s.lpt", dir, name), var, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s: %s", name, r.err);
    run_free(&r);
}

static void record(const char *dir, const char *name, const char *stacks, const char *const *argv) {
    record_with(dir, name, stacks ? strfmt("LIBPROF_STACKS=%s", stacks) : NULL, argv);
}

Test(convert, fast_path_matches_general_path, .timeout = 300) {
    char *dir = make_tmpdir();
    record(dir, "sqlite", NULL, sql);
    record(dir, "sqlite-stacks", "16", sql);
    record(dir, "stress", NULL, (const char *[]){LP_BUILD_DIR "/progs/stress", NULL});
    record(dir, "threads-stacks", "8", (const char *[]){LP_BUILD_DIR "/progs/threads", NULL});
    record(dir, "memviews-stacks", "16", (const char *[]){LP_BUILD_DIR "/progs/memviews", NULL});
    record(dir, "reset-stacks", "8", (const char *[]){LP_BUILD_DIR "/progs/phases", "reset", NULL});
    record_with(dir, "sampled-stacks", "LIBPROF_ALLOC_SAMPLE=4096", sql); /* most allocations counted */
    record(dir, "python-stacks", "16",
           (const char *[]){"/usr/bin/python3", "-c",
                            "import json, threading\n"
                            "def work():\n"
                            "    for _ in range(300): json.dumps([str(i) * 3 for i in range(200)])\n"
                            "ts = [threading.Thread(target=work) for _ in range(3)]\n"
                            "[t.start() for t in ts]; [t.join() for t in ts]\n",
                            NULL});
    const char *names[] = {"sqlite",          "sqlite-stacks", "stress",         "threads-stacks",
                           "memviews-stacks", "reset-stacks",  "sampled-stacks", "python-stacks"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) both_ways(dir, names[i]);
}

/* Packed traces (--pack): every view of a packed trace is the view of its raw trace — the same
 * Chrome JSON, CSV and report, byte for byte — on traces with threads, stacks, calls, Python
 * frames, CPU samples and a reset; and smaller than the raw trace. A damaged packed file is
 * refused with a message. (And a trace of sampled allocations, whose counts are TALLY records.) */
Test(convert, packed_traces_read_as_their_raw_traces, .timeout = 300) {
    char *dir = make_tmpdir();
    record(dir, "sqlite", NULL, sql);
    record(dir, "stress", NULL, (const char *[]){LP_BUILD_DIR "/progs/stress", NULL});
    record(dir, "reset-stacks", "8", (const char *[]){LP_BUILD_DIR "/progs/phases", "reset", NULL});
    record(dir, "calls", NULL,
           (const char *[]){LP_BUILD_DIR "/progs/calls", dir, LP_BUILD_DIR "/progs/libplugin.so", NULL});
    record_with(dir, "sampled", "LIBPROF_ALLOC_SAMPLE=4096", sql);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/python.lpt", dir), "LIBPROF_STACKS=16",
                         "LIBPROF_SAMPLE_HZ=1000", NULL};
    struct run r;
    run_prog(&r, dir, env,
             (const char *[]){"/usr/bin/python3", "-c",
                              "import json\nfor _ in range(300): json.dumps([str(i) * 3 for i in range(2000)])\n",
                              NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    const char *names[] = {"sqlite", "stress", "reset-stacks", "calls", "sampled", "python"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *lpt = strfmt("%s/%s.lpt", dir, names[i]), *lpz = strfmt("%s/%s.lpz", dir, names[i]);
        run_prog(&r, dir, NULL, (const char *[]){REPORT, lpt, "--pack", lpz, NULL});
        cr_assert_eq(r.status, 0, "%s: %s", names[i], r.err);
        run_free(&r);
        size_t nraw = 0, npack = 0;
        free(read_file(lpt, &nraw));
        free(read_file(lpz, &npack));
        /* a third of the raw trace at most; a few KiB of trace (its fixed parts, and timestamps that
         * a loaded machine scatters) only smaller */
        if (nraw > 64 * 1024)
            cr_expect_lt(npack * 3, nraw, "%s: packed %zu of raw %zu bytes", names[i], npack, nraw);
        else
            cr_expect_lt(npack, nraw, "%s: packed %zu of raw %zu bytes", names[i], npack, nraw);
        const char *ext[] = {"json", "csv", "txt"};
        char *out[2][3];
        for (int w = 0; w < 2; w++) {
            for (int k = 0; k < 3; k++) out[w][k] = strfmt("%s/%s.%d.%s", dir, names[i], w, ext[k]);
            run_prog(&r, dir, NULL,
                     (const char *[]){REPORT, w ? lpz : lpt, "--chrome", out[w][0], "--csv", out[w][1], "--summary",
                                      "--log", out[w][2], NULL});
            cr_assert_eq(r.status, 0, "%s: %s", names[i], r.err);
            run_free(&r);
        }
        for (int k = 0; k < 3; k++) {
            size_t na = 0, nb = 0;
            char *a = read_file(out[0][k], &na), *b = read_file(out[1][k], &nb);
            cr_assert(a && b, "%s: no %s", names[i], ext[k]);
            if (k == 2) { /* the report names its input: the same once the names are */
                for (char *q = b; (q = strstr(q, ".lpz")); q += 4) q[3] = 't';
                cr_expect(na == nb && !memcmp(a, b, na), "%s: the reports differ", names[i]);
            } else {
                cr_expect(na == nb && !memcmp(a, b, na), "%s: the %s differ", names[i], ext[k]);
            }
            free(a);
            free(b);
        }
    }
    /* damage: refused, with a message */
    char *lpz = strfmt("%s/sqlite.lpz", dir),
         *cmd = strfmt("dd if=/dev/urandom of=%s bs=1 seek=200 count=64 conv=notrunc 2>/dev/null", lpz);
    cr_assert_eq(system(cmd), 0);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpz, NULL});
    cr_expect_eq(r.status, 1, "%s", r.err);
    cr_expect(strstr(r.err, "damaged packed trace") != NULL, "%s", r.err);
    run_free(&r);
}

/* A run converted while it runs (a follower from the first MiB of spool, LIBPROF_FOLLOW=1) gives
 * the totals of the same run converted at exit: 64 threads at once, and 1000 short-lived ones
 * (their thread ids reused), with 4-frame allocation stacks — every count, byte, leak and
 * temporary, per function and per allocation site; every event decoded, no block live twice. */
static cJSON *site_by_frames(cJSON *sites, cJSON *like) {
    char *want = cJSON_PrintUnformatted(cJSON_GetObjectItem(like, "frames"));
    cJSON *s, *found = NULL;
    cJSON_ArrayForEach(s, sites) {
        char *f = cJSON_PrintUnformatted(cJSON_GetObjectItem(s, "frames"));
        if (!found && f && want && !strcmp(f, want)) found = s;
        free(f);
    }
    free(want);
    return found;
}

Test(convert, followed_run_matches_the_exit_conversion, .timeout = 300) {
    char *dir = make_tmpdir();
    const char *modes[] = {"threads64", "short1000"};
    for (int m = 0; m < 2; m++) {
        cJSON *meta[2], *j[2];
        for (int f = 0; f < 2; f++) {
            char *out = strfmt("%s/%s-%d.json", dir, modes[m], f);
            struct run r;
            run_prog(&r, dir,
                     (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", out), "LIBPROF_STACKS=4",
                                      "LIBPROF_SUMMARY=1", f ? "LIBPROF_FOLLOW=1" : "LIBPROF_FOLLOW=0",
                                      f ? "LIBPROF_VERBOSE=1" : NULL, NULL},
                     (const char *[]){PROG("stress"), modes[m], NULL});
            cr_assert_eq(r.status, 0, "%s", r.err);
            if (f) cr_expect(strstr(r.err, "a follower converts") != NULL, "%s: no follower: %s", modes[m], r.err);
            j[f] = load_json(out);
            cr_assert_not_null(j[f], "%s", out);
            meta[f] = libprof_meta(j[f]);
            /* the summary on stderr (the follower's, passed on at the exit) counts what the trace does */
            const char *line = strstr(r.err, "\n  malloc ");
            long long calls = -1;
            cr_expect(line && sscanf(line, "\n  malloc %lld", &calls) == 1, "%s: no summary: %s", modes[m], r.err);
            cr_expect_eq(calls, meta_fn(meta[f], "malloc", "count"), "%s (followed: %d)", modes[m], f);
            run_free(&r);
        }
        /* (the number of events and of frees of blocks libprof never saw made vary from run to run
         * with the stack walker's own; what the program does does not) */
        const char *fields[] = {"leaked_bytes", "leaked_blocks", "threads"};
        for (int k = 0; k < 3; k++)
            cr_expect_eq(meta_num(meta[1], fields[k]), meta_num(meta[0], fields[k]), "%s: %s", modes[m], fields[k]);
        const char *fns[] = {"malloc", "free", "calloc", "realloc"};
        for (int k = 0; k < 4; k++) {
            cr_expect_eq(meta_fn(meta[1], fns[k], "count"), meta_fn(meta[0], fns[k], "count"), "%s %s", modes[m],
                         fns[k]);
            cr_expect_eq(meta_fn(meta[1], fns[k], "bytes"), meta_fn(meta[0], fns[k], "bytes"), "%s %s", modes[m],
                         fns[k]);
        }
        cr_expect_eq(meta_num(meta[1], "events_decoded"), meta_num(meta[1], "events_written"), "%s", modes[m]);
        cr_expect_eq(meta_num(meta[1], "reused_without_free"), 0, "%s", modes[m]);
        cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(meta[1], "complete")), "%s", modes[m]);
        cJSON *sites0 = cJSON_GetObjectItem(meta[0], "alloc_sites"),
              *sites1 = cJSON_GetObjectItem(meta[1], "alloc_sites");
        cr_assert_gt(cJSON_GetArraySize(sites0), 0, "%s: no sites", modes[m]);
        cr_expect_eq(cJSON_GetArraySize(sites1), cJSON_GetArraySize(sites0), "%s: sites", modes[m]);
        cJSON *s0;
        cJSON_ArrayForEach(s0, sites0) {
            cJSON *s1 = site_by_frames(sites1, s0);
            cr_assert_not_null(s1, "%s: a site of the exit conversion is missing", modes[m]);
            const char *sf[] = {"calls", "bytes", "leaked_bytes", "leaked_blocks", "temporary", "temporary_bytes"};
            for (int k = 0; k < 6; k++)
                cr_expect_eq(meta_num(s1, sf[k]), meta_num(s0, sf[k]), "%s: site %s", modes[m], sf[k]);
        }
        cJSON_Delete(j[0]);
        cJSON_Delete(j[1]);
    }
}

/* A followed run's CPU over time spans the run, as the exit's conversion's does: its buckets,
 * given 64 s while the run went on, are made again over the run's own time at its end — no
 * CPU point after the run's end (there was one 64 s in, of a 1 s run), each thread's buckets
 * holding all its samples. */
Test(convert, followed_cpu_over_time_ends_with_the_run, .timeout = 120) {
    char *dir = make_tmpdir(), *out = strfmt("%s/svc.json", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", out), "LIBPROF_FOLLOW=1",
                              "LIBPROF_SAMPLE_HZ=1000", "LIBPROF_VERBOSE=1", NULL},
             (const char *[]){PROG("service"), "1", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "a follower converts") != NULL, "no follower: %s", r.err);
    run_free(&r);
    cJSON *j = load_json(out), *meta = libprof_meta(j);
    cr_assert_not_null(meta, "%s", out);
    double run_ns = meta_num(meta, "duration_ns");
    cJSON *sampling = cJSON_GetObjectItem(meta, "sampling");
    cr_assert_not_null(sampling);
    cr_expect_leq(meta_num(sampling, "span_ns"), run_ns + 1, "the buckets span the run");
    cr_expect_gt(meta_num(sampling, "span_ns"), run_ns / 2);
    cJSON *t;
    int threads = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(sampling, "threads")) {
        double in = 0;
        cJSON *b;
        cJSON_ArrayForEach(b, cJSON_GetObjectItem(t, "buckets")) in += b->valuedouble;
        cr_expect_eq(in, meta_num(t, "samples"), "thread %lld: its samples in its buckets", meta_num(t, "tid"));
        threads++;
    }
    cr_expect_geq(threads, 2, "samples on the workers");
    int points = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
        if (!name || strncmp(name, "cpu % (", 7) != 0) continue;
        points++;
        cr_expect_leq(cJSON_GetObjectItem(e, "ts")->valuedouble, run_ns / 1000, "%s at %g us, the run %g us long", name,
                      cJSON_GetObjectItem(e, "ts")->valuedouble, run_ns / 1000);
    }
    cr_expect_gt(points, 0, "CPU over time");
    cJSON_Delete(j);
}

/* A followed run's exit waits for its follower to be done, not for it to be reaped. The follower
 * is nobody's child the program can wait for: whatever adopts it reaps it when it likes (a
 * container's init took a second or two: every followed exit waited that long). Here the test
 * itself adopts it (a child subreaper) and reaps nothing until the program has ended: the program
 * still ends, its trace complete. (It used to wait for the reaping — ten minutes, then give up.) */
Test(convert, followed_exit_does_not_wait_for_the_reaper, .timeout = 120) {
    char *dir = make_tmpdir();
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/f.json", dir), "LIBPROF_FOLLOW=1", NULL};
    const char *q[] = {"sqlite3", ":memory:",
                       "create table t(x); with recursive c(i) as (select 1 union all select i + 1 from c where i < "
                       "200000) insert into t select i from c; select count(*) from t;",
                       NULL};
    struct run r;
    run_prog(&r, dir, env, q);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "200000\n");
    while (waitpid(-1, NULL, WNOHANG) > 0) {} /* the follower, now */
    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    cJSON *j = load_json(strfmt("%s/f.json", dir));
    cr_assert_not_null(j);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(libprof_meta(j), "complete")));
    cr_expect_gt(meta_fn(libprof_meta(j), "malloc", "count"), 100000);
    cJSON_Delete(j);
    run_free(&r);
}

/* LIBPROF_OUTPUT=NAME.lpz writes the packed raw trace the name says (recorded as NAME.lpt, packed at
 * exit): no .lpt left, no JSON, and libprof-report reads it as it reads the raw trace. */
Test(convert, lpz_output_is_the_packed_raw_trace) {
    char *dir = make_tmpdir();
    struct run r;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.lpz", dir), NULL}, sql);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    run_free(&r);
    size_t n = 0;
    char *z = read_file(strfmt("%s/t.lpz", dir), &n);
    cr_assert(z && n > 16, "no t.lpz");
    cr_expect(!memcmp(z, "LPPACK\x1a\x01", 8), "t.lpz is not a packed trace");
    cr_expect_neq(access(strfmt("%s/t.lpt", dir), F_OK), 0, "the raw trace was left behind");
    cr_expect_neq(access(strfmt("%s/t.json", dir), F_OK), 0);
    run_prog(&r, dir, NULL,
             (const char *[]){REPORT, strfmt("%s/t.lpz", dir), "--csv", strfmt("%s/t.csv", dir), "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *c = read_file(strfmt("%s/t.csv", dir), NULL);
    cr_expect(c && strstr(c, "\nmalloc,alloc,"), "the packed trace's CSV has no malloc row");
    run_free(&r);
}
