/* harness.h: helpers for integration tests that run real programs under the preload. */
#ifndef LP_TEST_HARNESS_H
#define LP_TEST_HARNESS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#define PRELOAD LP_BUILD_DIR "/libprof.so"
#define REPORT LP_BUILD_DIR "/libprof-report"
#define PROG(name) LP_BUILD_DIR "/progs/" name
/* The project's Python environment (scripts/install-deps: PyPI's packages of scripts/requirements.txt). */
#define VENV_PYTHON LP_VENV "/bin/python3"

struct run {
    int status; /* exit code, or 128 + signal; 124 when it outran run_time_limit */
    int core;   /* killed by a signal, with a core dump */
    char *out, *err;
    size_t out_len, err_len;
    double user_s; /* its user CPU time (and its waited-for children's) */
};

/* Run argv with the test's environment minus LD_PRELOAD and LIBPROF_*, plus `env` ("K=V" strings,
 * NULL-terminated, may be NULL), in directory `cwd` (NULL = current). Returns 0 or -1. */
int run_prog(struct run *r, const char *cwd, const char *const *env, const char *const *argv);
void run_free(struct run *r);
/* The core file size limit run_prog gives its programs (0 by default: crashing test programs
 * leave no core files). */
extern long run_core_limit;
/* The wall-clock seconds run_prog gives a program (300 by default): past them the program and
 * every process of its group are killed and the run's status is 124, its stderr saying so — a
 * hung program fails its test rather than holding the suite (and CI) forever. */
extern long run_time_limit;

char *make_tmpdir(void); /* fresh directory under /tmp (caller frees the string) */
char *read_file(const char *path, size_t *len);
cJSON *load_json(const char *path);   /* parsed with cJSON, NULL if invalid */
int python_json_ok(const char *path); /* 1 if Python's json module loads the file strictly */
cJSON *libprof_meta(cJSON *trace);    /* trace.metadata.libprof */
long long meta_fn(cJSON *meta, const char *fn, const char *field); /* functions.fn.field, -1 if absent */
long long meta_num(cJSON *meta, const char *field);
/* How many of the notes a trace keeps (metadata.libprof.notes: what libprof noted while it worked,
 * never written on the program's stderr) contain `needle`; -1 when the file is no trace. */
int notes_with(const char *trace, const char *needle);
int count_lines_with(const char *text, const char *needle);
/* The names in `dir` (not . and ..), sorted, one space between (caller frees). */
char *dir_names(const char *dir);
/* Paths of the traces in `dir` named like PREFIX.*.json (child processes of a run whose trace is
 * PREFIX.json), sorted; their number in *n. */
char **child_traces(const char *dir, const char *prefix, int *n);
/* tests/integration/check_trace.py's summary of a Chrome trace (strict JSON, integer ids, nested
 * slices, paired flows), or NULL with the reason in *err (caller frees both). */
cJSON *check_trace_py(const char *path, char **err);
char *strfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* `text` written to DIR/NAME; its path (caller frees), NULL if it cannot be written. */
char *write_text(const char *dir, const char *name, const char *text);
/* 1 when the project's Python environment has package `pkg` (its directory in site-packages). */
int venv_has(const char *pkg);
/* The environment's python3 running `args` (NULL-terminated: a script, then its arguments) in DIR.
 * Returns 0 or -1, as run_prog. */
int run_venv(struct run *r, const char *dir, const char *const *args);
/* tests/progs/browser.py MODE HTML [SHOT]: the page in Debian's chromium through playwright; its
 * JSON on r->out. */
int run_browser(struct run *r, const char *dir, const char *mode, const char *html, const char *shot);
/* Every Python interpreter installed that libprof reads: pyenv's 3.MIN and later builds, then
 * Debian's /usr/bin/python3. Their paths in out[], their number returned. */
int python_interpreters(char out[][256], int cap, int min_minor);

/* memusage's counts for a program run: calls per function. Returns 0 or -1. */
struct memusage {
    long long malloc, realloc, calloc, free;
};
int run_memusage(struct memusage *m, const char *cwd, const char *const *env, const char *const *argv, char **out);

#endif
