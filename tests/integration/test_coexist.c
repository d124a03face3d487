/* coexist: libprof never writes into, shows or loses to the program's own descriptors, survives
 * allocators built into the program, and leaves no raw trace behind unasked — on programs
 * nobody here wrote: bash, CPython (its own test_subprocess), node, chromium. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(coexist, .timeout = 120);

/* Every *.json in `dir` is a trace of its own process, complete unless `complete` is 0 (a
 * process killed by SIGKILL has its trace cut short); returns their number. No raw spool or
 * temporary file is left beside them. */
static int check_traces(const char *dir, int complete) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "no trace directory %s", dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.') continue;
        cr_expect(l > 5 && !strcmp(e->d_name + l - 5, ".json"), "unexpected file %s/%s", dir, e->d_name);
        if (l <= 5 || strcmp(e->d_name + l - 5, ".json")) continue;
        char *p = strfmt("%s/%s", dir, e->d_name);
        cJSON *j = load_json(p);
        cr_expect_not_null(j, "%s is not JSON", p);
        if (j) {
            cJSON *m = libprof_meta(j);
            if (complete) cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(m, "complete")), "%s: trace not complete", p);
            cr_expect_eq(meta_num(m, "events_dropped"), 0, "%s", p);
            cJSON_Delete(j);
        }
        free(p);
        n++;
    }
    closedir(d);
    return n;
}

static int check_all_traces(const char *dir) { return check_traces(dir, 1); }

/* The pid in a spool's name (NAME_PID.json.lpt), or 0. */
static int spool_pid(const char *name) {
    const char *u = strrchr(name, '_');
    return u ? atoi(u + 1) : 0;
}

/* Wait (bounded) while a spool's writer is alive: a raw trace whose writer is gone is left as it is. */
static void wait_for_live_writers(const char *dir) {
    for (int round = 0; round < 1800; round++) {
        DIR *d = opendir(dir);
        struct dirent *e;
        int busy = 0;
        while (d && (e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l > 4 && !strcmp(e->d_name + l - 4, ".lpt") && spool_pid(e->d_name) > 0 &&
                kill(spool_pid(e->d_name), 0) == 0)
                busy = 1;
        }
        if (d) closedir(d);
        if (!busy) return;
        usleep(100000);
    }
}

/* Raw traces whose writer is gone: converted with libprof-report (each must convert), their
 * half-written outputs removed; returns how many there were. */
static int convert_leftovers(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= 4 || strcmp(e->d_name + l - 4, ".lpt")) continue;
        char *raw = strfmt("%s/%s", dir, e->d_name), *json = strfmt("%s/%.*s", dir, (int)(l - 4), e->d_name);
        unlink(strfmt("%s.tmp%d", json, spool_pid(e->d_name)));
        struct run r;
        run_prog(&r, dir, NULL, (const char *[]){REPORT, raw, "--chrome", json, "--remove-raw", "-q", NULL});
        /* (a process killed while it converted leaves a converter of its own running: one that
         * finished first took the raw trace away, and its JSON is there) */
        int theirs = r.status != 0 && access(raw, F_OK) != 0 && access(json, R_OK) == 0;
        cr_expect(r.status == 0 || theirs, "%s: %s", raw, r.err);
        run_free(&r);
        n++;
    }
    if (d) closedir(d);
    return n;
}

static char *run_in(const char *dir, const char *const *env, const char *const *argv, struct run *r) {
    run_prog(r, dir, env, argv);
    return r->out;
}

/* bash puts its own file on descriptor 3, where libprof's spool used to live: the file must hold
 * exactly what bash wrote (it used to grow by libprof's chunks). */
Test(coexist, bash_descriptor_3_gets_only_what_bash_wrote) {
    char *dir = make_tmpdir(), *bare = strfmt("%s/bare", dir), *traced = strfmt("%s/traced", dir);
    mkdir(bare, 0755);
    mkdir(traced, 0755);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *scripts[] = {"exec 3>c.txt; echo hi >&3",
                             "( exec 3>c.txt; for i in 1 2 3 4; do echo line$i >&3; done; ls / > /dev/null )"};
    for (int k = 0; k < 2; k++) {
        const char *argv[] = {"/bin/bash", "-c", scripts[k], NULL};
        struct run a, b;
        run_in(bare, NULL, argv, &a);
        run_in(traced, env, argv, &b);
        cr_expect_eq(a.status, b.status);
        cr_expect_str_eq(b.err, "", "%s", b.err);
        size_t la = 0, lb = 0;
        char *ca = read_file(strfmt("%s/c.txt", bare), &la), *cb = read_file(strfmt("%s/c.txt", traced), &lb);
        cr_assert_not_null(cb);
        cr_expect_eq(lb, la, "c.txt is %zu bytes under libprof, %zu without", lb, la);
        cr_expect(la == lb && !memcmp(ca, cb, la));
        run_free(&a);
        run_free(&b);
    }
    cr_expect_geq(check_all_traces(strfmt("%s/t", dir)), 3);
}

/* Python dup2s its file onto descriptor 3 and execs: the file is byte-identical, both images'
 * traces are written. */
Test(coexist, python_dup2_onto_3_then_exec) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {"/usr/bin/python3", "-c",
                          "import os\nf = open('d.txt', 'w')\nos.dup2(f.fileno(), 3)\nos.write(3, b'written\\n')\n"
                          "os.execv('/bin/true', ['true'])\n",
                          NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.err, "");
    size_t n = 0;
    char *d = read_file(strfmt("%s/d.txt", dir), &n);
    cr_assert_not_null(d);
    cr_expect(n == 8 && !memcmp(d, "written\n", 8), "d.txt holds %zu bytes", n);
    cr_expect_eq(check_all_traces(strfmt("%s/t", dir)), 2); /* python before its exec, true */
    run_free(&r);
}

/* node's child_process.fork puts its IPC channel on descriptor 3 before the child execs. */
Test(coexist, node_fork_keeps_the_childs_trace) {
    if (access("/usr/bin/node", X_OK) != 0) cr_skip_test("node is not installed");
    char *dir = make_tmpdir();
    FILE *f = fopen(strfmt("%s/parent.js", dir), "w");
    fputs("const { fork } = require('child_process');\n"
          "if (process.argv[2] === 'child') {\n"
          "  process.on('message', (m) => { process.send({ got: m.n * 2 }); process.exit(0); });\n"
          "} else {\n"
          "  const c = fork(__filename, ['child']);\n"
          "  c.on('message', (m) => console.log('reply', m.got));\n"
          "  c.on('exit', (code) => console.log('child exit', code));\n"
          "  c.send({ n: 21 });\n"
          "}\n",
          f);
    fclose(f);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {"/usr/bin/node", "parent.js", NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "reply 42\nchild exit 0\n");
    cr_expect_str_eq(r.err, "", "%s", r.err);
    /* the parent, the child before its exec, the child */
    cr_expect_eq(check_all_traces(strfmt("%s/t", dir)), 3);
    run_free(&r);
}

/* What a program sees of its descriptors (CPython's fd_status.py scans them all with fstat,
 * as test_subprocess does) is what it sees without libprof, also in children started with
 * close_fds and pass_fds. */
Test(coexist, descriptors_look_the_same_to_the_program) {
    char *dir = make_tmpdir();
    const char *script = "import os, subprocess, sys\n"
                         "scan = 'import os\\nfds=[]\\nfor fd in range(os.sysconf(\"SC_OPEN_MAX\")):\\n'"
                         " ' try: os.fstat(fd); fds.append(fd)\\n except OSError: pass\\nprint(fds)\\n'\n"
                         "print('own', sorted(int(x) for x in os.listdir('/proc/self/fd'))[:-1])\n"
                         "keep = [os.open(os.devnull, os.O_RDWR) for _ in range(2)]\n"
                         "r, w = os.pipe()\n"
                         "p = subprocess.Popen([sys.executable, '-c', scan], stdin=keep[0], stdout=w, stderr=keep[1],\n"
                         "                     close_fds=True, pass_fds=keep)\n"
                         "os.close(w)\n"
                         "print('child', os.read(r, 4096).decode().strip(), 'pass', keep)\n"
                         "p.wait()\n";
    const char *argv[] = {"/usr/bin/python3", "-c", script, NULL};
    struct run a;
    run_prog(&a, dir, NULL, argv);
    cr_expect_eq(a.status, 0, "%s", a.err);
    /* without and with call stacks (libunwind's validation pipe is refused: hooks/unwind.c) */
    for (int stacks = 0; stacks < 2; stacks++) {
        char *out = strfmt("LIBPROF_OUTPUT=%s/t%d/%%e_%%p.json", dir, stacks);
        const char *env[] = {"LD_PRELOAD=" PRELOAD, out, stacks ? "LIBPROF_STACKS=16" : "LIBPROF_STACKS=0", NULL};
        struct run b;
        run_prog(&b, dir, env, argv);
        cr_expect_str_eq(b.out, a.out, "stacks %d", stacks);
        cr_expect_str_eq(b.err, "", "%s", b.err);
        cr_expect_geq(check_all_traces(strfmt("%s/t%d", dir, stacks)), 2); /* python, its child */
        run_free(&b);
    }
    run_free(&a);
}

/* A program with its own allocator compiled in, first used from a library constructor before
 * libprof's: the mmap inside that allocator's set-up is the first call libprof sees. libprof's
 * set-up must not call malloc there (it used to dlopen libunwind: the allocator re-entered). */
Test(coexist, a_built_in_allocator_is_not_reentered) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL};
    const char *argv[] = {PROG("ownalloc"), "1000", NULL};
    struct run a, b;
    run_prog(&a, dir, NULL, argv);
    run_prog(&b, dir, env, argv);
    cr_assert_eq(b.status, 0, "%s", b.err);
    cr_expect_str_eq(b.out, a.out);
    cr_expect_str_eq(b.out, "ownalloc 1000 blocks, checksum 124716\n");
    cr_expect_str_eq(b.err, "");
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    /* the allocator's 64 MiB arena, mapped inside its set-up, is on the mmap anon track */
    cJSON *m = cJSON_GetObjectItem(libprof_meta(j), "mmap_anon");
    cr_expect_eq(meta_num(m, "maps"), 1);
    cr_expect_eq(meta_num(m, "peak_bytes"), 64LL << 20);
    cJSON_Delete(j);
    run_free(&a);
    run_free(&b);
}

/* A child killed by SIGKILL cannot write its trace: its profiled parent converts it when it
 * reaps it (cut short: complete false, signal 9), and no raw spool stays behind. */
Test(coexist, a_killed_childs_trace_is_written_by_its_parent) {
    char *dir = make_tmpdir();
    const char *script =
        "import os, signal, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import sys,time\\nbuf=[bytearray(1000) for _ in range(100)]\\n'"
        " 'print(\"ready\", flush=True)\\ntime.sleep(60)'], stdout=subprocess.PIPE)\n"
        "assert p.stdout.readline() == b'ready\\n'\n"
        "p.send_signal(signal.SIGKILL)\n"
        "print('status', p.wait(), 'pid', p.pid)\n";
    const char *argv[] = {"/usr/bin/python3", "-c", script, NULL};
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "");
    int pid = 0;
    cr_assert_eq(sscanf(r.out, "status -9 pid %d", &pid), 1, "%s", r.out);
    cJSON *j = load_json(strfmt("%s/t/python3.11_%d.json", dir, pid));
    cr_assert_not_null(j, "the killed child's trace was not written");
    cJSON *m = libprof_meta(j);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(m, "complete")));
    cr_expect_eq(meta_num(m, "signal"), 9);
    cJSON_Delete(j);
    char *ls = strfmt("ls %s/t | grep -q '\\.lpt$\\|\\.tmp'", dir);
    cr_expect_neq(system(ls), 0, "a raw spool or temporary file stayed behind");
    run_free(&r);
}

/* CPython's own test_subprocess (libpython3.11-testsuite) passes under libprof — it checks
 * which descriptors children see, closes them all, dup2s onto low numbers, kills children —
 * and leaves nothing but traces. With it, sampling every process's CPU at 1000 Hz and recording
 * 16-frame allocation stacks, the suites that test signals, sockets, threads, selectors and
 * clocks (system calls interrupted or not, timers, SIGPROF, signal masks): they pass too. The
 * runner works as users run it, -j0: a worker process per test whose stderr the runner reads,
 * its last line taken for the result — libprof writes nothing there (its conversions of these
 * traces take seconds, which it used to say on stderr: the runner then failed test_subprocess).
 * The VSOCK cases fail on these machines without libprof as well, and test_signal's
 * test_stress_modifying_handlers is left out: it counts on its two threads trading the GIL while a
 * signal's action is SIG_IGN at the right moment, and on a loaded machine it fails without
 * libprof too (received no signal: 1 run in 300 bare beside four busy loops, 0 in 300 under
 * libprof with samples and stacks). What libprof could do to it — hold a signal while its action
 * changes — is signals::a_signal_held_before_a_wait_meets_the_action_it_was_sent_under.
 * A process the suites kill after every traced process above it has ended leaves its raw trace
 * (nobody is left to convert it): each such trace must convert. */
Test(coexist, cpython_suites_pass_sampled, .timeout = 900) {
    if (access("/usr/lib/python3.11/test/test_subprocess.py", R_OK) != 0)
        cr_skip_test("libpython3.11-testsuite is not installed");
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_SAMPLE_HZ=1000", "LIBPROF_STACKS=16", NULL};
    const char *argv[] = {"/usr/bin/python3",
                          "-m",
                          "test",
                          "-j0",
                          "test_subprocess",
                          "test_signal",
                          "test_socket",
                          "test_threading",
                          "test_selectors",
                          "test_time",
                          "-i",
                          "*VSOCK*",
                          "-i",
                          "test_stress_modifying_handlers",
                          NULL};
    struct run r;
    run_time_limit = 900;
    run_prog(&r, dir, env, argv);
    run_time_limit = 300;
    cr_expect_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_expect(strstr(r.out, "Tests result: SUCCESS") != NULL, "%s", r.out);
    cr_expect_null(strstr(r.out, "libprof:"), "%s", r.out);
    cr_expect_null(strstr(r.err, "libprof:"), "%s", r.err);
    wait_for_live_writers(strfmt("%s/t", dir));
    convert_leftovers(strfmt("%s/t", dir));
    DIR *d = opendir(strfmt("%s/t", dir));
    cr_assert_not_null(d);
    struct dirent *e;
    int traces = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.') continue;
        cr_expect(l > 5 && !strcmp(e->d_name + l - 5, ".json"), "left behind: %s", e->d_name);
        traces++;
    }
    closedir(d);
    cr_expect_gt(traces, 100);
    run_free(&r);
}

/* chromium with allocation stacks and CPU samples: same DOM as without libprof (it hung at
 * start-up: its built-in allocator was re-entered by libprof's set-up), every process's trace
 * written. */
Test(coexist, chromium_with_stacks_prints_the_same_dom, .timeout = 300) {
    if (access("/usr/bin/chromium", X_OK) != 0) cr_skip_test("chromium is not installed");
    char *dir = make_tmpdir();
    FILE *f = fopen(strfmt("%s/p.html", dir), "w");
    fputs("<html><body><p id=x>hello <b>libprof</b></p><script>document.getElementById('x').title='t'</script>"
          "</body></html>\n",
          f);
    fclose(f);
    char *page = strfmt("file://%s/p.html", dir), *ud1 = strfmt("--user-data-dir=%s/ud1", dir),
         *ud2 = strfmt("--user-data-dir=%s/ud2", dir);
    const char *argv1[] = {"/usr/bin/chromium",
                           "--headless",
                           "--no-sandbox",
                           "--disable-gpu",
                           "--disable-quic",
                           "--no-first-run",
                           "--disable-background-networking",
                           "--disable-component-update",
                           "--disable-sync",
                           ud1,
                           "--dump-dom",
                           page,
                           NULL};
    const char *argv2[] = {"/usr/bin/chromium",
                           "--headless",
                           "--no-sandbox",
                           "--disable-gpu",
                           "--disable-quic",
                           "--no-first-run",
                           "--disable-background-networking",
                           "--disable-component-update",
                           "--disable-sync",
                           ud2,
                           "--dump-dom",
                           page,
                           NULL};
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", "LIBPROF_SAMPLE_HZ=1000", NULL};
    struct run a, b;
    run_prog(&a, dir, NULL, argv1);
    run_prog(&b, dir, env, argv2);
    cr_assert_eq(a.status, 0, "%s", a.err);
    cr_expect_eq(b.status, 0, "%s", b.err);
    cr_expect(strstr(a.out, "libprof</b>") != NULL, "%s", a.out);
    cr_expect_str_eq(b.out, a.out);
    cr_expect_eq(count_lines_with(b.err, "libprof:"), 0, "%s", b.err);
    wait_for_live_writers(strfmt("%s/t", dir));
    /* A child chromium kills at shutdown while no profiled parent survives to reap it leaves its
     * raw trace (README, Limits): it must still be a whole trace that libprof-report converts. */
    int left = convert_leftovers(strfmt("%s/t", dir));
    cr_expect_leq(left, 2, "%d raw traces left by killed children", left);
    cr_expect_geq(check_traces(strfmt("%s/t", dir), 0), 5); /* renderers are killed at shutdown */
    /* chromium runs no Python: none of its CPU samples has a Python line (a native walk gone
     * astray in its JIT code once read garbage words with the top bit set as Python frames) */
    struct run py;
    run_prog(&py, dir, NULL,
             (const char *[]){"/usr/bin/python3", "-c",
                              "import glob, json\n"
                              "print(sum(len(json.load(open(f))['metadata']['libprof'].get('cpu_python_lines', []))\n"
                              "          for f in glob.glob('t/chromium_*.json')))",
                              NULL});
    cr_expect_str_eq(py.out, "0\n", "Python lines in chromium's samples: %s%s", py.out, py.err);
    run_free(&py);
    run_free(&a);
    run_free(&b);
}

/* --merge takes any number of traces (it stopped at 64). */
Test(coexist, merge_of_eighty_traces) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/p_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, "LIBPROF_EVENTS=alloc", NULL};
    const char *argv[] = {"/bin/sh", "-c", "for i in $(seq 80); do /bin/true; done", NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0);
    run_free(&r);
    char *cmd =
        strfmt("cd %s/t && ls *.json | wc -l | tr -d '\\n' > ../n && %s --merge *.json --chrome ../all.json --summary "
               "> ../report.txt 2>../err.txt",
               dir, REPORT);
    cr_assert_eq(system(cmd), 0, "%s", read_file(strfmt("%s/err.txt", dir), NULL));
    int n = atoi(read_file(strfmt("%s/n", dir), NULL));
    cr_expect_geq(n, 80);
    char *rep = read_file(strfmt("%s/report.txt", dir), NULL);
    cr_expect(strstr(rep, strfmt("%d traces merged", n)) != NULL, "%s", rep);
    cJSON *j = load_json(strfmt("%s/all.json", dir));
    cr_assert_not_null(j);
    cJSON *files = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "libprof_merge"); /* one entry per file */
    cr_expect_eq(cJSON_GetArraySize(files), n);
    cJSON_Delete(j);
}

/* A child that gives up root for a user who cannot write the trace directory: its trace is
 * written before the change (a note in it says so), nothing is left behind; where that user can
 * write, the spool is handed over and recording goes on. Whether it can is what the kernel says
 * for that user, every directory on the way included: a world-writable directory inside one the
 * user cannot enter is not writable (the child printed two libprof lines there, in the stderr its
 * parent captures). The program's stderr is the bare run's in every case. */
Test(coexist, giving_up_root_keeps_the_trace) {
    if (geteuid() != 0) cr_skip_test("needs root");
    static const struct {
        mode_t parent, tdir;
        int writable;
    } cases[] = {
        {0755, 01777, 1}, /* sticky, world-writable */
        {0711, 0777, 1},  /* reached through a directory the user may cross, not list */
        {0755, 0755, 0},  /* root's */
        {0700, 01777, 0}, /* world-writable, inside one the user cannot enter */
        {0755, 0766, 0},  /* writable by all, enterable by none but root (the group is root's: the child keeps it) */
    };
    const char *script = "import subprocess, sys\n"
                         "r = subprocess.run(['/usr/bin/python3', '-c', 'import os; print(os.getuid())'], user=65534, "
                         "capture_output=True)\n"
                         "print(r.stdout.decode().strip(), repr(r.stderr))\n";
    const char *argv[] = {"/usr/bin/python3", "-c", script, NULL};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *dir = make_tmpdir(), *tdir = strfmt("%s/t", dir);
        mkdir(tdir, cases[c].tdir);
        chmod(tdir, cases[c].tdir);
        chmod(dir, cases[c].parent);
        char *out = strfmt("LIBPROF_OUTPUT=%s/%%e_%%p.json", tdir);
        const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
        struct run bare, r;
        run_prog(&bare, "/", NULL, argv);
        run_prog(&r, "/", env, argv);
        cr_expect_eq(r.status, 0, "%s", r.err);
        cr_expect_str_eq(r.out, "65534 b''\n", "case %zu: the child's stderr: %s", c, r.out);
        cr_expect_str_eq(r.out, bare.out);
        cr_expect_str_eq(r.err, bare.err, "case %zu", c);
        if (cases[c].writable) {
            /* python, its child up to the exec, the child's python (as user 65534) */
            cr_expect_eq(check_all_traces(tdir), 3, "case %zu", c);
        } else {
            /* python, its child up to the user change (noted there); the new user cannot write there */
            cr_expect_eq(check_all_traces(tdir), 2, "case %zu", c);
            int noted = 0;
            DIR *d = opendir(tdir);
            struct dirent *e;
            while (d && (e = readdir(d)))
                if (e->d_name[0] != '.')
                    noted += notes_with(strfmt("%s/%s", tdir, e->d_name), "which cannot write") == 1;
            if (d) closedir(d);
            cr_expect_eq(noted, 1, "case %zu: the change of user is noted in one trace", c);
        }
        chmod(dir, 0755);
        run_free(&r);
        run_free(&bare);
    }
}

/* pids come back within a long run (32768 of them here): a process whose pid names an earlier
 * process's trace writes NAME.2 instead of overwriting it. The next pid is chosen through
 * /proc/sys/kernel/ns_last_pid (root in its pid namespace). */
Test(coexist, a_reused_pid_never_overwrites_an_earlier_trace) {
    char *dir = make_tmpdir();
    mkdir(strfmt("%s/t", dir), 0755);
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/p_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    const char *argv[] = {"/bin/true", NULL};
    /* (other processes of a busy machine may take the pid first: then again, with another) */
    for (int attempt = 0; attempt < 10; attempt++) {
        FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "r+");
        if (!f) cr_skip_test("cannot choose the next pid here");
        int last = 0;
        cr_assert_eq(fscanf(f, "%d", &last), 1);
        int want = last + 500;
        while (access(strfmt("/proc/%d", want), F_OK) == 0) want++;
        char *earlier = strfmt("%s/t/p_%d.json", dir, want);
        FILE *e = fopen(earlier, "w");
        fputs("{\"earlier\":1}\n", e);
        fclose(e);
        rewind(f);
        fprintf(f, "%d", want - 1);
        if (fclose(f) != 0) cr_skip_test("cannot choose the next pid here");
        struct run r;
        run_prog(&r, dir, env, argv);
        cr_assert_eq(r.status, 0);
        cr_expect_str_eq(r.err, "");
        run_free(&r);
        char *again = strfmt("%s/t/p_%d.2.json", dir, want);
        if (access(again, F_OK) != 0) continue; /* another process took it */
        cr_expect_str_eq(read_file(earlier, NULL), "{\"earlier\":1}\n", "the earlier trace was overwritten");
        cJSON *j = load_json(again);
        cr_assert_not_null(j);
        cr_expect_eq(meta_num(libprof_meta(j), "pid"), want);
        cJSON_Delete(j);
        return;
    }
    cr_skip_test("other processes took the chosen pid ten times");
}

/* `text` with every hexadecimal address (0x...) written 0x: what moves from run to run. */
static char *without_addresses(const char *text) {
    char *out = strdup(text), *o = out;
    for (const char *p = text; *p;) {
        if (p[0] == '0' && p[1] == 'x') {
            *o++ = '0', *o++ = 'x';
            for (p += 2; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++) {}
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

/* memray in a process libprof records: memray checks that each function it hooks is the one the
 * loader finds first, and says so where it is not ("Correcting symbol for mmap": libprof's
 * mmap64 was a function apart from its mmap, where the C library has one). What memray prints
 * reads as without libprof (addresses aside), in its native mode too, and both profilers see the
 * program's allocations. */
Test(coexist, memray_prints_what_it_prints_alone, .timeout = 300) {
    if (!venv_has("memray")) cr_skip_test("memray is not in the project's environment");
    char *dir = make_tmpdir();
    char *script = write_text(dir, "m.py", "x = [bytearray(4096) for i in range(2000)]\nprint(len(x))\n");
    for (int native = 0; native < 2; native++) {
        const char *argv[] = {VENV_PYTHON,
                              "-m",
                              "memray",
                              "run",
                              "-f",
                              "-o",
                              strfmt("%s/m.bin", dir),
                              native ? "--native" : script,
                              native ? script : NULL,
                              NULL};
        struct run bare, r;
        run_prog(&bare, dir, NULL, argv);
        cr_assert_eq(bare.status, 0, "%s", bare.err);
        const char *env[] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/t%d.json", dir, native),
                             "LIBPROF_SAMPLE_HZ=1000", "LIBPROF_STACKS=16", NULL};
        run_prog(&r, dir, env, argv);
        cr_expect_eq(r.status, 0, "%s", r.err);
        cr_expect_str_eq(without_addresses(r.err), without_addresses(bare.err), "native %d", native);
        cr_expect_not_null(strstr(r.out, "2000\n"));
        cJSON *j = load_json(strfmt("%s/t%d.json", dir, native));
        cr_assert_not_null(j);
        cr_expect_geq(meta_fn(libprof_meta(j), "malloc", "count"), 2000, "libprof sees the program's allocations");
        cJSON_Delete(j);
        run_free(&r);
        run_free(&bare);
    }
}
