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
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chrome_in.h"
#include "pftrace_in.h"
#include "cli.h"
#include "pack.h"
#include "lib/fmt.h"
#include "lib/convert.h"
#include "lib/reader.h"
#include "lib/samples.h"
#include "events_csv.h"
#include "report.h"
#include "lib/vec.h"

static struct rp_cli cli; /* what the command line says (cli.c) */
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

/* One input, loaded: a raw trace keeps its reader (memory, I/O, conversions), any trace has its
 * slices. */
struct input {
    const char *path;
    int raw;
    uint8_t *image; /* a packed trace's raw trace, rebuilt (tools/pack.c) */
    struct lp_reader r;
    struct lp_slices c;
};

/* --live on a followed run: the command line the follower is asked with; the Chrome trace it sent
 * (live_followed), read as an input named live_name */
static int live_argc;
static char **live_argv;
static char *live_text;
static size_t live_len;
static const char live_name[] = "(the run so far)";

/* 1 raw, 2 packed, 0 JSON, 3 Perfetto's protobuf, -1 none of them (message printed). */
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
    if (rp_is_packed(magic, got)) return 2;
    if (got >= 7 && memcmp(magic, LP_FORMAT_MAGIC, 7) == 0) return 1; /* the reader says which version */
    size_t i = 0;
    while (i < got && (magic[i] == ' ' || magic[i] == '\n' || magic[i] == '\t' || magic[i] == '\r')) i++;
    if (i < got && (magic[i] == '{' || magic[i] == '[')) return 0;
    if (rp_is_pftrace(magic, got)) return 3;
    fprintf(stderr, "libprof-report: %s: not a libprof raw trace (bad magic), Chrome trace JSON or a Perfetto trace\n",
            path);
    return -1;
}

static int load(struct input *in, const char *path, int need_slices) {
    memset(in, 0, sizeof *in);
    in->path = path;
    int k = path == live_name ? 0 : kind_of(path);
    if (k < 0) return -1;
    char err[512];
    if (k == 1 || k == 2) {
        in->raw = 1;
        size_t isize = 0;
        if (k == 2 && rp_unpack(path, &in->image, &isize, err, sizeof err) != 0) {
            fprintf(stderr, "libprof-report: %s\n", err);
            return -1;
        }
        if ((k == 2       ? lp_reader_open_mem(&in->r, in->image, isize, err, sizeof err)
             : cli.follow ? lp_reader_follow(&in->r, path, atol(cli.follow), err, sizeof err)
                          : lp_reader_open(&in->r, path, err, sizeof err)) != 0) {
            fprintf(stderr, "libprof-report: %s: %s\n", path, err);
            free(in->image);
            in->image = NULL;
            return -1;
        }
        if (!quiet && !cli.live && !cli.follow && (in->r.truncated || !in->r.end)) /* still being written */
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
    char *text = path == live_name ? live_text : slurp(path, &len);
    if (path == live_name) live_text = NULL, len = live_len; /* (the follower's trace: read once) */
    if (!text) {
        fprintf(stderr, "libprof-report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = k == 3 ? rp_pftrace_load(text, len, &in->c, err, sizeof err)
                    : lp_chrome_load(text, len, &in->c, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "libprof-report: %s: %s\n", path, err);
        return -1;
    }
    return 0;
}

static void unload(struct input *in) {
    if (in->raw) lp_reader_close(&in->r);
    free(in->image);
    lp_slices_free(&in->c);
}

/* An output's text, kept in memory by the kernel (a memfd: no file anywhere) and read back. */
static char *memfd_text(int fd) {
    off_t n = lseek(fd, 0, SEEK_END);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && pread(fd, s, (size_t)n, 0) == n) {
        s[n] = '\0';
        return s;
    }
    free(s);
    return NULL;
}

/* What --html shows of a raw trace's conversion, made by one pass: the converter's text report
 * (memory, I/O, BLAS, oneDNN, sites) into p->summary, with stacks the four flame graphs
 * (allocated, at the peak, leaked, temporary) as collapsed-stack texts into p->folded[] (NULL
 * each when none), the "heap by site" series into p->sites and the CPU samples into p->samples.
 * The texts go through memory files (memfd_create), never through a file of the filesystem. */
static void html_texts(const struct lp_reader *r, const char *label, struct rp_page_parts *p) {
    static const int folded[4] = {LP_OUT_FOLDED, LP_OUT_FOLDED_PEAK, LP_OUT_FOLDED_LEAKS, LP_OUT_FOLDED_TEMP};
    struct lp_convert_opts o = {.alloc_min = r->hdr.alloc_min,
                                .trace_label = label,
                                .temporary_threshold = temp_threshold,
                                .peak_at_ns = peak_at_ns,
                                .general_path = general_path,
                                .py_user_lines = cli.py_user_lines,
                                .site_series = &p->sites,
                                .site_series_top = RP_SITE_TOP,
                                .site_series_buckets = RP_SITE_BUCKETS,
                                .samples_out = &p->samples};
    int sum = memfd_create("libprof-summary", MFD_CLOEXEC), fd[4] = {-1, -1, -1, -1};
    if (sum < 0) return;
    LP_CONVERT_FD(&o, LP_OUT_SUMMARY, sum);
    for (int k = 0; k < 4; k++) {
        if (!lp_stack_distinct(r) || !lp_has_alloc_stacks(r)) break; /* (the flame graphs need allocation stacks) */
        if ((fd[k] = memfd_create("libprof-folded", MFD_CLOEXEC)) >= 0) LP_CONVERT_FD(&o, folded[k], fd[k]);
    }
    char err[256];
    /* (on an error, what could be written is complete: the summary among them) */
    int ok = lp_convert(r, &o, err, sizeof err) == 0;
    for (int k = 0; k < 4; k++) {
        if (fd[k] < 0) continue;
        if (ok) p->folded[k] = memfd_text(fd[k]);
        close(fd[k]);
    }
    p->summary = memfd_text(sum);
    close(sum);
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
            lp_slices_set_cpu(b, s->cpu_ns);
            lp_slices_set_cpu_others(b, s->cpu_others_ns);
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
 * memory and with no file but the output — each input's rows made by a process of its own
 * (forked) into a pipe, led by their order key (a raw trace streams; a JSON trace is loaded
 * alone) after one line of what aligns it (its anchor, rank, host and MPI instants: skew.c); then
 * a k-way merge of the pipes on key + shift. Rows come in the order of their effect (an
 * allocation's moment, a call's end), as in one trace's CSV. */
static int merged_events_csv(const char **paths, int n, const char *out) {
    FILE **in = calloc((size_t)n, sizeof *in);
    pid_t *child = calloc((size_t)n, sizeof *child);
    struct rp_sync *sy = calloc((size_t)n, sizeof *sy);
    int64_t *skew = calloc((size_t)n, sizeof *skew), *shift = calloc((size_t)n, sizeof *shift);
    int rc = !in || !child || !sy || !skew || !shift;
    for (int i = 0; i < n && !rc; i++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0 || (child[i] = fork()) < 0) {
            fprintf(stderr, "libprof-report: %s: %s\n", paths[i], strerror(errno));
            rc = 1;
            break;
        }
        if (child[i] == 0) { /* this input's rows into the pipe, after its alignment line */
            close(p[0]);
            FILE *f = fdopen(p[1], "w");
            struct input one;
            struct rp_sync me;
            if (!f || load(&one, paths[i], 0) != 0) _exit(1);
            if (one.raw)
                rp_sync_of_reader(&one.r, &me);
            else
                rp_sync_of_slices(&one.c, &me);
            fprintf(f, "%lld\t%lld\t%lld\t%lld\t%s\n", (long long)me.origin_ns, (long long)me.rank,
                    (long long)me.sync_ns[0], (long long)me.sync_ns[1], me.host);
            int bad = (one.raw ? rp_events_csv_lpt(f, &one.r, 1) : rp_events_csv(f, &one.c, 1)) != 0;
            _exit(fclose(f) != 0 || bad);
        }
        close(p[1]);
        long long o, r, b, m;
        char host[64] = "";
        if (!(in[i] = fdopen(p[0], "r")) || fscanf(in[i], "%lld\t%lld\t%lld\t%lld\t", &o, &r, &b, &m) != 4 ||
            !fgets(host, sizeof host, in[i])) {
            rc = 1; /* (the child said why) */
            break;
        }
        host[strcspn(host, "\n")] = '\0';
        sy[i] = (struct rp_sync){o, r, "", {b, m}};
        memcpy(sy[i].host, host, sizeof host);
    }
    if (!rc) {
        rp_skew(sy, n, skew);
        int64_t t0 = INT64_MAX;
        for (int i = 0; i < n; i++)
            if (sy[i].origin_ns && sy[i].origin_ns + skew[i] < t0) t0 = sy[i].origin_ns + skew[i];
        for (int i = 0; i < n; i++) shift[i] = sy[i].origin_ns && t0 != INT64_MAX ? sy[i].origin_ns + skew[i] - t0 : 0;
        FILE *f = fopen(out, "w");
        if (!f || rp_merge_keyed_csv(in, shift, n, f) != 0 || fclose(f) != 0) {
            fprintf(stderr, "libprof-report: cannot write %s: %s\n", out, strerror(errno));
            rc = 1;
        }
    }
    for (int i = 0; in && i < n; i++)
        if (in[i]) fclose(in[i]);
    for (int i = 0; child && i < n; i++) {
        int st;
        if (child[i] <= 0) continue;
        if (rc) kill(child[i], SIGTERM);
        while (waitpid(child[i], &st, 0) < 0 && errno == EINTR) {}
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
    free(in);
    free(child);
    free(sy);
    free(skew);
    free(shift);
    return rc;
}

/* ---- the actions, each one thing the command line can ask --------------------------------------- */

/* The trace a summary names: the raw one, or — where it goes (--remove-raw, --follow) — what is
 * written from it, as the program's own conversion names it. */
static const char *trace_label(const struct input *in) {
    if (!cli.follow && !cli.remove_raw) return in->path;
    static const int kept[] = {LP_OUT_CHROME, LP_OUT_PERFETTO, LP_OUT_CSV}; /* (the timelines first) */
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (cli.out[kept[i]]) return cli.out[kept[i]];
    return in->path;
}

/* The options of a conversion of a raw trace, as the command line sets them. */
static struct lp_convert_opts convert_opts(const struct input *in) {
    return (struct lp_convert_opts){.alloc_min = cli.have_min ? cli.alloc_min : in->r.hdr.alloc_min,
                                    .trace_label = trace_label(in),
                                    .temporary_threshold = temp_threshold,
                                    .peak_at_ns = peak_at_ns,
                                    .general_path = general_path,
                                    .killed_by = cli.killed_by,
                                    .file_mode = cli.file_mode,
                                    .py_user_lines = cli.py_user_lines,
                                    .live = cli.live != NULL,
                                    .top = cli.o.top > 0 ? (unsigned)cli.o.top : 0,
                                    .timeline_ns = cli.have_timeline ? cli.timeline_ns : UINT64_C(300000000000),
                                    .timeline_min_ns = cli.timeline_min_ns,
                                    .progress = isatty(STDERR_FILENO) && !quiet ? progress : NULL};
}

/* --merge --chrome: each raw input converted as its own --chrome would be (the heap-by-site
 * tracks too), its allocation instants from its own threshold unless --alloc-min says. */
static int merge_stream(void) {
    struct input none = {0};
    none.r.hdr.alloc_min = 0;
    struct lp_convert_opts o = convert_opts(&none);
    o.alloc_min = cli.have_min ? cli.alloc_min : UINT64_MAX;
    o.trace_label = NULL;
    o.site_tracks = 1;
    return rp_merge_stream(cli.inputs, cli.ninputs, cli.out[LP_OUT_CHROME], &o, quiet);
}

/* --pack: the raw trace, compact. */
static int act_pack(struct input *in) {
    if (!in->raw || in->image) {
        fprintf(stderr, "libprof-report: %s: --pack takes a raw trace (.lpt)\n", in->path);
        return 2;
    }
    char err[512] = "";
    uint64_t events = 0, bytes = 0;
    if (rp_pack(in->path, cli.pack, cli.file_mode, err, sizeof err, &events, &bytes) != 0) {
        fprintf(stderr, "libprof-report: %s\n", err);
        return 1;
    }
    if (!quiet)
        fprintf(stderr, "libprof-report: %s: %llu events in %llu bytes (%.2f a record; raw: %.2f)\n", cli.pack,
                (unsigned long long)events, (unsigned long long)bytes, events ? (double)bytes / (double)events : 0.0,
                events ? (double)in->r.size / (double)events : 0.0);
    return 0;
}

/* --follow: a --live look at the run is asked through the follower's socket (live.c): taken while
 * the pass waits for more, made by a copy of the pass from the asker's own command line. */
static struct lp_snapshot snapshot;
static char follow_spool[4096];
static int live_listen = -1;
static struct rp_live_request live_req;

static int live_ask(struct lp_snapshot *s) {
    (void)s;
    return rp_live_take(live_listen, &live_req);
}

/* What a --live look wants (the same on both sides): the report (the summary and the tables) and
 * whether a Chrome trace of the run so far serves it (the tables, --events-csv, --html, --diff). */
static void live_wants(const struct rp_cli *c, int *report, int *sliced) {
    int any = 0;
    for (int k = 0; k < LP_OUT_COUNT; k++) any |= c->out[k] != NULL;
    *report = c->summary || !(any || c->events_csv || c->html || c->diff);
    *sliced = *report || c->events_csv || c->html || c->diff;
}

/* In the copy of the pass: the asker's command line made into the snapshot — its outputs where it
 * is (its working directory), the summary to its standard output, the Chrome trace the tables need
 * (when it asked for none) into the connection, messages to its standard error. */
static int live_load(struct lp_snapshot *s) {
    struct rp_live_request *q = &live_req;
    struct rp_cli rq;
    if (dup2(q->err_fd, STDERR_FILENO) < 0 || chdir(q->cwd) != 0 || rp_cli_parse(&rq, q->argc, q->argv) != -1)
        return -1;
    int report, sliced;
    live_wants(&rq, &report, &sliced);
    for (int k = 0; k < LP_OUT_COUNT; k++)
        snprintf(s->path[k], sizeof s->path[k], "%s", rq.out[k] && lp_outputs[k].option ? rq.out[k] : "");
    if (report) s->fd[LP_OUT_SUMMARY] = q->out_fd;
    if (sliced && !rq.out[LP_OUT_CHROME]) s->fd[LP_OUT_CHROME] = q->conn;
    s->top = rq.o.top > 0 ? (unsigned)rq.o.top : 0;
    return 0;
}

static void live_release(struct lp_snapshot *s) {
    (void)s;
    rp_live_request_free(&live_req);
}

static void follower_file(int make) {
    char path[4200];
    snprintf(path, sizeof path, "%s.follower", follow_spool);
    if (!make) {
        unlink(path);
        return;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    char pid[24];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (write(fd, pid, (size_t)n) != n) unlink(path);
    close(fd);
}

/* --chrome, --csv and the flame graphs of one raw trace; --remove-raw after. */
static int act_convert(struct input *in, int summary) {
    if (!in->raw) { /* name what was asked, and where a raw trace comes from */
        char opts[256] = "";
        for (int k = 0, o = 0; k < LP_OUT_COUNT; k++)
            if (cli.out[k] && lp_outputs[k].option && o < (int)sizeof opts)
                o += snprintf(opts + o, sizeof opts - (size_t)o, "%s%s", o ? ", " : "", lp_outputs[k].option);
        fprintf(stderr,
                "libprof-report: %s: %s read%s a raw trace (.lpt, or .lpz packed), not a Chrome trace: record with "
                "LIBPROF_OUTPUT=NAME.lpt, or keep the raw trace beside the JSON with LIBPROF_KEEP_RAW=1\n",
                in->path, opts[0] ? opts : "these outputs", strchr(opts, ',') ? "" : "s");
        return 2;
    }
    struct lp_convert_opts co = convert_opts(in);
    for (int k = 0; k < LP_OUT_COUNT; k++) co.path[k] = cli.out[k];
    co.site_tracks = 1; /* offline: the "heap by site" tracks too */
    if (summary) LP_CONVERT_FD(&co, LP_OUT_SUMMARY, STDOUT_FILENO);
    if (cli.follow) {
        snprintf(follow_spool, sizeof follow_spool, "%s", in->path);
        live_listen = rp_live_listen(in->path);
        snapshot = (struct lp_snapshot){.ask = live_ask, .load = live_load, .release = live_release};
        co.snapshot = &snapshot;
        follower_file(1);
    }
    char err[512];
    int rc = lp_convert(&in->r, &co, err, sizeof err);
    if (cli.follow) {
        follower_file(0);
        if (live_listen >= 0) close(live_listen);
    }
    if (rc != 0) {
        fprintf(stderr, "libprof-report: %s\n", err);
        return 1;
    }
    return 0;
}

/* --remove-raw: once a trace is written from it (--chrome, --perfetto, --csv) or --pack, the raw
 * trace goes. */
static int remove_raw(struct input *in) {
    int written = cli.out[LP_OUT_CHROME] || cli.out[LP_OUT_PERFETTO] || cli.out[LP_OUT_CSV] || cli.pack || cli.follow;
    if (!cli.remove_raw || !written || !in->raw || in->image) return 0;
    if (unlink(in->path) != 0 && errno != ENOENT) {
        fprintf(stderr, "libprof-report: cannot remove %s: %s\n", in->path, strerror(errno));
        return 1;
    }
    return 0;
}

static int act_events_csv(struct input *in) {
    FILE *f = fopen(cli.events_csv, "w");
    if (!f || (in->raw ? rp_events_csv_lpt(f, &in->r, 0) : rp_events_csv(f, &in->c, 0)) != 0 || fclose(f) != 0) {
        fprintf(stderr, "libprof-report: cannot write %s: %s\n", cli.events_csv, strerror(errno));
        return 1;
    }
    return 0;
}

static int act_html(struct input *in) {
    FILE *f = fopen(cli.html, "w");
    struct rp_page_parts parts;
    memset(&parts, 0, sizeof parts);
    if (in->raw) html_texts(&in->r, in->path, &parts);
    int rc = 0;
    if (!f || rp_html(f, in->path, &in->c, in->raw ? &in->r : NULL, &parts, &cli.o) != 0 || fclose(f) != 0) {
        fprintf(stderr, "libprof-report: cannot write %s: %s\n", cli.html, strerror(errno));
        rc = 1;
    }
    free(parts.summary);
    for (int k = 0; k < 4; k++) free(parts.folded[k]);
    lp_site_series_free(&parts.sites);
    lp_samples_free(parts.samples);
    return rc;
}

static int act_diff(struct input *in) {
    struct input base;
    if (load(&base, cli.diff, 1) != 0) return 1;
    printf("diff: %s -> %s\n", cli.diff, in->path);
    int rc = rp_diff(stdout, &base.c, &in->c, &cli.o) != 0;
    unload(&base);
    return rc;
}

/* The report on stdout: several traces merged into one, or each after the other (a raw trace's
 * memory, I/O, BLAS and site tables first). */
static int act_report(struct input *in, int n) {
    if (cli.merge && n > 1) {
        struct lp_slices all;
        if (merged_slices(in, n, &all) != 0) {
            fprintf(stderr, "libprof-report: out of memory\n");
            return 1;
        }
        char label[64];
        snprintf(label, sizeof label, "%d traces merged", n);
        int rc = rp_print(stdout, label, &all, &cli.o) != 0;
        lp_slices_free(&all);
        print_ranks(in, n);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        if (i) putchar('\n');
        if (in[i].raw) {
            fflush(stdout);
            struct lp_convert_opts co = convert_opts(&in[i]);
            LP_CONVERT_FD(&co, LP_OUT_SUMMARY, STDOUT_FILENO);
            co.killed_by = 0;
            char err[512];
            if (lp_convert(&in[i].r, &co, err, sizeof err) != 0) {
                fprintf(stderr, "libprof-report: %s\n", err);
                return 1;
            }
            if (in[i].c.nslices == 0) continue; /* no timed calls: nothing more to say */
            putchar('\n');
        }
        if (rp_print(stdout, in[i].path, &in[i].c, &cli.o) != 0) return 1;
        if (!in[i].raw && rp_print_cpu(stdout, &in[i].c, &cli.o) != 0) return 1;
        if (!in[i].raw && rp_print_torch(stdout, &in[i].c, &cli.o) != 0) return 1;
    }
    return 0;
}

/* A runtime's runs are a model's iterations — ONNX Runtime's ort.Run, ExecuTorch's
 * executorch.execute: taken as such unless --iterations says otherwise. */
static void default_iterations(const struct input *in) {
    static const char *const runs[][2] = {{"ort.Run", "^ort\\.Run$"}, {"executorch.execute", "^executorch\\.execute$"}};
    if (cli.o.iterations) return;
    for (size_t k = 0; k < in->c.nnames; k++)
        for (unsigned i = 0; i < 2; i++)
            if (in->c.names[k] && !strcmp(in->c.names[k], runs[i][0]) &&
                rp_compile(&cli.o.iter_re, runs[i][1], "--iterations") == 0) {
                cli.o.iterations = runs[i][1];
                if (!quiet)
                    fprintf(stderr, "libprof-report: the %s slices are the iterations (--iterations to choose)\n",
                            runs[i][0]);
                return;
            }
}

/* Which combinations make sense; 0, or 2 with a message. */
static int check_usage(int converts) {
    if (cli.ninputs > 1 && !cli.merge && (converts || cli.events_csv || cli.html || cli.diff)) {
        fprintf(stderr, "libprof-report: several traces: use --merge (or one trace per run of the tool)\n");
        return 2;
    }
    if (cli.diff && cli.merge) {
        fprintf(stderr, "libprof-report: --diff compares one trace with BASE; --merge cannot be combined with it\n");
        return 2;
    }
    return 0;
}

/* One run of the tool over cli.inputs: the conversions, exports and report asked. */
static int run(void) {
    int rc;
    int converts = cli.follow != NULL; /* a conversion's output asked (--chrome with --merge is the merge's) */
    for (int k = 0; k < LP_OUT_COUNT; k++) converts |= cli.out[k] && (k != LP_OUT_CHROME || !cli.merge);
    if ((rc = check_usage(converts)) != 0) return rc;
    int report =
        cli.summary || !(converts || cli.pack || cli.events_csv || cli.html || (cli.merge && cli.out[LP_OUT_CHROME]));
    /* following, the trace is read once: the summary is the conversion's (act_convert) */
    int follow_summary = cli.follow && report;
    if (cli.follow) report = 0;
    if (cli.merge && cli.events_csv && cli.ninputs > 1) { /* streams the inputs one at a time */
        rc = merged_events_csv(cli.inputs, cli.ninputs, cli.events_csv);
        if (rc != 0 || !(report || cli.out[LP_OUT_CHROME] || cli.html || converts)) return rc;
        cli.events_csv = NULL; /* written */
    }
    if (cli.merge && cli.out[LP_OUT_CHROME] && !report && !cli.html && !cli.events_csv && !cli.out[LP_OUT_CSV] &&
        !cli.diff)
        return merge_stream(); /* bounded: tools/merge.c */
    struct input *in = calloc((size_t)cli.ninputs, sizeof *in);
    if (!in) return 1;
    int slices = report || cli.merge || cli.diff || cli.html || cli.events_csv;
    for (int i = 0; i < cli.ninputs && rc == 0; i++) rc = load(&in[i], cli.inputs[i], slices) != 0;
    if (rc == 0) rp_inputs_mode(&cli, cli.inputs, cli.ninputs); /* outputs no wider than the inputs */
    if (rc == 0 && converts) rc = act_convert(&in[0], follow_summary);
    if (rc == 0 && cli.pack) rc = act_pack(&in[0]);
    if (rc == 0) default_iterations(&in[0]);
    if (rc == 0 && cli.merge && cli.out[LP_OUT_CHROME]) /* the one merge: streamed, bounded (tools/merge.c) */
        rc = merge_stream();
    if (rc == 0 && cli.events_csv) rc = act_events_csv(&in[0]);
    if (rc == 0 && cli.html) rc = act_html(&in[0]);
    if (rc == 0 && cli.diff) rc = act_diff(&in[0]), report = cli.summary;
    if (rc == 0 && report) rc = act_report(in, cli.ninputs);
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "libprof-report: cannot write the report: %s\n", strerror(errno));
        rc = 1;
    }
    /* the raw trace goes last: who waits for it to go (--wait, a background conversion) then
     * finds every output written, the report in the log too */
    if (rc == 0 && (converts || cli.pack)) rc = remove_raw(&in[0]);
    for (int i = 0; i < cli.ninputs; i++) unload(&in[i]);
    free(in);
    return rc;
}

/* --live on a run that a follower converts (its spool has given back what was read): the look is
 * asked of the follower (live.c), which writes the outputs asked and the summary from what it has
 * read, and sends the Chrome trace of the run so far when the report's tables (or --html,
 * --events-csv, --diff) need one: read then as any trace, from memory. So every option works on a
 * live process, followed or not, and nothing is written but what was asked. Returns 0, 1, or -1
 * when no follower listens. */
static int live_followed(const char *spool) {
    int report, sliced;
    live_wants(&cli, &report, &sliced);
    fflush(stdout); /* (the follower writes the summary after what is printed) */
    int fd = rp_live_ask(spool, live_argc, live_argv);
    if (fd == -1) return -1;
    if (fd < 0) {
        fprintf(stderr, "libprof-report: cannot ask the follower of %s: %s\n", spool, strerror(errno));
        return 1;
    }
    size_t cap = 0;
    live_len = 0;
    for (;;) { /* what it sends until its end (a look waits at most 20 s for each part) */
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 20000) <= 0) {
            fprintf(stderr, "libprof-report: the follower of %s made no snapshot\n", spool);
            close(fd);
            return 1;
        }
        if (cap - live_len < 65536) {
            char *nt = realloc(live_text, cap = cap ? 2 * cap : 1 << 20);
            if (!nt) break;
            live_text = nt;
        }
        ssize_t n = read(fd, live_text + live_len, cap - live_len);
        if (n <= 0) break;
        live_len += (size_t)n;
    }
    close(fd);
    if (!sliced) return 0;
    if (!cli.out[LP_OUT_CHROME] && !live_len) {
        fprintf(stderr,
                "libprof-report: --live: this run writes no Chrome trace (its output is %s), so its report so far "
                "is the summary alone\n",
                spool);
        return report ? 0 : 1;
    }
    /* the rest from the Chrome trace of the run so far, as from any trace */
    static const char *one[1];
    one[0] = cli.out[LP_OUT_CHROME] ? cli.out[LP_OUT_CHROME] : live_name;
    cli.inputs = one;
    cli.ninputs = 1;
    for (int k = 0; k < LP_OUT_COUNT; k++) cli.out[k] = NULL; /* written */
    cli.summary = report; /* the report's tables of the trace, after the follower's summary */
    return run();
}

/* --live: the running process's spool as the one input, or its follower's look. */
static int run_live(const char *path) {
    int rc = live_followed(path);
    if (rc >= 0) return rc;
    /* Read the spool itself, holding its lock shared: a follower cannot start meanwhile (it would
     * give back the blocks being read; it starts at the program's next chunk instead). Held by
     * one: a follower is starting, or the run is over and converting. */
    int lk = open(path, O_RDONLY | O_CLOEXEC);
    if (lk >= 0 && flock(lk, LOCK_SH | LOCK_NB) != 0) {
        close(lk);
        for (int waited = 0; waited < 3000; waited += 20) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
            if ((rc = live_followed(path)) >= 0) return rc;
        }
        fprintf(stderr, "libprof-report: --live: the trace %s is being converted (the run is ending)\n", path);
        return 1;
    }
    static const char *one[1];
    one[0] = path;
    cli.inputs = one;
    cli.ninputs = 1;
    rc = run();
    if (lk >= 0) close(lk);
    return rc;
}

int main(int argc, char **argv) {
    live_argc = argc, live_argv = argv;
    int rc = rp_cli_parse(&cli, argc, argv);
    if (rc >= 0) return rc;
    quiet = cli.quiet, temp_threshold = cli.temp_threshold, peak_at_ns = cli.peak_at_ns;
    general_path = cli.general_path;
    if (rp_setup_process(&cli) != 0) return 1; /* --log, file modes, limits */
    if (cli.wait) return rp_wait(cli.wait, cli.wait_timeout, quiet);
    if (cli.hold) return rp_hold_events(cli.hold);
    if (cli.live) return rp_live(cli.live, cli.interval, run_live, quiet);
    return run();
}
