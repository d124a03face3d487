/* ONNX Runtime: sessions and runs of unmodified programs through ORT's C API table — C programs
 * linked against the C API library of PyPI's onnxruntime wheel (the project's environment,
 * scripts/install-deps): an application asking for the library's own API version
 * (tests/progs/ortrun.c), one asking for an older one (ortc.c), one that dlopens the library with
 * local scope (ortdl), one using the entries of later versions (ortapi.c) — and Python's own
 * InferenceSession, whose module holds a copy of ORT that exports nothing (seen through its
 * Python methods). The model, a 4-block MLP, is written here with Debian's python3-onnx. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(ort, .timeout = 300);

static char *dir, *model;

/* The model: tests/progs/mlp_onnx.py; the application: tests/progs/ortrun.c, linked to the wheel's
 * library through LP_BUILD_DIR/ort (the Makefile). */
#define MK_MODEL LP_SOURCE_DIR "/tests/progs/mlp_onnx.py"
#define ORT_LIB LP_BUILD_DIR "/ort/libonnxruntime.so.1"
#define VENV_PY LP_VENV "/bin/python3"

/* ortrun's graph is not optimised: its 12 nodes stay 12 (MatMul, Add, Relu x 4). */

static void setup(void) {
    dir = make_tmpdir();
    if (access(PROG("ortrun"), X_OK) != 0)
        cr_skip_test("ortrun not built: no onnxruntime in the project's environment " LP_VENV
                     " (scripts/install-deps)");
    const char *py = MK_MODEL;
    model = strfmt("%s/mlp.onnx", dir);
    struct run r;
    const char *argv[] = {"/usr/bin/python3", py, model, NULL};
    run_prog(&r, dir, NULL, argv);
    if (r.status != 0) cr_skip_test("python3-onnx cannot write the model: %s", r.err);
    run_free(&r);
}

static const char *sarg(cJSON *ev, const char *k) {
    cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), k);
    return cJSON_IsString(v) ? v->valuestring : "";
}
static long long narg(cJSON *ev, const char *k) {
    cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

struct counts {
    int create, run, run_ok, release;
};

static struct counts count(cJSON *trace, const char *model_arg) {
    struct counts c = {0, 0, 0, 0};
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (!cJSON_IsString(nm)) continue;
        if (!strcmp(nm->valuestring, "ort.CreateSession")) {
            c.create++;
            cr_expect_str_eq(sarg(ev, "model"), model_arg);
            cr_expect_eq(narg(ev, "failed"), 0);
        } else if (!strcmp(nm->valuestring, "ort.Run")) {
            c.run++;
            c.run_ok += !strcmp(sarg(ev, "model"), "mlp.onnx") && !strcmp(sarg(ev, "inputs"), "x float32[1,64]") &&
                        !strcmp(sarg(ev, "outputs"), "y") && narg(ev, "failed") == 0 &&
                        cJSON_GetObjectItem(ev, "dur") != NULL;
        } else if (!strcmp(nm->valuestring, "ort.ReleaseSession")) {
            c.release++;
            cr_expect_str_eq(sarg(ev, "model"), "mlp.onnx");
        }
    }
    return c;
}

/* ORT's own node events folded into the trace: 12 nodes a run (the graph unoptimised: 4 x MatMul,
 * Add, Relu), each inside an ort.Run slice of its thread; per-op counts in the metadata. */
static void check_nodes(cJSON *j, int runs) {
    cJSON *ev, *run[64];
    int nrun = 0, nodes = 0, inside = 0, named = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "ort.Run") && nrun < 64) run[nrun++] = ev;
    }
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *cat = cJSON_GetObjectItem(ev, "cat");
        if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "ort.node")) continue;
        nodes++;
        const char *nm = cJSON_GetObjectItem(ev, "name")->valuestring, *op = sarg(ev, "op");
        named += (strstr(nm, "/matmul") && !strcmp(op, "MatMul")) || (strstr(nm, "/add") && !strcmp(op, "Add")) ||
                 (strstr(nm, "/relu") && !strcmp(op, "Relu"));
        double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble, end = ts + cJSON_GetObjectItem(ev, "dur")->valuedouble;
        for (int k = 0; k < nrun; k++) {
            double a = cJSON_GetObjectItem(run[k], "ts")->valuedouble,
                   b = a + cJSON_GetObjectItem(run[k], "dur")->valuedouble;
            if (narg(run[k], "n_inputs") == 1 &&
                cJSON_GetObjectItem(run[k], "tid")->valueint == cJSON_GetObjectItem(ev, "tid")->valueint && a <= ts &&
                end <= b) {
                inside++;
                break;
            }
        }
    }
    cr_expect_eq(nodes, 12 * runs, "ort.node events: %d", nodes);
    cr_expect_eq(named, nodes, "nodes with their op: %d of %d", named, nodes);
    cr_expect_eq(inside, nodes, "nodes inside their run: %d of %d", inside, nodes);
    cJSON *o = cJSON_GetObjectItem(libprof_meta(j), "ort"), *op;
    cr_assert_not_null(o, "no metadata.libprof.ort");
    int ops = 0;
    cJSON_ArrayForEach(op, cJSON_GetObjectItem(o, "by_op")) {
        const char *n = cJSON_GetObjectItem(op, "name")->valuestring;
        if (!strcmp(n, "MatMul") || !strcmp(n, "Add") || !strcmp(n, "Relu")) {
            cr_expect_eq(cJSON_GetObjectItem(op, "count")->valueint, 4 * runs, "%s", n);
            ops++;
        }
    }
    cr_expect_eq(ops, 3);
    cr_expect(cJSON_GetObjectItem(o, "kernel_ns")->valuedouble < cJSON_GetObjectItem(o, "run_ns")->valuedouble);
}

/* An application of the C API (ortrun): one session, 50 runs with their input shapes, the release,
 * ORT's own node events inside the runs (its files removed); the report takes the runs as
 * iterations. */
Test(ort, c_application_sessions_and_runs, .init = setup) {
    const char *argv[] = {PROG("ortrun"), model, NULL};
    struct run bare, r, rep;
    run_prog(&bare, dir, NULL, argv);
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    char *out = strfmt("LIBPROF_OUTPUT=%s/n.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    char *path = strfmt("%s/n.json", dir), *err;
    cJSON *sum = check_trace_py(path, &err);
    cr_assert_not_null(sum, "%s", err);
    cJSON *j = load_json(path);
    struct counts c = count(j, model);
    cr_expect_eq(c.create, 1);
    cr_expect_eq(c.run, 50);
    cr_expect_eq(c.run_ok, 50, "runs with model, inputs, outputs: %d of %d", c.run_ok, c.run);
    cr_expect_eq(c.release, 1);
    check_nodes(j, 50);
    glob_t g; /* (this run's own: another run's may be under way beside it) */
    cr_expect_neq(glob(strfmt("/tmp/libprof-ort.%lld", meta_num(libprof_meta(j), "pid")), 0, NULL, &g), 0,
                  "libprof's ORT profile files were left behind");
    const char *rargv[] = {REPORT, path, NULL};
    run_prog(&rep, dir, NULL, rargv);
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cr_expect_not_null(strstr(rep.out, "iterations /^ort\\.Run$/: 50"), "%s", rep.out);
    cJSON_Delete(sum);
    cJSON_Delete(j);
    run_free(&rep);
    run_free(&r);
    run_free(&bare);
}

/* Run a C program of ours bare and under libprof (trace NAME.json): the same output, and one
 * session, 3 runs, one release recorded. */
static void c_program_runs(const char *const *argv, const char *name) {
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    char *out = strfmt("LIBPROF_OUTPUT=%s/%s.json", dir, name);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cJSON *j = load_json(strfmt("%s/%s.json", dir, name));
    cr_assert_not_null(j);
    struct counts c = count(j, model);
    cr_expect(c.create == 1 && c.run == 3 && c.run_ok == 3 && c.release == 1, "create %d run %d (%d ok) release %d",
              c.create, c.run, c.run_ok, c.release);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* A C program linked against ORT asking for API version 10 (older than the library's). */
Test(ort, c_program_older_api_version, .init = setup) {
    if (access(PROG("ortc"), X_OK) != 0) cr_skip_test("ortc not built (no ONNX Runtime at build time)");
    c_program_runs((const char *[]){PROG("ortc"), model, NULL}, "c");
}

/* A C program that dlopens the shipped library with local scope and asks dlsym for the entry. */
Test(ort, c_program_dlopen_dlsym, .init = setup) {
    if (access(PROG("ortdl"), X_OK) != 0) cr_skip_test("ortdl not built (no ONNX Runtime at build time)");
    c_program_runs((const char *[]){PROG("ortdl"), model, ORT_LIB, NULL}, "d");
}

/* LIBPROF_EVENTS without ort: the library's own table, nothing recorded of it. */
Test(ort, family_off_hands_out_the_real_table, .init = setup) {
    if (access(PROG("ortc"), X_OK) != 0) cr_skip_test("ortc not built (no ONNX Runtime at build time)");
    const char *argv[] = {PROG("ortc"), model, NULL};
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/o.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_EVENTS=-ort", NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cJSON *j = load_json(strfmt("%s/o.json", dir));
    cr_assert_not_null(j);
    struct counts c = count(j, model);
    cr_expect(c.create == 0 && c.run == 0 && c.release == 0);
    cJSON_Delete(j);
    run_free(&r);
}

/* The program turned ORT's profiling on itself: its file stays where it asked, and is folded. */
Test(ort, program_profiling_kept_and_folded, .init = setup) {
    char *prefix = strfmt("%s/own", dir);
    const char *argv[] = {PROG("ortrun"), model, "50", "own", prefix, NULL};
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/p.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    glob_t g;
    cr_expect_eq(glob(strfmt("%s*.json", prefix), 0, NULL, &g), 0, "the program's profile file is gone");
    cJSON *j = load_json(strfmt("%s/p.json", dir));
    cr_assert_not_null(j);
    check_nodes(j, 50);
    cJSON_Delete(j);
    run_free(&r);
}

/* LIBPROF_ORT_NODES=0: sessions and runs, no node profiling (`extra`: one more variable). */
static void nodes_off_with(const char *extra) {
    const char *argv[] = {PROG("ortrun"), model, NULL};
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/x.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_ORT_NODES=0", extra, NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    size_t len;
    char *text = read_file(strfmt("%s/x.json", dir), &len);
    cr_assert_not_null(text);
    cr_expect_null(strstr(text, "\"ort.node\""));
    cJSON *j = load_json(strfmt("%s/x.json", dir));
    struct counts c = count(j, model);
    cr_expect_eq(c.run, 50);
    cJSON_Delete(j);
    run_free(&r);
}

Test(ort, nodes_off, .init = setup) { nodes_off_with(NULL); }

/* LIBPROF_CHILDREN=0 takes every LIBPROF* variable out of the environment at start-up: the
 * ORT family must have read LIBPROF_ORT_NODES before (all variables are read once, together). */
Test(ort, nodes_off_with_children_off, .init = setup) { nodes_off_with("LIBPROF_CHILDREN=0"); }

/* Entries past version 1 (tests/progs/ortapi.c, API version 16): the providers a program appends
 * (only those ORT accepted: this CPU build refuses XNNPACK), sessions made with a prepacked-weights
 * container from a file and from memory, runs through an IoBinding and RunAsync — each an ort.Run
 * with its api, its node events inside it on its thread (RunAsync's on ORT's pool thread that ran
 * it); the output unchanged. */
Test(ort, later_entries_providers_binding_async_prepacked, .init = setup) {
    if (access(PROG("ortapi"), X_OK) != 0) cr_skip_test("ortapi not built (no ONNX Runtime at build time)");
    for (int pass = 0; pass < 2; pass++) {
        const char *eps = pass ? "-" : "XNNPACK,CPU";
        const char *argv[] = {PROG("ortapi"), model, eps, NULL};
        struct run bare, r;
        run_prog(&bare, dir, NULL, argv);
        cr_assert_eq(bare.status, 0, "%s", bare.err);
        char *path = strfmt("%s/api%d.json", dir, pass);
        run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", path), NULL}, argv);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_str_eq(r.out, bare.out);
        cJSON *j = load_json(path), *ev;
        cr_assert_not_null(j);
        int sessions = 0, from_file = 0, from_memory = 0, binding = 0, async = 0, plain = 0, releases = 0;
        double rs[8][3]; /* ts, end, tid of each run */
        int nruns = 0;
        cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
            cJSON *nm = cJSON_GetObjectItem(ev, "name"), *args = cJSON_GetObjectItem(ev, "args");
            if (!cJSON_IsString(nm)) continue;
            if (!strcmp(nm->valuestring, "ort.CreateSession")) {
                sessions++;
                const char *m = cJSON_GetObjectItem(args, "model")->valuestring;
                const char *p = cJSON_GetObjectItem(args, "providers")->valuestring;
                cr_expect_str_eq(p, pass ? "CPU (default)" : "CPU", "providers of %s", m);
                from_file += strcmp(m, model) == 0;
                from_memory += strncmp(m, "<memory, ", 9) == 0;
            } else if (!strcmp(nm->valuestring, "ort.Run")) {
                cJSON *api = cJSON_GetObjectItem(args, "api");
                const char *a = cJSON_IsString(api) ? api->valuestring : "";
                binding += !strcmp(a, "RunWithBinding");
                async += !strcmp(a, "RunAsync");
                plain += !a[0];
                cr_expect_str_eq(cJSON_GetObjectItem(args, "outputs")->valuestring, "y");
                if (!strcmp(a, "RunAsync"))
                    cr_expect_str_eq(cJSON_GetObjectItem(args, "inputs")->valuestring, "x float32[1,64]");
                cr_expect_eq(cJSON_GetObjectItem(args, "failed")->valueint, 0);
                if (nruns < 8) {
                    double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
                    rs[nruns][0] = ts;
                    rs[nruns][1] = ts + cJSON_GetObjectItem(ev, "dur")->valuedouble;
                    rs[nruns][2] = cJSON_GetObjectItem(ev, "tid")->valuedouble;
                    nruns++;
                }
            } else if (!strcmp(nm->valuestring, "ort.ReleaseSession")) {
                releases++;
            }
        }
        cr_expect(sessions == 2 && from_file == 1 && from_memory == 1, "sessions %d (file %d, memory %d)", sessions,
                  from_file, from_memory);
        cr_expect(binding == 2 && async == 2 && plain == 0 && releases == 2, "binding %d async %d plain %d releases %d",
                  binding, async, plain, releases);
        /* node events: the same number in every run, each inside a run on the run's thread */
        int per[8] = {0}, nodes = 0, outside = 0;
        cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
            cJSON *cat = cJSON_GetObjectItem(ev, "cat");
            if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "ort.node")) continue;
            nodes++;
            double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble,
                   end = ts + cJSON_GetObjectItem(ev, "dur")->valuedouble,
                   tid = cJSON_GetObjectItem(ev, "tid")->valuedouble;
            int k = 0;
            while (k < nruns && !(tid == rs[k][2] && ts >= rs[k][0] && end <= rs[k][1] + 0.001)) k++;
            if (k < nruns)
                per[k]++;
            else
                outside++;
        }
        cr_expect(nruns == 4 && nodes > 0 && outside == 0, "runs %d nodes %d outside %d", nruns, nodes, outside);
        for (int k = 1; k < nruns; k++) cr_expect_eq(per[k], per[0], "run %d: %d nodes, run 0: %d", k, per[k], per[0]);
        cJSON_Delete(j);
        run_free(&r);
        run_free(&bare);
    }
}

/* Python's own InferenceSession (PyPI's onnxruntime in the project's environment; its module holds a
 * copy of ORT that exports nothing): the session and every run recorded from the module's Python
 * methods with no variable set — model, providers, input shapes, output names, the Python line that
 * ran it; the report takes the runs as iterations, and with CPU samples each run counts the CPU of
 * ORT's intra-op pool thread under it (a [4096, 64] batch keeps both pool threads busy). */
Test(ort, python_inference_session, .init = setup) {
    if (access(VENV_PY, X_OK) != 0) cr_skip_test("no Python environment at " LP_VENV " (scripts/install-deps)");
    char *dyn = strfmt("%s/dyn.onnx", dir);
    struct run mk, bare, r, rep;
    run_prog(&mk, dir, NULL, (const char *[]){"/usr/bin/python3", MK_MODEL, dyn, "dynamic", NULL});
    cr_assert_eq(mk.status, 0, "%s", mk.err);
    const char *argv[] = {VENV_PY, LP_SOURCE_DIR "/tests/progs/ort_session.py", dyn, "20", "4096", "2", NULL};
    run_prog(&bare, dir, NULL, argv);
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    char *path = strfmt("%s/py.json", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", path), "LIBPROF_SAMPLE_HZ=1000", NULL},
             argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_eq(r.err_len, 0, "libprof wrote into the program's stderr: %s", r.err);
    char *err;
    cJSON *sum = check_trace_py(path, &err);
    cr_assert_not_null(sum, "%s", err);
    cJSON_Delete(sum);
    cJSON *j = load_json(path), *ev;
    cr_assert_not_null(j);
    int create = 0, run = 0, run_ok = 0, ort_values = 0;
    double others = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (!cJSON_IsString(nm)) continue;
        if (!strcmp(nm->valuestring, "ort.CreateSession")) {
            create++;
            cr_expect_str_eq(sarg(ev, "model"), dyn);
            cr_expect_str_eq(sarg(ev, "providers"), "CPU");
            cr_expect_eq(narg(ev, "failed"), 0);
        } else if (!strcmp(nm->valuestring, "ort.Run")) {
            run++;
            cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "cpu_others_ns");
            if (cJSON_IsNumber(o)) others += o->valuedouble;
            if (!strcmp(sarg(ev, "api"), "InferenceSession.run_with_ort_values")) {
                ort_values++;
                cr_expect_str_eq(sarg(ev, "inputs"), "x <OrtValue>");
                continue;
            }
            run_ok += !strcmp(sarg(ev, "model"), "dyn.onnx") && !strcmp(sarg(ev, "inputs"), "x float32[4096,64]") &&
                      !strcmp(sarg(ev, "outputs"), "y") && !strcmp(sarg(ev, "api"), "InferenceSession.run") &&
                      narg(ev, "n_inputs") == 1 && narg(ev, "failed") == 0 && strstr(sarg(ev, "py"), "ort_session.py:");
        }
    }
    cr_expect_eq(create, 1);
    cr_expect_eq(run, 21, "ort.Run slices: %d", run);
    cr_expect_eq(run_ok, 20, "runs with model, inputs, outputs, api, line: %d of 20", run_ok);
    cr_expect_eq(ort_values, 1);
    cr_expect_gt(others, 0, "no CPU of ORT's pool thread under the runs");
    cJSON_Delete(j);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, path, NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cr_expect_not_null(strstr(rep.out, "iterations /^ort\\.Run$/: 21"), "%s", rep.out);
    cr_expect_not_null(strstr(rep.out, "\ncpu, other threads "), "%s", rep.out);
    run_free(&rep);
    run_free(&r);
    /* the ort family off: nothing of it recorded, the program's output the same */
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", path), "LIBPROF_EVENTS=-ort", NULL},
             argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    size_t len;
    char *text = read_file(path, &len);
    cr_assert_not_null(text);
    cr_expect_null(strstr(text, "\"ort.Run\""));
    run_free(&r);
    run_free(&bare);
    run_free(&mk);
}
