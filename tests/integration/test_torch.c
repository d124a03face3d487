/* PyTorch's operators (the torch family): every operator, autograd node and record_function
 * range of an unmodified program, counted as torch.profiler counts them (tests/progs/torch_ops.py:
 * a transformer + CNN, inference and training, against the profiler with its removal of nested
 * same-name ops off), by input shapes too; backward nodes linked to their forward operators; a
 * range ended on another thread; a program's own torch.profiler undisturbed; a C++ program
 * linked to libtorch; a libtorch of a version libprof does not know. Each on both releases the
 * machine has: Debian's 1.13 (/usr/bin/python3, libtorch-dev) and the project environment's 2.x
 * (scripts/requirements.txt). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(torch, .timeout = 600);

static char *dir;
static void setup(void) { dir = make_tmpdir(); }

#define OPS_PY LP_SOURCE_DIR "/tests/progs/torch_ops.py"

#define DEBIAN_PY "/usr/bin/python3"  /* PyTorch 1.13 */
#define ENV_PY LP_VENV "/bin/python3" /* PyTorch 2.x */

static int torch_missing(const char *py) {
    struct run r;
    run_prog(&r, NULL, NULL, (const char *[]){py, "-c", "import torch", NULL});
    int missing = r.status != 0;
    run_free(&r);
    return missing;
}

static const char *str(cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* metadata.libprof.torch.ops: the count of operator `name`, or -1. */
static long long op_count(cJSON *meta, const char *name) {
    cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "torch"), "ops")) {
        if (!strcmp(str(row, "name"), name)) return (long long)cJSON_GetObjectItem(row, "count")->valuedouble;
    }
    return -1;
}

static void operators_counted(const char *py) {
    char *prof = strfmt("%s/profile.json", dir), *trace = strfmt("%s/t.json", dir), *csv = strfmt("%s/t.csv", dir);
    struct run bare, p, r, cmp;
    run_prog(&p, dir, NULL, (const char *[]){py, OPS_PY, "profile", prof, NULL});
    cr_assert_eq(p.status, 0, "%s", p.err);
    run_prog(&bare, dir, NULL, (const char *[]){py, OPS_PY, "run", NULL});
    char *out = strfmt("LIBPROF_OUTPUT=%s", trace), *csvv = strfmt("LIBPROF_CSV=%s", csv);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, csvv, "LIBPROF_TORCH_SHAPES=1", NULL},
             (const char *[]){py, OPS_PY, "run", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_null(strstr(r.err, "libprof:"), "%s", r.err);
    /* every op, and every (op, input shapes) pair, of the window: equal counts */
    run_prog(&cmp, dir, NULL, (const char *[]){py, OPS_PY, "compare", trace, prof, NULL});
    cr_assert_eq(cmp.status, 0, "%s%s", cmp.out, cmp.err);
    cr_assert(strstr(cmp.out, "differences 0"), "%s", cmp.out);
    char *err;
    cJSON *sum = check_trace_py(trace, &err);
    cr_assert_not_null(sum, "%s", err);
    cJSON *j = load_json(trace), *meta = libprof_meta(j), *ev;
    /* backward nodes with a sequence number: each linked to its forward operator by an arrow */
    int backward = 0, flows = 0, begin = 0, end = 0;
    double async_tid = -1, ended_on = -1;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        const char *ph = str(ev, "ph"), *cat = str(ev, "cat");
        if (strcmp(cat, "torch")) continue;
        cJSON *args = cJSON_GetObjectItem(ev, "args");
        if (!strcmp(ph, "X") && !strcmp(str(args, "scope"), "backward") && cJSON_GetObjectItem(args, "seq")) backward++;
        if (!strcmp(ph, "f")) flows++;
        if (!strcmp(str(ev, "name"), "libprof-async")) {
            if (!strcmp(ph, "b")) {
                begin++;
                async_tid = cJSON_GetObjectItem(ev, "tid")->valuedouble;
                ended_on = cJSON_GetObjectItem(args, "ended_on_thread")->valuedouble;
            }
            end += !strcmp(ph, "e");
        }
    }
    cr_expect_gt(backward, 50);
    cr_expect_eq(flows, backward, "%d arrows for %d backward nodes", flows, backward);
    cr_expect_eq(meta_num(cJSON_GetObjectItem(meta, "torch"), "backward_links"), backward);
    cr_expect_gt(op_count(meta, "aten::addmm"), 0);
    cr_expect_gt(op_count(meta, "aten::convolution_backward"), 0);
    cr_expect_gt(op_count(meta, "autograd::engine::evaluate_function: AddmmBackward0"), 0);
    /* the range another thread ended: one async slice on the main thread, ended on the other */
    cr_expect_eq(begin, 1);
    cr_expect_eq(end, 1);
    cr_expect_eq(async_tid, meta_num(meta, "pid"));
    cr_expect(ended_on > 0 && ended_on != async_tid, "ended on %.0f", ended_on);
    cr_expect_eq(meta_num(cJSON_GetObjectItem(meta, "torch"), "unpaired"), 0);
    /* the CSV and libprof-report carry the operator table, by shapes on request */
    char *text = read_file(csv, NULL);
    cr_assert_not_null(text);
    cr_expect(strstr(text, "\n\"aten::addmm\",torch_op,") || strstr(text, "\naten::addmm,torch_op,"),
              "no torch_op rows");
    cr_expect(strstr(text, ",torch_shape,"));
    struct run rep;
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, trace, "--by-shapes", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cr_expect(strstr(rep.out, "PyTorch operators by input shapes"), "%s", rep.out);
    cr_expect(strstr(rep.out, "aten::addmm [["), "%s", rep.out);
    run_free(&rep);
    free(text);
    cJSON_Delete(j);
    cJSON_Delete(sum);
    run_free(&bare);
    run_free(&p);
    run_free(&r);
    run_free(&cmp);
}

Test(torch, operators_counted_as_torch_profiler_counts_them_1_13, .init = setup) {
    if (torch_missing(DEBIAN_PY)) cr_skip_test("python3-torch is not installed");
    operators_counted(DEBIAN_PY);
}

Test(torch, operators_counted_as_torch_profiler_counts_them_2_x, .init = setup) {
    if (torch_missing(ENV_PY)) cr_skip_test("no torch in the project's environment " LP_VENV " (scripts/install-deps)");
    operators_counted(ENV_PY);
}

/* torch.compile (inductor, CPU; its cache makes the compiles after the machine's first quick): the
 * compiled region, Dynamo's cache lookup and the operators that still dispatch, counted as
 * torch.profiler counts them (the three ranges torch opens only under its profiler aside: the
 * comparison lists them); CPU samples name inductor's generated kernel. */
Test(torch, compiled_model_2_x, .init = setup) {
    if (torch_missing(ENV_PY)) cr_skip_test("no torch in the project's environment " LP_VENV " (scripts/install-deps)");
    char *prof = strfmt("%s/pc.json", dir), *raw = strfmt("%s/tc.lpt", dir), *trace = strfmt("%s/tc.json", dir),
         *folded = strfmt("%s/cpu.folded", dir);
    struct run p, r, cmp, rep;
    /* (one run long enough for the samples to find the kernel: each compile is many seconds) */
    run_prog(&p, dir, NULL, (const char *[]){ENV_PY, OPS_PY, "profile-compiled", "1500", prof, NULL});
    cr_assert_eq(p.status, 0, "%s", p.err);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", raw), "LIBPROF_TORCH_SHAPES=1",
                              "LIBPROF_SAMPLE_HZ=2000", NULL},
             (const char *[]){ENV_PY, OPS_PY, "run-compiled", "1500", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "done\n");
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, raw, "--chrome", trace, "--cpu-folded", folded, "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    run_prog(&cmp, dir, NULL, (const char *[]){ENV_PY, OPS_PY, "compare", trace, prof, NULL});
    cr_assert_eq(cmp.status, 0, "%s%s", cmp.out, cmp.err);
    cr_assert(strstr(cmp.out, "differences 0"), "%s", cmp.out);
    cJSON *j = load_json(trace);
    cr_assert_not_null(j);
    cr_expect_geq(op_count(libprof_meta(j), "Torch-Compiled Region: 0/0"), 1501); /* and the call that compiled */
    cr_expect_geq(op_count(libprof_meta(j), "TorchDynamo Cache Lookup"), 1501);
    cJSON_Delete(j);
    /* CPU samples: inductor's kernel (its generated library's symbol) among the frames */
    char *text = read_file(folded, NULL);
    cr_assert_not_null(text);
    cr_expect(strstr(text, ";kernel;") || strstr(text, ";kernel "), "no sample in inductor's kernel");
    free(text);
    run_free(&p);
    run_free(&r);
    run_free(&cmp);
    run_free(&rep);
}

/* A program that runs torch.profiler itself gets the same counts with libprof as without. */
static void own_profiler_undisturbed(const char *py) {
    char *p1 = strfmt("%s/p1.json", dir), *p2 = strfmt("%s/p2.json", dir),
         *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    struct run a, b;
    run_prog(&a, dir, NULL, (const char *[]){py, OPS_PY, "profile", p1, NULL});
    run_prog(&b, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_TORCH_SHAPES=1", NULL},
             (const char *[]){py, OPS_PY, "profile", p2, NULL});
    cr_assert_eq(a.status, 0, "%s", a.err);
    cr_assert_eq(b.status, 0, "%s", b.err);
    char *x = read_file(p1, NULL), *y = read_file(p2, NULL);
    cr_assert(x && y);
    cr_expect(strlen(x) > 1000);
    cr_expect_str_eq(x, y, "the program's own profiler counted differently under libprof");
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_expect_gt(op_count(libprof_meta(j), "aten::linear"), 0); /* and libprof saw the operators too */
    cJSON_Delete(j);
    free(x);
    free(y);
    run_free(&a);
    run_free(&b);
}

Test(torch, program_own_profiler_undisturbed_1_13, .init = setup) {
    if (torch_missing(DEBIAN_PY)) cr_skip_test("python3-torch is not installed");
    own_profiler_undisturbed(DEBIAN_PY);
}

Test(torch, program_own_profiler_undisturbed_2_x, .init = setup) {
    if (torch_missing(ENV_PY)) cr_skip_test("no torch in the project's environment " LP_VENV " (scripts/install-deps)");
    own_profiler_undisturbed(ENV_PY);
}

/* A C++ program linked to libtorch: libtorch was initialised before main, operators recorded
 * from main on; no input shapes unless asked. */
static void cxx_program(const char *prog) {
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){prog, NULL});
    char *trace = strfmt("%s/c.json", dir), *out = strfmt("LIBPROF_OUTPUT=%s", trace);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, (const char *[]){prog, NULL});
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cJSON *j = load_json(trace), *meta = libprof_meta(j), *ev;
    cr_assert_not_null(j);
    cr_expect_eq(op_count(meta, "aten::mm"), 10);
    cr_expect_eq(op_count(meta, "aten::relu"), 10);
    int shapes = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (!strcmp(str(ev, "cat"), "torch") && cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "shapes"))
            shapes++;
    }
    cr_expect_eq(shapes, 0);
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&r);
}

Test(torch, cxx_program_linked_to_libtorch_1_13, .init = setup) {
    if (access(PROG("torchc"), X_OK) != 0) cr_skip_test("libtorch-dev is not installed");
    cxx_program(PROG("torchc"));
}

Test(torch, cxx_program_linked_to_libtorch_2_x, .init = setup) {
    if (access(PROG("torchc2"), X_OK) != 0) cr_skip_test("no torch in the project's environment " LP_VENV);
    cxx_program(PROG("torchc2"));
}

/* A libtorch of a version libprof does not know: one note in the trace (not on the program's
 * stderr), no operators, the program as without libprof (the fake library aborts if libprof
 * registers anything with it). */
Test(torch, unknown_version_one_line_no_operators, .init = setup) {
    const char *lib = PROG("faketorch/libtorch_cpu.so.9.99");
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){PROG("torchhost"), lib, NULL});
    char *out = strfmt("LIBPROF_OUTPUT=%s/u.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL},
             (const char *[]){PROG("torchhost"), lib, NULL});
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err);
    cr_expect_eq(notes_with(strfmt("%s/u.json", dir), "torch 9.99 is not a version libprof knows"), 1);
    run_free(&r);
    /* a pip wheel's layout: torch/lib/libtorch_cpu.so, the version in torch/version.py */
    char *cmd = strfmt("mkdir -p %s/torch/lib && cp %s %s/torch/lib/libtorch_cpu.so && "
                       "printf \"__version__ = '9.98.1+cpu'\\n\" > %s/torch/version.py",
                       dir, lib, dir, dir);
    cr_assert_eq(system(cmd), 0);
    char *pip = strfmt("%s/torch/lib/libtorch_cpu.so", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL},
             (const char *[]){PROG("torchhost"), pip, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_eq(notes_with(strfmt("%s/u.json", dir), "torch 9.98.1+cpu is not a version libprof knows"), 1);
    run_free(&bare);
    run_free(&r);
}
