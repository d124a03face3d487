/* sites.c: see sites.h. */
#define _GNU_SOURCE
#include "sites.h"
#include "json.h"
#include "os.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "map.h"
#include "poisson.h"
#include "symbols.h"
#include "vec.h"

#define TOP 10        /* rows per view in the summary */
#define META_SITES 50 /* sites described in the metadata */

struct site {
    uint64_t calls, bytes, live, live_blocks, peak, temp, temp_bytes;
    uint64_t at_peak; /* live bytes at the peak of epoch `stamp` (see lp_sites_peak) */
    uint64_t high;    /* its own highest live bytes */
    uint32_t stamp;
    uint32_t tick; /* the series bucket its live bytes last changed in (lp_sites_series_keep) */
    const char *library;
    uint32_t pyline; /* 0: not looked at yet; NO_LINE: no Python frame; else 1 + index in lines */
};
#define NO_LINE UINT32_MAX

/* One Python line (the innermost Python frame of a stack): what its calls and allocations cost. */
struct pyline {
    uint64_t frame; /* LP_PYFRAME word */
    uint64_t alloc_calls, alloc_bytes, calls, call_ns, fam_ns[LP_FAM_COUNT];
};

/* A stack's live bytes at the end of each series bucket before `upto`, since its entry before. */
struct series_entry {
    uint32_t site, upto;
    uint64_t live;
};

struct lp_sites {
    const struct lp_reader *r;
    int user_lines;    /* the per-line views charge the first frame in the user's own files */
    struct site *site; /* by stack id */
    uint32_t nsite;
    uint32_t epoch; /* peaks passed so far */
    uint64_t with_stack, without_stack;
    uint64_t rate;      /* LIBPROF_ALLOC_SAMPLE: sampled stacks, weighted (poisson.h); 0: every one */
    uint64_t unsampled; /* allocations of a sampled trace that have no stack */
    uint64_t counted;   /* ... of which counted in TALLY records, not recorded one by one */
    struct lp_syms *syms;
    int oom;
    struct pyline *lines;
    uint32_t nlines;
    size_t lines_cap;
    struct lp_map line_ix; /* frame word -> 1 + index */
    /* The "heap by site" series kept as the pass goes (lp_sites_series_keep), so that they need
     * no pass of their own: when a stack's live bytes change for the first time in a bucket, what
     * they were before is its value at the end of the buckets since its last change (an entry);
     * the heap's total at the end of each bucket beside. */
    uint64_t series_next; /* the first time past bucket `tick` (UINT64_MAX: not kept) */
    uint64_t series_span;
    unsigned series_buckets;
    uint32_t tick;
    int series_lost;     /* out of room: lp_site_series_of makes its own pass */
    uint64_t live_total; /* every stack's live bytes */
    uint64_t *totals;    /* live_total at the end of each bucket before `tick` */
    struct series_entry *log;
    size_t nlog, caplog;
};

struct lp_sites *lp_sites_new(const struct lp_reader *r, int user_lines) {
    /* a trace recorded with stacks may have none (a program that allocated nothing, a followed
     * trace that has not written one yet): its flame graphs are empty, not missing */
    if (!lp_stack_distinct(r) && !(r->hdr.version >= 10 && r->hdr.alloc_stacks)) return NULL;
    struct lp_sites *s = lp_os_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->r = r;
    s->user_lines = user_lines;
    s->rate = r->hdr.version >= 13 ? r->hdr.alloc_sample : 0;
    s->nsite = lp_stack_count(r) ? lp_stack_count(r) : 1;
    s->series_next = UINT64_MAX;
    s->site = lp_os_calloc(s->nsite, sizeof *s->site);
    if (!s->site) {
        lp_os_free(s);
        return NULL;
    }
    return s;
}

void lp_sites_free(struct lp_sites *s) {
    if (!s) return;
    lp_os_free(s->lines);
    lp_map_free(&s->line_ix);
    lp_os_free(s->site);
    lp_os_free(s->totals);
    lp_os_free(s->log);
    lp_os_free(s);
}

/* Room for stacks below `n` (the pass numbers the stacks as it meets them: nodes.h). */
static int fit_to(struct lp_sites *s, uint32_t n) {
    if (n <= s->nsite) return 0;
    if (n < s->nsite * 2) n = s->nsite * 2 < LP_MAX_STACK_ID ? s->nsite * 2 : LP_MAX_STACK_ID;
    struct site *t = lp_os_realloc(s->site, (size_t)n * sizeof *t);
    if (!t) return -1;
    memset(t + s->nsite, 0, (size_t)(n - s->nsite) * sizeof *t);
    s->site = t;
    s->nsite = n;
    return 0;
}

int lp_sites_fit(struct lp_sites *s) { return fit_to(s, lp_stack_count(s->r)); }

static struct site *site_of(struct lp_sites *s, uint32_t stack) {
    return stack < s->nsite ? &s->site[stack] : &s->site[0]; /* ids without a stack entry: "unknown" */
}

/* Is Python code `id` the interpreter's or an installed package's rather than the program's own:
 * a file of the standard library (.../lib/python3.X/), of site-packages or dist-packages, or a
 * frozen module? (The rule Scalene and others use for "your code".) */
static int library_code(const struct lp_reader *r, uint32_t id) {
    if (id == 0 || id >= r->npycodes || !r->pycodes[id].file) return 0;
    const char *f = r->pycodes[id].file;
    size_t n = r->pycodes[id].file_len;
    if (n >= 7 && !memcmp(f, "<frozen", 7)) return 1;
    for (size_t i = 0; i + 13 <= n; i++)
        if ((f[i] == 's' && !memcmp(f + i, "site-packages", 13)) ||
            (f[i] == 'd' && !memcmp(f + i, "dist-packages", 13)))
            return 1;
    for (size_t i = 0; i + 12 <= n; i++)
        if (f[i] == '/' && !memcmp(f + i, "/lib/python", 11) && f[i + 11] >= '2' && f[i + 11] <= '9') return 1;
    return 0;
}

/* The Python frame a stack's per-line views charge: the innermost one, or (user_lines) the
 * innermost in the program's own files — the innermost of all when none is. */
static int64_t charged_frame(const struct lp_sites *s, const struct lp_frames *st) {
    int64_t first = -1;
    for (uint32_t i = 0; i < st->n; i++) {
        uint64_t w = st->f[i];
        if (!(w & LP_PYFRAME_BIT) || w == LP_FRAME_ELIDED) continue;
        if (first < 0) first = i;
        if (!s->user_lines || !library_code(s->r, LP_PYFRAME_ID(w))) return i;
    }
    return first;
}

/* The Python line of stack `stack` (NULL: none). */
static struct pyline *line_of(struct lp_sites *s, uint32_t stack) {
    if (!stack || stack >= s->nsite || !s->r->npycodes) return NULL;
    struct site *t = &s->site[stack];
    if (t->pyline == 0) {
        struct lp_frames st;
        lp_stack_view(s->r, stack, &st);
        t->pyline = NO_LINE;
        int64_t at = charged_frame(s, &st);
        for (uint32_t i = at < 0 ? st.n : (uint32_t)at; i < st.n; i++) {
            uint64_t ix;
            if (!lp_map_get(&s->line_ix, st.f[i], &ix)) {
                if (LP_RESERVE(s->lines, s->lines_cap, (size_t)s->nlines + 1) != 0 ||
                    lp_map_put(&s->line_ix, st.f[i], s->nlines + 1, NULL) < 0) {
                    s->oom = 1;
                    return NULL;
                }
                memset(&s->lines[s->nlines], 0, sizeof s->lines[0]);
                s->lines[s->nlines].frame = st.f[i];
                ix = ++s->nlines;
            }
            t->pyline = (uint32_t)ix;
            break;
        }
    }
    return t->pyline == NO_LINE ? NULL : &s->lines[t->pyline - 1];
}

void lp_sites_call(struct lp_sites *s, uint32_t stack, unsigned family, uint64_t dur_ns) {
    if (stack >= s->nsite && (stack >= LP_MAX_STACK_ID || fit_to(s, stack + 1) != 0)) return;
    struct pyline *l = line_of(s, stack);
    if (!l) return;
    l->calls++;
    l->call_ns += dur_ns;
    if (family < LP_FAM_COUNT) l->fam_ns[family] += dur_ns;
}

/* What each stack had live at the heap's peak, without a second pass: a peak only bumps the
 * epoch, and a stack about to change for the first time since keeps what it has (its value at
 * that peak); one that has not changed since still has it. */
static inline void keep_peak(struct lp_sites *s, struct site *t) {
    if (t->stamp != s->epoch) {
        t->at_peak = t->live;
        t->stamp = s->epoch;
    }
}

void lp_sites_peak(struct lp_sites *s) { s->epoch++; }

/* ---- the series kept by the pass ------------------------------------------------------------ */

/* Time ns falls in bucket ns * buckets / span; bucket k starts at ceil(k * span / buckets). */
static inline uint64_t bucket_start(uint64_t k, uint64_t span, unsigned buckets) {
    return k >= buckets ? UINT64_MAX : (uint64_t)(((unsigned __int128)k * span + buckets - 1) / buckets);
}

#define SERIES_MAX_ENTRIES (UINT64_C(1) << 22) /* 64 MiB of entries; past them, a pass of its own */

int lp_sites_series_keep(struct lp_sites *s, unsigned buckets, uint64_t span_ns) {
    if (!buckets || !(s->totals = lp_os_calloc(buckets, sizeof *s->totals))) return -1;
    s->series_buckets = buckets;
    s->series_span = span_ns ? span_ns : 1;
    s->series_next = bucket_start(1, s->series_span, buckets);
    return 0;
}

/* An event at ns, past the bucket the series are in: the buckets before its own end with the
 * total as it is. */
static __attribute__((noinline)) void series_tick(struct lp_sites *s, uint64_t ns) {
    uint64_t b = (uint64_t)((unsigned __int128)ns * s->series_buckets / s->series_span);
    if (b > s->series_buckets) b = s->series_buckets;
    for (; s->tick < b; s->tick++) s->totals[s->tick] = s->live_total;
    s->series_next = bucket_start(s->tick + 1u, s->series_span, s->series_buckets);
}

static __attribute__((noinline)) void series_entry(struct lp_sites *s, struct site *t) {
    if (s->nlog == s->caplog) {
        size_t cap = s->caplog ? 2 * s->caplog : 4096;
        struct series_entry *l = cap <= SERIES_MAX_ENTRIES ? lp_os_realloc(s->log, cap * sizeof *l) : NULL;
        if (!l) { /* the series are made by a pass of their own instead */
            s->series_lost = 1;
            s->series_next = UINT64_MAX;
            return;
        }
        s->log = l;
        s->caplog = cap;
    }
    s->log[s->nlog++] = (struct series_entry){(uint32_t)(t - s->site), s->tick, t->live};
    t->tick = s->tick;
}

/* Stack `t`'s live bytes are about to change at `ns` (when the series are kept). */
static inline void series_touch(struct lp_sites *s, struct site *t, uint64_t ns) {
    if (LP_MAP_UNLIKELY(ns >= s->series_next)) series_tick(s, ns);
    if (LP_MAP_UNLIKELY(t->tick != s->tick) && s->totals && !s->series_lost) series_entry(s, t);
}

/* The counts of a sampled trace are kept in 1/FX units until lp_sites_finish (a sampled block
 * counts for 1 / p(size) blocks, a fraction); bytes are whole (its size times that). */
#define FX 1024

/* What a block of `size` bytes from `stack` adds to its site: bytes and blocks (in 1/FX units
 * when sampled). 0 for a block a sampled trace did not sample (it has no stack): it adds nothing,
 * the sampled ones stand for it. */
static inline int weigh_at(uint64_t rate, uint64_t size, uint32_t stack, uint64_t *bytes, uint64_t *blocks) {
    if (!rate) {
        *bytes = size;
        *blocks = 1;
        return 1;
    }
    if (!stack) return 0;
    double w = lp_sample_weight(size, rate);
    *bytes = (uint64_t)((double)size * w + 0.5);
    *blocks = (uint64_t)(w * FX + 0.5);
    return 1;
}
static inline int weigh(const struct lp_sites *s, uint64_t size, uint32_t stack, uint64_t *bytes, uint64_t *blocks) {
    return weigh_at(s->rate, size, stack, bytes, blocks);
}

void lp_sites_counted(struct lp_sites *s, uint64_t n) {
    s->unsampled += n;
    s->counted += n;
}

int lp_sites_born(struct lp_sites *s, uint64_t size, uint32_t stack, int counting, uint64_t ns) {
    if (stack >= s->nsite && (stack >= LP_MAX_STACK_ID || fit_to(s, stack + 1) != 0)) stack = 0;
    uint64_t bytes, blocks;
    if (!weigh(s, size, stack, &bytes, &blocks)) {
        s->unsampled += (uint64_t)counting;
        return 0;
    }
    struct site *t = site_of(s, stack);
    if (counting && s->r->npycodes) {
        struct pyline *l = line_of(s, stack);
        if (l) {
            l->alloc_calls += blocks;
            l->alloc_bytes += bytes;
        }
    }
    if (counting) {
        t->calls += blocks;
        t->bytes += bytes;
        if (stack)
            s->with_stack++;
        else
            s->without_stack++;
    }
    keep_peak(s, t);
    series_touch(s, t, ns);
    t->live += bytes;
    if (t->live > t->high) t->high = t->live;
    t->live_blocks += blocks;
    s->live_total += bytes;
    return 0;
}

void lp_sites_temporary(struct lp_sites *s, uint64_t v) {
    uint64_t bytes, blocks;
    if (!weigh(s, lp_live_bytes(v), lp_live_stack(v), &bytes, &blocks)) return;
    struct site *t = site_of(s, lp_live_stack(v));
    t->temp += blocks;
    t->temp_bytes += bytes;
}

void lp_sites_died(struct lp_sites *s, uint64_t v, uint64_t ns) {
    uint64_t bytes, blocks;
    if (!weigh(s, lp_live_bytes(v), lp_live_stack(v), &bytes, &blocks)) return;
    struct site *t = site_of(s, lp_live_stack(v));
    keep_peak(s, t);
    series_touch(s, t, ns);
    t->live -= bytes;
    t->live_blocks -= blocks;
    s->live_total -= bytes;
}

static uint32_t site_index(const struct lp_sites *s, uint64_t v) {
    uint32_t st = lp_live_stack(v);
    return st < s->nsite ? st : 0;
}

/* Live bytes per stack at the instant `at_ns` (libprof-report --at): the allocation events
 * replayed up to it. */
static int replay_to(struct lp_sites *s, uint64_t at_ns) {
    struct lp_map live = {0};
    uint64_t *at = lp_os_calloc(s->nsite, sizeof *at);
    struct lp_iter *it = lp_iter_new(s->r);
    if (!at || !it) {
        lp_os_free(at);
        lp_iter_free(it);
        return -1;
    }
    struct lp_event e;
    while (lp_iter_next(it, &e)) {
        if (e.ns > at_ns) break;
        uint64_t v, freed, ptr, size;
        lp_event_blocks(&e, &freed, &ptr, &size);
        uint64_t wb, wn;
        if (freed && lp_map_take(&live, freed, &v) && weigh(s, lp_live_bytes(v), lp_live_stack(v), &wb, &wn))
            at[site_index(s, v)] -= wb;
        if (!ptr) continue;
        uint32_t st = e.stack < s->nsite ? e.stack : 0;
        if (lp_map_take(&live, ptr, &v) && weigh(s, lp_live_bytes(v), lp_live_stack(v), &wb, &wn))
            at[site_index(s, v)] -= wb;
        uint64_t sz = lp_live_size(size);
        if (lp_map_put(&live, ptr, lp_live_pack(sz, st), NULL) < 0) break;
        if (weigh(s, sz, st, &wb, &wn)) at[st] += wb;
    }
    for (uint32_t i = 0; i < s->nsite; i++) s->site[i].peak = at[i];
    lp_os_free(at);
    lp_iter_free(it);
    lp_map_free(&live);
    return 0;
}

int lp_sites_finish(struct lp_sites *s, uint64_t at_ns) {
    if (s->oom) return -1;
    if (at_ns) {
        if (replay_to(s, at_ns) != 0) return -1;
    } else {
        for (uint32_t i = 0; i < s->nsite; i++) {
            struct site *t = &s->site[i];
            t->peak = t->stamp == s->epoch ? t->at_peak : t->live;
        }
    }
    if (s->rate) { /* the counts of a sampled trace, in whole blocks now */
        for (uint32_t i = 0; i < s->nsite; i++) {
            struct site *t = &s->site[i];
            t->calls = (t->calls + FX / 2) / FX;
            t->live_blocks = (t->live_blocks + FX / 2) / FX;
            t->temp = (t->temp + FX / 2) / FX;
        }
        for (uint32_t i = 0; i < s->nlines; i++) s->lines[i].alloc_calls = (s->lines[i].alloc_calls + FX / 2) / FX;
    }
    s->syms = lp_syms_of(s->r);
    if (!s->syms) return -1;
    for (uint32_t id = 1; id < s->nsite; id++) {
        struct site *t = &s->site[id];
        struct lp_frames st;
        if (!t->calls || !lp_stack_view(s->r, id, &st)) continue;
        t->library = "?";
        for (uint32_t i = 0; i < st.n; i++) {
            if (i == 0) t->library = lp_syms_module(s->syms, st.f[0]);
            if (!lp_syms_is_runtime(s->syms, st.f[i])) {
                t->library = lp_syms_module(s->syms, st.f[i]);
                break;
            }
        }
    }
    return 0;
}

/* ---- views ------------------------------------------------------------------------------- */

enum order { BY_BYTES, BY_CALLS, BY_PEAK, BY_LEAK, BY_TEMP, BY_TEMP_BYTES };
static const struct lp_sites *sort_sites;
static enum order sort_order;

static uint64_t key(const struct site *t, enum order o) {
    return o == BY_BYTES        ? t->bytes
           : o == BY_CALLS      ? t->calls
           : o == BY_PEAK       ? t->peak
           : o == BY_TEMP       ? t->temp
           : o == BY_TEMP_BYTES ? t->temp_bytes
                                : t->live;
}

static int cmp_site(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    uint64_t ka = key(&sort_sites->site[a], sort_order), kb = key(&sort_sites->site[b], sort_order);
    return ka < kb ? 1 : ka > kb ? -1 : (a > b) - (a < b);
}

/* Stack ids with a non-zero key, heaviest first; their number in *n. */
static uint32_t *ranked(const struct lp_sites *s, enum order o, uint32_t *n) {
    uint32_t *v = lp_os_malloc((s->nsite + 1) * sizeof *v), k = 0;
    if (!v) {
        *n = 0;
        return NULL;
    }
    for (uint32_t id = 0; id < s->nsite; id++)
        if (key(&s->site[id], o)) v[k++] = id;
    sort_sites = s;
    sort_order = o;
    lp_sort(v, k, sizeof *v, cmp_site);
    *n = k;
    return v;
}

/* The first `k` of ranked()'s order, no more: a heap of the best k met so far (the worst on top),
 * sorted at the end — a trace of a PyTorch import has two million sites, and the summary and the
 * metadata want ten or fifty of each order. */
static uint32_t *ranked_top(const struct lp_sites *s, enum order o, uint32_t k, uint32_t *n) {
    uint32_t *h = lp_os_malloc(((size_t)k + 1) * sizeof *h), m = 0;
    if (!h) {
        *n = 0;
        return NULL;
    }
    sort_sites = s;
    sort_order = o;
    for (uint32_t id = 0; id < s->nsite && k; id++) {
        if (!key(&s->site[id], o)) continue;
        uint32_t at;
        if (m < k) { /* sift up: a worse one goes nearer the top */
            for (at = m++; at && cmp_site(&h[(at - 1) / 2], &id) < 0; at = (at - 1) / 2) h[at] = h[(at - 1) / 2];
        } else if (cmp_site(&id, &h[0]) < 0) { /* better than the worst kept: it takes its place */
            for (at = 0;;) {
                uint32_t c = 2 * at + 1;
                if (c >= m) break;
                if (c + 1 < m && cmp_site(&h[c + 1], &h[c]) > 0) c++;
                if (cmp_site(&h[c], &id) <= 0) break;
                h[at] = h[c];
                at = c;
            }
        } else {
            continue;
        }
        h[at] = id;
    }
    lp_sort(h, m, sizeof *h, cmp_site);
    *n = m;
    return h;
}

/* "leaf < caller < ..." (at most `max` frames) */
static void frames_text(struct lp_sites *s, uint32_t id, char *buf, size_t len, uint32_t max, const char *sep) {
    struct lp_frames v;
    const struct lp_frames *st = &v;
    size_t o = 0;
    buf[0] = '\0';
    if (!lp_stack_view(s->r, id, &v)) {
        snprintf(buf, len, "(unknown stack)");
        return;
    }
    uint32_t py = st->n; /* the innermost Python frame: always shown (the program's own line) */
    for (uint32_t i = 0; i < st->n; i++)
        if ((st->f[i] & LP_PYFRAME_BIT) && st->f[i] != LP_FRAME_ELIDED) {
            py = i;
            break;
        }
    for (uint32_t i = 0; i < st->n && i < max && o + 8 < len; i++) {
        uint32_t f = i;
        if (py >= max && py < st->n && i >= max / 2) { /* "native < native < ... < f (file:line) < caller" */
            if (i == max / 2) o += (size_t)snprintf(buf + o, len - o, "%s...", sep);
            f = py + (i - max / 2);
            if (f >= st->n) break;
        }
        const char *names[16]; /* the functions inlined there, then the one they were inlined into */
        unsigned k = lp_syms_frames(s->syms, st->f[f], 1, names, 16);
        for (unsigned m = 0; m < k && o + 8 < len; m++)
            o += (size_t)snprintf(buf + o, len - o, "%s%s", i || m ? sep : "", names[m]);
    }
    if (o >= len) buf[len - 1] = '\0';
}

static int cmp_line_bytes(const void *x, const void *y) {
    const struct pyline *a = *(const struct pyline *const *)x, *b = *(const struct pyline *const *)y;
    if (a->alloc_bytes != b->alloc_bytes) return a->alloc_bytes < b->alloc_bytes ? 1 : -1;
    return a->frame < b->frame ? -1 : a->frame > b->frame;
}

static int cmp_line(const void *x, const void *y) {
    const struct pyline *a = *(const struct pyline *const *)x, *b = *(const struct pyline *const *)y;
    if (a->call_ns != b->call_ns) return a->call_ns < b->call_ns ? 1 : -1;
    if (a->alloc_bytes != b->alloc_bytes) return a->alloc_bytes < b->alloc_bytes ? 1 : -1;
    return a->frame < b->frame ? -1 : a->frame > b->frame;
}

/* The Python lines, heaviest first (call time, then bytes allocated); their number in *n. */
static struct pyline **lines_ranked(const struct lp_sites *s, uint32_t *n) {
    *n = 0;
    if (!s->nlines) return NULL;
    struct pyline **v = lp_os_malloc(s->nlines * sizeof *v);
    if (!v) return NULL;
    for (uint32_t i = 0; i < s->nlines; i++) v[i] = &s->lines[i];
    lp_sort(v, s->nlines, sizeof *v, cmp_line);
    *n = s->nlines;
    return v;
}

static const char *library_of(const struct lp_sites *s, uint32_t id) {
    return id && id < s->nsite && s->site[id].library ? s->site[id].library : "?";
}

struct lib {
    const char *name;
    uint64_t calls, bytes, peak, live;
};

static uint32_t libraries(const struct lp_sites *s, struct lib *out, uint32_t cap) {
    uint32_t n = 0;
    for (uint32_t id = 0; id < s->nsite; id++) {
        const struct site *t = &s->site[id];
        if (!t->calls && !t->live) continue;
        const char *name = library_of(s, id);
        uint32_t i = 0;
        while (i < n && strcmp(out[i].name, name)) i++;
        if (i == n) {
            if (n == cap) continue;
            out[n++] = (struct lib){name, 0, 0, 0, 0};
        }
        out[i].calls += t->calls;
        out[i].bytes += t->bytes;
        out[i].peak += t->peak;
        out[i].live += t->live;
    }
    for (uint32_t i = 1; i < n; i++) /* by bytes allocated, insertion sort (few libraries) */
        for (uint32_t j = i; j > 0 && out[j].bytes > out[j - 1].bytes; j--) {
            struct lib t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* metadata.libprof.alloc_sites: the union of the top sites of every view, by bytes allocated. */
static void sites_json(struct lp_sites *s, struct lp_json *j) {
    uint8_t *pick = lp_os_calloc(s->nsite, 1);
    uint32_t n;
    uint32_t *v = lp_os_malloc((5 * (META_SITES / 4) + 1) * sizeof *v), nv = 0;
    for (int ord = BY_BYTES; ord <= BY_TEMP && pick && v; ord++) {
        uint32_t *top = ranked_top(s, (enum order)ord, META_SITES / 4, &n);
        for (uint32_t i = 0; i < n; i++)
            if (!pick[top[i]]) pick[top[i]] = 1, v[nv++] = top[i];
        lp_os_free(top);
    }
    sort_sites = s; /* (the union, by bytes allocated) */
    sort_order = BY_BYTES;
    if (v) lp_sort(v, nv, sizeof *v, cmp_site);
    lp_json_karray(j, "alloc_sites");
    for (uint32_t i = 0; pick && v && i < nv; i++) {
        uint32_t id = v[i];
        if (!s->site[id].bytes) continue; /* (as ranked by bytes: those allocated) */
        const struct site *t = &s->site[id];
        lp_json_object(j);
        lp_json_kus(j, "stack", LP_U(id), "calls", LP_U(t->calls), "bytes", LP_U(t->bytes), "peak_bytes", LP_U(t->peak),
                    "leaked_bytes", LP_U(t->live), "leaked_blocks", LP_U(t->live_blocks), "temporary", LP_U(t->temp),
                    "temporary_bytes", LP_U(t->temp_bytes), NULL);
        const char *lib = library_of(s, id);
        lp_json_ks(j, "library", lib, strlen(lib));
        lp_json_karray(j, "frames");
        struct lp_frames st;
        lp_stack_view(s->r, id, &st);
        for (uint32_t f = 0; f < st.n; f++) {
            const char *fn = lp_syms_function(s->syms, st.f[f], 1);
            lp_json_str(j, fn, strlen(fn));
        }
        lp_json_array_end(j);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_os_free(v);
    lp_os_free(pick);
}

void lp_sites_metadata(struct lp_sites *s, struct lp_json *j) {
    /* (distinct stacks: those the events name; nodes: the tree's, format 17 on, as written) */
    lp_json_kobject(j, "stacks");
    lp_json_kus(j, "unique", LP_U(s->r->nodes ? lp_stack_count(s->r) - 1 : lp_stack_distinct(s->r)), "nodes",
                LP_U(s->r->nodes ? lp_stack_distinct(s->r) : 0), "allocations_with_stack", LP_U(s->with_stack),
                "allocations_without_stack", LP_U(s->site[0].calls), NULL);
    if (s->rate) { /* the sites' numbers are estimates */
        lp_json_kobject(j, "sampled");
        lp_json_kus(j, "mean_bytes", LP_U(s->rate), "allocations_sampled", LP_U(s->with_stack),
                    "allocations_not_sampled", LP_U(s->unsampled), "allocations_counted_only", LP_U(s->counted), NULL);
        lp_json_object_end(j);
    }
    if (s->r->end) lp_json_ku(j, "table_full_drops", s->r->end->stacks_dropped);
    lp_json_object_end(j);
    sites_json(s, j);
    uint32_t nline;
    struct pyline **lv = lines_ranked(s, &nline);
    lp_json_karray(j, "python_lines");
    for (uint32_t i = 0; i < nline && i < META_SITES; i++) {
        const struct pyline *l = lv[i];
        const char *fn = lp_syms_function(s->syms, l->frame, 1);
        lp_json_object(j);
        lp_json_ks(j, "line", fn, strlen(fn));
        lp_json_kus(j, "calls", LP_U(l->calls), "call_ns", LP_U(l->call_ns), NULL);
        lp_json_kobject(j, "families");
        for (int f = 0; f < LP_FAM_COUNT; f++)
            if (l->fam_ns[f]) lp_json_ku(j, lp_family_names[f], l->fam_ns[f]);
        lp_json_object_end(j);
        lp_json_kus(j, "alloc_calls", LP_U(l->alloc_calls), "alloc_bytes", LP_U(l->alloc_bytes), NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_os_free(lv);
    lp_json_karray(j, "alloc_libraries");
    struct lib libs[256];
    uint32_t nl = libraries(s, libs, 256);
    for (uint32_t i = 0; i < nl; i++) {
        lp_json_object(j);
        lp_json_ks(j, "library", libs[i].name, strlen(libs[i].name));
        lp_json_kus(j, "calls", LP_U(libs[i].calls), "bytes", LP_U(libs[i].bytes), "peak_bytes", LP_U(libs[i].peak),
                    "leaked_bytes", LP_U(libs[i].live), NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
}

void lp_sites_csv(struct lp_sites *s, struct lp_out *o) {
    uint32_t n;
    uint32_t *v = ranked(s, BY_BYTES, &n);
    char buf[2048];
    for (uint32_t i = 0; v && i < n; i++) {
        const struct site *t = &s->site[v[i]];
        if (!t->calls) continue;
        frames_text(s, v[i], buf, sizeof buf, 6, " < ");
        lp_out_csv_str(o, buf, strlen(buf));
        lp_out_fmt(o, ",alloc_site,%llu,,,,,,,,%llu,,%llu\n", (unsigned long long)t->calls,
                   (unsigned long long)t->bytes, (unsigned long long)t->temp);
    }
    lp_os_free(v);
    uint32_t nline;
    struct pyline **lv = lines_ranked(s, &nline);
    for (uint32_t i = 0; i < nline; i++) {
        const char *fn = lp_syms_function(s->syms, lv[i]->frame, 1);
        lp_out_csv_str(o, fn, strlen(fn));
        lp_out_fmt(o, ",python_line,%llu,%llu,,,,,,,%llu,,\n", (unsigned long long)lv[i]->calls,
                   (unsigned long long)lv[i]->call_ns, (unsigned long long)lv[i]->alloc_bytes);
    }
    lp_os_free(lv);
    struct lib libs[256];
    uint32_t nl = libraries(s, libs, 256);
    for (uint32_t i = 0; i < nl; i++) {
        lp_out_csv_str(o, libs[i].name, strlen(libs[i].name));
        lp_out_fmt(o, ",alloc_library,%llu,,,,,,,,%llu,,\n", (unsigned long long)libs[i].calls,
                   (unsigned long long)libs[i].bytes);
    }
}

/* The stacks of a table's rows v[0..n), 4 frames each — more where two would read the same: a
 * row shows frames until it differs from every other (stacks that part past the 4th frame). One
 * text of TEXT bytes per row, in a block the caller frees; NULL when out of memory. */
#define TEXT 1024
static char *table_texts(struct lp_sites *s, const uint32_t *v, uint32_t n) {
    char *t = lp_os_malloc((size_t)n * TEXT + 1);
    unsigned *depth = lp_os_malloc((size_t)n * sizeof *depth + 1);
    if (!t || !depth) {
        lp_os_free(t);
        lp_os_free(depth);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        depth[i] = 4;
        frames_text(s, v[i], t + (size_t)i * TEXT, TEXT, depth[i], " < ");
    }
    for (int changed = 1, rounds = 0; changed && rounds < LP_STACK_MAX_FRAMES; rounds++) {
        changed = 0;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = i + 1; j < n; j++) {
                if (strcmp(t + (size_t)i * TEXT, t + (size_t)j * TEXT)) continue;
                uint32_t k[2] = {i, j};
                for (int m = 0; m < 2; m++) {
                    struct lp_frames st;
                    if (!lp_stack_view(s->r, v[k[m]], &st) || depth[k[m]] >= st.n) continue;
                    depth[k[m]]++;
                    frames_text(s, v[k[m]], t + (size_t)k[m] * TEXT, TEXT, depth[k[m]], " < ");
                    changed = 1;
                }
            }
    }
    lp_os_free(depth);
    return t;
}

/* Row i's stack reads as an earlier row's (whose line has it added in). */
static int same_as_row_before(const char *texts, uint32_t i) {
    for (uint32_t j = 0; j < i; j++)
        if (!strcmp(texts + (size_t)i * TEXT, texts + (size_t)j * TEXT)) return 1;
    return 0;
}

void lp_sites_summary(struct lp_sites *s, struct lp_out *o, unsigned top) {
    const uint32_t rows = (uint32_t)lp_top(top, TOP);
    static const char *const titles[] = {"allocation sites by bytes allocated", "allocation sites by calls",
                                         "allocation sites by share of the peak", "leaks by allocation site"};
    char buf[512], b1[32], b2[32], b3[32];
    if (s->rate) {
        lp_fmt_bytes(b1, sizeof b1, s->rate);
        lp_out_fmt(o,
                   "  allocation stacks sampled, one every %s on average (%llu of %llu allocations): the sites' "
                   "calls and bytes below are estimates (~)\n",
                   b1, (unsigned long long)s->with_stack, (unsigned long long)(s->with_stack + s->unsampled));
    }
    for (int ord = BY_BYTES; ord <= BY_LEAK; ord++) {
        uint32_t n;
        uint32_t *v = ranked_top(s, (enum order)ord, rows, &n);
        if (!v || n == 0 || (n == 1 && v[0] == 0 && ord != BY_CALLS)) {
            lp_os_free(v);
            continue;
        }
        lp_out_fmt(o, "  %s%s:\n  %10s %10s %10s %10s  %s\n", titles[ord], s->rate ? " (estimated)" : "",
                   s->rate ? "~calls" : "calls", s->rate ? "~allocated" : "allocated", s->rate ? "~at peak" : "at peak",
                   s->rate ? "~leaked" : "leaked", "stack (innermost first)");
        uint32_t shown = n < rows ? n : rows;
        char *texts = table_texts(s, v, shown);
        for (uint32_t i = 0; i < shown; i++) {
            struct site t = s->site[v[i]];
            if (!texts) frames_text(s, v[i], buf, sizeof buf, 4, " < ");
            if (texts && same_as_row_before(texts, i)) continue; /* added to that row */
            for (uint32_t j = i + 1; texts && j < shown; j++)    /* stacks that read the same: one row */
                if (!strcmp(texts + (size_t)i * TEXT, texts + (size_t)j * TEXT)) {
                    t.calls += s->site[v[j]].calls;
                    t.bytes += s->site[v[j]].bytes;
                    t.peak += s->site[v[j]].peak;
                    t.live += s->site[v[j]].live;
                }
            lp_fmt_bytes(b1, sizeof b1, t.bytes);
            lp_fmt_bytes(b2, sizeof b2, t.peak);
            lp_fmt_bytes(b3, sizeof b3, t.live);
            lp_out_fmt(o, "  %10llu %10s %10s %10s  %s\n", (unsigned long long)t.calls, b1, b2, b3,
                       texts ? texts + (size_t)i * TEXT : buf);
        }
        lp_os_free(texts);
        lp_os_free(v);
    }
    { /* heaptrack's "most temporary allocations" */
        uint32_t n;
        uint32_t *v = ranked_top(s, BY_TEMP, rows, &n);
        if (v && n) {
            lp_out_fmt(o,
                       "  most temporary allocations (released right after, on their thread):\n  %10s %10s %10s  %s\n",
                       "temporary", "of calls", "bytes", "stack (innermost first)");
            uint32_t shown = n < rows ? n : rows;
            char *texts = table_texts(s, v, shown);
            for (uint32_t i = 0; i < shown; i++) {
                struct site t = s->site[v[i]];
                if (!texts) frames_text(s, v[i], buf, sizeof buf, 4, " < ");
                if (texts && same_as_row_before(texts, i)) continue;
                for (uint32_t j = i + 1; texts && j < shown; j++)
                    if (!strcmp(texts + (size_t)i * TEXT, texts + (size_t)j * TEXT)) {
                        t.temp += s->site[v[j]].temp;
                        t.calls += s->site[v[j]].calls;
                        t.temp_bytes += s->site[v[j]].temp_bytes;
                    }
                lp_fmt_bytes(b1, sizeof b1, t.temp_bytes);
                lp_out_fmt(o, "  %10llu %10llu %10s  %s\n", (unsigned long long)t.temp, (unsigned long long)t.calls, b1,
                           texts ? texts + (size_t)i * TEXT : buf);
            }
            lp_os_free(texts);
        }
        lp_os_free(v);
    }
    uint32_t nline;
    struct pyline **lv = lines_ranked(s, &nline);
    uint64_t any[LP_FAM_COUNT] = {0}; /* the families that appear, as columns */
    for (uint32_t i = 0; i < nline; i++)
        for (int f = 0; f < LP_FAM_COUNT; f++) any[f] += lv[i]->fam_ns[f];
    for (int by_bytes = 0; by_bytes < 2 && nline; by_bytes++) {
        if (by_bytes) lp_sort(lv, nline, sizeof *lv, cmp_line_bytes);
        if (!(by_bytes ? lv[0]->alloc_bytes : lv[0]->call_ns)) continue;
        lp_out_fmt(o, "  by Python line, %s (%s):\n  %10s %10s", by_bytes ? "bytes allocated" : "time in runtime calls",
                   s->user_lines ? "the innermost frame in the program's own files" : "the innermost Python frame",
                   "calls", "time");
        for (int f = 0; f < LP_FAM_COUNT; f++)
            if (any[f]) lp_out_fmt(o, " %10s", lp_family_names[f]);
        lp_out_fmt(o, " %10s %10s  %s\n", "allocs", "allocated", "line");
        for (uint32_t i = 0; i < nline && i < rows; i++) {
            const struct pyline *l = lv[i];
            if (!(by_bytes ? l->alloc_bytes : l->call_ns)) break;
            lp_fmt_ns(b1, sizeof b1, (int64_t)l->call_ns);
            lp_out_fmt(o, "  %10llu %10s", (unsigned long long)l->calls, l->calls ? b1 : "-");
            for (int f = 0; f < LP_FAM_COUNT; f++)
                if (any[f]) {
                    lp_fmt_ns(b1, sizeof b1, (int64_t)l->fam_ns[f]);
                    lp_out_fmt(o, " %10s", l->fam_ns[f] ? b1 : "-");
                }
            lp_fmt_bytes(b2, sizeof b2, l->alloc_bytes);
            const char *fn = lp_syms_function(s->syms, l->frame, 1);
            lp_out_fmt(o, " %10llu %10s  %s\n", (unsigned long long)l->alloc_calls, l->alloc_calls ? b2 : "-", fn);
        }
    }
    lp_os_free(lv);
    struct lib libs[256];
    uint32_t nl = libraries(s, libs, 256);
    if (nl)
        lp_out_fmt(o, "  memory per library (the first caller outside the C/C++ runtime):\n  %10s %10s %10s %10s  %s\n",
                   "calls", "allocated", "at peak", "leaked", "library");
    for (uint32_t i = 0; i < nl && i < rows; i++) {
        lp_fmt_bytes(b1, sizeof b1, libs[i].bytes);
        lp_fmt_bytes(b2, sizeof b2, libs[i].peak);
        lp_fmt_bytes(b3, sizeof b3, libs[i].live);
        lp_out_fmt(o, "  %10llu %10s %10s %10s  %s\n", (unsigned long long)libs[i].calls, b1, b2, b3, libs[i].name);
    }
}

/* A frame's name made safe for the folded format (';' separates frames, a newline ends lines). */
static void folded_name(struct lp_out *o, const char *n) {
    for (; *n; n++) lp_out_c(o, *n == ';' ? ':' : *n == '\n' ? ' ' : *n);
}

void lp_folded_stack(struct lp_out *o, const struct lp_reader *r, struct lp_syms *syms, uint32_t id) {
    struct lp_frames st;
    if (!lp_stack_view(r, id, &st)) {
        lp_out_s(o, "[unknown stack]");
        return;
    }
    const char *names[16];
    for (uint32_t f = st.n; f-- > 0;) /* root first; a frame's inlined functions after it */
        for (unsigned k = lp_syms_frames(syms, st.f[f], 1, names, 16); k-- > 0;) {
            folded_name(o, names[k]);
            if (f || k) lp_out_c(o, ';');
        }
}

void lp_sites_folded(struct lp_sites *s, struct lp_out *o, int which) {
    enum order ord = which == LP_FOLD_LEAKS  ? BY_LEAK
                     : which == LP_FOLD_PEAK ? BY_PEAK
                     : which == LP_FOLD_TEMP ? BY_TEMP_BYTES
                                             : BY_BYTES;
    uint32_t n;
    uint32_t *v = ranked(s, ord, &n);
    for (uint32_t i = 0; v && i < n; i++) {
        uint32_t id = v[i];
        lp_folded_stack(o, s->r, s->syms, id);
        lp_out_fmt(o, " %llu\n", (unsigned long long)key(&s->site[id], ord));
    }
    lp_os_free(v);
}

/* speedscope.c's two passes over the allocation views: every frame they name, then the three
 * profiles (allocated, leaked, live at the peak). */
void lp_sites_speedscope_frames(struct lp_sites *s, uint64_t (*frame)(void *, const char *), void *arg) {
    if (!s) return;
    frame(arg, "[unknown stack]");
    for (uint32_t id = 1; id < s->nsite; id++) {
        struct lp_frames st;
        if ((!s->site[id].bytes && !s->site[id].live && !s->site[id].peak) || !lp_stack_view(s->r, id, &st)) continue;
        const char *names[16];
        for (uint32_t f = 0; f < st.n; f++)
            for (unsigned k = 0, nk = lp_syms_frames(s->syms, st.f[f], 1, names, 16); k < nk; k++) frame(arg, names[k]);
    }
}

void lp_sites_speedscope_profiles(struct lp_sites *s, uint64_t (*frame)(void *, const char *), void *arg,
                                  struct lp_json *j) {
    if (!s) return;
    static const enum order views[3] = {BY_BYTES, BY_LEAK, BY_PEAK};
    static const char *const titles[3] = {"allocated bytes", "leaked bytes", "live bytes at the heap's peak"};
    for (int view = 0; view < 3; view++) {
        enum order ord = views[view];
        uint64_t total = 0;
        for (uint32_t id = 0; id < s->nsite; id++) total += key(&s->site[id], ord);
        lp_json_object(j);
        lp_json_ks(j, "type", "sampled", 7);
        lp_json_ks(j, "name", titles[view], strlen(titles[view]));
        lp_json_ks(j, "unit", "bytes", 5);
        lp_json_kus(j, "startValue", LP_U(0), "endValue", LP_U(total), NULL);
        lp_json_karray(j, "samples");
        for (uint32_t id = 0; id < s->nsite; id++) {
            if (!key(&s->site[id], ord)) continue;
            struct lp_frames st;
            lp_json_array(j);
            if (!lp_stack_view(s->r, id, &st))
                lp_json_u64(j, frame(arg, "[unknown stack]"));
            else
                for (uint32_t f = st.n; f-- > 0;) { /* root first; a frame's inlined functions after it */
                    const char *names[16];
                    for (unsigned k = lp_syms_frames(s->syms, st.f[f], 1, names, 16); k-- > 0;)
                        lp_json_u64(j, frame(arg, names[k]));
                }
            lp_json_array_end(j);
        }
        lp_json_array_end(j);
        lp_json_karray(j, "weights");
        for (uint32_t id = 0; id < s->nsite; id++)
            if (key(&s->site[id], ord)) lp_json_u64(j, key(&s->site[id], ord));
        lp_json_array_end(j);
        lp_json_object_end(j);
    }
}

/* ---- sites over time -------------------------------------------------------------------------- */

static int by_weight_desc(const void *x, const void *y) {
    const uint64_t *a = x, *b = y; /* (weight, id) pairs */
    return a[0] < b[0] ? 1 : a[0] > b[0] ? -1 : (a[1] > b[1]) - (a[1] < b[1]);
}

/* Block `v` (lp_live_pack) is no longer live: its series' bytes, weighed as the sites weigh them. */
static void series_gone(const int16_t *series, int64_t *sums, uint32_t n, uint64_t rate, uint64_t v) {
    uint32_t st = lp_live_stack(v) < n ? lp_live_stack(v) : 0;
    uint64_t bytes, blocks;
    if (weigh_at(rate, lp_live_bytes(v), st, &bytes, &blocks)) sums[series[st]] -= (int64_t)bytes;
}

/* One pass over the heap events, with the sites' accounting: the live bytes of each series
 * (`series`: a stack's), sampled into out->v at every bucket boundary — where the pass's sites
 * kept no series for these buckets (their log outgrew its room, or the general path). */
static int series_pass(const struct lp_reader *r, const int16_t *series, struct lp_site_series *out) {
    uint32_t n = lp_stack_count(r);
    const uint64_t rate = r->hdr.version >= 13 ? r->hdr.alloc_sample : 0; /* as the sites weigh */
    struct lp_iter *it = lp_iter_new(r);
    struct lp_map live = {0};
    if (!it) return -1;
    int64_t sums[LP_SERIES_MAX + 1] = {0};
    unsigned filled = 0, buckets = out->buckets;
    /* (the bucket is computed only where the next one is reached: bucket_start) */
    const uint64_t span = out->span_ns ? out->span_ns : 1;
    uint64_t next = bucket_start(1, span, buckets);
    struct lp_event e;
    int rc = 0;
    while (lp_iter_next(it, &e)) {
        uint64_t v, freed, ptr, size;
        lp_event_blocks(&e, &freed, &ptr, &size);
        if (!freed && !ptr) continue;
        if (e.ns >= next) { /* the buckets before this event take the values so far */
            unsigned b = (unsigned)((unsigned __int128)e.ns * buckets / span);
            if (b > buckets) b = buckets;
            for (; filled < b; filled++)
                for (unsigned i = 0; i < out->nseries; i++)
                    out->v[(size_t)filled * out->nseries + i] = sums[i] > 0 ? (uint64_t)sums[i] : 0;
            next = bucket_start(filled + 1u, span, buckets);
        }
        /* the block released, then (realloc's) the one it replaces; a block at the address of
         * one still live leaves that one's stack first (its release was missed), as in the pass */
        for (int k = 0; k < 2; k++) {
            uint64_t p = k ? ptr : freed;
            if (p && lp_map_take(&live, p, &v)) series_gone(series, sums, n, rate, v);
        }
        if (!ptr) continue;
        uint32_t st = e.stack < n ? e.stack : 0;
        uint64_t sz = lp_live_size(size), bytes, blocks;
        int put = lp_map_put(&live, ptr, lp_live_pack(sz, st), &v);
        if (put < 0) {
            rc = -1;
            break;
        }
        if (put) series_gone(series, sums, n, rate, v);
        if (weigh_at(rate, sz, st, &bytes, &blocks)) sums[series[st]] += (int64_t)bytes; /* (unsampled: not) */
    }
    for (; filled < buckets; filled++)
        for (unsigned i = 0; i < out->nseries; i++)
            out->v[(size_t)filled * out->nseries + i] = sums[i] > 0 ? (uint64_t)sums[i] : 0;
    lp_iter_free(it);
    lp_map_free(&live);
    return rc;
}

/* The series from what the pass kept (lp_sites_series_keep): each top stack's entries, in time
 * order, give its value at the end of the buckets up to theirs, its live bytes now the rest;
 * "other" is the heap's total less theirs. */
static void series_from_log(const struct lp_sites *s, const int16_t *series, uint32_t n, const uint32_t *top_id,
                            unsigned t, struct lp_site_series *out) {
    const unsigned B = out->buckets, w = out->nseries;
    uint32_t from[LP_SERIES_MAX] = {0};
    for (size_t j = 0; j < s->nlog; j++) {
        const struct series_entry *e = &s->log[j];
        unsigned i = e->site < n ? (unsigned)series[e->site] : t;
        if (i >= t) continue;
        for (uint32_t k = from[i]; k < e->upto && k < B; k++) out->v[(size_t)k * w + i] = e->live;
        if (e->upto > from[i]) from[i] = e->upto;
    }
    for (unsigned i = 0; i < t; i++)
        for (uint32_t k = from[i]; k < B; k++) out->v[(size_t)k * w + i] = s->site[top_id[i]].live;
    for (uint32_t k = 0; k < B; k++) {
        uint64_t total = k < s->tick ? s->totals[k] : s->live_total, tops = 0;
        for (unsigned i = 0; i < t; i++) tops += out->v[(size_t)k * w + i];
        out->v[(size_t)k * w + t] = total > tops ? total - tops : 0;
    }
}

int lp_site_series_of(const struct lp_reader *r, unsigned top, unsigned buckets, struct lp_site_series *out,
                      const struct lp_sites *by, enum lp_series_rank rank) {
    memset(out, 0, sizeof *out);
    if (!by || lp_stack_count(r) <= 1 || buckets == 0) return 0;
    if (top > LP_SERIES_MAX) top = LP_SERIES_MAX;
    uint32_t n = lp_stack_count(r);
    uint64_t *hi = lp_os_calloc(n, sizeof *hi), *pairs = lp_os_calloc((size_t)n * 2, sizeof *pairs);
    int16_t *series = lp_os_malloc(n * sizeof *series);
    struct lp_syms *syms = NULL;
    int rc = -1;
    if (!hi || !pairs || !series) goto out;
    out->buckets = buckets;
    out->span_ns = lp_ticks_to_ns(r, r->last_ticks) + 1;
    for (uint32_t id = 1; id < n && id < by->nsite; id++)
        hi[id] = rank == LP_RANK_HIGHEST ? by->site[id].high
                 : by->site[id].peak     ? by->site[id].peak
                                         : by->site[id].bytes / 1024;
    uint32_t k = 0;
    for (uint32_t id = 1; id < n; id++)
        if (hi[id]) {
            pairs[2 * k] = hi[id];
            pairs[2 * k + 1] = id;
            k++;
        }
    lp_sort(pairs, k, 2 * sizeof *pairs, by_weight_desc);
    unsigned t = k < top ? k : top;
    out->nseries = t + 1;
    out->v = lp_os_calloc((size_t)buckets * out->nseries, sizeof *out->v);
    if (!out->v) goto out;
    for (uint32_t id = 0; id < n; id++) series[id] = (int16_t)t;
    syms = lp_syms_of(r);
    uint32_t top_id[LP_SERIES_MAX];
    for (unsigned i = 0; i < t; i++) {
        uint32_t id = (uint32_t)pairs[2 * i + 1];
        series[id] = (int16_t)i;
        top_id[i] = id;
        struct lp_frames st;
        lp_stack_view(r, id, &st);
        size_t o = 0;
        for (uint32_t f = 0; syms && f < st.n && f < 3 && o + 8 < sizeof out->label[i]; f++)
            o += (size_t)snprintf(out->label[i] + o, sizeof out->label[i] - o, "%s%s", f ? " < " : "",
                                  lp_syms_function(syms, st.f[f], 1));
        if (!o) snprintf(out->label[i], sizeof out->label[i], "stack %u", id);
        for (unsigned j = 0; j < i; j++) /* two stacks, the same three innermost names: told apart */
            if (!strcmp(out->label[j], out->label[i])) {
                size_t l = strlen(out->label[i]);
                if (l > sizeof out->label[i] - 16) l = sizeof out->label[i] - 16;
                snprintf(out->label[i] + l, sizeof out->label[i] - l, " (stack %u)", id);
                break;
            }
    }
    snprintf(out->label[t], sizeof out->label[t], "other");
    if (by->totals && !by->series_lost && by->series_buckets == buckets && by->series_span == out->span_ns &&
        by->nsite >= n)
        series_from_log(by, series, n, top_id, t, out);
    else if (series_pass(r, series, out) != 0)
        goto out;
    rc = 0;
out:
    lp_os_free(hi);
    lp_os_free(pairs);
    lp_os_free(series);
    if (rc != 0) lp_site_series_free(out);
    return rc;
}

void lp_site_series_free(struct lp_site_series *s) {
    lp_os_free(s->v);
    s->v = NULL;
    s->nseries = 0;
}

void lp_sites_each(struct lp_sites *s, void (*fn)(void *arg, uint32_t stack, const struct lp_site_totals *t),
                   void *arg) {
    if (!s) return;
    for (uint32_t id = 0; id < s->nsite; id++) {
        const struct site *t = &s->site[id];
        if (!t->calls && !t->live) continue;
        struct lp_site_totals v = {t->calls, t->bytes, t->live_blocks, t->live, t->peak};
        fn(arg, id, &v);
    }
}
