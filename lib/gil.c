/* gil.c: see gil.h. The view over a raw trace's calls — per thread, per Python line, per call
 * stack — and its parts of the outputs: the summary's table of Python threads, the metadata
 * (metadata.libprof.python: gil per thread id, blocked_lines) and the wall-clock flame graph. */
#define _GNU_SOURCE
#include "gil.h"

#include <errno.h>
#include <string.h>

#include "analysis.h"
#include "calls.h"
#include "describe.h"
#include "fmt.h"
#include "json.h"
#include "map.h"
#include "os.h"
#include "out.h"
#include "reader.h"
#include "samples.h"
#include "symbols.h"
#include "vec.h"
#include "views.h"

const char *const lp_block_frames[LP_BLOCK_KINDS] = {"", "[GIL wait]", "[lock]", "[sleep]", "[io]"};

enum lp_block lp_block_kind(const char *cat, const char *name) {
    /* calls that do not block: they take the kernel's time, not a wait's */
    static const char *const quick[] = {"mmap", "munmap", "mremap", "lseek", "close",  "fd",
                                        "dup",  "dup2",   "fcntl",  "pipe",  "socket", "socketpair"};
    if (!strcmp(cat, "python")) return !strcmp(name, "GIL wait") ? LP_BLOCK_GIL : LP_BLOCK_NONE;
    if (!strcmp(cat, "sync")) return LP_BLOCK_LOCK;
    if (!strcmp(cat, "wait")) return strstr(name, "sleep") ? LP_BLOCK_SLEEP : LP_BLOCK_IO;
    if (strcmp(cat, "io") && strcmp(cat, "net")) return LP_BLOCK_NONE;
    for (size_t i = 0; i < sizeof quick / sizeof *quick; i++)
        if (!strcmp(name, quick[i])) return LP_BLOCK_NONE;
    return LP_BLOCK_IO;
}

#define LP_GIL_ROUND_NS 1000000 /* the longest gap between two rounds of one wait for the GIL */

int lp_gil_thread_add(struct lp_gil_thread *t, struct lp_gil_holds *hs, uint32_t who, uint32_t group,
                      enum lp_block kind, int64_t ts, int64_t dur, int timed_out) {
    if (kind == LP_BLOCK_NONE) return 0;
    int64_t end = lp_gil_sat(ts, dur);
    if (t->hold) { /* it let the GIL go, or it never had it */
        struct lp_gil_hold *h = &hs->h[t->hold - 1];
        /* a timed-out round followed at once by the next: it did not take the GIL (one that did
         * runs until its holder is asked to drop it — a loaded machine's preemption may leave a
         * gap too, but not of a millisecond between two rounds as a rule) */
        if (kind == LP_BLOCK_GIL && h->timed_out && ts - h->from < LP_GIL_ROUND_NS) h->none = 1;
        if (ts >= h->from && ts < h->to) h->to = ts;
        h->open = 0;
        t->hold = 0;
    }
    if (kind == LP_BLOCK_GIL) {
        t->wait_ns = lp_gil_sat(t->wait_ns, dur);
        t->waits++;
        if (!hs) return 0;
        if (LP_RESERVE(hs->h, hs->cap, hs->n + 1) != 0) return -1;
        hs->h[hs->n++] = (struct lp_gil_hold){end, INT64_MAX, who, group, 1, timed_out != 0, 0};
        t->hold = hs->n;
        return 0;
    }
    int64_t from = ts > t->off_end ? ts : t->off_end;
    if (end > from) t->off_ns = lp_gil_sat(t->off_ns, lp_gil_since(end, from));
    if (end > t->off_end) t->off_end = end;
    return 0;
}

int lp_gil_threads_add(struct lp_gil_threads *g, uint32_t thread, enum lp_block kind, int64_t ts, int64_t dur,
                       int timed_out) {
    if (kind == LP_BLOCK_NONE) return 0;
    if (thread >= g->nth) {
        size_t n = g->nth;
        if (LP_RESERVE(g->th, g->nth, (size_t)thread + 1) != 0) return -1;
        for (; n < g->nth; n++) lp_gil_thread_init(&g->th[n]);
    }
    return lp_gil_thread_add(&g->th[thread], &g->holds, thread, 0, kind, ts, dur, timed_out);
}

void lp_gil_threads_end(struct lp_gil_threads *g) {
    lp_gil_holds_end(&g->holds);
    for (size_t i = 0; i < g->nth; i++) g->th[i].held_ns = 0; /* (a followed run's pass: counted anew) */
    for (size_t i = 0; i < g->holds.n; i++) {
        const struct lp_gil_hold *h = &g->holds.h[i];
        g->th[h->who].held_ns = lp_gil_sat(g->th[h->who].held_ns, lp_gil_hold_ns(h));
        if (h->open) g->th[h->who].hold = i + 1;
    }
}

void lp_gil_threads_free(struct lp_gil_threads *g) {
    lp_os_free(g->th);
    lp_gil_holds_free(&g->holds);
    memset(g, 0, sizeof *g);
}

int lp_gil_timed_out(unsigned nargs, const uint64_t *a) { return nargs > 1 && (int64_t)a[1] == ETIMEDOUT; }

int lp_gil_hold_name(const struct lp_reader *r, uint32_t who, char *buf, size_t len) {
    char label[64];
    lp_thread_label(r, who, label, sizeof label);
    int n = !strncmp(label, "thread ", 7)
                ? snprintf(buf, len, "%s", label)
                : snprintf(buf, len, "%s %u", label, who < r->nthreads ? r->threads[who].tid : 0);
    return n < 0 ? 0 : (size_t)n >= len ? (int)len - 1 : n;
}

static int by_group_from(const void *x, const void *y) {
    const struct lp_gil_hold *a = x, *b = y;
    if (a->group != b->group) return a->group < b->group ? -1 : 1;
    return a->from < b->from ? -1 : a->from > b->from;
}

void lp_gil_holds_end(struct lp_gil_holds *hs) {
    lp_sort(hs->h, hs->n, sizeof *hs->h, by_group_from);
    int64_t next = INT64_MAX; /* where the next hold of this process starts */
    for (size_t i = hs->n; i-- > 0;) {
        struct lp_gil_hold *h = &hs->h[i];
        if (i + 1 < hs->n && hs->h[i + 1].group != h->group) next = INT64_MAX;
        if (h->none) continue;
        if (next < h->to) h->to = next;
        next = h->from;
    }
}

void lp_gil_holds_free(struct lp_gil_holds *hs) {
    lp_os_free(hs->h);
    memset(hs, 0, sizeof *hs);
}

struct line { /* a Python line's blocked time */
    uint64_t frame;
    int64_t gil_ns, off_ns;
};
struct blocked { /* a thread's blocked time under one call stack, of one kind */
    uint32_t thread, stack;
    uint8_t kind;
    int64_t ns;
};

struct lp_gil {
    const struct lp_reader *r;
    uint8_t kind[LP_CALL_COUNT]; /* each entry point's enum lp_block */
    struct lp_gil_threads t;     /* the threads and the GIL's holds, by the reader's thread index */
    uint64_t waits;
    struct lp_map line_of, blocked_of; /* -> 1 + row */
    struct line *line;
    size_t nline, capline;
    struct blocked *blocked;
    size_t nblocked, capblocked;
    int oom;
};

#define GIL(a) ((struct lp_gil *)(a)->view[LP_VIEW_GIL])

static int view_create(struct lp_analysis *a) {
    struct lp_gil *g = lp_os_calloc(1, sizeof *g);
    if (!g) return -1;
    g->r = a->r;
    for (unsigned c = 1; c < LP_CALL_COUNT; c++)
        g->kind[c] = (uint8_t)lp_block_kind(lp_family_names[lp_call_family[c]], lp_call_names[c]);
    a->view[LP_VIEW_GIL] = g;
    return 0;
}

static void view_destroy(struct lp_analysis *a) {
    struct lp_gil *g = GIL(a);
    if (!g) return;
    lp_gil_threads_free(&g->t);
    lp_map_free(&g->line_of);
    lp_map_free(&g->blocked_of);
    lp_os_free(g->line);
    lp_os_free(g->blocked);
    lp_os_free(g);
}

/* The innermost Python frame of stack `id` (the line that made the call), or 0. */
static uint64_t python_line(const struct lp_reader *r, uint32_t id) {
    struct lp_frames v;
    if (!id || !lp_stack_view(r, id, &v)) return 0;
    for (uint32_t i = 0; i < v.n; i++)
        if ((v.f[i] & LP_PYFRAME_BIT) && v.f[i] != LP_FRAME_ELIDED) return v.f[i];
    return 0;
}

static int charge_line(struct lp_gil *g, uint64_t frame, enum lp_block kind, int64_t ns) {
    uint64_t v;
    if (!lp_map_get(&g->line_of, frame, &v)) {
        if (LP_RESERVE(g->line, g->capline, g->nline + 1) != 0 ||
            lp_map_put(&g->line_of, frame, g->nline + 1, NULL) < 0)
            return -1;
        g->line[g->nline] = (struct line){frame, 0, 0};
        v = ++g->nline;
    }
    if (kind == LP_BLOCK_GIL)
        g->line[v - 1].gil_ns = lp_gil_sat(g->line[v - 1].gil_ns, ns);
    else
        g->line[v - 1].off_ns = lp_gil_sat(g->line[v - 1].off_ns, ns);
    return 0;
}

static int charge_stack(struct lp_gil *g, uint32_t thread, uint32_t stack, enum lp_block kind, int64_t ns) {
    uint64_t key = ((uint64_t)stack << 32 | (uint64_t)thread << 3 | kind) + 1, v;
    if (!lp_map_get(&g->blocked_of, key, &v)) {
        if (LP_RESERVE(g->blocked, g->capblocked, g->nblocked + 1) != 0 ||
            lp_map_put(&g->blocked_of, key, g->nblocked + 1, NULL) < 0)
            return -1;
        g->blocked[g->nblocked] = (struct blocked){thread, stack, (uint8_t)kind, 0};
        v = ++g->nblocked;
    }
    g->blocked[v - 1].ns = lp_gil_sat(g->blocked[v - 1].ns, ns);
    return 0;
}

static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    struct lp_gil *g = GIL(a);
    unsigned call = s->call->call;
    enum lp_block kind = call < LP_CALL_COUNT ? (enum lp_block)g->kind[call] : LP_BLOCK_NONE;
    if (kind == LP_BLOCK_NONE || !e->timed || !s->counting) return 0;
    /* a poll or select of no descriptor is a sleep (time.sleep before Python 3.11: select) */
    if ((call == LP_CALL_POLL || call == LP_CALL_PPOLL || call == LP_CALL_SELECT || call == LP_CALL_PSELECT) &&
        s->call->nargs && s->call->a[0] == 0)
        kind = LP_BLOCK_SLEEP;
    int64_t off0 = e->thread < g->t.nth ? g->t.th[e->thread].off_ns : 0;
    int timed_out = kind == LP_BLOCK_GIL && lp_gil_timed_out(s->call->nargs, s->call->a);
    if (lp_gil_threads_add(&g->t, e->thread, kind, (int64_t)e->start_ns, (int64_t)e->dur_ns, timed_out) != 0) return -1;
    const struct lp_gil_thread *t = &g->t.th[e->thread];
    /* what the thread was blocked for that it was not already (a call inside another counts once) */
    int64_t ns = kind == LP_BLOCK_GIL ? (int64_t)e->dur_ns : t->off_ns - off0;
    if (kind == LP_BLOCK_GIL) g->waits++;
    if (ns <= 0) return 0;
    uint64_t line = python_line(a->r, e->stack);
    if ((line && charge_line(g, line, kind, ns) != 0) || charge_stack(g, e->thread, e->stack, kind, ns) != 0) return -1;
    return 0;
}

/* ---- its parts of the outputs ---- */

static int64_t cpu_of(const struct lp_analysis *a, uint32_t thread) {
    const struct lp_samples *s = lp_samples_of(a);
    return s ? (int64_t)lp_samples_cpu_ns(s, thread, 0, UINT64_MAX) : -1;
}

static int by_blocked(const void *x, const void *y) {
    const struct line *a = x, *b = y;
    int64_t u = lp_gil_sat(a->gil_ns, a->off_ns), v = lp_gil_sat(b->gil_ns, b->off_ns);
    return u > v ? -1 : u < v;
}

/* The pass is over: the lines by their blocked time, once for the summary and the metadata. */
static int view_finish(struct lp_analysis *a) {
    struct lp_gil *g = GIL(a);
    if (!g) return 0;
    lp_gil_threads_end(&g->t);
    lp_sort(g->line, g->nline, sizeof *g->line, by_blocked);
    for (size_t i = 0; i < g->nline; i++) /* (the rows moved: a followed run's pass goes on after a look) */
        if (lp_map_put(&g->line_of, g->line[i].frame, i + 1, NULL) < 0) return -1;
    return 0;
}

static void view_summary(const struct lp_analysis *a, struct lp_out *o, unsigned top) {
    struct lp_gil *g = GIL(a);
    if (!g || !g->waits) return;
    char w[32], h[32], f[32], c[32];
    lp_out_fmt(o, "  Python threads: GIL wait, GIL held (from a wait that took it to the thread's next wait or "
                  "blocking call,\n  or another thread's taking it), off-CPU (blocked in traced calls: locks, "
                  "sleeps, I/O), CPU (sampled)\n");
    lp_out_fmt(o, "  %10s %11s %7s %11s %11s %11s\n", "tid", "GIL wait", "waits", "GIL held", "off-CPU", "CPU");
    for (size_t i = 0; i < g->t.nth && i < a->r->nthreads; i++) {
        const struct lp_gil_thread *t = &g->t.th[i];
        if (!t->waits && !t->off_ns) continue;
        int64_t cpu = cpu_of(a, (uint32_t)i);
        lp_fmt_ns(w, sizeof w, t->wait_ns);
        lp_fmt_ns(h, sizeof h, t->held_ns);
        lp_fmt_ns(f, sizeof f, t->off_ns);
        if (cpu >= 0)
            lp_fmt_ns(c, sizeof c, cpu);
        else
            snprintf(c, sizeof c, "-");
        lp_out_fmt(o, "  %10u %11s %7llu %11s %11s %11s\n", a->r->threads[i].tid, w, (unsigned long long)t->waits, h, f,
                   c);
    }
    struct lp_syms *syms = lp_syms_of(a->r);
    if (!g->nline || !syms) return;
    lp_out_fmt(o, "  where they wait, by Python line:\n  %11s %11s  %s\n", "GIL wait", "off-CPU", "line");
    for (size_t i = 0; i < g->nline && i < lp_top(top, 10); i++) {
        lp_fmt_ns(w, sizeof w, g->line[i].gil_ns);
        lp_fmt_ns(f, sizeof f, g->line[i].off_ns);
        lp_out_fmt(o, "  %11s %11s  %s\n", w, f, lp_syms_function(syms, g->line[i].frame, 1));
    }
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    struct lp_gil *g = GIL(a);
    if (!g || !g->waits) return;
    lp_json_kobject(j, "python");
    lp_json_kobject(j, "gil");
    char tid[16];
    for (size_t i = 0; i < g->t.nth && i < a->r->nthreads; i++) {
        const struct lp_gil_thread *t = &g->t.th[i];
        if (!t->waits && !t->off_ns) continue;
        snprintf(tid, sizeof tid, "%u", a->r->threads[i].tid);
        lp_json_kobject(j, tid);
        lp_json_kus(j, "wait_ns", LP_U(t->wait_ns), "held_ns", LP_U(t->held_ns), "off_cpu_ns", LP_U(t->off_ns), "waits",
                    LP_U(t->waits), NULL);
        int64_t cpu = cpu_of(a, (uint32_t)i);
        if (cpu >= 0) lp_json_kus(j, "cpu_ns", LP_U(cpu), NULL);
        lp_json_object_end(j);
    }
    lp_json_object_end(j);
    struct lp_syms *syms = lp_syms_of(a->r);
    lp_json_karray(j, "blocked_lines");
    for (size_t i = 0; syms && i < g->nline; i++) {
        const char *name = lp_syms_function(syms, g->line[i].frame, 1);
        lp_json_object(j);
        lp_json_ks(j, "line", name, strlen(name));
        lp_json_kus(j, "gil_wait_ns", LP_U(g->line[i].gil_ns), "off_cpu_ns", LP_U(g->line[i].off_ns), NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_object_end(j);
}

/* The GIL's holder: a track of its own, a slice per hold named by its thread. */
static void view_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    struct lp_gil *g = GIL(a);
    if (!g || !g->t.holds.n) return;
    lp_json_meta_name(j, pid, LP_GIL_TRACK, "thread_name", "GIL holder", 10);
    lp_json_meta_sort(j, pid, LP_GIL_TRACK, 0); /* above the threads */
    char name[96];
    for (size_t i = 0; i < g->t.holds.n; i++) {
        const struct lp_gil_hold *h = &g->t.holds.h[i];
        int64_t ns = lp_gil_hold_ns(h);
        if (!ns || h->who >= a->r->nthreads) continue;
        int n = lp_gil_hold_name(a->r, h->who, name, sizeof name);
        lp_json_event(j, "X", pid, LP_GIL_TRACK, "python", name, (size_t)n, h->from);
        lp_json_dur(j, (uint64_t)ns);
        lp_json_args(j);
        lp_json_key(j, "tid");
        lp_json_u64(j, a->r->threads[h->who].tid);
        lp_json_args_end(j);
        lp_json_event_end(j);
    }
}

size_t lp_gil_blocked_each(const struct lp_analysis *a,
                           void (*fn)(void *arg, uint32_t thread, uint32_t stack, enum lp_block kind, int64_t ns),
                           void *arg) {
    const struct lp_gil *g = GIL(a);
    size_t n = 0;
    for (size_t i = 0; g && i < g->nblocked; i++) {
        const struct blocked *b = &g->blocked[i];
        if (b->ns <= 0) continue;
        if (fn) fn(arg, b->thread, b->stack, (enum lp_block)b->kind, b->ns);
        n++;
    }
    return n;
}

void lp_gil_wall_folded(const struct lp_analysis *a, struct lp_out *o) {
    const struct lp_samples *s = lp_samples_of(a);
    struct lp_gil *g = GIL(a);
    struct lp_syms *syms = lp_syms_of(a->r);
    if (!s || !syms) return;
    lp_samples_folded(s, o, (lp_samples_period(s) + 500) / 1000);
    char name[64];
    struct lp_frames v;
    for (size_t i = 0; g && i < g->nblocked; i++) {
        const struct blocked *b = &g->blocked[i];
        uint64_t us = ((uint64_t)b->ns + 500) / 1000;
        if (!us) continue;
        lp_folded_frame(o, lp_samples_thread_name(s, b->thread, name, sizeof name));
        if (b->stack && lp_stack_view(a->r, b->stack, &v)) lp_folded_frames(o, syms, &v);
        lp_out_fmt(o, ";%s %llu\n", lp_block_frames[b->kind], (unsigned long long)us);
    }
}

// clang-format off
const struct lp_view lp_view_gil = {"gil", 1u << LP_SHAPE_CALL, view_create, view_event, NULL, view_finish, view_destroy, view_summary, NULL, view_chrome, view_metadata};
// clang-format on
