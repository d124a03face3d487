/* ExecuTorch (the executorch family): a model of our own (tests/progs/et_model.py: a CNN + MLP,
 * its convolutions and linears delegated to XNNPACK, two portable operators) exported to a .pte
 * and run, unmodified, by ExecuTorch's runtime — from Python (the environment's executorch wheel,
 * whose runtime has no event tracer) and from C++ (tests/progs/etrun.cpp on the runtime libraries
 * of the 1.5 wheel): each execute a slice and an iteration, each instruction a slice named by its
 * operator or delegate; the ETDump the C++ program's profiler makes, every event of ExecuTorch's
 * Inspector table counted and placed inside its execute slice (the load's events inside the
 * method's executorch.init slice), and a run moved to a row of its own where it would cross one
 * of libprof's slices; a release libprof does not know. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "lib/etdump.h"

TestSuite(executorch, .timeout = 300);

static char *dir;
static void setup(void) { dir = make_tmpdir(); }

#define ENV_PY LP_VENV "/bin/python3"
#define ET_PY LP_SOURCE_DIR "/tests/progs/et_model.py"
#define PTE PROG("et_model.pte")

static const char *str(cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

struct span {
    double ts, end;
    int tid;
};

/* The executorch.execute slices of a trace (at most `cap`); `named`: each of the method "forward". */
static int executes(cJSON *j, struct span *ex, int cap, int named) {
    int n = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(str(ev, "cat"), "executorch") || strcmp(str(ev, "name"), "executorch.execute") || n >= cap) continue;
        double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
        ex[n++] = (struct span){ts, ts + cJSON_GetObjectItem(ev, "dur")->valuedouble,
                                (int)cJSON_GetObjectItem(ev, "tid")->valuedouble};
        if (named) cr_expect_str_eq(str(cJSON_GetObjectItem(ev, "args"), "method"), "forward");
    }
    return n;
}

static int inside(const struct span *ex, int n, int tid, double ts, double end) {
    for (int i = 0; i < n; i++)
        if (ex[i].tid == tid && ts >= ex[i].ts - 0.0015 && end <= ex[i].end + 0.0015) return 1;
    return 0;
}

/* The count of the executorch.instruction slices named `name`; those outside every execute
 * slice of their thread counted in *outside. */
static int instructions(cJSON *j, const struct span *ex, int n, const char *name, int *outside) {
    int count = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *args = cJSON_GetObjectItem(ev, "args");
        if (strcmp(str(ev, "cat"), "executorch") || !strcmp(str(ev, "name"), "executorch.execute")) continue;
        if (strcmp(str(ev, "name"), name)) continue;
        count++;
        double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
        if (!inside(ex, n, (int)cJSON_GetObjectItem(ev, "tid")->valuedouble, ts,
                    ts + cJSON_GetObjectItem(ev, "dur")->valuedouble))
            (*outside)++;
        cr_expect(cJSON_GetObjectItem(args, "instruction") != NULL);
    }
    return count;
}

/* The row beside the thread (ETDump (thread N)): the ETDump of a real run placed again by the
 * slices libprof recorded around it (from its trace `j`), plus one slice that crosses an event
 * of the third run half-way — that run, and only that run, must leave the thread's own track. */
#define NS(x) ((uint64_t)((x) + 0.5)) /* (µs × 1000, rounded: the trace's ns) */
static void fallback_row(const char *raw, cJSON *j) {
    struct lp_reader r;
    char err[256];
    cr_assert_eq(lp_reader_open(&r, raw, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.netdumps, 1);
    struct lp_etdump *d = lp_etdump_new(&r);
    cr_assert_not_null(d);
    struct span ex[64];
    int nex = executes(j, ex, 64, 1), tid = 0, fed = 0;
    cr_assert(nex >= 3);
    double cut0 = 0, cut1 = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        double ts = cJSON_GetObjectItem(ev, "ts") ? cJSON_GetObjectItem(ev, "ts")->valuedouble : 0,
               dur = cJSON_GetObjectItem(ev, "dur") ? cJSON_GetObjectItem(ev, "dur")->valuedouble : 0;
        int t = cJSON_GetObjectItem(ev, "tid") ? (int)cJSON_GetObjectItem(ev, "tid")->valuedouble : 0;
        if (!strcmp(str(ev, "cat"), "etdump") && !strcmp(str(ev, "name"), "Convolution (NHWC, F32) IGEMM #1") &&
            ts >= ex[2].ts && ts < ex[2].end && dur > 0.002) { /* the slice that crosses it */
            cut0 = ts + dur / 2;
            cut1 = ts + dur + 0.001;
        }
        if (strcmp(str(ev, "cat"), "executorch") || strcmp(str(ev, "ph"), "X")) continue;
        cJSON *in = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "instruction");
        int64_t index = !strcmp(str(ev, "name"), "executorch.execute") ? -1
                        : !strcmp(str(ev, "name"), "executorch.init")  ? LP_ETDUMP_INIT
                        : in                                           ? (int64_t)in->valuedouble
                                                                       : LP_ETDUMP_OTHER;
        cr_assert_eq(lp_etdump_slice(d, index, (uint32_t)t, NS(ts * 1000), NS(dur * 1000)), 0);
        tid = t;
        fed++;
    }
    cr_assert(cut1 > cut0, "no convolution event in the third run to cross");
    lp_etdump_slice(d, LP_ETDUMP_OTHER, (uint32_t)tid, NS(cut0 * 1000), NS((cut1 - cut0) * 1000));
    cr_assert_eq(lp_etdump_finish(d), 0);
    size_t n = lp_etdump_count(d), moved = 0, in_third = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name;
        uint32_t track;
        uint64_t start, dur;
        lp_etdump_event(d, i, &name, &track, &start, &dur);
        int third = start / 1e3 >= ex[2].ts - 0.0015 && (start + dur) / 1e3 <= ex[2].end + 0.0015;
        in_third += third;
        moved += track == LP_ETDUMP_TRACK((uint32_t)tid);
        cr_expect_eq(track, third ? LP_ETDUMP_TRACK((uint32_t)tid) : (uint32_t)tid, "%s at %.3f: on %#x", name,
                     start / 1e3, track);
    }
    cr_expect_gt(in_third, 10);
    cr_expect_eq(moved, in_third, "%zu events moved, %zu in the third run (%d slices fed)", moved, in_third, fed);
    lp_etdump_free(d);
    lp_reader_close(&r);
}

static void need_python(void) {
    if (access(PTE, R_OK) != 0)
        cr_skip_test("no executorch in the project's environment " LP_VENV " (scripts/install-deps)");
}

/* From Python, unmodified: the method's load, 20 executes, 5 instructions each (3 XNNPACK delegate
 * calls, 2 portable operators), named from the program's plan; the report takes the executes as
 * iterations. */
Test(executorch, python_program_executes_and_operators, .init = setup) {
    need_python();
    const char *argv[] = {ENV_PY, ET_PY, "run", PTE, "20", NULL};
    struct run bare, r, rep;
    run_prog(&bare, dir, NULL, argv);
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    char *trace = strfmt("%s/py.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", trace), NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err, "the program's stderr changed");
    char *err;
    cJSON *sum = check_trace_py(trace, &err);
    cr_assert_not_null(sum, "%s", err);
    cJSON_Delete(sum);
    cJSON *j = load_json(trace);
    cr_assert_not_null(j);
    struct span ex[64];
    int outside = 0, n = executes(j, ex, 64, 1);
    cr_expect_eq(n, 20);
    cr_expect_eq(instructions(j, ex, n, "delegate XnnpackBackend", &outside), 60);
    cr_expect_eq(instructions(j, ex, n, "aten::cumsum.out", &outside), 20);
    cr_expect_eq(instructions(j, ex, n, "aten::_log_softmax.out", &outside), 20);
    cr_expect_eq(instructions(j, ex, n, "instruction", &outside), 0, "instructions left unnamed");
    cr_expect_eq(outside, 0, "%d instruction slices outside every execute", outside);
    int inits = 0; /* the method's load */
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(str(ev, "name"), "executorch.init")) continue;
        inits++;
        cr_expect_str_eq(str(cJSON_GetObjectItem(ev, "args"), "method"), "forward");
        cr_expect_lt(cJSON_GetObjectItem(ev, "ts")->valuedouble, ex[0].ts, "the load after the first execute");
    }
    cr_expect_eq(inits, 1);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(libprof_meta(j), "notes")), 0);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, trace, NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cr_expect(strstr(rep.err, "the executorch.execute slices are the iterations"), "%s", rep.err);
    cr_expect(strstr(rep.out, "aten::cumsum.out"), "%s", rep.out);
    run_free(&rep);
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&r);
}

/* A C++ program on ExecuTorch's runtime with its ETDump profiler on: every event of the
 * Inspector's table counted in the trace and placed — the operator and delegate events inside one
 * of its execute slices, the load's inside the method's executorch.init slice — nested in the
 * thread's own slices, or on the thread's ETDump row for a run where they would cross one; each
 * call on the instruction of its index. */
Test(executorch, cxx_runner_etdump_on_timeline, .init = setup) {
    need_python();
    if (access(PROG("etrun"), X_OK) != 0) cr_skip_test("no ExecuTorch runtime at " LP_VENV "/executorch-sdk");
    char *etd = strfmt("%s/run.etdp", dir), *etd2 = strfmt("%s/bare.etdp", dir), *raw = strfmt("%s/c.lpt", dir),
         *trace = strfmt("%s/c.json", dir), *counts = strfmt("%s/counts.json", dir);
    struct run bare, r, insp, rep, conv;
    run_prog(&bare, dir, NULL, (const char *[]){PROG("etrun"), PTE, "10", etd2, NULL});
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", raw), NULL},
             (const char *[]){PROG("etrun"), PTE, "10", etd, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_prog(&conv, dir, NULL,
             (const char *[]){REPORT, raw, "--chrome", trace, "-q", NULL}); /* the raw trace: by the tool */
    cr_assert_eq(conv.status, 0, "%s", conv.err);
    run_free(&conv);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_null(strstr(r.err, "libprof"), "%s", r.err);
    run_prog(&insp, dir, NULL, (const char *[]){ENV_PY, ET_PY, "inspect", etd, counts, NULL});
    cr_assert_eq(insp.status, 0, "%s", insp.err);
    char *err;
    cJSON *sum = check_trace_py(trace, &err);
    cr_assert_not_null(sum, "%s", err);
    cJSON_Delete(sum);
    cJSON *j = load_json(trace), *theirs = load_json(counts), *row, *ev;
    cr_assert(j && theirs);
    cJSON *et = cJSON_GetObjectItem(libprof_meta(j), "etdump");
    cr_assert_not_null(et, "no ETDump in the trace");
    cr_expect_eq(meta_num(et, "dumps"), 1);
    cr_expect_eq(meta_num(et, "executes"), 10);
    cr_expect_eq(meta_num(et, "unaligned"), 0);
    cr_expect_eq(meta_num(et, "outside_executes"), 0);
    cr_expect_eq(meta_num(et, "loads"), 1);
    /* the Inspector's table, name by name: equal counts, every event placed */
    int names = 0, placed_total = 0;
    cJSON_ArrayForEach(row, theirs) {
        long long mine = -1, placed = -1;
        cJSON *m;
        cJSON_ArrayForEach(m, cJSON_GetObjectItem(et, "events")) {
            if (!strcmp(str(m, "name"), row->string)) {
                mine = (long long)cJSON_GetObjectItem(m, "count")->valuedouble;
                placed = (long long)cJSON_GetObjectItem(m, "placed")->valuedouble;
            }
        }
        cr_expect_eq(mine, (long long)row->valuedouble, "%s: libprof %lld, Inspector %.0f", row->string, mine,
                     row->valuedouble);
        cr_expect_eq(placed, mine, "%s: %lld of %lld placed", row->string, placed, mine);
        names++;
        placed_total += (int)mine;
    }
    cr_expect_gt(names, 8);
    cr_expect_eq(cJSON_GetObjectItem(theirs, "DELEGATE_CALL")->valuedouble, 30);
    cr_expect_eq(cJSON_GetObjectItem(theirs, "Method::init")->valuedouble, 1);
    /* the method's load: one executorch.init slice, the load's events around it by their offsets */
    struct span init[4];
    int ninit = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(str(ev, "name"), "executorch.init") || ninit >= 4) continue;
        double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
        init[ninit++] = (struct span){ts, ts + cJSON_GetObjectItem(ev, "dur")->valuedouble,
                                      (int)cJSON_GetObjectItem(ev, "tid")->valuedouble};
        cr_expect_str_eq(str(cJSON_GetObjectItem(ev, "args"), "method"), "forward");
    }
    cr_assert_eq(ninit, 1);
    /* on the timeline: each event on the ETDump row of the thread of an execute slice, inside it;
     * each call on the executorch.instruction slice of its index */
    struct span ex[64];
    int n = executes(j, ex, 64, 1), onrow = 0, out_of_run = 0, calls = 0, matched = 0, on_thread = 0;
    cr_expect_eq(n, 10);
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(str(ev, "cat"), "etdump") || strcmp(str(ev, "ph"), "X")) continue;
        onrow++;
        int track = (int)cJSON_GetObjectItem(ev, "tid")->valuedouble;
        double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble, end = ts + cJSON_GetObjectItem(ev, "dur")->valuedouble;
        /* on the thread itself (nested in its slices) or on the thread's ETDump row */
        on_thread += (track & 0x40000000) == 0;
        const char *nm = str(ev, "name");
        if (!strcmp(nm, "Method::init")) { /* inside the slice of the same load */
            cr_expect(inside(init, 1, track & ~0x40000000, ts, end), "Method::init at %.3f-%.3f", ts, end);
            continue;
        }
        if (!strcmp(nm, "Program::load_method")) { /* around it: the same work, a little more */
            cr_expect(ts <= init[0].ts + 0.0015 && end >= init[0].ts && end - ts >= (init[0].end - init[0].ts) / 2,
                      "Program::load_method at %.3f-%.3f, init %.3f-%.3f", ts, end, init[0].ts, init[0].end);
            continue;
        }
        if (!inside(ex, n, track & ~0x40000000, ts, end)) out_of_run++;
        const char *name = str(ev, "name");
        if (strcmp(name, "OPERATOR_CALL") && strcmp(name, "DELEGATE_CALL")) continue;
        calls++;
        int instr = (int)cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "instruction")->valuedouble;
        cJSON *in;
        cJSON_ArrayForEach(in, cJSON_GetObjectItem(j, "traceEvents")) {
            cJSON *a = cJSON_GetObjectItem(in, "args"), *k = a ? cJSON_GetObjectItem(a, "instruction") : NULL;
            if (strcmp(str(in, "cat"), "executorch") || !k || (int)k->valuedouble != instr) continue;
            double its = cJSON_GetObjectItem(in, "ts")->valuedouble;
            if (ts >= its - 0.0015 && end <= its + cJSON_GetObjectItem(in, "dur")->valuedouble + 0.0015) {
                matched++;
                break;
            }
        }
    }
    cr_expect_eq(onrow, placed_total);
    /* runs whose events cross none of libprof's slices are nested in the thread's own track (the
     * strict reader above checked the nesting); here every run is one of them */
    long long nested = meta_num(et, "nested_runs");
    cr_expect(nested >= 1 && nested <= 10, "nested runs %lld", nested);
    /* (the load's two events: on the thread too, unless they cross one of its calls there) */
    int load_off = meta_num(et, "nested_loads") ? 0 : 2;
    cr_expect(nested < 10 || on_thread == onrow - load_off, "%d of %d events on the thread", on_thread, onrow);
    cr_expect_eq(out_of_run, 0, "%d ETDump events outside every execute slice", out_of_run);
    cr_expect_eq(calls, 50);
    cr_expect_eq(matched, calls, "%d of %d calls on their instruction's slice", matched, calls);
    fallback_row(raw, j);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, raw, NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cr_expect(strstr(rep.out, "ExecuTorch ETDump: 1 dumps, 10 executes"), "%s", rep.out);
    cr_expect(strstr(rep.out, "native_call_cumsum.out"), "%s", rep.out);
    run_free(&rep);
    cJSON_Delete(j);
    cJSON_Delete(theirs);
    run_free(&bare);
    run_free(&r);
    run_free(&insp);
}

/* A release libprof does not know: one note in the trace, the executes still recorded, the
 * instructions recorded unnamed; the program as without libprof. */
Test(executorch, unknown_release_one_note, .init = setup) {
    need_python();
    if (access(PROG("etrun"), X_OK) != 0) cr_skip_test("no ExecuTorch runtime at " LP_VENV "/executorch-sdk");
    char *cmd = strfmt("mkdir -p %s/executorch && cp -r %s/executorch-sdk/executorch/lib %s/executorch/ && "
                       "printf \"__version__ = '9.9.0+cpu'\\n\" > %s/executorch/version.py",
                       dir, LP_VENV, dir, dir);
    cr_assert_eq(system(cmd), 0);
    char *lib = strfmt("LD_LIBRARY_PATH=%s/executorch/lib", dir), *trace = strfmt("%s/u.json", dir);
    struct run bare, r;
    run_prog(&bare, dir, (const char *[]){lib, NULL}, (const char *[]){PROG("etrun"), PTE, "3", NULL});
    run_prog(&r, dir, (const char *[]){lib, "LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", trace), NULL},
             (const char *[]){PROG("etrun"), PTE, "3", NULL});
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_eq(notes_with(trace, "executorch 9.9.0+cpu is not a release libprof knows"), 1);
    cJSON *j = load_json(trace);
    cr_assert_not_null(j);
    struct span ex[8];
    int outside = 0, n = executes(j, ex, 8, 0);
    cr_expect_eq(n, 3);
    cr_expect_eq(instructions(j, ex, n, "instruction", &outside), 15);
    cr_expect_eq(outside, 0);
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&r);
}
