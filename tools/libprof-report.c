/* libprof-report: the post-processor for libprof traces. Today it converts a raw trace (.lpt)
 * into the Chrome trace JSON, the CSV summary and the summary table, with the same code the
 * preload runs at exit. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chrome_in.h"
#include "convert.h"
#include "lpt.h"

static const char usage[] =
    "usage: libprof-report TRACE [options]\n"
    "\n"
    "TRACE is a raw libprof trace (LIBPROF_OUTPUT=trace.lpt): convert and summarise it; with no\n"
    "output option the summary table is printed to stdout. TRACE may also be Chrome trace JSON,\n"
    "libprof's or another profiler's (PyTorch, ONNX Runtime, uftrace --chrome): its slices are\n"
    "summarised per name (count, total, mean, p50, p90, p99, max).\n"
    "\n"
    "options:\n"
    "  --chrome FILE      write the Chrome trace JSON (open in ui.perfetto.dev or chrome://tracing)\n"
    "  --csv FILE         write the CSV summary (one row per function, see README)\n"
    "  --summary          print the summary table to stdout (also with --chrome/--csv)\n"
    "  --folded FILE      flame graph of allocated bytes by call stack, collapsed format\n"
    "                     (flamegraph.pl, speedscope, inferno); needs LIBPROF_STACKS\n"
    "  --folded-leaks FILE  the same for bytes leaked at exit\n"
    "  --speedscope FILE  both as a speedscope JSON file (unit bytes)\n"
    "  --alloc-min BYTES  allocations at least this large become instant events (default:\n"
    "                     the value the trace was recorded with; K/M/G suffixes allowed)\n"
    "  -q, --quiet        no progress or notices on stderr\n"
    "  -h, --help         this text\n"
    "  --version          print the version\n"
    "\n"
    "exit status: 0 done, 1 bad input or output error, 2 bad usage\n";

static int quiet;

static void progress(uint64_t done, uint64_t total, void *arg) {
    (void)arg;
    if (quiet || total == 0) return;
    fprintf(stderr, "\rlibprof-report: %llu / %llu events (%u%%)", (unsigned long long)done,
            (unsigned long long)total, (unsigned)(done * 100 / total));
    if (done >= total) fputc('\n', stderr);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

struct name_row { uint32_t name; size_t count; int64_t total; int64_t *durs; };

static int cmp_total(const void *a, const void *b) {
    const struct name_row *x = a, *y = b;
    return x->total > y->total ? -1 : x->total < y->total;
}

/* Percentile `p` of the sorted `d[0..n)`, nearest rank. */
static int64_t pct(const int64_t *d, size_t n, double p) {
    size_t rank = (size_t)(p * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    return d[rank - 1];
}

/* Summarise a Chrome trace JSON per slice name. Returns the exit status. */
static int summarise_chrome(const char *path, const char *text, size_t len) {
    struct lp_chrome c;
    char err[256];
    if (lp_chrome_load(text, len, &c, err, sizeof err) != 0) {
        fprintf(stderr, "libprof-report: %s: %s\n", path, err);
        return 1;
    }
    struct name_row *rows = calloc(c.nnames ? c.nnames : 1, sizeof *rows);
    int64_t *durs = malloc((c.nslices ? c.nslices : 1) * sizeof *durs);
    size_t *fill = calloc(c.nnames ? c.nnames : 1, sizeof *fill);
    if (!rows || !durs || !fill) {
        fprintf(stderr, "libprof-report: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < c.nslices; i++) rows[c.slices[i].name].count++;
    size_t off = 0;
    for (size_t n = 0; n < c.nnames; n++) {
        rows[n].name = (uint32_t)n;
        rows[n].durs = durs + off;
        off += rows[n].count;
    }
    for (size_t i = 0; i < c.nslices; i++) {
        struct name_row *r = &rows[c.slices[i].name];
        r->durs[fill[c.slices[i].name]++] = c.slices[i].dur_ns;
        r->total += c.slices[i].dur_ns;
    }
    qsort(rows, c.nnames, sizeof *rows, cmp_total);
    printf("%s: %zu events, %zu slices, %zu names", path, c.events, c.nslices, c.nnames);
    if (c.skipped) printf(", %zu events skipped (not slices)", c.skipped);
    if (c.unmatched) printf(", %zu unmatched B/E", c.unmatched);
    printf("\n  %-32s %9s %12s %10s %10s %10s %10s %10s\n", "name", "count", "total us", "mean us", "p50 us",
           "p90 us", "p99 us", "max us");
    for (size_t n = 0; n < c.nnames; n++) {
        struct name_row *r = &rows[n];
        if (!r->count) continue;
        qsort(r->durs, r->count, sizeof *r->durs, cmp_i64);
        printf("  %-32.32s %9zu %12.3f %10.3f %10.3f %10.3f %10.3f %10.3f\n", c.names[r->name], r->count,
               (double)r->total / 1e3, (double)r->total / (double)r->count / 1e3, (double)pct(r->durs, r->count, 0.5) / 1e3,
               (double)pct(r->durs, r->count, 0.9) / 1e3, (double)pct(r->durs, r->count, 0.99) / 1e3,
               (double)r->durs[r->count - 1] / 1e3);
    }
    free(rows);
    free(durs);
    free(fill);
    lp_chrome_free(&c);
    return 0;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *b = malloc(cap);
    while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); b = NULL; }
            else b = nb;
        }
    }
    fclose(f);
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
    if (*end == 'k' || *end == 'K') shift = 10, end++;
    else if (*end == 'm' || *end == 'M') shift = 20, end++;
    else if (*end == 'g' || *end == 'G') shift = 30, end++;
    if (*end) return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int main(int argc, char **argv) {
    const char *in = NULL, *chrome = NULL, *csv = NULL, *folded = NULL, *folded_leaks = NULL, *speedscope = NULL;
    int summary = 0;
    int have_min = 0;
    uint64_t alloc_min = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("libprof-report %s (trace format %d)\n", LIBPROF_VERSION, LP_FORMAT_VERSION);
            return 0;
        } else if (!strcmp(a, "--chrome") || !strcmp(a, "--csv") || !strcmp(a, "--alloc-min") || !strcmp(a, "--folded") ||
                   !strcmp(a, "--folded-leaks") || !strcmp(a, "--speedscope")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "libprof-report: %s needs an argument\n%s", a, usage);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--chrome")) chrome = v;
            else if (!strcmp(a, "--csv")) csv = v;
            else if (!strcmp(a, "--folded")) folded = v;
            else if (!strcmp(a, "--folded-leaks")) folded_leaks = v;
            else if (!strcmp(a, "--speedscope")) speedscope = v;
            else if (parse_bytes(v, &alloc_min) != 0) {
                fprintf(stderr, "libprof-report: bad --alloc-min value '%s'\n", v);
                return 2;
            } else have_min = 1;
        } else if (!strcmp(a, "--summary")) {
            summary = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "libprof-report: unknown option '%s'\n%s", a, usage);
            return 2;
        } else if (!in) {
            in = a;
        } else {
            fprintf(stderr, "libprof-report: one trace at a time (got '%s' and '%s')\n", in, a);
            return 2;
        }
    }
    if (!in) {
        fputs(usage, stderr);
        return 2;
    }
    int outputs = chrome || csv || folded || folded_leaks || speedscope;
    if (!outputs) summary = 1;

    /* Not a raw trace? Then perhaps Chrome trace JSON. */
    FILE *probe = fopen(in, "rb");
    char magic[8] = {0};
    if (probe) {
        size_t got = fread(magic, 1, sizeof magic, probe);
        fclose(probe);
        if (got > 0 && !(got == sizeof magic && memcmp(magic, LP_FORMAT_MAGIC, 8) == 0)) {
            size_t i = 0;
            while (i < got && (magic[i] == ' ' || magic[i] == '\n' || magic[i] == '\t' || magic[i] == '\r')) i++;
            if (i < got && (magic[i] == '{' || magic[i] == '[')) {
                if (outputs) {
                    fprintf(stderr, "libprof-report: %s: --chrome, --csv and the flame graphs take a raw trace (.lpt)\n", in);
                    return 2;
                }
                size_t len;
                char *text = slurp(in, &len);
                if (!text) {
                    fprintf(stderr, "libprof-report: %s: %s\n", in, strerror(errno));
                    return 1;
                }
                int rc = summarise_chrome(in, text, len);
                free(text);
                return rc;
            }
        }
    }
    struct lp_reader r;
    char err[512];
    if (lp_reader_open(&r, in, err, sizeof err) != 0) {
        fprintf(stderr, "libprof-report: %s\n", err);
        return 1;
    }
    if (!quiet && (r.truncated || !r.end))
        fprintf(stderr, "libprof-report: %s: the trace was cut short (%s); decoded %llu events in %llu of %zu bytes\n",
                in, r.truncated ? "damaged or partial last chunk" : "the process did not finish",
                (unsigned long long)r.events, (unsigned long long)r.valid_bytes, r.size);
    struct lp_convert_opts o = {
        .chrome_path = chrome,
        .chrome_fd = -1,
        .csv_path = csv,
        .summary_fd = summary ? STDOUT_FILENO : -1,
        .alloc_min = have_min ? alloc_min : r.hdr.alloc_min,
        .trace_label = in,
        .folded_path = folded,
        .folded_leaks_path = folded_leaks,
        .speedscope_path = speedscope,
        .progress = isatty(STDERR_FILENO) ? progress : NULL,
    };
    int rc = lp_convert(&r, &o, err, sizeof err);
    lp_reader_close(&r);
    if (rc != 0) {
        fprintf(stderr, "libprof-report: %s\n", err);
        return 1;
    }
    return 0;
}
