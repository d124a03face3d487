/* Integration tests of the allocation family and the core: programs with exactly known
 * allocation calls run under build/libprof.so; their traces are read with cJSON and Python. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <unistd.h>

#include "harness.h"

TestSuite(alloc, .timeout = 60);

static char *dir;

static void run_allocs(struct run *r, const char *const *extra_env) {
    const char *argv[] = {PROG("allocs"), NULL};
    const char *env[16];
    int k = 0;
    env[k++] = "LD_PRELOAD=" PRELOAD;
    for (int i = 0; extra_env && extra_env[i]; i++) env[k++] = extra_env[i];
    env[k] = NULL;
    cr_assert_eq(run_prog(r, dir, env, argv), 0);
}

static void setup(void) { dir = make_tmpdir(); }

/* The calls tests/progs/allocs makes (its comment), each function's count in a trace's metadata,
 * and its one failed malloc. `what`: said first in a failure. */
static void expect_allocs_calls(cJSON *m, const char *what) {
    struct {
        const char *fn;
        long long n;
    } want[] = {{"malloc", 105},       {"calloc", 6},        {"realloc", 5},  {"reallocarray", 1}, {"free", 118},
                {"posix_memalign", 2}, {"aligned_alloc", 1}, {"memalign", 1}, {"valloc", 1},       {"pvalloc", 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_eq(meta_fn(m, want[i].fn, "count"), want[i].n, "%s%s: %lld calls, want %lld", what, want[i].fn,
                     meta_fn(m, want[i].fn, "count"), want[i].n);
    cr_expect_eq(meta_fn(m, "malloc", "failed"), 1, "%s", what);
}

Test(alloc, exact_counts_peak_and_leaks, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir), *csv = strfmt("LIBPROF_CSV=%s/t.csv", dir);
    /* the allocation family alone, so the event count is exact (its writes to stdout would
     * add io events; those are test_calls' business) */
    const char *env[] = {out, csv, "LIBPROF_EVENTS=alloc", NULL};
    struct run bare, r;
    const char *argv[] = {PROG("allocs"), NULL};
    run_prog(&bare, dir, NULL, argv);
    run_allocs(&r, env);
    /* the host program is unchanged: output, exit status, errno behaviour */
    cr_assert_eq(bare.status, 7);
    cr_assert_eq(r.status, 7);
    cr_assert_str_eq(r.out, bare.out);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_assert_str_eq(r.err, "", "stderr: %s", r.err);

    char *path = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(path));
    cJSON *j = load_json(path);
    cr_assert_not_null(j, "cJSON cannot parse the trace");
    cJSON *m = libprof_meta(j);
    expect_allocs_calls(m, "");
    cr_expect_eq(meta_num(m, "peak_bytes"), 1048576 + 666);
    cr_expect_eq(meta_num(m, "leaked_bytes"), 666);
    cr_expect_eq(meta_num(m, "leaked_blocks"), 3);
    cr_expect_eq(meta_num(m, "untracked_frees"), 0);
    cr_expect_eq(meta_num(m, "events_dropped"), 0);
    cr_expect_eq(meta_num(m, "events_written"), 241);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(m, "complete")));

    /* the 1 MiB block shows as an instant (malloc and free), the heap counter peaks exactly */
    int big_malloc = 0, big_free = 0;
    double counter_max = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        const char *ph = cJSON_GetObjectItem(ev, "ph")->valuestring;
        const char *name = cJSON_GetObjectItem(ev, "name")->valuestring;
        cJSON *args = cJSON_GetObjectItem(ev, "args");
        if (!strcmp(ph, "i") && !strcmp(name, "malloc") && cJSON_GetObjectItem(args, "size")->valuedouble == 1048576)
            big_malloc++;
        if (!strcmp(ph, "i") && !strcmp(name, "free") && cJSON_GetObjectItem(args, "size")->valuedouble == 1048576)
            big_free++;
        if (!strcmp(ph, "C") && !strcmp(name, "heap")) {
            double v = cJSON_GetObjectItem(args, "bytes")->valuedouble;
            if (v > counter_max) counter_max = v;
        }
    }
    cr_expect_eq(big_malloc, 1);
    cr_expect_eq(big_free, 1);
    cr_expect_eq((long long)counter_max, 1048576 + 666);
    cJSON_Delete(j);

    /* CSV: documented header and one row per function called */
    char *csvpath = strfmt("%s/t.csv", dir);
    char *c = read_file(csvpath, NULL);
    cr_assert_not_null(c);
    const char *hdr =
        "name,category,count,total_ns,mean_ns,min_ns,p50_ns,p90_ns,p99_ns,max_ns,bytes,gflops,temporary\n";
    cr_expect(strncmp(c, hdr, strlen(hdr)) == 0, "%s", c);
    cr_expect_not_null(strstr(c, "\nmalloc,alloc,105,"));
    cr_expect_not_null(strstr(c, "\nfree,alloc,118,"));
    cr_expect_not_null(strstr(c, "\nposix_memalign,alloc,2,"));
    cr_expect_eq(count_lines_with(c, ",alloc,"), 10);
    /* no spool left behind */
    char *spool = strfmt("%s/t.json.lpt", dir);
    cr_expect_neq(access(spool, F_OK), 0, "spool file left behind");
    run_free(&r);
    run_free(&bare);
}

Test(alloc, alloc_min_zero_gives_every_allocation, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {out, "LIBPROF_ALLOC_MIN=0", NULL};
    struct run r;
    run_allocs(&r, env);
    cr_assert_eq(r.status, 7);
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    int allocs = 0, frees = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(cJSON_GetObjectItem(ev, "ph")->valuestring, "i")) continue;
        if (!strcmp(cJSON_GetObjectItem(ev, "name")->valuestring, "free"))
            frees++;
        else
            allocs++;
    }
    /* 121 allocating calls return a block (one malloc fails, realloc(q,0) returns NULL); 115 frees of
     * live blocks (3 of the 118 are free(NULL)) */
    cr_expect_eq(allocs, 121, "allocation instants: %d", allocs);
    cr_expect_eq(frees, 115, "free instants: %d", frees);
    cJSON_Delete(j);
    run_free(&r);
}

Test(alloc, raw_trace_converts_to_the_same_outputs, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.lpt", dir), *csv = strfmt("LIBPROF_CSV=%s/live.csv", dir);
    const char *env[] = {out, csv, NULL};
    struct run r;
    run_allocs(&r, env);
    cr_assert_eq(r.status, 7);
    char *lpt = strfmt("%s/t.lpt", dir), *json = strfmt("%s/conv.json", dir), *conv_csv = strfmt("%s/conv.csv", dir);
    const char *argv[] = {REPORT, lpt, "--chrome", json, "--csv", conv_csv, NULL};
    struct run c;
    run_prog(&c, NULL, NULL, argv);
    cr_assert_eq(c.status, 0, "report failed: %s", c.err);
    cr_assert(python_json_ok(json));
    char *a = read_file(strfmt("%s/live.csv", dir), NULL), *b = read_file(conv_csv, NULL);
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    cr_expect_str_eq(a, b, "the runtime and the tool disagree");
    cJSON *j = load_json(json);
    cr_expect_eq(meta_fn(libprof_meta(j), "malloc", "count"), 105);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&c);
}

Test(alloc, threads_that_exit_early_lose_nothing, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    /* small chunks: many flushes per thread */
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_BUFFER_KB=4", NULL};
    const char *argv[] = {PROG("threads"), "16", "3000", NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "ok 16\n");
    char *path = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(path));
    cJSON *j = load_json(path);
    cJSON *m = libprof_meta(j);
    /* workers: 16 * (3000 + 4 destructor rounds); main: one stdio buffer */
    cr_expect_eq(meta_fn(m, "malloc", "count"), 16 * 3004 + 1, "malloc %lld", meta_fn(m, "malloc", "count"));
    cr_expect_geq(meta_fn(m, "free", "count"), 16 * 3004);
    cr_expect_eq(meta_num(m, "events_dropped"), 0);
    cr_expect_eq(meta_num(m, "threads"), 17);
    int named = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(cJSON_GetObjectItem(ev, "name")->valuestring, "thread_name")) continue;
        const char *n = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "name")->valuestring;
        if (!strncmp(n, "worker-", 7)) named++;
    }
    cr_expect_eq(named, 16, "threads named from pthread_setname_np: %d", named);
    cJSON_Delete(j);
    run_free(&r);
}

Test(alloc, forked_child_traces_into_its_own_file, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_ALLOC_MIN=0", NULL};
    const char *argv[] = {PROG("forker"), NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, "child exited 3\n");
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    cJSON *m = libprof_meta(j);
    cr_expect_eq(meta_fn(m, "malloc", "count"), 41); /* 20 + 20 + stdout buffer */
    cr_expect_eq(meta_fn(m, "free", "count"), 40);
    long long parent = meta_num(m, "pid");
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *size = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "size");
        cr_expect(!size || size->valuedouble != 3000, "a child event reached the parent's trace");
    }
    cJSON_Delete(j);
    /* the child: t.PID.json, its own 500 allocations only (none of the parent's first 20), and
     * the status it passed to exit() */
    int children;
    char **kids = child_traces(dir, "t", &children);
    for (int i = 0; i < children; i++) {
        cJSON *c = load_json(kids[i]);
        cr_assert_not_null(c, "%s", kids[i]);
        cJSON *cm = libprof_meta(c);
        cr_expect_eq(meta_num(cm, "ppid"), parent);
        cr_expect_eq(meta_num(cm, "pid"), atoll(strrchr(kids[i], '/') + 3));
        cr_expect_eq(meta_fn(cm, "malloc", "count"), 500);
        cr_expect_eq(meta_fn(cm, "malloc", "bytes"), 500 * 3000);
        cr_expect_eq(meta_num(cm, "exit_status"), 3);
        cJSON_Delete(c);
    }
    cr_expect_eq(children, 1);
    run_free(&r);
}

static int preload_case(const char *lib, const char *const *argv, struct run *r, cJSON **j) {
    if (access(lib, R_OK) != 0) return -1;
    char *pre = strfmt("LD_PRELOAD=%s:%s", PRELOAD, lib), *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {pre, out, NULL};
    run_prog(r, dir, env, argv);
    *j = load_json(strfmt("%s/t.json", dir));
    return 0;
}

/* tcmalloc preloaded after libprof serves the program; libprof records every call. tcmalloc
 * pulls in libstdc++, whose constructor mallocs its exception pool, so malloc counts and leaks
 * are at least (not exactly) the program's own. */
Test(alloc, works_over_tcmalloc, .init = setup) {
    const char *argv[] = {PROG("allocs"), NULL};
    struct run r;
    cJSON *j;
    if (preload_case("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", argv, &r, &j)) cr_skip_test("no tcmalloc");
    cr_assert_eq(r.status, 7, "status %d, stderr: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_assert_not_null(j);
    cJSON *m = libprof_meta(j);
    cr_expect_eq(meta_fn(m, "calloc", "count"), 6);
    cr_expect_eq(meta_fn(m, "realloc", "count"), 5);
    cr_expect_eq(meta_fn(m, "reallocarray", "count"), 1);
    cr_expect_eq(meta_fn(m, "free", "count"), 118);
    cr_expect_eq(meta_fn(m, "pvalloc", "count"), 1);
    cr_expect_geq(meta_fn(m, "malloc", "count"), 105);
    cr_expect_geq(meta_num(m, "leaked_bytes"), 666);
    cr_expect_geq(meta_num(m, "peak_bytes"), 1048576 + 666);
    cr_expect_eq(meta_num(m, "untracked_frees"), 0);
    cJSON_Delete(j);
    run_free(&r);
}

/* jemalloc has no pvalloc (glibc's would hand it foreign blocks), so the threaded program is
 * used: 4 workers x (500 + 4) malloc/free pairs + the stdio buffer. */
Test(alloc, works_over_jemalloc, .init = setup) {
    const char *argv[] = {PROG("threads"), "4", "500", NULL};
    struct run r;
    cJSON *j;
    if (preload_case("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", argv, &r, &j)) cr_skip_test("no jemalloc");
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "ok 4\n");
    cr_assert_not_null(j);
    cJSON *m = libprof_meta(j);
    /* jemalloc may malloc for itself on first use; the program's calls are all there */
    cr_expect_geq(meta_fn(m, "malloc", "count"), 4 * 504 + 1);
    cr_expect_leq(meta_fn(m, "malloc", "count"), 4 * 504 + 3);
    cr_expect_eq(meta_num(m, "events_dropped"), 0);
    cJSON_Delete(j);
    run_free(&r);
}

Test(alloc, off_is_pass_through, .init = setup) {
    const char *env[] = {"LD_PRELOAD=" PRELOAD, NULL};
    struct run r;
    const char *argv[] = {PROG("allocs"), NULL};
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 7);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_assert_str_eq(r.err, "");
    DIR *d = opendir(dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') files++;
    closedir(d);
    cr_expect_eq(files, 0, "libprof wrote files while off");
    run_free(&r);
}

Test(alloc, bad_values_warn_once_and_keep_defaults, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {
        out, "LIBPROF_BUFFER_KB=lots", "LIBPROF_ALLOC_MIN=-5", "LIBPROF_EVENTS=alloc,bogus", "LIBPROF_VERBOSE=maybe",
        NULL};
    struct run r;
    run_allocs(&r, env);
    cr_assert_eq(r.status, 7);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_expect_eq(count_lines_with(r.err, "libprof: ignoring LIBPROF_BUFFER_KB=\"lots\""), 1, "%s", r.err);
    cr_expect_eq(count_lines_with(r.err, "libprof: ignoring LIBPROF_ALLOC_MIN=\"-5\""), 1);
    cr_expect_eq(count_lines_with(r.err, "libprof: ignoring LIBPROF_EVENTS=\"alloc,bogus\""), 1);
    cr_expect_eq(count_lines_with(r.err, "libprof: ignoring LIBPROF_VERBOSE"), 1);
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 4);
    /* defaults kept: still profiling every family */
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    cr_expect_eq(meta_fn(libprof_meta(j), "malloc", "count"), 105);
    cr_expect_eq(meta_num(libprof_meta(j), "alloc_instant_min_bytes"), 65536);
    cJSON_Delete(j);
    run_free(&r);
}

/* Sampling asked for, the cpu family left out: no samples, and one line that says why. */
Test(alloc, sampling_without_the_cpu_family_says_so, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {out, "LIBPROF_SAMPLE_HZ=1000", "LIBPROF_EVENTS=alloc", NULL};
    struct run r;
    run_allocs(&r, env);
    cr_assert_eq(r.status, 7);
    cr_expect_eq(count_lines_with(r.err, "libprof: LIBPROF_SAMPLE_HZ is set but LIBPROF_EVENTS leaves out cpu"), 1,
                 "%s", r.err);
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 1, "%s", r.err);
    run_free(&r);
}

Test(alloc, unwritable_output_warns_and_runs_untraced, .init = setup) {
    const char *env[] = {"LIBPROF_OUTPUT=/proc/libprof-no/such/t.json", NULL};
    struct run r;
    run_allocs(&r, env);
    cr_assert_eq(r.status, 7);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 1, "stderr: %s", r.err);
    run_free(&r);
}

Test(alloc, default_paths_with_libprof_1, .init = setup) {
    const char *env[] = {"LIBPROF=1", NULL};
    struct run r;
    run_allocs(&r, env);
    cr_assert_eq(r.status, 7);
    char *d = strfmt("%s/libprof_profiling", dir);
    DIR *dd = opendir(d);
    cr_assert_not_null(dd, "no libprof_profiling directory");
    struct dirent *e;
    int json = 0, csv = 0;
    while ((e = readdir(dd))) {
        /* profile_%e_%t_%p.json */
        if (!strncmp(e->d_name, "profile_allocs_", 15)) {
            if (strstr(e->d_name, ".json")) json++;
            if (strstr(e->d_name, ".csv")) csv++;
            cr_expect_eq(count_lines_with(e->d_name, "_"), 3, "%s", e->d_name);
        }
    }
    closedir(dd);
    cr_expect_eq(json, 1);
    cr_expect_eq(csv, 1);
    run_free(&r);
}

Test(alloc, path_patterns_and_children_get_their_own_files, .init = setup) {
    char host[256];
    gethostname(host, sizeof host);
    /* %e %h %% expand; no %p: the shell keeps the plain name and each child (run one after the
     * other, so no lock tells them apart) gets NAME.PID.json because its parent is traced */
    char *out = strfmt("LIBPROF_OUTPUT=%s/%%e-%%h-100%%%%.json", dir);
    char *cmd = strfmt("%s; %s; true", PROG("allocs"), PROG("allocs"));
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0);
    /* dash ends with _exit(), which skips destructors: the _exit hook writes its trace, with the
     * status it exits with */
    char *shfile = strfmt("%s/dash-%s-100%%.json", dir, host);
    cr_assert(python_json_ok(shfile), "no trace for the shell");
    cJSON *sh = load_json(shfile);
    cr_expect_eq(meta_num(libprof_meta(sh), "exit_status"), 0);
    cJSON_Delete(sh);
    DIR *dd = opendir(dir);
    struct dirent *e;
    int children = 0;
    char *prefix = strfmt("allocs-%s-100%%.", host);
    while ((e = readdir(dd))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) || !strstr(e->d_name, ".json")) continue;
        long pid = atol(e->d_name + strlen(prefix));
        cr_expect_gt(pid, 0, "child trace without a pid: %s", e->d_name);
        children++;
        cJSON *j = load_json(strfmt("%s/%s", dir, e->d_name));
        cr_expect_eq(meta_fn(libprof_meta(j), "malloc", "count"), 105, "%s", e->d_name);
        cr_expect_eq(meta_num(libprof_meta(j), "pid"), pid);
        cJSON_Delete(j);
    }
    closedir(dd);
    cr_expect_eq(children, 2, "traces of the two children: %d", children);
    run_free(&r);
}

Test(alloc, exit_status_reaches_the_trace, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {"/usr/bin/python3", "-c", "import sys; sys.exit(5)", NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 5);
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    cr_expect_eq(meta_num(libprof_meta(j), "exit_status"), 5);
    cJSON_Delete(j);
    run_free(&r);
}

/* Exactly the functions preload/libprof.map names (its libprof_* pattern being the eight API
 * functions), nothing else of libprof's leaks into the program's namespace. */
Test(alloc, exported_symbols_are_only_the_interface) {
    const char *argv[] = {"sh", "-c", "nm -D --defined-only " PRELOAD " | awk '{print $3}' | sort | tr '\\n' ' '",
                          NULL};
    struct run r;
    run_prog(&r, NULL, NULL, argv);
    cr_assert_eq(r.status, 0);
    const char *want_cmd[] = {
        "sh", "-c",
        "{ sed -n '/global:/,/local:/p' preload/libprof.map | grep -v ':' | sed 's|/\\*.*||' | tr ' ;' '\\n\\n' "
        "| grep -v '^$' | grep -v '\\*'; printf '%s\\n' libprof_counter libprof_mark libprof_range_pop "
        "libprof_range_push libprof_reset libprof_start libprof_stop libprof_thread_name; } | sort | tr '\\n' ' '",
        NULL};
    struct run w;
    run_prog(&w, NULL, NULL, want_cmd);
    cr_assert_eq(w.status, 0);
    cr_assert_gt(strlen(w.out), 400, "map list: %s", w.out);
    cr_expect_str_eq(r.out, w.out);
    cr_expect_not_null(strstr(r.out, " malloc "));
    cr_expect_not_null(strstr(r.out, " pthread_mutex_lock "));
    run_free(&w);
    run_free(&r);
}

Test(alloc, summary_on_stderr, .init = setup) {
    const char *env[] = {"LIBPROF_SUMMARY=1", NULL};
    struct run r;
    run_allocs(&r, env);
    cr_assert_eq(r.status, 7);
    cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_expect_not_null(strstr(r.err, "libprof: allocs (pid "), "%s", r.err);
    cr_expect_not_null(strstr(r.err, "heap peak 1024.7 KiB (1049242 B)"), "%s", r.err);
    cr_expect_not_null(strstr(r.err, "leaked 666 B (666 B) in 3 blocks"));
    cr_expect_not_null(strstr(r.err, "block sizes:"));
    /* summary only: the temporary spool is removed */
    run_free(&r);
}

Test(alloc, alloc_timing_fills_the_duration_columns, .init = setup) {
    char *csv0 = strfmt("LIBPROF_CSV=%s/untimed.csv", dir), *csv1 = strfmt("LIBPROF_CSV=%s/timed.csv", dir);
    struct run r;
    run_allocs(&r, (const char *[]){csv0, NULL});
    cr_assert_eq(r.status, 7);
    run_free(&r);
    run_allocs(&r, (const char *[]){csv1, "LIBPROF_ALLOC_TIMING=1", NULL});
    cr_assert_eq(r.status, 7);
    run_free(&r);
    char *u = read_file(strfmt("%s/untimed.csv", dir), NULL), *t = read_file(strfmt("%s/timed.csv", dir), NULL);
    cr_assert_not_null(u);
    cr_assert_not_null(t);
    /* untimed: count, no durations, bytes; realloc is always timed */
    cr_expect_not_null(strstr(u, "\nmalloc,alloc,105,,,,,,,,1058745,,\n"), "%s", u);
    cr_expect_null(strstr(u, "\nrealloc,alloc,5,,"), "%s", u);
    /* timed: every column numeric, min <= p50 <= p99 <= max */
    char *row = strstr(t, "\nmalloc,alloc,105,");
    cr_assert_not_null(row, "%s", t);
    unsigned long long total, mean, mn, p50, p90, p99, mx, bytes;
    cr_assert_eq(sscanf(row, "\nmalloc,alloc,105,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu", &total, &mean, &mn, &p50,
                        &p90, &p99, &mx, &bytes),
                 8, "%s", row);
    cr_expect(mn <= p50 && p50 <= p90 && p90 <= p99 && p99 <= mx, "%s", row);
    cr_expect_gt(total, 0);
    cr_expect_eq(bytes, 1058745);
}

Test(alloc, wrapper_runs_the_program_and_passes_its_status, .init = setup) {
    char *out = strfmt("%s/w.json", dir);
    const char *argv[] = {LP_BUILD_DIR "/libprof", "-o", out, "--", PROG("allocs"), NULL};
    struct run r;
    run_prog(&r, dir, NULL, argv);
    cr_expect_eq(r.status, 7);
    cr_expect_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_expect_not_null(strstr(r.err, "libprof: wrote "), "%s", r.err);
    cr_expect(python_json_ok(out));
    run_free(&r);
    /* a program killed by a signal: 128 + signal, like a shell */
    const char *kill_argv[] = {LP_BUILD_DIR "/libprof", "-o", out, "--", "/bin/sh", "-c", "kill -TERM $$", NULL};
    run_prog(&r, dir, NULL, kill_argv);
    cr_expect_eq(r.status, 128 + 15, "status %d", r.status);
    run_free(&r);
    const char *help[] = {LP_BUILD_DIR "/libprof", "--help", NULL};
    run_prog(&r, dir, NULL, help);
    cr_expect_eq(r.status, 0);
    cr_expect_not_null(strstr(r.out, "usage: libprof"));
    run_free(&r);
}

Test(alloc, missing_directories_are_created, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/a/b/c/t_%%p.json", dir), *csv = strfmt("LIBPROF_CSV=%s/x/y/t.csv", dir);
    struct run r;
    run_allocs(&r, (const char *[]){out, csv, NULL});
    cr_assert_eq(r.status, 7);
    cr_expect_str_eq(r.err, "");
    DIR *d = opendir(strfmt("%s/a/b/c", dir));
    cr_assert_not_null(d);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "t_", 2) && strstr(e->d_name, ".json")) found++;
    closedir(d);
    cr_expect_eq(found, 1);
    cr_expect_eq(access(strfmt("%s/x/y/t.csv", dir), R_OK), 0);
    run_free(&r);
}

Test(alloc, hostile_strings_keep_the_json_strict, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    /* arguments with quotes, backslashes, control characters and invalid UTF-8 end up in
     * process_name and metadata.command */
    const char *argv[] = {PROG("allocs"),    "say \"hi\"", "back\\slash", "tab\tnl\nbell\a",
                          "bad\xff\xc0utf8", "\xe2\x82",   NULL};
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 7);
    char *path = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(path));
    cJSON *j = load_json(path);
    cr_assert_not_null(j);
    const char *cmd = cJSON_GetObjectItem(libprof_meta(j), "command")->valuestring;
    cr_expect_not_null(strstr(cmd, "say \"hi\" back\\slash tab\tnl\nbell\a bad\xef\xbf\xbd\xef\xbf\xbdutf8"), "%s",
                       cmd);
    cJSON_Delete(j);
    run_free(&r);
}

Test(alloc, no_children_profiles_only_the_first_process, .init = setup) {
    /* python3 runs `threads` as a child: with --no-children only python3 writes a trace, and the
     * child's environment holds neither LIBPROF* nor libprof in LD_PRELOAD (jemalloc stays) */
    char *out = strfmt("%s/%%e.%%p.json", dir);
    const char *script =
        "import os, subprocess, sys\n"
        "subprocess.run([sys.argv[1], '2', '10'])\n"
        "print(sorted(k for k in os.environ if k.startswith('LIBPROF')), os.environ.get('LD_PRELOAD'))\n";
    const char *argv[] = {
        LP_BUILD_DIR "/libprof", "-q", "--no-children", "-o", out, "--", "/usr/bin/python3", "-c", script,
        PROG("threads"),         NULL};
    const char *env[] = {"LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", NULL};
    struct run r;
    run_prog(&r, dir, access("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", R_OK) == 0 ? env : NULL, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "ok 2\n[] ") == r.out, "%s", r.out);
    cr_expect_null(strstr(r.out, "libprof.so"), "%s", r.out);
    DIR *d = opendir(dir);
    struct dirent *e;
    int python = 0, allocs = 0;
    while ((e = readdir(d))) {
        python += !strncmp(e->d_name, "python3", 7) && strstr(e->d_name, ".json") != NULL;
        allocs += !strncmp(e->d_name, "threads", 7);
    }
    closedir(d);
    cr_expect_eq(python, 1);
    cr_expect_eq(allocs, 0, "the child was profiled");
    run_free(&r);
}

/* A disk that fills up: one warning, the program unaffected, and a trace that says how many
 * events it lost. Needs a tiny tmpfs (skipped where this sandbox cannot mount one). The run is
 * repeated: the spool past a failed write has holes where threads' writes failed, and reading one
 * through a mapping on a full tmpfs was a SIGBUS at the program's exit (2 runs in 100); each run
 * must end as the program does. */
Test(alloc, full_disk_is_reported_not_fatal, .init = setup) {
    char *mnt = strfmt("%s/tiny", dir);
    mkdir(mnt, 0755);
    char *cmd = strfmt("mount -t tmpfs -o size=256k tmpfs %s 2>/dev/null", mnt);
    if (system(cmd) != 0) cr_skip_test("cannot mount a tmpfs here");
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", mnt);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {PROG("threads"), "4", "100000", NULL};
    for (int k = 1; k < 30; k++) { /* (the run checked in full below is the 30th) */
        struct run again;
        system(strfmt("rm -f %s/*", mnt));
        run_prog(&again, dir, env, argv);
        cr_expect(again.status == 0 && !strcmp(again.out, "ok 4\n"), "run %d: status %d, output '%s'", k, again.status,
                  again.out);
        run_free(&again);
    }
    system(strfmt("rm -f %s/*", mnt));
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "ok 4\n");
    cr_expect_eq(count_lines_with(r.err, "libprof: cannot write the trace (No space left on device)"), 1, "%s", r.err);
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 1, "%s", r.err);
    char *path = strfmt("%s/t.json", mnt);
    cr_expect(python_json_ok(path));
    cJSON *j = load_json(path);
    cr_assert_not_null(j);
    cJSON *m = libprof_meta(j);
    long long written = meta_num(m, "events_written"), dropped = meta_num(m, "events_dropped");
    cr_expect_gt(dropped, 0);
    cr_expect_eq(meta_num(m, "events_decoded"), written);
    cr_expect_geq(written + dropped, 2LL * 4 * 100004, "written %lld + dropped %lld", written, dropped);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(m, "complete")));
    cJSON_Delete(j);
    run_free(&r);
    system(strfmt("umount %s", mnt));
}

/* A symlink planted at the trace's name (think of a world-writable /tmp) is never written
 * through: at the JSON's name it is replaced by the trace; at the spool's name libprof refuses
 * to record, says so once, and the program runs on. */
Test(alloc, symlinks_at_output_names_are_not_followed, .init = setup) {
    char *target = strfmt("%s/precious", dir), *json = strfmt("%s/t.json", dir);
    FILE *f = fopen(target, "w");
    fputs("precious\n", f);
    fclose(f);
    cr_assert_eq(symlink(target, json), 0);
    char *out = strfmt("LIBPROF_OUTPUT=%s", json);
    struct run r;
    run_allocs(&r, (const char *[]){out, NULL});
    cr_assert_eq(r.status, 7);
    cr_expect_str_eq(read_file(target, NULL), "precious\n");
    struct stat st;
    cr_assert_eq(lstat(json, &st), 0);
    cr_expect(S_ISREG(st.st_mode), "the symlink should have been replaced by the trace");
    cr_expect(python_json_ok(json));
    run_free(&r);
    unlink(json);
    cr_assert_eq(symlink(target, strfmt("%s.lpt", json)), 0);
    run_allocs(&r, (const char *[]){out, NULL});
    cr_assert_eq(r.status, 7);
    cr_expect_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 1, "%s", r.err);
    cr_expect_str_eq(read_file(target, NULL), "precious\n");
    run_free(&r);
}

/* LIBPROF_ALLOC_SAMPLE: the allocations that hold no sampled byte are counted, not recorded; the
 * rest, and their frees, are recorded. Whether nearly none is sampled (one every GiB), some
 * (4 KiB) or nearly all (16 B), every function's calls are the program's, the failed malloc
 * is counted as failed, the leaks are its 3 blocks and the peak its 1 MiB + 666 B — counted
 * blocks at their usable size, a few bytes more than asked, never less. */
Test(alloc, counted_allocations_keep_every_count, .init = setup) {
    const char *rates[] = {"1G", "4096", "16"};
    for (int k = 0; k < 3; k++) {
        char *path = strfmt("%s/c%d.json", dir, k);
        const char *env[] = {strfmt("LIBPROF_OUTPUT=%s", path), strfmt("LIBPROF_ALLOC_SAMPLE=%s", rates[k]),
                             "LIBPROF_EVENTS=alloc", NULL};
        struct run r;
        run_allocs(&r, env);
        cr_assert_eq(r.status, 7, "%s", r.err);
        cr_assert_str_eq(r.out, "enomem ok\nerrno ok\ndone\n");
        cr_assert_str_eq(r.err, "", "stderr: %s", r.err);
        run_free(&r);
        cJSON *j = load_json(path);
        cr_assert_not_null(j);
        cJSON *m = libprof_meta(j);
        expect_allocs_calls(m, strfmt("every %s: ", rates[k]));
        cr_expect_eq(meta_num(m, "leaked_blocks"), 3, "every %s", rates[k]);
        long long leaked = meta_num(m, "leaked_bytes"), peak = meta_num(m, "peak_bytes");
        cr_expect(leaked >= 666 && leaked <= 666 + 3 * 32, "every %s: leaked %lld", rates[k], leaked);
        cr_expect(peak >= 1048576 + 666 && peak <= 1048576 + 666 + 8192, "every %s: peak %lld", rates[k], peak);
        cr_expect_eq(meta_num(m, "untracked_frees"), 0, "every %s", rates[k]);
        cJSON *st = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "stacks"), "sampled");
        cr_assert_not_null(st);
        double counted = cJSON_GetObjectItem(st, "allocations_counted_only")->valuedouble;
        if (k == 0) cr_expect_gt(counted, 100, "nearly every allocation counted: %.0f", counted);
        if (k == 2) cr_expect_lt(counted, 20, "nearly every allocation recorded: %.0f", counted);
        cJSON_Delete(j);
    }
}
