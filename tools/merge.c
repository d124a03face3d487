/* merge.c: `libprof-report --merge A B ... --chrome OUT` in bounded memory — the traces of a job's
 * processes on one timeline without holding any of them: each input is read through a 1 MiB
 * window (a raw trace is first converted to a temporary Chrome file, which the converter does in
 * bounded memory), its events are cut out of the JSON one at a time, shifted by the input's
 * wall-clock start against the earliest one (hosts' clocks aligned by skew.c), and written in a k-way merge on their timestamps
 * (each input's next event waits in a one-event buffer). Memory: the windows, one event per input
 * and each input's libprof metadata object (read from the file's tail) — independent of the
 * number of events. Inputs are libprof's Chrome traces (their "ts" precedes any nested object);
 * a process that was a job's rank is named "rank N (host)" and sorted by rank. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/convert.h"
#include "lib/reader.h"
#include "report.h"

#define WINDOW (1u << 20)
#define TAIL (8u << 20) /* where the metadata is looked for */

struct src {
    const char *path;
    char tmp[64]; /* the converted raw trace ("" when the input is JSON) */
    int fd;
    char *buf;
    size_t pos, len;
    int eof, done;
    /* the pending event */
    char *ev;
    size_t evlen, evcap;
    double ts;            /* shifted, us */
    size_t ts_at, ts_end; /* where its "ts" number sits in ev */
    /* from the tail */
    int64_t origin_ns, pid, rank;
    char host[64];
    char *meta;         /* "libprof" metadata object text, or NULL */
    int64_t sync_ns[2]; /* job.sync_ns: first MPI_Barrier, MPI_Init ends (skew.c) */
    double shift_us;
    int64_t skew_ns; /* cross-host correction, part of shift_us */
};

static int fill(struct src *s) {
    if (s->eof) return 0;
    if (s->pos > 0) {
        memmove(s->buf, s->buf + s->pos, s->len - s->pos);
        s->len -= s->pos;
        s->pos = 0;
    }
    ssize_t k = read(s->fd, s->buf + s->len, WINDOW - s->len);
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

static int push(struct src *s, char c) {
    if (s->evlen + 1 >= s->evcap) {
        size_t cap = s->evcap ? s->evcap * 2 : 4096;
        char *p = realloc(s->ev, cap);
        if (!p) return -1;
        s->ev = p;
        s->evcap = cap;
    }
    s->ev[s->evlen++] = c;
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

/* Find `"traceEvents"` and its '['. */
static int seek_events(struct src *s) {
    const char *key = "\"traceEvents\"";
    size_t m = 0;
    int c;
    while ((c = getc_s(s)) >= 0) {
        m = (c == key[m]) ? m + 1 : (c == key[0] ? 1 : 0);
        if (!key[m]) break;
    }
    while ((c = getc_s(s)) >= 0 && c != '[')
        ;
    return c == '[' ? 0 : -1;
}

/* The next event object of the array into s->ev (0), or 1 at its end, -1 on damage. */
static int next_event(struct src *s) {
    int c;
    do c = getc_s(s);
    while (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == ',');
    if (c == ']' || c < 0) return 1;
    if (c != '{') return -1;
    s->evlen = 0;
    s->ts_at = s->ts_end = 0;
    struct jscan j = {0, 0, 0};
    do {
        if (push(s, (char)c) != 0) return -1;
        int quoted = j.in_str;
        if (jscan(&j, c)) break;
        if (!quoted && c == ':' && j.depth == 1 && !s->ts_at && s->evlen >= 5 &&
            !memcmp(s->ev + s->evlen - 5, "\"ts\":", 5))
            s->ts_at = s->evlen; /* the number follows */
        if (s->ts_at && !s->ts_end && s->evlen > s->ts_at && !j.in_str && (c == ',' || c == '}') &&
            s->evlen - 1 >= s->ts_at)
            s->ts_end = s->evlen - 1;
    } while ((c = getc_s(s)) >= 0);
    if (j.depth != 0) return -1;
    if (s->ts_at && !s->ts_end) s->ts_end = s->evlen - 1;
    s->ts = s->ts_at ? strtod(s->ev + s->ts_at, NULL) + s->shift_us : 0;
    return 0;
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

/* What the file's tail says: start time, pid, rank, host, the libprof metadata object. */
static void read_tail(struct src *s) {
    s->origin_ns = 0;
    s->pid = 0;
    s->rank = -1;
    s->host[0] = '\0';
    s->meta = NULL;
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
        char *o = m, *p = o;
        struct jscan j = {0, 0, 0};
        while (p < t + n && !jscan(&j, (unsigned char)*p)) p++;
        if (p < t + n) s->meta = strndup(o, (size_t)(p - o + 1));
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

/* A raw trace's Chrome conversion into a temporary file (bounded: the converter streams). */
static int convert_raw(struct src *s, int quiet) {
    struct lp_reader r;
    char err[512];
    if (lp_reader_open(&r, s->path, err, sizeof err) != 0) {
        fprintf(stderr, "libprof-report: %s\n", err);
        return -1;
    }
    snprintf(s->tmp, sizeof s->tmp, "/tmp/libprof-merge-XXXXXX");
    int fd = mkstemp(s->tmp);
    if (fd < 0) {
        lp_reader_close(&r);
        return -1;
    }
    close(fd);
    struct lp_convert_opts o = {
        .path = {[LP_OUT_CHROME] = s->tmp}, .chrome_fd = -1, .summary_fd = -1, .alloc_min = r.hdr.alloc_min};
    int rc = lp_convert(&r, &o, err, sizeof err);
    if (rc != 0 && !quiet) fprintf(stderr, "libprof-report: %s: %s\n", s->path, err);
    lp_reader_close(&r);
    return rc;
}

static void put_event(FILE *f, const struct src *s, int *first) {
    if (!*first) fputs(",\n", f);
    *first = 0;
    if (!s->ts_at) {
        fwrite(s->ev, 1, s->evlen, f);
        return;
    }
    fwrite(s->ev, 1, s->ts_at, f);
    fprintf(f, "%.3f", s->ts);
    fwrite(s->ev + s->ts_end, 1, s->evlen - s->ts_end, f);
}

/* Is the pending event a process_name metadata event (replaced by the rank's name)? */
static int is_process_name(const struct src *s) {
    return memmem(s->ev, s->evlen, "\"name\":\"process_name\"", 21) && memmem(s->ev, s->evlen, "\"ph\":\"M\"", 8);
}

int rp_merge_stream(const char *const *paths, int n, const char *out, int quiet) {
    struct src *in = calloc((size_t)n, sizeof *in);
    FILE *f = NULL;
    int rc = 1;
    if (!in) return 1;
    for (int i = 0; i < n; i++) {
        in[i].path = paths[i];
        in[i].fd = -1;
        FILE *probe = fopen(paths[i], "rb");
        char magic[8] = {0};
        if (!probe) {
            fprintf(stderr, "libprof-report: %s: %s\n", paths[i], strerror(errno));
            goto out;
        }
        size_t got = fread(magic, 1, 8, probe);
        fclose(probe);
        if (got == 8 && !memcmp(magic, LP_FORMAT_MAGIC, 8) && convert_raw(&in[i], quiet) != 0) goto out;
        in[i].fd = open(in[i].tmp[0] ? in[i].tmp : paths[i], O_RDONLY | O_CLOEXEC);
        in[i].buf = malloc(WINDOW);
        if (in[i].fd < 0 || !in[i].buf) {
            fprintf(stderr, "libprof-report: %s: %s\n", paths[i], strerror(errno));
            goto out;
        }
        read_tail(&in[i]);
        if (seek_events(&in[i]) != 0) {
            fprintf(stderr, "libprof-report: %s: not a Chrome trace (no traceEvents array)\n", paths[i]);
            goto out;
        }
    }
    /* hosts' clocks aligned on a common MPI instant (skew.c) */
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
    for (int i = 0; i < n; i++) {
        in[i].shift_us = in[i].origin_ns && t0 != INT64_MAX ? (double)(in[i].origin_ns + in[i].skew_ns - t0) / 1e3 : 0;
        int k;
        do k = next_event(&in[i]);
        while (k == 0 && in[i].rank >= 0 && is_process_name(&in[i]));
        in[i].done = k != 0;
    }
    f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "libprof-report: cannot write %s: %s\n", out, strerror(errno));
        goto out;
    }
    fputs("{\"traceEvents\":[\n", f);
    int first = 1;
    for (;;) { /* k-way: the input whose next event is earliest */
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!in[i].done && (best < 0 || in[i].ts < in[best].ts)) best = i;
        if (best < 0) break;
        put_event(f, &in[best], &first);
        int k;
        do k = next_event(&in[best]);
        while (k == 0 && in[best].rank >= 0 && is_process_name(&in[best]));
        in[best].done = k != 0;
    }
    for (int i = 0; i < n; i++) {
        if (in[i].rank < 0) continue;
        if (!first) fputs(",\n", f);
        first = 0;
        fprintf(
            f,
            "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%lld,\"tid\":0,\"args\":{\"name\":\"rank %lld (%s)\"}},\n"
            "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%lld,\"tid\":0,\"args\":{\"sort_index\":%lld}}",
            (long long)in[i].pid, (long long)in[i].rank, in[i].host[0] ? in[i].host : "?", (long long)in[i].pid,
            (long long)in[i].rank);
    }
    fputs("\n],\"displayTimeUnit\":\"ns\",\"metadata\":{", f);
    if (aligned) fprintf(f, "\"clock_aligned_on\":\"%s\",", aligned);
    fputs("\"libprof_merge\":[", f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s{\"file\":", i ? "," : "");
        putc('"', f);
        for (const char *p = in[i].path; *p; p++) {
            if (*p == '"' || *p == '\\') putc('\\', f);
            if ((unsigned char)*p >= 0x20) putc(*p, f);
        }
        fprintf(f, "\",\"shift_us\":%.3f,\"skew_correction_ns\":%lld", in[i].shift_us, (long long)in[i].skew_ns);
        if (in[i].meta) fprintf(f, ",\"libprof\":%s", in[i].meta);
        putc('}', f);
    }
    fputs("]}}\n", f);
    rc = ferror(f) ? 1 : 0;
out:
    if (f && fclose(f) != 0) rc = 1;
    for (int i = 0; i < n; i++) {
        if (in[i].fd >= 0) close(in[i].fd);
        if (in[i].tmp[0]) unlink(in[i].tmp);
        free(in[i].buf);
        free(in[i].ev);
        free(in[i].meta);
    }
    free(in);
    return rc;
}
