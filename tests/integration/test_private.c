/* Private traces: a trace holds the command line, every file the program opened and its source
 * lines, so every file libprof and libprof-report create is the owner's only (0600, directories
 * 0700) under the usual umask, whatever writes it — the program, its children, the background
 * converter, libprof-report converting or merging. LIBPROF_FILE_MODE and --file-mode share them;
 * nothing is made wider than its input or the file it replaces. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(private, .timeout = 120);

static unsigned mode_of(const char *path) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s is missing", path);
    return (unsigned)st.st_mode & 0777;
}

/* Every file under `dir` has mode `fmode`, every directory `dmode`; returns how many files. */
static int check_tree(const char *dir, unsigned fmode, unsigned dmode) {
    int files = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = strfmt("%s/%s", dir, e->d_name);
        struct stat st;
        cr_assert_eq(lstat(p, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            cr_expect_eq(st.st_mode & 0777, dmode, "directory %s: %o", p, st.st_mode & 0777);
            files += check_tree(p, fmode, dmode);
        } else {
            cr_expect_eq(st.st_mode & 0777, fmode, "%s: %o, not %o", p, st.st_mode & 0777, fmode);
            files++;
        }
        free(p);
    }
    closedir(d);
    return files;
}

static void wait_trace(const char *file) {
    struct run w;
    run_prog(&w, NULL, NULL, (const char *[]){REPORT, "--wait", file, "--timeout", "60", NULL});
    cr_assert_eq(w.status, 0, "%s", w.err);
    run_free(&w);
}

/* The default: a shell and its children (LIBPROF=1: the default directory, JSON and CSV), raw
 * traces kept (packed: .lpz), flame graphs, a background conversion keeping its raw trace too;
 * then libprof-report's every output. */
Test(private, every_file_is_the_owners_only) {
    umask(022);
    char *dir = make_tmpdir();
    char *cmd = strfmt("%s status 0; %s status 0", PROG("reliab"), PROG("reliab"));
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, "LIBPROF=1", "LIBPROF_STACKS=4", "LIBPROF_FLAMEGRAPH=1",
                              "LIBPROF_KEEP_RAW=1", NULL},
             (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "", "every conversion went through, nothing to say");
    run_free(&r);
    char *bg = strfmt("%s/libprof_profiling/bg.json", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", bg), "LIBPROF_CONVERT=background",
                              "LIBPROF_SUMMARY=1", "LIBPROF_KEEP_RAW=1", NULL},
             (const char *[]){PROG("reliab"), "fsize", "1000", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    wait_trace(bg);
    run_free(&r);
    char *pd = strfmt("%s/libprof_profiling", dir);
    cr_expect_eq(mode_of(pd), 0700);
    /* libprof-report's outputs, from a kept raw trace */
    DIR *d = opendir(pd);
    struct dirent *e;
    char *lpt = NULL, *json = NULL;
    int kept = 0, unpacked = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        kept += n > 9 && !strcmp(e->d_name + n - 9, ".json.lpz");
        unpacked += n > 4 && !strcmp(e->d_name + n - 4, ".lpt");
        if (!lpt && !strncmp(e->d_name, "profile_", 8) && n > 9 && !strcmp(e->d_name + n - 9, ".json.lpz"))
            lpt = strfmt("%s/%s", pd, e->d_name); /* (one with stacks, for the flame graphs) */
        if (!json && !strncmp(e->d_name, "profile_", 8) && n > 5 && !strcmp(e->d_name + n - 5, ".json") &&
            !strstr(e->d_name, "speedscope"))
            json = strfmt("%s/%s", pd, e->d_name);
    }
    closedir(d);
    cr_assert_not_null(lpt, "no kept raw trace");
    /* a finished process's kept raw trace is no orphan: no later exit converts or removes it */
    cr_expect_eq(kept, 4, "LIBPROF_KEEP_RAW: the shell's, its two children's and bg's raw traces, found %d", kept);
    cr_expect_eq(unpacked, 0, "a kept raw trace stayed unpacked");
    char *rd = strfmt("%s/report", dir);
    const char *argv[] = {REPORT,         lpt,
                          "--chrome",     strfmt("%s/c.json", rd),
                          "--csv",        strfmt("%s/c.csv", rd),
                          "--folded",     strfmt("%s/a.folded", rd),
                          "--speedscope", strfmt("%s/s.json", rd),
                          "-q",           NULL};
    mkdir(rd, 0700);
    run_prog(&r, dir, NULL, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL,
             (const char *[]){REPORT, lpt, "--html", strfmt("%s/r.html", rd), "--events-csv", strfmt("%s/e.csv", rd),
                              "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_prog(&r, dir, NULL,
             (const char *[]){REPORT, "--merge", json, bg, "--chrome", strfmt("%s/m.json", rd), "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    int n = check_tree(dir, 0600, 0700);
    cr_expect_geq(n, 20, "%d files checked", n);
}

/* LIBPROF_FILE_MODE=0644 shares a run's files (directories 0755); libprof-report keeps the
 * stricter of its input and --file-mode, and never widens a file it replaces; a stricter umask
 * still wins. */
Test(private, shared_on_request_never_wider_than_the_input) {
    umask(022);
    char *dir = make_tmpdir();
    struct run r;
    char *out = strfmt("%s/shared/t.lpt", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", out), "LIBPROF_FILE_MODE=0644", NULL},
             (const char *[]){PROG("reliab"), "fsize", "1000", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cr_expect_eq(mode_of(out), 0644);
    cr_expect_eq(mode_of(strfmt("%s/shared", dir)), 0755);
    /* 0644 asked, 0644 input: shared */
    run_prog(&r, dir, NULL,
             (const char *[]){REPORT, out, "--chrome", strfmt("%s/a.json", dir), "--file-mode", "0644", "-q", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cr_expect_eq(mode_of(strfmt("%s/a.json", dir)), 0644);
    /* no --file-mode: the owner's only, whatever the input */
    run_prog(&r, dir, NULL, (const char *[]){REPORT, out, "--chrome", strfmt("%s/b.json", dir), "-q", NULL});
    run_free(&r);
    cr_expect_eq(mode_of(strfmt("%s/b.json", dir)), 0600);
    /* 0644 asked of a private input: stays private */
    chmod(out, 0600);
    run_prog(&r, dir, NULL,
             (const char *[]){REPORT, out, "--chrome", strfmt("%s/c.json", dir), "--file-mode", "0644", "-q", NULL});
    run_free(&r);
    cr_expect_eq(mode_of(strfmt("%s/c.json", dir)), 0600);
    /* replacing a file of mode 0640 with --file-mode 0644 (input 0644 again): 0640 */
    chmod(out, 0644);
    char *d = strfmt("%s/d.json", dir);
    fclose(fopen(d, "w"));
    chmod(d, 0640);
    run_prog(&r, dir, NULL, (const char *[]){REPORT, out, "--chrome", d, "--file-mode", "0644", "-q", NULL});
    run_free(&r);
    cr_expect_eq(mode_of(d), 0640);
    /* a stricter umask wins over LIBPROF_FILE_MODE */
    umask(077);
    char *u = strfmt("%s/u.json", dir);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", u), "LIBPROF_FILE_MODE=0644", NULL},
             (const char *[]){PROG("reliab"), "fsize", "1000", NULL});
    run_free(&r);
    umask(022);
    cr_expect_eq(mode_of(u), 0600);
}
