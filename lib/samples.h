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
#include "cpu.h"

struct lp_samples;
struct lp_json;
struct lp_event;

/* NULL when the trace has no samples (or out of memory: *oom set). */
struct lp_samples *lp_samples_new(const struct lp_reader *r, int *oom);
/* A followed trace has more threads since: the tables grow to them. 0 or -1 (out of memory). */
int lp_samples_fit(struct lp_samples *s);
void lp_samples_free(struct lp_samples *s);
/* A SAMPLE event (e->kind LP_EV_SAMPLE). 0, or -1 when out of memory. */
int lp_samples_event(struct lp_samples *s, const struct lp_event *e, int counting);
/* After the pass: the per-function and per-line tables (symbolises). 0 or -1. */
int lp_samples_finish(struct lp_samples *s);

/* The CPU time sampled on thread `thread` (a reader's thread index) in [from_ns, to_ns], of the
 * samples passed so far: a slice asks as its end comes (the pass is in time order). */
uint64_t lp_samples_cpu_ns(const struct lp_samples *s, uint32_t thread, uint64_t from_ns, uint64_t to_ns);
/* The same on every other thread of the process: a run's pool (ONNX Runtime's intra-op threads). */
uint64_t lp_samples_cpu_others_ns(const struct lp_samples *s, uint32_t thread, uint64_t from_ns, uint64_t to_ns);
/* After lp_samples_finish: the totals as the report's views take them (out->* allocated; free
 * with lp_cpu_free). 0 or -1. */
int lp_samples_export(const struct lp_samples *s, struct lp_cpu *out);

uint64_t lp_samples_count(const struct lp_samples *s);
uint64_t lp_samples_period(const struct lp_samples *s);

/* The writers' views. */
/* The samples as collapsed stacks, each stack's count times `weight` (1: samples; the period in
 * microseconds: time, the wall-clock flame graph's part). */
void lp_samples_folded(const struct lp_samples *s, struct lp_out *o, uint64_t weight);
/* A frame of a collapsed stack (';' and line ends made harmless), and a stack's frames, root
 * first, each after a ';'. */
struct lp_syms;
void lp_folded_frame(struct lp_out *o, const char *name);
void lp_folded_frames(struct lp_out *o, struct lp_syms *syms, const struct lp_frames *v);
/* speedscope: `frame(arg, name)` gives a frame's index in the file's shared frames table (adding
 * it). Writes one sampled profile per thread, each a value of the profiles' array. */
void lp_samples_speedscope_frames(const struct lp_samples *s, uint64_t (*frame)(void *, const char *), void *arg);
void lp_samples_speedscope_profiles(const struct lp_samples *s, uint64_t (*frame)(void *, const char *), void *arg,
                                    struct lp_json *j);
/* The Chrome trace's counter tracks: each thread's CPU use over time, in percent. */

/* Each sample, thread by thread in time order (after lp_samples_finish): its thread (a reader's
 * thread index), its key (what lp_samples_frames takes; LP_SAMPLES_IN_LIBPROF: in libprof's own
 * code), time and weight. */
#define LP_SAMPLES_IN_LIBPROF UINT32_MAX
void lp_samples_each_sample(const struct lp_samples *s,
                            void (*fn)(void *arg, uint32_t thread, uint32_t key, uint64_t ns, uint64_t weight),
                            void *arg);
/* The function names of a sample key's stack, innermost first (the sampled instruction's function,
 * then its callers; at most max; after lp_samples_finish; they live as long as s); their number. */
unsigned lp_samples_frames(const struct lp_samples *s, uint32_t key, const char **names, unsigned max);
/* "main", the name the thread was given, or "thread TID". */
const char *lp_samples_thread_name(const struct lp_samples *s, uint32_t thread, char *buf, size_t len);
/* The same from the trace alone: "main", the name the program gave the thread, else "thread TID". */
const char *lp_thread_label(const struct lp_reader *r, uint32_t thread, char *buf, size_t len);

/* Each distinct sample (thread, frames innermost first: the sampled instruction's, then its
 * callers') with its count, for pprof; `v` NULL for the samples in libprof's own code. */
void lp_samples_each(const struct lp_samples *s,
                     void (*fn)(void *arg, uint32_t thread, const struct lp_frames *v, uint64_t samples), void *arg);

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_samples;

#endif
