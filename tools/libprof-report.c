/* libprof-report: the post-processor. Reads libprof raw traces (.lpt, also cut-short ones),
 * libprof's Chrome traces and other profilers' Chrome traces (PyTorch, ONNX Runtime, uftrace,
 * RAF/Neural Engine style), and answers: tables per name with self time and percentiles, per
 * thread busy time and framework tax, iterations, what-if, memory and I/O (raw traces), diff of
 * two runs, merge of the processes of one run; exports CSV, events CSV, Chrome JSON, flame graphs
 * and a self-contained HTML page. The analyses live in report.c and html.c; the raw-trace
 * conversion is the preload's own (convert.c). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chrome_in.h"
#include "lib/fmt.h"
#include "lib/convert.h"
#include "lib/reader.h"
#include "report.h"
#include "lib/vec.h"

static const char usage[] =
    "usage: libprof-report TRACE... [options]\n"
    "\n"
    "TRACE: a raw libprof trace (LIBPROF_OUTPUT=trace.lpt), or Chrome trace JSON — libprof's or\n"
    "another profiler's (PyTorch export_chrome_trace, ONNX Runtime, uftrace dump --chrome, ...).\n"
    "Without an output option the report is printed: per name count, total, self, mean, min,\n"
    "p10/p50/p90/p95/p99/p99.9, max; per thread busy time and framework tax; and for raw traces\n"
    "the memory, I/O per file, BLAS shapes, oneDNN primitives and allocation sites.\n"
    "\n"
    "report:\n"
    "  --top N            rows per table (default: all; 20 in the iteration table)\n"
    "  --sort KEY         total (default), self, count, mean, p50, p99, max, name\n"
    "  --filter REGEX     only names matching REGEX (POSIX extended)\n"
    "  --units U          auto (default), ns, us, ms, s\n"
    "  --iterations REGEX each slice matching REGEX is one iteration: ops per iteration as\n"
    "                     columns, statistics across iterations, latency and framework tax\n"
    "  --skip N           leave the first N iterations (warm-up) out of the statistics\n"
    "  --kernels REGEX    names that count as kernels for the framework tax, beside BLAS,\n"
    "                     oneDNN and OpenMP regions (and PyTorch's \"kernel\" category)\n"
    "  --what-if 'REGEX=RATIO'  estimated latency if matching slices ran RATIO x faster\n"
    "                     (repeatable; model in the README)\n"
    "  --diff BASE        compare TRACE against BASE per name (count, total, p50, p99), by impact\n"
    "  --merge            several TRACEs (processes of one run) on one timeline, aligned by\n"
    "                     their wall-clock start; with --chrome FILE writes the merged trace\n"
    "exports:\n"
    "  --chrome FILE      Chrome trace JSON (convert a raw trace, or write the --merge result)\n"
    "  --csv FILE         CSV summary (raw trace; one row per function, see README)\n"
    "  --events-csv FILE  one row per event (pid,tid,ts_ns,dur_ns,category,name,size,ptr,rank,host);\n"
    "                     with --merge, all inputs on one timeline (streamed)\n"
    "  --html FILE        one self-contained page: tables, heap over time, iterations, flame graph\n"
    "  --folded FILE      flame graph of allocated bytes by call stack (LIBPROF_STACKS traces)\n"
    "  --folded-leaks FILE  the same for bytes leaked at exit\n"
    "  --folded-peak FILE   the same for bytes live at the heap's peak (or at --at)\n"
    "  --at TIME          the peak views show the heap at TIME (seconds since the start, or ms)\n"
    "  --temporary-threshold N  a block released before N more allocations of its thread is\n"
    "                     temporary (memray's definition; default: heaptrack's)\n"
    "  --speedscope FILE  both as a speedscope JSON file\n"
    "  --summary          print the report too when writing files\n"
    "  --general-path     decode every event the general way, without the allocation fast\n"
    "                     path: the same files, slower (a check of the fast path)\n"
    "  --alloc-min BYTES  allocations at least this large become instants in --chrome\n"
    "  --killed-by SIG    the process died by signal SIG (metadata.libprof.signal), as its\n"
    "                     parent saw it; for traces cut short\n"
    "  --remove-raw       remove the raw trace once --chrome/--csv are written\n"
    "  -q, --quiet        no progress or notices on stderr\n"
    "  -h, --help, --version\n"
    "\n"
    "exit status: 0 done, 1 bad input or output error, 2 bad usage\n";

static int quiet;
static unsigned temp_threshold; /* --temporary-threshold: memray's definition (0: heaptrack's) */
static uint64_t peak_at_ns;     /* --at: the instant the peak views show instead of the peak */
static int general_path;        /* --general-path: no allocation fast path (to check it) */

static void progress(uint64_t done, uint64_t total, void *arg) {
    (void)arg;
    if (quiet || total == 0) return;
    fprintf(stderr, "\rlibprof-report: %llu / %llu events (%u%%)", (unsigned long long)done, (unsigned long long)total,
            (unsigned)(done * 100 / total));
    if (done >= total) fputc('\n', stderr);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 0, n = 0, k;
    char *b = NULL;
    while (LP_RESERVE(b, cap, n + 65536 + 1) == 0 && (k = fread(b + n, 1, cap - n - 1, f)) > 0) n += k;
    fclose(f);
    if (n + 1 > cap) { /* out of memory */
        free(b);
        return NULL;
    }
    b[n] = '\0';
    *len = n;
    return b;
}

static int parse_bytes(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    int shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10, end++;
    else if (*end == 'm' || *end == 'M')
        shift = 20, end++;
    else if (*end == 'g' || *end == 'G')
        shift = 30, end++;
    if (*end) return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* One input, loaded: a raw trace keeps its reader (memory, I/O, conversions), any trace has its
 * slices. */
struct input {
    const char *path;
    int raw;
    struct lp_reader r;
    struct lp_slices c;
};

/* 1 raw, 0 JSON, -1 neither (message printed). */
static int kind_of(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "libprof-report: %s: not a regular file\n", path);
        return -1;
    }
    if (stat(path, &st) == 0 && st.st_size == 0) {
        fprintf(stderr, "libprof-report: %s: empty file\n", path);
        return -1;
    }
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        fprintf(stderr, "libprof-report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char magic[8] = {0};
    size_t got = fread(magic, 1, sizeof magic, probe);
    fclose(probe);
    if (got == sizeof magic && memcmp(magic, LP_FORMAT_MAGIC, 8) == 0) return 1;
    if (got >= 7 && memcmp(magic, LP_FORMAT_MAGIC, 7) == 0) return 1; /* the reader says which version */
    size_t i = 0;
    while (i < got && (magic[i] == ' ' || magic[i] == '\n' || magic[i] == '\t' || magic[i] == '\r')) i++;
    if (i < got && (magic[i] == '{' || magic[i] == '[')) return 0;
    fprintf(stderr, "libprof-report: %s: neither a libprof raw trace (bad magic) nor Chrome trace JSON\n", path);
    return -1;
}

static int load(struct input *in, const char *path, int need_slices) {
    memset(in, 0, sizeof *in);
    in->path = path;
    int k = kind_of(path);
    if (k < 0) return -1;
    char err[512];
    if (k == 1) {
        in->raw = 1;
        if (lp_reader_open(&in->r, path, err, sizeof err) != 0) {
            fprintf(stderr, "libprof-report: %s\n", err);
            return -1;
        }
        if (!quiet && (in->r.truncated || !in->r.end))
            fprintf(stderr,
                    "libprof-report: %s: the trace was cut short (%s); decoded %llu events in %llu of %zu bytes\n",
                    path, in->r.truncated ? "damaged or partial last chunk" : "the process did not finish",
                    (unsigned long long)in->r.events, (unsigned long long)in->r.valid_bytes, in->r.size);
        if (need_slices && lp_slices_from_reader(&in->r, &in->c, isatty(STDERR_FILENO) && !quiet ? progress : NULL, err,
                                                 sizeof err) != 0) {
            fprintf(stderr, "libprof-report: %s: %s\n", path, err);
            return -1;
        }
        return 0;
    }
    size_t len;
    char *text = slurp(path, &len);
    if (!text) {
        fprintf(stderr, "libprof-report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = lp_chrome_load(text, len, &in->c, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "libprof-report: %s: %s\n", path, err);
        return -1;
    }
    return 0;
}

static void unload(struct input *in) {
    if (in->raw) lp_reader_close(&in->r);
    lp_slices_free(&in->c);
}

/* The converter's text report (memory, I/O, BLAS, oneDNN, sites) into a string, for --html. */
static char *summary_text(const struct lp_reader *r, const char *label) {
    FILE *t = tmpfile();
    if (!t) return NULL;
    struct lp_convert_opts o = {.chrome_fd = -1,
                                .summary_fd = fileno(t),
                                .alloc_min = r->hdr.alloc_min,
                                .trace_label = label,
                                .temporary_threshold = temp_threshold,
                                .peak_at_ns = peak_at_ns,
                                .general_path = general_path};
    char err[256];
    if (lp_convert(r, &o, err, sizeof err) != 0) {
        fclose(t);
        return NULL;
    }
    long n = lseek(fileno(t), 0, SEEK_END);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && pread(fileno(t), s, (size_t)n, 0) == n)
        s[n] = '\0';
    else {
        free(s);
        s = NULL;
    }
    fclose(t);
    return s;
}

/* Folded allocation stacks of a raw trace into a string (NULL without stacks). */
/* The four flame graphs of a raw trace with stacks (allocated, at the peak, leaked, temporary),
 * as collapsed-stack texts (NULL each when none). */
static void folded_texts(const struct lp_reader *r, char *out[4]) {
    for (int k = 0; k < 4; k++) out[k] = NULL;
    if (!r->nstacks) return;
    char path[4][32];
    for (int k = 0; k < 4; k++) {
        snprintf(path[k], sizeof path[k], "/tmp/libprof-report-XXXXXX");
        int fd = mkstemp(path[k]);
        if (fd < 0)
            path[k][0] = '\0';
        else
            close(fd);
    }
    struct lp_convert_opts o = {.chrome_fd = -1,
                                .summary_fd = -1,
                                .alloc_min = r->hdr.alloc_min,
                                .folded_path = path[0][0] ? path[0] : NULL,
                                .folded_peak_path = path[1][0] ? path[1] : NULL,
                                .folded_leaks_path = path[2][0] ? path[2] : NULL,
                                .folded_temp_path = path[3][0] ? path[3] : NULL,
                                .temporary_threshold = temp_threshold,
                                .peak_at_ns = peak_at_ns,
                                .general_path = general_path};
    char err[256];
    size_t len;
    int ok = lp_convert(r, &o, err, sizeof err) == 0;
    for (int k = 0; k < 4; k++) {
        if (!path[k][0]) continue;
        if (ok) out[k] = slurp(path[k], &len);
        unlink(path[k]);
    }
}

/* Each input's shift onto the merged timeline (ns): its wall-clock start against the earliest,
 * with hosts' clocks aligned on a common MPI instant (skew.c). Returns what the hosts were
 * aligned on (NULL: one host). */
static const char *merge_shifts(const struct input *in, int n, int64_t *shift, int64_t *skew) {
    struct rp_sync *sy = calloc((size_t)n, sizeof *sy);
    const char *aligned = NULL;
    for (int i = 0; i < n; i++) skew[i] = 0;
    if (sy) {
        for (int i = 0; i < n; i++) rp_sync_of_slices(&in[i].c, &sy[i]);
        aligned = rp_skew(sy, n, skew);
        free(sy);
    }
    int64_t t0 = INT64_MAX;
    for (int i = 0; i < n; i++)
        if (in[i].c.origin_real_ns && in[i].c.origin_real_ns + skew[i] < t0) t0 = in[i].c.origin_real_ns + skew[i];
    for (int i = 0; i < n; i++)
        shift[i] = in[i].c.origin_real_ns && t0 != INT64_MAX ? in[i].c.origin_real_ns + skew[i] - t0 : 0;
    return aligned;
}

/* --merge of the ranks of a job: one row per rank (wall, time in MPI and its heaviest call, other
 * waits, compute = wall - MPI - waits, bytes), the imbalance (max / mean compute) and the rank the
 * others waited for. On each rank's main thread (MPI libraries' progress threads wait by design). */
static void print_ranks(const struct input *in, int n) {
    int any = 0;
    for (int i = 0; i < n; i++) any |= in[i].c.rank >= 0;
    if (!any) return;
    printf("\nper rank (main thread; compute = wall - MPI - other waits):\n%6s %-12s %10s %10s %10s %10s %12s %12s "
           "%12s  %s\n",
           "rank", "host", "wall", "MPI", "waits", "compute", "sent", "received", "collective", "heaviest MPI call");
    double sum = 0, mx = -1;
    int64_t slowest = -1;
    int ranks = 0;
    for (int i = 0; i < n; i++) {
        const struct lp_slices *c = &in[i].c;
        int64_t first = INT64_MAX, last = INT64_MIN, mpi = 0, waits = 0, mpi_end = INT64_MIN;
        /* per MPI call name: total time (names are few) */
        int64_t best = 0;
        const char *best_name = "-";
        int64_t *per = calloc(c->nnames + 1, sizeof *per);
        for (size_t k = 0; k < c->nslices; k++) {
            const struct lp_slice *sl = &c->slices[k];
            if (sl->ts_ns < first) first = sl->ts_ns;
            if (sl->ts_ns + sl->dur_ns > last) last = sl->ts_ns + sl->dur_ns;
        }
        /* the main thread's MPI calls, then its waits outside them */
        int64_t(*iv)[2] = malloc((c->nslices + 1) * sizeof *iv);
        size_t niv = 0;
        for (size_t k = 0; iv && k < c->nslices; k++) {
            const struct lp_slice *sl = &c->slices[k];
            if ((c->pid && sl->tid != c->pid) || strcmp(c->names[sl->cat], "mpi")) continue;
            mpi += sl->dur_ns;
            iv[niv][0] = sl->ts_ns;
            iv[niv++][1] = sl->ts_ns + sl->dur_ns;
            if (per) per[sl->name] += sl->dur_ns;
        }
        for (size_t k = 0; iv && k < c->nslices; k++) {
            const struct lp_slice *sl = &c->slices[k];
            if (c->pid && sl->tid != c->pid) continue;
            const char *cat = c->names[sl->cat];
            if (strcmp(cat, "sync") && strcmp(cat, "wait")) continue;
            int inside = 0;
            for (size_t q = 0; q < niv && !inside; q++) inside = sl->ts_ns >= iv[q][0] && sl->ts_ns < iv[q][1];
            if (!inside) waits += sl->dur_ns;
        }
        free(iv);
        (void)mpi_end;
        for (size_t k = 0; per && k < c->nnames; k++)
            if (per[k] > best) best = per[k], best_name = c->names[k];
        free(per);
        int64_t wall = last > first ? last - first : 0, compute = wall - mpi - waits;
        if (compute < 0) compute = 0;
        char w[32], m[32], wt[32], cp[32], sb[32], rb[32], cb[32], bt[32];
        lp_fmt_ns(w, sizeof w, wall);
        lp_fmt_ns(m, sizeof m, mpi);
        lp_fmt_ns(wt, sizeof wt, waits);
        lp_fmt_ns(cp, sizeof cp, compute);
        lp_fmt_bytes(sb, sizeof sb, c->mpi_sent);
        lp_fmt_bytes(rb, sizeof rb, c->mpi_recv);
        lp_fmt_bytes(cb, sizeof cb, c->mpi_coll);
        lp_fmt_ns(bt, sizeof bt, best);
        printf("%6lld %-12.12s %10s %10s %10s %10s %12s %12s %12s  %s %s\n", (long long)c->rank,
               c->host[0] ? c->host : "?", w, m, wt, cp, sb, rb, cb, best_name, bt);
        sum += (double)compute;
        ranks++;
        if ((double)compute > mx) {
            mx = (double)compute;
            slowest = c->rank;
        }
    }
    if (ranks && sum > 0)
        printf("imbalance (max / mean compute): %.2f; the slowest rank: %lld (the others wait for it in MPI)\n",
               mx / (sum / ranks), (long long)slowest);
    int64_t *shift = calloc((size_t)n, sizeof *shift), *skew = calloc((size_t)n, sizeof *skew);
    const char *aligned = shift && skew ? merge_shifts(in, n, shift, skew) : NULL;
    if (aligned && !strcmp(aligned, "none")) {
        printf("clocks: ranks on several hosts without a common MPI_Barrier or MPI_Init: each host's wall clock "
               "trusted\n");
    } else if (aligned) {
        printf("clocks: hosts aligned on the first %s exit of their ranks (correction per host:", aligned);
        for (int i = 0; i < n; i++) {
            int first = 1;
            for (int k = 0; k < i && first; k++) first = strcmp(in[k].c.host, in[i].c.host) != 0;
            if (first && in[i].c.rank >= 0) printf(" %s %+.3f ms", in[i].c.host, (double)skew[i] / 1e6);
        }
        printf(")\n");
    }
    free(shift);
    free(skew);
}

/* --merge --chrome: every input's Chrome events on one timeline. A raw trace is converted first;
 * events are shifted by their file's wall-clock start relative to the earliest one, hosts' clocks
 * aligned (merge_shifts). */
static int write_merged(struct input *in, int n, const char *out) {
    cJSON *root = cJSON_CreateObject(), *events = cJSON_AddArrayToObject(root, "traceEvents");
    cJSON *files = cJSON_CreateArray();
    int64_t *shift = calloc((size_t)n, sizeof *shift), *skew = calloc((size_t)n, sizeof *skew);
    if (!shift || !skew) {
        free(shift);
        free(skew);
        cJSON_Delete(root);
        cJSON_Delete(files);
        return 1;
    }
    const char *aligned = merge_shifts(in, n, shift, skew);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char *text = NULL;
        size_t len = 0;
        if (in[i].raw) {
            FILE *t = tmpfile();
            struct lp_convert_opts o = {
                .chrome_fd = t ? fileno(t) : -1, .summary_fd = -1, .alloc_min = in[i].r.hdr.alloc_min};
            char err[256];
            if (!t || lp_convert(&in[i].r, &o, err, sizeof err) != 0) {
                fprintf(stderr, "libprof-report: %s: cannot convert\n", in[i].path);
                rc = 1;
            } else {
                long m = lseek(fileno(t), 0, SEEK_END);
                text = m > 0 ? malloc((size_t)m + 1) : NULL;
                if (text && pread(fileno(t), text, (size_t)m, 0) == m) len = (size_t)m;
            }
            if (t) fclose(t);
        } else {
            text = slurp(in[i].path, &len);
        }
        cJSON *doc = text ? cJSON_ParseWithLength(text, len) : NULL;
        free(text);
        if (!doc) {
            if (!rc) fprintf(stderr, "libprof-report: %s: cannot read it back as JSON\n", in[i].path);
            rc = 1;
            break;
        }
        double shift_us = (double)shift[i] / 1e3;
        cJSON *evs = cJSON_IsArray(doc) ? doc : cJSON_GetObjectItemCaseSensitive(doc, "traceEvents"), *e;
        while (evs && (e = cJSON_DetachItemFromArray(evs, 0)) != NULL) {
            cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts"), *nm = cJSON_GetObjectItemCaseSensitive(e, "name"),
                  *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
            if (in[i].c.rank >= 0 && cJSON_IsString(ph) && !strcmp(ph->valuestring, "M") && cJSON_IsString(nm) &&
                !strcmp(nm->valuestring, "process_name")) {
                cJSON_Delete(e); /* replaced by the rank's name below */
                continue;
            }
            if (cJSON_IsNumber(ts)) cJSON_SetNumberValue(ts, ts->valuedouble + shift_us);
            cJSON_AddItemToArray(events, e);
        }
        if (in[i].c.rank >= 0) { /* "rank N (host)", ordered by rank */
            char label[128];
            snprintf(label, sizeof label, "rank %lld (%s)", (long long)in[i].c.rank,
                     in[i].c.host[0] ? in[i].c.host : "?");
            for (int k = 0; k < 2; k++) {
                cJSON *m = cJSON_CreateObject(), *args = cJSON_CreateObject();
                cJSON_AddStringToObject(m, "ph", "M");
                cJSON_AddStringToObject(m, "name", k ? "process_sort_index" : "process_name");
                cJSON_AddNumberToObject(m, "pid", (double)in[i].c.pid);
                cJSON_AddNumberToObject(m, "tid", 0);
                if (k)
                    cJSON_AddNumberToObject(args, "sort_index", (double)in[i].c.rank);
                else
                    cJSON_AddStringToObject(args, "name", label);
                cJSON_AddItemToObject(m, "args", args);
                cJSON_AddItemToArray(events, m);
            }
        }
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "file", in[i].path);
        cJSON_AddNumberToObject(f, "shift_us", shift_us);
        cJSON_AddNumberToObject(f, "skew_correction_ns", (double)skew[i]);
        cJSON *meta =
            cJSON_DetachItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "metadata"), "libprof");
        if (meta) cJSON_AddItemToObject(f, "libprof", meta);
        cJSON_AddItemToArray(files, f);
        cJSON_Delete(doc);
    }
    cJSON_AddStringToObject(root, "displayTimeUnit", "ns");
    cJSON *md = cJSON_AddObjectToObject(root, "metadata");
    if (aligned) cJSON_AddStringToObject(md, "clock_aligned_on", aligned);
    cJSON_AddItemToObject(md, "libprof_merge", files);
    free(shift);
    free(skew);
    if (rc == 0) {
        char *s = cJSON_PrintUnformatted(root);
        FILE *f = s ? fopen(out, "w") : NULL;
        if (!f || fputs(s, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "libprof-report: cannot write %s: %s\n", out, strerror(errno));
            rc = 1;
        }
        free(s);
    }
    cJSON_Delete(root);
    return rc;
}

/* All inputs' slices as one trace, shifted to the earliest wall-clock start. */
static int merged_slices(struct input *in, int n, struct lp_slices *out) {
    struct lp_slices_builder *b = lp_slices_builder_new(out);
    if (!b) return -1;
    int64_t *shifts = calloc((size_t)n, sizeof *shifts), *skew = calloc((size_t)n, sizeof *skew), t0 = INT64_MAX;
    if (!shifts || !skew) {
        free(shifts);
        free(skew);
        lp_slices_builder_end(b);
        return -1;
    }
    merge_shifts(in, n, shifts, skew);
    for (int i = 0; i < n; i++)
        if (in[i].c.origin_real_ns && in[i].c.origin_real_ns + skew[i] < t0) t0 = in[i].c.origin_real_ns + skew[i];
    for (int i = 0; i < n; i++) {
        const struct lp_slices *c = &in[i].c;
        int64_t shift = shifts[i];
        for (size_t k = 0; k < c->nslices; k++) {
            const struct lp_slice *s = &c->slices[k];
            lp_slices_add(b, lp_slices_intern(b, c->names[s->name]), lp_slices_intern(b, c->names[s->cat]), s->pid,
                          s->tid, s->ts_ns + shift, s->dur_ns);
        }
        out->skipped += c->skipped;
        out->unmatched += c->unmatched;
    }
    out->origin_real_ns = t0 == INT64_MAX ? 0 : t0;
    free(shifts);
    free(skew);
    return lp_slices_builder_end(b);
}

/* --merge --events-csv: every input's events as one CSV on the merged timeline, in bounded
 * memory — each input written alone to a temporary file, its rows led by their order key (a raw
 * trace streams; a JSON trace is loaded alone), then a k-way merge of the files on key + shift,
 * hosts' clocks aligned as in the Chrome merge (skew.c). Rows come in the order of their effect
 * (an allocation's moment, a call's end), as in one trace's CSV. */
static int merged_events_csv(const char *const *paths, int n, const char *out) {
    FILE **tmp = calloc((size_t)n, sizeof *tmp);
    struct rp_sync *sy = calloc((size_t)n, sizeof *sy);
    int64_t *skew = calloc((size_t)n, sizeof *skew), *shift = calloc((size_t)n, sizeof *shift);
    int rc = !tmp || !sy || !skew || !shift;
    for (int i = 0; i < n && !rc; i++) {
        struct input one;
        if (load(&one, paths[i], 0) != 0) {
            rc = 1;
            break;
        }
        tmp[i] = tmpfile();
        if (!rc &&
            (!tmp[i] || (one.raw ? rp_events_csv_lpt(tmp[i], &one.r, 1) : rp_events_csv(tmp[i], &one.c, 1)) != 0 ||
             fflush(tmp[i]) != 0)) {
            fprintf(stderr, "libprof-report: %s: cannot write a temporary file: %s\n", paths[i], strerror(errno));
            rc = 1;
        }
        if (!rc) {
            rewind(tmp[i]);
            if (one.raw) {
                sy[i].origin_ns = (int64_t)one.r.hdr.origin_real_ns;
                sy[i].rank = -1;
                if (one.r.job) {
                    const char *rk = memchr(one.r.job, 0, one.r.job_len);
                    if (rk && rk + 1 < one.r.job + one.r.job_len) sy[i].rank = strtoll(rk + 1, NULL, 10);
                }
                snprintf(sy[i].host, sizeof sy[i].host, "%.*s", (int)one.r.hostname_len,
                         one.r.hostname ? one.r.hostname : "");
            } else {
                sy[i].origin_ns = one.c.origin_real_ns;
                sy[i].rank = one.c.rank;
                memcpy(sy[i].host, one.c.host, sizeof sy[i].host);
            }
            rp_keyed_csv_sync(tmp[i], sy[i].sync_ns);
        }
        unload(&one);
    }
    if (!rc) {
        rp_skew(sy, n, skew);
        int64_t t0 = INT64_MAX;
        for (int i = 0; i < n; i++)
            if (sy[i].origin_ns && sy[i].origin_ns + skew[i] < t0) t0 = sy[i].origin_ns + skew[i];
        for (int i = 0; i < n; i++) shift[i] = sy[i].origin_ns && t0 != INT64_MAX ? sy[i].origin_ns + skew[i] - t0 : 0;
        FILE *f = fopen(out, "w");
        if (!f || rp_merge_keyed_csv(tmp, shift, n, f) != 0 || fclose(f) != 0) {
            fprintf(stderr, "libprof-report: cannot write %s: %s\n", out, strerror(errno));
            rc = 1;
        }
    }
    for (int i = 0; tmp && i < n; i++)
        if (tmp[i]) fclose(tmp[i]);
    free(tmp);
    free(sy);
    free(skew);
    free(shift);
    return rc;
}

static int compile(regex_t *re, const char *s, const char *opt) {
    int rc = regcomp(re, s, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[128];
        regerror(rc, re, msg, sizeof msg);
        fprintf(stderr, "libprof-report: bad %s regular expression '%s': %s\n", opt, s, msg);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *chrome = NULL, *csv = NULL, *folded = NULL, *folded_leaks = NULL, *speedscope = NULL,
               *folded_peak = NULL;
    const char *events_csv = NULL, *html = NULL, *diff = NULL;
    const char **inputs = calloc((size_t)argc, sizeof *inputs); /* any number of traces */
    int ninputs = 0, summary = 0, have_min = 0, merge = 0;
    if (!inputs) {
        fprintf(stderr, "libprof-report: out of memory\n");
        return 1;
    }
    uint64_t alloc_min = 0;
    int killed_by = 0, remove_raw = 0;
    struct rp_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("libprof-report %s (trace format %d)\n", LIBPROF_VERSION, LP_FORMAT_VERSION);
            return 0;
        } else if (!strcmp(a, "--summary")) {
            summary = 1;
        } else if (!strcmp(a, "--general-path")) {
            general_path = 1;
        } else if (!strcmp(a, "--merge")) {
            merge = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--remove-raw")) {
            remove_raw = 1;
        } else if (a[0] == '-' && a[1]) {
            static const char *const valued[] = {
                "--chrome",     "--csv",        "--alloc-min", "--folded",      "--folded-leaks",
                "--speedscope", "--events-csv", "--html",      "--diff",        "--top",
                "--sort",       "--filter",     "--units",     "--iterations",  "--skip",
                "--kernels",    "--what-if",    "--killed-by", "--folded-peak", "--temporary-threshold",
                "--at"};
            int known = 0;
            for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(a, valued[k]);
            if (!known) {
                fprintf(stderr, "libprof-report: unknown option '%s' (try --help)\n", a);
                return 2;
            }
            if (i + 1 >= argc) {
                fprintf(stderr, "libprof-report: %s needs an argument (try --help)\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--chrome"))
                chrome = v;
            else if (!strcmp(a, "--csv"))
                csv = v;
            else if (!strcmp(a, "--folded"))
                folded = v;
            else if (!strcmp(a, "--folded-leaks"))
                folded_leaks = v;
            else if (!strcmp(a, "--folded-peak"))
                folded_peak = v;
            else if (!strcmp(a, "--temporary-threshold")) {
                char *end;
                long n = strtol(v, &end, 10);
                if (*end || end == v || n < 1 || n > 64) {
                    fprintf(stderr, "libprof-report: bad --temporary-threshold '%s' (1 to 64)\n", v);
                    return 2;
                }
                temp_threshold = (unsigned)n;
            } else if (!strcmp(a, "--at")) {
                char *end;
                double sec = strtod(v, &end);
                if (end == v || sec <= 0 || sec > 1e9 || (*end && strcmp(end, "s") && strcmp(end, "ms"))) {
                    fprintf(stderr, "libprof-report: bad --at '%s' (seconds since the start, e.g. 1.5 or 200ms)\n", v);
                    return 2;
                }
                peak_at_ns = (uint64_t)(sec * (strcmp(end, "ms") ? 1e9 : 1e6));
            } else if (!strcmp(a, "--speedscope"))
                speedscope = v;
            else if (!strcmp(a, "--events-csv"))
                events_csv = v;
            else if (!strcmp(a, "--html"))
                html = v;
            else if (!strcmp(a, "--diff"))
                diff = v;
            else if (!strcmp(a, "--alloc-min")) {
                if (parse_bytes(v, &alloc_min) != 0) {
                    fprintf(stderr, "libprof-report: bad --alloc-min value '%s'\n", v);
                    return 2;
                }
                have_min = 1;
            } else if (!strcmp(a, "--killed-by")) {
                char *end;
                long n = strtol(v, &end, 10);
                if (*end || end == v || n < 1 || n > 64) {
                    fprintf(stderr, "libprof-report: bad --killed-by value '%s' (a signal number)\n", v);
                    return 2;
                }
                killed_by = (int)n;
            } else if (!strcmp(a, "--top") || !strcmp(a, "--skip")) {
                char *end;
                long n = strtol(v, &end, 10);
                if (*end || end == v || n < 0 || n > 1000000000) {
                    fprintf(stderr, "libprof-report: bad %s value '%s'\n", a, v);
                    return 2;
                }
                if (!strcmp(a, "--top"))
                    o.top = (int)n;
                else
                    o.skip = (int)n;
            } else if (!strcmp(a, "--sort")) {
                static const char *const keys[] = {"total", "self", "count", "mean", "p50", "p99", "max", "name"};
                int k = -1;
                for (int j = 0; j < 8; j++)
                    if (!strcmp(v, keys[j])) k = j;
                if (k < 0) {
                    fprintf(stderr, "libprof-report: bad --sort key '%s' (total self count mean p50 p99 max name)\n",
                            v);
                    return 2;
                }
                o.sort = (enum rp_sort)k;
            } else if (!strcmp(a, "--units")) {
                static const char *const units[] = {"auto", "ns", "us", "ms", "s"};
                int k = -1;
                for (int j = 0; j < 5; j++)
                    if (!strcmp(v, units[j])) k = j;
                if (k < 0) {
                    fprintf(stderr, "libprof-report: bad --units '%s' (auto ns us ms s)\n", v);
                    return 2;
                }
                o.units = (enum rp_units)k;
            } else if (!strcmp(a, "--filter")) {
                if (compile(&o.filter, v, a) != 0) return 2;
                o.have_filter = 1;
            } else if (!strcmp(a, "--iterations")) {
                if (compile(&o.iter_re, v, a) != 0) return 2;
                o.iterations = v;
            } else if (!strcmp(a, "--kernels")) {
                if (compile(&o.kernels, v, a) != 0) return 2;
                o.have_kernels = 1;
            } else if (!strcmp(a, "--what-if")) {
                const char *eq = strrchr(v, '=');
                char *end = NULL;
                double ratio = eq ? strtod(eq + 1, &end) : 0;
                if (!eq || eq == v || !end || *end || !(ratio > 0) || o.nwhatif == RP_MAX_WHATIF) {
                    fprintf(stderr, "libprof-report: bad --what-if '%s' (expected REGEX=RATIO, RATIO > 0)\n", v);
                    return 2;
                }
                char *re = strndup(v, (size_t)(eq - v));
                if (!re || compile(&o.whatif_re[o.nwhatif], re, a) != 0) return 2;
                free(re);
                o.whatif_ratio[o.nwhatif] = ratio;
                o.whatif_text[o.nwhatif++] = v;
            }
        } else {
            inputs[ninputs++] = a;
        }
    }
    if (!ninputs) {
        fputs(usage, stderr);
        return 2;
    }
    int converts = csv || folded || folded_leaks || folded_peak || speedscope || (chrome && !merge);
    if (ninputs > 1 && !merge && (converts || events_csv || html || diff)) {
        fprintf(stderr, "libprof-report: several traces: use --merge (or one trace per run of the tool)\n");
        return 2;
    }
    if (diff && merge) {
        fprintf(stderr, "libprof-report: --diff compares one trace with BASE; --merge cannot be combined with it\n");
        return 2;
    }
    int report = summary || !(converts || events_csv || html || (merge && chrome));

    /* --merge --events-csv streams the inputs one at a time */
    if (merge && events_csv && ninputs > 1) {
        int rc = merged_events_csv((const char *const *)inputs, ninputs, events_csv);
        if (rc != 0 || !(report || chrome || html || csv || converts)) return rc;
        events_csv = NULL; /* written */
    }
    /* --merge --chrome alone streams: no input is held (tools/merge.c) */
    if (merge && chrome && !report && !html && !events_csv && !csv && !diff)
        return rp_merge_stream((const char *const *)inputs, ninputs, chrome, quiet);
    struct input *in = calloc((size_t)ninputs, sizeof *in);
    if (!in) return 1;
    int rc = 0;
    for (int i = 0; i < ninputs && rc == 0; i++) {
        /* slices are needed for the tables, merge, diff, html and a JSON input's events CSV */
        if (load(&in[i], inputs[i], report || merge || diff || html || events_csv) != 0) rc = 1;
    }
    if (rc == 0 && converts) {
        if (!in[0].raw) {
            fprintf(stderr, "libprof-report: %s: --chrome, --csv and the flame graphs take a raw trace (.lpt)\n",
                    in[0].path);
            rc = 2;
        } else {
            struct lp_convert_opts co = {
                .chrome_path = chrome,
                .chrome_fd = -1,
                .csv_path = csv,
                .summary_fd = -1,
                .alloc_min = have_min ? alloc_min : in[0].r.hdr.alloc_min,
                .trace_label = in[0].path,
                .folded_path = folded,
                .folded_leaks_path = folded_leaks,
                .folded_peak_path = folded_peak,
                .speedscope_path = speedscope,
                .site_tracks = 1, /* offline: the "heap by site" tracks too */
                .temporary_threshold = temp_threshold,
                .peak_at_ns = peak_at_ns,
                .general_path = general_path,
                .killed_by = killed_by,
                .progress = isatty(STDERR_FILENO) && !quiet ? progress : NULL,
            };
            char err[512];
            if (lp_convert(&in[0].r, &co, err, sizeof err) != 0) {
                fprintf(stderr, "libprof-report: %s\n", err);
                rc = 1;
            } else if (remove_raw && (chrome || csv) && unlink(in[0].path) != 0) {
                fprintf(stderr, "libprof-report: cannot remove %s: %s\n", in[0].path, strerror(errno));
                rc = 1;
            }
        }
    }
    /* ONNX Runtime's runs are a model's iterations: taken as such unless --iterations says otherwise */
    if (rc == 0 && !o.iterations && ninputs > 0)
        for (size_t k = 0; k < in[0].c.nnames; k++)
            if (in[0].c.names[k] && !strcmp(in[0].c.names[k], "ort.Run") &&
                compile(&o.iter_re, "^ort\\.Run$", "--iterations") == 0) {
                o.iterations = "^ort\\.Run$";
                if (!quiet)
                    fprintf(stderr, "libprof-report: the ort.Run slices are the iterations (--iterations to choose)\n");
                break;
            }
    if (rc == 0 && merge && chrome) rc = write_merged(in, ninputs, chrome);
    if (rc == 0 && events_csv) {
        FILE *f = fopen(events_csv, "w");
        if (!f || (in[0].raw ? rp_events_csv_lpt(f, &in[0].r, 0) : rp_events_csv(f, &in[0].c, 0)) != 0 ||
            fclose(f) != 0) {
            fprintf(stderr, "libprof-report: cannot write %s: %s\n", events_csv, strerror(errno));
            rc = 1;
        }
    }
    if (rc == 0 && html) {
        FILE *f = fopen(html, "w");
        char *sum = in[0].raw ? summary_text(&in[0].r, in[0].path) : NULL;
        char *fold[4] = {NULL, NULL, NULL, NULL};
        if (in[0].raw) folded_texts(&in[0].r, fold);
        if (!f ||
            rp_html(f, in[0].path, &in[0].c, in[0].raw ? &in[0].r : NULL, sum, (const char *const *)fold, &o) != 0 ||
            fclose(f) != 0) {
            fprintf(stderr, "libprof-report: cannot write %s: %s\n", html, strerror(errno));
            rc = 1;
        }
        free(sum);
        for (int k = 0; k < 4; k++) free(fold[k]);
    }
    if (rc == 0 && diff) {
        struct input base;
        if (load(&base, diff, 1) != 0)
            rc = 1;
        else {
            printf("diff: %s -> %s\n", diff, in[0].path);
            if (rp_diff(stdout, &base.c, &in[0].c, &o) != 0) rc = 1;
            unload(&base);
        }
        report = summary;
    }
    if (rc == 0 && report) {
        if (merge && ninputs > 1) {
            struct lp_slices all;
            if (merged_slices(in, ninputs, &all) != 0) {
                fprintf(stderr, "libprof-report: out of memory\n");
                rc = 1;
            } else {
                char label[64];
                snprintf(label, sizeof label, "%d traces merged", ninputs);
                if (rp_print(stdout, label, &all, &o) != 0) rc = 1;
                lp_slices_free(&all);
                print_ranks(in, ninputs);
            }
        } else {
            for (int i = 0; i < ninputs && rc == 0; i++) {
                if (i) putchar('\n');
                if (in[i].raw) { /* the memory, I/O, BLAS and site tables first */
                    fflush(stdout);
                    struct lp_convert_opts co = {.chrome_fd = -1,
                                                 .summary_fd = STDOUT_FILENO,
                                                 .alloc_min = in[i].r.hdr.alloc_min,
                                                 .trace_label = in[i].path,
                                                 .temporary_threshold = temp_threshold,
                                                 .peak_at_ns = peak_at_ns,
                                                 .general_path = general_path,
                                                 .progress = isatty(STDERR_FILENO) && !quiet ? progress : NULL};
                    char err[512];
                    if (lp_convert(&in[i].r, &co, err, sizeof err) != 0) {
                        fprintf(stderr, "libprof-report: %s\n", err);
                        rc = 1;
                        break;
                    }
                    if (in[i].c.nslices == 0) continue; /* no timed calls: nothing more to say */
                    putchar('\n');
                }
                if (rp_print(stdout, in[i].path, &in[i].c, &o) != 0) rc = 1;
            }
        }
    }
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "libprof-report: cannot write the report: %s\n", strerror(errno));
        rc = 1;
    }
    for (int i = 0; i < ninputs; i++) unload(&in[i]);
    free(in);
    free(inputs);
    return rc;
}
