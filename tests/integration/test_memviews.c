/* Memory views (issue 17) on a held-out program with known temporaries, a known heap at its
 * peak and blocks made after it (tests/progs/memviews.c): temporaries equal heaptrack's
 * (heaptrack_print from Debian), memray's threshold, the peak flame graph holds exactly the
 * blocks live at the peak, --at shows another instant, the CSV column. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(memviews, .timeout = 120);

static char *dir;
static void setup(void) { dir = make_tmpdir(); }

static cJSON *record(const char *name) {
    const char *argv[] = {PROG("memviews"), NULL};
    struct run r;
    char *out = strfmt("LIBPROF_OUTPUT=%s/%s.json", dir, name), *csv = strfmt("LIBPROF_CSV=%s/%s.csv", dir, name);
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, out, csv, "LIBPROF_STACKS=16", "LIBPROF_FLAMEGRAPH=1", NULL},
             argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "done\n");
    run_free(&r);
    cJSON *j = load_json(strfmt("%s/%s.json", dir, name));
    cr_assert_not_null(j);
    return j;
}

/* metadata.libprof.alloc_sites: temporaries of the site whose innermost frame is `fn` */
static long long site_temp(cJSON *meta, const char *fn) {
    cJSON *s;
    long long t = 0;
    int found = 0;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(meta, "alloc_sites")) {
        cJSON *f0 = cJSON_GetArrayItem(cJSON_GetObjectItem(s, "frames"), 0);
        if (cJSON_IsString(f0) && !strcmp(f0->valuestring, fn)) {
            t += (long long)cJSON_GetObjectItem(s, "temporary")->valuedouble;
            found = 1;
        }
    }
    return found ? t : -1;
}

Test(memviews, temporaries_equal_heaptracks, .init = setup) {
    cJSON *j = record("t");
    cJSON *meta = libprof_meta(j), *tmp = cJSON_GetObjectItem(meta, "temporary");
    long long total = (long long)cJSON_GetObjectItem(tmp, "calls")->valuedouble;
    /* known: temp_a 300, temp_b 120, big's block (freed right after), the last after_peak block */
    cr_expect_eq(total, 422);
    cr_expect_eq(site_temp(meta, "temp_a"), 300);
    cr_expect_eq(site_temp(meta, "temp_b"), 120);
    cr_expect_eq(site_temp(meta, "big"), 1);
    /* the CSV's column */
    size_t len;
    char *csv = read_file(strfmt("%s/t.csv", dir), &len);
    cr_assert_not_null(csv);
    cr_expect_not_null(strstr(csv, "temp_a < main"), "no temp_a site row");
    const char *row = strstr(csv, "temp_a < main");
    const char *eol = row ? strchr(row, '\n') : NULL;
    cr_expect(eol && eol - row > 4 && !strncmp(eol - 4, ",300", 4), "temp_a row: %.*s",
              eol && row ? (int)(eol - row) : 0, row ? row : "");
    /* heaptrack on the same program */
    if (access("/usr/bin/heaptrack", X_OK) != 0 || access("/usr/bin/heaptrack_print", X_OK) != 0) {
        cJSON_Delete(j);
        cr_skip_test("heaptrack is not installed");
    }
    struct run h, p;
    char *ht = strfmt("%s/ht", dir);
    const char *hargv[] = {"/usr/bin/heaptrack", "-o", ht, PROG("memviews"), NULL};
    run_prog(&h, dir, NULL, hargv);
    cr_assert_eq(h.status, 0, "%s%s", h.out, h.err);
    const char *pargv[] = {"/bin/sh", "-c",
                           strfmt("heaptrack_print -f %s.zst* 2>/dev/null || heaptrack_print -f %s.gz*", ht, ht), NULL};
    run_prog(&p, dir, NULL, pargv);
    cr_assert_eq(p.status, 0, "%s", p.err);
    const char *line = strstr(p.out, "temporary memory allocations: ");
    cr_assert_not_null(line, "%s", p.out);
    long long theirs = atoll(line + strlen("temporary memory allocations: "));
    cr_expect_eq(total, theirs, "libprof %lld, heaptrack %lld temporary allocations", total, theirs);
    /* per site: heaptrack's "N temporary allocations of M allocations in total (P%) from" lines,
     * the function on the next line */
    const char *most = strstr(p.out, "MOST TEMPORARY ALLOCATIONS");
    cr_assert_not_null(most);
    int compared = 0;
    for (const char *l = most; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *le = strchr(l, '\n');
        if (!le || le - l < 6 || strncmp(le - 5, " from", 5) || !strstr(l, " temporary allocations of ") ||
            strstr(l, " temporary allocations of ") > le)
            continue;
        long long n = atoll(l);
        char name[64] = "";
        sscanf(le + 1, "%63s", name);
        if (!strcmp(name, "temp_a") || !strcmp(name, "temp_b")) {
            cr_expect_eq(site_temp(meta, name), n, "%s: libprof %lld, heaptrack %lld", name, site_temp(meta, name), n);
            compared++;
        }
    }
    cr_expect_geq(compared, 2, "heaptrack's sites not found:\n%s", most);
    cJSON_Delete(j);
    run_free(&h);
    run_free(&p);
}

/* memray's definition: a block released before N more allocations of its thread. N = 10 adds the
 * 9 other after_peak blocks (freed in order after the 10 were made). */
Test(memviews, memray_threshold, .init = setup) {
    cJSON *j = record("m");
    cJSON_Delete(j);
    const char *lpt_argv[] = {PROG("memviews"), NULL};
    struct run r, rep;
    char *out = strfmt("LIBPROF_OUTPUT=%s/m.lpt", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL}, lpt_argv);
    cr_assert_eq(r.status, 0);
    const char *a1[] = {REPORT, strfmt("%s/m.lpt", dir), "--temporary-threshold", "1", NULL};
    run_prog(&rep, dir, NULL, a1);
    cr_expect_not_null(strstr(rep.out, "temporary allocations: 422 "), "%s", rep.out);
    run_free(&rep);
    const char *a10[] = {REPORT, strfmt("%s/m.lpt", dir), "--temporary-threshold", "10", NULL};
    run_prog(&rep, dir, NULL, a10);
    cr_expect_not_null(strstr(rep.out, "temporary allocations: 431 "), "%s", rep.out);
    run_free(&rep);
    const char *bad[] = {REPORT, strfmt("%s/m.lpt", dir), "--temporary-threshold", "0", NULL};
    run_prog(&rep, dir, NULL, bad);
    cr_expect_eq(rep.status, 2);
    run_free(&rep);
    run_free(&r);
}

/* Sum of the folded file's weights per leaf function. */
static long long folded_leaf(const char *text, const char *leaf) {
    long long sum = 0;
    char want[80];
    snprintf(want, sizeof want, ";%s ", leaf);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *eol = strchr(l, '\n'), *hit = strstr(l, want);
        if (hit && (!eol || hit < eol)) sum += atoll(hit + strlen(want));
    }
    return sum;
}

/* The heap at its peak: exactly big's 1 MiB and keep's 3600 bytes, nothing made after the peak;
 * the speedscope file's third profile says the same. */
Test(memviews, peak_flame_graph_holds_the_peak, .init = setup) {
    cJSON *j = record("p");
    long long peak = (long long)cJSON_GetObjectItem(libprof_meta(j), "peak_bytes")->valuedouble;
    size_t len;
    char *f = read_file(strfmt("%s/p.peak.folded", dir), &len);
    cr_assert_not_null(f);
    cr_expect_eq(folded_leaf(f, "big"), 1 << 20);
    cr_expect_eq(folded_leaf(f, "keep"), 3600);
    cr_expect_null(strstr(f, "after_peak"), "a block made after the peak: %s", f);
    cr_expect_null(strstr(f, "temp_"), "a temporary in the peak: %s", f);
    long long sum = 0;
    for (const char *l = f; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *eol = strchr(l, '\n'), *sp = l;
        for (const char *c = l; c < (eol ? eol : l + strlen(l)); c++)
            if (*c == ' ') sp = c;
        sum += atoll(sp);
    }
    cr_expect_eq(sum, peak, "folded total %lld, heap peak %lld", sum, peak);
    cJSON *ss = load_json(strfmt("%s/p.speedscope.json", dir));
    cr_assert_not_null(ss);
    cJSON *prof = cJSON_GetArrayItem(cJSON_GetObjectItem(ss, "profiles"), 2);
    cr_assert_not_null(prof);
    cr_expect_str_eq(cJSON_GetObjectItem(prof, "name")->valuestring, "live bytes at the heap's peak");
    cr_expect_eq((long long)cJSON_GetObjectItem(prof, "endValue")->valuedouble, peak);
    cJSON_Delete(ss);
    cJSON_Delete(j);
}

/* --at TIME: the heap at the end of the run holds none of these blocks. */
Test(memviews, peak_view_at_another_instant, .init = setup) {
    const char *argv[] = {PROG("memviews"), NULL};
    struct run r, rep;
    char *out = strfmt("LIBPROF_OUTPUT=%s/a.lpt", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL}, argv);
    cr_assert_eq(r.status, 0);
    const char *rargv[] = {
        REPORT, strfmt("%s/a.lpt", dir), "--folded-peak", strfmt("%s/end.folded", dir), "--at", "3600", NULL};
    run_prog(&rep, dir, NULL, rargv);
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    size_t len;
    char *f = read_file(strfmt("%s/end.folded", dir), &len);
    cr_assert_not_null(f);
    cr_expect_eq(folded_leaf(f, "big"), 0, "%s", f);
    cr_expect_eq(folded_leaf(f, "keep"), 0, "%s", f);
    run_free(&rep);
    const char *bad[] = {REPORT, strfmt("%s/a.lpt", dir), "--at", "soon", NULL};
    run_prog(&rep, dir, NULL, bad);
    cr_expect_eq(rep.status, 2);
    run_free(&rep);
    run_free(&r);
}

/* The HTML report in a real browser: Debian's chromium driven by playwright (tests/progs/browser.py
 * flame). A click on a frame zooms into it (its width becomes the graph's, frames outside its
 * subtree hide), the root zooms out, the search highlights and gives the share, no script error; a
 * screenshot of the whole page is written and is a real PNG of the page's size. */
Test(memviews, html_report_in_chromium, .init = setup, .timeout = 180) {
    if (!venv_has("playwright") || access("/usr/bin/chromium", X_OK) != 0)
        cr_skip_test("playwright (the project's Python environment) or chromium missing (scripts/install-deps)");
    const char *argv[] = {PROG("memviews"), NULL};
    struct run r, rep, b;
    char *out = strfmt("LIBPROF_OUTPUT=%s/h.lpt", dir);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, "LIBPROF_STACKS=16", NULL}, argv);
    cr_assert_eq(r.status, 0);
    char *html = strfmt("%s/h.html", dir), *shot = strfmt("%s/h.png", dir);
    const char *rargv[] = {REPORT, strfmt("%s/h.lpt", dir), "--html", html, NULL};
    run_prog(&rep, dir, NULL, rargv);
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    run_browser(&b, dir, "flame", html, shot);
    cr_assert_eq(b.status, 0, "%s%s", b.out, b.err);
    cJSON *o = cJSON_Parse(b.out);
    cr_assert_not_null(o, "%s", b.out);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "errors")), 0, "%s", b.out);
    double before = cJSON_GetObjectItem(o, "before")->valuedouble, after = cJSON_GetObjectItem(o, "after")->valuedouble;
    cr_expect(before > 50 && before < 900, "temp_b's width before: %g", before);
    cr_expect(after > 999 && after < 1001, "after the click: %g", after);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(o, "hidden")), "big still shown when zoomed into temp_b");
    cr_expect(fabs(cJSON_GetObjectItem(o, "reset")->valuedouble - before) < 0.5, "zoom out: %s", b.out);
    cr_expect_eq(cJSON_GetObjectItem(o, "matches")->valueint, 1, "%s", b.out);
    cr_expect_not_null(strstr(cJSON_GetObjectItem(o, "matched")->valuestring, "1 frames, 0.3%"), "%s", b.out);
    cr_expect_eq(cJSON_GetObjectItem(o, "sites")->valueint, 8, "%s", b.out);
    /* the screenshot: a PNG as wide as the viewport and taller than it (the whole page) */
    size_t len;
    unsigned char *png = (unsigned char *)read_file(shot, &len);
    cr_assert(png && len > 20000 && !memcmp(png, "\x89PNG", 4), "no screenshot");
    unsigned w = (unsigned)png[16] << 24 | png[17] << 16 | png[18] << 8 | png[19];
    unsigned h = (unsigned)png[20] << 24 | png[21] << 16 | png[22] << 8 | png[23];
    cr_expect(w == 1100 && h > 2000, "screenshot %ux%u", w, h);
    cJSON_Delete(o);
    run_free(&b);
    run_free(&rep);
    run_free(&r);
}

/* The time window: tests/progs/phases in its "sleep" mode allocates 100 x 1001 bytes, sleeps 1.5 s,
 * 100 x 1002 bytes, sleeps 1.5 s, 100 x 1003 bytes. In Debian's chromium (tests/progs/browser.py
 * window), a window typed over each phase recomputes the table to exactly that phase's mallocs;
 * dragging across the whole heap chart selects the whole run. */
static void pair(cJSON *o, const char *k, double *a, double *b) {
    cJSON *v = cJSON_GetObjectItem(o, k);
    *a = cJSON_GetArrayItem(v, 0) ? cJSON_GetArrayItem(v, 0)->valuedouble : -1;
    *b = cJSON_GetArrayItem(v, 1) ? cJSON_GetArrayItem(v, 1)->valuedouble : -1;
}

Test(memviews, time_window_in_chromium, .init = setup, .timeout = 180) {
    if (!venv_has("playwright") || access("/usr/bin/chromium", X_OK) != 0)
        cr_skip_test("playwright (the project's Python environment) or chromium missing (scripts/install-deps)");
    const char *argv[] = {PROG("phases"), "sleep", NULL};
    struct run r, rep, b;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/w.lpt", dir), NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *html = strfmt("%s/w.html", dir);
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, strfmt("%s/w.lpt", dir), "--html", html, NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    run_browser(&b, dir, "window", html, NULL);
    cr_assert_eq(b.status, 0, "%s%s", b.out, b.err);
    cJSON *o = cJSON_Parse(b.out);
    cr_assert_not_null(o, "%s", b.out);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "errors")), 0, "%s", b.out);
    double n, bytes;
    pair(o, "all", &n, &bytes);
    cr_expect(n == 300 && bytes == 300600, "whole run: %g mallocs, %g bytes", n, bytes);
    pair(o, "a", &n, &bytes);
    cr_expect(n == 100 && bytes == 100100, "0-1000 ms: %g mallocs, %g bytes", n, bytes);
    pair(o, "b", &n, &bytes);
    cr_expect(n == 100 && bytes == 100200, "1000-2500 ms: %g mallocs, %g bytes", n, bytes);
    pair(o, "sleeps", &n, &bytes);
    cr_expect(n == 1 && bytes > 1.4e9, "the sleep that started in 1000-2500 ms: %g, %g ns", n, bytes);
    double band = cJSON_GetObjectItem(o, "band")->valuedouble; /* 1.5 s of a 3 s run on the 740-wide chart */
    cr_expect(band > 300 && band < 450, "the window's band on the heap chart: %g wide", band);
    pair(o, "dragged", &n, &bytes);
    cr_expect(n == 300 && bytes == 300600, "dragged over the whole chart: %g mallocs, %g bytes", n, bytes);
    cJSON_Delete(o);
    run_free(&b);
    run_free(&rep);
    run_free(&r);
}
