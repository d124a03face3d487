/* Allocation call stacks (issue 4): LIBPROF_STACKS on tests/progs/sites, whose sites, counts,
 * bytes and leaks are known exactly; symbol names, memory per library, the flame-graph files
 * (folded, speedscope) read back independently; totals against heaptrack_print on the same
 * program; stacks on threads and on python3 leave the host unchanged. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(stacks, .timeout = 120);

static char *dir;
static void setup(void) { dir = make_tmpdir(); }

static long long num(cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

/* The n-th alloc_sites entry whose innermost frames are f0 (and f1 when not NULL). */
static cJSON *site(cJSON *meta, const char *f0, const char *f1, int n) {
    cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(meta, "alloc_sites")) {
        cJSON *fr = cJSON_GetObjectItem(s, "frames");
        cJSON *a = cJSON_GetArrayItem(fr, 0), *b = cJSON_GetArrayItem(fr, 1);
        if (!a || strcmp(a->valuestring, f0)) continue;
        if (f1 && (!b || strcmp(b->valuestring, f1))) continue;
        if (n-- == 0) return s;
    }
    return NULL;
}

/* Sum of the integers ending each line of a folded file; lines in *lines; first line in *first. */
static long long folded_total(const char *text, int *lines, char **first) {
    long long sum = 0;
    *lines = 0;
    *first = NULL;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        const char *sp = nl;
        while (sp > p && sp[-1] != ' ') sp--;
        if (!*first) *first = strndup(p, (size_t)(nl - p));
        sum += atoll(sp);
        (*lines)++;
        p = nl + 1;
    }
    return sum;
}

/* metadata.libprof.memory: libprof's own memory by part, each resident within what it reserved,
 * the totals their sums, all of it within the process's peak; the stack tree's part there only
 * when stacks were asked for, and then bounded (its table, its ring, the threads' caches). */
static void check_own_memory(cJSON *meta, int stacks) {
    cJSON *mem = cJSON_GetObjectItem(meta, "memory"), *parts = cJSON_GetObjectItem(mem, "parts");
    cr_assert_not_null(parts, "no metadata.libprof.memory");
    long long res = 0, rsv = 0;
    for (cJSON *p = parts->child; p; p = p->next) {
        long long a = num(p, "resident_bytes"), b = num(p, "reserved_bytes");
        cr_expect_leq(a, b, "%s: %lld resident of %lld reserved", p->string, a, b);
        res += a, rsv += b;
    }
    cr_expect_eq(num(mem, "resident_bytes"), res);
    cr_expect_eq(num(mem, "reserved_bytes"), rsv);
    cr_expect_gt(res, 0);
    cr_expect_lt(res, num(meta, "max_rss_bytes"));
    long long st = num(cJSON_GetObjectItem(parts, "stacks"), "resident_bytes");
    if (stacks) {
        cr_expect_gt(st, 0);
        cr_expect_lt(st, 64ll << 20, "the stack tree holds %lld bytes", st);
        cr_expect_gt(num(cJSON_GetObjectItem(parts, "walker"), "resident_bytes"), 0);
    } else {
        cr_expect_eq(num(cJSON_GetObjectItem(parts, "stacks"), "reserved_bytes"), 0);
    }
}

Test(stacks, sites_exact, .init = setup) {
    struct run bare, r;
    const char *argv[] = {PROG("sites"), NULL};
    run_prog(&bare, dir, NULL, argv);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir), *csv = strfmt("LIBPROF_CSV=%s/t.csv", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, out, csv, "LIBPROF_STACKS=16", "LIBPROF_FLAMEGRAPH=1", NULL},
             argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "ok\n");
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, "");
    char *path = strfmt("%s/t.json", dir);
    cr_assert(python_json_ok(path));
    cJSON *j = load_json(path), *m = libprof_meta(j);
    cr_assert_not_null(m);
    /* "max used" (the process's peak RSS) beside "max allocated" (the heap's peak) */
    cr_expect_gt(num(m, "max_rss_bytes"), num(m, "peak_bytes"));
    check_own_memory(m, 1);
    cJSON *st = cJSON_GetObjectItem(m, "stacks");
    cr_expect_geq(num(st, "unique"), 7);
    cr_expect_eq(num(st, "allocations_without_stack"), 0);
    cr_expect_eq(num(st, "table_full_drops"), 0);
    struct {
        const char *f0, *f1;
        long long calls, bytes, leaked, blocks, peak;
    } want[] = {
        {"site_a", "main", 1000, 1000000, 0, 0, 0},
        {"site_b", "main", 10, 50000, 50000, 10, 50000},
        {"site_c", "c1", 300, 19200, 0, 0, 0},
        {"site_c", "c2", 200, 12800, 12800, 200, 12800},
        {"site_peak", "main", 16, 1048576, 0, 0, 1048576},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cJSON *s = site(m, want[i].f0, want[i].f1, 0);
        cr_assert_not_null(s, "no site %s < %s", want[i].f0, want[i].f1);
        cr_expect_eq(num(s, "calls"), want[i].calls, "%s < %s calls", want[i].f0, want[i].f1);
        cr_expect_eq(num(s, "bytes"), want[i].bytes, "%s < %s bytes", want[i].f0, want[i].f1);
        cr_expect_eq(num(s, "leaked_bytes"), want[i].leaked, "%s < %s leaked", want[i].f0, want[i].f1);
        cr_expect_eq(num(s, "leaked_blocks"), want[i].blocks, "%s < %s blocks", want[i].f0, want[i].f1);
        cr_expect_eq(num(s, "peak_bytes"), want[i].peak, "%s < %s peak", want[i].f0, want[i].f1);
        cr_expect_str_eq(cJSON_GetObjectItem(s, "library")->valuestring, "sites");
    }
    /* calloc (10 x 100 B) and realloc (to 300 B) from site_grow: two stacks */
    cJSON *g0 = site(m, "site_grow", "main", 0), *g1 = site(m, "site_grow", "main", 1);
    cr_assert(g0 && g1);
    cr_expect_eq(num(g0, "bytes") + num(g1, "bytes"), 1000 + 3000);
    /* memory per library: the program itself, all of it (stdio's buffer is charged to main) */
    cJSON *lib = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "alloc_libraries"), 0);
    cr_assert_not_null(lib);
    cr_expect_str_eq(cJSON_GetObjectItem(lib, "library")->valuestring, "sites");
    cJSON *fns = cJSON_GetObjectItem(m, "functions");
    long long total = num(cJSON_GetObjectItem(fns, "malloc"), "bytes") +
                      num(cJSON_GetObjectItem(fns, "calloc"), "bytes") +
                      num(cJSON_GetObjectItem(fns, "realloc"), "bytes");
    cr_expect_eq(num(lib, "bytes"), total);
    cr_expect_eq(num(lib, "leaked_bytes"), num(m, "leaked_bytes"));
    cr_expect_eq(num(lib, "peak_bytes"), num(m, "peak_bytes"));

    /* flame graphs beside the trace: folded (allocated, leaked) and speedscope */
    int lines;
    char *first;
    char *fa = read_file(strfmt("%s/t.alloc.folded", dir), NULL),
         *fl = read_file(strfmt("%s/t.leaks.folded", dir), NULL);
    cr_assert(fa && fl);
    cr_expect_eq(folded_total(fa, &lines, &first), total);
    cr_expect_not_null(strchr(first, ';'), "first line is a single frame: %s", first);
    cr_expect_not_null(strstr(fa, ";main;site_peak 1048576\n"), "%s", fa);
    cr_expect_not_null(strstr(fa, ";main;c1;site_c 19200\n"), "%s", fa);
    cr_expect_eq(folded_total(fl, &lines, &first), num(m, "leaked_bytes"));
    cr_expect_not_null(strstr(fl, ";main;c2;site_c 12800\n"), "%s", fl);
    char *sp = strfmt("%s/t.speedscope.json", dir);
    /* speedscope's file format, checked by Python: frames, sampled profiles, indices in range */
    const char *check[] = {"/usr/bin/python3", "-c",
                           "import json,sys\n"
                           "d=json.load(open(sys.argv[1],encoding='utf-8'))\n"
                           "assert d['$schema']=='https://www.speedscope.app/file-format-schema.json'\n"
                           "fr=d['shared']['frames']; assert all(isinstance(f['name'],str) for f in fr)\n"
                           "for p in d['profiles']:\n"
                           "  assert p['type']=='sampled' and p['unit']=='bytes'\n"
                           "  assert len(p['samples'])==len(p['weights'])\n"
                           "  assert all(0<=i<len(fr) for s in p['samples'] for i in s)\n"
                           "  assert p['endValue']-p['startValue']==sum(p['weights'])\n",
                           sp, NULL};
    struct run pc;
    run_prog(&pc, NULL, NULL, check);
    cr_expect_eq(pc.status, 0, "speedscope file: %s", pc.err);
    run_free(&pc);
    cJSON *ss = load_json(sp);
    cr_assert_not_null(ss);
    cJSON *profiles = cJSON_GetObjectItem(ss, "profiles");
    cr_assert_eq(cJSON_GetArraySize(profiles), 3); /* allocated, leaked, live at the peak */
    cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(profiles, 2), "name")->valuestring,
                     "live bytes at the heap's peak");
    for (int k = 0; k < 2; k++) {
        cJSON *p = cJSON_GetArrayItem(profiles, k), *w;
        cr_expect_str_eq(cJSON_GetObjectItem(p, "unit")->valuestring, "bytes");
        long long sum = 0;
        cJSON_ArrayForEach(w, cJSON_GetObjectItem(p, "weights")) sum += (long long)w->valuedouble;
        cr_expect_eq(sum, k == 0 ? total : num(m, "leaked_bytes"));
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(p, "samples")),
                     cJSON_GetArraySize(cJSON_GetObjectItem(p, "weights")));
    }
    /* CSV rows */
    char *c = read_file(strfmt("%s/t.csv", dir), NULL);
    cr_expect_not_null(strstr(c, "\nsite_a < main < "), "%s", c);
    cr_expect_not_null(strstr(c, ",alloc_site,1000,,,,,,,,1000000,,"), "%s", c);
    cr_expect_not_null(strstr(c, "\nsites,alloc_library,"), "%s", c);
    cJSON_Delete(ss);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* libprof-report on the raw trace writes the same flame graph the run wrote. */
Test(stacks, report_folded_from_raw, .init = setup) {
    struct run r, rep;
    const char *argv[] = {PROG("sites"), NULL};
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.lpt", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=8", "LIBPROF_FLAMEGRAPH=1", NULL},
             argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *f2 = strfmt("%s/again.folded", dir);
    const char *rargv[] = {REPORT, strfmt("%s/t.lpt", dir), "--folded", f2, "--summary", NULL};
    run_prog(&rep, dir, NULL, rargv);
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    char *a = read_file(strfmt("%s/t.alloc.folded", dir), NULL), *b = read_file(f2, NULL);
    cr_assert(a && b);
    cr_expect_str_eq(a, b);
    cr_expect_not_null(strstr(rep.out, "allocation sites by bytes allocated"), "%s", rep.out);
    cr_expect_not_null(strstr(rep.out, "leaks by allocation site"), "%s", rep.out);
    cr_expect_not_null(strstr(rep.out, "site_b < main"), "%s", rep.out);
    /* libprof's own memory, part by part, beside the process's peak */
    cr_expect_not_null(strstr(rep.out, "libprof's memory: "), "%s", rep.out);
    cr_expect_not_null(strstr(rep.out, "stacks 0."), "%s", rep.out); /* (a small program's: under 1 MiB) */
    cr_expect_not_null(strstr(rep.out, "walker "), "%s", rep.out);
    cr_expect_not_null(strstr(rep.out, " of address space reserved\n"), "%s", rep.out);
    /* a trace without stacks: a clear error, exit 1 */
    struct run r2, rep2;
    char *out2 = strfmt("LIBPROF_OUTPUT=%s/plain.lpt", dir);
    run_prog(&r2, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out2, NULL}, argv);
    struct run plain;
    run_prog(&plain, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/plain.json", dir), NULL},
             argv);
    cJSON *pj = load_json(strfmt("%s/plain.json", dir));
    cr_assert_not_null(pj);
    check_own_memory(libprof_meta(pj), 0);
    cJSON_Delete(pj);
    run_free(&plain);
    const char *r2argv[] = {REPORT, strfmt("%s/plain.lpt", dir), "--folded", strfmt("%s/x.folded", dir), NULL};
    run_prog(&rep2, dir, NULL, r2argv);
    cr_expect_eq(rep2.status, 1);
    cr_expect_not_null(strstr(rep2.err, "no call stacks"), "%s", rep2.err);
    run_free(&r);
    run_free(&rep);
    run_free(&r2);
    run_free(&rep2);
}

/* heaptrack_print's number like "1.18M" or "66.90K" (base 1000) in bytes; -1 if absent. */
static double heaptrack_value(const char *text, const char *label) {
    const char *p = strstr(text, label);
    if (!p) return -1;
    p += strlen(label);
    char *end;
    double v = strtod(p, &end);
    switch (*end) {
    case 'K': v *= 1e3; break;
    case 'M': v *= 1e6; break;
    case 'G': v *= 1e9; break;
    default: break;
    }
    return v;
}

static void heaptrack_run(const char *prog, double *peak, double *leaked) {
    char *cmd = strfmt("cd %s && heaptrack -o %s/ht %s >/dev/null 2>&1 && heaptrack_print %s/ht.zst 2>/dev/null || "
                       "heaptrack_print %s/ht.gz 2>/dev/null",
                       dir, dir, prog, dir, dir);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    struct run r;
    run_prog(&r, NULL, NULL, argv);
    *peak = heaptrack_value(r.out, "peak heap memory consumption: ");
    *leaked = heaptrack_value(r.out, "total memory leaked: ");
    run_free(&r);
    char *rm = strfmt("rm -f %s/ht.*", dir);
    const char *rmv[] = {"sh", "-c", rm, NULL};
    run_prog(&r, NULL, NULL, rmv);
    run_free(&r);
}

static void libprof_run(const char *prog, long long *peak, long long *leaked) {
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/lp.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL},
             (const char *[]){prog, NULL});
    cJSON *j = load_json(strfmt("%s/lp.json", dir));
    cr_assert_not_null(j);
    *peak = num(libprof_meta(j), "peak_bytes");
    *leaked = num(libprof_meta(j), "leaked_bytes");
    cJSON_Delete(j);
    run_free(&r);
}

/* Totals agree with heaptrack's on the same program: leaks on the plain C program, the peak on
 * the variant that loads libstdc++ as heaptrack's own preload does (its emergency exception pool
 * is then in both heaps; heaptrack frees it at exit, so leaks compare on the plain program). */
Test(stacks, agrees_with_heaptrack, .init = setup) {
    if (access("/usr/bin/heaptrack", X_OK) != 0) cr_skip_test("heaptrack is not installed");
    double hpeak, hleak, hpeak2, hleak2;
    long long peak, leak, peak2, leak2;
    heaptrack_run(PROG("sites"), &hpeak, &hleak);
    heaptrack_run(PROG("sites_cxx"), &hpeak2, &hleak2);
    libprof_run(PROG("sites"), &peak, &leak);
    libprof_run(PROG("sites_cxx"), &peak2, &leak2);
    cr_assert_gt(hpeak, 0, "heaptrack_print gave no peak");
    cr_expect_leq(leak > hleak ? leak - hleak : hleak - leak, hleak * 0.01, "leaked: libprof %lld heaptrack %.0f", leak,
                  hleak);
    cr_expect_leq(peak2 > hpeak2 ? peak2 - hpeak2 : hpeak2 - peak2, hpeak2 * 0.01, "peak: libprof %lld heaptrack %.0f",
                  peak2, hpeak2);
}

/* Stacks with 16 threads, and on python3: exact counts, no drops, same output. */
Test(stacks, threads_and_python, .init = setup) {
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=32", NULL},
             (const char *[]){PROG("threads"), "16", "2000", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "ok 16\n");
    cJSON *j = load_json(strfmt("%s/t.json", dir)), *m = libprof_meta(j);
    cr_expect_eq(meta_fn(m, "malloc", "count"), 16 * 2004 + 1);
    cr_expect_eq(num(m, "events_dropped"), 0);
    cr_expect_eq(num(cJSON_GetObjectItem(m, "stacks"), "allocations_without_stack"), 0);
    cJSON_Delete(j);
    run_free(&r);

    const char *py[] = {"/usr/bin/python3", "-c",
                        "import json; print(len(json.dumps([{'a': i} for i in range(20000)])))", NULL};
    struct run bare, pr;
    run_prog(&bare, dir, NULL, py);
    char *out2 = strfmt("LIBPROF_OUTPUT=%s/p.json", dir);
    run_prog(&pr, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out2, "LIBPROF_STACKS=16", NULL}, py);
    cr_assert_eq(pr.status, 0, "%s", pr.err);
    cr_assert_str_eq(pr.out, bare.out);
    cJSON *pj = load_json(strfmt("%s/p.json", dir)), *pm = libprof_meta(pj);
    cr_assert_not_null(pm);
    /* python3's own code allocates most of its memory */
    cJSON *lib = cJSON_GetArrayItem(cJSON_GetObjectItem(pm, "alloc_libraries"), 0);
    cr_assert_not_null(lib);
    cr_expect_not_null(strstr(cJSON_GetObjectItem(lib, "library")->valuestring, "python3"), "%s",
                       cJSON_GetObjectItem(lib, "library")->valuestring);
    cJSON_Delete(pj);
    run_free(&pr);
    run_free(&bare);
}

Test(stacks, bad_value_warns_and_runs_without, .init = setup) {
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=lots", NULL},
             (const char *[]){PROG("sites"), NULL});
    cr_assert_eq(r.status, 0);
    cr_expect_str_eq(r.out, "ok\n");
    cr_expect_eq(count_lines_with(r.err, "libprof: ignoring LIBPROF_STACKS"), 1, "%s", r.err);
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_expect_null(cJSON_GetObjectItem(libprof_meta(j), "alloc_sites"));
    cJSON_Delete(j);
    run_free(&r);
}

/* The command: --stacks and --flamegraph. */
Test(stacks, command_line_flags, .init = setup) {
    struct run r;
    char *o = strfmt("%s/c.json", dir);
    run_prog(&r, dir, NULL,
             (const char *[]){LP_BUILD_DIR "/libprof", "--stacks", "12", "--flamegraph", "-o", o, "--", PROG("sites"),
                              NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.err, "allocation sites by bytes allocated"), "%s", r.err);
    cr_expect_eq(access(strfmt("%s/c.alloc.folded", dir), F_OK), 0);
    cr_expect_not_null(strstr(r.err, "libprof: wrote "), "%s", r.err);
    cr_expect_not_null(strstr(r.err, "c.alloc.folded\n"), "the command lists the flame graphs it wrote: %s", r.err);
    cr_expect_eq(access(strfmt("%s/c.speedscope.json", dir), F_OK), 0);
    run_free(&r);
}

/* With stacks, BLAS calls carry their call site: numpy's GEMM comes from numpy's own module. */
Test(stacks, gemm_call_site, .init = setup) {
    const char *py[] = {
        "/usr/bin/python3", "-c",
        "import numpy as np\na = np.ones((64, 32), np.float32)\nb = np.ones((32, 8), np.float32)\nprint((a @ b).sum())",
        NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, py);
    if (bare.status != 0) cr_skip_test("numpy is not installed");
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL}, py);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cJSON *j = load_json(strfmt("%s/t.json", dir)), *ev;
    int found = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(cJSON_GetObjectItem(ev, "name")->valuestring, "sgemm")) continue;
        cJSON *st = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "stack");
        cJSON *f0 = cJSON_GetArrayItem(st, 0);
        cr_assert_not_null(f0, "sgemm without a call site");
        cr_expect_not_null(strstr(f0->valuestring, "_multiarray_umath"), "%s", f0->valuestring);
        found++;
    }
    cr_expect_eq(found, 1);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* C++: frames are demangled (std::runtime_error's constructor allocates its message). */
Test(stacks, cxx_names_demangled, .init = setup) {
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL},
             (const char *[]){PROG("annotated_cpp"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "handled 4 errors 2\n");
    char *text = read_file(strfmt("%s/t.json", dir), NULL);
    cr_assert_not_null(text);
    cr_expect_not_null(strstr(text, "\"operator new(unsigned long)\""), "no demangled operator new");
    cr_expect_not_null(strstr(text, "\"std::runtime_error::runtime_error(char const*)\""), "no demangled constructor");
    cr_expect_null(strstr(text, "\"_Znwm\""), "a mangled name left");
    run_free(&r);
}

/* A PyTorch import: ~1 M allocations from hundreds of thousands of distinct stacks (every static
 * initialiser of its libraries is a call site). The table holds them all. */
Test(stacks, pytorch_import_fits_the_table, .init = setup, .timeout = 300) {
    const char *py[] = {"/usr/bin/python3", "-c", "import torch; print('ok')", NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, py);
    if (bare.status != 0) cr_skip_test("python3-torch is not installed");
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL}, py);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "ok\n");
    cJSON *j = load_json(strfmt("%s/t.json", dir)), *st = cJSON_GetObjectItem(libprof_meta(j), "stacks");
    cr_assert_not_null(st);
    cr_expect_gt(num(st, "unique"), 100000);
    cr_expect_eq(num(st, "table_full_drops"), 0);
    cr_expect_eq(num(st, "allocations_without_stack"), 0);
    check_own_memory(libprof_meta(j), 1);
    cJSON *lib = cJSON_GetArrayItem(cJSON_GetObjectItem(libprof_meta(j), "alloc_libraries"), 0);
    cr_assert_not_null(lib);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* What an import or a model's first step is made of: lines that run once. A generated program of
 * 300 functions of 1,000 lines, each line allocating a block once (601 + its place in its
 * function, with bytearray's NUL: 300,000 distinct stacks), then a hot loop of 20,000 allocations
 * at one line. Every
 * allocation has its stack (the store forgets and makes again, never fills), and each site is
 * exact: the hot loop's, and a line's of the first part, by its size. */
Test(stacks, distinct_lines_by_the_hundred_thousand, .init = setup, .timeout = 300) {
    char *py = strfmt("%s/lines.py", dir);
    FILE *f = fopen(py, "w");
    cr_assert_not_null(f);
    for (int fn = 0; fn < 300; fn++) {
        fprintf(f, "def f%d(keep):\n", fn);
        for (int l = 0; l < 1000; l++) fprintf(f, "    keep.append(bytearray(%d))\n", 600 + l);
    }
    fprintf(f, "keep = []\n"
               "for fn in range(300):\n"
               "    globals()['f%%d' %% fn](keep)\n"
               "    keep.clear()\n"
               "hot = []\n"
               "for i in range(20000):\n"
               "    hot.append(bytearray(30007))\n"
               "    hot.clear()\n"
               "print(len(keep), len(hot))\n");
    fclose(f);
    char *lpt = strfmt("%s/l.lpt", dir), *json = strfmt("%s/l.json", dir), *folded = strfmt("%s/l.folded", dir);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=16", NULL},
             (const char *[]){"/usr/bin/python3", py, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "0 0\n");
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, lpt, "--chrome", json, "--folded", folded, "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cJSON *j = load_json(json), *st = cJSON_GetObjectItem(libprof_meta(j), "stacks");
    cr_assert_not_null(st);
    cr_expect_eq(num(st, "allocations_without_stack"), 0);
    cr_expect_eq(num(st, "table_full_drops"), 0);
    cr_expect_geq(num(st, "unique"), 300000, "the distinct stacks counted");
    cJSON_Delete(j);
    /* the folded stacks: every line's block under its own line, the hot loop's all under it */
    char *text = read_file(folded, NULL);
    cr_assert_not_null(text);
    long long hot = 0, hot_lines = 0, f7 = 0, f7_lines = 0;
    for (char *next = text; *next;) {
        char *l = next, *nl = strchr(next, '\n');
        next = nl ? nl + 1 : next + strlen(next);
        if (nl) *nl = '\0';
        const char *sp = strrchr(l, ' ');
        long long v = sp ? atoll(sp + 1) : 0;
        char want[300];
        snprintf(want, sizeof want, "f7 (%s:%d)", py, 7 * 1001 + 1 + 124); /* f7's 124th line (its def: 7008) */
        char *at7 = strstr(l, want);
        if (strstr(l, "lines.py:") && v == 30008 * 20000LL) hot += v, hot_lines++;
        if (at7) { /* its block: 724 bytes, once */
            f7_lines++;
            f7 += v == 601 + 123;
        }
    }
    cr_expect_eq(hot_lines, 1, "the hot loop's 20,000 allocations on one stack");
    cr_expect_eq(hot, 30008 * 20000LL);
    cr_expect_eq(f7_lines, 1, "f7's line 124 on one stack");
    cr_expect_eq(f7, 1, "f7's line 124 has its block, 724 bytes");
    free(text);
}

/* A training run as users profile it (tests/progs/train_cnn.py: PyTorch 2.x of the project's
 * environment, its import, 30 steps fed by two DataLoader workers — forked processes): every
 * process's allocations all have their stack, none dropped, in the parent and in each worker (a
 * forked child's store and counts are its own). */
Test(stacks, a_training_run_and_its_workers_keep_every_stack, .init = setup, .timeout = 600) {
    if (!venv_has("torch")) cr_skip_test("no PyTorch in the project's environment");
    mkdir(strfmt("%s/t", dir), 0755);
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir),
                              "LIBPROF_STACKS=16", NULL},
             (const char *[]){VENV_PYTHON, LP_SOURCE_DIR "/tests/progs/train_cnn.py", "30", "2", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "loss ") != NULL, "%s", r.out);
    run_free(&r);
    DIR *d = opendir(strfmt("%s/t", dir));
    cr_assert_not_null(d);
    int traces = 0, with_allocs = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".json")) continue;
        cJSON *j = load_json(strfmt("%s/t/%s", dir, e->d_name));
        cr_assert_not_null(j, "%s", e->d_name);
        cJSON *st = cJSON_GetObjectItem(libprof_meta(j), "stacks");
        traces++;
        if (st && num(st, "allocations_with_stack") > 1000) with_allocs++;
        if (st) {
            cr_expect_eq(num(st, "allocations_without_stack"), 0, "%s", e->d_name);
            cr_expect_eq(num(st, "table_full_drops"), 0, "%s", e->d_name);
        }
        cJSON_Delete(j);
    }
    closedir(d);
    cr_expect_geq(with_allocs, 3, "the parent and its two workers (%d traces)", traces);
}

/* The per-thread cache of call chains (stacks.c) gives exactly the stacks a fresh walk gives:
 * the same allocating call reached through different callers at the same stack pointer, and
 * frames that change size (tests/progs/chains.c), and sqlite3's real workload. */
static char *folded_of(const char *where, const char *tag, const char *const *argv, int cache) {
    char *lpt = strfmt("%s/%s%d.lpt", where, tag, cache), *folded = strfmt("%s/%s%d.folded", where, tag, cache);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=16",
                         cache ? "LIBPROF_X=1" : "LIBPROF_STACK_CACHE_OFF=1", NULL};
    struct run r;
    run_prog(&r, where, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    const char *conv[] = {REPORT, lpt, "--folded", folded, "-q", NULL};
    run_prog(&r, NULL, NULL, conv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char *text = read_file(folded, NULL);
    cr_assert_not_null(text);
    return text;
}

Test(stacks, the_chain_cache_gives_what_a_walk_gives) {
    char *tmp = make_tmpdir();
    const char *chains[] = {PROG("chains"), NULL};
    char *with = folded_of(tmp, "chains", chains, 1), *without = folded_of(tmp, "chains", chains, 0);
    cr_expect_str_eq(with, without);
    /* and the stacks are right: 3000 x 32 bytes through via_a, 2000 x 40 through via_b */
    long long a = 0, b = 0, al = 0;
    char *copy = strdup(with), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *sp = strrchr(line, ' ');
        long long v = sp ? atoll(sp + 1) : 0;
        if (strstr(line, ";via_a;leaf ")) a += v;
        if (strstr(line, ";via_b;leaf ")) b += v;
        if (strstr(line, ";via_alloca;leaf ")) al += v;
    }
    free(copy);
    cr_expect_eq(a, 3000 * 32);
    cr_expect_eq(b, 2000 * 40);
    cr_expect_eq(al, 1000 * 48);
    /* called from code without unwind tables (a JIT's): every walk ends there, and the chain
     * that ends there is kept (the walk's end is the same each time) */
    const char *jit[] = {PROG("chains"), "jit", NULL};
    char *jw = folded_of(tmp, "jit", jit, 1), *jo = folded_of(tmp, "jit", jit, 0);
    cr_expect_str_eq(jw, jo);
    long long ja = 0, jb = 0, lines = 0;
    copy = strdup(jw);
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *sp = strrchr(line, ' ');
        long long v = sp ? atoll(sp + 1) : 0;
        if (strstr(line, "jit_a;leaf ")) ja += v, lines++;
        if (strstr(line, "jit_b;leaf ")) jb += v, lines++;
    }
    free(copy);
    cr_expect_eq(ja, 3000 * 32, "%s", jw);
    cr_expect_eq(jb, 2000 * 40, "%s", jw);
    cr_expect_eq(lines, 2, "one stack each, ending at the JIT code: %s", jw);
    free(jw);
    free(jo);
    const char *sq[] = {"sqlite3", ":memory:",
                        "create table t(a integer primary key, b text); with recursive n(i) as (select 1 union all "
                        "select i+1 from n where i<3000) insert into t select i, printf('row-%d', i) from n; "
                        "select count(*) from t;",
                        NULL};
    char *sw = folded_of(tmp, "sqlite", sq, 1), *so = folded_of(tmp, "sqlite", sq, 0);
    cr_expect_str_eq(sw, so);
    free(with);
    free(without);
    free(sw);
    free(so);
}

/* LIBPROF_ALLOC_SAMPLE: a run whose stacks are sampled (one every 4 KiB on average) estimates the
 * sites of a run with every stack — calls, bytes, leaks and bytes at the peak within 5 % on the
 * sites that allocate tens of MiB, a 1 MiB block (always sampled) exactly — while every
 * allocation is still counted, most of them not recorded one by one: calls, bytes asked, blocks
 * leaked, temporaries and sizes are the exact run's, the heap's peak and leaked bytes within 1 %.
 * The trace and the summary say the sites are sampled estimates. */
static int within(long long est, long long exact, double tol) {
    return exact > 0 && est >= exact * (1 - tol) && est <= exact * (1 + tol);
}

Test(stacks, sampled_stacks_estimate_the_exact_sites, .init = setup) {
    cJSON *t[2], *m[2];
    char *err[2];
    for (int sampled = 0; sampled < 2; sampled++) {
        char *out = strfmt("%s/s%d.json", dir, sampled);
        struct run r;
        run_prog(&r, dir,
                 (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", out), "LIBPROF_SUMMARY=1",
                                  sampled ? "LIBPROF_ALLOC_SAMPLE=4096" : "LIBPROF_STACKS=16", NULL},
                 (const char *[]){PROG("sampled"), NULL});
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_str_eq(r.out, "ok\n");
        err[sampled] = strdup(r.err);
        run_free(&r);
        t[sampled] = load_json(out);
        cr_assert_not_null(t[sampled]);
        m[sampled] = libprof_meta(t[sampled]);
    }
    cr_expect(strstr(err[1], "sampled, one every 4096 B on average") && strstr(err[1], "~allocated"),
              "the summary does not say its sites are estimates: %s", err[1]);
    cr_expect(!strstr(err[0], "(estimated)"), "%s", err[0]);
    cJSON *sm = cJSON_GetObjectItem(cJSON_GetObjectItem(m[1], "stacks"), "sampled");
    cr_assert_not_null(sm, "the trace does not say its stacks are sampled");
    cr_expect_eq(num(sm, "mean_bytes"), 4096);
    cr_expect_gt(num(sm, "allocations_not_sampled"), 20 * num(sm, "allocations_sampled"));
    /* counted exactly: the calls, bytes asked, blocks, temporaries and sizes; the heap's bytes
     * count a block that was not sampled at its usable size — 0 to 15 bytes more than asked
     * (glibc), 0.2 % here */
    const char *exact[] = {"leaked_blocks", "temporary"};
    for (int k = 0; k < 2; k++) cr_expect_eq(num(m[1], exact[k]), num(m[0], exact[k]), "%s", exact[k]);
    const char *held[] = {"peak_bytes", "leaked_bytes"};
    for (int k = 0; k < 2; k++)
        cr_expect(num(m[1], held[k]) >= num(m[0], held[k]) && num(m[1], held[k]) <= num(m[0], held[k]) * 1.01,
                  "%s: %lld sampled, %lld exact", held[k], num(m[1], held[k]), num(m[0], held[k]));
    char *h0 = cJSON_PrintUnformatted(cJSON_GetObjectItem(m[0], "size_histogram")),
         *h1 = cJSON_PrintUnformatted(cJSON_GetObjectItem(m[1], "size_histogram"));
    cr_expect_str_eq(h1, h0);
    free(h0);
    free(h1);
    const char *fns[] = {"malloc", "free"};
    for (int k = 0; k < 2; k++) {
        cJSON *f0 = cJSON_GetObjectItem(cJSON_GetObjectItem(m[0], "functions"), fns[k]),
              *f1 = cJSON_GetObjectItem(cJSON_GetObjectItem(m[1], "functions"), fns[k]);
        cr_expect_eq(num(f1, "count"), num(f0, "count"), "%s", fns[k]);
    }
    cr_expect_eq(num(cJSON_GetObjectItem(cJSON_GetObjectItem(m[1], "functions"), "malloc"), "bytes"),
                 num(cJSON_GetObjectItem(cJSON_GetObjectItem(m[0], "functions"), "malloc"), "bytes"));
    /* not recorded one by one: the trace holds a twentieth of the exact run's events */
    cr_expect_gt(num(sm, "allocations_counted_only"), 20 * num(sm, "allocations_sampled"));
    cr_expect_lt(num(m[1], "events_written") * 10, num(m[0], "events_written"), "%lld events, exact %lld",
                 num(m[1], "events_written"), num(m[0], "events_written"));
    /* estimated */
    const char *sites[] = {"site_small", "site_mid", "site_leak"};
    for (int k = 0; k < 3; k++) {
        cJSON *a = site(m[0], sites[k], NULL, 0), *b = site(m[1], sites[k], NULL, 0);
        cr_assert(a && b, "%s missing", sites[k]);
        cr_expect(within(num(b, "bytes"), num(a, "bytes"), 0.05), "%s bytes: %lld estimated, %lld exact", sites[k],
                  num(b, "bytes"), num(a, "bytes"));
        cr_expect(within(num(b, "calls"), num(a, "calls"), 0.05), "%s calls: %lld estimated, %lld exact", sites[k],
                  num(b, "calls"), num(a, "calls"));
    }
    cJSON *a = site(m[0], "site_leak", NULL, 0), *b = site(m[1], "site_leak", NULL, 0);
    cr_expect(within(num(b, "leaked_bytes"), num(a, "leaked_bytes"), 0.05), "leaks: %lld estimated, %lld exact",
              num(b, "leaked_bytes"), num(a, "leaked_bytes"));
    cr_expect(within(num(b, "peak_bytes"), num(a, "peak_bytes"), 0.05), "at the peak: %lld estimated, %lld exact",
              num(b, "peak_bytes"), num(a, "peak_bytes"));
    a = site(m[0], "site_big", NULL, 0);
    b = site(m[1], "site_big", NULL, 0);
    cr_assert(a && b);
    cr_expect_eq(num(b, "bytes"), num(a, "bytes"), "1 MiB blocks are always sampled: weighed as they are");
    cr_expect_eq(num(b, "calls"), num(a, "calls"));
    cJSON_Delete(t[0]);
    cJSON_Delete(t[1]);
}

/* Hooks inside a signal handler that runs on an alternate stack of the size CPython's
 * faulthandler gives its handlers (~16 KiB, an unmapped page below it), with CPU samples landing
 * in those hooks: every allocation's stack recorded from there, and libprof's frames — the
 * hook's capture, and a sample's frame and handler on top of it — within a signal frame and a
 * KiB of what the handler uses bare. Walks used to keep their buffers on the stack (12 KiB of it
 * here, a CPython process's heap overwritten below its alternate stack, a crash in its
 * garbage collector much later). */
Test(stacks, hooks_in_a_handler_on_a_small_alternate_stack, .init = setup) {
    const char *argv[] = {PROG("altstack"), "20", "30000", NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    long bare_used = 0, size = 0, frame = 0, used = 0, size2 = 0;
    cr_assert_eq(sscanf(bare.out, "ok\nused %ld of %ld, signal frame %ld", &bare_used, &size, &frame), 3, "%s",
                 bare.out);
    char *out = strfmt("LIBPROF_OUTPUT=%s/a.json", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", "LIBPROF_SAMPLE_HZ=10000", NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_eq(sscanf(r.out, "ok\nused %ld of %ld", &used, &size2), 2, "%s", r.out);
    cr_expect_eq(size2, size);
    cr_expect_leq(used, bare_used + frame + 1024,
                  "libprof used %ld bytes of the alternate stack, bare %ld (signal frame %ld)", used, bare_used, frame);
    cJSON *j = load_json(strfmt("%s/a.json", dir)), *m = libprof_meta(j);
    cr_assert_not_null(m);
    cJSON *s = site(m, "site_a", "handler", 0);
    cr_assert_not_null(s, "no site site_a < handler");
    cr_expect_eq(num(s, "calls"), 20 * 10000);
    cr_expect_eq(num(cJSON_GetObjectItem(m, "stacks"), "allocations_without_stack"), 0);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* ---- native source lines (lib/dwarf.h) -------------------------------------------------------- */

/* The line of tests/progs/lines.c holding `marker`, or 0. */
static int src_line(const char *marker) {
    char *text = read_file(LP_SOURCE_DIR "/tests/progs/lines.c", NULL);
    int line = 1;
    for (char *p = text; p && *p; p++) {
        if (!strncmp(p, marker, strlen(marker))) {
            free(text);
            return line;
        }
        if (*p == '\n') line++;
    }
    free(text);
    return 0;
}

/* Go's pprof -raw of `pb`: each location of the mapping of `object` (its base name) compared with
 * `addr2line -f -i` on the same address — the same functions, files and lines, inlined ones
 * first. The locations compared. */
static int pprof_matches_addr2line(const char *pb, const char *object, const char *exe) {
    struct run p;
    run_prog(&p, dir, NULL, (const char *[]){LP_BUILD_DIR "/go/pprof", "-raw", pb, NULL});
    cr_assert_eq(p.status, 0, "%s", p.err);
    unsigned long long start = 0, off = 0;
    int mid = 0, compared = 0;
    for (char *l = strstr(p.out, "\nMappings\n"); l && *l; l = strchr(l + 1, '\n')) {
        int id;
        char path[512];
        if (sscanf(l + 1, "%d: %llx/%*[0-9a-fx]/%llx %511s", &id, &start, &off, path) == 4 && strstr(path, object) &&
            !strcmp(strrchr(path, '/') + 1, object)) {
            mid = id;
            break;
        }
    }
    cr_assert_gt(mid, 0, "no mapping of %s in %s:\n%s", object, pb, p.out);
    char want_m[16];
    snprintf(want_m, sizeof want_m, " M=%d ", mid);
    char *loc = strstr(p.out, "\nLocations\n");
    cr_assert_not_null(loc);
    for (char *l = loc + 11; l && *l;) {
        char *eol = strchr(l, '\n');
        unsigned long long addr;
        if (strstr(l, want_m) && (!eol || strstr(l, want_m) < eol) && sscanf(l, "%*d: %llx", &addr) == 1) {
            /* its Lines: this line's and the indented ones after it */
            char got[2048] = "";
            for (char *k = l; k && *k; k = strchr(k, '\n') ? strchr(k, '\n') + 1 : NULL) {
                const char *t = k + strspn(k, " ");
                int next_loc = k != l && t[strspn(t, "0123456789")] == ':' && t[0] >= '0' && t[0] <= '9';
                if (k != l && (k[0] != ' ' || next_loc || *t == '\n' || !*t)) break; /* its Lines end */
                char fn[512], fl[512];
                const char *from = k == l ? strstr(k, want_m) + strlen(want_m) : t;
                if (sscanf(from, "%511s %511s", fn, fl) == 2) { /* (no line: the object and line 0) */
                    size_t n = strlen(fl);
                    snprintf(got + strlen(got), sizeof got - strlen(got), "%s %s\n", fn,
                             n > 2 && !strcmp(fl + n - 2, ":0") ? "??:?" : fl);
                }
            }
            char *hex = strfmt("0x%llx", addr - start + off);
            struct run a;
            run_prog(&a, dir, NULL, (const char *[]){"addr2line", "-f", "-i", "-e", exe, hex, NULL});
            cr_assert_eq(a.status, 0, "%s", a.err);
            /* addr2line: a function, then its file:line (with " (discriminator N)" at times) */
            char want[2048] = "";
            char *fn = NULL;
            for (char *t = strtok(a.out, "\n"); t; t = strtok(NULL, "\n")) {
                if (!fn) {
                    fn = t;
                    continue;
                }
                size_t n = strcspn(t, " ");
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s %.*s\n", fn, (int)n, t);
                fn = NULL;
            }
            cr_expect_str_eq(got, want, "%s at %s: libprof's frames\n%sand addr2line's\n%s", object, hex, got, want);
            compared++;
            run_free(&a);
        }
        l = eol ? eol + 1 : NULL;
    }
    run_free(&p);
    return compared;
}

/* A program built -g -O2: every frame of it in the allocation, leak, peak and CPU views names its
 * file and line, the helper inlined into the leaf is a frame of its own, and pprof's Lines are
 * addr2line's (function, file, line, the inlined ones first) on the same addresses. */
Test(stacks, native_frames_name_their_source_lines_as_addr2line, .init = setup) {
    if (access(LP_BUILD_DIR "/go/pprof", X_OK) != 0)
        cr_skip_test("Go's pprof not built (golang-go, golang-github-google-pprof-dev)");
    const char *src = LP_SOURCE_DIR "/tests/progs/lines.c";
    int l_inl = src_line("return malloc(n);"), l_leaf = src_line("char *p = inl_alloc(n);"),
        l_main = src_line("void *p = leaf_alloc("), l_spin = src_line("for (long i = 0; i < n; i++) x =");
    cr_assert(l_inl && l_leaf && l_main && l_spin);
    char *lpt = strfmt("%s/l.lpt", dir);
    struct run r, rep;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", lpt), "LIBPROF_STACKS=16",
                              "LIBPROF_SAMPLE_HZ=1000", "LIBPROF_LINES=1", NULL},
             (const char *[]){PROG("lines"), "300", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_prog(&rep, dir, (const char *[]){"LIBPROF_LINES=1", NULL},
             (const char *[]){REPORT, lpt, "--folded", "a.folded", "--folded-leaks", "l.folded", "--folded-peak",
                              "p.folded", "--cpu-folded", "c.folded", "--pprof", "c.pb.gz", "--pprof-heap", "h.pb.gz",
                              "--chrome", "l.json", "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    char *chain = strfmt(";main (%s:%d);leaf_alloc (%s:%d);inl_alloc (%s:%d) ", src, l_main, src, l_leaf, src, l_inl);
    const char *views[] = {"a.folded", "l.folded", "p.folded"};
    for (int v = 0; v < 3; v++) {
        char *text = read_file(strfmt("%s/%s", dir, views[v]), NULL);
        cr_assert_not_null(text, "%s", views[v]);
        cr_expect(strstr(text, chain), "%s has no %s:\n%.2000s", views[v], chain, text);
        free(text);
    }
    char *cpu = read_file(strfmt("%s/c.folded", dir), NULL), *spin = strfmt(";spin (%s:%d) ", src, l_spin);
    cr_assert_not_null(cpu);
    cr_expect(strstr(cpu, spin), "the CPU flame graph has no %s:\n%.2000s", spin, cpu);
    free(cpu);
    cr_expect_geq(pprof_matches_addr2line(strfmt("%s/h.pb.gz", dir), "lines", PROG("lines")), 2);
    cr_expect_geq(pprof_matches_addr2line(strfmt("%s/c.pb.gz", dir), "lines", PROG("lines")), 2);
    cJSON *j = load_json(strfmt("%s/l.json", dir));
    cJSON *sym = cJSON_GetObjectItem(libprof_meta(j), "symbols");
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(sym, "lines"), "lines")),
                     "the object");
    cJSON_Delete(j);
    /* the report's tables: the same frames, innermost first; the HTML page's flame graphs */
    run_free(&rep);
    run_prog(&rep, dir, (const char *[]){"LIBPROF_LINES=1", NULL},
             (const char *[]){REPORT, lpt, "--html", "l.html", "--summary", NULL});
    char *row = strfmt("inl_alloc (%s:%d) < leaf_alloc (%s:%d) < main (%s:%d)", src, l_inl, src, l_leaf, src, l_main);
    cr_expect(strstr(rep.out, row), "the report has no %s:\n%s", row, rep.out);
    char *html = read_file(strfmt("%s/l.html", dir), NULL);
    cr_expect(html && strstr(html, strfmt("inl_alloc (%s:%d)", src, l_inl)) &&
                  strstr(html, strfmt("leaf_alloc (%s:%d)", src, l_leaf)) &&
                  strstr(html, strfmt("spin (%s:%d)", src, l_spin)),
              "the HTML page lacks the frames' lines");
    free(html);
    /* LIBPROF_LINES=0: by function, as before */
    run_free(&rep);
    run_prog(&rep, dir, (const char *[]){"LIBPROF_LINES=0", NULL},
             (const char *[]){REPORT, lpt, "--folded", "f.folded", "-q", NULL});
    char *plain = read_file(strfmt("%s/f.folded", dir), NULL);
    cr_expect(plain && strstr(plain, ";main;leaf_alloc "), "%.1000s", plain);
    free(plain);
    run_free(&rep);
    run_free(&r);
}

/* Program `prog` (ARG rounds) under the preload with 16-frame stacks into `dir`/`lpt`, then
 * libprof-report's conversion of it with `extra` (NULL-ended: the outputs), by line, with `env`
 * (NULL or a variable) beside LIBPROF_LINES=1. */
static void record_and_convert(const char *prog, const char *arg, const char *lpt, const char *env,
                               const char *const *extra) {
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/%s", dir, lpt), "LIBPROF_STACKS=16",
                              "LIBPROF_LINES=1", NULL},
             (const char *[]){prog, arg, NULL});
    cr_assert_eq(r.status, 0, "%s: %s", prog, r.err);
    run_free(&r);
    const char *argv[16] = {REPORT, lpt};
    int n = 2;
    for (int i = 0; extra[i] && n < 14; i++) argv[n++] = extra[i];
    argv[n++] = "-q";
    argv[n] = NULL;
    run_prog(&r, dir, (const char *[]){"LIBPROF_LINES=1", env, NULL}, argv);
    cr_assert_eq(r.status, 0, "libprof-report %s: %s", lpt, r.err);
    run_free(&r);
}

/* metadata.libprof.symbols.lines[module] of the Chrome trace `json` in dir, or NULL. */
static char *lines_from(const char *json, const char *module) {
    cJSON *j = load_json(strfmt("%s/%s", dir, json));
    cJSON *sym = cJSON_GetObjectItem(libprof_meta(j), "symbols");
    const char *how = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(sym, "lines"), module));
    char *copy = how ? strdup(how) : NULL;
    cJSON_Delete(j);
    return copy;
}

/* The same program stripped, its debug file served by Debian's debuginfod on this machine: the
 * same allocation flame graph as the program built with its debug information, and the trace says
 * where the lines came from. Then a module rebuilt after the run: refused, and said so. */
Test(stacks, a_stripped_program_through_debuginfod_and_a_rebuilt_one_refused, .init = setup) {
    if (access("/usr/bin/debuginfod", X_OK) != 0) cr_skip_test("debuginfod is not installed (scripts/install-deps)");
    struct run r, srv, rep;
    /* the unstripped program's flame graph; the stripped one's, without the server */
    record_and_convert(PROG("lines"), "300", "u.lpt", NULL, (const char *[]){"--folded", "u.folded", NULL});
    record_and_convert(PROG("lines_stripped"), "300", "s.lpt", NULL, (const char *[]){"--folded", "s0.folded", NULL});
    int port = 20000 + (int)(getpid() % 20000);
    pid_t server = fork();
    if (server == 0) {
        setpgid(0, 0);
        FILE *log = fopen(strfmt("%s/debuginfod.log", dir), "w"); /* (its log: not the test's output) */
        if (log) {
            dup2(fileno(log), 1);
            dup2(fileno(log), 2);
        }
        execl("/usr/bin/debuginfod", "debuginfod", "-F", LP_BUILD_DIR "/progs/debugdir", "-p", strfmt("%d", port), "-d",
              strfmt("%s/db.sqlite", dir), "-t0", "-g0", (char *)NULL);
        _exit(127);
    }
    char *url = strfmt("DEBUGINFOD_URLS=http://127.0.0.1:%d", port), *cache = strfmt("DEBUGINFOD_CACHE_PATH=%s/c", dir);
    int up = 0; /* the server has scanned the directory and serves the debug file */
    for (int i = 0; i < 100 && !up; i++) {
        run_prog(&srv, dir, (const char *[]){url, strfmt("DEBUGINFOD_CACHE_PATH=%s/probe%d", dir, i), NULL},
                 (const char *[]){"debuginfod-find", "debuginfo", PROG("lines_stripped"), NULL});
        up = srv.status == 0;
        run_free(&srv);
        if (!up) usleep(100000);
    }
    run_prog(&rep, dir, (const char *[]){"LIBPROF_LINES=1", url, cache, NULL},
             (const char *[]){REPORT, "s.lpt", "--folded", "s1.folded", "--chrome", "s.json", "-q", NULL});
    kill(-server, SIGTERM);
    kill(server, SIGTERM);
    waitpid(server, NULL, 0);
    cr_assert(up, "debuginfod on port %d never served the debug file", port);
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    run_free(&rep);
    char *u = read_file(strfmt("%s/u.folded", dir), NULL), *s0 = read_file(strfmt("%s/s0.folded", dir), NULL),
         *s1 = read_file(strfmt("%s/s1.folded", dir), NULL);
    cr_assert(u && s0 && s1);
    cr_expect(strstr(s0, "lines_stripped+0x") && !strstr(s0, "leaf_alloc"), "without the server: %.600s", s0);
    cr_expect_str_eq(s1, u, "through debuginfod:\n%s\nbuilt with its debug information:\n%s", s1, u);
    cr_expect_str_eq(lines_from("s.json", "lines_stripped"), "debuginfod");
    /* stripped with a .gnu_debuglink to its debug file in .debug/ beside it: the same, no server */
    record_and_convert(PROG("lines_linked"), "300", "k.lpt", NULL,
                       (const char *[]){"--folded", "k.folded", "--chrome", "k.json", NULL});
    char *k = read_file(strfmt("%s/k.folded", dir), NULL);
    cr_expect(k && !strcmp(k, u), "through .gnu_debuglink:\n%s\nbuilt with its debug information:\n%s", k, u);
    free(k);
    cr_expect_str_eq(lines_from("k.json", "lines_linked"), "a debug file");
    /* a module rebuilt after the run (another build-id at its path): not named from that file */
    char *copy = strfmt("%s/lines_copy", dir);
    cr_assert_eq(system(strfmt("cp %s %s", PROG("lines"), copy)), 0);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/b.lpt", dir), "LIBPROF_STACKS=16",
                              "LIBPROF_LINES=1", NULL},
             (const char *[]){copy, "100", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cr_assert_eq(system(strfmt("cp %s %s", PROG("allocs"), copy)), 0); /* another program, another build-id */
    run_prog(&rep, dir, (const char *[]){"LIBPROF_LINES=1", NULL},
             (const char *[]){REPORT, "b.lpt", "--folded", "b.folded", "--chrome", "b.json", "-q", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    run_free(&rep);
    char *b = read_file(strfmt("%s/b.folded", dir), NULL);
    cr_expect(b && strstr(b, "lines_copy+0x") && strstr(b, "(rebuilt since the run)") && !strstr(b, "leaf_alloc"),
              "%.800s", b);
    cJSON *j = load_json(strfmt("%s/b.json", dir));
    cJSON *rebuilt = cJSON_GetObjectItem(cJSON_GetObjectItem(libprof_meta(j), "symbols"), "rebuilt");
    cr_expect(rebuilt && cJSON_GetArraySize(rebuilt) == 1 &&
                  !strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(rebuilt, 0)), "lines_copy"),
              "metadata.libprof.symbols.rebuilt");
    cJSON_Delete(j);
    free(u);
    free(s0);
    free(s1);
    free(b);
}

/* A table of allocation sites never shows two rows that read the same: stacks that part past the
 * frames shown show more of them, and stacks that read the same to the end (different return
 * addresses in one function without symbols: sqlite3's library) are one row. On Debian's sqlite3. */
Test(stacks, no_two_rows_of_a_sites_table_read_the_same, .init = setup) {
    if (access("/usr/bin/sqlite3", X_OK) != 0) cr_skip_test("sqlite3 is not installed (scripts/install-deps)");
    const char *q = "create table t(a integer primary key, b text); with recursive n(i) as (select 1 union all "
                    "select i+1 from n where i<20000) insert into t select i, printf('row-%d', i) from n; create "
                    "index tb on t(b);";
    struct run r, rep;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/q.lpt", dir), "LIBPROF_STACKS=16",
                              "LIBPROF_LINES=1", NULL},
             (const char *[]){"/usr/bin/sqlite3", ":memory:", q, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_prog(&rep, dir, (const char *[]){"LIBPROF_LINES=1", NULL}, (const char *[]){REPORT, "q.lpt", NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    int tables = 0, rows = 0;
    char *seen[64];
    int nseen = 0;
    for (char *l = rep.out; l && *l;) {
        char *eol = strchr(l, '\n');
        if (eol) *eol = '\0';
        if (strstr(l, "stack (innermost first)")) { /* a table's header: its rows follow */
            tables++;
            nseen = 0;
        } else if (nseen >= 0 && strstr(l, " < ") && l[0] == ' ' && nseen < 64) {
            const char *stack = strstr(l, "  ") ? l + strlen(l) : l; /* the stack: after the last two spaces */
            for (const char *p = l; (p = strstr(p, "  ")); p++) stack = p + 2;
            for (int i = 0; i < nseen; i++) cr_expect_str_neq(seen[i], stack, "two rows read the same: %s", stack);
            seen[nseen++] = (char *)stack;
            rows++;
        } else if (l[0] != ' ' || !strstr(l, " < ")) {
            nseen = 0;
        }
        l = eol ? eol + 1 : NULL;
    }
    cr_expect_geq(tables, 3, "%s", rep.out);
    cr_expect_geq(rows, 10, "%s", rep.out);
    run_free(&rep);
    run_free(&r);
}
