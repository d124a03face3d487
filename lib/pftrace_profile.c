/* pftrace_profile.c: the Perfetto writer's profiles (see pftrace.h) — the CPU samples' call
 * stacks as PerfSample packets on each thread's track, their frames and stacks interned; the
 * allocation stacks as one heap profile (a chain of ProfilePackets, as heapprofd writes). */
#define _GNU_SOURCE
#include <string.h>

#include "analysis.h"
#include "cc.h"
#include "deflate.h"
#include "os.h"
#include "pftrace.h"
#include "samples.h"
#include "sites.h"
#include "symbols.h"
#include "vec.h"
#include "views.h"

/* ---- the CPU samples and the heap profile ------------------------------------------------------ */

/* The mapping every frame names, and its path. */
void lp_pf_frames_begin(struct frames *t) {
    size_t at = lp_pb_open(t->b, t->f_paths);
    lp_pb_uint(t->b, 1, 1);
    lp_pb_bytes(t->b, 2, "[symbolised by libprof]", 23);
    lp_pb_close(t->b, at);
    at = lp_pb_open(t->b, t->f_mappings);
    lp_pb_uint(t->b, 1, MAPPING_IID);
    lp_pb_uint(t->b, 7, 1); /* path_string_ids */
    lp_pb_close(t->b, at);
}

/* The frame of function `name`: its iid (the name's), written when new. */
static uint64_t frames_frame(struct frames *t, const char *name) {
    size_t before = t->names.n, len = strlen(name);
    uint64_t iid = lp_strtab_id(&t->names, name, len) + t->base;
    if (t->names.n != before) {
        size_t at = lp_pb_open(t->b, t->f_strings);
        lp_pb_uint(t->b, 1, iid);
        lp_pb_bytes(t->b, 2, name, len);
        lp_pb_close(t->b, at);
        at = lp_pb_open(t->b, t->f_frames);
        lp_pb_uint(t->b, 1, iid);
        lp_pb_uint(t->b, 2, iid);
        lp_pb_uint(t->b, 3, MAPPING_IID);
        lp_pb_uint(t->b, 4, iid); /* rel_pc: one per frame */
        lp_pb_close(t->b, at);
    }
    return iid;
}

/* Frame `iid` as a callstack's field (Callstack.frame_ids), encoded once: its bytes, little
 * end first, and their count in the top byte (iids below 2^42: a profile has fewer frames). */
static inline uint64_t frame_field(uint64_t iid) {
    uint8_t buf[16] = {0}, *e = lp_pb_varint_at(buf + 1, iid);
    uint64_t v = 0;
    buf[0] = 2 << 3;
    memcpy(&v, buf, 7);
    return v | (uint64_t)(e - buf) << 56;
}

/* A new callstack of frames `fields` (frame_field's, innermost first): its iid. Its room made
 * once, each frame a copy of its bytes (a heap profile can have a million callstacks, a few
 * dozen frames each). */
static uint64_t frames_callstack(struct frames *t, const uint64_t *fields, unsigned n) {
    uint64_t iid = ++t->stacks;
    size_t at = lp_pb_open(t->b, t->f_callstacks);
    struct lp_pb *b = t->b;
    if (b->cap - b->n < 11 + (size_t)n * 8 && !lp_pb_room(b, 11 + (size_t)n * 8)) return iid;
    uint8_t *p = b->d + b->n;
    *p++ = 1 << 3;
    p = lp_pb_varint_at(p, iid);
    for (unsigned i = n; i-- > 0;) { /* the outermost first */
        uint64_t v = fields[i];
        memcpy(p, &v, 8); /* (the room above: 8 a frame) */
        p += v >> 56;
    }
    b->n = (size_t)(p - b->d);
    lp_pb_close(b, at);
    return iid;
}

/* A new callstack of `n` functions (innermost first): its iid. */
static uint64_t frames_stack(struct frames *t, const char **names, unsigned n) {
    uint64_t ids[LP_STACK_MAX_FRAMES + 1];
    if (n > LP_STACK_MAX_FRAMES + 1) n = LP_STACK_MAX_FRAMES + 1;
    for (unsigned i = 0; i < n; i++) ids[i] = frame_field(frames_frame(t, names[i]));
    return frames_callstack(t, ids, n);
}

struct samples_arg {
    struct pf *f;
    const struct lp_analysis *a;
    struct track *t;
    struct lp_map cs; /* sample key + 1 -> callstack iid */
};

static void one_sample(void *arg, uint32_t thread, uint32_t key, uint64_t ns, uint64_t weight) {
    struct samples_arg *s = arg;
    struct pf *f = s->f;
    const struct lp_reader *r = s->a->r;
    uint64_t iid;
    if (!lp_map_get(&s->cs, (uint64_t)key + 1, &iid)) {
        const char *names[LP_STACK_MAX_FRAMES + 1];
        unsigned n = lp_samples_frames(lp_samples_of(s->a), key, names, LP_STACK_MAX_FRAMES);
        if (!n) names[n++] = "[unknown stack]";
        iid = frames_stack(&f->cpu, names, n);
        if (lp_map_put(&s->cs, (uint64_t)key + 1, iid, NULL) < 0) f->oom = 1;
    }
    uint64_t tid = thread < r->nthreads && r->threads[thread].tid ? r->threads[thread].tid : r->hdr.pid;
    for (uint64_t w = 0; w < weight; w++) { /* (a weight above 1: samples the timer merged) */
        struct rec *x = lp_pf_add(f, s->t, R_SAMPLE, ns, iid);
        if (x) x->off = tid;
    }
}

void lp_pf_samples(struct pf *f, const struct lp_analysis *a) {
    struct samples_arg s = {f, a, lp_pf_track(f, UINT64_C(1) << 63 | UINT64_C(1) << 61, T_SAMPLES, f->pid, 0), {0}};
    lp_samples_each_sample(lp_samples_of(a), one_sample, &s);
    lp_map_free(&s.cs);
}

/* The allocation stacks (LIBPROF_STACKS) as one heap profile of the process at the end of the
 * run, as heapprofd's dumps are: per call stack the bytes and blocks allocated and freed (what is
 * left unfreed is what leaked). Its strings, frames and callstacks are its own. A profile of a
 * large program is tens of MiB (a PyTorch run: 700 thousand callstacks, 30 frames each), so it
 * is written as heapprofd splits one: a chain of ProfilePackets, each a few dozen KiB of the
 * tables and samples (`continued` on all but the last, `index` counting them), in bundles of
 * their own, each deflated as soon as it is full. A packet's callstacks name only frames of it or
 * of the packets before, and its samples only its own callstacks or those before.
 *
 * The profile is the workers' first job (pftrace_out.c), made while the Chrome writer finishes
 * and the timeline is sorted, merged and written: it reads the sites, which nothing changes by
 * then, and the symbols, which the timeline names frames through too (the table takes a lock
 * meanwhile: lp_syms_share), and writes bundles of its own. Its bundles wait for the timeline's
 * end deflated (a fifth of the profile's size), each made in the same buffer by the same
 * compressor. */
#define PROFILE_PACKET_BYTES (48u << 10)
struct heap_job {
    const struct lp_reader *r;
    struct lp_sites *sites;
    struct lp_syms *syms;
    struct pf *f;
    uint64_t end_ns, index;
    struct bundle cur; /* the bundle being filled */
    struct chunk {     /* those done: their bytes, deflated or not */
        uint8_t *d;
        size_t n;
        int deflated;
    } * done;
    size_t ndone, capdone;
    struct frames frames; /* the tables of the packet being made: in place in the bundle */
    size_t pkt_at, pp_at; /* where its TracePacket's and ProfilePacket's contents start */
    int open, queued;
    struct lp_pf_job job; /* heap_main, given to the workers */
    struct lp_pb dump;    /* its samples (written after the tables) */
    struct lp_map iid_of; /* frame word -> its frame's iid: stacks share most of their frames */
    /* the last frames found, by word, looked at before the map (a profile of many stacks looks
     * up the same few thousand frames tens of millions of times) */
#define HEAP_SEEN_BITS 12
    struct heap_seen {
        uint64_t w1, field; /* w1: the word + 1, 0: empty; field: the frame's frame_field */
    } * seen;
    int oom;
};

/* The bundle being filled, done: its bytes (deflated where a deflater is) kept, it emptied. */
static void heap_bundle_done(struct heap_job *h) {
    struct bundle *b = &h->cur;
    lp_pf_bundle_deflate(h->f, b);
    const uint8_t *d = b->nz ? b->z : b->raw.d;
    size_t n = b->nz ? b->nz : b->raw.n;
    uint8_t *copy = LP_RESERVE(h->done, h->capdone, h->ndone + 1) == 0 ? lp_os_malloc(n ? n : 1) : NULL;
    if (!copy || b->raw.oom) {
        lp_os_free(copy);
        h->oom = 1;
    } else {
        memcpy(copy, d, n);
        h->done[h->ndone++] = (struct chunk){copy, n, b->nz != 0};
    }
    b->raw.n = 0;
    b->nz = 0;
}

/* A ProfilePacket of the chain begins, in place in the current bundle (the lengths of the
 * TracePacket and of the ProfilePacket take four bytes each: closed without moving it). */
static void heap_begin(struct heap_job *h) {
    struct lp_pb *b = &h->cur.raw;
    lp_pf_bundle_room(&h->cur);
    h->pkt_at = lp_pb_open4(b, TRACE_PACKET);
    lp_pb_uint(b, PKT_TIMESTAMP, h->f->clock0 + h->end_ns);
    lp_pb_uint(b, PKT_SEQUENCE_ID, SEQ);
    h->pp_at = lp_pb_open4(b, PKT_PROFILE_PACKET);
    h->frames.b = b;
    h->open = 1;
}

/* The packet's samples after its tables, and its end (`last`: the chain's); a full bundle done. */
static void heap_packet(struct heap_job *h, int last) {
    struct pf *f = h->f;
    if (!h->open) heap_begin(h);
    struct lp_pb *b = h->frames.b;
    if (h->dump.n || last) {
        size_t d = lp_pb_open4(b, PP_PROCESS_DUMPS);
        lp_pb_uint(b, PHS_PID, f->pid);
        lp_pb_uint(b, PHS_TIMESTAMP, f->clock0 + h->end_ns); /* (CLOCK_MONOTONIC_COARSE's domain) */
        lp_pb_put(b, h->dump.d, h->dump.n);
        lp_pb_close4(b, d);
    }
    if (!last) lp_pb_uint(b, PP_CONTINUED, 1);
    lp_pb_uint(b, PP_INDEX, h->index++);
    lp_pb_close4(b, h->pp_at);
    lp_pb_close4(b, h->pkt_at);
    if (h->dump.oom || b->oom) h->oom = 1;
    h->dump.n = 0;
    h->open = 0;
    if (b->n >= BUNDLE_BYTES || last) heap_bundle_done(h);
}

static void heap_site(void *arg, uint32_t stack, const struct lp_site_totals *t) {
    struct heap_job *h = arg;
    if (!t->calls || h->oom) return;
    if (!h->open) heap_begin(h);
    struct lp_frames v;
    uint64_t ids[LP_STACK_MAX_FRAMES];
    unsigned n = 0;
    if (lp_stack_view(h->r, stack, &v)) {
        /* (the commonest loop of a large profile: tens of millions of frames, most of them seen) */
        struct heap_seen *const seen_at = h->seen;
        const uint64_t *const fr = v.f;
        unsigned in = v.n < LP_STACK_MAX_FRAMES ? v.n : LP_STACK_MAX_FRAMES;
        for (unsigned i = 0; i < in && n < LP_STACK_MAX_FRAMES; i++) {
            uint64_t w = fr[i], iid;
            struct heap_seen *seen = &seen_at[(w * 0x9e3779b97f4a7c15ull) >> (64 - HEAP_SEEN_BITS)];
            if (LP_LIKELY(seen->w1 == w + 1) && w != UINT64_MAX) { /* (an empty slot's w1 is 0) */
                ids[n++] = seen->field;
                continue;
            }
            const char *names[16]; /* functions inlined there: frames of their own, innermost first */
            unsigned k = w == UINT64_MAX ? 0 : lp_syms_frames(h->syms, w, 1, names, 16);
            if (k > 1) {
                for (unsigned m = 0; m < k && n < LP_STACK_MAX_FRAMES; m++)
                    ids[n++] = frame_field(frames_frame(&h->frames, names[m]));
                continue;
            }
            if (w == UINT64_MAX || !lp_map_get(&h->iid_of, w + 1, &iid)) {
                iid = frames_frame(&h->frames, lp_syms_function(h->syms, w, 1));
                if (w != UINT64_MAX && lp_map_put(&h->iid_of, w + 1, iid, NULL) < 0) h->oom = 1;
            }
            ids[n] = frame_field(iid);
            if (w != UINT64_MAX) seen->w1 = w + 1, seen->field = ids[n];
            n++;
        }
    }
    if (!n) ids[n++] = frame_field(frames_frame(&h->frames, "[unknown stack]"));
    uint64_t cs = frames_callstack(&h->frames, ids, n);
    if (h->frames.b->n - h->pp_at + h->dump.n >= PROFILE_PACKET_BYTES) /* (it and those before) */
        heap_packet(h, 0);
    struct lp_pb *d = &h->dump;
    size_t at = lp_pb_open(d, PHS_SAMPLES);
    lp_pb_uint(d, HS_CALLSTACK_ID, cs);
    lp_pb_uint(d, HS_SELF_ALLOCATED, t->bytes);
    lp_pb_uint(d, HS_SELF_FREED, t->bytes - t->live_bytes);
    lp_pb_uint(d, HS_ALLOC_COUNT, t->calls);
    lp_pb_uint(d, HS_FREE_COUNT, t->calls - t->live_blocks);
    lp_pb_close(d, at);
}

static void heap_main(void *arg) {
    struct heap_job *h = arg;
    heap_begin(h);
    lp_pf_frames_begin(&h->frames);
    lp_sites_each(h->sites, heap_site, h);
    heap_packet(h, 1);
    if (h->frames.names.oom) h->oom = 1;
}

void lp_pf_heap_begin(struct pf *f, const struct lp_analysis *a, uint64_t end_ns) {
    struct lp_sites *sites = lp_alloc_sites(a->r, a->sites);
    if (!sites) return;
    struct heap_job *h = lp_os_calloc(1, sizeof *h);
    if (!h) {
        f->oom = 1;
        return;
    }
    /* (its strings hold the mapping's path and the function names: those start at 2) */
    *h = (struct heap_job){.r = a->r,
                           .sites = sites,
                           .syms = lp_syms_of(a->r),
                           .f = f,
                           .end_ns = end_ns,
                           .frames = {.b = NULL, /* (heap_begin's) */
                                      .f_strings = PP_STRINGS,
                                      .f_paths = PP_STRINGS,
                                      .f_mappings = PP_MAPPINGS,
                                      .f_frames = PP_FRAMES,
                                      .f_callstacks = PP_CALLSTACKS,
                                      .base = 2},
                           .seen = lp_os_calloc(1u << HEAP_SEEN_BITS, sizeof *h->seen)};
    f->heap = h;
    if (!h->syms || !h->seen) {
        h->oom = 1;
        return;
    }
    lp_deflate_load();         /* (loaded here, once: the worker then only uses it) */
    lp_syms_share(h->syms, 1); /* (the timeline names frames meanwhile: the CPU samples, the sites) */
    h->job = (struct lp_pf_job){heap_main, h, JOB_IDLE};
    h->queued = lp_pf_job_queue(f, &h->job) == 0;
    if (!h->queued) {
        lp_syms_share(h->syms, 0);
        heap_main(h);
    }
}

void lp_pf_heap_out(struct pf *f, struct lp_out *o) {
    struct heap_job *h = f->heap;
    if (!h) return;
    if (h->queued) {
        lp_pf_job_wait(f, &h->job);
        lp_syms_share(h->syms, 0);
    }
    for (size_t i = 0; i < h->ndone; i++) {
        if (!h->oom && o) lp_pf_write_packets(o, h->done[i].d, h->done[i].n, h->done[i].deflated);
        lp_os_free(h->done[i].d);
    }
    if (h->oom) f->oom = 1;
    lp_os_free(h->done);
    lp_pb_free(&h->cur.raw);
    lp_os_free(h->cur.z);
    lp_deflate_end(&h->cur.dz);
    lp_pb_free(&h->dump);
    lp_strtab_free(&h->frames.names);
    lp_map_free(&h->iid_of);
    lp_os_free(h->seen);
    lp_os_free(h);
    f->heap = NULL;
}
