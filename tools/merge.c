/* merge.c: `libprof-report --merge A B ... --chrome OUT` in bounded memory, writing no file but
 * OUT — the traces of a job's processes on one timeline without holding any of them.
 *
 * A raw trace is converted by a process of its own (forked) whose Chrome writer records its calls
 * on a tape (json.h: each event's fields and arguments, typed) into a pipe: the merge takes each
 * input's next event off its pipe (the child waits while the pipe is full) and makes its calls
 * again into OUT, its timestamp shifted by the input's wall-clock start against the earliest
 * one's (hosts' clocks aligned by skew.c on the ranks' first MPI_Barrier or MPI_Init, found by a
 * scan of each raw trace's first events before it is converted). A JSON input — libprof's, or
 * another profiler's — is read through a 1 MiB window, its events cut out of the text one at a
 * time (its "ts" rewritten); a .pftrace of libprof's is read whole (compact) as the document its
 * JSON twin is (pftrace_in.c: its slices and metadata). The events go out k-way on their timestamps (each input's next
 * waits in a one-event buffer). Memory: the windows and pipes, one event per input and each
 * input's metadata — independent of the number of events. A process that was a job's rank is
 * named "rank N (host)" and sorted by rank. Each input's libprof metadata goes into
 * metadata.libprof_merge, with its shift. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "lib/convert.h"
#include "lib/json.h"
#include "lib/out.h"
#include "lib/reader.h"
#include "lib/vec.h"
#include "pftrace_in.h"
#include "report.h"

#define WINDOW (1u << 20)
#define TAIL (8u << 20) /* where a JSON input's metadata is looked for */

struct src {
    const char *path;
    int tape;   /* a raw trace's calls through a pipe (else a JSON file's text, or `doc`'s events) */
    cJSON *doc; /* a .pftrace read as its JSON twin (pftrace_in.c); `item` its next event */
    cJSON *item;
    pid_t child;
    int fd;
    char *buf;
    size_t pos, len;
    int eof, done;
    /* the pending event: its text (JSON) or its records (tape) */
    char *ev;
    size_t evlen, evcap;
    double ts;            /* shifted, us (the merge's order) */
    int64_t ts_ns;        /* (tape) its own, -1: none */
    size_t ts_at, ts_end; /* (JSON) where its "ts" number sits in ev */
    /* what it says of itself */
    int64_t origin_ns, pid, rank;
    char host[64];
    char *meta; /* its metadata.libprof: JSON text, or (tape) the records of its value */
    size_t metalen;
    int64_t sync_ns[2]; /* job.sync_ns: first MPI_Barrier, MPI_Init ends (skew.c) */
    int64_t shift_ns, skew_ns;
};

/* ---- reading an input -------------------------------------------------------------------------- */

static int fill(struct src *s) {
    if (s->eof) return 0;
    if (s->pos > 0) {
        memmove(s->buf, s->buf + s->pos, s->len - s->pos);
        s->len -= s->pos;
        s->pos = 0;
    }
    ssize_t k;
    do k = read(s->fd, s->buf + s->len, WINDOW - s->len);
    while (k < 0 && errno == EINTR);
    if (k <= 0) {
        s->eof = 1;
        return 0;
    }
    s->len += (size_t)k;
    return 1;
}

static int getc_s(struct src *s) {
    if (s->pos >= s->len && !fill(s)) return -1;
    return (unsigned char)s->buf[s->pos++];
}

/* `n` more bytes of the input into ev (0), -1 when it ends first or memory runs out. */
static int take(struct src *s, size_t n) {
    if (LP_RESERVE(s->ev, s->evcap, s->evlen + n) != 0) return -1;
    while (n) {
        if (s->pos >= s->len && !fill(s)) return -1;
        size_t k = s->len - s->pos < n ? s->len - s->pos : n;
        memcpy(s->ev + s->evlen, s->buf + s->pos, k);
        s->evlen += k, s->pos += k, n -= k;
    }
    return 0;
}

/* (tape) The next record into ev: its op, 0 at the end, -1 when cut short. */
static int record(struct src *s) {
    size_t at = s->evlen;
    if (s->pos >= s->len && !fill(s)) return 0;
    if (take(s, 5) != 0) return -1;
    uint32_t len;
    memcpy(&len, s->ev + at + 1, 4);
    return take(s, len) == 0 ? (unsigned char)s->ev[at] : -1;
}

/* (tape) The next event's records into ev (0), 1 at the input's end (its metadata kept), -1. */
static int next_tape(struct src *s) {
    s->evlen = 0;
    int op = record(s);
    if (op <= 0) return op < 0 ? -1 : 1;
    if (op == T_META) { /* the metadata's value follows, then the end */
        size_t from = s->evlen;
        while ((op = record(s)) > 0 && op != T_END) {}
        if (op != T_END) return -1;
        s->metalen = s->evlen - from - 5;
        if (!(s->meta = malloc(s->metalen ? s->metalen : 1))) return -1;
        memcpy(s->meta, s->ev + from, s->metalen);
        return 1;
    }
    if (op != T_EVENT || s->evlen < LP_JSON_TAPE_EVENT_MIN) return -1;
    while ((op = record(s)) > 0 && op != T_EVENT_END) {}
    if (op != T_EVENT_END) return -1;
    s->ts_ns = lp_json_tape_ts(s->ev);
    s->ts = s->ts_ns >= 0 ? (double)(s->ts_ns + s->shift_ns) / 1e3 : 0;
    return 0;
}

/* JSON outside its strings, one character at a time: the nesting of objects and arrays. */
struct jscan {
    int depth, in_str, esc;
};
/* Feed `c`; 1 when it closes the outermost object or array. */
static int jscan(struct jscan *j, int c) {
    if (j->in_str) {
        if (j->esc)
            j->esc = 0;
        else if (c == '\\')
            j->esc = 1;
        else if (c == '"')
            j->in_str = 0;
        return 0;
    }
    if (c == '"')
        j->in_str = 1;
    else if (c == '{' || c == '[')
        j->depth++;
    else if (c == '}' || c == ']')
        return --j->depth == 0;
    return 0;
}

/* (JSON) Find `"traceEvents"` and its '['. */
static int seek_events(struct src *s) {
    const char *key = "\"traceEvents\"";
    size_t m = 0;
    int c;
    while ((c = getc_s(s)) >= 0) {
        m = (c == key[m]) ? m + 1 : (c == key[0] ? 1 : 0);
        if (!key[m]) break;
    }
    while ((c = getc_s(s)) >= 0 && c != '[') {}
    return c == '[' ? 0 : -1;
}

/* (JSON) The next event object of the array into ev (0), or 1 at its end, -1 on damage. */
static int next_text(struct src *s) {
    int c;
    do c = getc_s(s);
    while (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == ',');
    if (c == ']' || c < 0) return 1;
    if (c != '{') return -1;
    s->evlen = 0;
    s->ts_at = s->ts_end = 0;
    struct jscan j = {0, 0, 0};
    do {
        if (LP_RESERVE(s->ev, s->evcap, s->evlen + 1) != 0) return -1;
        s->ev[s->evlen++] = (char)c;
        int quoted = j.in_str;
        if (jscan(&j, c)) break;
        if (!quoted && c == ':' && j.depth == 1 && !s->ts_at && s->evlen >= 5 &&
            !memcmp(s->ev + s->evlen - 5, "\"ts\":", 5))
            s->ts_at = s->evlen; /* the number follows */
        if (s->ts_at && !s->ts_end && s->evlen > s->ts_at && !j.in_str && (c == ',' || c == '}'))
            s->ts_end = s->evlen - 1;
    } while ((c = getc_s(s)) >= 0);
    if (j.depth != 0) return -1;
    if (s->ts_at && !s->ts_end) s->ts_end = s->evlen - 1;
    s->ts = s->ts_at ? strtod(s->ev + s->ts_at, NULL) + (double)s->shift_ns / 1e3 : 0;
    return 0;
}

/* Is the pending event a process_name metadata event (replaced by the rank's name)? */
static int is_process_name(const struct src *s) {
    if (s->tape) return lp_json_tape_is(s->ev, s->evlen, 'M', "process_name");
    return memmem(s->ev, s->evlen, "\"name\":\"process_name\"", 21) && memmem(s->ev, s->evlen, "\"ph\":\"M\"", 8);
}

/* (doc) The next event, its time shifted, as JSON text into ev (0), or 1 at the end. */
static int next_doc(struct src *s) {
    cJSON *e = s->item;
    if (!e) return 1;
    s->item = e->next;
    cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
    s->ts = cJSON_IsNumber(ts) ? ts->valuedouble + (double)s->shift_ns / 1e3 : 0;
    if (cJSON_IsNumber(ts)) cJSON_SetNumberValue(ts, s->ts);
    char *text = cJSON_PrintUnformatted(e);
    if (!text) return -1;
    s->evlen = 0;
    s->ts_at = 0; /* (its time is in the text already) */
    size_t n = strlen(text);
    int rc = LP_RESERVE(s->ev, s->evcap, n) != 0 ? -1 : 0;
    if (!rc) memcpy(s->ev, text, s->evlen = n);
    free(text);
    return rc;
}

/* The input's next event to merge (a rank's own process name left out); done at its end. */
static int advance(struct src *s) {
    int k;
    do k = s->tape ? next_tape(s) : s->doc ? next_doc(s) : next_text(s);
    while (k == 0 && s->rank >= 0 && is_process_name(s));
    s->done = k != 0;
    return k < 0 ? -1 : 0;
}

/* The value after `"key"` and its colon in s (JSON whitespace allowed around the colon), or NULL. */
static const char *value_of(const char *s, const char *key) {
    size_t k = strlen(key);
    for (const char *p = s; (p = strstr(p, key)) != NULL; p += k) {
        if (p == s || p[-1] != '"' || p[k] != '"') continue;
        const char *v = p + k + 1;
        while (*v == ' ' || *v == '\n' || *v == '\r' || *v == '\t') v++;
        if (*v != ':') continue;
        v++;
        while (*v == ' ' || *v == '\n' || *v == '\r' || *v == '\t') v++;
        return v;
    }
    return NULL;
}

/* (JSON) What the file's tail says: start time, pid, rank, host, the libprof metadata object. */
static void read_tail(struct src *s) {
    s->rank = -1;
    struct stat st;
    if (fstat(s->fd, &st) != 0 || st.st_size <= 0) return;
    size_t n = (size_t)st.st_size < TAIL ? (size_t)st.st_size : TAIL;
    char *t = malloc(n + 1);
    if (!t) return;
    if (pread(s->fd, t, n, st.st_size - (off_t)n) != (ssize_t)n) {
        free(t);
        return;
    }
    t[n] = '\0';
    char *m = (char *)value_of(t, "libprof"); /* (the tail holds no NUL before its end) */
    if (m && *m == '{') {
        char *p = m;
        struct jscan j = {0, 0, 0};
        while (p < t + n && !jscan(&j, (unsigned char)*p)) p++;
        if (p < t + n && (s->meta = strndup(m, (size_t)(p - m + 1)))) s->metalen = (size_t)(p - m + 1);
    }
    const char *q;
    if (s->meta) {
        if ((q = value_of(s->meta, "start_time_unix_ns"))) s->origin_ns = strtoll(q, NULL, 10);
        if ((q = value_of(s->meta, "pid"))) s->pid = strtoll(q, NULL, 10);
        if ((q = value_of(s->meta, "job")) && *q == '{') {
            const char *r = value_of(q, "rank"), *h = value_of(q, "host");
            const char *b = value_of(q, "MPI_Barrier"), *in = value_of(q, "MPI_Init");
            if (r) s->rank = strtoll(r, NULL, 10);
            if (b) s->sync_ns[0] = strtoll(b, NULL, 10);
            if (in) s->sync_ns[1] = strtoll(in, NULL, 10);
            if (h && *h == '"') {
                h++;
                size_t k = strcspn(h, "\"");
                snprintf(s->host, sizeof s->host, "%.*s", (int)(k < 63 ? k : 63), h);
            }
        }
    }
    free(t);
}

/* (raw) What the trace says of itself, then its conversion started in a child writing the tape
 * into a pipe (read by s->fd). */
static int start_tape(struct src *s, const struct lp_convert_opts *base, int quiet) {
    struct lp_reader r;
    char err[512];
    if (lp_reader_open(&r, s->path, err, sizeof err) != 0) {
        fprintf(stderr, "libprof-report: %s\n", err);
        return -1;
    }
    struct rp_sync sy;
    rp_sync_of_reader(&r, &sy);
    s->origin_ns = sy.origin_ns, s->rank = sy.rank, s->pid = r.hdr.pid;
    memcpy(s->host, sy.host, sizeof s->host);
    memcpy(s->sync_ns, sy.sync_ns, sizeof s->sync_ns);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0 || (s->child = fork()) < 0) {
        fprintf(stderr, "libprof-report: %s: %s\n", s->path, strerror(errno));
        lp_reader_close(&r);
        return -1;
    }
    if (s->child == 0) { /* the conversion, its writer's calls into the pipe */
        close(p[0]);
        struct lp_convert_opts o = *base; /* (the options of its own conversion: the same events) */
        for (int k = 0; k < LP_OUT_COUNT; k++) o.path[k] = NULL;
        o.fds = 0, o.chrome_tape = 1, o.progress = NULL, o.snapshot = NULL;
        LP_CONVERT_FD(&o, LP_OUT_CHROME, p[1]);
        if (o.alloc_min == UINT64_MAX) o.alloc_min = r.hdr.alloc_min;
        int rc = lp_convert(&r, &o, err, sizeof err);
        if (rc != 0 && !quiet) fprintf(stderr, "libprof-report: %s: %s\n", s->path, err);
        _exit(rc != 0);
    }
    close(p[1]);
    lp_reader_close(&r);
    s->tape = 1;
    s->fd = p[0];
    return 0;
}

/* (doc) A .pftrace, read whole (it is compact) as its JSON twin: its metadata, its events. */
static int start_doc(struct src *s) {
    size_t len = 0, skipped, unmatched;
    char *data = NULL, err[256];
    FILE *f = fopen(s->path, "rb");
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && (data = malloc((size_t)n)) && fseek(f, 0, SEEK_SET) == 0 &&
            fread(data, 1, (size_t)n, f) == (size_t)n)
            len = (size_t)n;
    }
    if (f) fclose(f);
    if (!len || !(s->doc = rp_pftrace_doc(data, len, &skipped, &unmatched, err, sizeof err))) {
        fprintf(stderr, "libprof-report: %s: %s\n", s->path, len ? err : strerror(errno));
        free(data);
        return -1;
    }
    free(data);
    s->item = cJSON_GetObjectItemCaseSensitive(s->doc, "traceEvents")->child;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s->doc, "metadata"), "libprof");
    if (!m) return 0;
    if ((s->meta = cJSON_PrintUnformatted(m))) s->metalen = strlen(s->meta);
    const cJSON *v, *job = cJSON_GetObjectItemCaseSensitive(m, "job");
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(m, "start_time_unix_ns")))
        s->origin_ns = (int64_t)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(m, "pid"))) s->pid = (int64_t)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(job, "rank"))) s->rank = (int64_t)v->valuedouble;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(job, "host")))
        snprintf(s->host, sizeof s->host, "%s", v->valuestring);
    const cJSON *sync = cJSON_GetObjectItemCaseSensitive(job, "sync_ns");
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(sync, "MPI_Barrier")))
        s->sync_ns[0] = (int64_t)v->valuedouble;
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(sync, "MPI_Init"))) s->sync_ns[1] = (int64_t)v->valuedouble;
    return 0;
}

static int start(struct src *s, const struct lp_convert_opts *base, int quiet) {
    FILE *probe = fopen(s->path, "rb");
    char magic[8] = {0};
    if (!probe) {
        fprintf(stderr, "libprof-report: %s: %s\n", s->path, strerror(errno));
        return -1;
    }
    size_t got = fread(magic, 1, 8, probe);
    fclose(probe);
    if (got == 8 && !memcmp(magic, LP_FORMAT_MAGIC, 8)) {
        if (start_tape(s, base, quiet) != 0) return -1;
    } else if (rp_is_pftrace(magic, got)) {
        return start_doc(s);
    } else if ((s->fd = open(s->path, O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "libprof-report: %s: %s\n", s->path, strerror(errno));
        return -1;
    }
    if (!(s->buf = malloc(WINDOW))) return -1;
    if (s->tape) return 0;
    read_tail(s);
    if (seek_events(s) != 0) {
        fprintf(stderr, "libprof-report: %s: not a Chrome trace (no traceEvents array)\n", s->path);
        return -1;
    }
    return 0;
}

/* ---- writing the merged trace ------------------------------------------------------------------ */

/* The pending event of `s` into the merged trace, its time shifted. */
static void put_event(struct lp_json *j, struct src *s) {
    if (s->tape) {
        if (s->ts_ns >= 0) lp_json_tape_set_ts(s->ev, s->ts_ns + s->shift_ns);
        lp_json_replay(j, s->ev, s->evlen);
        return;
    }
    struct lp_out *o = j->o;
    lp_out_s(o, j->first_event ? "\n" : ",\n");
    j->first_event = 0;
    if (!s->ts_at) {
        lp_out_write(o, s->ev, s->evlen);
        return;
    }
    lp_out_write(o, s->ev, s->ts_at);
    lp_out_fmt(o, "%.3f", s->ts);
    lp_out_write(o, s->ev + s->ts_end, s->evlen - s->ts_end);
}

/* The ranks' names, then metadata: what the clocks were aligned on, each input's shift and its
 * own metadata. */
static void put_end(struct lp_json *j, struct src *in, int n, const char *aligned) {
    char name[128];
    for (int i = 0; i < n; i++) {
        if (in[i].rank < 0) continue;
        int k = snprintf(name, sizeof name, "rank %lld (%s)", (long long)in[i].rank, in[i].host[0] ? in[i].host : "?");
        lp_json_meta_name(j, (uint64_t)in[i].pid, 0, "process_name", name, (size_t)k);
        lp_json_event(j, "M", (uint64_t)in[i].pid, 0, NULL, "process_sort_index", 18, -1);
        lp_json_args(j);
        lp_json_ki(j, "sort_index", in[i].rank);
        lp_json_args_end(j);
        lp_json_event_end(j);
    }
    lp_out_s(j->o, "\n],\"displayTimeUnit\":\"ns\",\"metadata\":");
    lp_json_value_begin(j);
    lp_json_object(j);
    if (aligned) lp_json_ks(j, "clock_aligned_on", aligned, strlen(aligned));
    lp_json_karray(j, "libprof_merge");
    for (int i = 0; i < n; i++) {
        lp_json_object(j);
        lp_json_ks(j, "file", in[i].path, strlen(in[i].path));
        lp_json_kd(j, "shift_us", "%.3f", (double)in[i].shift_ns / 1e3);
        lp_json_ki(j, "skew_correction_ns", in[i].skew_ns);
        if (in[i].meta) {
            lp_json_key(j, "libprof");
            if (in[i].tape)
                lp_json_replay(j, in[i].meta, in[i].metalen);
            else
                lp_json_raw(j, in[i].meta, in[i].metalen);
        }
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_object_end(j);
    lp_out_s(j->o, "}\n");
}

/* Each input's shift: its start against the earliest, hosts' clocks aligned (skew.c). Returns
 * what they were aligned on (NULL: one host). */
static const char *shifts(struct src *in, int n, int quiet) {
    struct rp_sync *sy = calloc((size_t)n, sizeof *sy);
    int64_t *corr = calloc((size_t)n, sizeof *corr);
    const char *aligned = NULL;
    if (sy && corr) {
        for (int i = 0; i < n; i++) {
            sy[i] = (struct rp_sync){in[i].origin_ns, in[i].rank, "", {in[i].sync_ns[0], in[i].sync_ns[1]}};
            memcpy(sy[i].host, in[i].host, sizeof sy[i].host);
        }
        aligned = rp_skew(sy, n, corr);
        for (int i = 0; i < n; i++) in[i].skew_ns = corr[i];
    }
    free(sy);
    free(corr);
    if (aligned && !strcmp(aligned, "none") && !quiet)
        fprintf(stderr, "libprof-report: ranks on several hosts without a common MPI_Barrier or MPI_Init: "
                        "clocks not aligned (each host's wall clock trusted)\n");
    int64_t t0 = INT64_MAX;
    for (int i = 0; i < n; i++)
        if (in[i].origin_ns && in[i].origin_ns + in[i].skew_ns < t0) t0 = in[i].origin_ns + in[i].skew_ns;
    for (int i = 0; i < n; i++)
        in[i].shift_ns = in[i].origin_ns && t0 != INT64_MAX ? in[i].origin_ns + in[i].skew_ns - t0 : 0;
    return aligned;
}

int rp_merge_stream(const char *const *paths, int n, const char *out, const struct lp_convert_opts *base, int quiet) {
    struct src *in = calloc((size_t)n, sizeof *in);
    struct lp_out o;
    int rc = 1, fd = -1;
    if (!in) return 1;
    for (int i = 0; i < n; i++) in[i].path = paths[i], in[i].fd = -1, in[i].rank = -1;
    for (int i = 0; i < n; i++)
        if (start(&in[i], base, quiet) != 0) goto out;
    const char *aligned = shifts(in, n, quiet);
    for (int i = 0; i < n; i++)
        if (advance(&in[i]) != 0) goto damaged;
    if ((fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        fprintf(stderr, "libprof-report: cannot write %s: %s\n", out, strerror(errno));
        goto out;
    }
    lp_out_init(&o, fd);
    struct lp_json j = {0};
    lp_json_begin(&j, &o);
    for (;;) { /* k-way: the input whose next event is earliest */
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!in[i].done && (best < 0 || in[i].ts < in[best].ts)) best = i;
        if (best < 0) break;
        put_event(&j, &in[best]);
        if (advance(&in[best]) != 0) goto damaged;
    }
    put_end(&j, in, n, aligned);
    lp_out_flush(&o);
    rc = o.failed ? 1 : 0;
    if (rc) fprintf(stderr, "libprof-report: cannot write %s: %s\n", out, strerror(o.err));
    goto out;
damaged:
    fprintf(stderr, "libprof-report: an input's events could not be read whole\n");
out:
    if (fd >= 0 && close(fd) != 0) rc = 1;
    for (int i = 0; i < n; i++) {
        if (in[i].fd >= 0) close(in[i].fd);
        if (in[i].child > 0) {
            int st;
            if (rc) kill(in[i].child, SIGTERM);
            while (waitpid(in[i].child, &st, 0) < 0 && errno == EINTR) {}
            if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) rc = 1; /* (its conversion said why) */
        }
        free(in[i].buf);
        free(in[i].ev);
        free(in[i].meta);
        cJSON_Delete(in[i].doc);
    }
    if (rc && fd >= 0) unlink(out); /* (no half-merged trace stays) */
    free(in);
    return rc;
}
