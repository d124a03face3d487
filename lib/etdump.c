/* etdump.c: see etdump.h. An ETDump is a flatbuffer (devtools/etdump/etdump_schema_flatcc.fbs,
 * file identifier "ED00", usually size-prefixed): ETDump.run_data[] of RunData, each with
 * events[] of Event, whose profile_event (name, chain_index, instruction_id, delegate ids,
 * start_time, end_time) is what is read here. Its times are the runtime's ticks (nanoseconds on
 * Linux, from an origin of its own): each run is placed by the slices libprof recorded around
 * the same work — the execute, and each instruction — not by a clock offset, so the events sit
 * where the work was even when the two clocks drift. */
#define _GNU_SOURCE
#include "etdump.h"
#include "json.h"

#include <stdio.h>
#include <string.h>

#include "flatbuf.h"
#include "fmt.h"
#include "os.h"
#include "vec.h"
#include "views.h"
#include "analysis.h"
#include "calls.h"

/* the schema's fields read */
enum { ETDUMP_RUN_DATA = 1 };
enum { RUN_EVENTS = 3 };
enum { EVENT_PROFILE = 0 };
enum {
    PE_NAME = 0,
    PE_CHAIN = 1,
    PE_INSTRUCTION = 2,
    PE_DELEGATE_INT = 3,
    PE_DELEGATE_STR = 4,
    PE_START = 6,
    PE_END = 7
};

struct slice { /* an executorch.execute (instr -1), executorch.instruction (its index), executorch.init
                * (LP_ETDUMP_INIT) or other slice (LP_ETDUMP_OTHER) */
    int64_t instr;
    uint32_t tid;
    uint64_t start, dur;
    int used;
};

struct ev { /* one profiling event of an ETDump */
    const char *name;
    uint32_t nlen;
    int32_t instr, chain, dbg;
    uint64_t start, end;   /* its ticks */
    int64_t shift;         /* added to its ticks to place it (libprof's ns) */
    uint64_t pstart, pend; /* placed */
    uint32_t tid, track;   /* the thread that ran it; the Chrome tid it is shown on */
    int placed, parent;    /* parent: index of the innermost event containing it, -1 */
    int run;               /* its group: the Method::execute event it is part of, or its load's
                            * outermost event (index in its dump), -1 */
    int root;              /* its outermost enclosing event (itself when it has none) */
    int load;              /* a load's outermost event, placed by the Method::init inside it */
};

struct row {
    const char *name;
    uint32_t nlen;
    uint64_t count, ns, placed;
};

struct lp_etdump {
    const struct lp_reader *r;
    struct slice *sl;
    size_t nsl, capsl;
    struct ev *ev; /* the placed events, all ETDumps */
    size_t nev, capev;
    struct row *row;
    size_t nrow, caprow;
    size_t dumps, bad, executes, unaligned, outside, nested_runs, loads, nested_loads;
    uint32_t tracks[64]; /* the threads given a row */
    unsigned ntracks;
};

struct lp_etdump *lp_etdump_new(const struct lp_reader *r) {
    struct lp_etdump *d = lp_os_calloc(1, sizeof *d);
    if (d) d->r = r;
    return d;
}

void lp_etdump_free(struct lp_etdump *d) {
    if (!d) return;
    lp_os_free(d->sl);
    lp_os_free(d->ev);
    lp_os_free(d->row);
    lp_os_free(d);
}

int lp_etdump_slice(struct lp_etdump *d, int64_t instruction, uint32_t tid, uint64_t start_ns, uint64_t dur_ns) {
    if (LP_RESERVE(d->sl, d->capsl, d->nsl + 1) != 0) return -1;
    d->sl[d->nsl++] = (struct slice){instruction, tid, start_ns, dur_ns, 0};
    return 0;
}

static int by_start(const void *x, const void *y) {
    const struct slice *a = x, *b = y;
    return a->start < b->start ? -1 : a->start > b->start ? 1 : a->dur > b->dur ? -1 : a->dur < b->dur;
}
static int ev_order(const void *x, const void *y) { /* by start, the enclosing one first */
    const struct ev *a = x, *b = y;
    return a->start < b->start ? -1 : a->start > b->start ? 1 : a->end > b->end ? -1 : a->end < b->end;
}

static int is(const struct ev *e, const char *name) {
    return e->nlen == strlen(name) && !memcmp(e->name, name, e->nlen);
}

/* The events of one ETDump, appended to d->ev from `first`; -1 when it is not one. */
static int parse(struct lp_etdump *d, const char *data, uint32_t len) {
    const uint8_t *p = (const uint8_t *)data;
    struct lp_fb b = {p, p + len};
    if (len >= 12 && !memcmp(p + 8, "ED00", 4)) /* size-prefixed, as ETDumpGen writes it */
        b.lo = p + 4;
    else if (!(len >= 8 && !memcmp(p + 4, "ED00", 4)))
        return -1;
    const uint8_t *root = lp_fb_deref(&b, b.lo);
    uint32_t nruns;
    const uint8_t *runs = lp_fb_vec(&b, root, ETDUMP_RUN_DATA, 4, &nruns);
    if (!root) return -1;
    for (uint32_t i = 0; i < nruns; i++) {
        uint32_t nev;
        const uint8_t *evs = lp_fb_vec(&b, lp_fb_at(&b, runs, i), RUN_EVENTS, 4, &nev);
        for (uint32_t k = 0; k < nev; k++) {
            const uint8_t *pe = lp_fb_table(&b, lp_fb_at(&b, evs, k), EVENT_PROFILE);
            if (!pe) continue; /* an allocation or debug event */
            struct ev e = {0};
            e.name = lp_fb_str(&b, pe, PE_NAME, &e.nlen);
            if (!e.name) e.name = lp_fb_str(&b, pe, PE_DELEGATE_STR, &e.nlen);
            e.chain = lp_fb_i32(&b, pe, PE_CHAIN, 0);
            e.instr = lp_fb_i32(&b, pe, PE_INSTRUCTION, -1);
            e.dbg = lp_fb_i32(&b, pe, PE_DELEGATE_INT, -1);
            e.start = lp_fb_u64(&b, pe, PE_START, 0);
            e.end = lp_fb_u64(&b, pe, PE_END, 0);
            e.parent = -1;
            if (!e.name) {
                e.name = "delegate event";
                e.nlen = 14;
            }
            if (e.end < e.start) continue;
            if (LP_RESERVE(d->ev, d->capev, d->nev + 1) != 0) return -2;
            d->ev[d->nev++] = e;
        }
    }
    return 0;
}

static void place(struct ev *e, int64_t shift, uint64_t lo, uint64_t hi) {
    int64_t s = (int64_t)e->start + shift, t = (int64_t)e->end + shift;
    if (s < (int64_t)lo) s = (int64_t)lo;
    if (t > (int64_t)hi) t = (int64_t)hi;
    if (t < s) t = s;
    e->shift = shift;
    e->pstart = (uint64_t)s;
    e->pend = (uint64_t)t;
    e->placed = 1;
}

/* Centred in [lo, hi] (a slice libprof recorded around the same work): the shift. */
static int64_t centre(const struct ev *e, uint64_t lo, uint64_t hi) {
    uint64_t len = e->end - e->start, span = hi - lo;
    return (int64_t)lo + (int64_t)(span > len ? (span - len) / 2 : 0) - (int64_t)e->start;
}

/* A load's shift: its outermost event (Program::load_method) holds the init call libprof timed
 * (the slice [lo, hi]), which holds the ETDump's Method::init — which may be a small part of it
 * (the delegates' own init after it): of the shifts that keep both so, the middle one. None (the
 * clocks disagree, or Method::init is the outermost): Method::init centred in the slice. */
static int64_t load_shift(const struct ev *root, const struct ev *init, uint64_t lo, uint64_t hi) {
    int64_t a = (int64_t)lo - (int64_t)init->start, b = (int64_t)hi - (int64_t)root->end;
    int64_t c = (int64_t)lo - (int64_t)root->start, d = (int64_t)hi - (int64_t)init->end;
    int64_t s0 = a > b ? a : b, s1 = c < d ? c : d;
    return root != init && s0 <= s1 ? s0 + (s1 - s0) / 2 : centre(init, lo, hi);
}

/* Partial overlap of [a0, a1] and [b0, b1] (nesting and disjoint are fine; shared ends too). */
static int crosses(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
    int disjoint = a1 <= b0 || b1 <= a0, a_in_b = a0 >= b0 && a1 <= b1, b_in_a = b0 >= a0 && b1 <= a1;
    return !disjoint && !a_in_b && !b_in_a;
}

/* The events of group g (v[i].run == g: a run, or a load) go on thread `tid` itself when none
 * crosses a slice of libprof's there, from `from` to the first that starts at `hi` or later
 * (slices are in start order); otherwise on the ETDump row beside the thread. 1: on the thread. */
static int nest_group(struct lp_etdump *d, struct ev *v, size_t n, int g, uint32_t tid, const struct slice *from,
                      uint64_t hi) {
    int ok = 1;
    for (size_t i = 0; ok && i < n; i++) {
        if (v[i].run != g || !v[i].placed) continue;
        for (const struct slice *s = from; ok && s < d->sl + d->nsl && s->start < hi; s++)
            if (s->tid == tid && crosses(v[i].pstart, v[i].pend, s->start, s->start + s->dur)) ok = 0;
    }
    for (size_t i = 0; i < n; i++)
        if (v[i].run == g) v[i].track = ok ? tid : LP_ETDUMP_TRACK(tid);
    return ok;
}

/* A run's events go on the thread itself, nested in libprof's execute slice, when that holds in
 * Chrome's strict sense: the execute event is widened to hold every instruction slice of the
 * run, and no event crosses a slice of libprof's in the run (an instruction, a call made inside
 * one). Otherwise they go on the ETDump row beside the thread. */
static void nest_run(struct lp_etdump *d, struct ev *v, size_t n, int run) {
    struct ev *m = &v[run];
    const struct slice *x = &d->sl[-1 - m->instr], *end = d->sl + d->nsl;
    uint64_t x0 = x->start, x1 = x->start + x->dur;
    for (const struct slice *s = x + 1; s < end && s->start < x1; s++) {
        if (s->tid != x->tid || s->instr < 0) continue; /* (other slices: checked below) */
        if (s->start < m->pstart) m->pstart = s->start;
        if (s->start + s->dur > m->pend) m->pend = s->start + s->dur;
    }
    if (m->pstart < x0) m->pstart = x0;
    if (m->pend > x1) m->pend = x1;
    d->nested_runs += nest_group(d, v, n, run, x->tid, x + 1, x1);
}

/* The Method::execute event that `e` is or is part of, NULL when none. */
static const struct ev *execute_of(const struct ev *v, const struct ev *e) {
    while (e && !is(e, "Method::execute")) e = e->parent >= 0 ? &v[e->parent] : NULL;
    return e;
}

/* The events of one ETDump (d->ev[first..]): nested by their own times, then placed. */
static void align(struct lp_etdump *d, size_t first, size_t *cursor, const struct slice **ex, size_t nex,
                  size_t *icursor, const struct slice **inits, size_t nin) {
    struct ev *v = d->ev + first;
    size_t n = d->nev - first;
    lp_sort(v, n, sizeof *v, ev_order);
    int stack[64], depth = 0;
    for (size_t i = 0; i < n; i++) {
        while (depth && v[stack[depth - 1]].end <= v[i].start) depth--;
        v[i].parent = depth ? stack[depth - 1] : -1;
        if (depth < 64) stack[depth++] = (int)i;
    }
    for (size_t i = 0; i < n; i++) v[i].root = v[i].parent >= 0 ? v[v[i].parent].root : (int)i;
    /* a load: placed by the k-th executorch.init slice (load_shift), the load's outermost event
     * given the shift (before the loop below, which places parents first) */
    for (size_t i = 0; i < n; i++) {
        struct ev *e = &v[i], *root = &v[e->root];
        if (!is(e, "Method::init") || root->load) continue;
        if (execute_of(v, e)) continue; /* (a method loaded while another runs) */
        if (*icursor >= nin) {
            d->unaligned++;
            continue;
        }
        const struct slice *x = inits[(*icursor)++];
        root->load = 1;
        root->tid = x->tid;
        root->shift = load_shift(root, e, x->start, x->start + x->dur);
    }
    for (size_t i = 0; i < n; i++) {
        struct ev *e = &v[i], *p = e->parent >= 0 ? &v[e->parent] : NULL;
        if (v[e->root].load) { /* a load's event: the outermost by the shift, the others inside it */
            e->tid = v[e->root].tid;
            if (!p)
                place(e, e->shift, 0, INT64_MAX);
            else
                place(e, p->shift, p->pstart, p->pend);
            continue;
        }
        if (is(e, "Method::execute")) {
            d->executes++;
            if (*cursor >= nex) {
                d->unaligned++;
                continue;
            }
            const struct slice *x = ex[(*cursor)++];
            e->tid = x->tid;
            place(e, centre(e, x->start, x->start + x->dur), x->start, x->start + x->dur);
            e->instr = -1 - (int32_t)(x - d->sl); /* which slice: its instructions are looked up by it */
            continue;
        }
        const struct ev *run = execute_of(v, p);
        if (!run || !run->placed || !p->placed) {
            if (!run)
                d->outside++;
            else
                d->unaligned++;
            continue;
        }
        e->tid = p->tid;
        if (p == run && e->instr >= 0) { /* a call: the instruction slice of the same index in the run */
            const struct slice *x = &d->sl[-1 - run->instr], *in = NULL;
            for (const struct slice *s = x + 1; s < d->sl + d->nsl && s->start < x->start + x->dur; s++)
                if (s->instr == e->instr && s->tid == x->tid && !s->used) {
                    in = s;
                    break;
                }
            if (in) {
                ((struct slice *)in)->used = 1;
                place(e, centre(e, in->start, in->start + in->dur), in->start, in->start + in->dur);
                continue;
            }
        }
        place(e, p->shift, p->pstart, p->pend); /* inside its parent, at its offset from it */
    }
    /* an execute's event covers its events (each centred in its own slice) */
    for (size_t i = n; i-- > 0;) {
        struct ev *e = &v[i], *p = e->parent >= 0 ? &v[e->parent] : NULL;
        if (e->placed && p && p->placed && is(p, "Method::execute")) {
            const struct slice *x = &d->sl[-1 - p->instr];
            if (e->pstart < p->pstart) p->pstart = e->pstart > x->start ? e->pstart : x->start;
            if (e->pend > p->pend) p->pend = e->pend < x->start + x->dur ? e->pend : x->start + x->dur;
        }
    }
    for (size_t i = 0; i < n; i++) { /* each event's group: its run, or its load */
        const struct ev *r = execute_of(v, &v[i]);
        v[i].run = r ? (int)(r - v) : v[v[i].root].load ? v[i].root : -1;
    }
    for (size_t i = 0; i < n; i++)
        if (v[i].placed && is(&v[i], "Method::execute")) nest_run(d, v, n, (int)i);
    for (size_t i = 0; i < n; i++)
        if (v[i].load) {
            d->loads++;
            d->nested_loads += nest_group(d, v, n, (int)i, v[i].tid, d->sl, v[i].pend);
        }
}

static int tally(struct lp_etdump *d, const struct ev *e) {
    size_t k = 0;
    while (k < d->nrow && !(d->row[k].nlen == e->nlen && !memcmp(d->row[k].name, e->name, e->nlen))) k++;
    if (k == d->nrow) {
        if (LP_RESERVE(d->row, d->caprow, d->nrow + 1) != 0) return -1;
        d->row[d->nrow++] = (struct row){e->name, e->nlen, 0, 0, 0};
    }
    d->row[k].count++;
    d->row[k].ns += e->end - e->start;
    d->row[k].placed += e->placed != 0;
    return 0;
}

int lp_etdump_finish(struct lp_etdump *d) {
    const struct lp_reader *r = d->r;
    if (!r->netdumps) return 0;
    lp_sort(d->sl, d->nsl, sizeof *d->sl, by_start);
    const struct slice **ex = lp_os_calloc(d->nsl + 1, sizeof *ex);
    if (!ex) return -1;
    const struct slice **in = lp_os_calloc(d->nsl + 1, sizeof *in);
    if (!in) {
        lp_os_free(ex);
        return -1;
    }
    size_t nex = 0, cursor = 0, nin = 0, icursor = 0;
    for (size_t i = 0; i < d->nsl; i++) {
        if (d->sl[i].instr == -1) ex[nex++] = &d->sl[i];             /* the executes */
        if (d->sl[i].instr == LP_ETDUMP_INIT) in[nin++] = &d->sl[i]; /* the loads */
    }
    for (uint32_t i = 0; i < r->netdumps; i++) {
        size_t first = d->nev;
        int rc = parse(d, r->etdumps[i].data, r->etdumps[i].len);
        if (rc == -2) {
            lp_os_free(ex);
            lp_os_free(in);
            return -1;
        }
        if (rc < 0) {
            d->bad++;
            d->nev = first;
            continue;
        }
        d->dumps++;
        align(d, first, &cursor, ex, nex, &icursor, in, nin);
    }
    lp_os_free(ex);
    lp_os_free(in);
    for (size_t i = 0; i < d->nev; i++) {
        if (tally(d, &d->ev[i]) != 0) return -1;
        uint32_t tid = d->ev[i].tid, row = d->ev[i].placed && d->ev[i].track != tid; /* a row of its own */
        unsigned k = 0;
        while (row && k < d->ntracks && d->tracks[k] != tid) k++;
        if (row && k == d->ntracks && k < 64) d->tracks[d->ntracks++] = tid;
    }
    /* the placed ones first, in time order (the slices of libprof-report) */
    size_t w = 0;
    for (size_t i = 0; i < d->nev; i++)
        if (d->ev[i].placed) d->ev[w++] = d->ev[i];
    d->nev = w;
    return 0;
}

int lp_etdump_any(const struct lp_etdump *d) { return d && (d->nev || d->dumps || d->bad); }
size_t lp_etdump_count(const struct lp_etdump *d) { return d ? d->nev : 0; }

void lp_etdump_event(const struct lp_etdump *d, size_t i, const char **name, uint32_t *track, uint64_t *start,
                     uint64_t *dur) {
    static __thread char buf[256];
    const struct ev *e = &d->ev[i];
    snprintf(buf, sizeof buf, "%.*s", (int)e->nlen, e->name);
    *name = buf;
    *track = e->track;
    *start = e->pstart;
    *dur = e->pend - e->pstart;
}

static void view_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    const struct lp_etdump *d = a->view[LP_VIEW_ETDUMP];
    if (!lp_etdump_any(d)) return;
    for (unsigned k = 0; k < d->ntracks; k++) {
        char name[64];
        int n = snprintf(name, sizeof name, "ETDump (thread %u)", d->tracks[k]);
        lp_json_meta_name(j, pid, LP_ETDUMP_TRACK(d->tracks[k]), "thread_name", name, (size_t)n);
    }
    for (size_t i = 0; i < d->nev; i++) {
        const struct ev *e = &d->ev[i];
        lp_json_event(j, "X", pid, e->track, "etdump", e->name, e->nlen, (int64_t)e->pstart);
        lp_json_dur(j, e->pend - e->pstart);
        lp_json_args(j);
        if (e->instr >= 0 && e->chain >= 0) { /* (a load's events have no instruction: chain -1) */
            lp_json_key(j, "instruction");
            lp_json_i64(j, e->instr);
            lp_json_key(j, "chain");
            lp_json_i64(j, e->chain);
        }
        if (e->dbg >= 0) {
            lp_json_key(j, "delegate_debug_id");
            lp_json_i64(j, e->dbg);
        }
        lp_json_key(j, "etdump_ns");
        lp_json_u64(j, e->end - e->start);
        lp_json_args_end(j);
        lp_json_event_end(j);
    }
}

static int by_ns(const void *x, const void *y) {
    const struct row *a = x, *b = y;
    return a->ns < b->ns ? 1 : a->ns > b->ns ? -1 : 0;
}

static void view_summary(const struct lp_analysis *a, struct lp_out *out, unsigned top) {
    const struct lp_etdump *d = a->view[LP_VIEW_ETDUMP];
    if (!lp_etdump_any(d)) return;
    lp_sort(((struct lp_etdump *)d)->row, d->nrow, sizeof *d->row, by_ns);
    lp_out_fmt(out, "  ExecuTorch ETDump: %zu dumps, %zu executes", d->dumps, d->executes);
    if (d->unaligned) lp_out_fmt(out, ", %zu events with no execute slice to place them in", d->unaligned);
    if (d->bad) lp_out_fmt(out, ", %zu not an ETDump", d->bad);
    lp_out_fmt(out, "\n  %10s %10s %10s %8s  %s\n", "count", "total", "mean", "placed", "event (ExecuTorch's times)");
    for (size_t i = 0; i < d->nrow && i < lp_top(top, 30); i++) {
        char b1[32], b2[32];
        lp_fmt_ns(b1, sizeof b1, (int64_t)d->row[i].ns);
        lp_fmt_ns(b2, sizeof b2, (int64_t)(d->row[i].ns / (d->row[i].count ? d->row[i].count : 1)));
        lp_out_fmt(out, "  %10llu %10s %10s %8llu  %.*s\n", (unsigned long long)d->row[i].count, b1, b2,
                   (unsigned long long)d->row[i].placed, (int)d->row[i].nlen, d->row[i].name);
    }
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    const struct lp_etdump *d = a->view[LP_VIEW_ETDUMP];
    if (!lp_etdump_any(d)) return;
    lp_json_kobject(j, "etdump");
    lp_json_kus(j, "dumps", LP_U(d->dumps), "not_etdump", LP_U(d->bad), "executes", LP_U(d->executes), "placed",
                LP_U(d->nev), "unaligned", LP_U(d->unaligned), "outside_executes", LP_U(d->outside), "nested_runs",
                LP_U(d->nested_runs), "loads", LP_U(d->loads), "nested_loads", LP_U(d->nested_loads), NULL);
    lp_json_karray(j, "events");
    for (size_t i = 0; i < d->nrow; i++) {
        lp_json_object(j);
        lp_json_ks(j, "name", d->row[i].name, d->row[i].nlen);
        lp_json_kus(j, "count", LP_U(d->row[i].count), "total_ns", LP_U(d->row[i].ns), "placed", LP_U(d->row[i].placed),
                    NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_object_end(j);
}

/* ---- the view (views.h): ExecuTorch's ETDumps, placed by the execute and instruction slices */
#define ETDUMP(a) ((struct lp_etdump *)(a)->view[LP_VIEW_ETDUMP])
#define SHAPE(s) (1u << LP_SHAPE_##s)
static int view_create(struct lp_analysis *a) {
    return a->r->netdumps && !(a->view[LP_VIEW_ETDUMP] = lp_etdump_new(a->r)) ? -1 : 0;
}
static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    if (!ETDUMP(a) || !e->timed) return 0;
    const struct lp_call_rec *rec = lp_kind_shape[e->kind] == LP_SHAPE_CALL ? s->call : NULL;
    int64_t index = rec ? lp_etdump_index(rec->call, rec->nargs, rec->a[2]) : LP_ETDUMP_OTHER;
    return lp_etdump_slice(ETDUMP(a), index, e->tid, e->start_ns, e->dur_ns);
}
static int view_finish(struct lp_analysis *a) { return ETDUMP(a) ? lp_etdump_finish(ETDUMP(a)) : 0; }
static void view_destroy(struct lp_analysis *a) { lp_etdump_free(ETDUMP(a)); }

// clang-format off
const struct lp_view lp_view_etdump = {"etdump", SHAPE(CALL) | SHAPE(RANGE) | SHAPE(PYCALL), view_create, view_event, NULL, view_finish, view_destroy, view_summary, NULL, view_chrome, view_metadata};
// clang-format on
