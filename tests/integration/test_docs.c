/* The documentation kept true: the README's recipes run as written (tests/integration/
 * check_readme.py) and leave what they promise; every variable the preload reads (lib/vars.h)
 * and every option of libprof-report (tools/cli.c) and of the libprof command is in the manual
 * and its man page, and nothing documented is unknown to the code; the man pages render without
 * a warning and are what scripts/gen-man makes from the tables; the annotation API's page names
 * every function of <libprof.h>; `make install` puts the pages where man finds them; the front
 * page is short and the manual speaks of the program, not of its history. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <glob.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(docs, .timeout = 900);

static char *src(const char *rel) {
    size_t n;
    char *text = read_file(strfmt("%s/%s", LP_SOURCE_DIR, rel), &n);
    cr_assert_not_null(text, "cannot read %s", rel);
    return text;
}

static char *output_of(const char *cmd) {
    struct run r;
    run_prog(&r, LP_SOURCE_DIR, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s: %s", cmd, r.err);
    char *out = strdup(r.out);
    run_free(&r);
    return out;
}

/* Every match of `re` (POSIX ERE, group 1 if any) in `text`, each once, into names[]. */
static int matches(const char *text, const char *re, char names[][64], int cap) {
    regex_t rx;
    cr_assert_eq(regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE), 0);
    regmatch_t m[2];
    int n = 0;
    for (const char *p = text; n < cap && regexec(&rx, p, 2, m, 0) == 0; p += m[0].rm_eo) {
        int g = m[1].rm_so >= 0 ? 1 : 0;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(m[g].rm_eo - m[g].rm_so), p + m[g].rm_so);
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = !strcmp(names[i], name);
        if (!seen) snprintf(names[n++], 64, "%s", name);
    }
    regfree(&rx);
    return n;
}

static int has(const char *text, const char *name) { return strstr(text, name) != NULL; }

Test(docs, readme_recipes_run_as_written) {
    char *work = make_tmpdir();
    struct run r;
    run_prog(&r, NULL, NULL,
             (const char *[]){"/usr/bin/python3", LP_SOURCE_DIR "/tests/integration/check_readme.py",
                              LP_SOURCE_DIR "/README.md", LP_SOURCE_DIR, LP_BUILD_DIR, work, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(count_lines_with(r.out, ": ok ("), 9, "%s", r.out);
    run_free(&r);
    /* what the recipes say comes out, beyond the files */
    run_prog(&r, NULL, NULL,
             (const char *[]){"/usr/bin/python3", LP_SOURCE_DIR "/tests/integration/check_pftrace.py",
                              strfmt("%s/sql.pftrace", work), NULL});
    cr_assert_eq(r.status, 0, "sql.pftrace: %s", r.err);
    cJSON *pf = cJSON_Parse(r.out);
    cr_assert_not_null(pf);
    cr_expect_gt(meta_num(pf, "cpu_samples"), 0, "the first recipe's trace: no CPU samples: %s", r.out);
    cr_expect_gt(meta_num(pf, "counter_samples"), 0, "the first recipe's trace: no heap counter: %s", r.out);
    cJSON_Delete(pf);
    run_free(&r);
    char *html = read_file(strfmt("%s/py.html", work), NULL);
    cr_assert_not_null(html);
    cr_expect(has(html, "CPU by call stack"), "the Python recipe's page has no CPU flame graph");
    cr_expect(has(html, "Allocated bytes by call stack"), "the Python recipe's page has no allocation flame graph");
    cJSON *model = load_json(strfmt("%s/model.json", work));
    cr_assert_not_null(model);
    cr_expect_gt(meta_num(cJSON_GetObjectItem(libprof_meta(model), "torch"), "operators"), 1000);
    cJSON *et = load_json(strfmt("%s/et.json", work));
    cr_assert_not_null(et);
    cr_expect_gt(meta_num(cJSON_GetObjectItem(libprof_meta(et), "etdump"), "placed"), 100);
    cJSON_Delete(et);
    cJSON *storm = load_json(strfmt("%s/storm.json", work)); /* most allocations counted, not recorded */
    cr_assert_not_null(storm);
    cJSON *sampled = cJSON_GetObjectItem(cJSON_GetObjectItem(libprof_meta(storm), "stacks"), "sampled");
    cr_expect_gt(meta_num(sampled, "allocations_counted_only"), 100 * meta_num(sampled, "allocations_sampled"));
    cr_expect_gt(meta_fn(libprof_meta(storm), "malloc", "count"), 1000000);
    cJSON_Delete(storm);
    cJSON *svc = load_json(strfmt("%s/svc.json", work));
    cr_assert_not_null(svc);
    cr_expect(has(cJSON_GetObjectItem(libprof_meta(svc), "command")->valuestring, "http.server"));
    cJSON_Delete(model);
    cJSON_Delete(svc);
    free(html);
}

Test(docs, front_page_short_and_no_history_in_the_manual) {
    char *readme = src("README.md");
    cr_expect_leq(count_lines_with(readme, "\n") + 1, 200, "README.md is longer than 200 lines");
    cr_expect(has(readme, "](docs/README.md)") && has(readme, ".png)"),
              "the front page lacks the manual's link or the picture");
    glob_t g;
    cr_assert_eq(glob(LP_SOURCE_DIR "/docs/*.md", 0, NULL, &g), 0);
    cr_expect_geq(g.gl_pathc, 12);
    regex_t rx;
    cr_assert_eq(regcomp(&rx, "[Ii]ssue [0-9]|issue's|\\(issue|[Ii]ssue [0-9]+'s", REG_EXTENDED | REG_NOSUB), 0);
    cr_expect_neq(regexec(&rx, readme, 0, NULL, 0), 0, "README.md speaks of issues");
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char *t = read_file(g.gl_pathv[i], NULL);
        cr_expect_neq(regexec(&rx, t, 0, NULL, 0), 0, "%s speaks of issues", g.gl_pathv[i]);
        free(t);
    }
    regfree(&rx);
    globfree(&g);
}

/* Both ways: the table's variables in docs/variables.md and libprof(7); every LIBPROF_* the
 * manual, the README or a man page names is one the preload reads (or a macro of <libprof.h>). */
Test(docs, every_variable_documented_and_nothing_else) {
    char *table = output_of(LP_BUILD_DIR "/libprof-report --variables");
    static char vars[128][64], named[512][64];
    int nv = matches(table, "^(LIBPROF[A-Z_]*)=", vars, 128);
    cr_assert_geq(nv, 30);
    char *manual = src("docs/variables.md"), *man7 = src("docs/man/libprof.7");
    for (int i = 0; i < nv; i++) {
        cr_expect(has(manual, strfmt("`%s", vars[i])), "%s is not in docs/variables.md", vars[i]);
        cr_expect(has(man7, strfmt("\\fB%s\\fR", vars[i])), "%s is not in libprof(7)", vars[i]);
    }
    const char *pages[] = {"README.md",
                           "docs/variables.md",
                           "docs/getting-started.md",
                           "docs/outputs.md",
                           "docs/python.md",
                           "docs/ml-runtimes.md",
                           "docs/cpu-sampling.md",
                           "docs/long-runs.md",
                           "docs/stacks-and-memory.md",
                           "docs/jobs-and-mpi.md",
                           "docs/recording.md",
                           "docs/limits.md",
                           "docs/overhead.md",
                           "docs/libprof-report.md",
                           "docs/design.md",
                           "docs/man/libprof.1",
                           "docs/man/libprof.7",
                           "docs/man/libprof.3",
                           NULL};
    char *header = src("include/libprof.h");
    for (int p = 0; pages[p]; p++) {
        int n = matches(src(pages[p]), "(LIBPROF(_[A-Z]+)*)([^A-Za-z_]|$)", named, 512);
        for (int i = 0; i < n; i++) {
            int known = has(header, strfmt("define %s", named[i]));
            for (int v = 0; v < nv && !known; v++) known = !strcmp(vars[v], named[i]);
            cr_expect(known, "%s names %s, which the preload does not read", pages[p], named[i]);
        }
    }
}

/* Both ways for the options of libprof-report and of the libprof command. */
Test(docs, every_option_documented_and_nothing_else) {
    static char opts[64][64], named[256][64];
    struct {
        const char *help, *manual, *man;
    } tools[] = {{LP_BUILD_DIR "/libprof-report --help", "docs/libprof-report.md", "docs/man/libprof-report.1"},
                 {LP_BUILD_DIR "/libprof --help", "docs/getting-started.md", "docs/man/libprof.1"}};
    for (int k = 0; k < 2; k++) {
        char *help = output_of(tools[k].help), *manual = src(tools[k].manual), *man = src(tools[k].man);
        /* each option line of the help: its long name */
        int n = 0;
        for (const char *p = help; (p = strstr(p, "\n  ")); p++) {
            const char *o = strstr(p, "--");
            const char *eol = strchr(p + 1, '\n');
            if (!o || (eol && o > eol) || o > p + 10) continue;
            size_t len = strspn(o, "-abcdefghijklmnopqrstuvwxyz");
            snprintf(opts[n++], 64, "%.*s", (int)len, o);
        }
        cr_assert_geq(n, k ? 15 : 30, "%s: %d options", tools[k].help, n);
        for (int i = 0; i < n; i++) {
            cr_expect(has(manual, strfmt("`%s", opts[i])), "%s is not in %s", opts[i], tools[k].manual);
            char *roff = strfmt("\\fB\\-\\-%s\\fR", opts[i] + 2);
            for (char *c = roff + 8; *c; c++) /* hyphens inside the name are escaped too */
                if (*c == '-' && c[-1] != '\\') {
                    memmove(c + 1, c, strlen(c) + 1);
                    *c++ = '\\';
                }
            cr_expect(has(man, roff), "%s is not in %s", opts[i], tools[k].man);
        }
        /* what the manual's page of the tool shows as an option of it exists */
        int m = matches(manual, k ? "`libprof [^`]*(--[a-z][a-z-]*)" : "`(--[a-z][a-z-]*)", named, 256);
        for (int i = 0; i < m; i++) {
            int known = 0;
            for (int j = 0; j < n && !known; j++) known = !strcmp(opts[j], named[i]);
            cr_expect(known, "%s documents %s, which the tool does not take", tools[k].manual, named[i]);
        }
    }
    /* the libprof command's parser takes exactly what its usage text lists */
    char *script = src("scripts/libprof");
    static char parsed[64][64];
    char *help = output_of(LP_BUILD_DIR "/libprof --help");
    int np = 0;
    for (const char *p = script; (p = strstr(p, "--")) && np < 64; p += 2) {
        size_t len = strspn(p, "-abcdefghijklmnopqrstuvwxyz");
        if (p[len] == ')' && len > 2) snprintf(parsed[np++], 64, "%.*s", (int)len, p);
    }
    cr_assert_geq(np, 15);
    for (int i = 0; i < np; i++)
        cr_expect(has(help, strfmt("%s ", parsed[i])) || has(help, strfmt("%s\n", parsed[i])),
                  "libprof parses %s but its --help does not say", parsed[i]);
}

Test(docs, man_pages_render_and_are_made_from_the_tables) {
    char *tmp = make_tmpdir();
    output_of(strfmt("scripts/gen-man %s %s", LP_BUILD_DIR, tmp));
    const char *made[] = {"libprof.1", "libprof-report.1", "libprof.7"};
    for (int i = 0; i < 3; i++) {
        char *a = src(strfmt("docs/man/%s", made[i])), *b = read_file(strfmt("%s/%s", tmp, made[i]), NULL);
        cr_assert_not_null(b);
        /* the .TH line carries the date it was made */
        char *ea = strstr(a, "\n.SH"), *eb = strstr(b, "\n.SH");
        cr_expect(ea && eb && !strcmp(ea, eb), "docs/man/%s is not what scripts/gen-man makes now (make man)", made[i]);
    }
    glob_t g;
    cr_assert_eq(glob(LP_SOURCE_DIR "/docs/man/*.[137]", 0, NULL, &g), 0);
    cr_expect_eq(g.gl_pathc, 4);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct run r;
        run_prog(&r, NULL, NULL, (const char *[]){"groff", "-man", "-ww", "-z", g.gl_pathv[i], NULL});
        cr_expect_eq(r.status, 0, "%s", g.gl_pathv[i]);
        cr_expect_eq(r.err_len, 0, "%s: %s", g.gl_pathv[i], r.err);
        run_free(&r);
    }
    globfree(&g);
    /* the annotation API's page and chapter name every function of <libprof.h> */
    char *header = src("include/libprof.h"), *man3 = src("docs/man/libprof.3"), *chapter = src("docs/annotations.md");
    static char fns[32][64];
    int n = matches(header, "static inline [a-z ]+\\*?(libprof_[a-z]+(_[a-z]+)*)\\(", fns, 32);
    cr_assert_geq(n, 8);
    for (int i = 0; i < n; i++) {
        cr_expect(has(man3, fns[i]), "%s is not in libprof(3)", fns[i]);
        cr_expect(has(chapter, fns[i]), "%s is not in docs/annotations.md", fns[i]);
    }
}

Test(docs, installed_man_pages_open_with_man) {
    char *root = make_tmpdir();
    output_of(strfmt("make -s -C %s install BUILD=%s PREFIX=/usr/local DESTDIR=%s >/dev/null", LP_SOURCE_DIR,
                     LP_BUILD_DIR, root));
    const char *pages[] = {"man1/libprof.1", "man1/libprof-report.1", "man7/libprof.7", "man3/libprof.3", NULL};
    for (int i = 0; pages[i]; i++)
        cr_expect_eq(access(strfmt("%s/usr/local/share/man/%s", root, pages[i]), R_OK), 0, "%s", pages[i]);
    char *out =
        output_of(strfmt("MANPATH=%s/usr/local/share/man MANWIDTH=100 man libprof-report 2>/dev/null | col -b", root));
    cr_expect(has(out, "--by-shapes"), "man libprof-report: %.300s", out);
    out = output_of(strfmt("MANPATH=%s/usr/local/share/man MANWIDTH=100 man 7 libprof 2>/dev/null | col -b", root));
    cr_expect(has(out, "LIBPROF_TORCH_SHAPES"), "man 7 libprof: %.300s", out);
}
