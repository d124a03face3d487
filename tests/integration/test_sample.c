/* CPU sampling (LIBPROF_SAMPLE_HZ): shares of a program whose CPU is known, against the program's
 * own clocks and against perf (the kernel's sampler); the samples taken against those asked;
 * Python functions of known CPU on every interpreter, a numpy GEMM under its Python caller; the
 * program's own SIGPROF timer and SIGTRAP handler; threads looping dlopen/dlclose, C++
 * exceptions and malloc while sampled; the outputs (folded, pprof through an independent reader,
 * speedscope, CSV, metadata). tests/progs/cpusplit.c is the native program. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(sample, .timeout = 300);

static long long num(cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

/* metadata.libprof.cpu_functions: the `field` (self or total) of `fn`, or -1. */
static long long cpu_fn(cJSON *meta, const char *fn, const char *field) {
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(meta, "cpu_functions")) {
        cJSON *f = cJSON_GetObjectItem(r, "function");
        if (cJSON_IsString(f) && !strcmp(f->valuestring, fn)) return num(r, field);
    }
    return -1;
}

/* perf's share of each function (percent), from `perf record -e task-clock:u`; 0 when perf is
 * not usable here. */
static int perf_shares(const char *dir, const char *const *fns, int n, double *share) {
    char *data = strfmt("%s/perf.data", dir);
    struct run r;
    run_prog(&r, dir, NULL,
             (const char *[]){"perf", "record", "-q", "-e", "task-clock:u", "-F", "1000", "-o", data, PROG("cpusplit"),
                              "split", NULL});
    int ok = r.status == 0;
    run_free(&r);
    if (!ok) return 0;
    run_prog(&r, dir, NULL,
             (const char *[]){"perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "sym", "-q", NULL});
    ok = r.status == 0;
    for (int i = 0; i < n && ok; i++) {
        share[i] = -1;
        char *needle = strfmt("[.] %s\n", fns[i]);
        const char *at = strstr(r.out, needle);
        if (at) {
            const char *bol = at;
            while (bol > r.out && bol[-1] != '\n') bol--;
            share[i] = atof(bol);
        }
        free(needle);
    }
    run_free(&r);
    return ok;
}

/* The known split: A 2.0 s (50 %), B 1.0 s (25 %), main 0.5 s in f1 and 0.5 s in f2 (12.5 %
 * each), a sleeper 0 %. libprof's shares within 3 points of the program's own clocks and of
 * perf's; the samples at least 90 % of those asked (CPU seconds x rate); the sleeper has none
 * but what its start may cost. */
Test(sample, known_split_matches_the_truth_and_perf) {
    char *dir = make_tmpdir();
    char *json = strfmt("%s/s.json", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){PROG("cpusplit"), "split", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 0, "%s", r.err);
    const char *fns[4] = {"burn_a", "burn_b", "f1", "f2"};
    double truth_ms[4], total_ms = 0;
    for (int i = 0; i < 4; i++) {
        char *needle = strfmt("%s ", fns[i]);
        const char *at = strstr(r.out, needle);
        cr_assert_not_null(at, "%s", r.out);
        truth_ms[i] = atof(at + strlen(needle));
        total_ms += truth_ms[i];
        free(needle);
    }
    cJSON *j = load_json(json);
    cr_assert_not_null(j);
    cJSON *m = libprof_meta(j), *smp = cJSON_GetObjectItem(m, "sampling");
    cr_assert_not_null(smp, "no metadata.libprof.sampling");
    long long samples = num(smp, "samples");
    cr_expect_geq((double)samples, 0.9 * total_ms, "%lld samples for %.0f ms of CPU at 1000 Hz", samples, total_ms);
    double perf[4];
    int have_perf = perf_shares(dir, fns, 4, perf);
    for (int i = 0; i < 4; i++) {
        double ours = 100.0 * (double)cpu_fn(m, fns[i], "total") / (double)samples;
        double truth = 100.0 * truth_ms[i] / total_ms;
        cr_expect(ours > truth - 3 && ours < truth + 3, "%s: %.1f %% of the samples, %.1f %% of the CPU", fns[i], ours,
                  truth);
        if (have_perf)
            cr_expect(ours > perf[i] - 3 && ours < perf[i] + 3, "%s: %.1f %%, perf %.1f %%", fns[i], ours, perf[i]);
    }
    if (!have_perf) fprintf(stderr, "sample::known_split: perf is not usable here: compared with the program only\n");
    /* four threads ran; the sleeper's 2 s asleep took no sample (a wall-clock sampler would give
     * it ~2000; the CPU its start and its way into the sleep use may reach a millisecond on a
     * loaded machine: one or two samples) */
    int burners = 0, sleepers = 0;
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(smp, "threads")) {
        if (num(t, "samples") > 2)
            burners++;
        else
            sleepers++;
    }
    cr_expect_eq(burners, 3, "threads with more than 2 samples: %d (the sleeper must have none)", burners);
    cr_expect_leq(sleepers, 1);
    cJSON_Delete(j);
    run_free(&r);
}

/* Go's own pprof (built from Debian's sources of it, the Makefile) reading a pprof file in its raw
 * form: the sample types ("samples/count,cpu/nanoseconds"), the sums of the samples' first values
 * (up to 4), and whether a location names function `fn`. -1 when pprof cannot read it. */
static int pprof_raw(const char *dir, const char *file, char *types, size_t cap, long long sum[4], const char *fn,
                     int *has_fn) {
    struct run p;
    run_prog(&p, dir, NULL, (const char *[]){LP_BUILD_DIR "/go/pprof", "-raw", file, NULL});
    if (p.status != 0) {
        fprintf(stderr, "pprof -raw %s: %s\n", file, p.err);
        run_free(&p);
        return -1;
    }
    int part = 0; /* 1: the sample types' line next, 2: samples, 3: locations */
    types[0] = '\0';
    *has_fn = 0;
    for (char *l = p.out; l && *l;) {
        char *eol = strchr(l, '\n');
        if (eol) *eol = '\0';
        if (!strncmp(l, "Samples:", 8)) {
            part = 1;
        } else if (part == 1) {
            for (char *t = strtok(l, " "); t; t = strtok(NULL, " ")) {
                size_t o = strlen(types);
                snprintf(types + o, cap - o, "%s%.*s", o ? "," : "", (int)strcspn(t, "["), t);
            }
            part = 2;
        } else if (part >= 2 && !strncmp(l, "Locations", 9)) {
            part = 3;
        } else if (part == 2 && strchr(l, ':') && l[0] == ' ' && l[strspn(l, " ")] != 't') {
            long long v[4] = {0, 0, 0, 0};
            sscanf(l, "%lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3]);
            for (int k = 0; k < 4; k++) sum[k] += v[k];
        } else if (part == 3 && fn && strstr(l, fn)) {
            char *at = strstr(l, fn);
            *has_fn |= at[-1] == ' ' && (at[strlen(fn)] == ' ' || at[strlen(fn)] == '\0');
        }
        l = eol ? eol + 1 : NULL;
    }
    run_free(&p);
    return 0;
}

/* The outputs of one sampled run: the folded file, pprof (decoded by Go's own pprof, an
 * independent reader: the same total; its heap profile too: the same bytes as the allocation
 * flame graph), speedscope (a profile per thread that took a sample), the CSV rows, the report's
 * table; LIBPROF_FLAMEGRAPH=1 writes NAME.cpu.folded at exit. */
Test(sample, outputs_agree_and_decode) {
    char *dir = make_tmpdir();
    char *lpt = strfmt("%s/s.lpt", dir);
    struct run r, rep;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=500",
                              "LIBPROF_STACKS=8", NULL},
             (const char *[]){PROG("cpusplit"), "split", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *folded = strfmt("%s/s.cpu.folded", dir), *pprof = strfmt("%s/s.pb.gz", dir),
         *ss = strfmt("%s/s.ss.json", dir), *heap = strfmt("%s/h.pb.gz", dir), *afold = strfmt("%s/a.folded", dir);
    char *csv = strfmt("%s/s.csv", dir);
    run_prog(&rep, dir, NULL,
             (const char *[]){REPORT, lpt, "--cpu-folded", folded, "--pprof", pprof, "--speedscope", ss, "--csv", csv,
                              "--pprof-heap", heap, "--folded", afold, "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    run_free(&rep);
    /* folded: thread;frames... N — its total */
    char *text = read_file(folded, NULL);
    cr_assert_not_null(text);
    long long folded_total = 0;
    int burn_a_lines = 0;
    for (char *l = text; *l;) {
        char *eol = strchr(l, '\n');
        if (!eol) break;
        char *sp = eol;
        while (sp > l && *sp != ' ') sp--;
        folded_total += atoll(sp + 1);
        *eol = '\0';
        if (strstr(l, "thread ") == l && strstr(l, ";burn_a")) burn_a_lines++;
        l = eol + 1;
    }
    cr_expect_gt(burn_a_lines, 0, "no stack of thread A ends in burn_a");
    /* Go's pprof decodes it: its samples' first value (count) adds up to the same total */
    if (access(LP_BUILD_DIR "/go/pprof", X_OK) != 0)
        cr_skip_test("Go's pprof not built (golang-go, golang-github-google-pprof-dev)");
    char types[128];
    long long sum[4] = {0, 0, 0, 0};
    int named = 0;
    cr_assert_eq(pprof_raw(dir, pprof, types, sizeof types, sum, "burn_a", &named), 0);
    cr_expect_eq(sum[0], folded_total, "pprof %lld samples, folded %lld", sum[0], folded_total);
    cr_expect_eq(sum[1], sum[0] * 2000000, "cpu/nanoseconds: %lld for %lld samples at 500 Hz", sum[1], sum[0]);
    /* (wall time too where its threads blocked in traced calls: each sample's period and more) */
    cr_expect(!strcmp(types, "samples/count,cpu/nanoseconds") ||
                  (!strcmp(types, "samples/count,cpu/nanoseconds,wall/nanoseconds") && sum[2] >= sum[1]),
              "sample types %s (wall %lld ns, cpu %lld ns)", types, sum[2], sum[1]);
    cr_expect(named, "no function burn_a in the profile");
    /* the heap profile: allocated bytes as the allocation flame graph's total */
    long long hsum[4] = {0, 0, 0, 0}, fbytes = 0;
    cr_assert_eq(pprof_raw(dir, heap, types, sizeof types, hsum, NULL, &named), 0);
    cr_expect_str_eq(types, "alloc_objects/count,alloc_space/bytes,inuse_objects/count,inuse_space/bytes");
    char *ftext = read_file(afold, NULL);
    cr_assert_not_null(ftext);
    for (char *l = ftext; *l;) {
        char *eol = strchr(l, '\n'), *sp = eol ? eol : l + strlen(l);
        while (sp > l && sp[-1] != ' ') sp--;
        fbytes += atoll(sp);
        if (!eol) break;
        l = eol + 1;
    }
    cr_expect(hsum[0] > 0 && hsum[1] == fbytes, "pprof heap: %lld allocations, %lld bytes; the flame graph %lld bytes",
              hsum[0], hsum[1], fbytes);
    cr_expect(hsum[3] <= hsum[1] && hsum[2] <= hsum[0]);
    /* speedscope: a sampled profile per thread that took samples — the three burners', each of
     * 0.5 s of CPU and more; the sleeper's, if its start took a sample's worth of CPU on a busy
     * machine, of a few samples (2 ms each) at most */
    cJSON *s = load_json(ss);
    cr_assert_not_null(s);
    int burners = 0, strays = 0;
    cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(s, "profiles")) {
        cJSON *name = cJSON_GetObjectItem(p, "name"), *w;
        if (!cJSON_IsString(name) || strncmp(name->valuestring, "CPU: ", 5)) continue;
        double ns = 0;
        cJSON_ArrayForEach(w, cJSON_GetObjectItem(p, "weights")) ns += w->valuedouble;
        if (ns >= 400e6) {
            burners++;
        } else {
            cr_expect_lt(ns, 10e6, "%s: %.0f ns of samples", name->valuestring, ns);
            strays++;
        }
    }
    cr_expect_eq(burners, 3, "CPU profiles of the three burning threads: %d (and %d others)", burners, strays);
    cJSON_Delete(s);
    char *c = read_file(csv, NULL);
    cr_assert_not_null(c);
    cr_expect_not_null(strstr(c, "\nburn_a,cpu_self,"));
    cr_expect_not_null(strstr(c, "\nburn_a,cpu_total,"));
    /* the report's table */
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cr_expect_not_null(strstr(rep.out, "CPU samples by function"), "%s", rep.out);
    run_free(&rep);
    /* at exit, with LIBPROF_FLAMEGRAPH=1 */
    run_free(&r);
    char *json = strfmt("%s/f.json", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), "LIBPROF_SAMPLE_HZ=500",
                              "LIBPROF_FLAMEGRAPH=1", NULL},
             (const char *[]){PROG("cpusplit"), "split", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(access(strfmt("%s/f.cpu.folded", dir), R_OK), 0, "no f.cpu.folded beside the trace");
    cr_expect_eq(access(strfmt("%s/f.speedscope.json", dir), R_OK), 0, "no f.speedscope.json beside the trace");
    run_free(&r);
}

/* A program's own ITIMER_PROF keeps ticking as it does without libprof; a program that installs
 * its own SIGTRAP handler reads it back and gets its own SIGTRAPs (a raise, a breakpoint) and
 * none of libprof's, while its CPU is still sampled. */
Test(sample, the_programs_own_signals_keep_working) {
    char *dir = make_tmpdir();
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){PROG("cpusplit"), "sigprof", "1000", NULL});
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/p.json", dir), "LIBPROF_SAMPLE_HZ=1000",
                              NULL},
             (const char *[]){PROG("cpusplit"), "sigprof", "1000", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    int tb = 0, tr = 0;
    sscanf(bare.out, "ticks %d", &tb);
    sscanf(r.out, "ticks %d", &tr);
    cr_expect(tb > 50 && tr > tb / 2, "SIGPROF ticks: %d bare, %d sampled", tb, tr);
    run_free(&r);
    run_free(&bare);
    run_prog(&bare, dir, NULL, (const char *[]){PROG("cpusplit"), "sigtrap", NULL});
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t.json", dir), "LIBPROF_SAMPLE_HZ=1000",
                              NULL},
             (const char *[]){PROG("cpusplit"), "sigtrap", NULL});
    cr_expect_eq(r.status, bare.status);
    cr_expect_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.out, "trapped 2 readback 1\n");
    cr_expect_eq(count_lines_with(r.err, "libprof:"), 0, "%s", r.err);
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    cr_expect_gt(num(cJSON_GetObjectItem(libprof_meta(j), "sampling"), "samples"), 120,
                 "0.2 s burnt after the handler");
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* Threads looping dlopen/dlclose, throwing and catching C++ exceptions and allocating, each for a
 * second of its own CPU (a busy machine makes the run longer, not shorter), sampled at 1000 Hz: no
 * deadlock (the test's timeout), no crash, samples on every thread. */
Test(sample, loader_unwinder_and_malloc_loops_do_not_deadlock, .timeout = 120) {
    char *dir = make_tmpdir();
    struct run r;
    char *lpt = strfmt("%s/c.lpt", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){PROG("cpusplit"), "churn", "1", PROG("libplugin.so"), PROG("libthrower.so"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    /* each loop went round (here: some 15,000 dlopens, 250,000 throws, 200,000 x 64 mallocs) */
    long dl = 0, thrown = 0, mallocs = 0;
    cr_assert_eq(sscanf(r.out, "churned %ld %ld %ld", &dl, &thrown, &mallocs), 3, "%s", r.out);
    cr_expect(dl >= 100 && thrown >= 1000 && mallocs >= 1000, "rounds: %ld dlopen, %ld throw, %ld malloc", dl, thrown,
              mallocs);
    struct run rep;
    char *json = strfmt("%s/c.json", dir);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", json, "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cJSON *j = load_json(json);
    cr_assert_not_null(j);
    cJSON *smp = cJSON_GetObjectItem(libprof_meta(j), "sampling");
    cr_expect_geq(cJSON_GetArraySize(cJSON_GetObjectItem(smp, "threads")), 3);
    /* every thread's user CPU sampled (the run's, as the kernel counted it: the machine may be busy).
     * Not all of it: a handler that needs a rule while another thread holds the loader's lock (the
     * dlopen loop) waits for it, up to milliseconds on a loaded machine, and the periods that end
     * meanwhile reach it as one signal. Measured: 0.96-1.13 of the user time with one core busy,
     * 0.83 once with make test's suites three at a time beside a busy loop. */
    cr_expect_gt((double)num(smp, "samples"), 0.7 * r.user_s * 1000, "%lld samples in %.1f s of user CPU",
                 num(smp, "samples"), r.user_s);
    cJSON_Delete(j);
    run_free(&rep);
    run_free(&r);
}

/* Every interpreter libprof reads: three pure-Python functions burning 0.2, 0.4 and 0.6 s of CPU
 * get samples in those proportions (within 15 %), charged to their lines. The samples count user
 * time, the clock user and system time: each look at the clock is a system call, so the work
 * between two (a loop of 10,000) is some 250 times longer than one — a busy machine, which makes
 * system calls slower, then moves the proportions by a fraction of a point, not by the 15 % it
 * did with a microsecond of work between them. A short burn first takes what happens once (the
 * first sample's Python cache, the code objects' first sight): on a loaded CI machine the first
 * function once got 169 samples to the others' 373 and 595 on one interpreter. */
static const char burn_py[] = "import time\n"
                              "def burn(s):\n"
                              "    t = time.thread_time()\n"
                              "    x = 0\n"
                              "    while time.thread_time() - t < s:\n"
                              "        for i in range(10000): x += i\n"
                              "    return x\n"
                              "def one(): return burn(0.2)\n"
                              "def two(): return burn(0.4)\n"
                              "def three(): return burn(0.6)\n"
                              "burn(0.05); one(); two(); three()\n";

/* The `total` samples of the Python line whose name starts with `fn (`. */
static long long py_line(cJSON *meta, const char *fn) {
    cJSON *r;
    long long sum = 0;
    char *want = strfmt("%s (", fn);
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(meta, "cpu_python_lines")) {
        cJSON *l = cJSON_GetObjectItem(r, "line");
        if (cJSON_IsString(l) && !strncmp(l->valuestring, want, strlen(want))) sum += num(r, "total");
    }
    free(want);
    return sum;
}

Test(sample, python_functions_in_proportion_every_interpreter) {
    char *dir = make_tmpdir();
    char *script = write_text(dir, "burn.py", burn_py);
    cr_assert_not_null(script);
    char py[16][256];
    int n = python_interpreters(py, 16, 8), tested = 0;
    for (int i = 0; i < n; i++) {
        struct run r;
        char *json = strfmt("%s/b%d.json", dir, i);
        run_prog(
            &r, dir,
            (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), "LIBPROF_SAMPLE_HZ=1000", NULL},
            (const char *[]){py[i], script, NULL});
        if (r.status != 0) {
            run_free(&r);
            continue;
        }
        cJSON *j = load_json(json);
        cr_assert_not_null(j, "%s", py[i]);
        cJSON *m = libprof_meta(j);
        long long a = py_line(m, "one"), b = py_line(m, "two"), c = py_line(m, "three");
        cr_expect(a > 0 && b > 0 && c > 0, "%s: one %lld two %lld three %lld", py[i], a, b, c);
        if (a > 0 && b > 0 && c > 0) {
            double rb = (double)b / (double)a, rc = (double)c / (double)a;
            cJSON *smp = cJSON_GetObjectItem(m, "sampling");
            cr_expect(rb > 2 * 0.85 && rb < 2 * 1.15 && rc > 3 * 0.85 && rc < 3 * 1.15,
                      "%s: one %lld two %lld three %lld (want 1 : 2 : 3); %lld samples, %lld dropped, %lld in "
                      "libprof, %lld shallow",
                      py[i], a, b, c, num(smp, "samples"), num(smp, "dropped"), num(smp, "in_libprof"),
                      num(smp, "shallow"));
        }
        tested++;
        cJSON_Delete(j);
        run_free(&r);
    }
    cr_assert_gt(tested, 0, "no interpreter ran");
}

/* numpy's GEMM (native code under the interpreter, without the GIL) shows under the Python line
 * that called it: the sample stacks in libopenblas/sgemm carry the caller's frame. */
Test(sample, a_numpy_gemm_under_its_python_caller) {
    char *dir = make_tmpdir();
    char *script = write_text(dir, "mm.py",
                              "import numpy as np\n"
                              "a = np.ones((512, 512), dtype=np.float32)\n"
                              "def mm():\n"
                              "    for _ in range(60): a @ a\n"
                              "mm()\n");
    cr_assert_not_null(script);
    struct run r, rep;
    char *lpt = strfmt("%s/m.lpt", dir), *folded = strfmt("%s/m.folded", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=1000",
                              "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", NULL},
             (const char *[]){"/usr/bin/python3", script, NULL});
    if (r.status != 0 && strstr(r.err, "No module named")) cr_skip_test("numpy is not installed");
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--cpu-folded", folded, "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    char *text = read_file(folded, NULL);
    cr_assert_not_null(text);
    char *caller = strfmt("mm (%s:4)", script);
    long long in_gemm = 0, under_caller = 0;
    for (char *l = text; *l;) {
        char *eol = strchr(l, '\n');
        if (!eol) break;
        *eol = '\0';
        char *sp = strrchr(l, ' ');
        long long n = sp ? atoll(sp + 1) : 0;
        if (strstr(l, "gemm") || strstr(l, "GEMM") || strstr(l, "sgemm")) {
            in_gemm += n;
            if (strstr(l, caller)) under_caller += n;
        }
        l = eol + 1;
    }
    cr_expect_gt(in_gemm, 50, "samples in the GEMM: %lld", in_gemm);
    cr_expect_geq(under_caller, in_gemm * 9 / 10, "of %lld samples in the GEMM, %lld under %s", in_gemm, under_caller,
                  caller);
    run_free(&rep);
    run_free(&r);
}

/* The HTML page's CPU views in Debian's chromium (tests/progs/browser.py cpu): cpusplit's "phases"
 * burns 0.5 s in f1, sleeps 0.4 s, burns 0.5 s in f2. The CPU flame graph shows both with about the
 * same width; a time window over the first phase redraws it with f1 alone (f2 hidden, no
 * samples) and the window table's "CPU: main" row holds about 0.5 s; a window over the second
 * phase the other way round; the CPU chart exists and dragging across it sets the window. */
/* o[k], o[k][i] or o[k][i][j] (-1: not indexed) as a number; -1 when absent. */
static double item(cJSON *o, const char *k, int i, int j) {
    cJSON *v = cJSON_GetObjectItem(o, k);
    if (i >= 0) v = cJSON_GetArrayItem(v, i);
    if (j >= 0) v = cJSON_GetArrayItem(v, j);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

Test(sample, html_cpu_views_and_time_window_in_chromium, .timeout = 180) {
    if (!venv_has("playwright") || access("/usr/bin/chromium", X_OK) != 0)
        cr_skip_test("playwright (the project's Python environment) or chromium missing (scripts/install-deps)");
    char *dir = make_tmpdir();
    struct run r, rep, b;
    char *lpt = strfmt("%s/p.lpt", dir), *html = strfmt("%s/p.html", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){PROG("cpusplit"), "phases", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_prog(&rep, dir, NULL,
             (const char *[]){REPORT, lpt, "--html", html, "--chrome", strfmt("%s/p.json", dir), NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    /* the windows: before and after the program's sleep between its phases, where the trace has
     * it (a loaded machine stretches the phases' wall time, not their CPU) */
    cJSON *pj = load_json(strfmt("%s/p.json", dir)), *ev;
    cr_assert_not_null(pj);
    double gap0 = -1, gap1 = -1;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(pj, "traceEvents")) {
        cJSON *name = cJSON_GetObjectItem(ev, "name");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, "usleep")) {
            gap0 = cJSON_GetObjectItem(ev, "ts")->valuedouble / 1e3;
            gap1 = gap0 + cJSON_GetObjectItem(ev, "dur")->valuedouble / 1e3;
        }
    }
    cJSON_Delete(pj);
    cr_assert_gt(gap0, 0, "no usleep slice in the trace");
    run_browser(&b, dir, "cpu", html, strfmt("%.3f,%.3f", gap0, gap1));
    cr_assert_eq(b.status, 0, "%s%s", b.out, b.err);
    cJSON *o = cJSON_Parse(b.out);
    cr_assert_not_null(o, "%s", b.out);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "errors")), 0, "%s", b.out);
    cr_expect_geq(item(o, "lines", -1, -1), 1, "%s", b.out);
    /* the whole run: f1 and f2 about 500 samples each, about the same width */
    double v1 = item(o, "all", 0, 0), v2 = item(o, "all", 1, 0), w1 = item(o, "all", 0, 1), w2 = item(o, "all", 1, 1);
    cr_expect(v1 > 400 && v2 > 400 && w1 > 0 && w2 > 0 && w1 / w2 > 0.8 && w1 / w2 < 1.25, "%s", b.out);
    /* the first phase's window: f1 only, about 0.5 s of the main thread's CPU */
    cr_expect(item(o, "first", 0, 0) > 400 && item(o, "first", 0, 2) == 1, "%s", b.out);
    cr_expect(item(o, "first", 1, 0) == 0 && item(o, "first", 1, 2) == 0, "%s", b.out);
    double cpu1 = item(o, "first", 2, -1);
    cr_expect(cpu1 > 400e6 && cpu1 < 600e6, "CPU: main in the first window: %.0f ns (%s)", cpu1, b.out);
    /* the second: f2 only */
    cr_expect(item(o, "second", 1, 0) > 400 && item(o, "second", 1, 2) == 1, "%s", b.out);
    cr_expect(item(o, "second", 0, 0) == 0 && item(o, "second", 0, 2) == 0, "%s", b.out);
    /* dragged across the CPU chart: the whole run, all of the main thread's CPU */
    cr_expect(item(o, "dragged", 0, -1) == 0 && item(o, "dragged", 1, -1) > 0.95 * item(o, "ms", -1, -1), "%s", b.out);
    cr_expect(item(o, "dragged", 2, -1) > 900e6, "%s", b.out);
    cJSON_Delete(o);
    run_free(&b);
    run_free(&rep);
    run_free(&r);
}

/* The line of `name` in a report's per-name table (the first line starting with it and a space). */
static const char *table_line(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, name, n) && p[n] == ' ') return p;
    return NULL;
}

/* The last number on a line (cpu% and tax% end their lines). */
static double last_number(const char *line) {
    const char *end = strchr(line, '\n'), *p = end ? end : line + strlen(line);
    while (p > line && (p[-1] == '%' || p[-1] == ' ')) p--;
    while (p > line && (p[-1] == '.' || (p[-1] >= '0' && p[-1] <= '9'))) p--;
    return atof(p);
}

/* Slices carry the CPU sampled while they ran: numpy's GEMMs (sgemm, a kernel) the CPU the
 * script itself measures around them (time.thread_time: a comparison of CPU with CPU, which a
 * busy machine does not disturb), time.sleep's clock_nanosleep none; the framework tax is the
 * share of the thread's sampled CPU outside kernels, as the Chrome trace's own numbers give it
 * (its sgemm slices' cpu_ns against metadata.sampling's threads); the JSON read back gives the
 * same table. */
Test(sample, slices_carry_their_cpu_and_the_tax_is_measured) {
    char *dir = make_tmpdir();
    char *script = write_text(dir, "t.py",
                              "import numpy as np, time\n"
                              "a = np.ones((256, 256), dtype=np.float32)\n"
                              "gemm = 0\n"
                              "for _ in range(3):\n"
                              "    t0 = time.thread_time_ns()\n"
                              "    for _ in range(100): a @ a\n"
                              "    gemm += time.thread_time_ns() - t0\n"
                              "    time.sleep(0.2)\n"
                              "    x = 0\n"
                              "    for i in range(400000): x += i\n"
                              "print(gemm)\n");
    cr_assert_not_null(script);
    struct run r, rep, conv, rj;
    char *lpt = strfmt("%s/t.lpt", dir), *json = strfmt("%s/t.json", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=1000",
                              "OPENBLAS_NUM_THREADS=1", NULL},
             (const char *[]){"/usr/bin/python3", script, NULL});
    if (r.status != 0 && strstr(r.err, "No module named")) cr_skip_test("numpy is not installed");
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    const char *gemm = table_line(rep.out, "sgemm"), *nap = table_line(rep.out, "clock_nanosleep");
    cr_assert(gemm && nap, "%s", rep.out);
    cr_expect_gt(last_number(gemm), 0, "sgemm's cpu%%: %.100s", gemm);
    cr_expect_lt(last_number(nap), 5, "clock_nanosleep's cpu%%: %.100s", nap);
    double gemm_cpu = atof(r.out); /* ns of the thread's CPU in the GEMM loops, as the script saw it */
    cr_assert_gt(gemm_cpu, 0, "%s", r.out);
    /* the tax as the Chrome trace's numbers give it */
    run_prog(&conv, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", json, "-q", NULL});
    cr_assert_eq(conv.status, 0, "%s", conv.err);
    cJSON *j = load_json(json), *e;
    cr_assert_not_null(j);
    double in_gemm = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *n = cJSON_GetObjectItem(e, "name"), *c = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "cpu_ns");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, "sgemm") && cJSON_IsNumber(c)) in_gemm += c->valuedouble;
    }
    cJSON *th = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(libprof_meta(j), "sampling"), "threads"), 0);
    double cpu = (double)num(th, "cpu_ns"), tax = 100.0 * (cpu - in_gemm) / cpu;
    const char *overall = strstr(rep.out, "overall");
    cr_assert(overall && cpu > 0 && in_gemm > 0, "%s", rep.out);
    cr_expect(in_gemm > 0.75 * gemm_cpu && in_gemm < 1.15 * gemm_cpu,
              "sgemm slices carry %.0f ms of CPU; the script measured %.0f ms in its GEMM loops", in_gemm / 1e6,
              gemm_cpu / 1e6);
    cr_expect(fabs(last_number(overall) - tax) < 1.0, "tax %.1f%% in the report, %.1f%% from the JSON (%.100s)",
              last_number(overall), tax, overall);
    cr_expect(tax > 5 && tax < 80, "tax %.1f%%", tax);
    /* the JSON read back: the same sgemm row */
    run_prog(&rj, dir, NULL, (const char *[]){REPORT, json, NULL});
    cr_assert_eq(rj.status, 0, "%s", rj.err);
    const char *gj = table_line(rj.out, "sgemm");
    cr_assert_not_null(gj, "%s", rj.out);
    cr_expect(!strncmp(gj, gemm, (size_t)(strchr(gemm, '\n') - gemm)), "raw: %.160s\njson: %.160s", gemm, gj);
    cJSON_Delete(j);
    run_free(&rj);
    run_free(&conv);
    run_free(&rep);
    run_free(&r);
}

/* --diff compares two runs' CPU profiles: cpusplit "phases" (f1, f2 on the main thread) against
 * "split" (burn_a 2 s and burn_b 1 s on threads of their own, f1 and f2 as before): burn_a is new
 * with about 2 s more, f1 about the same. */
Test(sample, diff_compares_cpu_profiles) {
    char *dir = make_tmpdir();
    struct run a, b, d;
    char *base = strfmt("%s/a.lpt", dir), *cur = strfmt("%s/b.lpt", dir);
    run_prog(&a, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", base), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){PROG("cpusplit"), "phases", NULL});
    run_prog(&b, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", cur), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){PROG("cpusplit"), "split", NULL});
    cr_assert(a.status == 0 && b.status == 0, "%s%s", a.err, b.err);
    run_prog(&d, dir, NULL, (const char *[]){REPORT, cur, "--diff", base, NULL});
    cr_assert_eq(d.status, 0, "%s", d.err);
    const char *cpu = strstr(d.out, "CPU by function");
    cr_assert_not_null(cpu, "%s", d.out);
    const char *ba = table_line(cpu, "burn_a"), *f1 = table_line(cpu, "f1");
    cr_assert(ba && f1, "%s", cpu);
    cr_expect_not_null(strstr(ba, "new"), "%.120s", ba);
    double delta_a = 0, delta_f1 = 0; /* the third duration on the line: the delta */
    char u[3][8];
    double v[3];
    if (sscanf(ba + 6, "%lf %7s %lf %7s %lf %7s", &v[0], u[0], &v[1], u[1], &v[2], u[2]) == 6)
        delta_a = v[2] * (!strcmp(u[2], "ms") ? 1 : !strcmp(u[2], "s") ? 1000 : 0.001);
    if (sscanf(f1 + 2, "%lf %7s %lf %7s %lf %7s", &v[0], u[0], &v[1], u[1], &v[2], u[2]) == 6)
        delta_f1 = v[2] * (!strcmp(u[2], "ms") ? 1 : !strcmp(u[2], "s") ? 1000 : !strcmp(u[2], "us") ? 0.001 : 1e-6);
    cr_expect(delta_a > 1800 && delta_a < 2200, "burn_a's delta %.0f ms: %.120s", delta_a, ba);
    cr_expect(delta_f1 > -100 && delta_f1 < 100, "f1's delta %.0f ms: %.120s", delta_f1, f1);
    run_free(&d);
    run_free(&b);
    run_free(&a);
}

/* Sampling leaves the program's descriptor table as it is: a Python program lists its own
 * descriptors and has a child (exec'd, sampled too) list its own, the same as without libprof;
 * the events are held by a process of libprof's (libprof-report --hold-events PID:N), which is
 * not the program's child and is gone once the program has ended. */
Test(sample, no_descriptor_of_libprofs_and_no_process_left) {
    char *dir = make_tmpdir();
    const char *script =
        "import os, subprocess, sys, glob\n"
        "print(sorted(int(f) for f in os.listdir('/proc/self/fd')))\n"
        "print(subprocess.run([sys.executable, '-c', 'import os; "
        "print(sorted(int(f) for f in os.listdir(\"/proc/self/fd\")))'], capture_output=True, "
        "text=True).stdout.strip())\n"
        "kids = []\n"
        "for t in glob.glob('/proc/self/task/*/children'): kids += open(t).read().split()\n"
        "held = []\n"
        "for c in glob.glob('/proc/[0-9]*/cmdline'):\n"
        "    try: a = open(c, 'rb').read().split(b'\\0')\n"
        "    except OSError: continue\n"
        "    if b'--hold-events' in a and a[a.index(b'--hold-events') + 1].startswith(b'%d:' % os.getpid()):\n"
        "        held.append(c.split('/')[2])\n"
        "print('children', len(kids), 'holders', ' '.join(held), file=sys.stderr)\n";
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){"/usr/bin/python3", "-c", script, NULL});
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/d.%%p.lpt", dir),
                              "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){"/usr/bin/python3", "-c", script, NULL});
    cr_assert(bare.status == 0 && r.status == 0, "%s%s", bare.err, r.err);
    cr_expect_str_eq(r.out, bare.out, "descriptors with sampling:\n%s\nwithout:\n%s", r.out, bare.out);
    const char *line = strstr(r.err, "children");
    cr_assert_not_null(line, "%s", r.err);
    cr_expect_not_null(strstr(line, "children 0 holders "), "the program had children of libprof's: %s", line);
    long holder = strtol(strstr(line, "holders ") + 8, NULL, 10);
    cr_expect_gt(holder, 0, "no holder while the program ran: %s", line);
    for (int i = 0; i < 600 && holder > 0; i++) { /* it notices the program's end (bounded: 30 s) */
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", holder);
        char *cmd = read_file(path, NULL);
        int alive = cmd && strstr(cmd, "libprof-report") != NULL;
        free(cmd);
        if (!alive) break;
        usleep(50000);
        cr_expect_lt(i, 599, "holder %ld still there 30 s after the program ended", holder);
    }
    run_free(&r);
    run_free(&bare);
}

/* LIBPROF=1 samples the CPU (1000 Hz) without being asked: a newcomer who runs a Python script
 * that way finds, in libprof-report's text and in the HTML page of the JSON it wrote, the Python
 * line (burn's loop) and the functions (one, two, three) the CPU went to. */
Test(sample, libprof_1_samples_and_the_report_and_page_say_where) {
    char *dir = make_tmpdir();
    char *script = write_text(dir, "burn.py", burn_py);
    cr_assert_not_null(script);
    struct run r, rep, h;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, "LIBPROF=1", NULL},
             (const char *[]){"/usr/bin/python3", script, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    glob_t g;
    cr_assert_eq(glob(strfmt("%s/libprof_profiling/*.json", dir), 0, NULL, &g), 0, "no JSON under libprof_profiling");
    char *json = strfmt("%s", g.gl_pathv[0]), *html = strfmt("%s/p.html", dir);
    globfree(&g);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, json, NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    const char *lines = strstr(rep.out, "CPU samples by Python line");
    cr_assert_not_null(lines, "%s", rep.out);
    cr_expect_not_null(strstr(lines, "burn (") && strstr(lines, "three ("), "%s", lines);
    cr_expect_not_null(strstr(rep.out, "CPU samples by function"), "%s", rep.out);
    run_prog(&h, dir, NULL, (const char *[]){REPORT, json, "--html", html, NULL});
    cr_assert_eq(h.status, 0, "%s", h.err);
    char *page = read_file(html, NULL);
    cr_assert_not_null(page);
    const char *cpu = strstr(page, "Where the CPU went");
    cr_assert_not_null(cpu, "no CPU section in the page");
    cr_expect_not_null(strstr(cpu, "By Python line") && strstr(cpu, "burn (") && strstr(cpu, "three ("), "%.2000s",
                       cpu);
    cr_expect_not_null(strstr(cpu, "id=\"cpu-over-time\""), "no CPU chart");
    run_free(&h);
    run_free(&rep);
    run_free(&r);
}

/* node (V8: JIT code without unwind tables, signals of its own) and java (HotSpot: SIGSEGV for
 * its own checks, JIT code) print the same and exit the same sampled at 1000 Hz; their samples are
 * taken (a walk stops at JIT code, the sample keeps its instruction). */
Test(sample, node_and_java_say_the_same_sampled, .timeout = 180) {
    char *dir = make_tmpdir();
    cr_assert_not_null(
        write_text(dir, "Hello.java",
                   "public class Hello { public static void main(String[] a) { long s = 0;"
                   " for (int i = 0; i < 200000000; i++) s += i % 7; System.out.println(\"sum \" + s); } }\n"));
    const char *node[] = {"node", "-e", "let s=0;for(let i=0;i<2e8;i++)s+=i%7;console.log(s)", NULL};
    const char *java[] = {"java", strfmt("%s/Hello.java", dir), NULL};
    const char *const *progs[2] = {node, java};
    int ran = 0;
    for (int k = 0; k < 2; k++) {
        struct run bare, r;
        run_prog(&bare, dir, NULL, progs[k]);
        if (bare.status == 127) { /* not installed */
            run_free(&bare);
            continue;
        }
        char *json = strfmt("%s/p%d.json", dir, k);
        run_prog(
            &r, dir,
            (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), "LIBPROF_SAMPLE_HZ=1000", NULL},
            progs[k]);
        cr_expect_eq(r.status, bare.status, "%s: %s", progs[k][0], r.err);
        cr_expect_str_eq(r.out, bare.out, "%s", progs[k][0]);
        cJSON *j = load_json(json);
        cr_assert_not_null(j, "%s: no trace", progs[k][0]);
        cr_expect_gt(num(cJSON_GetObjectItem(libprof_meta(j), "sampling"), "samples"), 200, "%s", progs[k][0]);
        cJSON_Delete(j);
        ran++;
        run_free(&r);
        run_free(&bare);
    }
    if (!ran) cr_skip_test("neither node nor java is installed");
}

/* The frame chain is read at any instruction: sampled at 5000 Hz while the interpreter is entered
 * from C thousands of times a second, and hooked writes made by Python's own C signal handler
 * (its wakeup byte) wherever a timer interrupts it. 3.11 and 3.12 make a new evaluation loop
 * current a few instructions before its frame is stored, and may link a frame before its
 * `previous` is: a reader that followed those faulted (both 3.11 and 3.12 died of SIGSEGV here
 * within seconds). Every interpreter present runs to its end, and its samples still name the
 * Python functions. */
/* (the interpreters in two halves, two tests the suite runs side by side) */
static void frames_at_any_instruction(int half) {
    char *dir = make_tmpdir();
    char py[16][256];
    int n = python_interpreters(py, 16, 7), tested = 0;
    for (int i = half; i < n; i += 2) {
        struct run r;
        char *json = strfmt("%s/e%d.json", dir, i);
        run_prog(
            &r, dir,
            (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), "LIBPROF_SAMPLE_HZ=5000", NULL},
            (const char *[]){py[i], LP_SOURCE_DIR "/tests/progs/pyentries.py", "2.5", NULL});
        cr_expect_eq(r.status, 0, "%s: status %d\n%s", py[i], r.status, r.err);
        cr_expect_str_eq(r.out, "ok\n", "%s", py[i]);
        cJSON *j = r.status == 0 ? load_json(json) : NULL;
        cr_expect_not_null(j, "%s: no trace", py[i]);
        if (j) {
            cJSON *m = libprof_meta(j);
            cr_expect_gt(py_line(m, "layer"), 100, "%s: samples in layer()", py[i]);
            cr_expect_gt(py_line(m, "f"), 0, "%s: samples in the functions map calls", py[i]);
            cJSON_Delete(j);
            tested++;
        }
        run_free(&r);
    }
    cr_assert_gt(tested, 0, "no interpreter ran");
}

Test(sample, python_frames_read_at_any_instruction_every_interpreter, .timeout = 300) { frames_at_any_instruction(0); }
Test(sample, python_frames_read_at_any_instruction_the_other_interpreters, .timeout = 300) {
    frames_at_any_instruction(1);
}

/* CPU samples in code without symbols (Debian's libcrypto: its assembly, stripped) are grouped by
 * the function the library's unwind table says they are in, one row each, named so
 * ("libcrypto.so.3+0x… (no symbol)"): PBKDF2's SHA-256 block function holds its share in one row,
 * not one row per instruction at a few percent each. */
/* A short run (its timeline's 400 points each shorter than a sample period): each thread's "cpu %"
 * track has points eight sample periods apart at least, so that a busy thread reads busy (not
 * 0 % and 115 % by turns), and never above 100 %. (How busy it reads depends on the machine's
 * load: not tested.) */
Test(sample, cpu_track_of_a_short_run_at_most_100_percent) {
    char *dir = make_tmpdir(), *json = strfmt("%s/b.json", dir);
    char *script =
        write_text(dir, "b.py", "import time\nt = time.thread_time()\nwhile time.thread_time() - t < 0.25: pass\n");
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){"/usr/bin/python3", script, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *j = load_json(json), *e;
    cr_assert_not_null(j);
    cJSON *smp = cJSON_GetObjectItem(libprof_meta(j), "sampling");
    double period_us = (double)num(smp, "period_ns") / 1000, span_us = (double)num(smp, "span_ns") / 1000, last = -1,
           top = 0;
    cr_expect_lt(span_us, 3.2e6, "a run under 3.2 s: 400 points would each be under eight periods");
    int points = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *name = cJSON_GetObjectItem(e, "name");
        if (!cJSON_IsString(name) || strncmp(name->valuestring, "cpu % (", 7)) continue;
        double v = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "cpu")->valuedouble,
               ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
        cr_expect_leq(v, 100.0, "%s at %.3f us: %.1f %%", name->valuestring, ts, v);
        if (last >= 0) cr_expect_geq(ts - last, 8 * period_us * 0.999, "points %.3f and %.3f us", last, ts);
        last = ts;
        if (v > top) top = v;
        points++;
    }
    cr_expect_gt(points, 3, "the track has points");
    cr_expect_gt(top, 0, "the busy thread has CPU on its track");
    cJSON_Delete(j);
}

Test(sample, code_without_symbols_grouped_by_function) {
    char *dir = make_tmpdir();
    char *lpt = strfmt("%s/c.lpt", dir), *csv = strfmt("%s/c.csv", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){"/usr/bin/python3", "-c",
                              "import hashlib; hashlib.pbkdf2_hmac('sha256', b'pw', b'salt', 1000000)", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpt, "--csv", csv, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char *text = read_file(csv, NULL);
    cr_assert_not_null(text);
    long long all = 0, top = 0;
    int rows = 0, unnamed = 0;
    for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "libcrypto.so.3+0x", 17)) continue;
        char *c = strstr(l, ",cpu_self,");
        if (!c || c > strchr(l, '\n')) continue;
        rows++;
        unnamed += strncmp(c - 11, "(no symbol)", 11) != 0;
        long long n = atoll(c + 10);
        all += n;
        if (n > top) top = n;
    }
    if (!rows) cr_skip_test("no sample landed in libcrypto without a symbol (a libcrypto with symbols here?)");
    cr_expect_eq(unnamed, 0, "rows of libcrypto not saying they have no symbol: %d", unnamed);
    cr_expect_geq(top * 4, all, "the hottest function holds %lld of libcrypto's %lld samples over %d rows", top, all,
                  rows);
    free(text);
}

/* A line on the stack many times over (recursion, nested imports) counts once a sample in its
 * total: no Python line's total passes the samples taken (its share, 100 %). */
Test(sample, recursive_python_lines_total_at_most_all_samples) {
    char *dir = make_tmpdir();
    char *lpt = strfmt("%s/r.lpt", dir), *csv = strfmt("%s/r.json", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){"/usr/bin/python3", "-c",
                              "import time\n"
                              "def f(n):\n"
                              "    if n: return f(n - 1)\n"
                              "    t = time.thread_time()\n"
                              "    while time.thread_time() - t < 0.3: pass\n"
                              "f(20)\n",
                              NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", csv, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *j = load_json(csv), *m = libprof_meta(j), *row;
    cr_assert_not_null(j);
    long long samples = meta_num(cJSON_GetObjectItem(m, "sampling"), "samples"), worst = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(m, "cpu_python_lines")) {
        long long total = meta_num(row, "total");
        if (total > worst) worst = total;
    }
    cr_assert_gt(worst, 0, "no Python line rows");
    cr_expect_leq(worst, samples, "a Python line's total %lld passes the %lld samples", worst, samples);
    cJSON_Delete(j);
}
