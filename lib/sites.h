/* sites.h: allocation call sites (traces recorded with LIBPROF_STACKS) — bytes and calls per
 * call stack, each stack's share of the heap at its peak, leaks by stack, memory per library,
 * and the flame graphs (Brendan Gregg's folded format, speedscope JSON). Fed by convert.c's pass. */
#ifndef LP_SITES_H
#define LP_SITES_H

#include <stdint.h>

#include "reader.h"
#include "out.h"

struct lp_sites;
struct lp_json;

/* NULL when the trace has no call stacks. */
/* `user_lines`: the per-line views charge the innermost Python frame in the program's own files
 * (not the standard library's, not an installed package's) rather than the innermost of all. */
struct lp_sites *lp_sites_new(const struct lp_reader *r, int user_lines);
/* A followed trace defined more stacks since: the table grows to them. 0 or -1 (out of memory). */
int lp_sites_fit(struct lp_sites *s);
void lp_sites_free(struct lp_sites *s);
/* A live block as the pass keeps it (one word, the value of its live map): its size, capped at
 * 2^42 - 1 bytes, and its call stack id (< LP_MAX_STACK_ID = 2^22). */
#define LP_LIVE_SHIFT 22
#define LP_LIVE_MAX ((UINT64_C(1) << (64 - LP_LIVE_SHIFT)) - 1)
static inline uint64_t lp_live_size(uint64_t size) { return size > LP_LIVE_MAX ? LP_LIVE_MAX : size; }
static inline uint64_t lp_live_pack(uint64_t size, uint32_t stack) { return size << LP_LIVE_SHIFT | stack; }
static inline uint64_t lp_live_bytes(uint64_t v) { return v >> LP_LIVE_SHIFT; }
static inline uint32_t lp_live_stack(uint64_t v) { return (uint32_t)(v & ((1u << LP_LIVE_SHIFT) - 1)); }

/* A block of `size` bytes was allocated from `stack`; `counting`: after the last reset
 * (statistics on). Returns -1 when out of memory. */
int lp_sites_born(struct lp_sites *s, uint64_t size, uint32_t stack, int counting, uint64_t ns);
/* `n` allocations of a sampled trace were counted, not recorded (its TALLY records): no stack. */
void lp_sites_counted(struct lp_sites *s, uint64_t n);
/* A runtime entry-point call of `family` made from `stack` (its Python frames: the table by
 * Python line) took dur_ns. */
void lp_sites_call(struct lp_sites *s, uint32_t stack, unsigned family, uint64_t dur_ns);
/* The block `v` (lp_live_pack), just released, was a temporary allocation. */
void lp_sites_temporary(struct lp_sites *s, uint64_t v);
/* The block `v` (lp_live_pack) was released. (Both at `ns`, in time order.) */
void lp_sites_died(struct lp_sites *s, uint64_t v, uint64_t ns);
/* The heap has just reached a new peak (or statistics start, at the last reset): what every
 * stack has live now is what the peak views show, unless a higher peak comes. */
void lp_sites_peak(struct lp_sites *s);
/* After the pass: each stack's live bytes at the peak — or, when `at_ns` is not 0, at that
 * instant (ns since the start; the allocation events replayed up to it); symbolise. Returns -1
 * when out of memory. */
int lp_sites_finish(struct lp_sites *s, uint64_t at_ns);
void lp_sites_metadata(struct lp_sites *s, struct lp_json *j);
void lp_sites_csv(struct lp_sites *s, struct lp_out *o);
void lp_sites_summary(struct lp_sites *s, struct lp_out *o, unsigned top);
/* Collapsed stacks, one line per stack: "root;...;leaf BYTES", heaviest first: bytes allocated,
 * leaked at exit, or live at the heap's peak (or at the instant lp_sites_finish was given). */
enum { LP_FOLD_ALLOC = 0, LP_FOLD_LEAKS = 1, LP_FOLD_PEAK = 2, LP_FOLD_TEMP = 3 };
void lp_sites_folded(struct lp_sites *s, struct lp_out *o, int which);
/* One stack as a collapsed-stack line's frames, root first ("[unknown stack]" when not defined). */
struct lp_syms;
void lp_folded_stack(struct lp_out *o, const struct lp_reader *r, struct lp_syms *syms, uint32_t id);
/* speedscope's file format: three sampled profiles (allocated, leaked, live at the peak), unit bytes. */
/* Each stack's allocation totals (pprof.c): calls and bytes allocated, blocks and bytes live at
 * the end, bytes live at the heap's peak. */
struct lp_site_totals {
    uint64_t calls, bytes, live_blocks, live_bytes, peak_bytes;
};
void lp_sites_each(struct lp_sites *s, void (*fn)(void *arg, uint32_t stack, const struct lp_site_totals *t),
                   void *arg);
/* The allocation views for speedscope.c: every frame they name (`frame` adds it to the file's
 * table), then their three sampled profiles, each a value of the profiles' array. */
void lp_sites_speedscope_frames(struct lp_sites *s, uint64_t (*frame)(void *, const char *), void *arg);
void lp_sites_speedscope_profiles(struct lp_sites *s, uint64_t (*frame)(void *, const char *), void *arg,
                                  struct lp_json *j);

/* Sites over time (heaptrack_gui's consumption per call site): the live bytes of the
 * `top` heaviest call stacks (by live bytes at their own highest) and of all the others together,
 * at `buckets` instants spread over the run (each the value at the end of its slice of time).
 * v[b * (nseries) + i]: series i (the last is "other") at bucket b. */
#define LP_SERIES_MAX 16
struct lp_site_series {
    unsigned nseries, buckets; /* nseries includes "other" */
    uint64_t span_ns;
    char label[LP_SERIES_MAX + 1][160];
    uint64_t *v;
};
/* The series of the `top` stacks ranked by `rank` among the sites the pass made (`by`), read
 * from what the pass kept for these buckets (lp_sites_series_keep), else made by a pass over the
 * heap events of their own. Empty (nseries 0) without sites. */
enum lp_series_rank {
    LP_RANK_AT_PEAK, /* the bytes live at the heap's peak, then allocated (the Chrome trace's) */
    LP_RANK_HIGHEST  /* each stack's own highest (the HTML page's) */
};
int lp_site_series_of(const struct lp_reader *r, unsigned top, unsigned buckets, struct lp_site_series *out,
                      const struct lp_sites *by, enum lp_series_rank rank);
void lp_site_series_free(struct lp_site_series *s);
/* The series of every stack kept as the pass goes, for `buckets` instants over span_ns (ns since
 * the start: lp_site_series_of's), before its first event: lp_site_series_of then reads them
 * instead of making a pass of its own. 0, or -1 when out of memory. */
#define LP_SITE_SERIES_BUCKETS 400 /* the Chrome trace's "heap by site" track */
int lp_sites_series_keep(struct lp_sites *s, unsigned buckets, uint64_t span_ns);

/* `sites` when the trace's allocations have stacks, else NULL (its stacks may be only its CPU
 * samples' and its Python calls'; a version 9 file says nothing of it). */
static inline int lp_has_alloc_stacks(const struct lp_reader *r) { return r->hdr.version < 10 || r->hdr.alloc_stacks; }
static inline struct lp_sites *lp_alloc_sites(const struct lp_reader *r, struct lp_sites *sites) {
    return lp_has_alloc_stacks(r) ? sites : NULL;
}

#endif
