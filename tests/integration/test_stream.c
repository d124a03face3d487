/* test_stream.c: the converter's one typed event stream, over a corpus of traces made here — C
 * with allocation stacks, Python with its frames, PyTorch's operators, ONNX Runtime's session,
 * ExecuTorch's runner, a followed run (its window kept as tapes), two processes merged, CPU
 * samples. For each trace:
 *   - its events taped and made again (a one-input --merge: a forked conversion's calls through
 *     a pipe, replayed into the merged trace) are byte for byte the JSON written directly, and its
 *     metadata the same;
 *   - the report of its .pftrace has the rows of the report of its JSON (the Perfetto reader
 *     makes the same slices and metadata the JSON gives). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(stream, .timeout = 300);

#define VENV_PY LP_VENV "/bin/python3"

/* A trace of `argv` under the preload (env extra) as DIR/NAME.lpt; NULL when its runtime is not
 * here (the program cannot start). */
static char *record(const char *dir, const char *name, const char *const *extra, const char *const *argv) {
    const char *env[8] = {"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/%s.lpt", dir, name)};
    int n = 2;
    for (; extra && *extra && n < 7; extra++) env[n++] = *extra;
    env[n] = NULL;
    struct run r;
    run_prog(&r, dir, env, argv);
    cr_assert_eq(r.status, 0, "%s: %s", name, r.err);
    run_free(&r);
    return strfmt("%s/%s.lpt", dir, name);
}

static void convert(const char *dir, const char *const *argv) {
    struct run r;
    run_prog(&r, dir, NULL, argv);
    cr_assert_eq(r.status, 0, "%s: %s", argv[1], r.err);
    run_free(&r);
}

/* The event array's text of a Chrome trace: from its start to its closing bracket. */
static char *events_text(const char *json) {
    char *t = read_file(json, NULL);
    cr_assert_not_null(t, "%s", json);
    char *end = strstr(t, "\n],");
    cr_assert_not_null(end, "%s: no event array's end", json);
    *end = '\0';
    return t;
}

/* The X events (slices) of a Chrome trace. */
static int x_events(const char *json) {
    cJSON *d = load_json(json), *e;
    cr_assert_not_null(d, "%s", json);
    int n = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "traceEvents")) {
        cJSON *ph = cJSON_GetObjectItem(e, "ph");
        n += cJSON_IsString(ph) && !strcmp(ph->valuestring, "X");
    }
    cJSON_Delete(d);
    return n;
}

/* libprof-report's report of `trace` from its second line (the first names the file). */
static char *rows(const char *trace) {
    struct run r;
    run_prog(&r, NULL, NULL, (const char *[]){REPORT, trace, "--by-shapes", NULL});
    cr_assert_eq(r.status, 0, "libprof-report %s: %s", trace, r.err);
    const char *nl = strchr(r.out, '\n');
    char *s = strdup(nl ? nl + 1 : "");
    run_free(&r);
    return s;
}

/* One trace of the corpus: its JSON and .pftrace (`conv`: the conversion's own options), and the
 * checks above. */
static void check(const char *dir, const char *name, const char *lpt, const char *const *conv) {
    char *json = strfmt("%s/%s.json", dir, name), *pf = strfmt("%s/%s.pftrace", dir, name),
         *merged = strfmt("%s/%s.merged.json", dir, name);
    const char *argv[16] = {REPORT, lpt, "--chrome", json, "--perfetto", pf, "-q"};
    int n = 7;
    for (; conv && *conv && n < 15; conv++) argv[n++] = *conv;
    argv[n] = NULL;
    convert(dir, argv);
    if (!conv) { /* (a followed conversion's window differs from a whole one: not taped) */
        convert(dir, (const char *[]){REPORT, lpt, "--merge", "--chrome", merged, "-q", NULL});
        char *a = events_text(json), *b = events_text(merged);
        cr_expect(strlen(a) > 100, "%s: events", name);
        cr_expect(!strcmp(a, b), "%s: the taped events differ from the JSON's (%zu and %zu bytes)", name, strlen(a),
                  strlen(b));
        free(a);
        free(b);
        cJSON *j = load_json(json), *m = load_json(merged);
        cr_assert(j && m, "%s: JSON", name);
        cJSON *mine = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "libprof"),
              *taped = cJSON_GetObjectItem(
                  cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "metadata"), "libprof_merge"), 0),
                  "libprof");
        cr_expect(mine && taped && cJSON_Compare(mine, taped, 1), "%s: the taped metadata differs", name);
        cJSON_Delete(j);
        cJSON_Delete(m);
    }
    char *rj = rows(json), *rp = rows(pf);
    cr_expect(strlen(rj) > 40, "%s: a report", name);
    cr_expect_str_eq(rp, rj, "%s: the .pftrace's report differs from the JSON's", name);
    free(rj);
    free(rp);
}

Test(stream, a_corpus_of_traces_taped_and_read_back) {
    char *dir = make_tmpdir();
    int kinds = 0;
    /* C, allocation stacks */
    check(dir, "c",
          record(dir, "c", (const char *[]){"LIBPROF_STACKS=16", NULL}, (const char *[]){PROG("sites"), NULL}), NULL);
    kinds++;
    /* Python, its frames */
    check(dir, "python",
          record(dir, "python", (const char *[]){"LIBPROF_STACKS=16", "LIBPROF_PYTHON=1", NULL},
                 (const char *[]){"/usr/bin/python3", LP_SOURCE_DIR "/tests/progs/pymem.py", NULL}),
          NULL);
    kinds++;
    /* CPU samples on four threads */
    check(dir, "sampled",
          record(dir, "sampled", (const char *[]){"LIBPROF_SAMPLE_HZ=999", "LIBPROF_STACKS=8", NULL},
                 (const char *[]){PROG("cpusplit"), "split", NULL}),
          NULL);
    kinds++;
    /* PyTorch's operators (Debian's 1.13) */
    check(dir, "torch",
          record(dir, "torch", NULL,
                 (const char *[]){"/usr/bin/python3", LP_SOURCE_DIR "/tests/progs/torch_ops.py", "run", NULL}),
          NULL);
    kinds++;
    /* a long run converted as a follower does: its window's short slices kept as tapes */
    char *svc = record(dir, "service", NULL, (const char *[]){PROG("service"), "3", NULL});
    check(dir, "followed", svc,
          (const char *[]){"--follow", "1", "--timeline", "1", "--timeline-min-ns", "100000000", NULL});
    kinds++;
    /* two processes merged: the merge of a merge's input is the same trace (above), and the
     * merged trace of two reads back as their events (the report of the two) */
    char *two = strfmt("%s/two.json", dir);
    convert(dir, (const char *[]){REPORT, strfmt("%s/c.lpt", dir), strfmt("%s/sampled.lpt", dir), "--merge", "--chrome",
                                  two, "-q", NULL});
    cJSON *t = load_json(two);
    cr_assert_not_null(t);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "metadata"), "libprof_merge")), 2);
    cJSON_Delete(t);
    char *r2 = rows(two);
    cr_expect(strstr(r2, "burn_a") || strstr(r2, "thread"), "the merged trace's report: %s", r2);
    free(r2);
    /* a .pftrace merged too: its slices (read as its JSON twin), beside a raw trace's events */
    char *mixed = strfmt("%s/mixed.json", dir);
    convert(dir, (const char *[]){REPORT, strfmt("%s/c.pftrace", dir), strfmt("%s/sampled.lpt", dir), "--merge",
                                  "--chrome", mixed, "-q", NULL});
    cr_expect_eq(x_events(mixed), x_events(strfmt("%s/c.json", dir)) + x_events(strfmt("%s/sampled.json", dir)),
                 "the slices of the .pftrace and of the raw trace, merged");
    kinds++;
    /* ONNX Runtime's Python session, ExecuTorch's C++ runner: where their runtimes are */
    if (access(VENV_PY, X_OK) == 0) {
        char *model = strfmt("%s/dyn.onnx", dir);
        convert(dir,
                (const char *[]){"/usr/bin/python3", LP_SOURCE_DIR "/tests/progs/mlp_onnx.py", model, "dynamic", NULL});
        check(dir, "ort",
              record(dir, "ort", (const char *[]){"LIBPROF_SAMPLE_HZ=1000", NULL},
                     (const char *[]){VENV_PY, LP_SOURCE_DIR "/tests/progs/ort_session.py", model, "20", "4096", "2",
                                      NULL}),
              NULL);
        kinds++;
    }
    if (access(PROG("etrun"), X_OK) == 0 && access(PROG("et_model.pte"), R_OK) == 0) {
        check(dir, "executorch",
              record(dir, "executorch", NULL,
                     (const char *[]){PROG("etrun"), PROG("et_model.pte"), "10", strfmt("%s/run.etdp", dir), NULL}),
              NULL);
        kinds++;
    }
    cr_log_info("stream: %d kinds of traces", kinds);
    cr_expect_geq(kinds, 6);
}
