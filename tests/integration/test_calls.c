/* The runtime entry points (issue 3): every family on a program with known behaviour
 * (tests/progs/calls), then real programs — sqlite3 on a file database, numpy's GEMMs, a small
 * PyTorch conv + linear model through oneDNN, BLAS and OpenMP. Host output unchanged; traces
 * strict JSON with nested slices and paired flows (tests/integration/check_trace.py). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(calls, .timeout = 120);

static char *dir;
static void setup(void) { dir = make_tmpdir(); }

static cJSON *checked(const char *path) {
    char *err;
    cJSON *s = check_trace_py(path, &err);
    cr_assert_not_null(s, "%s: %s", path, err);
    return s;
}

static long long num(cJSON *obj, const char *a, const char *b) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

/* The n-th X slice named `name` (n from 0), or NULL. */
static cJSON *slice(cJSON *trace, const char *name, int n) {
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
        cJSON *ph = cJSON_GetObjectItem(ev, "ph"), *nm = cJSON_GetObjectItem(ev, "name");
        if (strcmp(ph->valuestring, "X") || strcmp(nm->valuestring, name)) continue;
        if (n-- == 0) return ev;
    }
    return NULL;
}

static long long arg(cJSON *ev, const char *name) { return num(cJSON_GetObjectItem(ev, "args"), name, NULL); }
static const char *sarg(cJSON *ev, const char *name) {
    cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), name);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The file entry of metadata.libprof.files whose path ends with `suffix`. */
static cJSON *file_entry(cJSON *meta, const char *suffix) {
    cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(meta, "files")) {
        const char *p = cJSON_GetObjectItem(f, "path")->valuestring;
        size_t a = strlen(p), b = strlen(suffix);
        if (a >= b && !strcmp(p + a - b, suffix)) return f;
    }
    return NULL;
}

static void run_calls(struct run *r, const char *const *extra) {
    const char *env[8] = {"LD_PRELOAD=" PRELOAD};
    int k = 1;
    for (int i = 0; extra && extra[i]; i++) env[k++] = extra[i];
    const char *argv[] = {PROG("calls"), dir, PROG("libplugin.so"), NULL};
    run_prog(r, dir, env, argv);
}

static const char *const CALLS_OUT = "threads ok\ndl ok\nio ok\nmmap ok\nprocess ok\nwait ok\nmore ok\n";

Test(calls, every_family_with_its_arguments, .init = setup) {
    struct run bare, r;
    const char *argv[] = {PROG("calls"), dir, PROG("libplugin.so"), NULL};
    run_prog(&bare, dir, NULL, argv);
    cr_assert_eq(bare.status, 0, "%s", bare.out);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir), *csv = strfmt("LIBPROF_CSV=%s/t.csv", dir);
    run_calls(&r, (const char *[]){out, csv, NULL});
    cr_assert_eq(r.status, 0, "%s %s", r.out, r.err);
    cr_assert_str_eq(r.out, CALLS_OUT);
    cr_assert_str_eq(r.out, bare.out);
    /* nothing of libprof's on the program's stderr: the RTLD_DEEPBIND flag dropped is a note, in
     * the trace */
    cr_expect_str_eq(r.err, bare.err);

    char *path = strfmt("%s/t.json", dir);
    cJSON *s = checked(path), *j = load_json(path);
    cr_assert_not_null(j);
    cJSON *m = libprof_meta(j);
    cJSON *notes = cJSON_GetObjectItem(m, "notes");
    cr_assert(cJSON_IsArray(notes) && cJSON_GetArraySize(notes) == 1, "notes: %s",
              notes ? cJSON_PrintUnformatted(notes) : "none");
    const char *note = cJSON_GetArrayItem(notes, 0)->valuestring;
    cr_expect(strstr(note, "dlopen(") == note && strstr(note, "RTLD_DEEPBIND"), "%s", note);
    /* threads: four created, four lives with their creator (one ended by pthread_exit), four
     * arrows */
    cr_expect_eq(num(s, "slices", "pthread_create"), 4);
    cr_expect_eq(num(s, "slices", "thread"), 4);
    cr_expect_eq(num(s, "slices", "pthread_join"), 4);
    cr_expect_eq(num(s, "instants", "pthread_exit"), 1);
    cr_expect_eq(num(s, "flows", NULL), 4);
    long long pid = num(m, "pid", NULL);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(arg(slice(j, "thread", i), "creator"), pid);
        cr_expect_eq(arg(slice(j, "thread", i), "running_at_exit"), 0);
    }
    /* sync: only the waits — 1000 uncontended locks and 100 recursive re-locks leave no record */
    cr_expect_eq(num(s, "slices", "pthread_mutex_lock"), 1);
    cr_expect_eq(num(s, "slices", "pthread_rwlock_rdlock"), 1);
    cr_expect_geq(num(s, "slices", "pthread_cond_wait"), 1);
    /* the semaphore the signaller posts once main sleeps on it; the start-up one may not block */
    cr_expect_geq(num(s, "slices", "sem_wait"), 1);
    cr_expect_leq(num(s, "slices", "sem_wait"), 2);
    cr_expect_eq(num(s, "slices", "pthread_barrier_wait"), 2);
    cr_expect_eq(num(s, "slices", "pthread_rwlock_wrlock"), -1, "the write lock was free");
    cJSON *lock = slice(j, "pthread_mutex_lock", 0);
    cr_assert_not_null(lock);
    cr_expect_gt(cJSON_GetObjectItem(lock, "dur")->valuedouble, 0);
    cr_expect_eq(arg(lock, "ret"), 0);
    cr_expect_str_neq(sarg(lock, "lock"), "");
    /* dl */
    cr_expect_eq(num(s, "slices", "dlopen"), 2);
    cr_expect_eq(num(s, "slices", "dlclose"), 2);
    cr_expect_not_null(strstr(sarg(slice(j, "dlopen", 0), "path"), "libplugin.so"));
    /* io: per-file totals like Darshan's */
    cJSON *f = file_entry(m, "/data.bin");
    cr_assert_not_null(f);
    cr_expect_eq(num(f, "opens", NULL), 3);
    cr_expect_eq(num(f, "reads", NULL), 3);
    cr_expect_eq(num(f, "read_bytes", NULL), 3000 + 100 + 5000);
    cr_expect_eq(num(f, "writes", NULL), 4);
    cr_expect_eq(num(f, "write_bytes", NULL), 3000 + 5000);
    cr_expect_eq(num(f, "other", NULL), 5); /* fsync, lseek, close, 2 fclose */
    cJSON *rd = slice(j, "read", 0);
    cr_expect_eq(arg(rd, "count"), 3000);
    cr_expect_eq(arg(rd, "ret"), 3000);
    cr_expect_not_null(strstr(sarg(rd, "file"), "/data.bin"));
    cJSON *bad = slice(j, "read", 1);
    cr_expect_eq(arg(bad, "fd"), 987);
    cr_expect_eq(arg(bad, "ret"), -1);
    cJSON *miss = slice(j, "open", 1);
    cr_expect_str_eq(sarg(miss, "path"), "/nonexistent/libprof-test");
    cr_expect_eq(arg(miss, "ret"), -1);
    cr_expect_eq(arg(slice(j, "pread", 0), "offset"), 50);
    cr_expect_str_eq(sarg(slice(j, "fopen", 0), "mode"), "w");
    cr_expect_eq(arg(slice(j, "fread", 0), "ret"), 5000);
    /* anonymous mappings: the program's one MiB, then 64 KiB grown to 128 KiB */
    cr_expect_eq(num(m, "mmap_anon", "maps"), 2);
    cr_expect_eq(num(m, "mmap_anon", "peak_bytes"), 1048576);
    cr_expect_eq(num(m, "mmap_anon", "live_at_exit"), 0);
    cr_expect_geq(num(s, "counters", "mmap anon"), 2);
    /* process */
    cJSON *fk = slice(j, "fork", 0), *wp = slice(j, "waitpid", 0), *sy = slice(j, "system", 0);
    cr_assert(fk && wp && sy);
    cr_expect_gt(arg(fk, "ret"), 0);
    cr_expect_eq(arg(wp, "ret"), arg(fk, "ret"));
    cr_expect_eq(arg(wp, "status"), 3 << 8);
    cr_expect_str_eq(sarg(sy, "command"), "exit 4");
    cr_expect_eq(arg(sy, "ret"), 4 << 8);
    /* wait */
    cr_expect_eq(arg(slice(j, "nanosleep", 0), "ns"), 1000000);
    cr_expect_eq(arg(slice(j, "usleep", 0), "ns"), 1000000);
    cr_expect_eq(arg(slice(j, "poll", 0), "timeout_ms"), 1);
    cr_expect_eq(arg(slice(j, "select", 0), "timeout_ns"), 1000000);
    /* more of each family */
    cJSON *mf = file_entry(m, "/more.bin");
    cr_assert_not_null(mf);
    cr_expect_eq(num(mf, "opens", NULL), 1);
    cr_expect_eq(num(mf, "write_bytes", NULL), 30);
    cr_expect_eq(num(mf, "read_bytes", NULL), 30);
    cr_expect_eq(num(mf, "other", NULL), 3); /* lseek, fdatasync, close */
    cr_expect_eq(arg(slice(j, "writev", 0), "count"), 30);
    cr_expect_eq(arg(slice(j, "readv", 0), "ret"), 30);
    cr_expect_not_null(strstr(sarg(slice(j, "openat", 0), "path"), "/more.bin"));
    cr_expect_not_null(strstr(sarg(slice(j, "creat", 0), "path"), "/more2.bin"));
    cr_expect_eq(arg(slice(j, "mremap", 0), "new_len"), 131072);
    cr_expect_eq(arg(slice(j, "epoll_wait", 0), "timeout_ms"), 1);
    cr_expect_eq(arg(slice(j, "ppoll", 0), "timeout_ns"), 1000000);
    cr_expect_eq(arg(slice(j, "pselect", 0), "timeout_ns"), 1000000);
    cr_expect_eq(arg(slice(j, "clock_nanosleep", 0), "ns"), 1000000);
    cr_expect_eq(arg(slice(j, "pthread_cond_timedwait", 0), "ret"), 110 /* ETIMEDOUT */);
    cJSON *sp = slice(j, "posix_spawn", 0);
    cr_assert_not_null(sp);
    cr_expect_eq(arg(sp, "ret"), 0);
    cr_expect_gt(arg(sp, "pid"), 0);
    cr_expect_str_eq(sarg(sp, "command"), "/bin/true");
    cr_expect_eq(arg(slice(j, "waitid", 0), "id"), arg(sp, "pid"));
    /* CSV rows in the core's columns */
    char *c = read_file(strfmt("%s/t.csv", dir), NULL);
    cr_assert_not_null(c);
    cr_expect_not_null(strstr(c, "\npthread_mutex_lock,sync,1,"), "%s", c);
    cr_expect_not_null(strstr(c, "\nwrite,io,3,"), "%s", c);
    cr_expect_not_null(strstr(c, "/data.bin,file,15,"), "%s", c);
    cJSON_Delete(s);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* Python's subprocess: vfork (the asm trampoline) and the exec attempts along PATH, the wait. */
Test(calls, python_subprocess_vfork_exec_wait, .init = setup) {
    const char *argv[] = {"/usr/bin/python3", "-c",
                          "import subprocess; r = subprocess.run(['sh', '-c', 'exit 6']); print(r.returncode)", NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "PATH=/usr/bin:/bin", NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "6\n");
    cr_assert_str_eq(r.out, bare.out);
    cJSON *s = checked(strfmt("%s/t.json", dir)), *j = load_json(strfmt("%s/t.json", dir));
    long long forks = num(s, "instants", "vfork") + 1 + num(s, "slices", "fork") + 1;
    cr_expect_geq(forks, 1, "a vfork or fork");
    cr_expect_geq(num(s, "instants", "exec"), 1);
    int found = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(cJSON_GetObjectItem(ev, "name")->valuestring, "waitpid")) continue;
        if (arg(ev, "status") == 6 << 8) found = 1;
    }
    cr_expect(found, "a waitpid with the child's status");
    cJSON_Delete(s);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* LIBPROF_MIN_NS: short calls leave the trace, not the statistics. */
Test(calls, min_ns_drops_short_calls_but_counts_them, .init = setup) {
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir), *csv = strfmt("LIBPROF_CSV=%s/t.csv", dir);
    run_calls(&r, (const char *[]){out, csv, "LIBPROF_MIN_NS=10000000000", NULL});
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, CALLS_OUT);
    cJSON *s = checked(strfmt("%s/t.json", dir)), *j = load_json(strfmt("%s/t.json", dir));
    cr_expect_eq(num(s, "slices", "write"), -1);
    cr_expect_eq(num(s, "slices", "read"), -1);
    cJSON *m = libprof_meta(j);
    cr_expect_eq(num(cJSON_GetObjectItem(m, "calls"), "write", "count"), 3);
    cr_expect_eq(num(cJSON_GetObjectItem(m, "calls"), "read", "count"), 2);
    cr_expect_gt(num(cJSON_GetObjectItem(m, "calls"), "read", "total_ns"), 0);
    cr_expect_gt(num(m, "calls_under_min_ns", NULL), 20);
    char *c = read_file(strfmt("%s/t.csv", dir), NULL);
    cr_expect_not_null(strstr(c, "\nwrite,io,3,"), "%s", c);
    cJSON_Delete(s);
    cJSON_Delete(j);
    run_free(&r);
}

Test(calls, families_are_selected_by_libprof_events, .init = setup) {
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_calls(&r, (const char *[]){out, "LIBPROF_EVENTS=io,wait", NULL});
    cr_assert_eq(r.status, 0);
    cr_assert_str_eq(r.out, CALLS_OUT);
    cJSON *s = checked(strfmt("%s/t.json", dir));
    cr_expect_eq(num(s, "categories", "thread"), -1);
    cr_expect_eq(num(s, "categories", "sync"), -1);
    cr_expect_eq(num(s, "categories", "dl"), -1);
    cr_expect_eq(num(s, "categories", "process"), -1);
    cr_expect_gt(num(s, "categories", "io"), 10);
    cr_expect_eq(num(s, "categories", "wait"), 8);
    cJSON_Delete(s);
    run_free(&r);
}

/* sqlite3 on a file database: its reads, writes and syncs charged to the database file. */
Test(calls, sqlite_file_io, .init = setup) {
    const char *sql = "create table t(a, b); begin; "
                      "with recursive n(i) as (select 1 union all select i+1 from n where i < 5000) "
                      "insert into t select i, hex(randomblob(40)) from n; commit; select count(*) from t;";
    char *db = strfmt("%s/test.db", dir), *db2 = strfmt("%s/bare.db", dir);
    const char *argv[] = {"sqlite3", db, sql, NULL}, *argv2[] = {"sqlite3", db2, sql, NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv2);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_assert_str_eq(r.out, "5000\n");
    cJSON *s = checked(strfmt("%s/t.json", dir)), *j = load_json(strfmt("%s/t.json", dir));
    cJSON *m = libprof_meta(j);
    cJSON *f = file_entry(m, "/test.db");
    cr_assert_not_null(f);
    cr_expect_gt(num(f, "write_bytes", NULL), 5000 * 80);
    cr_expect_geq(num(f, "opens", NULL), 1);
    cr_expect_gt(num(cJSON_GetObjectItem(m, "calls"), "pwrite", "count"), 10);
    cr_expect_geq(num(cJSON_GetObjectItem(m, "calls"), "fdatasync", "count"), 1);
    cr_expect_not_null(file_entry(m, "/test.db-journal"));
    cJSON_Delete(s);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* numpy from Debian: an exact number of matrix products, with their shapes. */
Test(calls, numpy_gemm_shapes, .init = setup) {
    const char *py = "import numpy as np\n"
                     "a = np.ones((64, 32), np.float32); b = np.ones((32, 16), np.float32)\n"
                     "for _ in range(7): c = a @ b\n"
                     "x = np.ones((50, 40)); y = np.ones((40, 30))\n"
                     "for _ in range(3): z = x.dot(y)\n"
                     "print(c.sum(), z.sum())\n";
    const char *argv[] = {"/usr/bin/python3", "-c", py, NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    if (bare.status != 0) cr_skip_test("numpy is not installed: %s", bare.err);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir), *csv = strfmt("LIBPROF_CSV=%s/t.csv", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, csv, NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cJSON *s = checked(strfmt("%s/t.json", dir)), *j = load_json(strfmt("%s/t.json", dir));
    int sg = 0, dg = 0;
    cJSON *b;
    cJSON_ArrayForEach(b, cJSON_GetObjectItem(libprof_meta(j), "blas")) {
        const char *n = cJSON_GetObjectItem(b, "name")->valuestring;
        if (!strcmp(n, "sgemm 64x16x32 NN")) sg = (int)num(b, "count", NULL);
        if (!strcmp(n, "dgemm 50x30x40 NN")) dg = (int)num(b, "count", NULL);
    }
    cr_expect_eq(sg, 7);
    cr_expect_eq(dg, 3);
    cr_expect_eq(num(s, "slices", "sgemm"), 7);
    cJSON *g = slice(j, "sgemm", 0);
    cr_expect_eq(arg(g, "m"), 64);
    cr_expect_eq(arg(g, "n"), 16);
    cr_expect_eq(arg(g, "k"), 32);
    char *c = read_file(strfmt("%s/t.csv", dir), NULL);
    char *row = strstr(c, "\nsgemm 64x16x32 NN,blas_shape,7,");
    cr_assert_not_null(row, "%s", c);
    char *line = strndup(row + 1, strcspn(row + 1, "\n"));
    *strrchr(line, ',') = '\0'; /* the last column is `temporary`; gflops the one before */
    double gf = atof(strrchr(line, ',') + 1);
    cr_expect_gt(gf, 0, "GFLOP/s column: %s", row);
    cJSON_Delete(s);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* PyTorch from Debian: a conv + linear model. oneDNN runs the convolution, BLAS (sgemm_) the
 * linear layer, OpenMP the parallel parts; all on one timeline. */
Test(calls, pytorch_conv_linear, .init = setup, .timeout = 300) {
    const char *py = "import torch\n"
                     "torch.manual_seed(0); torch.set_num_threads(2)\n"
                     "m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),\n"
                     "                        torch.nn.Linear(8 * 30 * 30, 10))\n"
                     "x = torch.randn(4, 3, 32, 32)\n"
                     "with torch.no_grad():\n"
                     "    for _ in range(3): y = m(x)\n"
                     "print(tuple(y.shape), round(float(y.abs().sum()), 3))\n";
    const char *argv[] = {"/usr/bin/python3", "-c", py, NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    if (bare.status != 0) cr_skip_test("python3-torch is not installed: %s", bare.err);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cJSON *s = checked(strfmt("%s/t.json", dir)), *j = load_json(strfmt("%s/t.json", dir));
    cJSON *m = libprof_meta(j);
    long long conv = num(s, "slices", "convolution"), gemm = num(s, "slices", "sgemm");
    cr_expect(conv == 3 || gemm >= 6, "conv %lld sgemm %lld", conv, gemm); /* conv via oneDNN, or im2col+GEMM */
    cr_expect_geq(gemm, 3, "the linear layer's GEMMs");
    cr_expect_gt(num(s, "slices", "omp parallel"), 0);
    cr_expect_gt(num(s, "slices", "omp work"), num(s, "slices", "omp parallel"));
    cr_expect_gt(num(cJSON_GetObjectItem(m, "calls"), "dlopen", "count"), 5);
    if (conv == 3) {
        cJSON *cv = slice(j, "convolution", 0);
        cr_expect_not_null(strstr(sarg(cv, "shape"), "src 4x3x32x32 wei 8x3x3x3 dst 4x8x30x30"), "%s",
                           sarg(cv, "shape"));
    }
    cJSON_Delete(s);
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* dlopen stays transparent: a bare name found through the caller's own RUNPATH ($ORIGIN). */
Test(calls, dlopen_honours_the_callers_runpath, .init = setup) {
    struct run bare, r;
    const char *argv[] = {PROG("rpath_dlopen"), NULL};
    run_prog(&bare, "/", NULL, argv);
    cr_assert_eq(bare.status, 0, "without libprof: %s", bare.err);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, "/", (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, argv);
    cr_assert_eq(r.status, 0, "under libprof: %s", r.err);
    cr_assert_str_eq(r.out, "ok\n");
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cJSON *d = slice(j, "dlopen", 0);
    cr_assert_not_null(d);
    cr_expect_str_eq(sarg(d, "path"), "libplugin.so");
    cr_expect_str_neq(sarg(d, "ret"), "0x0");
    cJSON_Delete(j);
    run_free(&r);
    run_free(&bare);
}

/* A descriptor the program inherited is named from /proc/self/fd when libprof starts. */
Test(calls, inherited_descriptor_has_its_path, .init = setup) {
    char *file = strfmt("%s/inherited.txt", dir);
    FILE *f = fopen(file, "w");
    fputs("twelve bytes", f);
    fclose(f);
    char *cmd = strfmt("exec 3< %s; exec /usr/bin/python3 -c 'import os; print(len(os.read(3, 100)))'", file);
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "12\n");
    /* python3 took the trace's name; the shell's part is NAME.exec-dash.json */
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    cJSON *fe = file_entry(libprof_meta(j), "/inherited.txt");
    cr_assert_not_null(fe, "no entry for the inherited descriptor's file");
    cr_expect_eq(num(fe, "read_bytes", NULL), 12);
    cr_expect_eq(num(fe, "opens", NULL), 0);
    cJSON_Delete(j);
    run_free(&r);
}

/* Hooks that can never record are unbound from the program (core/unhook.c): all of the hottest
 * ones when libprof is off for good, those of families left out of LIBPROF_EVENTS otherwise. */
Test(calls, off_unbinds_hot_hooks, .init = setup) {
    struct run off, on, zero;
    const char *argv[] = {PROG("bound"), NULL};
    run_prog(&off, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, NULL}, argv);
    cr_assert_eq(off.status, 0, "%s", off.err);
    cr_expect_str_eq(off.out, "libc.so.6 libc.so.6\n");
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    run_prog(&on, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL}, argv);
    cr_assert_eq(on.status, 0, "%s", on.err);
    cr_expect_str_eq(on.out, "libprof.so libprof.so\n");
    run_prog(&zero, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF=0", NULL}, argv);
    cr_expect_str_eq(zero.out, "libc.so.6 libc.so.6\n");
    run_free(&zero);
    /* recording, but not every family: the others' hooks leave too */
    run_prog(&zero, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_EVENTS=io", NULL}, argv);
    cr_expect_str_eq(zero.out, "libc.so.6 libprof.so\n");
    run_free(&zero);
    run_prog(&zero, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_EVENTS=alloc", NULL}, argv);
    cr_expect_str_eq(zero.out, "libc.so.6 libc.so.6\n");
    run_free(&off);
    run_free(&on);
    run_free(&zero);
}

/* The net family: every byte of a TCP conversation charged to its peer — the address connected
 * to, the client's address on the accepting side —, writes through a dup of the socket to the
 * same peer, a pipe's and a socketpair's bytes to them, nothing to descriptors libprof did not
 * see made; the peers in metadata, the CSV and the summary. */
static cJSON *peer_entry(cJSON *meta, const char *name) {
    cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(meta, "peers")) {
        if (!strcmp(cJSON_GetObjectItem(f, "peer")->valuestring, name)) return f;
    }
    return NULL;
}

Test(calls, sockets_charged_to_their_peers, .init = setup) {
    char *out = strfmt("LIBPROF_OUTPUT=%s/n.json", dir), *csv = strfmt("LIBPROF_CSV=%s/n.csv", dir);
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){PROG("netpeers"), NULL});
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, csv, "LIBPROF_SUMMARY=1", NULL},
             (const char *[]){PROG("netpeers"), NULL});
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    cr_assert_eq(r.status, 0, "%s", r.err);
    unsigned port = 0;
    cr_assert_eq(sscanf(r.out, "ok %u", &port), 1, "%s", r.out);
    cJSON *sum = checked(strfmt("%s/n.json", dir));
    cJSON_Delete(sum);
    cJSON *j = load_json(strfmt("%s/n.json", dir)), *meta = libprof_meta(j);
    char *server = strfmt("127.0.0.1:%u", port);
    cJSON *c = peer_entry(meta, server), *s = peer_entry(meta, "127.0.0.1 (accepted)");
    cr_assert_not_null(c, "no peer %s", server);
    cr_assert_not_null(s, "no accepted peer");
    cr_expect_eq(num(c, "connections", NULL), 1);
    cr_expect_eq(num(c, "writes", NULL), 15); /* 10 send + 5 write through the dup */
    cr_expect_eq(num(c, "write_bytes", NULL), 15000);
    cr_expect_eq(num(c, "read_bytes", NULL), 15000);
    cr_expect_eq(num(s, "connections", NULL), 1);
    cr_expect_eq(num(s, "read_bytes", NULL), 15000);
    cr_expect_eq(num(s, "write_bytes", NULL), 15000);
    cr_expect_gt(num(c, "time_ns", NULL), 0);
    cJSON *p = file_entry(meta, "pipe"), *sp = file_entry(meta, "socketpair"), *u = file_entry(meta, "socket");
    cr_assert(p && sp && u, "pipe, socketpair or socket missing from the files");
    cr_expect_eq(num(p, "write_bytes", NULL), 300);
    cr_expect_eq(num(p, "read_bytes", NULL), 300);
    cr_expect_eq(num(sp, "write_bytes", NULL), 100);
    cr_expect_eq(num(sp, "read_bytes", NULL), 100);
    cr_expect_eq(num(u, "write_bytes", NULL), 64); /* the UDP datagram: a socket with no peer */
    cr_expect_null(file_entry(meta, "(descriptors libprof did not see made)"));
    /* a connect slice names its peer */
    cJSON *ev = slice(j, "connect", 0);
    cr_assert_not_null(ev);
    cr_expect_str_eq(sarg(ev, "peer"), server);
    char *text = read_file(strfmt("%s/n.csv", dir), NULL);
    cr_expect(strstr(text, strfmt("\n%s,peer,", server)) != NULL, "no peer row in the CSV");
    cr_expect(strstr(r.err, "127.0.0.1 (accepted)") != NULL, "the summary has no peer table: %s", r.err);
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&r);
}
