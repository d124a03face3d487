/* libprof-report's analyses (issue 5): golden outputs of a small hand-written trace (tables,
 * self time, percentiles, threads, iterations, framework tax, what-if, diff), a real PyTorch
 * profiler trace and a real uftrace trace, raw traces of real programs (events CSV, merge of a
 * run's processes, HTML rendered by a real headless browser), and bad input. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(analysis, .timeout = 180);

static char *dir;
static void setup(void) { dir = make_tmpdir(); }

/* Run libprof-report in the source directory (golden files name their inputs relatively). */
static void report(struct run *r, const char *const *args) {
    const char *argv[24] = {REPORT};
    int k = 1;
    for (int i = 0; args[i] && k < 23; i++) argv[k++] = args[i];
    argv[k] = NULL;
    run_prog(r, LP_SOURCE_DIR, NULL, argv);
}

Test(analysis, golden_tables_iterations_tax_whatif) {
    struct run r;
    report(&r, (const char *[]){"tests/golden/small.json", "--iterations", "^inference$", "--skip", "1", "--what-if",
                                "conv=2", "--units", "us", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *want = read_file(LP_SOURCE_DIR "/tests/golden/small.txt", NULL);
    cr_assert_not_null(want);
    cr_expect_str_eq(r.out, want);
    /* what the golden file says, spelled out: self time, p50, tax, what-if */
    cr_expect_not_null(strstr(r.out, "inference         3    270.000    120.000     90.000"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "framework tax        60.0%        62.5%        44.4%       53.4%"));
    cr_expect_not_null(strstr(r.out, "what-if             80.000       65.000       65.000"));
    run_free(&r);
}

Test(analysis, golden_diff_by_impact) {
    struct run r;
    report(&r, (const char *[]){"tests/golden/small.json", "--diff", "tests/golden/small-base.json", "--units", "us",
                                NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *want = read_file(LP_SOURCE_DIR "/tests/golden/small-diff.txt", NULL);
    cr_assert_not_null(want);
    cr_expect_str_eq(r.out, want);
    run_free(&r);
}

Test(analysis, sort_filter_top_units) {
    struct run r;
    report(&r, (const char *[]){"tests/golden/small.json", "--sort", "count", "--filter", "^(conv|relu|load)$", "--top",
                                "2", "--units", "ns", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    /* the name column is as wide as the names shown */
    cr_expect_not_null(strstr(r.out, "\nconv         3     120000     120000      40000"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "\nrelu         3      30000"), "%s", r.out);
    cr_expect_null(strstr(r.out, "\nload "), "%s", r.out);
    cr_expect_null(strstr(r.out, "\ninference "), "%s", r.out);
    run_free(&r);
    report(&r, (const char *[]){"tests/golden/small.json", "--sort", "sideways", NULL});
    cr_expect_eq(r.status, 2);
    run_free(&r);
    report(&r, (const char *[]){"tests/golden/small.json", "--filter", "(", NULL});
    cr_expect_eq(r.status, 2);
    cr_expect_not_null(strstr(r.err, "bad --filter regular expression"), "%s", r.err);
    run_free(&r);
    report(&r, (const char *[]){"tests/golden/small.json", "--what-if", "conv=fast", NULL});
    cr_expect_eq(r.status, 2);
    run_free(&r);
}

/* A real PyTorch profiler trace (torch.profiler, export_chrome_trace), generated here. */
Test(analysis, pytorch_profiler_trace, .init = setup) {
    char *trace = strfmt("%s/torch.json", dir);
    char *py = strfmt("import torch\n"
                      "from torch.profiler import profile, record_function, ProfilerActivity\n"
                      "torch.manual_seed(0)\n"
                      "m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),\n"
                      "                        torch.nn.Linear(8 * 30 * 30, 10))\n"
                      "x = torch.randn(2, 3, 32, 32)\n"
                      "with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:\n"
                      "    for _ in range(4):\n"
                      "        with record_function('inference'):\n"
                      "            m(x)\n"
                      "prof.export_chrome_trace('%s')\n",
                      trace);
    struct run g;
    run_prog(&g, dir, NULL, (const char *[]){"/usr/bin/python3", "-c", py, NULL});
    if (g.status != 0) cr_skip_test("python3-torch is not installed: %s", g.err);
    struct run r;
    report(&r, (const char *[]){trace, "--iterations", "^inference$", "--skip", "1", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "\naten::conv2d "), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "\naten::linear "), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "iterations /^inference$/: 4, first 1 left out"), "%s", r.out);
    /* every iteration runs the conv and the linear layer once */
    const char *p = strstr(r.out, "\naten::conv2d ");
    cr_assert_not_null(p);
    int count = 0;
    sscanf(p + strlen("\naten::conv2d "), "%d", &count);
    cr_expect_eq(count, 4, "%s", r.out);
    run_free(&r);
    run_free(&g);
}

/* A real uftrace trace (uftrace record + dump --chrome): B/E pairs, no tid. */
Test(analysis, uftrace_trace, .init = setup) {
    if (access("/usr/bin/uftrace", X_OK) != 0) cr_skip_test("uftrace is not installed");
    char *src = strfmt("%s/u.c", dir), *bin = strfmt("%s/u", dir);
    FILE *f = fopen(src, "w");
    cr_assert_not_null(f);
    fputs("#include <stdio.h>\n"
          "__attribute__((noinline)) static int leaf(int i) { return i * 2; }\n"
          "__attribute__((noinline)) static int mid(int i) { int s = 0; for (int k = 0; k < 3; k++) s += leaf(i + k); "
          "return s; }\n"
          "int main(void) { int t = 0; for (int i = 0; i < 5; i++) t += mid(i); printf(\"%d\\n\", t); return 0; }\n",
          f);
    fclose(f);
    char *cmd = strfmt("gcc -pg -O0 -o %s %s && cd %s && uftrace record -d data %s >/dev/null && uftrace dump -d data "
                       "--chrome > u.json",
                       bin, src, dir, bin);
    struct run b;
    run_prog(&b, NULL, NULL, (const char *[]){"sh", "-c", cmd, NULL});
    cr_assert_eq(b.status, 0, "%s", b.err);
    struct run r;
    report(&r, (const char *[]){strfmt("%s/u.json", dir), "--units", "ns", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "\nleaf                15 "), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "\nmid                  5 "), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "\nmain                 1 "), "%s", r.out);
    run_free(&r);
    run_free(&b);
}

/* Raw traces: the default report adds slices, threads and iterations to the memory tables;
 * --events-csv has one row per event, read back by Python's csv module. */
Test(analysis, raw_trace_report_and_events_csv, .init = setup) {
    struct run p;
    char *out = strfmt("LIBPROF_OUTPUT=%s/c.lpt", dir);
    run_prog(&p, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL},
             (const char *[]){PROG("calls"), dir, PROG("libplugin.so"), NULL});
    cr_assert_eq(p.status, 0, "%s", p.err);
    struct run r;
    char *lpt = strfmt("%s/c.lpt", dir), *csv = strfmt("%s/ev.csv", dir);
    report(&r, (const char *[]){lpt, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "heap peak"), "%s", r.out);             /* the memory tables */
    cr_expect_not_null(strstr(r.out, "/data.bin"), "%s", r.out);             /* I/O per file */
    cr_expect_not_null(strstr(r.out, "\npthread_mutex_lock "), "%s", r.out); /* the slice table */
    cr_expect_not_null(strstr(r.out, "per thread:"), "%s", r.out);
    run_free(&r);
    report(&r, (const char *[]){lpt, "--events-csv", csv, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *py = "import csv,sys\n"
                     "rows=list(csv.DictReader(open(sys.argv[1])))\n"
                     "w=[x for x in rows if x['name']=='write']\n"
                     "m=[x for x in rows if x['name']=='malloc']\n"
                     "assert all(int(x['dur_ns'])>=0 for x in w) and len(w)==3, len(w)\n"
                     "assert all(x['size'] and x['ptr'].startswith('0x') for x in m)\n"
                     "print(len(rows), len(m))\n";
    struct run c;
    run_prog(&c, NULL, NULL, (const char *[]){"/usr/bin/python3", "-c", py, csv, NULL});
    cr_expect_eq(c.status, 0, "%s", c.err);
    run_free(&c);
    run_free(&r);
    run_free(&p);
}

/* --merge: the processes of one run (a forking program) on one timeline. */
Test(analysis, merge_processes_of_one_run, .init = setup) {
    struct run p;
    char *out = strfmt("LIBPROF_OUTPUT=%s/f.json", dir);
    run_prog(&p, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL},
             (const char *[]){PROG("calls"), dir, PROG("libplugin.so"), NULL});
    cr_assert_eq(p.status, 0);
    int n = 0;
    char **kids = child_traces(dir, "f", &n);
    cr_assert_geq(n, 1, "the forked child's trace");
    char *merged = strfmt("%s/merged.json", dir);
    struct run r;
    const char *args[8] = {strfmt("%s/f.json", dir), kids[0], "--merge", "--chrome", merged, "--summary", NULL};
    report(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "2 traces merged"), "%s", r.out);
    cr_assert(python_json_ok(merged));
    const char *py = "import json,sys\n"
                     "d=json.load(open(sys.argv[1]))\n"
                     "pids={e['pid'] for e in d['traceEvents']}\n"
                     "files=d['metadata']['libprof_merge']\n"
                     "assert len(pids)==2 and len(files)==2, pids\n"
                     "assert min(f['shift_us'] for f in files)==0 and max(f['shift_us'] for f in files)>0\n";
    struct run c;
    run_prog(&c, NULL, NULL, (const char *[]){"/usr/bin/python3", "-c", py, merged, NULL});
    cr_expect_eq(c.status, 0, "%s", c.err);
    run_free(&c);
    run_free(&r);
    run_free(&p);
}

/* --html: one self-contained page, rendered by Debian's chromium in headless mode. */
Test(analysis, html_renders_in_a_real_browser, .init = setup) {
    const char *chromium = access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : NULL;
    if (!chromium) cr_skip_test("chromium is not installed");
    struct run p;
    char *out = strfmt("LIBPROF_OUTPUT=%s/s.lpt", dir);
    run_prog(&p, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL},
             (const char *[]){PROG("annotated"), NULL});
    cr_assert_eq(p.status, 0, "%s", p.err);
    char *html = strfmt("%s/r.html", dir), *png = strfmt("%s/shot.png", dir);
    struct run r;
    report(&r, (const char *[]){strfmt("%s/s.lpt", dir), "--html", html, "--iterations", "step", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    size_t len;
    char *page = read_file(html, &len);
    cr_assert_not_null(page);
    cr_expect_not_null(strstr(page, "<svg"));
    cr_expect_not_null(strstr(page, "Heap over time"));
    cr_expect_not_null(strstr(page, "Allocated bytes by call stack"));
    cr_expect_not_null(strstr(page, "Top entry points"));
    cr_expect_null(strstr(page, "http://"), "the page must not load anything");
    cr_expect_null(strstr(page, "https://"), "the page must not load anything");
    cr_expect_null(strstr(page, "<script src"), "scripts are inline: one file"); /* interactive since issue 17 */
    char *url = strfmt("file://%s", html), *shot = strfmt("--screenshot=%s", png);
    struct run b;
    run_prog(&b, dir, (const char *[]){"HOME=/tmp", NULL},
             (const char *[]){chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                              "--window-size=1100,1600", shot, url, NULL});
    cr_assert_eq(b.status, 0, "chromium: %s", b.err);
    /* the screenshot is a real image with ink on it: decoded by Python (zlib), some pixels dark */
    const char *py = "import sys,zlib,struct\n"
                     "d=open(sys.argv[1],'rb').read()\n"
                     "assert d[:8]==b'\\x89PNG\\r\\n\\x1a\\n'\n"
                     "w,h,bits,ct=struct.unpack('>IIBB',d[16:26])\n"
                     "i=8;idat=b''\n"
                     "while i<len(d):\n"
                     "  n,t=struct.unpack('>I4s',d[i:i+8]);\n"
                     "  if t==b'IDAT': idat+=d[i+8:i+8+n]\n"
                     "  i+=12+n\n"
                     "raw=zlib.decompress(idat)\n"
                     "bpp={2:3,6:4}[ct]\n"
                     "dark=sum(1 for k in range(0,len(raw),bpp*7) if raw[k]<100)\n"
                     "assert w==1100 and dark>500, (w,h,dark)\n"
                     "print(w,h,dark)\n";
    struct run c;
    run_prog(&c, NULL, NULL, (const char *[]){"/usr/bin/python3", "-c", py, png, NULL});
    cr_expect_eq(c.status, 0, "%s", c.err);
    run_free(&c);
    run_free(&b);
    run_free(&r);
    run_free(&p);
}

Test(analysis, bad_input_is_a_clear_error, .init = setup) {
    char *notrace = strfmt("%s/x.json", dir), *garbage = strfmt("%s/g.bin", dir);
    FILE *f = fopen(notrace, "w");
    fputs("{\"hello\": [1, 2, 3]}", f);
    fclose(f);
    f = fopen(garbage, "w");
    fputs("\x01\x02garbage", f);
    fclose(f);
    struct run r;
    report(&r, (const char *[]){notrace, NULL});
    cr_expect_eq(r.status, 1);
    cr_expect_not_null(strstr(r.err, "not a Chrome trace"), "%s", r.err);
    run_free(&r);
    report(&r, (const char *[]){garbage, NULL});
    cr_expect_eq(r.status, 1);
    cr_expect_not_null(strstr(r.err, "not a libprof raw trace (bad magic), Chrome trace JSON or a Perfetto trace"),
                       "%s", r.err);
    run_free(&r);
    /* a Perfetto trace's first bytes, then not one: one clear line */
    char *cut = strfmt("%s/cut.pftrace", dir);
    f = fopen(cut, "w");
    fwrite("\x0a\x40\x08\x01\x10", 1, 5, f);
    fclose(f);
    report(&r, (const char *[]){cut, NULL});
    cr_expect_eq(r.status, 1);
    cr_expect_not_null(strstr(r.err, "not a Perfetto trace (malformed protobuf)"), "%s", r.err);
    run_free(&r);
    report(&r, (const char *[]){"tests/golden/small.json", "--diff", "/nonexistent.json", NULL});
    cr_expect_eq(r.status, 1);
    run_free(&r);
    report(&r,
           (const char *[]){"tests/golden/small.json", "tests/golden/small-base.json", "--html", "/tmp/x.html", NULL});
    cr_expect_eq(r.status, 2);
    cr_expect_not_null(strstr(r.err, "--merge"), "%s", r.err);
    run_free(&r);
}

/* An ONNX Runtime profile (a bare array; Session and Node categories): its node time counts as
 * kernel time with --kernels, the rest of the session is framework tax. */
Test(analysis, onnxruntime_style_with_kernels) {
    struct run r;
    report(&r, (const char *[]){"tests/fuzz/corpus-json/onnxruntime-like.json", "--kernels", "_kernel_time$", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "\nmodel_run                  1   100.0 us    60.0 us"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "100.0 us    100.0 us  100.0%     40.0 us   40.0%     60.0%"), "%s", r.out);
    run_free(&r);
}

/* The host waiting for the GPU (a CUDA device, stream or event synchronisation, a synchronous
 * copy) is the GPU's work, not the framework's: two iterations of 1000 µs with 700 and 500 µs of
 * synchronisation have 30 % and 50 % framework tax; the launches are the framework's. */
Test(analysis, host_waits_on_the_gpu_are_not_framework_tax, .init = setup) {
    char *t =
        write_text(dir, "gw.json",
                   "{\"traceEvents\":[\n"
                   "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"cat\":\"annot\",\"name\":\"step\",\"ts\":0,\"dur\":1000},\n"
                   "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"cat\":\"cuda\",\"name\":\"k\",\"ts\":0,\"dur\":100},\n"
                   "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"cat\":\"cuda\",\"name\":\"cudaDeviceSynchronize\","
                   "\"ts\":200,\"dur\":700},\n"
                   "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"cat\":\"annot\",\"name\":\"step\",\"ts\":1000,\"dur\":1000},\n"
                   "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"cat\":\"cuda\",\"name\":\"k\",\"ts\":1000,\"dur\":100},\n"
                   "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"cat\":\"cuda\",\"name\":\"cudaStreamSynchronize\","
                   "\"ts\":1300,\"dur\":500}\n]}\n");
    struct run r;
    report(&r, (const char *[]){t, "--iterations", "^step$", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *tax = strstr(r.out, "\nframework tax ");
    cr_assert_not_null(tax, "%s", r.out);
    cr_expect_not_null(strstr(tax, " 30.0%        50.0%       40.0%"), "%s", r.out);
    run_free(&r);
}
