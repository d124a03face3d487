/* outputs.c: see outputs.h. The table, and each output's writer: the sink that streams events
 * (Chrome, the summary and CSV's own files) or writes its totals from the views that own them
 * (sites.c's flame graphs, samples.c's, speedscope.c, pprof.c). */
#define _GNU_SOURCE
#include "outputs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cudamem.h"
#include "gil.h"
#include "views.h"
#include "write_chrome.h"
#include "write_tables.h"
#include "os.h"
#include "pprof.h"
#include "samples.h"
#include "sites.h"
#include "speedscope.h"
#include "write_perfetto.h"
#include "symbols.h"

/* The heap counter's buckets, which the pass fills for the timelines (once, whichever asks). */
static int counter_buckets(struct lp_analysis *a) {
    return a->cb || (a->cb = lp_os_malloc(LP_COUNTER_BUCKETS * sizeof *a->cb)) ? 0 : -1;
}

static int open_chrome(struct lp_sink *k, struct lp_analysis *a) {
    const struct lp_convert_opts *o = a->opts;
    if (counter_buckets(a) != 0) return -1;
    k->tape = o->chrome_tape;
    return lp_sink_chrome(k, a->r, o->path[LP_OUT_CHROME], o->alloc_min, o->timeline_ns, o->timeline_min_ns);
}
static int open_perfetto(struct lp_sink *k, struct lp_analysis *a) {
    const struct lp_convert_opts *o = a->opts;
    if (counter_buckets(a) != 0) return -1;
    return lp_sink_perfetto(k, a->r, o->path[LP_OUT_PERFETTO], o->alloc_min, o->timeline_ns, o->timeline_min_ns);
}
static int open_csv(struct lp_sink *k, struct lp_analysis *a) {
    (void)a;
    return lp_sink_csv(k);
}
static int open_summary(struct lp_sink *k, struct lp_analysis *a) {
    (void)a;
    return lp_sink_summary(k);
}

/* The flame graphs are the sites' (sites.c): folded allocated bytes, leaks, at the peak, temporary. */
static void folded_finish(struct lp_sink *k, const struct lp_analysis *a) { lp_sites_folded(a->sites, k->out, 0); }
static void leaks_finish(struct lp_sink *k, const struct lp_analysis *a) {
    lp_sites_folded(a->sites, k->out, LP_FOLD_LEAKS);
}
static void peak_finish(struct lp_sink *k, const struct lp_analysis *a) {
    lp_sites_folded(a->sites, k->out, LP_FOLD_PEAK);
}
static void temp_finish(struct lp_sink *k, const struct lp_analysis *a) {
    lp_sites_folded(a->sites, k->out, LP_FOLD_TEMP);
}
static void speedscope_finish(struct lp_sink *k, const struct lp_analysis *a) {
    const struct lp_reader *r = a->r;
    const char *exe = r->exe ? r->exe : "libprof";
    uint32_t n = r->exe ? r->exe_len : 7, b = 0;
    for (uint32_t i = 0; i < n; i++)
        if (exe[i] == '/') b = i + 1;
    char name[512];
    snprintf(name, sizeof name, "%.*s", (int)(n - b), exe + b);
    if (lp_speedscope(k->out, name, lp_alloc_sites(a->r, a->sites), lp_samples_of(a)) != 0) k->out->err = ENOMEM;
}
static void cpu_folded_finish(struct lp_sink *k, const struct lp_analysis *a) {
    lp_samples_folded(lp_samples_of(a), k->out, 1);
}
static void pprof_finish(struct lp_sink *k, const struct lp_analysis *a) {
    struct lp_syms *syms = lp_syms_of(a->r);
    if (!syms || lp_pprof_cpu(k->out, a->r, lp_samples_of(a), syms, a) != 0) k->out->err = ENOMEM;
}
static void pprof_heap_finish(struct lp_sink *k, const struct lp_analysis *a) {
    struct lp_syms *syms = lp_syms_of(a->r);
    if (!syms || lp_pprof_heap(k->out, a->r, a->sites, syms) != 0) k->out->err = ENOMEM;
}

/* A writer of totals only. */
#define TOTALS(name, fn)                                        \
    static int name(struct lp_sink *k, struct lp_analysis *a) { \
        (void)a;                                                \
        k->finish = fn;                                         \
        return 0;                                               \
    }
static void wall_folded_finish(struct lp_sink *k, const struct lp_analysis *a) { lp_gil_wall_folded(a, k->out); }
static void cuda_peak_finish(struct lp_sink *k, const struct lp_analysis *a) {
    lp_cudamem_folded_peak(lp_cudamem_of(a), k->out);
}

TOTALS(folded, folded_finish)
TOTALS(leaks, leaks_finish)
TOTALS(peak, peak_finish)
TOTALS(temp, temp_finish)
TOTALS(speedscope, speedscope_finish)
TOTALS(cpu_folded, cpu_folded_finish)
TOTALS(pprof, pprof_finish)
TOTALS(pprof_heap, pprof_heap_finish)
TOTALS(cuda_peak, cuda_peak_finish)
TOTALS(wall_folded, wall_folded_finish)
#undef TOTALS

#define EITHER (LP_NEEDS_STACKS | LP_NEEDS_SAMPLES)
// clang-format off
/* One row per output: its key, its option and help (libprof-report's --help and man page are
 * made from them), its file beside the trace, what it needs, whether it is streamed, its writer. */
const struct lp_output lp_outputs[LP_OUT_COUNT] = {
    [LP_OUT_CHROME]       = {"chrome", "--chrome", "Chrome trace JSON (convert a raw trace, or write the --merge result)",
                             NULL, 0, 1, open_chrome},
    [LP_OUT_PERFETTO]     = {"perfetto", "--perfetto", "Perfetto's protobuf trace (.pftrace): the timeline of --chrome with the\nCPU samples' stacks on each thread's track",
                             NULL, 0, 1, open_perfetto},
    [LP_OUT_CSV]          = {"csv", "--csv", "CSV summary (raw trace; one row per function)",
                             NULL, 0, 0, open_csv},
    [LP_OUT_SUMMARY]      = {"summary", NULL, NULL, NULL, 0, 0, open_summary},
    [LP_OUT_FOLDED]       = {"folded", "--folded", "flame graph of allocated bytes by call stack (LIBPROF_STACKS traces)",
                             ".alloc.folded", LP_NEEDS_STACKS, 0, folded},
    [LP_OUT_FOLDED_LEAKS] = {"folded-leaks", "--folded-leaks", "the same for bytes leaked at exit",
                             ".leaks.folded", LP_NEEDS_STACKS, 0, leaks},
    [LP_OUT_FOLDED_PEAK]  = {"folded-peak", "--folded-peak", "the same for bytes live at the heap's peak (or at --at)",
                             ".peak.folded", LP_NEEDS_STACKS, 0, peak},
    [LP_OUT_FOLDED_TEMP]  = {"folded-temp", NULL, NULL, NULL, LP_NEEDS_STACKS, 0, temp},
    [LP_OUT_CUDA_PEAK]    = {"cuda-folded-peak", "--cuda-folded-peak", "flame graph of CUDA device memory live at its peak by allocation site\n(LIBPROF_STACKS traces of CUDA programs)",
                             NULL, LP_NEEDS_STACKS, 0, cuda_peak},
    [LP_OUT_SPEEDSCOPE]   = {"speedscope", "--speedscope", "the flame graphs as one speedscope JSON file (allocations, and the\nCPU samples of each thread)",
                             ".speedscope.json", EITHER, 0, speedscope},
    [LP_OUT_CPU_FOLDED]   = {"cpu-folded", "--cpu-folded", "flame graph of the CPU samples (LIBPROF_SAMPLE_HZ), collapsed stacks,\nthe thread as the root frame",
                             ".cpu.folded", LP_NEEDS_SAMPLES, 0, cpu_folded},
    [LP_OUT_PPROF]        = {"pprof", "--pprof", "the CPU samples in pprof's format (gzipped profile.proto: Go's pprof,\nPyroscope, Parca, speedscope read it)",
                             NULL, LP_NEEDS_SAMPLES, 0, pprof},
    [LP_OUT_PPROF_HEAP]   = {"pprof-heap", "--pprof-heap", "the allocation stacks in pprof's format (alloc and inuse objects and\nbytes; in use: still live when the trace ends)",
                             NULL, LP_NEEDS_STACKS, 0, pprof_heap},
    [LP_OUT_WALL_FOLDED]  = {"wall-folded", "--wall-folded", "flame graph of wall-clock time (LIBPROF_SAMPLE_HZ): the CPU samples and the\ntime blocked in traced calls by call stack, [GIL wait], [lock], [sleep] or\n[io] innermost, in microseconds",
                             ".wall.folded", LP_NEEDS_SAMPLES, 0, wall_folded},
};
// clang-format on

int lp_output_find(const char *name) {
    for (int k = 0; k < LP_OUT_COUNT; k++)
        if (!strcmp(name, lp_outputs[k].key) || (lp_outputs[k].option && !strcmp(name, lp_outputs[k].option))) return k;
    return -1;
}

int lp_output_possible(unsigned needs, int stacks, int samples) {
    if (needs == EITHER) return stacks || samples;
    return (!(needs & LP_NEEDS_STACKS) || stacks) && (!(needs & LP_NEEDS_SAMPLES) || samples);
}

static int ends(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n > t && !strcmp(s + n - t, tail);
}

int lp_output_timeline(const char *path) {
    return path && (ends(path, ".pftrace") || ends(path, ".perfetto-trace")) ? LP_OUT_PERFETTO : LP_OUT_CHROME;
}

void lp_output_beside(char *dst, size_t len, const char *trace, const char *suffix) {
    snprintf(dst, len, "%s", trace);
    char *slash = strrchr(dst, '/'), *dot = strrchr(dst, '.');
    if (dot && (!slash || dot > slash)) *dot = '\0';
    size_t n = strlen(dst);
    snprintf(dst + n, len - n, "%s", suffix);
}
