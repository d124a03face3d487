/* write_chrome.c: the converter's Chrome trace writer (a struct lp_sink) — every event as the pass
 * sees it: calls as slices (X) with their arguments, thread-creation arrows (s/f), big
 * allocations and frees of big blocks as instants, annotation ranges, marks and counters,
 * pause/resume markers; then the heap and "mmap anon" counter tracks and metadata.libprof.
 * Events are written with lib/json.c, the one JSON trace writer. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "write_chrome.h"

#include "analysis.h"
#include "calls.h"
#include "describe.h"
#include "json.h"
#include "os.h"
#include "samples.h"
#include "sites.h"
#include "symbols.h"
#include "vec.h"
#include "views.h"

#define MMAP_POINTS_MAX 20000

/* A long run's timeline (LIBPROF_TIMELINE): before `cutoff` the trace keeps slices that last at
 * least `min_ns` and folds the others into each thread's "folded calls" counter track (calls and
 * time per second); big-allocation instants there are counted, not written. */
#define FOLD_BUCKET_NS 1000000000u
/* A followed trace (the run still going) does not know which stretch will be its last: the
 * slices that would be folded before it are written to segment files of SEG_COUNT - 1 per
 * window (unlinked temporary files beside the trace), each counted into the folded counters as
 * well; a segment that falls out of the window is dropped, and at the end the ones left are
 * copied into the trace. Full detail then starts at the oldest segment kept. */
#define SEG_COUNT 9
struct seg {
    uint64_t k; /* it holds the slices that start in [k * seg_ns, (k + 1) * seg_ns) */
    int fd;
    uint64_t slices, instants;
    struct lp_out *out;
};
struct fold {
    uint32_t tid;
    uint32_t nb;
    uint64_t *calls, *ns; /* per second of the folded stretch */
};

struct chrome {
    struct lp_json j;
    uint32_t pid;
    uint64_t instants, mmap_points;
    int mmap_capped;
    uint64_t cutoff, min_ns; /* the timeline: full detail from `cutoff` (0: the whole run) */
    uint64_t folded, folded_instants;
    struct fold *folds;
    size_t nfolds, capfolds, last_fold;
    /* a followed trace's window (see SEG_COUNT) */
    int follow;
    uint64_t window_ns, seg_ns;
    struct seg segs[SEG_COUNT];
    int nsegs;
    uint64_t dropped_to; /* segments before this k are gone (their slices folded) */
    char dir[4096];
};

/* Count slice `e` into its thread's folded counters. 0, or -1 when out of memory. */
static int fold_count(struct chrome *c, const struct lp_event *e) {
    struct fold *f = c->nfolds && c->folds[c->last_fold].tid == e->tid ? &c->folds[c->last_fold] : NULL;
    for (size_t i = 0; i < c->nfolds && !f; i++) /* a thread's calls come in runs: rarely walked */
        if (c->folds[i].tid == e->tid) f = &c->folds[c->last_fold = i];
    if (!f) {
        if (LP_RESERVE(c->folds, c->capfolds, c->nfolds + 1) != 0) return -1;
        c->last_fold = c->nfolds;
        f = &c->folds[c->nfolds++];
        f->tid = e->tid;
        f->nb = c->follow ? 64 : (uint32_t)(c->cutoff / FOLD_BUCKET_NS + 1);
        f->calls = lp_os_calloc(f->nb, sizeof *f->calls);
        f->ns = lp_os_calloc(f->nb, sizeof *f->ns);
        if (!f->calls || !f->ns) {
            lp_os_free(f->calls);
            lp_os_free(f->ns);
            c->nfolds--;
            c->last_fold = 0;
            return -1;
        }
    }
    uint64_t b = e->start_ns / FOLD_BUCKET_NS;
    if (b >= f->nb && c->follow && b < (1u << 24)) { /* a followed run: the counters grow with it */
        uint32_t nb = f->nb;
        while (nb <= b) nb *= 2;
        uint64_t *calls = lp_os_realloc(f->calls, nb * sizeof *calls),
                 *ns = calls ? lp_os_realloc(f->ns, nb * sizeof *ns) : NULL;
        if (calls) f->calls = calls;
        if (ns) {
            f->ns = ns;
            memset(f->calls + f->nb, 0, (nb - f->nb) * sizeof *calls);
            memset(f->ns + f->nb, 0, (nb - f->nb) * sizeof *ns);
            f->nb = nb;
        }
    }
    if (b >= f->nb) b = f->nb - 1;
    f->calls[b]++;
    f->ns[b] += e->dur_ns;
    return 0;
}

/* Fold a slice of thread `tid` that ended before the cutoff: 1 if it is not to be written. */
static int folded(struct chrome *c, const struct lp_event *e) {
    if (!c->cutoff || e->start_ns + e->dur_ns >= c->cutoff || (e->timed && e->dur_ns >= c->min_ns)) return 0;
    if (!e->timed) {
        c->folded_instants++;
        return 1;
    }
    if (fold_count(c, e) != 0) return 0; /* out of memory: written */
    c->folded++;
    return 1;
}

/* ---- a followed trace's window (see SEG_COUNT) ---- */

static void thread_names(struct chrome *c, const struct lp_reader *r);

static void seg_drop(struct chrome *c, int i) {
    struct seg *g = &c->segs[i];
    c->folded += g->slices;
    c->folded_instants += g->instants;
    if (g->k + 1 > c->dropped_to) c->dropped_to = g->k + 1;
    lp_os_close(g->fd);
    lp_os_free(g->out);
    c->segs[i] = c->segs[--c->nsegs];
}

/* The segment of what starts at `start` (NULL: its stretch is gone), the latest event at `end`. */
static struct seg *seg_at(struct chrome *c, uint64_t start, uint64_t end) {
    uint64_t k = start / c->seg_ns;
    /* what started a whole window before the latest event is past: its segments go */
    uint64_t kmin = end > c->window_ns ? (end - c->window_ns) / c->seg_ns : 0;
    for (int i = c->nsegs; i-- > 0;)
        if (c->segs[i].k < kmin) seg_drop(c, i);
    if (k < c->dropped_to) return NULL;
    for (int i = 0; i < c->nsegs; i++)
        if (c->segs[i].k == k) return &c->segs[i];
    if (c->nsegs == SEG_COUNT) { /* (a window of SEG_COUNT - 1 segments cannot need more) */
        int old = 0;
        for (int i = 1; i < c->nsegs; i++)
            if (c->segs[i].k < c->segs[old].k) old = i;
        seg_drop(c, old);
        if (k < c->dropped_to) return NULL;
    }
    struct lp_out *o = lp_os_malloc(sizeof *o);
    int fd = o ? lp_os_open(c->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -1;
    if (fd < 0) {
        lp_os_free(o);
        return NULL; /* no room for it: folded */
    }
    lp_out_init(o, fd);
    c->segs[c->nsegs] = (struct seg){k, fd, 0, 0, o};
    return &c->segs[c->nsegs++];
}

/* A followed trace: a short slice (or an instant) goes to its segment, counted as folded too. */
static int follow_short(struct chrome *c, const struct lp_event *e) {
    if (e->timed && e->dur_ns >= c->min_ns) return 0;
    struct seg *g = seg_at(c, e->start_ns, e->ns);
    if (e->timed) fold_count(c, e);
    if (!g) {
        if (e->timed)
            c->folded++;
        else
            c->folded_instants++;
        return 1;
    }
    if (e->timed)
        g->slices++;
    else
        g->instants++;
    lp_json_divert(&c->j, g->out);
    return 2;
}

/* The end of a followed trace: the thread names, the segments kept copied in, full detail from
 * the oldest of them. */
static void follow_finish(struct chrome *c, const struct lp_reader *r) {
    thread_names(c, r);
    for (int i = 0; i < c->nsegs; i++) {
        struct seg *g = &c->segs[i];
        /* what it wrote, then what it holds: read only (a snapshot's copy of the pass shares the
         * file) */
        size_t cap = 1 << 16, have = 0, took;
        char *buf = lp_os_malloc(cap);
        ssize_t n = 0;
        for (off_t at = 0; buf && at < (off_t)g->out->total + (off_t)g->out->n; at += n) {
            if (have == cap) { /* a record longer than the room: more room */
                char *nb = lp_os_realloc(buf, cap *= 2);
                if (!nb) break;
                buf = nb;
            }
            size_t want = cap - have;
            if (at < (off_t)g->out->total) {
                /* (never past what it had written: a snapshot's copy shares the file with the pass,
                 * which goes on writing — a record cut there would be replayed half) */
                if ((size_t)(g->out->total - (uint64_t)at) < want) want = (size_t)(g->out->total - (uint64_t)at);
                if ((n = lp_os_pread(g->fd, buf + have, want, at)) <= 0) break;
            } else { /* the part still in its buffer */
                size_t off = (size_t)(at - (off_t)g->out->total);
                n = (ssize_t)(g->out->n - off < want ? g->out->n - off : want);
                memcpy(buf + have, g->out->buf + off, (size_t)n);
            }
            have += (size_t)n;
            if ((took = lp_json_replay(&c->j, buf, have)) == (size_t)-1) break;
            memmove(buf, buf + took, have -= took);
        }
        lp_os_free(buf);
    }
    c->cutoff = c->dropped_to * c->seg_ns;
}

/* The command line with arguments separated by spaces (the executable when none was recorded):
 * its text in *s, *n bytes; returns what to free after. */
static char *command(const struct lp_reader *r, const char **s, uint32_t *n) {
    char *tmp = lp_os_malloc(r->cmdline_len + 1);
    *n = 0;
    if (tmp && r->cmdline_len) {
        memcpy(tmp, r->cmdline, r->cmdline_len);
        *n = r->cmdline_len;
        while (*n > 0 && tmp[*n - 1] == '\0') --*n;
        for (uint32_t i = 0; i < *n; i++)
            if (tmp[i] == '\0') tmp[i] = ' ';
    }
    *s = tmp ? tmp : "";
    if (*n == 0 && r->exe) {
        *s = r->exe;
        *n = r->exe_len;
    }
    return tmp;
}

static void thread_label(const struct lp_reader *r, const struct lp_thread_info *t, char *buf, size_t len) {
    if (t->name && t->name_len)
        snprintf(buf, len, "%.*s", (int)t->name_len, t->name);
    else if (t->tid == r->hdr.pid)
        snprintf(buf, len, "main");
    else
        snprintf(buf, len, "thread %u", t->tid);
}

/* The process and its threads by name. Thread id 0 is the process itself (what libprof records
 * on its own behalf, e.g. the timer's markers): no track of its own. */
static void head(struct chrome *c, const struct lp_reader *r) {
    const char *s;
    uint32_t n;
    char *tmp = command(r, &s, &n);
    lp_json_meta_name(&c->j, c->pid, c->pid, "process_name", s, n);
    lp_os_free(tmp);
}

static void thread_names(struct chrome *c, const struct lp_reader *r) {
    struct lp_json *j = &c->j;
    for (uint32_t i = 0; i < r->nthreads; i++) {
        char name[64];
        uint32_t tid = r->threads[i].tid;
        if (tid == 0 || r->threads[i].samples) continue; /* (a samples stream is its thread's) */
        thread_label(r, &r->threads[i], name, sizeof name);
        lp_json_meta_name(j, c->pid, tid, "thread_name", name, strlen(name));
        lp_json_meta_sort(j, c->pid, tid, tid == c->pid ? 0 : i + 1);
    }
}

static uint32_t tid_of(const struct chrome *c, const struct lp_event *e) { return e->tid ? e->tid : c->pid; }

/* A big allocation, or the free of a big block: an instant on the thread's track. */
static void instant(struct chrome *c, const struct lp_event *e, uint64_t size, uint64_t ptr) {
    struct lp_json *j = &c->j;
    const char *name = lp_kind_names[e->kind];
    lp_json_event(j, "i", c->pid, tid_of(c, e), lp_family_names[lp_kind_family[e->kind]], name, strlen(name),
                  (int64_t)e->ns);
    lp_json_scope(j, 't');
    lp_json_args(j);
    lp_json_key(j, "size");
    lp_json_u64(j, size);
    lp_json_key(j, "ptr");
    lp_json_hex(j, ptr);
    if (e->timed) {
        lp_json_key(j, "dur_ns");
        lp_json_u64(j, e->dur_ns);
    }
    lp_json_args_end(j);
    lp_json_event_end(j);
}

static const char *const control_reasons[] = {"?", "api", "signal", "delay", "duration", "start"};

/* Pauses, resumes and resets: instants on the whole process. */
static void control(struct chrome *c, const struct lp_event *e) {
    struct lp_json *j = &c->j;
    uint64_t reason = e->w[0] < 6 ? e->w[0] : 0;
    const char *name = lp_kind_names[e->kind];
    lp_json_event(j, "i", c->pid, tid_of(c, e), "control", name, strlen(name), (int64_t)e->start_ns);
    lp_json_scope(j, 'p');
    lp_json_args(j);
    lp_json_key(j, "reason");
    lp_json_str(j, control_reasons[reason], strlen(control_reasons[reason]));
    lp_json_args_end(j);
    lp_json_event_end(j);
}

/* The CPU sampled on the slice's thread while it ran (LIBPROF_SAMPLE_HZ): an argument of its own,
 * so that a slice that waited shows little CPU beside its duration. */
static void cpu_arg(struct lp_json *j, const struct lp_analysis *a, const struct lp_event *e) {
    if (!lp_samples_of(a) || !e->timed) return;
    lp_json_key(j, "cpu_ns");
    lp_json_u64(j, lp_samples_cpu_ns(lp_samples_of(a), e->thread, e->start_ns, e->start_ns + e->dur_ns));
    if (lp_kind_shape[e->kind] == LP_SHAPE_CALL && lp_call_id(e->w[0]) == LP_CALL_ORT_RUN) { /* its pool's work */
        lp_json_key(j, "cpu_others_ns");
        lp_json_u64(j, lp_samples_cpu_others_ns(lp_samples_of(a), e->thread, e->start_ns, e->start_ns + e->dur_ns));
    }
}

/* Annotation records: a range is an X slice, a mark an instant, a counter a C event. */
static void annot(struct chrome *c, const struct lp_analysis *a, const struct lp_event *e) {
    const struct lp_reader *r = a->r;
    struct lp_json *j = &c->j;
    uint32_t len;
    const char *name = lp_reader_name(r, e->w[0], &len);
    int shape = lp_kind_shape[e->kind];
    double v = 0;
    if (shape == LP_SHAPE_COUNTER) {
        memcpy(&v, &e->w[1], sizeof v);
        if (v != v || v - v != 0) return; /* NaN and infinities have no JSON spelling */
    }
    lp_json_event(j,
                  shape == LP_SHAPE_RANGE  ? "X"
                  : shape == LP_SHAPE_MARK ? "i"
                                           : "C",
                  c->pid, shape == LP_SHAPE_COUNTER ? c->pid : tid_of(c, e), "annot", name, len, (int64_t)e->start_ns);
    if (shape == LP_SHAPE_RANGE) {
        lp_json_dur(j, e->dur_ns);
        if (lp_samples_of(a)) {
            lp_json_args(j);
            cpu_arg(j, a, e);
            lp_json_args_end(j);
        }
    } else if (shape == LP_SHAPE_MARK) {
        lp_json_scope(j, 't');
    } else {
        lp_json_args(j);
        lp_json_key(j, "value");
        lp_json_double(j, "%.17g", v);
        lp_json_args_end(j);
    }
    lp_json_event_end(j);
}

/* A Python function (LIBPROF_PYTHON_CALLS): a slice named by its qualified name, with the file
 * and line of its definition. */
static void pycall(struct chrome *c, const struct lp_analysis *a, const struct lp_event *e) {
    const struct lp_reader *r = a->r;
    struct lp_json *j = &c->j;
    uint32_t len;
    const char *cat, *name = lp_event_name(r, e, &len, &cat);
    lp_json_event(j, "X", c->pid, tid_of(c, e), "python", name, len, (int64_t)e->start_ns);
    lp_json_dur(j, e->dur_ns);
    uint64_t id = e->w[0];
    int known = id < r->npycodes && r->pycodes[id].file;
    if (known || lp_samples_of(a)) {
        lp_json_args(j);
        if (known) {
            lp_json_key(j, "file");
            lp_json_str(j, r->pycodes[id].file, r->pycodes[id].file_len);
            lp_json_key(j, "line");
            lp_json_u64(j, r->pycodes[id].firstline);
        }
        cpu_arg(j, a, e);
        lp_json_args_end(j);
    }
    lp_json_event_end(j);
}

/* A runtime entry point: a slice (an instant when untimed) with its arguments, the file it
 * worked on and its call site; then the arrow to a created thread, the anonymous-mapping track. */
static void call(struct chrome *c, const struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    const struct lp_reader *r = a->r;
    struct lp_json *j = &c->j;
    const struct lp_call_view *v = s->view;
    uint32_t nlen;
    const char *cat, *name = lp_event_name(r, e, &nlen, &cat);
    lp_json_event(j, e->timed ? "X" : "i", c->pid, tid_of(c, e), cat, name, nlen, (int64_t)e->start_ns);
    if (e->timed)
        lp_json_dur(j, e->dur_ns);
    else
        lp_json_scope(j, 't');
    lp_json_args(j);
    lp_call_args_json(j, r, s->call, e->dur_ns);
    cpu_arg(j, a, e);
    if (v->file) {
        lp_json_key(j, "file");
        lp_json_str(j, v->file, v->file_len);
    }
    struct lp_frames sv, *st = &sv;
    struct lp_syms *syms;
    if (e->stack && !lp_json_memo(j, e->stack) && lp_stack_view(r, e->stack, &sv) && (syms = lp_syms_of(r))) {
        /* the Python line that made the call (frames "f (file:line)", innermost first) */
        char py[4096];
        size_t pn = 0;
        uint32_t native = 0;
        for (uint32_t i = 0; i < st->n; i++) {
            if (!(st->f[i] & LP_PYFRAME_BIT)) {
                native++;
                continue;
            }
            if (st->f[i] == LP_FRAME_ELIDED) continue;
            int k = snprintf(py + pn, sizeof py - pn, "%s%s", pn ? " < " : "", lp_syms_function(syms, st->f[i], 1));
            if (k < 0 || (size_t)k >= sizeof py - pn) break;
            pn += (size_t)k;
        }
        if (pn) {
            lp_json_key(j, "py");
            lp_json_str(j, py, pn);
        }
        if (native) { /* the call site, Python frames in their places (LIBPROF_STACKS) */
            lp_json_key(j, "stack");
            lp_json_array(j);
            for (uint32_t i = 0; i < st->n && i < 32; i++) {
                const char *fn = lp_syms_function(syms, st->f[i], 1);
                lp_json_str(j, fn, strlen(fn));
            }
            lp_json_array_end(j);
        }
        lp_json_memo_end(j); /* (the two made of the stack alone: the same for the same stack) */
    }
    lp_json_args_end(j);
    lp_json_event_end(j);
    int diverted = 0; /* a followed trace: a flow goes with the short slice its start may be in */
    if (v->flow && c->follow) {
        struct seg *g = seg_at(c, v->s_ts > c->min_ns ? v->s_ts - c->min_ns : 0, e->ns);
        if (g) {
            lp_json_divert(j, g->out);
            diverted = 1;
        }
    }
    if (v->flow && (c->follow ? diverted : !c->cutoff || (v->s_ts >= c->cutoff && v->f_ts >= c->cutoff))) {
        const char *fc = v->flow_cat ? v->flow_cat : "thread", *fn = v->flow_name ? v->flow_name : "thread start";
        lp_json_event(j, "s", c->pid, v->s_tid, fc, fn, strlen(fn), (int64_t)v->s_ts);
        lp_json_id(j, v->flow_id);
        lp_json_event_end(j);
        lp_json_event(j, "f", c->pid, v->f_tid, fc, fn, strlen(fn), (int64_t)v->f_ts);
        lp_json_flow_end(j, v->flow_id);
        lp_json_event_end(j);
    }
    if (diverted) lp_json_back(j);
    if (v->mmap_point) {
        if (c->mmap_points < MMAP_POINTS_MAX) {
            c->mmap_points++;
            lp_json_counter(j, c->pid, "mmap anon", (int64_t)e->ns, "bytes", v->mmap_live);
        } else {
            c->mmap_capped = 1;
        }
    }
}

static void event(struct lp_sink *k, const struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    struct chrome *c = k->self;
    int fam = lp_kind_family[e->kind];
    if (fam == LP_FAM_CONTROL && lp_kind_shape[e->kind] == LP_SHAPE_CONTROL) {
        control(c, e);
        return;
    }
    if (!s->counting) return; /* before the last reset: nothing to show */

    if ((c->cutoff || c->follow) && (s->call || e->kind == LP_EV_PYCALL || lp_kind_shape[e->kind] == LP_SHAPE_RANGE ||
                                     (s->size && e->phase == 1))) {
        if (c->follow ? follow_short(c, e) == 1 : folded(c, e)) return;
    }
    if (s->call) {
        if (!s->view->hidden) call(c, a, e, s);
    } else if (fam == LP_FAM_ANNOT) {
        annot(c, a, e);
    } else if (e->kind == LP_EV_PYCALL) {
        pycall(c, a, e);
    } else if (s->size >= a->opts->alloc_min && e->phase == 1) {
        /* big allocations, and frees of big blocks, as instants on the thread's track */
        uint64_t ptr = lp_kind_shape[e->kind] == LP_SHAPE_FREE ? e->w[0] : e->w[1];
        if (ptr) {
            instant(c, e, s->size, ptr);
            c->instants++;
        }
    }
    lp_json_back(&c->j); /* (a followed trace's short slice went to its segment) */
}

/* The heap track, downsampled: per time bucket its minimum, maximum and last value, so the
 * envelope is right and the exact peak is always one of the points. A bucket's three points go
 * out in time order (a stable sort: of points at the same time, the first of min, max, last). */
static uint64_t heap_counter(struct chrome *c, const struct lp_analysis *a) {
    uint64_t points = 1;
    struct lp_json_track heap;
    lp_json_track(&heap, c->pid, "heap", "bytes");
    lp_json_sample(&c->j, &heap, 0, 0);
    for (unsigned b = 0; b < LP_COUNTER_BUCKETS; b++) {
        uint64_t used = a->cb_used[b / 64] >> (b % 64);
        if (!used) { /* the rest of this word's buckets are unused */
            b |= 63;
            continue;
        }
        b += (unsigned)__builtin_ctzll(used);
        const struct lp_cbucket *k = &a->cb[b];
        struct lp_point p[3] = {k->min, k->max, k->last}, x;
        for (int i = 1; i < 3; i++) /* insertion sort, stable */
            for (int m = i; m > 0 && p[m - 1].ns > p[m].ns; m--) {
                x = p[m];
                p[m] = p[m - 1];
                p[m - 1] = x;
            }
        for (int i = 0; i < 3; i++) {
            if (i > 0 && p[i].ns == p[i - 1].ns) continue;
            lp_json_sample(&c->j, &heap, p[i].ns, p[i].v);
            points++;
        }
    }
    return points;
}

/* metadata.libprof's first part: the process, its run, how it ended. */
static void meta_run(struct lp_json *j, const struct lp_analysis *a) {
    const struct lp_reader *r = a->r;
    lp_json_ks(j, "version", LIBPROF_VERSION, strlen(LIBPROF_VERSION));
    lp_json_kus(j, "format_version", LP_U(r->hdr.version), "pid", LP_U(r->hdr.pid), "ppid", LP_U(r->hdr.ppid), NULL);
    lp_json_ks(j, "hostname", r->hostname ? r->hostname : "", r->hostname ? r->hostname_len : 0);
    lp_json_ks(j, "executable", r->exe ? r->exe : "", r->exe ? r->exe_len : 0);
    const char *cmd;
    uint32_t n;
    char *tmp = command(r, &cmd, &n);
    lp_json_ks(j, "command", cmd, n);
    lp_os_free(tmp);
    if (r->job) { /* the job this process was a rank of: launcher, rank, world size, local rank, host */
        char buf[128], *f[4] = {"", "", "", ""};
        size_t len = r->job_len < sizeof buf - 1 ? r->job_len : sizeof buf - 1;
        memcpy(buf, r->job, len);
        buf[len] = '\0';
        char *p = buf;
        for (int k = 0; k < 4 && p <= buf + len; k++) {
            f[k] = p;
            p += strlen(p) + 1;
        }
        const char *end = buf + len + 1;
        lp_json_kobject(j, "job");
        lp_json_ks(j, "launcher", f[0], strlen(f[0]));
        lp_json_ki(j, "rank", atol(f[1]));
        if (f[2][0] && f[2] < end) lp_json_ki(j, "world_size", atol(f[2]));
        if (f[3][0] && f[3] < end) lp_json_ki(j, "local_rank", atol(f[3]));
        lp_json_ks(j, "host", r->hostname ? r->hostname : "", r->hostname ? r->hostname_len : 0);
        /* the main thread's first barrier and MPI_Init ends, ns since the start: a merge of ranks
         * of several hosts aligns their clocks on them (tools/skew.c) */
        lp_json_kobject(j, "sync_ns");
        lp_json_kus(j, "MPI_Barrier", LP_U(a->mpi_sync_ns[0]), "MPI_Init", LP_U(a->mpi_sync_ns[1]), NULL);
        lp_json_object_end(j);
        lp_json_object_end(j);
    }
    /* what libprof noted while it worked, kept out of the program's stderr (preload/core/log.c) */
    lp_json_karray(j, "notes");
    for (uint32_t i = 0; i < r->nnotes; i++) lp_json_str(j, r->notes[i].s, r->notes[i].len);
    lp_json_array_end(j);
    lp_json_kus(j, "start_time_unix_ns", LP_U(r->hdr.origin_real_ns), "duration_ns", LP_U(a->span_ns), NULL);
    lp_json_ks(j, "clock", r->hdr.clock == LP_CLOCK_TSC ? "tsc" : "monotonic", r->hdr.clock == LP_CLOCK_TSC ? 3 : 9);
    lp_json_kb(j, "complete", r->end && !r->truncated && !r->damaged && !r->end->events_dropped);
    /* damage the reader skipped: bytes between whole chunks, a header read from its copy */
    lp_json_ku(j, "damaged_bytes", r->damaged_bytes);
    lp_json_kb(j, "header_recovered", r->header_recovered);
    lp_json_kus(j, "peak_bytes", LP_U(a->peak_bytes), "peak_time_ns", LP_U(a->peak_ns), "leaked_bytes",
                LP_U(a->live_bytes), "leaked_blocks", LP_U(a->live_blocks), "untracked_frees", LP_U(a->untracked_frees),
                "reused_without_free", LP_U(a->reused_live), NULL);
    lp_json_kobject(j, "temporary");
    lp_json_kus(j, "calls", LP_U(a->temporary), "bytes", LP_U(a->temporary_bytes), "threshold",
                LP_U(a->opts->temporary_threshold), NULL);
    lp_json_object_end(j);
    lp_json_key(j, "exit_status");
    if (r->end && r->end->exit_status >= 0)
        lp_json_i64(j, r->end->exit_status);
    else
        lp_json_null(j);
    if (r->end && r->end->max_rss_kib) lp_json_ku(j, "max_rss_bytes", (uint64_t)r->end->max_rss_kib * 1024);
}

/* libprof's own memory at the end, by part (format.h: struct lp_own_memory). */
static void meta_own(struct lp_json *j, const struct lp_reader *r) {
    uint64_t res = 0, rsv = 0;
    lp_json_kobject(j, "memory");
    lp_json_kobject(j, "parts");
    for (unsigned p = 0; p < LP_OWN_PARTS; p++) {
        res += r->own->resident[p], rsv += r->own->reserved[p];
        lp_json_kobject(j, lp_own_part_names[p]);
        lp_json_kus(j, "resident_bytes", LP_U(r->own->resident[p]), "reserved_bytes", LP_U(r->own->reserved[p]), NULL);
        lp_json_object_end(j);
    }
    lp_json_object_end(j);
    lp_json_kus(j, "resident_bytes", res, "reserved_bytes", rsv, NULL);
    lp_json_kb(j, "upper_bound", r->own->flags & LP_OWN_UPPER_BOUND);
    lp_json_object_end(j);
}

/* The allocation functions' and annotation ranges' statistics, the block sizes. */
static void meta_functions(struct lp_json *j, const struct lp_analysis *a) {
    lp_json_kobject(j, "functions");
    for (unsigned k = 1; k < LP_KIND_COUNT; k++) {
        const struct fnstat *f = &a->fn[k];
        if (!f->count || k == LP_EV_CALL) continue;
        lp_json_kobject(j, lp_kind_names[k]);
        lp_json_kus(j, "count", LP_U(f->count), "bytes", LP_U(f->bytes), "failed", LP_U(f->failed), "timed",
                    LP_U(f->timed), "total_ns", LP_U(f->total_ns), NULL);
        lp_json_object_end(j);
    }
    lp_json_object_end(j);
    lp_json_kobject(j, "ranges");
    for (size_t id = 0; id < a->nranges; id++) {
        const struct fnstat *f = &a->ranges[id];
        if (!f->count) continue;
        uint32_t len;
        const char *name = lp_reader_name(a->r, id, &len);
        lp_json_keyn(j, name, len);
        lp_json_object(j);
        lp_json_kus(j, "count", LP_U(f->count), "total_ns", LP_U(f->total_ns), "p50_ns", LP_U(lp_percentile(f, 0.5)),
                    "p99_ns", LP_U(lp_percentile(f, 0.99)), NULL);
        lp_json_object_end(j);
    }
    lp_json_object_end(j);
    lp_json_karray(j, "size_histogram");
    for (unsigned b = 0; b < LP_SIZE_BUCKETS; b++) lp_json_u64(j, a->size_hist[b]);
    lp_json_array_end(j);
}

static void metadata(struct chrome *c, const struct lp_analysis *a, uint64_t counter_points) {
    struct lp_json *j = &c->j;
    const struct lp_reader *r = a->r;
    lp_json_object(j);
    meta_run(j, a);
    if (r->own) meta_own(j, r);
    lp_json_key(j, "signal");
    if (r->end && r->end->signal)
        lp_json_u64(j, r->end->signal);
    else if (a->opts->killed_by)
        lp_json_i64(j, a->opts->killed_by);
    else
        lp_json_null(j);
    lp_json_kus(j, "pauses", LP_U(a->pauses), "reset_at_ns", LP_U(a->reset_ns), "events_written",
                LP_U(r->end ? r->end->events_written : r->events), "events_decoded", LP_U(a->events),
                "events_fast_path", LP_U(a->events_fast), "events_dropped", LP_U(r->end ? r->end->events_dropped : 0),
                "chunks", LP_U(r->nchunks), "threads", LP_U(r->nthreads), "alloc_instant_min_bytes",
                LP_U(a->opts->alloc_min), "alloc_instants", LP_U(c->instants), "heap_counter_points",
                LP_U(counter_points), NULL);
    meta_functions(j, a);
    lp_calls_metadata(a->calls, j, c->mmap_capped);
    if (a->sites) lp_sites_metadata(a->sites, j);
    for (unsigned v = 0; v < lp_nviews; v++) /* the families' views (views.c) */
        if (lp_views[v]->metadata) lp_views[v]->metadata(a, j);
    lp_syms_metadata(r->syms, j); /* where the frames' names came from */
    lp_json_kobject(j, "timeline");
    lp_json_kus(j, "full_from_ns", LP_U(c->cutoff), "folded_slices", LP_U(c->folded), "folded_instants",
                LP_U(c->folded_instants), "min_ns", LP_U(c->min_ns), NULL);
    lp_json_object_end(j);
    lp_json_object_end(j);
}

/* "heap by site": the live bytes of the top call stacks over the run, one counter track each
 * under the process (Perfetto), sampled at 400 instants. */
static void site_counters(struct chrome *c, const struct lp_analysis *a) {
    struct lp_site_series ss;
    if (lp_site_series_of(a->r, 8, LP_SITE_SERIES_BUCKETS, &ss, a->sites, LP_RANK_AT_PEAK) != 0 || ss.nseries < 2) {
        lp_site_series_free(&ss);
        return;
    }
    struct lp_json *j = &c->j;
    for (unsigned b = 0; b <= ss.buckets; b++) {
        uint64_t ns = (uint64_t)((unsigned __int128)ss.span_ns * b / ss.buckets);
        lp_json_event(j, "C", c->pid, c->pid, "memory", "heap by site", 12, (int64_t)ns);
        lp_json_args(j);
        for (unsigned i = 0; i < ss.nseries; i++) {
            lp_json_key(j, ss.label[i]);
            lp_json_u64(j, b ? ss.v[(size_t)(b - 1) * ss.nseries + i] : 0);
        }
        lp_json_args_end(j);
        lp_json_event_end(j);
    }
    lp_site_series_free(&ss);
}

/* Each thread's folded stretch: calls and the time they took, per second (where any were). */
static void fold_counters(struct chrome *c) {
    for (size_t i = 0; i < c->nfolds; i++) {
        const struct fold *f = &c->folds[i];
        char name[64];
        snprintf(name, sizeof name, "folded calls (thread %u)", f->tid);
        struct lp_json_track tr;
        lp_json_track(&tr, c->pid, name, "calls");
        uint32_t nb = f->nb; /* a followed trace counted the window's slices too: they are written */
        if (c->follow && nb > c->cutoff / FOLD_BUCKET_NS) nb = (uint32_t)(c->cutoff / FOLD_BUCKET_NS);
        for (uint32_t b = 0; b < nb; b++)
            if (f->calls[b] || (b && f->calls[b - 1]))
                lp_json_sample(&c->j, &tr, (uint64_t)b * FOLD_BUCKET_NS, f->calls[b]);
        snprintf(name, sizeof name, "folded time ns (thread %u)", f->tid);
        lp_json_track(&tr, c->pid, name, "ns");
        for (uint32_t b = 0; b < nb; b++)
            if (f->ns[b] || (b && f->ns[b - 1])) lp_json_sample(&c->j, &tr, (uint64_t)b * FOLD_BUCKET_NS, f->ns[b]);
    }
}

static void finish(struct lp_sink *k, const struct lp_analysis *a) {
    struct chrome *c = k->self;
    if (c->follow) follow_finish(c, a->r);
    uint64_t points = heap_counter(c, a);
    fold_counters(c);
    for (unsigned v = 0; v < lp_nviews; v++) /* the families' views' events of their own (views.c) */
        if (lp_views[v]->chrome) lp_views[v]->chrome(a, &c->j, c->pid);
    if (a->sites && a->opts->site_tracks && !a->r->follow) site_counters(c, a); /* a second pass */
    lp_json_metadata(&c->j, "libprof");
    metadata(c, a, points);
    lp_json_end(&c->j);
}

static void release_chrome(struct lp_sink *k) {
    struct chrome *c = k->self;
    while (c && c->nsegs) {
        c->nsegs--;
        lp_os_close(c->segs[c->nsegs].fd);
        lp_os_free(c->segs[c->nsegs].out);
    }
    for (size_t i = 0; c && i < c->nfolds; i++) {
        lp_os_free(c->folds[i].calls);
        lp_os_free(c->folds[i].ns);
    }
    if (c) lp_os_free(c->folds);
    lp_os_free(c);
    k->self = NULL;
}

int lp_sink_chrome(struct lp_sink *k, const struct lp_reader *r, const char *path, uint64_t alloc_min,
                   uint64_t timeline_ns, uint64_t timeline_min_ns) {
    struct chrome *c = lp_os_calloc(1, sizeof *c);
    if (!c) return -1;
    k->alloc_min = alloc_min;
    uint64_t span = lp_ticks_to_ns(r, r->last_ticks);
    if (r->follow && timeline_ns) { /* the length of the run is not known yet */
        c->follow = 1;
        c->min_ns = timeline_min_ns;
        c->window_ns = timeline_ns;
        c->seg_ns = (timeline_ns / (SEG_COUNT - 1) + FOLD_BUCKET_NS - 1) / FOLD_BUCKET_NS * FOLD_BUCKET_NS;
        const char *slash = path ? strrchr(path, '/') : NULL;
        snprintf(c->dir, sizeof c->dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    } else if (timeline_ns && span > timeline_ns && span != UINT64_MAX) {
        c->cutoff = span - timeline_ns;
        c->min_ns = timeline_min_ns;
    }
    c->pid = r->hdr.pid;
    k->self = c;
    k->event = event;
    k->finish = finish;
    k->release = release_chrome;
    c->j.to = k->events;                      /* (the Perfetto writer takes the events structured) */
    if (k->tape) lp_json_tape(&c->j, k->out); /* (a merge's input: the calls themselves) */
    lp_json_begin(&c->j, k->out);
    head(c, r);
    if (!c->follow) thread_names(c, r); /* a followed trace's threads are known at its end */
    return 0;
}
