/* harness.c: running programs with and without the preload, reading what they write. */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

char *strfmt(const char *fmt, ...) {
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

char *make_tmpdir(void) {
    char *t = strdup("/tmp/libprof-test-XXXXXX");
    if (!mkdtemp(t)) {
        free(t);
        return NULL;
    }
    return t;
}

static int keep_env(const char *e) {
    return strncmp(e, "LD_PRELOAD=", 11) != 0 && strncmp(e, "LIBPROF", 7) != 0 && strncmp(e, "MALLOC_", 7) != 0;
}

long run_core_limit;
long run_time_limit = 300;

/* Waits for `pid` at most run_time_limit seconds (a pidfd polled: no latency, no signal); past
 * them its process group is killed. 1 when it was. */
static int wait_limited(pid_t pid) {
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) return 0; /* (a kernel without pidfds: wait4 alone) */
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    do r = poll(&p, 1, (int)(run_time_limit * 1000));
    while (r < 0 && errno == EINTR);
    close(fd);
    if (r != 0) return 0;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    return 1;
}

int run_prog(struct run *r, const char *cwd, const char *const *env, const char *const *argv) {
    memset(r, 0, sizeof *r);
    char out_path[] = "/tmp/libprof-out-XXXXXX", err_path[] = "/tmp/libprof-err-XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    if (fo < 0 || fe < 0) return -1;
    size_t n = 0, extra = 0;
    while (environ[n]) n++;
    while (env && env[extra]) extra++;
    char **envp = calloc(n + extra + 2, sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (keep_env(environ[i])) envp[k++] = environ[i];
    /* frames by function (LIBPROF_LINES=0), as the tests written before native source lines
     * name them; a test of the lines sets LIBPROF_LINES=1 */
    int lines_set = 0;
    for (size_t i = 0; i < extra; i++) lines_set |= !strncmp(env[i], "LIBPROF_LINES=", 14);
    if (!lines_set) envp[k++] = "LIBPROF_LINES=0";
    for (size_t i = 0; i < extra; i++) envp[k++] = (char *)env[i];
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit core = {(rlim_t)run_core_limit, (rlim_t)run_core_limit};
        setrlimit(RLIMIT_CORE, &core);
        /* The program starts as from a terminal, whatever started the tests: a shell's background
         * job has SIGINT and SIGQUIT ignored (then Python installs no KeyboardInterrupt handler, and
         * CPython's own test_generators and test_threading fail, with libprof or without), a run
         * under nohup SIGHUP (then crashers' SIGHUP kills nothing) */
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setpgid(0, 0); /* (its group: what a run that outlives its limit leaves is killed with it) */
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        if (cwd && chdir(cwd) != 0) _exit(126);
        execvpe(argv[0], (char *const *)argv, envp);
        _exit(127);
    }
    free(envp);
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    int killed = pid > 0 && wait_limited(pid);
    wait4(pid, &st, 0, &ru);
    r->user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->core = WIFSIGNALED(st) && WCOREDUMP(st);
    close(fo);
    close(fe);
    r->out = read_file(out_path, &r->out_len);
    r->err = read_file(err_path, &r->err_len);
    if (killed) {
        r->status = 124;
        char *e = NULL;
        if (asprintf(&e, "%s\n[run_prog: %s killed after %ld s]\n", r->err ? r->err : "", argv[0], run_time_limit) >=
            0) {
            free(r->err);
            r->err = e;
            r->err_len = strlen(e);
        }
    }
    unlink(out_path);
    unlink(err_path);
    return pid > 0 ? 0 : -1;
}

void run_free(struct run *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

cJSON *load_json(const char *path) {
    char *s = read_file(path, NULL);
    if (!s) return NULL;
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

int python_json_ok(const char *path) {
    /* Python's json module is strict: it rejects NaN-free-but-invalid escapes, trailing commas,
     * control characters in strings and bad UTF-8 (read as text). */
    const char *argv[] = {"/usr/bin/python3", "-c",
                          "import json,sys\n"
                          "d=json.load(open(sys.argv[1],encoding='utf-8'))\n"
                          "ev=d['traceEvents']\n"
                          "assert all(isinstance(e['pid'],int) and isinstance(e['tid'],int) for e in ev)\n"
                          "print(len(ev))",
                          path, NULL};
    struct run r;
    if (run_prog(&r, NULL, NULL, argv) != 0) return 0;
    int ok = r.status == 0;
    if (!ok) fprintf(stderr, "python json check failed for %s: %s\n", path, r.err ? r.err : "");
    run_free(&r);
    return ok;
}

cJSON *libprof_meta(cJSON *trace) {
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(trace, "metadata"), "libprof");
}

long long meta_num(cJSON *meta, const char *field) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, field);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

long long meta_fn(cJSON *meta, const char *fn, const char *field) {
    cJSON *f = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "functions"), fn);
    if (!f) return -1;
    return meta_num(f, field);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char **child_traces(const char *dir, const char *prefix, int *n) {
    DIR *d = opendir(dir);
    char **out = NULL;
    *n = 0;
    if (!d) return NULL;
    size_t pl = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, pl) || e->d_name[pl] != '.' || l < pl + 7 || strcmp(e->d_name + l - 5, ".json"))
            continue;
        out = realloc(out, (size_t)(*n + 1) * sizeof *out);
        out[(*n)++] = strfmt("%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(out, (size_t)*n, sizeof *out, cmp_str);
    return out;
}

char *dir_names(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return strdup("");
    char **v = NULL;
    size_t n = 0, len = 1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        v = realloc(v, (n + 1) * sizeof *v);
        v[n++] = strdup(e->d_name);
        len += strlen(e->d_name) + 1;
    }
    closedir(d);
    qsort(v, n, sizeof *v, cmp_str);
    char *out = malloc(len), *o = out;
    *o = '\0';
    for (size_t i = 0; i < n; i++) {
        o += sprintf(o, "%s%s", i ? " " : "", v[i]);
        free(v[i]);
    }
    free(v);
    return out;
}

int count_lines_with(const char *text, const char *needle) {
    int c = 0;
    if (!text) return 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) c++;
    return c;
}

/* glibc's memusage library prints its table on stderr at exit: "malloc|  calls  bytes  failed". */
int run_memusage(struct memusage *m, const char *cwd, const char *const *env, const char *const *argv, char **out) {
    const char *lib = "/usr/lib/x86_64-linux-gnu/libmemusage.so";
    char *pre = strfmt("LD_PRELOAD=%s", lib);
    const char *e[16];
    int k = 0;
    e[k++] = pre;
    for (int i = 0; env && env[i] && k < 15; i++) e[k++] = env[i];
    e[k] = NULL;
    struct run r;
    int rc = run_prog(&r, cwd, e, argv);
    free(pre);
    if (rc != 0 || !r.err) return -1;
    memset(m, 0xff, sizeof *m);
    /* strip colour escapes */
    char *s = r.err, *d = r.err;
    while (*s) {
        if (*s == 0x1b) {
            while (*s && *s != 'm') s++;
            if (*s) s++;
            continue;
        }
        *d++ = *s++;
    }
    *d = '\0';
    struct {
        const char *name;
        long long *slot;
    } rows[] = {{"malloc|", &m->malloc}, {"realloc|", &m->realloc}, {"calloc|", &m->calloc}, {"free|", &m->free}};
    for (size_t i = 0; i < 4; i++) {
        const char *p = strstr(r.err, rows[i].name);
        if (p) *rows[i].slot = atoll(p + strlen(rows[i].name));
    }
    if (out) *out = r.out, r.out = NULL;
    run_free(&r);
    return 0;
}

cJSON *check_trace_py(const char *path, char **err) {
    const char *argv[] = {"/usr/bin/python3", LP_SOURCE_DIR "/tests/integration/check_trace.py", path, NULL};
    struct run r;
    *err = NULL;
    if (run_prog(&r, NULL, NULL, argv) != 0) {
        *err = strdup("cannot run /usr/bin/python3");
        return NULL;
    }
    cJSON *j = NULL;
    if (r.status != 0)
        *err = strdup(r.err ? r.err : "check_trace.py failed");
    else if (!(j = cJSON_Parse(r.out)))
        *err = strdup("check_trace.py printed no JSON");
    run_free(&r);
    return j;
}

char *write_text(const char *dir, const char *name, const char *text) {
    char *path = strfmt("%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        free(path);
        return NULL;
    }
    return path;
}

int venv_has(const char *pkg) {
    glob_t g;
    char *pat = strfmt("%s/lib/python3*/site-packages/%s", LP_VENV, pkg);
    int ok = glob(pat, 0, NULL, &g) == 0;
    if (ok) globfree(&g);
    free(pat);
    return ok;
}

int run_venv(struct run *r, const char *dir, const char *const *args) {
    const char *argv[16] = {VENV_PYTHON};
    int n = 1;
    for (int i = 0; args && args[i] && n < 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    return run_prog(r, dir, NULL, argv);
}

int run_browser(struct run *r, const char *dir, const char *mode, const char *html, const char *shot) {
    return run_venv(r, dir, (const char *[]){LP_SOURCE_DIR "/tests/progs/browser.py", mode, html, shot, NULL});
}

int python_interpreters(char out[][256], int cap, int min_minor) {
    int n = 0;
    glob_t g;
    if (glob("/root/.pyenv/versions/3.*/bin/python3", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && n < cap; i++) {
            const char *v = strstr(g.gl_pathv[i], "/versions/3.") + 12;
            if (atoi(v) >= min_minor) snprintf(out[n++], 256, "%s", g.gl_pathv[i]);
        }
        globfree(&g);
    }
    if (access("/usr/bin/python3", X_OK) == 0 && n < cap) snprintf(out[n++], 256, "/usr/bin/python3");
    return n;
}

int notes_with(const char *trace, const char *needle) {
    cJSON *j = load_json(trace);
    if (!j) return -1;
    int n = 0;
    cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(libprof_meta(j), "notes")) n +=
        cJSON_IsString(x) && strstr(x->valuestring, needle) != NULL;
    cJSON_Delete(j);
    return n;
}
