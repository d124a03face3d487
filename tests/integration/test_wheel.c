/* test_wheel.c: libprof as Python users install profilers — the wheel `make wheel` builds
 * (scripts/libprof_build.py) is manylinux by auditwheel's own reading, carries libunwind and
 * cJSON, installs with `pip install --no-index` into new virtual environments of two interpreters,
 * and its `libprof`, `python -m libprof` and `libprof-report` profile a Python program and a C
 * program and read the traces; `pip install .` from the clone builds the same wheel (offline: the
 * build tools from the wheels install-deps keeps), and where the compiler is missing says which
 * packages bring it. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "libprof/format.h"

static char *dir;
static void setup(void) { dir = make_tmpdir(); }

/* The pyenv interpreter of version `minor` (3.minor), or NULL. */
static char *pyenv(int minor) {
    glob_t g;
    char *found = NULL;
    if (glob(strfmt("/root/.pyenv/versions/3.%d.*/bin/python3.%d", minor, minor), 0, NULL, &g) == 0 && g.gl_pathc)
        found = strdup(g.gl_pathv[0]);
    globfree(&g);
    return found;
}

/* A new virtual environment DIR/NAME of the pyenv interpreter 3.minor; NULL without one. */
static char *new_venv(int minor, const char *name) {
    char *py = pyenv(minor);
    if (!py) return NULL;
    char *venv = strfmt("%s/%s", dir, name);
    struct run r;
    run_prog(&r, dir, NULL, (const char *[]){py, "-m", "venv", venv, NULL});
    cr_assert_eq(r.status, 0, "%s -m venv: %s", py, r.err);
    run_free(&r);
    return venv;
}

Test(wheel, installs_into_new_environments_and_profiles, .init = setup, .timeout = 600) {
    struct run r;
    run_prog(&r, dir, NULL,
             (const char *[]){LP_VENV "/bin/python3", LP_SOURCE_DIR "/scripts/libprof_build.py", LP_BUILD_DIR,
                              strfmt("%s/dist", dir), LP_VENV, NULL});
    cr_assert_eq(r.status, 0, "libprof_build.py: %s", r.err);
    char *whl = strndup(r.out, strcspn(r.out, "\n"));
    run_free(&r);
    cr_expect(strstr(whl, "-py3-none-manylinux_") && strstr(whl, "_x86_64.whl"), "the wheel's name: %s", whl);
    run_prog(&r, dir, NULL, (const char *[]){LP_VENV "/bin/auditwheel", "show", whl, NULL});
    cr_expect(r.status == 0 && strstr(r.out, "is consistent with") && strstr(r.out, "manylinux_"), "%s%s", r.out,
              r.err);
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){"python3", "-m", "zipfile", "-l", whl, NULL});
    cr_expect(strstr(r.out, "libprof/bin/libunwind.so.8") && strstr(r.out, "libprof.libs/libcjson") &&
                  strstr(r.out, "libprof/bin/libprof.so") && strstr(r.out, "libprof/bin/libprof-report") &&
                  strstr(r.out, "libprof/man/libprof.1"),
              "the wheel holds:\n%s", r.out);
    run_free(&r);
    char *script = strfmt("%s/s.py", dir);
    FILE *f = fopen(script, "w");
    fputs("import json\nx = [json.dumps({'i': i}) for i in range(20000)]\nprint(len(x))\n", f);
    fclose(f);
    int tested = 0;
    const int minors[] = {9, 12};
    for (int k = 0; k < 2; k++) {
        char *venv = new_venv(minors[k], strfmt("v%d", minors[k]));
        if (!venv) continue;
        char *vpy = strfmt("%s/bin/python", venv), *cmd = strfmt("%s/bin/libprof", venv),
             *rep = strfmt("%s/bin/libprof-report", venv);
        run_prog(&r, dir, NULL, (const char *[]){strfmt("%s/bin/pip", venv), "install", "-q", "--no-index", whl, NULL});
        cr_assert_eq(r.status, 0, "pip install --no-index: %s", r.err);
        run_free(&r);
        run_prog(&r, dir, NULL, (const char *[]){cmd, "--version", NULL});
        cr_expect(r.status == 0 && !strncmp(r.out, "libprof ", 8), "libprof --version: %s", r.out);
        run_free(&r);
        /* the console script and python -m libprof, each on a Python program */
        const char *how[2][3] = {{cmd, NULL, NULL}, {vpy, "-m", "libprof"}};
        for (int h = 0; h < 2; h++) {
            char *trace = strfmt("%s/t%d_%d.json", dir, minors[k], h);
            const char *argv[12];
            int n = 0;
            for (int i = 0; i < 3 && how[h][i]; i++) argv[n++] = how[h][i];
            argv[n++] = "-q";
            argv[n++] = "-o";
            argv[n++] = trace;
            argv[n++] = "--";
            argv[n++] = vpy;
            argv[n++] = script;
            argv[n] = NULL;
            run_prog(&r, dir, NULL, argv);
            cr_expect(r.status == 0 && !strcmp(r.out, "20000\n"), "%s: %s %s", argv[0], r.out, r.err);
            run_free(&r);
            run_prog(&r, dir, NULL, (const char *[]){rep, trace, NULL});
            cr_expect(r.status == 0 && strstr(r.out, " slices"), "libprof-report %s: %s%s", trace, r.out, r.err);
            run_free(&r);
        }
        /* a C program with call stacks: libunwind found beside the wheel's libprof.so */
        char *ctrace = strfmt("%s/c%d.json", dir, minors[k]);
        run_prog(&r, dir, (const char *[]){"LD_DEBUG=libs", NULL},
                 (const char *[]){cmd, "-q", "-o", ctrace, "--stacks", "8", "--", PROG("allocs"), NULL});
        cr_expect(r.status == 7, "allocs under the wheel's libprof: %d", r.status);
        cr_expect(strstr(r.err, strfmt("%s/lib/python3.%d/site-packages/libprof/bin/libunwind.so.8", venv, minors[k])),
                  "libunwind was not the wheel's");
        run_free(&r);
        cJSON *j = load_json(ctrace);
        cJSON *st = cJSON_GetObjectItem(libprof_meta(j), "stacks");
        cr_expect(st && cJSON_GetObjectItem(st, "allocations_without_stack") &&
                      cJSON_GetObjectItem(st, "allocations_without_stack")->valuedouble == 0,
                  "the C program's allocations have their stacks");
        cJSON_Delete(j);
        tested++;
    }
    cr_assert_eq(tested, 2, "Python 3.9 and 3.12 under /root/.pyenv/versions");
}

/* pip install . from the clone, in a new 3.12 environment, with pip's build isolation and no
 * index: the build tools pyproject.toml names come from the wheels install-deps keeps in the
 * project's environment. The installed wheel is manylinux, as make wheel's, and profiles. */
Test(wheel, pip_install_from_the_clone, .init = setup, .timeout = 300) {
    if (access(LP_VENV "/wheelhouse", R_OK) != 0) cr_skip_test("no %s/wheelhouse (scripts/install-deps)", LP_VENV);
    char *venv = new_venv(12, "v");
    if (!venv) cr_skip_test("no Python 3.12 under /root/.pyenv/versions");
    struct run r;
    run_prog(&r, dir, NULL,
             (const char *[]){strfmt("%s/bin/pip", venv), "install", "-q", "--no-index", "--find-links",
                              LP_VENV "/wheelhouse", LP_SOURCE_DIR, NULL});
    cr_assert_eq(r.status, 0, "pip install .: %s%s", r.out, r.err);
    run_free(&r);
    size_t len;
    char *wheel =
        read_file(strfmt("%s/lib/python3.12/site-packages/libprof-" LIBPROF_VERSION ".dist-info/WHEEL", venv), &len);
    cr_assert_not_null(wheel);
    cr_expect_not_null(strstr(wheel, "Tag: py3-none-manylinux_"), "%s", wheel);
    char *trace = strfmt("%s/t.json", dir);
    run_prog(&r, dir, NULL,
             (const char *[]){strfmt("%s/bin/python", venv), "-m", "libprof", "-q", "-o", trace, "--stacks", "8", "--",
                              PROG("allocs"), NULL});
    cr_expect_eq(r.status, 7, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL, (const char *[]){strfmt("%s/bin/libprof-report", venv), trace, NULL});
    cr_expect(r.status == 0 && strstr(r.out, " slices"), "%s%s", r.out, r.err);
    run_free(&r);
}

/* Where the compiler and make are missing (a PATH without them), pip install . stops before
 * building and says which Debian packages bring them and how. */
Test(wheel, pip_install_names_what_is_missing, .init = setup) {
    char *venv = new_venv(12, "v");
    if (!venv) cr_skip_test("no Python 3.12 under /root/.pyenv/versions");
    struct run r;
    run_prog(&r, dir, NULL,
             (const char *[]){"/usr/bin/env", strfmt("PATH=%s/bin", venv), strfmt("%s/bin/pip", venv), "install",
                              "--no-build-isolation", "--no-index", LP_SOURCE_DIR, NULL});
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "building libprof needs a C compiler (cc), make, strip") &&
                  strstr(r.err, "apt-get install --no-install-recommends gcc make binutils"),
              "%s%s", r.out, r.err);
    run_free(&r);
}
