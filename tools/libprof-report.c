/* libprof-report: the post-processor for libprof traces. Today it converts a raw trace (.lpt)
 * into the Chrome trace JSON, the CSV summary and the summary table, with the same code the
 * preload runs at exit. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert.h"
#include "lpt.h"

static const char usage[] =
    "usage: libprof-report TRACE.lpt [options]\n"
    "\n"
    "Convert and summarise a raw libprof trace (LIBPROF_OUTPUT=trace.lpt).\n"
    "With no output option the summary table is printed to stdout.\n"
    "\n"
    "options:\n"
    "  --chrome FILE      write the Chrome trace JSON (open in ui.perfetto.dev or chrome://tracing)\n"
    "  --csv FILE         write the CSV summary (one row per function, see README)\n"
    "  --summary          print the summary table to stdout (also with --chrome/--csv)\n"
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
    const char *in = NULL, *chrome = NULL, *csv = NULL;
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
        } else if (!strcmp(a, "--chrome") || !strcmp(a, "--csv") || !strcmp(a, "--alloc-min")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "libprof-report: %s needs an argument\n%s", a, usage);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--chrome")) chrome = v;
            else if (!strcmp(a, "--csv")) csv = v;
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
    if (!chrome && !csv) summary = 1;

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
