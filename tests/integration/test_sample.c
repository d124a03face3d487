/* CPU sampling (LIBPROF_SAMPLE_HZ): shares of a program whose CPU is known, against the program's
 * own clocks and against perf (the kernel's sampler); the samples taken against those asked;
 * Python functions of known CPU on every interpreter, a numpy GEMM under its Python caller; the
 * program's own SIGPROF timer and SIGTRAP handler; threads looping dlopen/dlclose, C++
 * exceptions and malloc while sampled; the outputs (folded, pprof through an independent reader,
 * speedscope, CSV, metadata). tests/progs/cpusplit.c is the native program. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <glob.h>
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
 * perf's; the samples at least 90 % of those asked (CPU seconds x rate); the sleeper has none. */
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
    /* four threads ran; the sleeper took no sample */
    int threads = cJSON_GetArraySize(cJSON_GetObjectItem(smp, "threads"));
    cr_expect_eq(threads, 3, "threads with samples: %d (the sleeper must have none)", threads);
    cJSON_Delete(j);
    run_free(&r);
}

/* The outputs of one sampled run: the folded file, pprof (decoded by npm's pprof-format, an
 * independent reader: the same total), speedscope (one profile per thread), the CSV rows, the
 * report's table; LIBPROF_FLAMEGRAPH=1 writes NAME.cpu.folded at exit. */
Test(sample, outputs_agree_and_decode) {
    char *dir = make_tmpdir();
    char *lpt = strfmt("%s/s.lpt", dir);
    struct run r, rep;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=500", NULL},
             (const char *[]){PROG("cpusplit"), "split", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *folded = strfmt("%s/s.cpu.folded", dir), *pprof = strfmt("%s/s.pb.gz", dir),
         *ss = strfmt("%s/s.ss.json", dir);
    char *csv = strfmt("%s/s.csv", dir);
    run_prog(&rep, dir, NULL,
             (const char *[]){REPORT, lpt, "--cpu-folded", folded, "--pprof", pprof, "--speedscope", ss, "--csv", csv,
                              "-q", NULL});
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
    /* pprof-format (npm) decodes it: its samples' first value (count) adds up to the same total */
    const char *js = "const fs=require('fs'),zlib=require('zlib');const {Profile}=require('pprof-format');"
                     "const p=Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[1])));"
                     "let n=0,ns=0;for(const s of p.sample){n+=Number(s.value[0]);ns+=Number(s.value[1]);}"
                     "const st=p.stringTable.strings;"
                     "console.log(n,ns,p.sampleType.map(t=>st[t.type]+'/'+st[t.unit]).join(','),"
                     "p.function.some(f=>st[f.name]==='burn_a'));";
    run_prog(&rep, dir, (const char *[]){"NODE_PATH=/opt/libprof-npm/node_modules", NULL},
             (const char *[]){"node", "-e", js, pprof, NULL});
    if (rep.status != 0 && strstr(rep.err, "Cannot find module"))
        cr_skip_test("npm's pprof-format is not installed (scripts/install-deps)");
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    long long n = 0, ns = 0;
    char types[128] = "", named[16] = "";
    sscanf(rep.out, "%lld %lld %127s %15s", &n, &ns, types, named);
    cr_expect_eq(n, folded_total, "pprof %lld samples, folded %lld", n, folded_total);
    cr_expect_eq(ns, n * 2000000, "cpu/nanoseconds: %lld for %lld samples at 500 Hz", ns, n);
    cr_expect_str_eq(types, "samples/count,cpu/nanoseconds");
    cr_expect_str_eq(named, "true", "no function burn_a in the profile");
    run_free(&rep);
    /* speedscope: a sampled profile per thread that ran */
    cJSON *s = load_json(ss);
    cr_assert_not_null(s);
    int cpu_profiles = 0;
    cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(s, "profiles")) {
        cJSON *name = cJSON_GetObjectItem(p, "name");
        cpu_profiles += cJSON_IsString(name) && !strncmp(name->valuestring, "CPU: ", 5);
    }
    cr_expect_eq(cpu_profiles, 3);
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
 * its own SIGTRAP handler gets its own SIGTRAP (and sampling stops, said once). */
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
    cr_expect_str_eq(r.out, "trapped 1\n");
    cr_expect_eq(count_lines_with(r.err, "SIGTRAP handler"), 1, "%s", r.err);
    run_free(&r);
    run_free(&bare);
}

/* Threads looping dlopen/dlclose, throwing and catching C++ exceptions and allocating, sampled at
 * 1000 Hz: no deadlock (the test's timeout), no crash, samples on every thread. */
Test(sample, loader_unwinder_and_malloc_loops_do_not_deadlock, .timeout = 120) {
    char *dir = make_tmpdir();
    struct run r;
    char *lpt = strfmt("%s/c.lpt", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=1000", NULL},
             (const char *[]){PROG("cpusplit"), "churn", "8", PROG("libplugin.so"), PROG("libthrower.so"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "churned\n");
    struct run rep;
    char *json = strfmt("%s/c.json", dir);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", json, "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cJSON *j = load_json(json);
    cr_assert_not_null(j);
    cJSON *smp = cJSON_GetObjectItem(libprof_meta(j), "sampling");
    cr_expect_geq(cJSON_GetArraySize(cJSON_GetObjectItem(smp, "threads")), 3);
    cr_expect_gt(num(smp, "samples"), 5000, "%lld samples in 8 s of three busy threads", num(smp, "samples"));
    cJSON_Delete(j);
    run_free(&rep);
    run_free(&r);
}

/* Every interpreter libprof reads: three pure-Python functions burning 0.2, 0.4 and 0.6 s of CPU
 * get samples in those proportions (within 15 %), charged to their lines. */
static const char burn_py[] = "import time\n"
                              "def burn(s):\n"
                              "    t = time.thread_time()\n"
                              "    x = 0\n"
                              "    while time.thread_time() - t < s:\n"
                              "        x += sum(range(100))\n"
                              "    return x\n"
                              "def one(): return burn(0.2)\n"
                              "def two(): return burn(0.4)\n"
                              "def three(): return burn(0.6)\n"
                              "one(); two(); three()\n";

static int interpreters(char out[][256], int cap) {
    int n = 0;
    glob_t g;
    if (glob("/root/.pyenv/versions/3.*/bin/python3", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && n < cap; i++) {
            const char *v = strstr(g.gl_pathv[i], "/versions/3.") + 12;
            if (atoi(v) >= 8) snprintf(out[n++], 256, "%s", g.gl_pathv[i]);
        }
        globfree(&g);
    }
    if (access("/usr/bin/python3", X_OK) == 0 && n < cap) snprintf(out[n++], 256, "/usr/bin/python3");
    return n;
}

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
    char *script = strfmt("%s/burn.py", dir);
    FILE *f = fopen(script, "w");
    fputs(burn_py, f);
    fclose(f);
    char py[16][256];
    int n = interpreters(py, 16), tested = 0;
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
            cr_expect(rb > 2 * 0.85 && rb < 2 * 1.15 && rc > 3 * 0.85 && rc < 3 * 1.15,
                      "%s: one %lld two %lld three %lld (want 1 : 2 : 3)", py[i], a, b, c);
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
    char *script = strfmt("%s/mm.py", dir);
    FILE *f = fopen(script, "w");
    fputs("import numpy as np\n"
          "a = np.ones((512, 512), dtype=np.float32)\n"
          "def mm():\n"
          "    for _ in range(60): a @ a\n"
          "mm()\n",
          f);
    fclose(f);
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
