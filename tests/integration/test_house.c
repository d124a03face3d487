/* house: the layout rules of the tree hold (preload/ and tools/ share lib/, never each other;
 * libprof.so calls none of its own exported hooks; the hook helpers live in one header), and
 * what libprof does for itself — its timer thread, its flushes, its exit conversion, the
 * converters it starts — never shows in a user's trace or to the program. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(house, .timeout = 120);

/* Every symbol libprof.so exports against every symbol its relocations name: a relocation
 * against an export would be libprof calling (or taking the address of) its own hook. */
Test(house, no_relocation_names_an_export_of_libprof) {
    const char *argv[] = {"/bin/sh", "-c",
                          "nm -D --defined-only " PRELOAD
                          " | awk '{print $3}' | sed 's/@.*//' | sort -u > /tmp/lp-exp.$$; "
                          "readelf -rW " PRELOAD " | awk 'NR > 3 && $5 ~ /^[A-Za-z_]/ {print $5}' | sed 's/@.*//' | "
                          "sort -u | comm -12 - /tmp/lp-exp.$$; wc -l < /tmp/lp-exp.$$ >&2; rm -f /tmp/lp-exp.$$",
                          NULL};
    struct run r;
    run_prog(&r, NULL, NULL, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_gt(atoi(r.err), 100, "the export list was not read: %s", r.err);
    cr_expect_str_eq(r.out, "", "libprof.so relocates its own exports: %s", r.out);
    run_free(&r);
}

/* Includes respect the layers: include/ is public and stands alone; lib/ includes lib/ and the
 * public format only; preload/ includes preload/, lib/ and include/; nothing includes tools/
 * but tools/; only preload/hooks/hook.h defines the hook helpers. */
Test(house, includes_respect_the_layers) {
    const char *argv[] = {"/usr/bin/python3", "-c",
                          "import os, re, sys\n"
                          "root = sys.argv[1]\n"
                          "bad = []\n"
                          "for top in ['include', 'lib', 'preload', 'tools']:\n"
                          "    for dp, dn, fn in os.walk(os.path.join(root, top)):\n"
                          "        for f in fn:\n"
                          "            if not f.endswith(('.c', '.h')): continue\n"
                          "            p = os.path.join(dp, f); rel = os.path.relpath(p, root)\n"
                          "            src = open(p).read()\n"
                          "            for inc in re.findall(r'#include \"([^\"]+)\"', src):\n"
                          "                tgt = os.path.normpath(os.path.join(os.path.dirname(rel), inc))\n"
                          "                if not os.path.exists(os.path.join(root, tgt)): tgt = inc\n"
                          "                if tgt.startswith('libprof/'): tgt = 'include/' + tgt\n"
                          "                layer = tgt.split('/')[0]\n"
                          "                ok = {'include': {'include'}, 'lib': {'lib', 'include'},\n"
                          "                      'preload': {'preload', 'lib', 'include'},\n"
                          "                      'tools': {'tools', 'lib', 'include'}}[top]\n"
                          "                if layer not in ok: bad.append(rel + ' includes ' + inc)\n"
                          "            if top == 'preload' and not rel.endswith('hook.h') and \\\n"
                          "               re.search(r'#define (REAL|I|U|BEGIN|RECORD|LP_HOOK)\\b', src):\n"
                          "                bad.append(rel + ' defines a hook helper')\n"
                          "print('\\n'.join(bad))\n",
                          LP_SOURCE_DIR, NULL};
    struct run r;
    run_prog(&r, NULL, NULL, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "\n", "%s", r.out);
    run_free(&r);
}

static int count_thread_names(cJSON *j, const char *name) {
    int n = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name"), *args = cJSON_GetObjectItem(ev, "args");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "thread_name") && args &&
            !strcmp(cJSON_GetObjectItem(args, "name")->valuestring, name))
            n++;
    }
    return n;
}

/* LIBPROF_DURATION and LIBPROF_DELAY run a timer thread of libprof's: it is no thread of the
 * program's, so the trace shows no pthread_create the program did not make and no track of it;
 * its markers sit on the process. */
Test(house, the_timer_thread_is_not_in_the_trace) {
    const char *confs[] = {"LIBPROF_DURATION=0.3", "LIBPROF_DELAY=0.1"};
    for (int k = 0; k < 2; k++) {
        char *dir = make_tmpdir();
        char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir);
        const char *env[] = {"LD_PRELOAD=" PRELOAD, out, confs[k], NULL};
        const char *argv[] = {"/usr/bin/python3", "-c", "import time\nfor i in range(6): time.sleep(0.1)\n", NULL};
        struct run r;
        run_prog(&r, dir, env, argv);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cJSON *j = load_json(strfmt("%s/t.json", dir));
        cr_assert_not_null(j);
        cJSON *calls = cJSON_GetObjectItem(libprof_meta(j), "calls");
        cr_expect_null(cJSON_GetObjectItem(calls, "pthread_create"), "%s: a pthread_create of libprof's", confs[k]);
        cr_expect_null(cJSON_GetObjectItem(calls, "thread"), "%s", confs[k]);
        cr_expect_eq(count_thread_names(j, "libprof-timer"), 0, "%s: the timer has a track", confs[k]);
        /* the marker is there, on the process (its pid as thread) */
        int markers = 0;
        cJSON *ev;
        long long pid = meta_num(libprof_meta(j), "pid");
        cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
            cJSON *cat = cJSON_GetObjectItem(ev, "cat");
            if (cJSON_IsString(cat) && !strcmp(cat->valuestring, "control")) {
                markers++;
                cr_expect_eq((long long)cJSON_GetObjectItem(ev, "tid")->valuedouble, pid);
            }
        }
        cr_expect_geq(markers, 1, "%s", confs[k]);
        cJSON_Delete(j);
        run_free(&r);
    }
}

/* Tiny chunks (many flushes) and a JSON + CSV conversion at exit: none of libprof's own file
 * operations is the program's. The program writes one file of its own, 7 bytes. */
Test(house, flushes_and_the_exit_conversion_are_not_the_programs_io) {
    char *dir = make_tmpdir();
    char *out = strfmt("LIBPROF_OUTPUT=%s/t.json", dir), *csv = strfmt("LIBPROF_CSV=%s/t.csv", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, csv, "LIBPROF_BUFFER_KB=4", NULL};
    const char *argv[] = {"/usr/bin/python3", "-c",
                          "x = [bytearray(1000) for _ in range(20000)]\nopen('own.txt', 'w').write('program')\n", NULL};
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cJSON *j = load_json(strfmt("%s/t.json", dir));
    cr_assert_not_null(j);
    cJSON *m = libprof_meta(j), *f;
    cr_expect_gt(meta_num(m, "chunks"), 20, "not many flushes: %lld", meta_num(m, "chunks"));
    int own = 0;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(m, "files")) {
        const char *p = cJSON_GetObjectItem(f, "path")->valuestring;
        cr_expect(!strstr(p, dir) || strstr(p, "own.txt"), "libprof's own file in the trace: %s", p);
        if (strstr(p, "own.txt")) {
            own = 1;
            cr_expect_eq(meta_num(f, "write_bytes"), 7);
        }
    }
    cr_expect(own, "the program's own file is missing");
    cJSON_Delete(j);
    run_free(&r);
}

/* The converter libprof starts for a killed child is no child the program can see: after its
 * own child is reaped, wait() says there is none left, as without libprof. */
Test(house, converters_are_not_the_programs_children) {
    char *dir = make_tmpdir();
    const char *script =
        "import os, signal, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'print(1, flush=True); import time; time.sleep(60)'],\n"
        "                     stdout=subprocess.PIPE)\n"
        "p.stdout.readline()\n"
        "p.send_signal(signal.SIGKILL)\n"
        "p.wait()\n"
        "time.sleep(0.2)\n"
        "try:\n"
        "    print('reaped', os.waitpid(-1, 0))\n"
        "except ChildProcessError:\n"
        "    print('no child left')\n";
    const char *argv[] = {"/usr/bin/python3", "-c", script, NULL};
    char *out = strfmt("LIBPROF_OUTPUT=%s/t/%%e_%%p.json", dir);
    const char *env[] = {"LD_PRELOAD=" PRELOAD, out, NULL};
    struct run a, b;
    run_prog(&a, dir, NULL, argv);
    run_prog(&b, dir, env, argv);
    cr_expect_str_eq(a.out, "no child left\n");
    cr_expect_str_eq(b.out, a.out);
    cr_expect_str_eq(b.err, "", "%s", b.err);
    run_free(&a);
    run_free(&b);
}

/* The drawing of the tree in ARCHITECTURE.md names every source file of include/, preload/, lib/
 * and tools/ (by its name, in the block that draws the tree; "x.c/.h" names both): a newcomer
 * finds any file there. */
Test(house, the_drawing_names_every_file) {
    const char *argv[] = {"/usr/bin/python3", "-c",
                          "import os, re, sys\n"
                          "root = sys.argv[1]\n"
                          "text = open(os.path.join(root, 'ARCHITECTURE.md')).read()\n"
                          "draw = text[text.index('```'):text.index('```', text.index('```') + 3)]\n"
                          "words = set(re.findall(r'[A-Za-z0-9_.-]+', draw))\n"
                          "words |= {m + '.h' for m in re.findall(r'([A-Za-z0-9_-]+)\\.c/\\.h', draw)}\n"
                          "missing = []\n"
                          "for top in ('include', 'preload', 'lib', 'tools'):\n"
                          "    for d, _, fs in os.walk(os.path.join(root, top)):\n"
                          "        for f in fs:\n"
                          "            if f.endswith(('.c', '.h', '.map')) and f not in words and os.path.join(d, "
                          "f)[len(root) + 1:] not in draw:\n"
                          "                missing.append(os.path.join(d, f)[len(root) + 1:])\n"
                          "print(' '.join(sorted(missing)))\n",
                          LP_SOURCE_DIR, NULL};
    struct run r;
    run_prog(&r, NULL, NULL, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "\n", "files the drawing does not name: %s", r.out);
    run_free(&r);
}
