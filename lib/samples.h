/* samples.h: what a trace's CPU samples (LIBPROF_SAMPLE_HZ) add up to — per thread and call
 * stack during the pass, then per function (self: the innermost frame; total: any frame) and per
 * Python line, overall and per thread, and each thread's CPU over time; the writers' views of
 * them: the summary table, the CSV rows, the metadata, the folded flame graph, speedscope's
 * sampled profiles, the Chrome trace's CPU counters and pprof (pprof.c). */
#ifndef LP_SAMPLES_H
#define LP_SAMPLES_H

#include <stdint.h>

#include "out.h"
#include "reader.h"

#define LP_CPU_BUCKETS 400 /* each thread's CPU over time: the run in this many slices */

struct lp_samples;
struct lp_event;

/* NULL when the trace has no samples (or out of memory: *oom set). */
struct lp_samples *lp_samples_new(const struct lp_reader *r, int *oom);
void lp_samples_free(struct lp_samples *s);
/* A SAMPLE event (e->kind LP_EV_SAMPLE). 0, or -1 when out of memory. */
int lp_samples_event(struct lp_samples *s, const struct lp_event *e, int counting);
/* After the pass: the per-function and per-line tables (symbolises). 0 or -1. */
int lp_samples_finish(struct lp_samples *s);

uint64_t lp_samples_count(const struct lp_samples *s);
uint64_t lp_samples_period(const struct lp_samples *s);

/* The writers' views. */
void lp_samples_summary(const struct lp_samples *s, struct lp_out *o);
void lp_samples_csv(const struct lp_samples *s, struct lp_out *o);
void lp_samples_metadata(const struct lp_samples *s, struct lp_out *o); /* ,"sampling":{...},"cpu_functions":[...] */
void lp_samples_folded(const struct lp_samples *s, struct lp_out *o);
/* speedscope: `frame(arg, name)` gives a frame's index in the file's shared frames table (adding
 * it); `first` whether no profile was written before. Writes one sampled profile per thread. */
void lp_samples_speedscope_frames(const struct lp_samples *s, uint64_t (*frame)(void *, const char *), void *arg);
void lp_samples_speedscope_profiles(const struct lp_samples *s, uint64_t (*frame)(void *, const char *), void *arg,
                                    struct lp_out *o, int first);
/* The Chrome trace's counter tracks: each thread's CPU use over time, in percent. */
struct lp_json;
void lp_samples_chrome(const struct lp_samples *s, struct lp_json *j, uint32_t pid);

/* Each (thread, stack) with its sample count, for pprof: calls `fn` once per pair. */
void lp_samples_each(const struct lp_samples *s,
                     void (*fn)(void *arg, uint32_t thread, uint32_t stack, uint64_t samples, int in_libprof),
                     void *arg);

#endif
