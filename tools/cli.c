/* cli.c: libprof-report's options, one row each — the parser, --help and the documentation test
 * (tests/unit/test_docs.c) read this table and nothing else, so an option cannot exist without
 * its help, nor be documented without existing. */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libprof/format.h"
#include "lib/vars.h"

static const char intro[] =
    "usage: libprof-report TRACE... [options]\n"
    "       libprof-report --wait FILE [--timeout SECONDS]\n"
    "\n"
    "TRACE: a raw libprof trace (LIBPROF_OUTPUT=trace.lpt), libprof's Perfetto trace (.pftrace),\n"
    "or Chrome trace JSON — libprof's or another profiler's (PyTorch export_chrome_trace, ONNX\n"
    "Runtime, uftrace dump --chrome, ...).\n"
    "Without an output option the report is printed: per name count, total, self, mean, min,\n"
    "p10/p50/p90/p95/p99/p99.9, max; per thread busy time and framework tax; and for raw traces\n"
    "the memory, I/O per file, BLAS shapes, oneDNN primitives and allocation sites.\n";
static const char outro[] = "\nexit status: 0 done, 1 bad input or output error, 2 bad usage\n";

static int bad(const char *name, const char *v, const char *why) {
    fprintf(stderr, "libprof-report: bad %s '%s'%s%s\n", name, v, why ? " " : "", why ? why : "");
    return 2;
}

int rp_compile(regex_t *re, const char *s, const char *opt) {
    int rc = regcomp(re, s, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[128];
        regerror(rc, re, msg, sizeof msg);
        fprintf(stderr, "libprof-report: bad %s regular expression '%s': %s\n", opt, s, msg);
        return -1;
    }
    return 0;
}

static int parse_long(const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || end == v || n < lo || n > hi) return -1;
    *out = n;
    return 0;
}

/* ---- setters: one per kind of option ---------------------------------------------------------- */

#define PATH_SETTER(fn, field)                                      \
    static int fn(struct rp_cli *c, const char *n, const char *v) { \
        (void)n;                                                    \
        c->field = v;                                               \
        return 0;                                                   \
    }
/* An output of a conversion (lib/outputs.h): its row, by the option's name. */
static int set_output(struct rp_cli *c, const char *n, const char *v) {
    int k = lp_output_find(n);
    if (k < 0) return 2;
    c->out[k] = v;
    return 0;
}
PATH_SETTER(set_events_csv, events_csv)
PATH_SETTER(set_html, html)
PATH_SETTER(set_diff, diff)
PATH_SETTER(set_pack, pack)
PATH_SETTER(set_log, log)
PATH_SETTER(set_wait, wait)
PATH_SETTER(set_hold, hold)
PATH_SETTER(set_live, live)
PATH_SETTER(set_follow, follow)

#define FLAG_SETTER(fn, field)                                      \
    static int fn(struct rp_cli *c, const char *n, const char *v) { \
        (void)n;                                                    \
        (void)v;                                                    \
        c->field = 1;                                               \
        return 0;                                                   \
    }
FLAG_SETTER(set_summary, summary)
FLAG_SETTER(set_merge, merge)
FLAG_SETTER(set_quiet, quiet)
FLAG_SETTER(set_remove_raw, remove_raw)
FLAG_SETTER(set_general_path, general_path)

static int set_help(struct rp_cli *c, const char *n, const char *v) {
    (void)c, (void)n, (void)v;
    rp_cli_usage(stdout);
    return 1;
}

static int set_version(struct rp_cli *c, const char *n, const char *v) {
    (void)c, (void)n, (void)v;
    printf("libprof-report %s (trace format %d)\n", LIBPROF_VERSION, LP_FORMAT_VERSION);
    return 1;
}

/* --variables: the preload's table (lib/vars.h), for `libprof --variables` and the manual. */
static int set_variables(struct rp_cli *c, const char *n, const char *v) {
    (void)c, (void)n, (void)v;
#define PRINT(name, arg, dflt, help, type, field, lo, hi, choices) \
    printf("%s=%s\n    %s (default: %s)\n", name, arg, help, dflt);
    LP_VARS(PRINT)
#undef PRINT
    return 1;
}

static int set_top_skip(struct rp_cli *c, const char *n, const char *v) {
    long k;
    if (parse_long(v, 0, 1000000000, &k)) return bad(n, v, NULL);
    *(strcmp(n, "--top") ? &c->o.skip : &c->o.top) = (int)k;
    return 0;
}

static int set_choice(const char *n, const char *v, const char *const *words, int count, const char *list, int *out) {
    for (int j = 0; j < count; j++)
        if (!strcmp(v, words[j])) {
            *out = j;
            return 0;
        }
    return bad(n, v, list);
}

static int set_py_lines(struct rp_cli *c, const char *n, const char *v) {
    static const char *const words[] = {"innermost", "user"};
    return set_choice(n, v, words, 2, "(innermost user)", &c->py_user_lines);
}

static int set_sort(struct rp_cli *c, const char *n, const char *v) {
    static const char *const keys[] = {"total", "self", "count", "mean", "p50", "p99", "max", "name"};
    int k;
    if (set_choice(n, v, keys, 8, "(total self count mean p50 p99 max name)", &k)) return 2;
    c->o.sort = (enum rp_sort)k;
    return 0;
}

static int set_units(struct rp_cli *c, const char *n, const char *v) {
    static const char *const units[] = {"auto", "ns", "us", "ms", "s"};
    int k;
    if (set_choice(n, v, units, 5, "(auto ns us ms s)", &k)) return 2;
    c->o.units = (enum rp_units)k;
    return 0;
}

static int set_by_shapes(struct rp_cli *c, const char *n, const char *v) {
    (void)n;
    (void)v;
    c->o.by_shapes = 1;
    return 0;
}

static int set_filter(struct rp_cli *c, const char *n, const char *v) {
    if (rp_compile(&c->o.filter, v, n)) return 2;
    c->o.have_filter = 1;
    return 0;
}

static int set_iterations(struct rp_cli *c, const char *n, const char *v) {
    if (rp_compile(&c->o.iter_re, v, n)) return 2;
    c->o.iterations = v;
    return 0;
}

static int set_kernels(struct rp_cli *c, const char *n, const char *v) {
    if (rp_compile(&c->o.kernels, v, n)) return 2;
    c->o.have_kernels = 1;
    return 0;
}

static int set_what_if(struct rp_cli *c, const char *n, const char *v) {
    struct rp_opts *o = &c->o;
    const char *eq = strrchr(v, '=');
    char *end = NULL;
    double ratio = eq ? strtod(eq + 1, &end) : 0;
    if (!eq || eq == v || !end || *end || !(ratio > 0) || o->nwhatif == RP_MAX_WHATIF)
        return bad(n, v, "(expected REGEX=RATIO, RATIO > 0)");
    char *re = strndup(v, (size_t)(eq - v));
    if (!re || rp_compile(&o->whatif_re[o->nwhatif], re, n)) {
        free(re);
        return 2;
    }
    free(re);
    o->whatif_ratio[o->nwhatif] = ratio;
    o->whatif_text[o->nwhatif++] = v;
    return 0;
}

static int set_alloc_min(struct rp_cli *c, const char *n, const char *v) {
    char *end;
    errno = 0;
    if (*v < '0' || *v > '9') return bad(n, v, NULL);
    unsigned long long x = strtoull(v, &end, 10);
    int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : *end == 'g' || *end == 'G' ? 30 : 0;
    if (shift) end++;
    if (errno || *end || (shift && x > (UINT64_MAX >> shift))) return bad(n, v, NULL);
    c->alloc_min = (uint64_t)x << shift;
    c->have_min = 1;
    return 0;
}

static int set_killed_by(struct rp_cli *c, const char *n, const char *v) {
    long k;
    if (parse_long(v, 1, 64, &k)) return bad(n, v, "(a signal number)");
    c->killed_by = (int)k;
    return 0;
}

static int set_temp_threshold(struct rp_cli *c, const char *n, const char *v) {
    long k;
    if (parse_long(v, 1, 64, &k)) return bad(n, v, "(1 to 64)");
    c->temp_threshold = (unsigned)k;
    return 0;
}

static int set_at(struct rp_cli *c, const char *n, const char *v) {
    char *end;
    double sec = strtod(v, &end);
    if (end == v || sec <= 0 || sec > 1e9 || (*end && strcmp(end, "s") && strcmp(end, "ms")))
        return bad(n, v, "(seconds since the start, e.g. 1.5 or 200ms)");
    c->peak_at_ns = (uint64_t)(sec * (strcmp(end, "ms") ? 1e9 : 1e6));
    return 0;
}

static int set_timeout(struct rp_cli *c, const char *n, const char *v) {
    char *end;
    double s = strtod(v, &end);
    if (end == v || *end || !(s >= 0) || s > 1e7) return bad(n, v, "(seconds)");
    c->wait_timeout = s;
    return 0;
}

static int set_interval(struct rp_cli *c, const char *n, const char *v) {
    char *end;
    double s = strtod(v, &end);
    if (end == v || *end || !(s >= 0.05) || s > 86400) return bad(n, v, "(seconds, at least 0.05)");
    c->interval = s;
    return 0;
}

static int set_timeline(struct rp_cli *c, const char *n, const char *v) {
    char *end;
    double sec = strtod(v, &end);
    if (end == v || *end || !(sec >= 0) || sec > 1e9) return bad(n, v, "(seconds; 0: every slice)");
    c->timeline_ns = (uint64_t)(sec * 1e9);
    c->have_timeline = 1;
    return 0;
}

static int set_timeline_min(struct rp_cli *c, const char *n, const char *v) {
    long k;
    if (parse_long(v, 0, 1000000000000L, &k)) return bad(n, v, "(nanoseconds)");
    c->timeline_min_ns = (uint64_t)k;
    return 0;
}

static int set_file_mode(struct rp_cli *c, const char *n, const char *v) {
    char *end;
    unsigned long m = strtoul(v, &end, 8);
    if (!*v || *end || m > 0777 || !(m & 0600))
        return bad(n, v, "(an octal mode the owner can read and write, e.g. 0644)");
    c->file_mode = (unsigned)m;
    return 0;
}

/* ---- the table ------------------------------------------------------------------------------------ */

#define REPORT "report"
#define EXPORT "exports"
#define RAW "raw traces and runs"
#define GENERAL "general"

// clang-format off
const struct rp_option rp_options[] = {
    {"--top", NULL, "N", REPORT, "rows per table (default: all; 20 in the iteration table)", set_top_skip},
    {"--sort", NULL, "KEY", REPORT, "total (default), self, count, mean, p50, p99, max, name", set_sort},
    {"--filter", NULL, "REGEX", REPORT, "only names matching REGEX (POSIX extended)", set_filter},
    {"--units", NULL, "U", REPORT, "auto (default), ns, us, ms, s", set_units},
    {"--iterations", NULL, "REGEX", REPORT, "each slice matching REGEX is one iteration: ops per iteration as\ncolumns, statistics across iterations, latency and framework tax", set_iterations},
    {"--skip", NULL, "N", REPORT, "leave the first N iterations (warm-up) out of the statistics", set_top_skip},
    {"--kernels", NULL, "REGEX", REPORT, "names that count as kernels for the framework tax, beside BLAS,\noneDNN and OpenMP regions (and PyTorch's \"kernel\" category)", set_kernels},
    {"--what-if", NULL, "REGEX=RATIO", REPORT, "estimated latency if matching slices ran RATIO x faster (repeatable)", set_what_if},
    {"--diff", NULL, "BASE", REPORT, "compare TRACE against BASE per name (count, total, p50, p99), by impact", set_diff},
    {"--merge", NULL, NULL, REPORT, "several TRACEs (processes of one run) on one timeline, aligned by\ntheir wall-clock start; with --chrome FILE writes the merged trace", set_merge},
    {"--summary", NULL, NULL, REPORT, "print the report too when writing files", set_summary},
    {"--by-shapes", NULL, NULL, REPORT, "PyTorch's operators by input shapes (traces recorded with\nLIBPROF_TORCH_SHAPES=1), as key_averages(group_by_input_shape=True)", set_by_shapes},
    {"--py-lines", NULL, "WHICH", REPORT, "the Python frame the per-line views charge: innermost (default), or\nuser: the innermost in the program's own files (not the standard\nlibrary's, not an installed package's)", set_py_lines},
    {"--events-csv", NULL, "FILE", EXPORT, "one row per event (pid,tid,ts_ns,dur_ns,category,name,size,ptr,rank,host);\nwith --merge, all inputs on one timeline (streamed)", set_events_csv},
    {"--html", NULL, "FILE", EXPORT, "one self-contained page: tables, heap over time, iterations, flame graphs", set_html},
    {"--pack", NULL, "FILE", EXPORT, "the raw trace made compact (every event and timestamp kept: columns of\ndifferences, zstd); libprof-report reads it as it reads the raw trace", set_pack},
    {"--at", NULL, "TIME", EXPORT, "the peak views show the heap at TIME (seconds since the start, or ms)", set_at},
    {"--temporary-threshold", NULL, "N", EXPORT, "a block released before N more allocations of its thread is\ntemporary (memray's definition; default: heaptrack's)", set_temp_threshold},
    {"--timeline", NULL, "SECONDS", EXPORT, "--chrome keeps the run's last SECONDS at full detail (default 300; 0:\nevery slice); before that, slices of --timeline-min-ns or more, the\nothers folded into per-thread counters of calls and time a second", set_timeline},
    {"--timeline-min-ns", NULL, "NS", EXPORT, "before the full-detail stretch, slices this long are kept (default\n10000000: 10 ms)", set_timeline_min},
    {"--alloc-min", NULL, "BYTES", EXPORT, "allocations at least this large become instants in --chrome", set_alloc_min},
    {"--file-mode", NULL, "MODE", EXPORT, "permissions of the files written (octal; default 0600, or the\nstricter mode of the input)", set_file_mode},
    {"--wait", NULL, "FILE", RAW, "wait until the trace FILE is complete (its program ended and its\nconversion is done); exit 1 if it never will be", set_wait},
    {"--live", NULL, "PID", RAW, "the report of a process that is running under libprof, from what it has\nrecorded so far (heap now and its peak, calls, files, sites); with an\noutput option, a snapshot of the run so far. The process is not touched", set_live},
    {"--interval", NULL, "SECONDS", RAW, "with --live: print the report again every SECONDS until the process ends", set_interval},
    {"--timeout", NULL, "SECONDS", RAW, "with --wait: give up after SECONDS (exit 1)", set_timeout},
    {"--hold-events", NULL, "PID:N", RAW, "(started by the preload) keep process PID's CPU sampling events,\ndescriptors 3 to 2+N, open until it ends or asks (descriptor 3+N)", set_hold},
    {"--follow", NULL, "PID", RAW, "(started by the preload) convert the raw trace while process PID still\nwrites it, giving its blocks back as they are read; done when PID ends", set_follow},
    {"--remove-raw", NULL, NULL, RAW, "remove the raw trace once --chrome, --perfetto, --csv or --pack is written", set_remove_raw},
    {"--killed-by", NULL, "SIG", RAW, "the process died by signal SIG (metadata.libprof.signal), as its\nparent saw it; for traces cut short", set_killed_by},
    {"--log", NULL, "FILE", RAW, "messages and the report go to FILE instead of stdout and stderr\n(FILE is removed again when nothing was written)", set_log},
    {"--general-path", NULL, NULL, RAW, "decode every event the general way, without the allocation fast\npath: the same files, slower (a check of the fast path)", set_general_path},
    {"--quiet", "-q", NULL, GENERAL, "no progress or notices on stderr", set_quiet},
    {"--help", "-h", NULL, GENERAL, "this text", set_help},
    {"--variables", NULL, NULL, GENERAL, "the LIBPROF_* variables the preload reads, with defaults", set_variables},
    {"--version", NULL, NULL, GENERAL, "the version and the trace format it reads", set_version},
};
// clang-format on
const unsigned rp_noptions = sizeof rp_options / sizeof rp_options[0];

static void usage_row(FILE *f, const struct rp_option *p) {
    char head[64];
    snprintf(head, sizeof head, "%s%s%s%s%s", p->alias ? p->alias : "", p->alias ? ", " : "", p->name,
             p->arg ? " " : "", p->arg ? p->arg : "");
    fprintf(f, "  %-22s", head);
    if (strlen(head) > 22) fprintf(f, "\n  %-22s", "");
    for (const char *h = p->help; *h;) {
        size_t n = strcspn(h, "\n");
        fprintf(f, " %.*s\n", (int)n, h);
        h += n;
        if (*h) {
            h++;
            fprintf(f, "  %-22s", "");
        }
    }
}

/* An output's option is its row of lib/outputs.h's table (its name and help there), listed
 * first among the exports. */
static struct rp_option output_row(int k) {
    return (struct rp_option){lp_outputs[k].option, NULL, "FILE", EXPORT, lp_outputs[k].help, set_output};
}

void rp_cli_usage(FILE *f) {
    fputs(intro, f);
    const char *groups[] = {REPORT, EXPORT, RAW, GENERAL};
    for (int g = 0; g < 4; g++) {
        fprintf(f, "\n%s:\n", groups[g]);
        for (int k = 0; g == 1 && k < LP_OUT_COUNT; k++) {
            if (!lp_outputs[k].option) continue;
            struct rp_option row = output_row(k);
            usage_row(f, &row);
        }
        for (unsigned i = 0; i < rp_noptions; i++)
            if (!strcmp(rp_options[i].group, groups[g])) usage_row(f, &rp_options[i]);
    }
    fputs(outro, f);
}

int rp_cli_parse(struct rp_cli *c, int argc, char **argv) {
    memset(c, 0, sizeof *c);
    c->timeline_min_ns = 10000000; /* --timeline-min-ns: 10 ms */
    c->inputs = calloc((size_t)argc, sizeof *c->inputs);
    if (!c->inputs) {
        fprintf(stderr, "libprof-report: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) {
            c->inputs[c->ninputs++] = a;
            continue;
        }
        const struct rp_option *p = NULL;
        for (unsigned k = 0; k < rp_noptions && !p; k++)
            if (!strcmp(a, rp_options[k].name) || (rp_options[k].alias && !strcmp(a, rp_options[k].alias)))
                p = &rp_options[k];
        struct rp_option out;
        int k = p ? -1 : lp_output_find(a);
        if (k >= 0 && lp_outputs[k].option && !strcmp(a, lp_outputs[k].option)) {
            out = output_row(k);
            p = &out;
        }
        if (!p) {
            fprintf(stderr, "libprof-report: unknown option '%s' (try --help)\n", a);
            return 2;
        }
        if (p->arg && i + 1 >= argc) {
            fprintf(stderr, "libprof-report: %s needs an argument (try --help)\n", a);
            return 2;
        }
        int rc = p->set(c, p->name, p->arg ? argv[++i] : NULL);
        if (rc == 1) return 0;
        if (rc) return rc;
    }
    if (!c->ninputs && !c->wait && !c->hold && !c->live) {
        rp_cli_usage(stderr);
        return 2;
    }
    return -1;
}
