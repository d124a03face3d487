/* libprof-report on good, cut-off and hostile input: clear errors, exit 1, never a crash. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <regex.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(report, .timeout = 60);

static char *make_trace(const char *dir, const char *buffer_kb) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.lpt", dir), *buf = strfmt("LIBPROF_BUFFER_KB=%s", buffer_kb);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, buf, NULL};
    const char *argv[] = {PROG("threads"), "4", "2000", NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0);
    run_free(&r);
    return strfmt("%s/t.lpt", dir);
}

static struct run report(const char *const *args) {
    const char *argv[16] = {REPORT};
    int k = 1;
    for (int i = 0; args[i]; i++) argv[k++] = args[i];
    argv[k] = NULL;
    struct run r;
    run_prog(&r, NULL, NULL, argv);
    return r;
}

Test(report, help_and_usage) {
    struct run r = report((const char *[]){"--help", NULL});
    cr_expect_eq(r.status, 0);
    cr_expect_not_null(strstr(r.out, "usage: libprof-report"));
    r = report((const char *[]){NULL});
    cr_expect_eq(r.status, 2);
    r = report((const char *[]){"x.lpt", "--bogus", NULL});
    cr_expect_eq(r.status, 2);
    cr_expect_not_null(strstr(r.err, "unknown option"));
}

Test(report, summary_of_a_raw_trace) {
    char *dir = make_tmpdir();
    char *lpt = make_trace(dir, "128");
    struct run r = report((const char *[]){lpt, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "libprof: threads (pid "));
    /* 4 * (2000 + 4) from workers + the stdio buffer */
    cr_expect_not_null(strstr(r.out, "  malloc                  8017 "), "%s", r.out);
    cr_expect_str_eq(r.err, "");
}

Test(report, bad_inputs_fail_cleanly) {
    char *dir = make_tmpdir();
    char *missing = strfmt("%s/none.lpt", dir), *empty = strfmt("%s/empty.lpt", dir),
         *junk = strfmt("%s/junk.lpt", dir);
    close(open(empty, O_CREAT | O_WRONLY, 0644));
    FILE *f = fopen(junk, "w");
    for (int i = 0; i < 5000; i++) fputc((i * 7919) & 0xff, f);
    fclose(f);
    const char *cases[][2] = {
        {missing, "No such file"}, {empty, "empty file"}, {junk, "bad magic"}, {dir, "not a regular file"}};
    for (size_t i = 0; i < 4; i++) {
        struct run r = report((const char *[]){cases[i][0], NULL});
        cr_expect_eq(r.status, 1, "%s: status %d", cases[i][0], r.status);
        cr_expect_not_null(strstr(r.err, cases[i][1]), "%s: %s", cases[i][0], r.err);
        cr_expect_eq(count_lines_with(r.err, "\n"), 1, "one clear line: %s", r.err);
    }
    /* a newer format version is refused with a reason */
    char *lpt = make_trace(dir, "128");
    size_t n;
    char *data = read_file(lpt, &n);
    data[8] = 99;
    char *newer = strfmt("%s/newer.lpt", dir);
    f = fopen(newer, "w");
    fwrite(data, 1, n, f);
    fclose(f);
    struct run r = report((const char *[]){newer, NULL});
    cr_expect_eq(r.status, 1);
    cr_expect_not_null(strstr(r.err, "written by a newer libprof"), "%s", r.err);
}

Test(report, a_cut_trace_decodes_up_to_its_last_whole_chunk) {
    char *dir = make_tmpdir();
    char *lpt = make_trace(dir, "4"); /* many chunks */
    size_t n;
    char *data = read_file(lpt, &n);
    cr_assert_gt(n, 20000);
    char *cut = strfmt("%s/cut.lpt", dir), *json = strfmt("%s/cut.json", dir);
    FILE *f = fopen(cut, "w");
    fwrite(data, 1, n / 2 + 13, f); /* ends in the middle of a chunk */
    fclose(f);
    struct run r = report((const char *[]){cut, "--chrome", json, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "cut short"), "%s", r.err);
    cr_assert(python_json_ok(json));
    cJSON *j = load_json(json);
    cJSON *m = libprof_meta(j);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(m, "complete")));
    long long got = meta_fn(m, "malloc", "count");
    cr_expect(got > 1000 && got < 8017, "decoded %lld mallocs from half a trace", got);
    cJSON_Delete(j);
}

/* Chrome trace JSON as input: libprof's own (its range slices) and the shapes other profilers
 * write (B/E pairs, string thread ids, a bare event array). */
Test(report, summarises_chrome_json_traces) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/a.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *prog[] = {PROG("annotated"), NULL};
    struct run r;
    run_prog(&r, dir, env, prog);
    cr_assert_eq(r.status, 0);
    run_free(&r);
    r = report((const char *[]){strfmt("%s/a.json", dir), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    int n_inf = 0, n_bg = 0;
    const char *p1 = strstr(r.out, "\ninference "), *p2 = strstr(r.out, "\nbackground ");
    cr_assert(p1 && p2, "%s", r.out);
    sscanf(p1 + 11, "%d", &n_inf);
    sscanf(p2 + 12, "%d", &n_bg);
    cr_expect_eq(n_inf, 5, "%s", r.out);
    cr_expect_eq(n_bg, 3, "%s", r.out);
    run_free(&r);

    char *be = strfmt("%s/be.json", dir);
    FILE *f = fopen(be, "w");
    fputs("[{\"ph\":\"B\",\"name\":\"step\",\"ts\":1,\"pid\":1,\"tid\":\"stream 7\"},"
          "{\"ph\":\"B\",\"name\":\"inner\",\"ts\":2,\"pid\":1,\"tid\":\"stream 7\"},"
          "{\"ph\":\"E\",\"ts\":2.5,\"pid\":1,\"tid\":\"stream 7\"},"
          "{\"ph\":\"E\",\"ts\":4,\"pid\":1,\"tid\":\"stream 7\"},"
          "{\"ph\":\"X\",\"name\":\"step\",\"ts\":10,\"dur\":1},"
          "{\"ph\":\"i\",\"name\":\"mark\",\"ts\":11}]",
          f);
    fclose(f);
    r = report((const char *[]){be, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "3 slices, 2 names, 1 events skipped"), "%s", r.out);
    /* step: 2 slices, 4 us in all, 3.5 us of it its own (inner took 0.5) */
    cr_expect_not_null(strstr(r.out, "\nstep          2     4.0 us     3.5 us     2.0 us"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "\ninner         1     500 ns     500 ns"), "%s", r.out);
    run_free(&r);

    char *bad = strfmt("%s/bad.json", dir), *other = strfmt("%s/other.json", dir);
    f = fopen(bad, "w");
    fputs("{\"traceEvents\": [", f);
    fclose(f);
    f = fopen(other, "w");
    fputs("{\"rows\": []}", f);
    fclose(f);
    r = report((const char *[]){bad, NULL});
    cr_expect_eq(r.status, 1);
    cr_expect_not_null(strstr(r.err, "not JSON"), "%s", r.err);
    run_free(&r);
    r = report((const char *[]){other, NULL});
    cr_expect_eq(r.status, 1);
    cr_expect_not_null(strstr(r.err, "not a Chrome trace"), "%s", r.err);
    run_free(&r);
    r = report((const char *[]){be, "--chrome", strfmt("%s/x.json", dir), NULL});
    cr_expect_eq(r.status, 2);
    run_free(&r);
}

/* The bytes of a live view's "live now X MiB" (-1 when it says none). */
static double live_now(const char *report) {
    const char *now = report ? strstr(report, "live now ") : NULL;
    double v = 0;
    char unit[8] = "";
    if (!now || sscanf(now + 9, "%lf %7s", &v, unit) != 2) return -1;
    return v * (!strcmp(unit, "MiB")   ? 1048576.0
                : !strcmp(unit, "KiB") ? 1024.0
                : !strcmp(unit, "GiB") ? 1073741824.0
                                       : 1.0);
}

/* --live PID: the report of a running process from its spool — the heap it holds now (64 MiB of
 * blocks held while two threads churn), its peak, "so far"; with --interval, again until the
 * process ends; with --chrome, a snapshot that is a whole trace. The program's output and status
 * are as without being looked at. */
Test(report, live_view_of_a_running_process) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("LD_PRELOAD=%s LIBPROF_OUTPUT=%s/svc.json %s 4 > %s/out.txt & pid=$!; sleep 1.5; "
                       "%s --live $pid && %s --live $pid --chrome %s/snap.json -q && "
                       "%s --live $pid --interval 0.5 > %s/top.txt; wait $pid",
                       PRELOAD, dir, PROG("service"), dir, REPORT, REPORT, dir, REPORT, dir);
    struct run r;
    run_prog(&r, dir, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "[so far: the program is running]") != NULL, "%s", r.out);
    double bytes = live_now(r.out);
    cr_expect(bytes > 0.9 * 64 * 1048576 && bytes < 1.1 * 64 * 1048576, "%s", r.out);
    char *out = read_file(strfmt("%s/out.txt", dir), NULL);
    cr_expect_str_eq(out, "held 64 MiB, churned\n");
    char *err;
    cJSON *snap = check_trace_py(strfmt("%s/snap.json", dir), &err);
    cr_expect_not_null(snap, "%s", err);
    cJSON_Delete(snap);
    char *top = read_file(strfmt("%s/top.txt", dir), NULL);
    cr_expect_geq(count_lines_with(top, "libprof live: process"), 2, "%s", top);
    cJSON *j = load_json(strfmt("%s/svc.json", dir)); /* the run's own trace, whole */
    cr_assert_not_null(j);
    cr_expect_lt(meta_num(libprof_meta(j), "leaked_bytes"), 65536); /* stdio's buffer, threads' own: not the 64 MiB */
    cJSON_Delete(j);
    run_free(&r);
}

/* A long run's timeline: LIBPROF_TIMELINE=1 keeps the last second of a 3-second run at full
 * detail; before it, the 10 ms sleeps stay and the short calls are folded into the thread's
 * counters — every call either a slice or counted there, the tables and totals as for the whole
 * run; LIBPROF_TIMELINE=0 keeps every slice; libprof-report --timeline does it offline. */
/* X slices named `name`; *before: those that end before `from_us` shorter than the timeline's
 * minimum (10 ms: a send a loaded machine held that long is kept, as it should be; one that
 * was still running at the cutoff ends in the full-detail stretch, and is kept too). */
static int count_x(cJSON *j, const char *name, double from_us, int *before) {
    cJSON *ev;
    int n = 0;
    *before = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *ph = cJSON_GetObjectItem(ev, "ph"), *nm = cJSON_GetObjectItem(ev, "name");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || strcmp(nm->valuestring, name)) continue;
        n++;
        cJSON *dur = cJSON_GetObjectItem(ev, "dur");
        double d = cJSON_IsNumber(dur) ? dur->valuedouble : 0;
        if (cJSON_GetObjectItem(ev, "ts")->valuedouble + d < from_us && d < 10000) (*before)++;
    }
    return n;
}

Test(report, long_timeline_folded_before_its_last_stretch) {
    char *dir = make_tmpdir();
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_TIMELINE=1", "LIBPROF_KEEP_RAW=1", NULL},
             (const char *[]){PROG("timeline"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "ok\n");
    char *path = strfmt("%s/t.json", dir), *err;
    cJSON *sum = check_trace_py(path, &err);
    cr_assert_not_null(sum, "%s", err);
    cJSON_Delete(sum);
    cJSON *j = load_json(path), *meta = libprof_meta(j), *tl = cJSON_GetObjectItem(meta, "timeline"), *ev;
    double cutoff_us = meta_num(tl, "full_from_ns") / 1000.0;
    cr_expect_gt(cutoff_us, 1.5e6);
    cr_expect_lt(cutoff_us, 2.5e6);
    long long folded = meta_num(tl, "folded_slices");
    int before, shorts = 0, sleeps = count_x(j, "nanosleep", cutoff_us, &before);
    cr_expect_eq(sleeps, 60, "the 10 ms sleeps stay: %d", sleeps);
    const char *names[] = {"fopen", "fread", "fclose"};
    for (int i = 0; i < 3; i++) {
        shorts += count_x(j, names[i], cutoff_us, &before);
        cr_expect_eq(before, 0, "a short %s before the cutoff was kept", names[i]);
        cr_expect_eq(meta_num(cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "calls"), names[i]), "count"),
                     1500); /* totals: the whole run */
    }
    cr_expect_gt(folded, 2000);
    cr_expect_eq(shorts + folded, 4500, "kept %d + folded %lld", shorts, folded);
    long long counted = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (cJSON_IsString(nm) && !strncmp(nm->valuestring, "folded calls", 12))
            counted += (long long)cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "calls")->valuedouble;
    }
    cr_expect_eq(counted, folded);
    cJSON_Delete(j);
    /* offline: every slice, then the last half second */
    struct run c;
    char *lpt = strfmt("%s/t.json.lpz", dir), *all = strfmt("%s/all.json", dir), *half = strfmt("%s/half.json", dir);
    run_prog(&c, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", all, "--timeline", "0", NULL});
    cr_assert_eq(c.status, 0, "%s", c.err);
    run_free(&c);
    run_prog(&c, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", half, "--timeline", "0.5", NULL});
    cr_assert_eq(c.status, 0, "%s", c.err);
    j = load_json(all);
    cr_expect_eq(count_x(j, "fread", 0, &before), 1500);
    cr_expect_eq(meta_num(cJSON_GetObjectItem(libprof_meta(j), "timeline"), "folded_slices"), 0);
    cJSON_Delete(j);
    j = load_json(half);
    long long f2 = meta_num(cJSON_GetObjectItem(libprof_meta(j), "timeline"), "folded_slices");
    cr_expect_gt(f2, folded);
    cJSON_Delete(j);
    run_free(&c);
    run_free(&r);
}

/* A long run, followed: half a minute of tests/progs/service serving requests while two threads
 * churn about a million allocation events a second (tens of millions of events: a gigabyte of raw
 * trace unfollowed; scripts/bench-long measures two minutes). A follower converts the spool as it goes,
 * so the output directory never holds more than 256 MiB (sampled every quarter second); the
 * totals are exact (the program counts its own mallocs, frees and requests; the offset for libc's
 * own is taken from a short run converted at exit); a --live look half-way answers from the
 * follower with the 64 MiB the program holds; the Chrome trace keeps its last 10 s at full detail
 * and passes the strict checks; nothing but the trace is left. */
static long long call_count(cJSON *meta, const char *name) {
    return meta_num(cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "calls"), name), "count");
}

Test(report, long_run_followed_with_bounded_disk_and_exact_totals, .timeout = 300) {
    char *dir = make_tmpdir();
    /* libc's own allocations, from a short run converted at exit */
    struct run r0;
    run_prog(
        &r0, dir,
        (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/short.json", dir), "LIBPROF_FOLLOW=0", NULL},
        (const char *[]){PROG("service"), "0.5", "serve", NULL});
    cr_assert_eq(r0.status, 0, "%s", r0.err);
    unsigned long m0, f0, q0, m1, f1, q1;
    cr_assert_eq(sscanf(strstr(r0.out, "mallocs"), "mallocs %lu frees %lu requests %lu", &m0, &f0, &q0), 3);
    cJSON *j0 = load_json(strfmt("%s/short.json", dir));
    cr_assert_not_null(j0);
    long long dm = meta_fn(libprof_meta(j0), "malloc", "count") - (long long)m0,
              df = meta_fn(libprof_meta(j0), "free", "count") - (long long)f0,
              leak0 = meta_num(libprof_meta(j0), "leaked_bytes");
    char *cmd = strfmt("mkdir -p %s/out; LD_PRELOAD=%s LIBPROF_OUTPUT=%s/out/svc.json LIBPROF_TIMELINE=10 "
                       "%s 30 serve > %s/out.txt & pid=$!; "
                       "(while kill -0 $pid 2>/dev/null; do du -sk %s/out | cut -f1; sleep 0.25; done > %s/du.txt) & "
                       "sleep 15; %s --live $pid > %s/live.txt; wait $pid",
                       dir, PRELOAD, dir, PROG("service"), dir, dir, dir, REPORT, dir);
    struct run r;
    run_prog(&r, dir, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    char *out = read_file(strfmt("%s/out.txt", dir), NULL);
    cr_assert_eq(sscanf(strstr(out, "mallocs"), "mallocs %lu frees %lu requests %lu", &m1, &f1, &q1), 3, "%s", out);
    /* the disk, at every look */
    char *du = read_file(strfmt("%s/du.txt", dir), NULL);
    long peak_kib = 0, looks = 0;
    for (char *p = du; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p), looks++)
        if (atol(p) > peak_kib) peak_kib = atol(p);
    cr_expect_gt(looks, 60, "%s", du);
    cr_expect_leq(peak_kib, 256 * 1024, "the output directory held %ld KiB", peak_kib);
    /* the live look, half-way: the follower's summary, with the 64 MiB held */
    char *live = read_file(strfmt("%s/live.txt", dir), NULL);
    cr_assert_not_null(strstr(live, "[so far: the program is running]"), "%s", live);
    double bytes = live_now(live);
    cr_expect(bytes > 0.9 * 64 * 1048576 && bytes < 1.1 * 64 * 1048576, "%s", live);
    /* exact totals */
    char *path = strfmt("%s/out/svc.json", dir), *err;
    cJSON *sum = check_trace_py(path, &err);
    cr_assert_not_null(sum, "%s", err);
    cJSON_Delete(sum);
    cJSON *j = load_json(path), *meta = libprof_meta(j);
    cr_assert_not_null(j);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(meta, "complete")));
    cr_expect_eq(meta_num(meta, "events_dropped"), 0);
    cr_expect_eq(meta_num(meta, "events_decoded"), meta_num(meta, "events_written"));
    cr_expect_gt(meta_num(meta, "events_written"), 10000000);
    cr_expect_eq(meta_fn(meta, "malloc", "count") - (long long)m1, dm);
    cr_expect_eq(meta_fn(meta, "free", "count") - (long long)f1, df);
    cr_expect_eq(meta_num(meta, "leaked_bytes"), leak0);
    cr_expect_eq(meta_num(meta, "untracked_frees"), 0);
    cr_expect_eq(meta_num(meta, "reused_without_free"), 0);
    cr_expect_eq(call_count(meta, "send"), (long long)q1);
    cr_expect_eq(call_count(meta, "recv"), (long long)q1);
    /* the socket pair made at the start (its name read long before the end) carries the bytes */
    cJSON *file, *pair = NULL;
    cJSON_ArrayForEach(file, cJSON_GetObjectItem(meta, "files")) {
        cJSON *name = cJSON_GetObjectItem(file, "path");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, "socketpair")) pair = file;
    }
    cr_assert_not_null(pair, "no socketpair among the files");
    cr_expect_eq(meta_num(pair, "writes"), (long long)q1);
    cr_expect_eq(meta_num(pair, "write_bytes"), 64 * (long long)q1);
    cr_expect_geq(meta_num(meta, "peak_bytes"), 64 << 20);
    /* the timeline: the last 10 s at full detail, the rest folded */
    cJSON *tl = cJSON_GetObjectItem(meta, "timeline");
    double full_from = meta_num(tl, "full_from_ns") / 1e9;
    cr_expect(full_from > 15 && full_from < 25, "full detail from %.1f s", full_from);
    cr_expect_gt(meta_num(tl, "folded_slices"), 10000);
    int before;
    int sends = count_x(j, "send", full_from * 1e6, &before);
    cr_expect_eq(before, 0, "a short send before the full-detail stretch was kept");
    cr_expect_gt(sends, 1000, "the last 10 s keep their sends: %d", sends);
    /* nothing left but the trace */
    char *ls = NULL;
    struct run l;
    run_prog(&l, dir, NULL, (const char *[]){"/bin/ls", "-A", strfmt("%s/out", dir), NULL});
    ls = l.out;
    cr_expect_str_eq(ls, "svc.json\n");
    cJSON_Delete(j);
    cJSON_Delete(j0);
    run_free(&l);
    run_free(&r);
    run_free(&r0);
}

/* LIBPROF_SNAPSHOT_SIGNAL: each delivery writes NAME.snapshot-N.json and .csv of the run so far
 * while the program goes on — the first from the spool itself (under LIBPROF_FOLLOW's 64 MiB),
 * the second from the follower — and the program's output and status are its own. */
Test(report, snapshot_on_a_signal_the_user_names) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("LD_PRELOAD=%s LIBPROF_OUTPUT=%s/svc.json LIBPROF_CSV=%s/svc.csv LIBPROF_SNAPSHOT_SIGNAL=USR2 "
                       "%s 4 serve > %s/out.txt & pid=$!; sleep 1; kill -USR2 $pid; sleep 2; kill -USR2 $pid; "
                       "wait $pid",
                       PRELOAD, dir, dir, PROG("service"), dir);
    struct run r;
    run_prog(&r, dir, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(strncmp(read_file(strfmt("%s/out.txt", dir), NULL), "held 64 MiB, churned\n", 21), 0);
    long long events[3] = {0};
    for (int n = 1; n <= 2; n++) {
        char *json = strfmt("%s/svc.snapshot-%d.json", dir, n), *csv = strfmt("%s/svc.snapshot-%d.csv", dir, n);
        for (int waited = 0; waited < 20000 && (access(json, F_OK) || access(csv, F_OK)); waited += 50) usleep(50000);
        char *err;
        cJSON *sum = check_trace_py(json, &err);
        cr_expect_not_null(sum, "snapshot %d: %s", n, err);
        cJSON_Delete(sum);
        cJSON *j = load_json(json);
        cr_assert_not_null(j, "%s", json);
        events[n] = meta_num(libprof_meta(j), "events_decoded");
        cr_expect_geq(meta_num(libprof_meta(j), "peak_bytes"), 64 << 20, "snapshot %d", n);
        cJSON_Delete(j);
        char *text = read_file(csv, NULL);
        cr_expect(text && strstr(text, "malloc"), "%s", csv);
    }
    cJSON *j = load_json(strfmt("%s/svc.json", dir));
    cr_assert_not_null(j);
    long long total = meta_num(libprof_meta(j), "events_decoded");
    cr_expect(events[1] > 0 && events[1] < events[2] && events[2] < total, "%lld < %lld < %lld", events[1], events[2],
              total);
    cJSON_Delete(j);
    run_free(&r);
}

/* --top N holds for a live look too: a process with 24 threads that each started and sleep shows
 * N of them in the per-thread table (the busiest first) and the rest counted in the overall line,
 * and no table of the summary longer than N. */
Test(report, live_view_keeps_to_top) {
    char *dir = make_tmpdir();
    char *py = write_text(dir, "t.py",
                          "import threading, time\n"
                          "ev = threading.Event()\n"
                          "def w():\n"
                          "    time.sleep(0.01)\n"
                          "    ev.wait(4)\n"
                          "ts = [threading.Thread(target=w) for _ in range(24)]\n"
                          "[t.start() for t in ts]\n"
                          "time.sleep(0.2)\n"
                          "open('ready', 'w').write('1')\n"
                          "[t.join() for t in ts]\n");
    char *cmd = strfmt("LD_PRELOAD=%s LIBPROF_OUTPUT=%s/t.json /usr/bin/python3 %s & pid=$!; "
                       "while [ ! -s %s/ready ]; do sleep 0.05; done; %s --live $pid --top 5; kill $pid; wait $pid",
                       PRELOAD, dir, py, dir, REPORT);
    struct run r;
    run_prog(&r, dir, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    const char *t = strstr(r.out, "\nper thread:");
    cr_assert_not_null(t, "%s%s", r.out, r.err);
    const char *head = strstr(t, "tax%\n"), *all = strstr(t, " overall ");
    cr_assert(head && all, "%s", t);
    int rows = 0;
    for (const char *p = head; p < all; p = strchr(p, '\n') + 1) rows++;
    cr_expect_eq(rows - 1, 6, "thread rows (5 and the line counting the others): %d\n%s", rows - 1, t);
    cr_expect_not_null(strstr(t, "more threads, in the overall line"), "%s", t);
    run_free(&r);
}

/* A run with stacks that allocated nothing (LIBPROF_FLAMEGRAPH=1 /usr/bin/true): empty flame
 * graphs, the JSON, nothing on stderr, no raw trace left behind. */
Test(report, flame_graphs_of_a_run_without_allocations) {
    char *dir = make_tmpdir();
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), "LIBPROF_STACKS=16",
                              "LIBPROF_FLAMEGRAPH=1", NULL},
             (const char *[]){"/usr/bin/true", NULL});
    cr_assert_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
    cr_expect(python_json_ok(strfmt("%s/t.json", dir)));
    cr_expect_neq(access(strfmt("%s/t.json.lpt", dir), F_OK), 0, "the raw trace was left behind");
    const char *fg[] = {"alloc.folded", "leaks.folded", "peak.folded", "speedscope.json"};
    for (int k = 0; k < 4; k++) cr_expect_eq(access(strfmt("%s/t.%s", dir, fg[k]), R_OK), 0, "no t.%s", fg[k]);
    cJSON *ss = load_json(strfmt("%s/t.speedscope.json", dir));
    cr_expect(ss && cJSON_IsArray(cJSON_GetObjectItem(ss, "profiles")), "the speedscope file is not one");
    cJSON_Delete(ss);
    run_free(&r);
}

/* An output that needs the raw trace, asked of a Chrome trace: the message names the option asked
 * and says how to keep a raw trace; exit 2. */
Test(report, raw_only_outputs_of_a_json_trace_say_which_and_how) {
    char *dir = make_tmpdir();
    struct run r;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), NULL},
             (const char *[]){"/usr/bin/true", NULL});
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, strfmt("%s/t.json", dir), "--pprof", "x.pb.gz", NULL});
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--pprof reads a raw trace") && strstr(r.err, ".lpz") && strstr(r.err, "LIBPROF_KEEP_RAW"),
              "%s", r.err);
    cr_expect_null(strstr(r.err, "--chrome"), "%s", r.err);
    run_free(&r);
}

/* One rule for times in every table of the report, the summary and the page: the largest unit the
 * value is at least one of ("9.0 ms", never "9000.0 us"); the samples are named for what they
 * count, user CPU; each thread's label on the page stays on the page (Debian's chromium). */
Test(report, one_rule_for_units_and_labels_that_fit, .timeout = 180) {
    char *dir = make_tmpdir();
    char *lpt = strfmt("%s/p.lpt", dir), *html = strfmt("%s/p.html", dir);
    struct run r, rep;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=1000",
                              "LIBPROF_STACKS=16", NULL},
             (const char *[]){"/usr/bin/python3", "-c",
                              "import json, threading, time\n"
                              "def work(n):\n"
                              "    for _ in range(n): json.dumps([str(i) * 3 for i in range(3000)])\n"
                              "    time.sleep(0.003)\n"
                              "ts = [threading.Thread(target=work, args=(20 * k,)) for k in range(1, 4)]\n"
                              "[t.start() for t in ts]; [t.join() for t in ts]\n",
                              NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--summary", "--html", html, NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    regex_t re;
    cr_assert_eq(regcomp(&re, "[0-9]{4,}(\\.[0-9]+)? (ns|us|ms)\\b", REG_EXTENDED), 0);
    char *page = read_file(html, NULL);
    cr_assert_not_null(page);
    regmatch_t m;
    const char *texts[] = {rep.out, page};
    for (int k = 0; k < 2; k++)
        if (regexec(&re, texts[k], 1, &m, 0) == 0)
            cr_expect_fail("%s: \"%.*s\" is past its unit", k ? "the page" : "the report", (int)(m.rm_eo - m.rm_so),
                           texts[k] + m.rm_so);
    regfree(&re);
    cr_expect_not_null(strstr(rep.out, "of user CPU"), "%s", rep.out);
    cr_expect_null(strstr(rep.out, " of CPU"), "%s", rep.out);
    if (venv_has("playwright") && access("/usr/bin/chromium", X_OK) == 0) {
        struct run b;
        run_browser(&b, dir, "labels", html, NULL);
        cr_assert_eq(b.status, 0, "%s%s", b.out, b.err);
        cJSON *o = cJSON_Parse(b.out);
        cr_assert_not_null(o, "%s", b.out);
        cr_expect_geq(cJSON_GetObjectItem(o, "labels")->valueint, 4, "%s", b.out);
        cr_expect_eq(cJSON_GetObjectItem(o, "past")->valueint, 0, "labels past the page: %s", b.out);
        cJSON_Delete(o);
        run_free(&b);
    }
    free(page);
    run_free(&rep);
    run_free(&r);
}

/* Every option on a live process, followed or not: on a run a follower converts, --live asks it for
 * the conversions and a Chrome trace of the run so far, and the rest — the report's tables,
 * --html, --events-csv — is made from that trace as from any. */
Test(report, live_view_of_a_followed_run_takes_every_option, .timeout = 120) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("LD_PRELOAD=%s LIBPROF_OUTPUT=%s/svc.json LIBPROF_FOLLOW=1 %s 6 > %s/out.txt & pid=$!; "
                       "while ! ls %s/*.follower > /dev/null 2>&1; do sleep 0.05; done; "
                       "while n=$(%s --live $pid | sed -n '1s/.* s, \\([0-9]*\\) events.*/\\1/p'); "
                       "[ \"${n:-0}\" -lt 100000 ]; do sleep 0.1; done; "
                       "%s --live $pid --top 3 --html %s/live.html --events-csv %s/live.csv --summary; wait $pid",
                       PRELOAD, dir, PROG("service"), dir, dir, REPORT, REPORT, dir, dir);
    struct run r;
    run_prog(&r, dir, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "[so far: the program is running]") != NULL, "the follower's summary: %s", r.out);
    cr_expect(strstr(r.out, "\nper thread:") != NULL, "the report's tables: %s", r.out);
    char *html = read_file(strfmt("%s/live.html", dir), NULL), *csv = read_file(strfmt("%s/live.csv", dir), NULL);
    cr_assert(html && csv, "%s", r.err);
    cr_expect(strstr(html, "<html") != NULL);
    cr_expect(count_lines_with(csv, "\n") > 60, "events so far: %d",
              count_lines_with(csv, "\n")); /* the 64 blocks held */
    cr_expect_str_eq(read_file(strfmt("%s/out.txt", dir), NULL), "held 64 MiB, churned\n");
    run_free(&r);
}

/* The files a traced command wrote, created, renamed or removed (its strace log `log`, every
 * process it started): each path, a line each, in `out`. */
static int files_written(const char *log, char *out, size_t cap) {
    char *text = read_file(log, NULL);
    cr_assert_not_null(text, "no strace log");
    int n = 0;
    size_t o = 0;
    out[0] = '\0';
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "= -1") || strstr(line, "<unfinished")) continue; /* (failed; or its end follows) */
        int writes =
            strstr(line, "open") && (strstr(line, "O_WRONLY") || strstr(line, "O_RDWR") || strstr(line, "O_CREAT"));
        if (!writes && !strstr(line, "rename") && !strstr(line, "unlink") && !strstr(line, "mkdir") &&
            !strstr(line, "creat(") && !strstr(line, "link("))
            continue;
        char *q = strchr(line, '"'), *e = q ? strchr(q + 1, '"') : NULL;
        if (!q || !e) continue;
        o += (size_t)snprintf(out + o, cap - o, "%.*s\n", (int)(e - q - 1), q + 1);
        n++;
    }
    free(text);
    return n;
}

#define STRACE_FILES "trace=open,openat,creat,rename,renameat,renameat2,unlink,unlinkat,mkdir,link,linkat"

/* `--merge a b OPTION out` under strace (log `log`): it ran, and the one file it wrote is `out`. */
static void merge_writes_only(const char *dir, const char *log, const char *a, const char *b, const char *option,
                              const char *out) {
    struct run r;
    char files[8192];
    run_prog(&r, dir, NULL,
             (const char *[]){"/usr/bin/strace", "-f", "-qq", "-o", log, "-e", STRACE_FILES, REPORT, a, b, "--merge",
                              option, out, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    int n = files_written(log, files, sizeof files);
    cr_expect_eq(n, 1, "the merge (%s) wrote: %s", option, files);
    cr_expect_str_eq(files, strfmt("%s\n", out));
}

/* --merge of raw traces (the Chrome trace, the events CSV) and a --live look at a followed run pass
 * events, not files: strace (every process they start) shows no file written, created, renamed or
 * removed but the outputs. */
Test(report, merge_and_live_write_no_file_but_their_outputs, .timeout = 120) {
    cr_assert_eq(access("/usr/bin/strace", X_OK), 0, "strace (scripts/install-deps installs it)");
    char *dir = make_tmpdir();
    char *a = make_trace(dir, "128"), *b = strfmt("%s/b.lpt", dir), *log = strfmt("%s/merge.strace", dir);
    cr_assert_eq(rename(a, b), 0);
    a = make_trace(dir, "64");
    char *merged = strfmt("%s/m.json", dir), files[8192];
    struct run r;
    merge_writes_only(dir, log, a, b, "--chrome", merged);
    cJSON *m = load_json(merged);
    cr_assert_not_null(m);
    cr_expect_gt(cJSON_GetArraySize(cJSON_GetObjectItem(m, "traceEvents")), 100);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "metadata"), "libprof_merge")), 2);
    cJSON_Delete(m);
    /* the events CSV of the two, merged */
    char *csvm = strfmt("%s/m.csv", dir);
    merge_writes_only(dir, strfmt("%s/csv.strace", dir), a, b, "--events-csv", csvm);
    cr_expect_gt(count_lines_with(read_file(csvm, NULL), "\n"), 100);
    /* a look at a followed run: its CSV and the report's tables (from the Chrome trace the follower
     * sends); the look itself writes nothing, the follower the CSV alone */
    log = strfmt("%s/live.strace", dir);
    char *cmd = strfmt("LD_PRELOAD=%s LIBPROF_OUTPUT=%s/svc.json LIBPROF_FOLLOW=1 %s 4 > /dev/null & pid=$!; "
                       "while ! ls %s/*.follower > /dev/null 2>&1; do sleep 0.05; done; sleep 0.5; "
                       "strace -f -qq -o %s -e trace=open,openat,creat,rename,renameat,renameat2,unlink,unlinkat,"
                       "mkdir,link,linkat %s --live $pid --csv %s/live.csv --summary; rc=$?; wait $pid; exit $rc",
                       PRELOAD, dir, PROG("service"), dir, log, REPORT, dir);
    run_prog(&r, dir, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "[so far: the program is running]") != NULL, "the follower's summary: %s", r.out);
    cr_expect(strstr(r.out, "\nper thread:") != NULL, "the report's tables: %s", r.out);
    run_free(&r);
    int n = files_written(log, files, sizeof files);
    cr_expect_eq(n, 0, "the look wrote: %s", files);
    char *csv = read_file(strfmt("%s/live.csv", dir), NULL);
    cr_expect(csv && strstr(csv, "malloc"), "the CSV of the run so far: %s", csv ? csv : "(none)");
}
