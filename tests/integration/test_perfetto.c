/* test_perfetto.c: Perfetto's protobuf trace (LIBPROF_OUTPUT=NAME.pftrace, libprof-report
 * --perfetto), parsed with Perfetto's own compiled schema (check_pftrace_schema.py: no field it
 * does not have) and decoded against a schema written from Perfetto's documented field numbers
 * (check_pftrace.py, perfetto_subset.proto): every interned id
 * resolves, every slice ends, timestamps rise; the same run's Chrome JSON has as many slices,
 * instants, counter samples and flows, its folded CPU stacks as many samples, its allocation
 * flame graph as many bytes as the heap profile. Where LIBPROF_TRACE_PROCESSOR names Perfetto's
 * trace_processor_shell (built from Perfetto's sources: docs/building.md), it loads them too. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(perfetto, .timeout = 300);

/* libprof-report's report of `trace` from its second line (the first names the file and counts
 * what it skipped, which differs by format). */
static char *report_rows(const char *trace, const char *opt) {
    struct run r;
    run_prog(&r, NULL, NULL, (const char *[]){REPORT, trace, opt, NULL});
    cr_assert_eq(r.status, 0, "libprof-report %s: %s", trace, r.err);
    const char *nl = strchr(r.out, '\n');
    char *rows = strdup(nl ? nl + 1 : "");
    cr_assert_not_null(rows);
    run_free(&r);
    return rows;
}

/* The report reads the Perfetto trace as it reads the JSON of the same run: the same rows (the
 * per-name and per-thread tables, the CPU samples' and the metadata's), and by input shapes. */
static void same_report(const char *pf, const char *json) {
    const char *opts[] = {"--summary", "--by-shapes"};
    for (int i = 0; i < 2; i++) {
        char *a = report_rows(json, opts[i]), *b = report_rows(pf, opts[i]);
        cr_expect_gt(strlen(a), 40, "%s: a report", json);
        cr_expect_str_eq(b, a, "libprof-report %s %s differs from its JSON's (%s)", pf, opts[i], json);
        free(a);
        free(b);
    }
}

/* check_pftrace.py's summary of `trace` (with the files to compare to: "--json", J, ...); with
 * the JSON, the report's rows of both. */
static cJSON *check(const char *trace, const char *const *more) {
    const char *argv[16] = {"/usr/bin/python3", LP_SOURCE_DIR "/tests/integration/check_pftrace.py", trace};
    int n = 3;
    for (; more && *more && n < 15; more++) {
        if (!strcmp(*more, "--json") && more[1]) same_report(trace, more[1]);
        argv[n++] = *more;
    }
    argv[n] = NULL;
    struct run r;
    cr_assert_eq(run_prog(&r, NULL, NULL, argv), 0);
    cr_assert_eq(r.status, 0, "%s: %s", trace, r.err);
    cJSON *j = cJSON_Parse(r.out);
    cr_assert_not_null(j, "check_pftrace.py printed: %s", r.out);
    run_free(&r);
    /* and by Perfetto's own schema: it parses, no field it does not have, as many packets */
    if (access(LP_VENV "/bin/python3", X_OK) != 0) cr_skip_test("no environment at " LP_VENV " (scripts/install-deps)");
    run_prog(&r, NULL, NULL,
             (const char *[]){LP_VENV "/bin/python3", LP_SOURCE_DIR "/tests/integration/check_pftrace_schema.py", trace,
                              NULL});
    cr_assert_eq(r.status, 0, "%s: %s", trace, r.err);
    cJSON *theirs = cJSON_Parse(r.out);
    cr_assert_not_null(theirs, "check_pftrace_schema.py printed: %s", r.out);
    cr_expect_eq(cJSON_GetObjectItem(theirs, "packets")->valuedouble, cJSON_GetObjectItem(j, "packets")->valuedouble,
                 "%s: packets by Perfetto's schema and by the subset", trace);
    cJSON_Delete(theirs);
    run_free(&r);
    return j;
}

static long long num(cJSON *j, const char *k) {
    cJSON *v = cJSON_GetObjectItem(j, k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

static long long size_of(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Written at exit by the preload, and by libprof-report from the raw trace kept of the same run:
 * threads, CPU samples on each, allocation stacks, thread-start flows. */
Test(perfetto, the_same_run_as_the_json_with_samples_flows_and_heap) {
    char *dir = make_tmpdir();
    char *pf = strfmt("%s/s.pftrace", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", pf), "LIBPROF_SAMPLE_HZ=500",
                              "LIBPROF_STACKS=8", "LIBPROF_KEEP_RAW=1", NULL},
             (const char *[]){PROG("cpusplit"), "split", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char *lpz = strfmt("%s/s.pftrace.lpz", dir), *json = strfmt("%s/s.json", dir),
         *cpu = strfmt("%s/s.cpu.folded", dir), *alloc = strfmt("%s/s.alloc.folded", dir),
         *pf2 = strfmt("%s/again.pftrace", dir);
    run_prog(&r, dir, NULL,
             (const char *[]){REPORT, lpz, "--chrome", json, "--cpu-folded", cpu, "--folded", alloc, "--perfetto", pf2,
                              "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    /* (the exit's conversion leaves out the JSON's per-site heap tracks unless LIBPROF_FLAMEGRAPH
     * asks: its counters are compared through libprof-report's, which makes both files) */
    const char *more[] = {"--folded", cpu, "--heap-folded", alloc, "--json", json, NULL};
    cJSON *exit_made = check(pf, (const char *[]){more[0], more[1], more[2], more[3], NULL}),
          *report_made = check(pf2, more);
    cJSON *sums[] = {exit_made, report_made};
    for (int i = 0; i < 2; i++) {
        cJSON *s = sums[i];
        cr_expect_gt(num(s, "slices"), 0, "%d", i);
        cr_expect_geq(num(s, "flows"), 2, "%d: the two threads' start arrows", i);
        cr_expect_gt(num(s, "cpu_samples"), 100, "%d", i);
        cr_expect_geq(num(s, "sampled_threads"), 2, "%d: samples on the threads' tracks", i);
        cr_expect_geq(num(s, "threads"), 3, "%d", i);
        cr_expect_eq(num(s, "heap_profiles"), 1, "%d", i);
        cr_expect_gt(num(s, "heap_allocated"), 0, "%d", i);
        cr_expect_gt(num(s, "counter_samples"), 0, "%d: the heap counter", i);
        cr_expect_eq(num(s, "metadata"), 1, "%d", i);
        /* the timeline's bundles (the last deflated on the writer's thread while the heap
         * profile is made), then the heap profile's own */
        cr_expect_geq(num(s, "compressed_bundles"), 2, "%d", i);
    }
    cr_expect_leq(size_of(pf2) * 4, size_of(json), "the Perfetto trace %lld bytes, the JSON %lld: not a quarter",
                  size_of(pf2), size_of(json));
    cJSON_Delete(exit_made);
    cJSON_Delete(report_made);
}

/* A heap profile of thousands of allocation stacks is a chain of ProfilePackets, as heapprofd
 * splits a large one: one profile, every stack's frames resolved in the chain, the bytes the
 * folded allocation stacks add up to, every bundle under Perfetto's limit (the checker's). */
Test(perfetto, a_large_heap_profile_as_a_chain_of_packets) {
    char *dir = make_tmpdir(), *pf = strfmt("%s/f.pftrace", dir), *lpz = strfmt("%s/f.pftrace.lpz", dir),
         *alloc = strfmt("%s/f.alloc.folded", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", pf), "LIBPROF_STACKS=16",
                              "LIBPROF_KEEP_RAW=1", NULL},
             (const char *[]){PROG("stackfan"), "12", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "4096\n");
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpz, "--folded", alloc, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *s = check(pf, (const char *[]){"--heap-folded", alloc, NULL});
    cr_expect_eq(num(s, "heap_profiles"), 1);
    cr_expect_geq(num(s, "heap_packets"), 3, "4096 stacks of 16 frames: more than one packet's worth");
    cr_expect_geq(num(s, "heap_allocated"), 4096 * 64, "its 4096 blocks of 64 B at least");
    cJSON_Delete(s);
}

/* A followed run (converted while it runs) writes it too, and a live look asks for it. */
Test(perfetto, followed_and_live, .timeout = 120) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("LD_PRELOAD=%s LIBPROF_OUTPUT=%s/svc.pftrace LIBPROF_FOLLOW=1 %s 4 > %s/out.txt & pid=$!; "
                       "while ! ls %s/*.follower > /dev/null 2>&1; do sleep 0.05; done; sleep 1; "
                       "%s --live $pid --perfetto %s/live.pftrace -q; wait $pid",
                       PRELOAD, dir, PROG("service"), dir, dir, REPORT, dir);
    struct run r;
    run_prog(&r, dir, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    run_free(&r);
    cr_expect_str_eq(read_file(strfmt("%s/out.txt", dir), NULL), "held 64 MiB, churned\n");
    cJSON *whole = check(strfmt("%s/svc.pftrace", dir), NULL), *live = check(strfmt("%s/live.pftrace", dir), NULL);
    cr_expect_gt(num(whole, "counter_samples"), 0);
    cr_expect_eq(num(whole, "metadata"), 1);
    cr_expect_gt(num(live, "counter_samples"), 0, "the heap so far");
    cr_expect_leq(num(live, "counter_samples"), num(whole, "counter_samples"));
    cJSON_Delete(whole);
    cJSON_Delete(live);
}

/* The bundles deflated on threads of their own (this machine's processors) or all on the
 * converting thread (the process pinned to one processor): the same file, byte for byte — the
 * threads' bundles are written in their order. */
Test(perfetto, deflated_on_threads_or_not_the_same_file) {
    char *dir = make_tmpdir(), *lpt = strfmt("%s/s.lpt", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=8",
                              "LIBPROF_SAMPLE_HZ=500", NULL},
             (const char *[]){PROG("call_loop"), "read", "16000", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char *threads = strfmt("%s/t.pftrace", dir), *one = strfmt("%s/o.pftrace", dir);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpt, "--perfetto", threads, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){"taskset", "-c", "0", REPORT, lpt, "--perfetto", one, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *t = check(threads, NULL);
    /* (the first 2 are deflated where they are made: a short trace starts no thread) */
    cr_expect_geq(num(t, "compressed_bundles"), 5, "bundles enough for the threads to take some");
    size_t nt = 0, no = 0;
    char *a = read_file(threads, &nt), *b = read_file(one, &no);
    cr_assert(a && b);
    cr_expect(nt == no && memcmp(a, b, nt) == 0, "%zu bytes against %zu", nt, no);
    free(a);
    free(b);
    cJSON_Delete(t);
}

/* Each of the three deflaters, the ones before it hidden (a mount namespace of its own, where
 * /dev/null is bound over their libraries): ISA-L where the system has it, else libdeflate, else
 * zlib — three traces with the same content, and three sizes (each took its own path). */
Test(perfetto, each_deflater_the_same_trace) {
    static const char *const libs[] = {"/usr/lib/x86_64-linux-gnu/libisal.so.2",
                                       "/usr/lib/x86_64-linux-gnu/libdeflate.so.0"};
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        if (access(libs[i], R_OK) != 0) cr_skip_test("no %s (scripts/install-deps installs it)", libs[i]);
    char *dir = make_tmpdir(), *lpt = strfmt("%s/s.lpt", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=8", NULL},
             (const char *[]){PROG("cpusplit"), "split", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *t[3];
    long long size[3];
    for (int hidden = 0; hidden < 3; hidden++) {
        char *out = strfmt("%s/%d.pftrace", dir, hidden), *cmd = strfmt("%s %s --perfetto %s -q", REPORT, lpt, out);
        for (int k = hidden - 1; k >= 0; k--) cmd = strfmt("mount --bind /dev/null %s && %s", libs[k], cmd);
        run_prog(&r, dir, NULL, (const char *[]){"unshare", "-m", "/bin/sh", "-c", cmd, NULL});
        if (r.status != 0 && strstr(r.err, "unshare")) cr_skip_test("no mount namespace here: %s", r.err);
        cr_assert_eq(r.status, 0, "%s", r.err);
        run_free(&r);
        t[hidden] = check(out, NULL);
        size[hidden] = size_of(out);
        cr_expect_gt(num(t[hidden], "compressed_bundles"), 0, "%d hidden: deflated", hidden);
    }
    const char *same[] = {"packets", "slices", "instants", "counter_samples", "flows", "heap_allocated"};
    for (int k = 1; k < 3; k++)
        for (size_t i = 0; i < sizeof same / sizeof *same; i++)
            cr_expect_eq(num(t[k], same[i]), num(t[0], same[i]), "%s, %d hidden", same[i], k);
    cr_expect(size[0] != size[1] && size[1] != size[2] && size[0] != size[2],
              "three deflaters, three sizes (%lld, %lld, %lld): one of them took another's path", size[0], size[1],
              size[2]);
    for (int k = 0; k < 3; k++) cJSON_Delete(t[k]);
}

/* The GPU's kernels, copies and sets (the stand-in CUPTI's records) on their streams' tracks with
 * their arguments (grid and block as arrays) and the arrows from their calls: as many as the
 * JSON's, and a trace Perfetto's schema reads. */
Test(perfetto, gpu_operations_and_arrows_as_the_json) {
    if (access(PROG("fakecuda/libcupti.so.13"), R_OK) != 0 || access(PROG("cudaprog"), X_OK) != 0)
        cr_skip_test("no CUDA toolkit at /usr/local/cuda");
    char *dir = make_tmpdir(), *lpt = strfmt("%s/g.lpt", dir), *json = strfmt("%s/g.json", dir),
         *pf = strfmt("%s/g.pftrace", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){strfmt("LD_LIBRARY_PATH=%s", PROG("fakecuda")), "LD_PRELOAD=" PRELOAD,
                              strfmt("LIBPROF_OUTPUT=%s", lpt), NULL},
             (const char *[]){PROG("cudaprog"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", json, "--perfetto", pf, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *c = check(pf, (const char *[]){"--json", json, NULL});
    cr_expect_geq(num(c, "slices"), 8, "the GPU's eight operations at least");
    cr_expect_geq(num(c, "flows"), 8, "an arrow from each one's call");
    cJSON_Delete(c);
}

/* NVTX's start/end ranges (overlapping, ended on another thread, of a domain): an async track
 * each, as many as the JSON's async slices. */
Test(perfetto, nvtx_start_end_ranges_as_async_tracks) {
    if (access(PROG("nvtxprog"), X_OK) != 0) cr_skip_test("no NVTX headers at /usr/local/cuda/include/nvtx3");
    char *dir = make_tmpdir(), *lpt = strfmt("%s/n.lpt", dir), *json = strfmt("%s/n.json", dir),
         *pf = strfmt("%s/n.pftrace", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, "NVTX_INJECTION64_PATH=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt),
                              NULL},
             (const char *[]){PROG("nvtxprog"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", json, "--perfetto", pf, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *c = check(pf, (const char *[]){"--json", json, NULL});
    cJSON *names = cJSON_GetObjectItem(c, "names");
    cr_expect_eq(num(names, "transfer A"), 1);
    cr_expect_eq(num(names, "transfer B"), 1);
    cr_expect_eq(num(names, "transfer C"), 1);
    cJSON_Delete(c);
}

/* A followed conversion's window: the short slices of its last stretch, held in segment files
 * as JSON text while the run went on, reach the Perfetto trace too (read back from that text),
 * as many as the JSON of the same conversion has; the folded stretch as the same counters. */
Test(perfetto, followed_window_as_many_as_the_json, .timeout = 120) {
    char *dir = make_tmpdir();
    char *cmd = strfmt("LD_PRELOAD=%s LIBPROF_OUTPUT=%s/svc.lpt %s 3 > /dev/null & p=$!; wait $p; "
                       "%s %s/svc.lpt --follow $p --timeline 1 --timeline-min-ns 100000000 "
                       "--chrome %s/svc.json --perfetto %s/svc.pftrace -q",
                       PRELOAD, dir, PROG("service"), REPORT, dir, dir, dir);
    struct run r;
    run_prog(&r, dir, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    run_free(&r);
    char *json = strfmt("%s/svc.json", dir);
    cJSON *doc = cJSON_Parse(read_file(json, NULL)), *tl = NULL;
    cr_assert_not_null(doc);
    tl = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "metadata"), "libprof"), "timeline");
    cr_assert_gt(num(tl, "folded_slices"), 0, "a stretch was folded: the window was kept in segments");
    cr_assert_gt(num(tl, "full_from_ns"), 0);
    cJSON_Delete(doc);
    cJSON *c = check(strfmt("%s/svc.pftrace", dir), (const char *[]){"--json", json, NULL});
    cr_expect_gt(num(c, "slices"), 100, "the window's short slices");
    cr_expect_gt(num(c, "counter_samples"), 0, "the folded counters and the heap");
    cJSON_Delete(c);
}

/* PyTorch's operators (1.13, Debian's): backward-to-forward arrows and a range ended on another
 * thread (an async track), as many as the JSON's. */
Test(perfetto, torch_operators_arrows_and_ranges) {
    char *dir = make_tmpdir();
    char *lpt = strfmt("%s/t.lpt", dir), *json = strfmt("%s/t.json", dir), *pf = strfmt("%s/t.pftrace", dir);
    struct run r;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), NULL},
             (const char *[]){"/usr/bin/python3", LP_SOURCE_DIR "/tests/progs/torch_ops.py", "run", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", json, "--perfetto", pf, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *s = check(pf, (const char *[]){"--json", json, NULL});
    cr_expect_gt(num(s, "slices"), 10000, "the operators");
    cr_expect_gt(num(s, "flows"), 100, "backward to forward");
    cJSON *names = cJSON_GetObjectItem(s, "names");
    cr_expect(cJSON_GetObjectItem(names, "aten::mm") || cJSON_GetObjectItem(names, "aten::addmm"), "no GEMM operator");
    cJSON_Delete(s);
}

/* Perfetto's own trace processor loads the traces (check_pftrace_tp.py): no import error, no
 * data loss, and its tables hold what the independent decoder counts — slices, counter samples,
 * flows, CPU samples each with its stack and thread, the heap profile's bytes. A C program's
 * threads, a Python program's two threads with Python frames. Skipped where no trace processor
 * is given (it is not packaged for Debian or PyPI; CI has none). */
Test(perfetto, loaded_by_perfettos_trace_processor) {
    const char *tp = getenv("LIBPROF_TRACE_PROCESSOR");
    if (!tp || access(tp, X_OK) != 0) cr_skip_test("LIBPROF_TRACE_PROCESSOR names no trace_processor_shell");
    char *dir = make_tmpdir();
    char *py = write_text(dir, "two.py",
                          "import json, threading\n"
                          "def work(n):\n"
                          "    return sum(len(json.dumps({'a': i, 'b': [i] * 5})) for i in range(n))\n"
                          "t = threading.Thread(target=work, args=(60000,)); t.start(); work(90000); t.join()\n");
    const char *const *progs[] = {(const char *[]){PROG("cpusplit"), "split", NULL},
                                  (const char *[]){"/usr/bin/python3", py, NULL}};
    for (int i = 0; i < 2; i++) {
        char *pf = strfmt("%s/t%d.pftrace", dir, i);
        struct run r;
        run_prog(&r, dir,
                 (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", pf), "LIBPROF_SAMPLE_HZ=500",
                                  "LIBPROF_STACKS=8", NULL},
                 progs[i]);
        cr_assert_eq(r.status, 0, "%s", r.err);
        run_free(&r);
        cJSON *s = check(pf, NULL);
        char *sum = cJSON_PrintUnformatted(s), *sum_path = write_text(dir, strfmt("t%d.json", i), sum);
        run_prog(&r, dir, NULL,
                 (const char *[]){"/usr/bin/python3", LP_SOURCE_DIR "/tests/integration/check_pftrace_tp.py", tp, pf,
                                  sum_path, NULL});
        cr_expect_eq(r.status, 0, "%s: %s", pf, r.err);
        cJSON *got = cJSON_Parse(r.out);
        cr_expect(got && num(got, "cpu_samples") > 0 && num(got, "slices") > 0, "%s: %s", pf, r.out);
        cr_expect(got && num(got, "threads") >= 2, "%s: %s", pf, r.out);
        cJSON_Delete(got);
        run_free(&r);
        free(sum);
        cJSON_Delete(s);
    }
}
