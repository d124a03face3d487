/* Python programs (issue 15): the interpreter's frames in stacks and on every call, with no
 * change to the program — on every CPython installed here (pyenv 3.7-3.13 shared builds,
 * Debian's stripped static python3.11), numpy's GEMMs with the GIL released, an interpreter
 * embedded through dlopen, CPython's own test suite; LIBPROF_PYTHON=0; an interpreter libprof
 * cannot read. Lines are checked exactly: the scripts are written here, line numbers known. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(python, .timeout = 300);

static char *dir;
static void setup(void) { dir = make_tmpdir(); }

/* Line numbers are the comments' */
static const char frames_py[] = "import sys, threading, time\n"                     /* 1 */
                                "def leaf(n):\n"                                    /* 2 */
                                "    return bytearray(n)\n"                         /* 3 */
                                "class K:\n"                                        /* 4 */
                                "    def go(self):\n"                               /* 5 */
                                "        keep = [leaf(300000) for _ in range(5)]\n" /* 6 */
                                "        with open(sys.argv[1], 'rb') as f:\n"      /* 7 */
                                "            f.read(10)\n"                          /* 8 */
                                "        time.sleep(0.001)\n"                       /* 9 */
                                "        return keep\n"                             /* 10 */
                                "def worker():\n"                                   /* 11 */
                                "    K().go()\n"                                    /* 12 */
                                "t = threading.Thread(target=worker)\n"             /* 13 */
                                "t.start(); t.join()\n"                             /* 14 */
                                "K().go()\n"                                        /* 15 */
                                "print('done')\n";                                  /* 16 */

static char *write_script(const char *name, const char *text) {
    char *path = write_text(dir, name, text);
    cr_assert_not_null(path);
    return path;
}

static int has_frame(cJSON *frames, const char *needle) {
    cJSON *f;
    cJSON_ArrayForEach(f, frames) if (cJSON_IsString(f) && strstr(f->valuestring, needle)) return 1;
    return 0;
}

/* The allocation site of metadata.libprof.alloc_sites with every needle among its frames. */
static cJSON *site_with(cJSON *meta, const char *a, const char *b, const char *c) {
    cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(meta, "alloc_sites")) {
        cJSON *fr = cJSON_GetObjectItem(s, "frames");
        if (has_frame(fr, a) && has_frame(fr, b) && (!c || has_frame(fr, c))) return s;
    }
    return NULL;
}

static long long num(cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

/* 1 when a `name` slice of the main thread (main_thread) or another has args.py starting
 * with `want`. */
static int has_call(cJSON *trace, const char *name, const char *want, int main_thread) {
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name"), *py = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "py");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name) || !cJSON_IsString(py)) continue;
        const char *at = strstr(py->valuestring, want);
        if (!at || (at != py->valuestring && at[-1] != '.')) continue; /* "go" or "K.go" first */
        if (strchr(py->valuestring, '<') && strchr(py->valuestring, '<') < at) continue;
        if ((num(ev, "pid") == num(ev, "tid")) == main_thread) return 1;
    }
    return 0;
}

/* Mixed stacks and call locations on every interpreter: the allocation of line 3 reached from
 * line 6, from the thread's worker (12) and from the module (15), exactly 5 blocks of 300001
 * bytes each way; the file read of line 8 carries "go (FILE:8)" as its innermost frame. */
Test(python, every_interpreter_mixed_stacks_and_call_lines, .init = setup) {
    char py[16][256];
    int n = python_interpreters(py, 16, 7), tested = 0;
    char *script = write_script("frames.py", frames_py);
    for (int i = 0; i < n; i++) {
        const char *argv[] = {py[i], script, script, NULL};
        struct run bare, r;
        run_prog(&bare, dir, NULL, argv);
        if (bare.status != 0) {
            run_free(&bare);
            continue;
        }
        char *out = strfmt("LIBPROF_OUTPUT=%s/f%d.json", dir, i);
        run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=24", NULL}, argv);
        cr_assert_eq(r.status, 0, "%s: %s", py[i], r.err);
        cr_assert_str_eq(r.out, bare.out, "%s", py[i]);
        cr_expect_null(strstr(r.err, "libprof:"), "%s: %s", py[i], r.err);
        cJSON *j = load_json(strfmt("%s/f%d.json", dir, i));
        cr_assert_not_null(j, "%s", py[i]);
        cJSON *meta = libprof_meta(j);
        char *l3 = strfmt("leaf (%s:3)", script), *l6 = strfmt("go (%s:6)", script);
        char *l12 = strfmt("worker (%s:12)", script), *l15 = strfmt("<module> (%s:15)", script);
        cJSON *w = site_with(meta, l3, l6, l12), *m = site_with(meta, l3, l6, l15);
        cr_expect_not_null(w, "%s: no site with %s < %s < %s", py[i], l3, l6, l12);
        cr_expect_not_null(m, "%s: no site with %s < %s < %s", py[i], l3, l6, l15);
        if (w) cr_expect(num(w, "calls") == 5 && num(w, "bytes") == 5 * 300001, "%s: worker site", py[i]);
        if (m) cr_expect(num(m, "calls") == 5 && num(m, "bytes") == 5 * 300001, "%s: module site", py[i]);
        /* the read of line 8: innermost frame first, then its caller */
        char *want_w = strfmt("go (%s:8) < worker (%s:12)", script, script);
        char *want_m = strfmt("go (%s:8) < <module> (%s:15)", script, script);
        cr_expect(has_call(j, "read", want_w, 0), "%s: no read with args.py %s", py[i], want_w);
        cr_expect(has_call(j, "read", want_m, 1), "%s: no read with args.py %s", py[i], want_m);
        tested++;
        cJSON_Delete(j);
        run_free(&r);
        run_free(&bare);
    }
    cr_assert_gt(tested, 0, "no Python interpreter ran");
}

/* The committed layout table is what each interpreter's own headers say. */
Test(python, layouts_match_the_headers) {
    const char *argv[] = {"/bin/sh", LP_SOURCE_DIR "/scripts/py-layouts", "--check", NULL};
    struct run r;
    run_prog(&r, NULL, NULL, argv);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert_not_null(strstr(r.out, "interpreter header sets checked"), "%s", r.out);
    cr_assert_null(strstr(r.out, ": 0 interpreter"), "no headers found: %s", r.out);
    run_free(&r);
}

static const char gemm_py[] = "import numpy as np\n"                         /* 1 */
                              "class Model:\n"                               /* 2 */
                              "    def matmuls(self, a, b):\n"               /* 3 */
                              "        for _ in range(30):\n"                /* 4 */
                              "            r = np.matmul(a, b)\n"            /* 5 */
                              "        return r\n"                           /* 6 */
                              "a = np.ones((256, 256), dtype=np.float32)\n"  /* 7 */
                              "print(float(Model().matmuls(a, a)[0, 0]))\n"; /* 8 */

/* numpy releases the GIL around its GEMM: each of the 30 sgemm slices still carries the line
 * of its `@`; the array's site shows its line; the by-line table (report, CSV, metadata)
 * charges the GEMMs to that line. */
Test(python, numpy_gemms_carry_their_python_line, .init = setup) {
    char *script = write_script("gemm.py", gemm_py);
    const char *argv[] = {"/usr/bin/python3", script, NULL};
    struct run bare, r, rep;
    run_prog(&bare, dir, NULL, argv);
    if (bare.status != 0) cr_skip_test("numpy is not installed: %s", bare.err);
    char *out = strfmt("LIBPROF_OUTPUT=%s/g.json", dir), *csv = strfmt("LIBPROF_CSV=%s/g.csv", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, csv, NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cJSON *j = load_json(strfmt("%s/g.json", dir)), *ev;
    cr_assert_not_null(j);
    char *line5 = strfmt("Model.matmuls (%s:5)", script);
    int gemms = 0, located = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, "sgemm")) continue;
        gemms++;
        cJSON *py = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "py");
        if (cJSON_IsString(py) && !strcmp(py->valuestring, line5)) located++;
    }
    cr_expect_eq(gemms, 30);
    cr_expect_eq(located, 30, "args.py of the GEMMs: %d of %d are %s", located, gemms, line5);
    cJSON *l, *found = NULL;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(libprof_meta(j), "python_lines")) {
        cJSON *name = cJSON_GetObjectItem(l, "line");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, line5)) found = l;
    }
    cr_assert_not_null(found, "metadata.libprof.python_lines has no %s", line5);
    cr_expect_eq(num(found, "calls"), 30);
    cr_expect_gt(num(cJSON_GetObjectItem(found, "families"), "blas"), 0);
    size_t len;
    char *text = read_file(strfmt("%s/g.csv", dir), &len);
    cr_assert_not_null(text);
    char *row = strfmt("%s,python_line,30,", line5);
    cr_expect_not_null(strstr(text, row), "CSV has no %s", row);
    /* the report's table, from the raw trace */
    char *lpt = strfmt("LIBPROF_OUTPUT=%s/g.lpt", dir);
    run_free(&r);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, lpt, "LIBPROF_STACKS=32", NULL}, argv);
    const char *rargv[] = {REPORT, strfmt("%s/g.lpt", dir), NULL};
    run_prog(&rep, dir, NULL, rargv);
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    /* the array of line 7 (256 x 256 float32), made in numpy's own Python code (np.ones), at its
     * line in the sites table: "... < ones (.../numeric.py:N) < <module> (gemm.py:7)" */
    char *line7 = strfmt("< <module> (%s:7)", script);
    const char *sites = strstr(rep.out, "allocation sites by bytes allocated");
    const char *hit = sites ? strstr(sites, line7) : NULL;
    cr_expect(hit && strstr(sites, "allocation sites by calls") > hit, "no site row ends with %s:\n%s", line7, rep.out);
    const char *bol = hit;
    while (hit && bol > sites && bol[-1] != '\n') bol--;
    cr_expect(hit && strstr(bol, "ones (") && strstr(bol, "ones (") < hit, "the row: %.300s", bol ? bol : "");
    const char *t = strstr(rep.out, "by Python line, time in runtime calls");
    cr_assert_not_null(t, "%s", rep.out);
    const char *first = strchr(strchr(t, '\n') + 1, '\n') + 1; /* the first row, after the heading */
    cr_expect(!strncmp(first, "          30", 12) && strstr(first, line5) < strchr(first, '\n') && strstr(first, line5),
              "first row: %.200s", first);
    /* and the HTML page shows the table */
    const char *hargv[] = {REPORT, strfmt("%s/g.lpt", dir), "--html", strfmt("%s/g.html", dir), NULL};
    run_free(&rep);
    run_prog(&rep, dir, NULL, hargv);
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    char *html = read_file(strfmt("%s/g.html", dir), &len);
    cr_assert_not_null(html);
    cr_expect_not_null(strstr(html, "by Python line"));
    cr_expect_not_null(strstr(html, line5));
    cJSON_Delete(j);
    run_free(&rep);
    run_free(&r);
    run_free(&bare);
}

/* LIBPROF_PYTHON=0: native stacks only, no Python location anywhere. */
Test(python, python_0_turns_it_off, .init = setup) {
    char *script = write_script("frames.py", frames_py);
    const char *argv[] = {"/usr/bin/python3", script, script, NULL};
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/o.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=24", "LIBPROF_PYTHON=0", NULL},
             argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    size_t len;
    char *text = read_file(strfmt("%s/o.json", dir), &len);
    cr_assert_not_null(text);
    cr_expect_null(strstr(text, "frames.py:"), "a Python frame was recorded");
    cr_expect_null(strstr(text, "\"py\":"), "a call carries args.py");
    cr_expect_not_null(strstr(text, "\"frames\":["), "no native stacks either");
    run_free(&r);
}

/* An interpreter loaded by dlopen with local scope after start-up (an embedding application):
 * found after that dlopen; the flame graph shows its lines too. */
Test(python, interpreter_embedded_through_dlopen, .init = setup) {
    glob_t g;
    if (glob("/root/.pyenv/versions/3.1[0-9]*/lib/libpython3.*.so.1.0", 0, NULL, &g) != 0)
        cr_skip_test("no shared libpython here");
    const char *lib = g.gl_pathv[g.gl_pathc - 1];
    char *script = write_script("frames.py", frames_py);
    const char *argv[] = {PROG("pyembed"), lib, script, NULL};
    char *home = strfmt("PYTHONHOME=%.*s", (int)(strstr(lib, "/lib/libpython") - lib), lib);
    struct run bare, r;
    run_prog(&bare, dir, (const char *[]){home, NULL}, argv);
    cr_assert_eq(bare.status, 0, "%s%s", bare.out, bare.err);
    char *out = strfmt("LIBPROF_OUTPUT=%s/e.json", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, home, out, "LIBPROF_STACKS=24", "LIBPROF_FLAMEGRAPH=1", NULL},
             argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_assert_not_null(strstr(r.out, "embedded ok"));
    size_t len;
    char *folded = read_file(strfmt("%s/e.alloc.folded", dir), &len);
    cr_assert_not_null(folded);
    cr_expect_not_null(strstr(folded, strfmt("leaf (%s:3)", script)), "no Python frame in the flame graph");
    globfree(&g);
    run_free(&r);
    run_free(&bare);
}

/* An interpreter libprof has no layout for: one note in the trace, and the program runs as without
 * libprof (nothing on its stderr). */
Test(python, unsupported_interpreter_says_so_once, .init = setup) {
    const char *py2 = "/root/.pyenv/versions/2.7.18/bin/python2.7";
    if (access(py2, X_OK) != 0) cr_skip_test("no Python 2.7 here");
    const char *argv[] = {py2, "-c", "x = [bytearray(1000) for _ in range(100)]; print(len(x))", NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    char *out = strfmt("LIBPROF_OUTPUT=%s/u.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=8", NULL}, argv);
    cr_assert_eq(r.status, bare.status);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err);
    cr_expect_eq(notes_with(strfmt("%s/u.json", dir), "Python 2.7 is not one libprof can read"), 1);
    run_free(&r);
    run_free(&bare);
}

/* CPython's own tests of threads, subprocesses (fork, exec, children dying by signals, every
 * descriptor of a child listed), generators, coroutines, profiling hooks and exceptions pass with
 * Python frames read on every allocation (LIBPROF_STACKS); test_threading and test_subprocess
 * also with the Python line read on every call (the default). */
static int trace_has_test_lines(const char *path, int stacks) {
    cJSON *j = load_json(path);
    if (!j) return 0;
    int found = 0;
    if (stacks) {
        found = site_with(libprof_meta(j), "(/usr/lib/python3.11/test/", ".py:", NULL) != NULL;
    } else {
        cJSON *l;
        cJSON_ArrayForEach(l, cJSON_GetObjectItem(libprof_meta(j), "python_lines")) {
            cJSON *name = cJSON_GetObjectItem(l, "line");
            found |= cJSON_IsString(name) && strstr(name->valuestring, "(/usr/lib/python3.11/test/") != NULL;
        }
    }
    cJSON_Delete(j);
    return found;
}

/* The modules run as users run them, -j0: a worker process per test (each its own trace, NAME.PID.json). */
static void cpython_tests(const char *const *modules, const char *stacks) {
    const char *argv[16] = {"/usr/bin/python3", "-m", "test", "-j0"};
    int n = 4;
    for (; *modules && n < 15; modules++) argv[n++] = *modules;
    argv[n] = NULL;
    struct run r;
    const char *stem = stacks ? "ss" : "s";
    char *out = strfmt("LIBPROF_OUTPUT=%s/%s.json", dir, stem);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, stacks ? stacks : "LIBPROF_STACKS=0", NULL}, argv);
    if (strstr(r.out, "No module named test") || strstr(r.err, "No module named test"))
        cr_skip_test("CPython's test suite is not installed");
    cr_assert_eq(r.status, 0, "%s\n%s", r.out + (r.out_len > 3000 ? r.out_len - 3000 : 0), r.err);
    cr_expect_not_null(strstr(r.out, "Tests result: SUCCESS"));
    int nt = 0, found = 0;
    char **traces = child_traces(dir, stem, &nt);
    for (int i = 0; i < nt && !found; i++) found = trace_has_test_lines(traces[i], stacks != NULL);
    cr_expect(found, "no %s in the test modules, in %d traces", stacks ? "allocation site" : "call charged to a line",
              nt);
    run_free(&r);
}

/* (test_threading and test_subprocess run with 16-frame stacks, and CPU sampling besides, in
 * coexist::cpython_suites_pass_sampled: here the suites of Python's own frames) */
Test(python, cpython_test_suite_with_stacks, .init = setup, .timeout = 600) {
    cpython_tests((const char *[]){"test_generators", "test_coroutines", "test_sys_setprofile", "test_exceptions",
                                   "test_contextlib", NULL},
                  "LIBPROF_STACKS=16");
}

Test(python, cpython_test_suite_with_call_lines, .init = setup, .timeout = 600) {
    cpython_tests((const char *[]){"test_threading", "test_subprocess", NULL}, NULL);
}

static const char calls_py[] = "import threading\n"                            /* 1 */
                               "def fact(n):\n"                                /* 2 */
                               "    return 1 if n <= 1 else n * fact(n - 1)\n" /* 3 */
                               "def boom():\n"                                 /* 4 */
                               "    raise ValueError('x')\n"                   /* 5 */
                               "def work():\n"                                 /* 6 */
                               "    for _ in range(3):\n"                      /* 7 */
                               "        try:\n"                                /* 8 */
                               "            boom()\n"                          /* 9 */
                               "        except ValueError:\n"                  /* 10 */
                               "            pass\n"                            /* 11 */
                               "    return fact(5)\n"                          /* 12 */
                               "import os\n"                                   /* 13 */
                               "os.stat('.')\n"                                /* 14 */
                               "print(work())\n"                               /* 15 */
                               "t = threading.Thread(target=work)\n"           /* 16 */
                               "t.start(); t.join()\n";                        /* 17 */

struct slice_count {
    int main, other;
};

/* X slices named `name` (cat python) on the main thread and on others. */
static struct slice_count count_slices(cJSON *trace, const char *name) {
    struct slice_count c = {0, 0};
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name"), *cat = cJSON_GetObjectItem(ev, "cat");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name) || !cJSON_IsString(cat) ||
            strcmp(cat->valuestring, "python"))
            continue;
        if (num(ev, "pid") == num(ev, "tid"))
            c.main++;
        else
            c.other++;
    }
    return c;
}

/* LIBPROF_PYTHON_CALLS on every interpreter: recursion (5 nested fact), functions left by an
 * exception (3 boom), each with the line of its definition; a thread started later is covered
 * (3.9+: from pthread_create's hook or PyEval_SetProfileAllThreads). */
Test(python, call_slices_every_interpreter, .init = setup) {
    char py[16][256];
    int n = python_interpreters(py, 16, 7), tested = 0;
    char *script = write_script("calls.py", calls_py);
    for (int i = 0; i < n; i++) {
        const char *argv[] = {py[i], script, NULL};
        struct run bare, r;
        run_prog(&bare, dir, NULL, argv);
        if (bare.status != 0) {
            run_free(&bare);
            continue;
        }
        char *out = strfmt("LIBPROF_OUTPUT=%s/c%d.json", dir, i);
        run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_PYTHON_CALLS=^(fact|boom|work)$", NULL},
                 argv);
        cr_assert_eq(r.status, 0, "%s: %s", py[i], r.err);
        cr_assert_str_eq(r.out, bare.out, "%s", py[i]);
        char *path = strfmt("%s/c%d.json", dir, i);
        cr_assert(python_json_ok(path), "%s: not strict JSON", py[i]);
        cJSON *j = load_json(path);
        struct slice_count f = count_slices(j, "fact"), b = count_slices(j, "boom"), w = count_slices(j, "work");
        cr_expect_eq(f.main, 5, "%s: fact on the main thread: %d", py[i], f.main);
        cr_expect_eq(b.main, 3, "%s: boom on the main thread: %d", py[i], b.main);
        cr_expect_eq(w.main, 1, "%s: work on the main thread: %d", py[i], w.main);
        int minor = strstr(py[i], "/versions/3.") ? atoi(strstr(py[i], "/versions/3.") + 12) : 11;
        if (minor >= 9) {
            cr_expect(f.other == 5 && b.other == 3 && w.other == 1, "%s: the thread's slices: fact %d boom %d work %d",
                      py[i], f.other, b.other, w.other);
        }
        /* the definition's place */
        cJSON *ev;
        int placed = 0;
        cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
            cJSON *nm = cJSON_GetObjectItem(ev, "name"), *a = cJSON_GetObjectItem(ev, "args");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "boom") && num(a, "line") == 4 &&
                cJSON_IsString(cJSON_GetObjectItem(a, "file")) &&
                !strcmp(cJSON_GetObjectItem(a, "file")->valuestring, script))
                placed++;
        }
        cr_expect_eq(placed, b.main + b.other, "%s: boom's file and line", py[i]);
        tested++;
        cJSON_Delete(j);
        run_free(&r);
        run_free(&bare);
    }
    cr_assert_gt(tested, 0);
}

/* `forward$` on an unmodified PyTorch model: every layer a slice, the GEMMs inside their
 * Linear layer, --iterations on the outer module. */
Test(python, pytorch_layers_as_slices, .init = setup, .timeout = 300) {
    const char *model = "import torch\n"
                        "torch.manual_seed(0); torch.set_num_threads(2)\n"
                        "class Block(torch.nn.Module):\n"
                        "    def __init__(self):\n"
                        "        super().__init__()\n"
                        "        self.a = torch.nn.Linear(256, 256)\n"
                        "        self.b = torch.nn.Linear(256, 256)\n"
                        "    def forward(self, x):\n"
                        "        return self.b(torch.relu(self.a(x)))\n"
                        "m = torch.nn.Sequential(Block(), Block(), torch.nn.Linear(256, 10))\n"
                        "x = torch.randn(64, 256)\n"
                        "with torch.no_grad():\n"
                        "    for _ in range(5): y = m(x)\n"
                        "print(tuple(y.shape))\n";
    char *script = write_script("model.py", model);
    const char *argv[] = {"/usr/bin/python3", script, NULL};
    struct run bare, r, rep;
    run_prog(&bare, dir, NULL, argv);
    if (bare.status != 0) cr_skip_test("python3-torch is not installed: %s", bare.err);
    char *out = strfmt("LIBPROF_OUTPUT=%s/m.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_PYTHON_CALLS=forward$", NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    char *path = strfmt("%s/m.json", dir);
    char *err;
    cJSON *sum = check_trace_py(path, &err);
    cr_assert_not_null(sum, "%s", err);
    cJSON *j = load_json(path);
    cr_expect_eq(count_slices(j, "Sequential.forward").main, 5);
    cr_expect_eq(count_slices(j, "Block.forward").main, 10);
    cr_expect_eq(count_slices(j, "Linear.forward").main, 25);
    /* each GEMM inside a Linear.forward slice of its thread */
    cJSON *ev, *lin[64];
    int nl = 0, gemms = 0, inside = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "Linear.forward") && nl < 64) lin[nl++] = ev;
    }
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, "sgemm")) continue;
        gemms++;
        double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble, end = ts + cJSON_GetObjectItem(ev, "dur")->valuedouble;
        for (int k = 0; k < nl; k++) {
            double a = cJSON_GetObjectItem(lin[k], "ts")->valuedouble,
                   b = a + cJSON_GetObjectItem(lin[k], "dur")->valuedouble;
            if (num(lin[k], "tid") == num(ev, "tid") && a <= ts && end <= b) {
                inside++;
                break;
            }
        }
    }
    cr_expect_geq(gemms, 25, "GEMMs: %d", gemms);
    cr_expect_eq(inside, gemms, "%d of %d GEMMs inside a Linear.forward", inside, gemms);
    /* per-layer memory: each Linear(256) output is 64 x 256 float32 = 65536 bytes, a Linear(10)
     * output 2560; a Block adds its ReLU's 65536 */
    long long linb = -1, blk = -1, seq = -1, lin_calls = -1;
    cJSON *pc;
    cJSON_ArrayForEach(pc, cJSON_GetObjectItem(libprof_meta(j), "python_calls")) {
        const char *nm = cJSON_GetObjectItem(pc, "name")->valuestring;
        if (!strcmp(nm, "Linear.forward")) {
            linb = num(pc, "alloc_bytes");
            lin_calls = num(pc, "calls");
        }
        if (!strcmp(nm, "Block.forward")) blk = num(pc, "alloc_bytes");
        if (!strcmp(nm, "Sequential.forward")) seq = num(pc, "alloc_bytes");
    }
    long long want_lin = 20 * 65536 + 5 * 2560, want_blk = 20 * 65536 + 10 * 65536, want_seq = want_blk + 5 * 2560;
    cr_expect_eq(lin_calls, 25);
    cr_expect(linb >= want_lin && linb < want_lin * 6 / 5, "Linear.forward allocated %lld (outputs: %lld)", linb,
              want_lin);
    cr_expect(blk >= want_blk && blk < want_blk * 6 / 5, "Block.forward allocated %lld (outputs: %lld)", blk, want_blk);
    cr_expect(seq >= want_seq && seq < want_seq * 6 / 5, "Sequential.forward allocated %lld (%lld)", seq, want_seq);
    const char *rargv[] = {REPORT, path, "--iterations", "^Sequential\\.forward$", NULL};
    run_prog(&rep, dir, NULL, rargv);
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cr_expect_not_null(strstr(rep.out, "iterations /^Sequential\\.forward$/: 5"), "%s", rep.out);
    cJSON_Delete(sum);
    cJSON_Delete(j);
    run_free(&rep);
    run_free(&r);
    run_free(&bare);
}

/* A bad expression: one line, the program unaffected, the rest of the trace as usual. */
Test(python, bad_call_regex_says_so, .init = setup) {
    char *script = write_script("calls.py", calls_py);
    const char *argv[] = {"/usr/bin/python3", script, NULL};
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/b.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_PYTHON_CALLS=(unclosed", NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(count_lines_with(r.err, "libprof: LIBPROF_PYTHON_CALLS=\"(unclosed\" is not a regular expression"), 1,
                 "%s", r.err);
    cJSON *j = load_json(strfmt("%s/b.json", dir));
    cr_assert_not_null(j);
    cr_expect_eq(count_slices(j, "fact").main, 0);
    cJSON_Delete(j);
    run_free(&r);
}

/* Objects of up to 512 bytes come from CPython's arenas and never reach malloc;
 * LIBPROF_PYTHON_MALLOC=1 makes every one visible (PYTHONMALLOC=malloc), with its line. */
Test(python, python_malloc_shows_small_objects, .init = setup) {
    char *script = write_script("small.py", "x = [(i, str(i)) for i in range(100000)]\n" /* 1 */
                                            "print(len(x))\n");                          /* 2 */
    const char *argv[] = {"/usr/bin/python3", script, NULL};
    long long mallocs[2];
    for (int m = 0; m < 2; m++) {
        struct run r;
        char *out = strfmt("LIBPROF_OUTPUT=%s/s%d.json", dir, m), *pm = strfmt("LIBPROF_PYTHON_MALLOC=%d", m);
        run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, pm, "LIBPROF_STACKS=8", NULL}, argv);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_str_eq(r.out, "100000\n");
        cJSON *j = load_json(strfmt("%s/s%d.json", dir, m));
        cr_assert_not_null(j);
        mallocs[m] = meta_fn(libprof_meta(j), "malloc", "count");
        if (m == 1) /* the tuples and strings of line 1 (its comprehension: 3.11's own frame) */
            cr_expect_not_null(site_with(libprof_meta(j), strfmt("%s:1)", script), "<listcomp>", NULL),
                               "no site at line 1");
        cJSON_Delete(j);
        run_free(&r);
    }
    cr_expect_lt(mallocs[0], 20000, "without: %lld mallocs", mallocs[0]);
    cr_expect_gt(mallocs[1], 200000, "with LIBPROF_PYTHON_MALLOC=1: %lld mallocs", mallocs[1]);
}

/* ---- Python frames whatever the native depth ------------------------------------------------ */

/* A program of many shapes of Python code, each line allocating one block of its own size (so a
 * block's size tells its line): plain calls, recursion 30 deep, a comprehension, a generator, a
 * lambda called back from C (sorted's key), a class body, a decorator, a thread, a callback from a
 * C function (map), an exception handler, two lines of one frame one after the other (only the
 * innermost frame's instruction moves between them), and one function called from two lines of
 * another (the same frames at the same addresses, only the caller's instruction moved).
 * `python3 tm.py trace` runs it under tracemalloc (CPython's own per-line tracer) and prints each
 * block's size, its innermost line and its caller's (0 where that is not in the script). */
static const char tm_py[] =
    "import sys, threading, tracemalloc\n"                                                        /* 1 */
    "if sys.argv[1] == 'trace': tracemalloc.start(2)\n"                                           /* 2 */
    "keep = []\n"                                                                                 /* 3 */
    "def big(k): keep.append(bytearray(100000 + 64 * k))\n"                                       /* 4 */
    "def rec(n):\n"                                                                               /* 5 */
    "    if n == 0: keep.append(bytearray(100000 + 64 * 5)); return\n"                            /* 6 */
    "    rec(n - 1)\n"                                                                            /* 7 */
    "def gen():\n"                                                                                /* 8 */
    "    for i in range(3): yield bytearray(100000 + 64 * (8 + i))\n"                             /* 9 */
    "class K:\n"                                                                                  /* 10 */
    "    data = bytearray(100000 + 64 * 12)\n"                                                    /* 11 */
    "def deco(f):\n"                                                                              /* 12 */
    "    keep.append(bytearray(100000 + 64 * 13)); return f\n"                                    /* 13 */
    "@deco\n"                                                                                     /* 14 */
    "def g(): pass\n"                                                                             /* 15 */
    "def work():\n"                                                                               /* 16 */
    "    big(1)\n"                                                                                /* 17 */
    "    rec(30)\n"                                                                               /* 18 */
    "    keep.extend([bytearray(100000 + 64 * (20 + i)) for i in range(2)])\n"                    /* 19 */
    "    keep.extend(gen())\n"                                                                    /* 20 */
    "    sorted([1, 2], key=lambda x: keep.append(bytearray(100000 + 64 * (30 + x))) or x)\n"     /* 21 */
    "    keep.append(K.data)\n"                                                                   /* 22 */
    "    list(map(lambda x: keep.append(bytearray(100000 + 64 * (40 + x))), [1]))\n"              /* 23 */
    "    try:\n"                                                                                  /* 24 */
    "        raise ValueError(bytearray(100000 + 64 * 50))\n"                                     /* 25 */
    "    except ValueError as e:\n"                                                               /* 26 */
    "        keep.append(e.args[0])\n"                                                            /* 27 */
    "t = threading.Thread(target=lambda: keep.append(bytearray(100000 + 64 * 60)))\n"             /* 28 */
    "def seq():\n"                                                                                /* 29 */
    "    a = bytearray(100000 + 64 * 70)\n"                                                       /* 30 */
    "    b = bytearray(100000 + 64 * 71)\n"                                                       /* 31 */
    "    keep.extend((a, b))\n"                                                                   /* 32 */
    "def leaf(k): keep.append(bytearray(100000 + 64 * k))\n"                                      /* 33 */
    "def twice():\n"                                                                              /* 34 */
    "    leaf(74)\n"                                                                              /* 35 */
    "    leaf(75)\n"                                                                              /* 36 */
    "work(); seq(); twice(); t.start(); t.join()\n"                                               /* 37 */
    "if sys.argv[1] == 'trace':\n"                                                                /* 38 */
    "    for tr in tracemalloc.take_snapshot().traces:\n"                                         /* 39 */
    "        f, up = tr.traceback[-1], tr.traceback[-2] if len(tr.traceback) > 1 else None\n"     /* 40 */
    "        if 100000 <= tr.size < 105000 and f.filename == __file__:\n"                         /* 41 */
    "            print(tr.size, f.lineno, up.lineno if up and up.filename == __file__ else 0)\n"; /* 42 */

/* The line of folded text at *next ("a;b;leaf BYTES", root first): its frames from *frames up to
 * *end (the space before the count); its count returned, *next moved past it. */
static long long folded_next(char **next, char **frames, char **end) {
    char *l = *next, *eol = strchr(l, '\n'), *sp = eol ? eol : l + strlen(l);
    while (sp > l && *sp != ' ') sp--;
    *frames = l;
    *end = sp;
    *next = eol ? eol + 1 : sp + strlen(sp);
    return atoll(sp + 1);
}

/* Each block's line as tracemalloc sees it, against the innermost Python frame of its site in
 * libprof's trace — every interpreter, with native stacks too shallow to reach the interpreter
 * (2 frames: the Python part follows a "…") and deep enough (64). */
Test(python, lines_match_tracemalloc_every_interpreter, .init = setup) {
    char py[16][256];
    int n = python_interpreters(py, 16, 7), compared = 0, tested = 0;
    char *script = write_script("tm.py", tm_py);
    for (int i = 0; i < n; i++) {
        struct run ref;
        run_prog(&ref, dir, NULL, (const char *[]){py[i], script, "trace", NULL});
        if (ref.status != 0) {
            run_free(&ref);
            continue;
        }
        const char *depths[] = {"LIBPROF_STACKS=2", "LIBPROF_STACKS=64"};
        for (int d = 0; d < 2; d++) {
            struct run r, rep;
            char *lpt = strfmt("%s/tm%d_%d.lpt", dir, i, d), *folded = strfmt("%s/tm%d_%d.folded", dir, i, d);
            run_prog(&r, dir,
                     (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), depths[d], NULL},
                     (const char *[]){py[i], script, "run", NULL});
            cr_assert_eq(r.status, 0, "%s: %s", py[i], r.err);
            run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--folded", folded, "-q", NULL});
            cr_assert_eq(rep.status, 0, "%s", rep.err);
            char *text = read_file(folded, NULL); /* every stack, root first: "a;b;leaf BYTES" */
            cr_assert_not_null(text);
            /* every reference block: a stack of at least its size whose innermost Python frame is its line */
            char *p = ref.out;
            int lines = 0;
            long size, line, up;
            while (sscanf(p, "%ld %ld %ld", &size, &line, &up) == 3) {
                lines++;
                char *want = strfmt("(%s:%ld)", script, line), *want_up = up ? strfmt("(%s:%ld)", script, up) : NULL;
                int found = 0;
                for (char *next = text; *next && !found;) {
                    char *l, *sp;
                    long long bytes = folded_next(&next, &l, &sp);
                    char *inner = NULL; /* the last frame with ".py:" before the count */
                    for (char *q = l; q < sp; q++)
                        if (!strncmp(q, ".py:", 4)) inner = q;
                    if (inner && bytes >= size) {
                        char *start = inner;
                        while (start > l && start[-1] != ';') start--;
                        char *end = strchr(inner, ';');
                        if (!end || end > sp) end = sp;
                        found = memmem(start, (size_t)(end - start), want, strlen(want)) != NULL;
                        /* and its caller's line, outside it (root first) */
                        if (found && want_up) found = memmem(l, (size_t)(start - l), want_up, strlen(want_up)) != NULL;
                    }
                }
                cr_expect(found, "%s %s: the block of %ld bytes has no stack at line %ld called from line %ld", py[i],
                          depths[d], size, line, up);
                compared += found;
                p = strchr(p, '\n');
                if (!p) break;
                p++;
            }
            cr_expect_geq(lines, 16, "%s: tracemalloc saw %d blocks: %s", py[i], lines, ref.out);
            free(text);
            run_free(&rep);
            run_free(&r);
        }
        tested++;
        run_free(&ref);
    }
    cr_assert_gt(tested, 0, "no interpreter ran");
    fprintf(stderr, "python::lines_match_tracemalloc: %d blocks matched on %d interpreters\n", compared, tested);
}

/* Four threads allocating at once, the interpreter switching between them every few
 * microseconds, and a fifth whose allocations are made without the GIL (opendir's, in
 * os.listdir): each thread's blocks (a size of its own, at a line of its own) are charged to its
 * own line, all of them and nothing else — the thread's own frames, whatever thread holds the GIL
 * or was captured last (3.11 reads the state holding the GIL where it is this thread's). */
static const char threads_py[] = "import os, sys, threading\n"                      /* 1 */
                                 "sys.setswitchinterval(1e-5)\n"                    /* 2 */
                                 "def w0():\n"                                      /* 3 */
                                 "    for i in range(3000): b = bytearray(70000)\n" /* 4 */
                                 "def w1():\n"                                      /* 5 */
                                 "    for i in range(3000): b = bytearray(71000)\n" /* 6 */
                                 "def w2():\n"                                      /* 7 */
                                 "    for i in range(3000): b = bytearray(72000)\n" /* 8 */
                                 "def w3():\n"                                      /* 9 */
                                 "    for i in range(3000): b = bytearray(73000)\n" /* 10 */
                                 "def w4():\n"                                      /* 11 */
                                 "    for i in range(3000): os.listdir('/')\n"      /* 12 */
                                 "fs = (w0, w1, w2, w3, w4)\n"                      /* 13 */
                                 "ts = [threading.Thread(target=f) for f in fs]\n"  /* 14 */
                                 "for t in ts: t.start()\n"                         /* 15 */
                                 "for t in ts: t.join()\n"                          /* 16 */
                                 "print('ok')\n";                                   /* 17 */

Test(python, threads_allocate_under_their_own_lines_every_interpreter, .init = setup) {
    char py[16][256];
    int n = python_interpreters(py, 16, 7), tested = 0;
    char *script = write_script("thr.py", threads_py);
    for (int i = 0; i < n; i++) {
        struct run r, rep;
        char *lpt = strfmt("%s/thr%d.lpt", dir, i), *folded = strfmt("%s/thr%d.folded", dir, i);
        run_prog(&r, dir,
                 (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=8", NULL},
                 (const char *[]){py[i], script, NULL});
        cr_assert_eq(r.status, 0, "%s: %s", py[i], r.err);
        cr_assert_str_eq(r.out, "ok\n", "%s", py[i]);
        run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--folded", folded, "-q", NULL});
        cr_assert_eq(rep.status, 0, "%s", rep.err);
        char *text = read_file(folded, NULL); /* "a;b;leaf BYTES", root first */
        cr_assert_not_null(text);
        long long bytes[5] = {0};
        for (char *next = text; *next;) {
            char *l, *sp;
            long long n_bytes = folded_next(&next, &l, &sp);
            char *inner = NULL; /* the innermost Python frame: the last "(script:" before the count */
            for (char *q = l; q < sp; q++)
                if (!strncmp(q, script, strlen(script)) && q > l && q[-1] == '(') inner = q + strlen(script);
            int line = inner && *inner == ':' ? atoi(inner + 1) : 0;
            if (line >= 4 && line <= 12 && line % 2 == 0) bytes[(line - 4) / 2] += n_bytes;
        }
        for (int k = 0; k < 4; k++) /* (bytearray(n) asks for n + 1 bytes) */
            cr_expect_eq(bytes[k], 3000LL * (70001 + 1000 * k), "%s: line %d has %lld bytes, not 3000 blocks of %d",
                         py[i], 4 + 2 * k, bytes[k], 70001 + 1000 * k);
        cr_expect_gt(bytes[4], 3000LL * 32768, "%s: os.listdir's line has %lld bytes", py[i], bytes[4]);
        free(text);
        run_free(&rep);
        run_free(&r);
        tested++;
    }
    cr_assert_gt(tested, 0, "no interpreter ran");
}

/* The stacks' Python parts as the thread's caches make them (the kept chain, the frames joined
 * after a call or a return, the innermost frame's memo, the pairs) are the frames walked afresh
 * (LIBPROF_STACK_CACHE_OFF=1): the same distinct stacks, on every interpreter, of a program whose
 * allocations come from C called back into Python (sorted's key, json's default, map, reduce),
 * recursion, and a loop's body allocating at several places. */
static const char callbacks_py[] = "import gc; gc.disable()\n"
                                   "import json, functools\n"
                                   "class P:\n"
                                   "    def __init__(s, v): s.v = v\n"
                                   "def enc(o):\n"
                                   "    return {'v': [o.v] * 3, 's': str(o.v)}\n"
                                   "def rec(n):\n"
                                   "    if n == 0:\n"
                                   "        return json.dumps([P(i) for i in range(30)], default=enc)\n"
                                   "    return rec(n - 1) + str(n)\n"
                                   "def key(x):\n"
                                   "    return (str(x), [x])\n"
                                   "for r in range(150):\n"
                                   "    s = sorted(range(50), key=key)\n"
                                   "    t = rec(r % 7)\n"
                                   "    m = list(map(lambda x: {'x': x}, range(40)))\n"
                                   "    f = functools.reduce(lambda a, b: a + [b], range(20), [])\n"
                                   "print(len(t))\n";

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The distinct stacks of a folded file that pass through `script` (the program's own: the
 * interpreter's start-up may take other paths from run to run, as addresses fall), counts cut,
 * sorted; their number in *n (caller frees the array and its strings). */
static char **stack_keys(const char *folded, const char *script, size_t *n) {
    char *text = read_file(folded, NULL);
    cr_assert_not_null(text, "%s", folded);
    size_t cap = 1024, k = 0;
    char **lines = malloc(cap * sizeof *lines);
    for (char *next = text; *next;) {
        char *l, *sp;
        folded_next(&next, &l, &sp);
        if (!memmem(l, (size_t)(sp - l), script, strlen(script))) continue;
        if (k == cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[k++] = strndup(l, (size_t)(sp - l));
    }
    qsort(lines, k, sizeof *lines, cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < k; i++) {
        if (u && !strcmp(lines[i], lines[u - 1])) {
            free(lines[i]);
            continue;
        }
        lines[u++] = lines[i];
    }
    free(text);
    *n = u;
    return lines;
}

/* The stacks of one sorted set that the other lacks, whole, at most `max` of them. */
static char *missing_from(char **a, size_t na, char **b, size_t nb, int max) {
    char *out = strdup("");
    int shown = 0;
    for (size_t i = 0, j = 0; i < na && shown < max; i++) {
        while (j < nb && strcmp(b[j], a[i]) < 0) j++;
        if (j < nb && !strcmp(b[j], a[i])) continue;
        char *more = strfmt("%s    %s\n", out, a[i]);
        free(out);
        out = more;
        shown++;
    }
    return out;
}

/* The caches are a shortcut to what a walk of the frames gives: a program run with them and run
 * again with every stack walked afresh (LIBPROF_STACK_CACHE_OFF=1) makes the same distinct
 * stacks. The program does the same thing both times: its collector is off (a collection
 * allocates where the allocation count falls, and the count differs as soon as anything does),
 * and it runs from a directory of its own (the outputs beside it would change what the import
 * system lists there). A difference is printed whole, both ways. */
Test(python, cached_parts_are_the_frames_walked_afresh_every_interpreter, .init = setup) {
    char py[16][256];
    int n = python_interpreters(py, 16, 7), tested = 0;
    char *sdir = strfmt("%s/prog", dir);
    mkdir(sdir, 0755);
    char *script = write_text(sdir, "callbacks.py", callbacks_py);
    cr_assert_not_null(script);
    for (int i = 0; i < n; i++) {
        char **keys[2];
        size_t nkeys[2];
        for (int off = 0; off < 2; off++) {
            struct run r, rep;
            char *lpt = strfmt("%s/cb%d-%d.lpt", dir, i, off), *folded = strfmt("%s/cb%d-%d.folded", dir, i, off);
            run_prog(&r, sdir,
                     (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=16",
                                      "LIBPROF_PYTHON_MALLOC=1", "PYTHONHASHSEED=0", "PYTHONDONTWRITEBYTECODE=1",
                                      off ? "LIBPROF_STACK_CACHE_OFF=1" : "LIBPROF_STACK_CACHE_OFF=0", NULL},
                     (const char *[]){py[i], script, NULL});
            cr_assert_eq(r.status, 0, "%s: %s", py[i], r.err);
            run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--folded", folded, "-q", NULL});
            cr_assert_eq(rep.status, 0, "%s", rep.err);
            keys[off] = stack_keys(folded, script, &nkeys[off]);
            run_free(&rep);
            run_free(&r);
        }
        int callbacks[3] = {0, 0, 0};
        for (size_t k = 0; k < nkeys[0]; k++) {
            callbacks[0] |= strstr(keys[0][k], "enc (") != NULL;
            callbacks[1] |= strstr(keys[0][k], "key (") != NULL;
            callbacks[2] |= strstr(keys[0][k], "rec (") != NULL;
        }
        cr_expect(callbacks[0] && callbacks[1] && callbacks[2], "%s: the callbacks' frames are in the stacks", py[i]);
        char *only_cached = missing_from(keys[0], nkeys[0], keys[1], nkeys[1], 3);
        char *only_fresh = missing_from(keys[1], nkeys[1], keys[0], nkeys[0], 3);
        cr_expect(!*only_cached && !*only_fresh,
                  "%s: the cached stacks differ from the fresh walk's (%zu and %zu distinct)\n"
                  "  only cached:\n%s  only fresh:\n%s",
                  py[i], nkeys[0], nkeys[1], only_cached, only_fresh);
        free(only_cached);
        free(only_fresh);
        for (int off = 0; off < 2; off++) {
            for (size_t k = 0; k < nkeys[off]; k++) free(keys[off][k]);
            free(keys[off]);
        }
        tested++;
    }
    cr_assert_gt(tested, 0, "no interpreter ran");
}

/* CPython runs its C signal handlers on faulthandler's alternate stack (16 KiB, the kernel's
 * frame of the signal in it), and the handler writes the signal's byte to the wakeup descriptor:
 * libprof's hook of that write, with its Python frames, must fit there. It used to take 3 KiB
 * more than the handler does bare (walks kept their frames on the stack); a CPU sample landing in
 * it took the rest, and the heap below faulthandler's stack was overwritten (a CPython test
 * crashed later in its garbage collector). Measured with a preload that marks the stack
 * (tests/progs/altshim.c), on every interpreter: within a KiB of bare. */
static const char wakeup_py[] = "import os, signal\n"
                                "def handler(signum, frame): pass\n"
                                "def test():\n"
                                "    signal.signal(signal.SIGUSR1, handler)\n"
                                "    for i in range(50):\n"
                                "        signal.raise_signal(signal.SIGUSR1)\n"
                                "        signal.raise_signal(signal.SIGALRM)\n"
                                "signal.signal(signal.SIGALRM, handler)\n"
                                "read, write = os.pipe()\n"
                                "os.set_blocking(write, False)\n"
                                "signal.set_wakeup_fd(write)\n"
                                "test()\n"
                                "print(len(os.read(read, 1000)))\n";

Test(python, wakeup_writes_fit_faulthandlers_stack_every_interpreter, .init = setup) {
    char py[16][256];
    int n = python_interpreters(py, 16, 7), tested = 0;
    char *script = write_script("wakeup.py", wakeup_py);
    for (int i = 0; i < n; i++) {
        struct run bare, r;
        const char *argv[] = {py[i], "-X", "faulthandler", script, NULL};
        run_prog(&bare, dir, (const char *[]){"LD_PRELOAD=" PROG("libaltshim.so"), NULL}, argv);
        long used0 = 0, size0 = 0, used = 0, size = 0;
        if (bare.status != 0 || sscanf(bare.err, "altshim: %ld of %ld", &used0, &size0) != 2) {
            run_free(&bare); /* (an interpreter without faulthandler's alternate stack) */
            continue;
        }
        char *out = strfmt("LIBPROF_OUTPUT=%s/w%d.json", dir, i);
        run_prog(&r, dir,
                 (const char *[]){"LD_PRELOAD=" PROG("libaltshim.so") " " PRELOAD, out, "LIBPROF_STACKS=16", NULL},
                 argv);
        cr_assert_eq(r.status, 0, "%s: %s", py[i], r.err);
        cr_expect_str_eq(r.out, bare.out, "%s", py[i]);
        cr_assert_eq(sscanf(r.err, "altshim: %ld of %ld", &used, &size), 2, "%s: %s", py[i], r.err);
        cr_expect_leq(used, used0 + 1024, "%s: %ld bytes of faulthandler's %ld used, %ld bare", py[i], used, size,
                      used0);
        run_free(&r);
        run_free(&bare);
        tested++;
    }
    cr_assert_gt(tested, 0, "no interpreter ran");
}

/* A deep native library between the interpreter and the allocation (json's C encoder under a
 * 60-deep list) with 16 native frames: the 2 MB block's site still names the line that called
 * json.dumps, after a "…" where native frames were left out; --py-lines user charges that line
 * rather than the standard library's. */
Test(python, deep_native_code_keeps_the_calling_line, .init = setup) {
    const char *prog = "import json\n"
                       "def nest(d):\n"
                       "    x = ['y' * 2000000]\n"
                       "    for i in range(d): x = [x]\n"
                       "    return x\n"
                       "v = nest(60)\n"
                       "s = json.dumps(v)\n"
                       "print(len(s))\n";
    char *script = write_script("deep.py", prog);
    struct run r, rep;
    char *lpt = strfmt("%s/d.lpt", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=16", NULL},
             (const char *[]){"/usr/bin/python3", script, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *json = strfmt("%s/d.json", dir);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", json, "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cJSON *j = load_json(json);
    cr_assert_not_null(j);
    char *line7 = strfmt("<module> (%s:7)", script);
    cJSON *s, *hit = NULL;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(libprof_meta(j), "alloc_sites")) {
        if (num(s, "bytes") < 2000000 || num(s, "bytes") > 2100000) continue;
        cJSON *fr = cJSON_GetObjectItem(s, "frames");
        if (has_frame(fr, "dumps (") && has_frame(fr, line7)) hit = s;
    }
    cr_assert_not_null(hit, "no 2 MB site under json.dumps naming %s", line7);
    cr_expect(has_frame(cJSON_GetObjectItem(hit, "frames"), "…"), "the native frames left out are not marked");
    run_free(&rep);
    /* the per-line view: the standard library's line by default, the program's with --py-lines user */
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, NULL});
    const char *t = strstr(rep.out, "by Python line, bytes allocated (the innermost Python frame)");
    cr_assert_not_null(t, "%s", rep.out);
    cr_expect(strstr(t, "encoder.py:") != NULL, "%.600s", t);
    run_free(&rep);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--py-lines", "user", NULL});
    t = strstr(rep.out, "by Python line, bytes allocated (the innermost frame in the program's own files)");
    cr_assert_not_null(t, "%s", rep.out);
    const char *row = strchr(strchr(t, '\n') + 1, '\n') + 1; /* the heaviest line */
    cr_expect(strstr(row, line7) && strstr(row, line7) < strchr(row, '\n'), "heaviest: %.200s", row);
    cJSON_Delete(j);
    run_free(&rep);
    run_free(&r);
}

/* A small PyTorch encoder with 16-frame stacks: libtorch's own frames fill the native part, yet
 * every GEMM and oneDNN slice carries the Python line that ran it. */
Test(python, torch_gemms_keep_their_line_with_stacks, .init = setup, .timeout = 300) {
    const char *prog = "import torch\n"
                       "torch.manual_seed(0); torch.set_num_threads(1)\n"
                       "layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,\n"
                       "                                         batch_first=True)\n"
                       "enc = torch.nn.TransformerEncoder(layer, num_layers=2)\n"
                       "x = torch.randn(4, 16, 64)\n"
                       "with torch.no_grad():\n"
                       "    for i in range(5): y = enc(x)\n"
                       "print(tuple(y.shape))\n";
    char *script = write_script("enc.py", prog);
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){"/usr/bin/python3", script, NULL});
    if (bare.status != 0) cr_skip_test("python3-torch is not installed: %s", bare.err);
    char *json = strfmt("%s/e.json", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", json), "LIBPROF_STACKS=16", NULL},
             (const char *[]){"/usr/bin/python3", script, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cJSON *j = load_json(json), *ev;
    cr_assert_not_null(j);
    char *line8 = strfmt("(%s:8)", script);
    int kernels = 0, located = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *cat = cJSON_GetObjectItem(ev, "cat"), *ts = cJSON_GetObjectItem(ev, "ts");
        if (!cJSON_IsString(cat) || (strcmp(cat->valuestring, "blas") && strcmp(cat->valuestring, "dnnl")) || !ts)
            continue;
        cJSON *py = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "py");
        if (!cJSON_IsString(py) || strstr(py->valuestring, "import")) continue; /* numpy's checks at import */
        kernels++;
        located += strstr(py->valuestring, line8) != NULL;
    }
    int all = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *cat = cJSON_GetObjectItem(ev, "cat");
        if (cJSON_IsString(cat) && (!strcmp(cat->valuestring, "blas") || !strcmp(cat->valuestring, "dnnl"))) {
            all++;
            cr_expect_not_null(cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "py"), "a kernel without its line");
        }
    }
    cr_expect_gt(all, 100, "%d kernel slices", all);
    cr_expect_gt(kernels, 100);
    cr_expect_eq(located, kernels, "%d of %d kernel slices name %s", located, kernels, line8);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* LIBPROF_ALLOC_SAMPLE with Python's objects on malloc (LIBPROF_PYTHON_MALLOC=1): most of the
 * allocations only counted, the sampled ones with their Python frames. Each of two lines that
 * allocate tens of MiB gets, by estimate, its bytes and calls of an exact run within 5 %; the
 * calls in total are the exact run's. */
static const char two_lines_py[] = "def a():\n"                        /* 1 */
                                   "    out = []\n"                    /* 2 */
                                   "    for _ in range(100000):\n"     /* 3 */
                                   "        out.append(bytes(200))\n"  /* 4 */
                                   "    return out\n"                  /* 5 */
                                   "def b():\n"                        /* 6 */
                                   "    out = []\n"                    /* 7 */
                                   "    for _ in range(20000):\n"      /* 8 */
                                   "        out.append(bytes(1000))\n" /* 9 */
                                   "    return out\n"                  /* 10 */
                                   "x = a()\n"                         /* 11 */
                                   "y = b()\n"                         /* 12 */
                                   "print(len(x) + len(y))\n";         /* 13 */

static cJSON *line_row(cJSON *meta, const char *name) {
    cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(meta, "python_lines")) {
        cJSON *n = cJSON_GetObjectItem(l, "line");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return l;
    }
    return NULL;
}

Test(python, sampled_allocations_by_line_estimate_the_exact_run, .init = setup) {
    char *script = write_script("two.py", two_lines_py);
    cJSON *m[2], *t[2];
    for (int s = 0; s < 2; s++) {
        char *out = strfmt("%s/l%d.json", dir, s);
        struct run r;
        run_prog(&r, dir,
                 (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", out), "LIBPROF_PYTHON_MALLOC=1",
                                  s ? "LIBPROF_ALLOC_SAMPLE=4096" : "LIBPROF_STACKS=16", NULL},
                 (const char *[]){"/usr/bin/python3", script, NULL});
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_str_eq(r.out, "120000\n");
        run_free(&r);
        t[s] = load_json(out);
        cr_assert_not_null(t[s]);
        m[s] = libprof_meta(t[s]);
    }
    cJSON *st = cJSON_GetObjectItem(cJSON_GetObjectItem(m[1], "stacks"), "sampled");
    cr_assert_not_null(st, "the trace does not say its allocations are sampled");
    cr_expect_gt(num(st, "allocations_counted_only"), 10 * num(st, "allocations_sampled"));
    cr_expect_eq(meta_fn(m[1], "malloc", "count"), meta_fn(m[0], "malloc", "count"));
    const char *lines[] = {"a", "4", "b", "9"};
    for (int k = 0; k < 4; k += 2) {
        char *name = strfmt("%s (%s:%s)", lines[k], script, lines[k + 1]);
        cJSON *e = line_row(m[0], name), *s = line_row(m[1], name);
        cr_assert(e && s, "%s: not in python_lines (exact %p, sampled %p)", name, (void *)e, (void *)s);
        double eb = num(e, "alloc_bytes"), sb = num(s, "alloc_bytes"), ec = num(e, "alloc_calls"),
               sc = num(s, "alloc_calls");
        cr_expect(eb > 20e6, "%s: %.0f bytes", name, eb);
        cr_expect(sb > eb * 0.95 && sb < eb * 1.05, "%s: %.0f bytes estimated, %.0f exact", name, sb, eb);
        cr_expect(sc > ec * 0.95 && sc < ec * 1.05, "%s: %.0f calls estimated, %.0f exact", name, sc, ec);
    }
    cJSON_Delete(t[0]);
    cJSON_Delete(t[1]);
}

/* Python threads and the GIL (tests/progs/pygil.py, its own truth: each thread's wall and CPU
 * time, and when it measured them), on every interpreter: three CPU-bound threads wait for the
 * GIL, while they measure, what they did not run of their wall time (within 15 % or 60 ms); the
 * sleeper waits for it under 60 ms; each thread's "GIL wait" slices add up to its
 * metadata.libprof.python.gil; the wall-clock flame graph gives the sleeper's time.sleep its slept
 * time (±3 %); the blocker's time is its lock's and the GIL's; the report's per-thread table has
 * the columns; the GIL waits' line is the spinning loop's. */
/* Thread `tid`'s "GIL wait" slices in trace `t`: their time from t0 to t1 (seconds of the trace's
 * clock), and all of it in *all (when not NULL). */
static double gil_waits(cJSON *t, const char *tid, double t0, double t1, double *all) {
    double in = 0, sum = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(t, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, "GIL wait") || num(ev, "tid") != atoll(tid)) continue;
        double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble / 1e6,
               dur = cJSON_GetObjectItem(ev, "dur")->valuedouble / 1e6;
        sum += dur;
        double from = ts > t0 ? ts : t0, to = ts + dur < t1 ? ts + dur : t1;
        if (to > from) in += to - from;
    }
    if (all) *all = sum;
    return in;
}

/* The GIL's holder track (thread id 0x4f000000): its slices never overlap, each names the thread
 * holding the GIL, and they add up to each thread's GIL held; a spinning thread held the GIL about
 * as long as it ran (its CPU time, less 15 % or 60 ms: it ran only holding it), the sleeper hardly. */
static void check_gil_holder(const char *py, cJSON *t, cJSON *truth, cJSON *gil) {
    cJSON *ev, *th;
    double last_end = -1, ts, dur;
    int holds = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(t, "traceEvents")) {
        if (num(ev, "tid") != 0x4f000000 || strcmp(cJSON_GetObjectItem(ev, "ph")->valuestring, "X")) continue;
        ts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
        dur = cJSON_GetObjectItem(ev, "dur")->valuedouble;
        cr_expect_geq(ts + 0.0015, last_end, "%s: GIL holder slices overlap at %.3f us", py, ts);
        last_end = ts + dur;
        holds++;
    }
    cr_expect_gt(holds, 10, "%s: %d slices on the GIL holder track", py, holds);
    cJSON_ArrayForEach(th, truth) {
        const char *role = cJSON_GetObjectItem(th, "role")->valuestring;
        double held = 0, cpu = cJSON_GetObjectItem(th, "cpu")->valuedouble;
        cJSON_ArrayForEach(ev, cJSON_GetObjectItem(t, "traceEvents")) {
            cJSON *args = cJSON_GetObjectItem(ev, "args");
            if (num(ev, "tid") == 0x4f000000 && args && num(args, "tid") == atoll(th->string))
                held += cJSON_GetObjectItem(ev, "dur")->valuedouble / 1e6;
        }
        cJSON *m = cJSON_GetObjectItem(gil, th->string);
        double table = m ? (double)num(m, "held_ns") / 1e9 : -1;
        cr_expect(fabs(held - table) < 0.002, "%s: thread %s's holds add up to %.3f s, its GIL held %.3f s", py,
                  th->string, held, table);
        if (!strcmp(role, "spin"))
            cr_expect_geq(held, 0.85 * cpu - 0.060, "%s: spinning thread %s held the GIL %.3f s, ran %.3f s", py,
                          th->string, held, cpu);
        else if (!strcmp(role, "sleep"))
            cr_expect_lt(held, 0.060, "%s: the sleeper held the GIL %.3f s", py, held);
    }
}

Test(python, gil_waits_and_blocked_time_every_interpreter, .init = setup) {
    char py[16][256];
    int n = python_interpreters(py, 16, 8), tested = 0;
    const char *prog = LP_SOURCE_DIR "/tests/progs/pygil.py";
    for (int i = 0; i < n; i++) {
        struct run r, rep;
        char *trace = strfmt("%s/gil%d.json", dir, i), *truth_path = strfmt("%s/truth%d.json", dir, i),
             *wall = strfmt("%s/gil%d.wall.folded", dir, i);
        run_prog(&r, dir,
                 (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", trace), "LIBPROF_SAMPLE_HZ=500",
                                  "LIBPROF_FLAMEGRAPH=1", NULL},
                 (const char *[]){py[i], prog, "1.0", truth_path, NULL});
        cr_assert_eq(r.status, 0, "%s: %s", py[i], r.err);
        cJSON *truth = load_json(truth_path), *t = load_json(trace);
        cr_assert(truth && t, "%s", py[i]);
        cJSON *gil = cJSON_GetObjectItem(cJSON_GetObjectItem(libprof_meta(t), "python"), "gil");
        cr_assert_not_null(gil, "%s: no metadata.libprof.python.gil", py[i]);
        double origin = (double)num(libprof_meta(t), "start_time_unix_ns") / 1e9;
        cJSON *th;
        int spins = 0;
        cJSON_ArrayForEach(th, truth) {
            const char *role = cJSON_GetObjectItem(th, "role")->valuestring;
            double w = cJSON_GetObjectItem(th, "wall")->valuedouble, cpu = cJSON_GetObjectItem(th, "cpu")->valuedouble,
                   delay = cJSON_GetObjectItem(th, "run_delay")->valuedouble,
                   t0 = cJSON_GetObjectItem(th, "t0")->valuedouble - origin,
                   t1 = cJSON_GetObjectItem(th, "t1")->valuedouble - origin;
            cJSON *m = cJSON_GetObjectItem(gil, th->string);
            double all, in = gil_waits(t, th->string, t0, t1, &all); /* all of them, and while it measured */
            cr_expect(m && fabs(all - (double)num(m, "wait_ns") / 1e9) < 0.002,
                      "%s: thread %s's GIL wait slices add up to %.3f s, the table %.3f s", py[i], th->string, all,
                      m ? (double)num(m, "wait_ns") / 1e9 : -1.0);
            if (!strcmp(role, "spin")) {
                /* (on a loaded machine a thread may also wait for a processor while it holds the
                 * GIL: that run-queue delay is wall - CPU but no GIL wait) */
                double want = w - cpu, tol = 0.15 * want > 0.060 ? 0.15 * want : 0.060;
                cr_expect(in <= want + tol && in >= want - delay - tol,
                          "%s: spinning thread %s waited %.3f s for the GIL, wall - CPU %.3f s (%.3f s runnable)",
                          py[i], th->string, in, want, delay);
                spins++;
            } else if (!strcmp(role, "sleep")) {
                /* under 60 ms; on a loaded machine, no more than its clocks leave (wall - CPU - the sleep
                 * it asked for) */
                double asked = cJSON_GetObjectItem(th, "asked")->valuedouble, left = w - cpu - asked + 0.010;
                cr_expect_lt(in, left > 0.060 ? left : 0.060, "%s: the sleeper waited %.3f s for the GIL (%.3f s left)",
                             py[i], in, left);
                /* the wall-clock flame graph: the sleeper's [sleep] under its own line, the time.sleep
                 * call's less the GIL taken back after it */
                char *text = read_file(wall, NULL);
                cr_assert_not_null(text, "%s: no %s", py[i], wall);
                double slept = 0, want_s = cJSON_GetObjectItem(th, "slept")->valuedouble - in;
                for (char *next = text; *next;) {
                    char *l, *sp;
                    long long us = folded_next(&next, &l, &sp);
                    char save = *sp;
                    *sp = '\0';
                    if (strstr(l, "sleeper (") && sp - l > 8 && !strcmp(sp - 8, ";[sleep]")) slept += (double)us / 1e6;
                    *sp = save;
                }
                cr_expect(fabs(slept - want_s) <= 0.03 * want_s,
                          "%s: the wall flame graph's sleep %.4f s, the sleep call's %.4f s", py[i], slept, want_s);
                free(text);
            } else { /* the blocker: its lock, then the GIL */
                double off = m ? (double)num(m, "off_cpu_ns") / 1e9 : 0;
                cr_expect(off + in >= 0.85 * (w - cpu) && off <= w + 0.010,
                          "%s: the blocker %.3f s off the CPU and %.3f s waiting for the GIL of %.3f s wall", py[i],
                          off, in, w);
            }
        }
        cr_expect_eq(spins, 3, "%s", py[i]);
        cJSON *lines = cJSON_GetObjectItem(cJSON_GetObjectItem(libprof_meta(t), "python"), "blocked_lines");
        cJSON *top = cJSON_GetArrayItem(lines, 0);
        cr_expect(top && strstr(cJSON_GetObjectItem(top, "line")->valuestring, "spin (") &&
                      strstr(cJSON_GetObjectItem(top, "line")->valuestring, "pygil.py:"),
                  "%s: the most blocked line is %s", py[i],
                  top ? cJSON_GetObjectItem(top, "line")->valuestring : "none");
        check_gil_holder(py[i], t, truth, gil);
        run_prog(&rep, dir, NULL, (const char *[]){REPORT, trace, NULL});
        cr_assert_eq(rep.status, 0, "%s", rep.err);
        cr_expect(strstr(rep.out, "gil wait") && strstr(rep.out, "off-cpu"), "%s: %s", py[i], rep.out);
        run_free(&rep);
        cJSON_Delete(truth);
        cJSON_Delete(t);
        run_free(&r);
        tested++;
    }
    cr_assert_gt(tested, 0, "no interpreter ran");
}

/* The GIL's waits without the sync family (LIBPROF_EVENTS=cpu,python,wait,thread: the timed wait
 * hooked alone), and the CPU profile's wall sample type read by Go's own pprof: the sleeper's
 * [sleep] under its thread is its sleep, less the GIL taken back after it, within 3 %. */
Test(python, gil_without_the_sync_family_and_pprof_wall_time, .init = setup) {
    char py[16][256];
    cr_assert_gt(python_interpreters(py, 16, 8), 0, "no interpreter");
    if (access(LP_BUILD_DIR "/go/pprof", X_OK) != 0)
        cr_skip_test("Go's pprof not built (golang-go, golang-github-google-pprof-dev)");
    char *lpt = strfmt("%s/g.lpt", dir), *truth_path = strfmt("%s/truth.json", dir), *pb = strfmt("%s/g.pb.gz", dir),
         *json = strfmt("%s/g.json", dir);
    struct run r, rep, pp;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_SAMPLE_HZ=500",
                              "LIBPROF_EVENTS=cpu,python,wait,thread", NULL},
             (const char *[]){py[0], LP_SOURCE_DIR "/tests/progs/pygil.py", "1.0", truth_path, NULL});
    cr_assert_eq(r.status, 0, "%s: %s", py[0], r.err);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, lpt, "--pprof", pb, "--chrome", json, "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    cJSON *truth = load_json(truth_path), *t = load_json(json), *ev, *th;
    cr_assert(truth && t);
    int waits = 0, sync = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(t, "traceEvents")) {
        cJSON *cat = cJSON_GetObjectItem(ev, "cat"), *nm = cJSON_GetObjectItem(ev, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "GIL wait")) waits++;
        if (cJSON_IsString(cat) && !strcmp(cat->valuestring, "sync")) sync++;
    }
    cr_expect_gt(waits, 50, "%s: %d GIL waits without the sync family", py[0], waits);
    /* the report of the raw trace: each spinning thread's gil held as the Chrome trace's */
    struct run txt;
    run_prog(&txt, dir, NULL, (const char *[]){REPORT, lpt, NULL});
    cr_assert_eq(txt.status, 0, "%s", txt.err);
    int rows = 0;
    cJSON_ArrayForEach(th, truth) {
        if (strcmp(cJSON_GetObjectItem(th, "role")->valuestring, "spin")) continue;
        cJSON *m =
            cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(libprof_meta(t), "python"), "gil"), th->string);
        char *table = strstr(txt.out, " gil held "); /* the per-thread table's header */
        for (char *l = table; m && l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
            if (strstr(l, "overall") && strstr(l, "overall") < strchr(l, '\n')) break; /* its last row */
            char tok[18][16];
            /* pid tid wall busy busy% kernel kernel% cpu "cpu kernel" "gil wait" "gil held": times are two tokens */
            if (sscanf(l, "%15s %15s %15s %15s %15s %15s %15s %15s %15s %15s %15s %15s %15s %15s %15s %15s %15s %15s",
                       tok[0], tok[1], tok[2], tok[3], tok[4], tok[5], tok[6], tok[7], tok[8], tok[9], tok[10], tok[11],
                       tok[12], tok[13], tok[14], tok[15], tok[16], tok[17]) != 18 ||
                strcmp(tok[1], th->string))
                continue;
            double v = atof(tok[16]), unit = !strcmp(tok[17], "s")    ? 1
                                             : !strcmp(tok[17], "ms") ? 1e-3
                                             : !strcmp(tok[17], "us") ? 1e-6
                                                                      : 1e-9;
            double want = (double)num(m, "held_ns") / 1e9;
            cr_expect(fabs(v * unit - want) <= 0.001 * want + 1e-6,
                      "%s: thread %s: the report's gil held %s %s, the trace's %.6f s", py[0], th->string, tok[16],
                      tok[17], want);
            rows++;
        }
    }
    cr_expect_eq(rows, 3, "%s: the report's rows of the spinning threads: %d\n%s", py[0], rows, txt.out);
    run_free(&txt);
    cr_expect_eq(sync, 0, "%s: %d slices of the sync family, which was not asked for", py[0], sync);
    cJSON *gil = cJSON_GetObjectItem(cJSON_GetObjectItem(libprof_meta(t), "python"), "gil");
    cr_assert_not_null(gil);
    check_gil_holder(py[0], t, truth, gil);
    cJSON_ArrayForEach(th, truth) {
        if (strcmp(cJSON_GetObjectItem(th, "role")->valuestring, "sleep")) continue;
        /* its sleep, less the GIL waits after it (while it measured) */
        double origin = (double)num(libprof_meta(t), "start_time_unix_ns") / 1e9,
               t0 = cJSON_GetObjectItem(th, "t0")->valuedouble - origin,
               t1 = cJSON_GetObjectItem(th, "t1")->valuedouble - origin,
               want = cJSON_GetObjectItem(th, "slept")->valuedouble - gil_waits(t, th->string, t0, t1, NULL);
        run_prog(&pp, dir, NULL,
                 (const char *[]){LP_BUILD_DIR "/go/pprof", "-sample_index=wall", "-unit=ms", "-top",
                                  strfmt("-tagfocus=thread=thread %s", th->string), pb, NULL});
        cr_assert_eq(pp.status, 0, "%s", pp.err);
        double ms = -1;
        for (char *l = pp.out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
            if (!strncmp(l + strcspn(l, "\n") - 7, "[sleep]", 7)) ms = strtod(l, NULL);
        cr_expect(fabs(ms / 1e3 - want) <= 0.03 * want,
                  "%s: pprof's wall [sleep] of the sleeper %.4f s, its sleep %.4f s\n%s", py[0], ms / 1e3, want,
                  pp.out);
        run_free(&pp);
    }
    cJSON_Delete(truth);
    cJSON_Delete(t);
    run_free(&rep);
    run_free(&r);
}
