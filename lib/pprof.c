/* pprof.c: see pprof.h. The protocol buffer is written by hand (the few field kinds profile.proto
 * uses: varints and length-delimited messages), and gzip's container around deflate's stored
 * blocks (RFC 1951 §3.2.4, RFC 1952): every reader of pprof accepts it, and no compression
 * library is needed for a file that is small anyway. */
#define _GNU_SOURCE
#include "pprof.h"

#include <stdio.h>
#include <string.h>

#include "gil.h"
#include "map.h"
#include "os.h"
#include "pb.h"
#include "samples.h"
#include "sites.h"
#include "symbols.h"
#include "vec.h"

/* ---- protocol buffers (pb.h) ------------------------------------------------------------------ */

static void field_varint(struct lp_pb *b, unsigned field, uint64_t v) {
    if (v) lp_pb_uint(b, field, v); /* proto3: zero is the default, not written */
}

/* ---- the profile ------------------------------------------------------------------------------- */

struct pp {
    const struct lp_reader *r;
    struct lp_syms *syms;
    struct lp_pb out, m, m2;
    struct lp_strtab strings;
    struct lp_map locs;  /* frame word -> location id */
    struct lp_map funcs; /* hash of (name, file) -> function id */
    uint64_t nlocs, nfuncs;
    uint32_t nvalues;
};

/* The string table index of `s` (`n` bytes), added when new. */
static uint64_t str_of(struct pp *p, const char *s, size_t n) {
    uint64_t id = lp_strtab_id(&p->strings, s, n);
    if (p->strings.oom) p->out.oom = 1;
    return id;
}

static uint64_t str0(struct pp *p, const char *s) { return str_of(p, s, strlen(s)); }

/* The function (name, file, start line): its id, written when new. */
static uint64_t function_of(struct pp *p, const char *name, size_t nlen, const char *file, size_t flen,
                            uint32_t first) {
    uint64_t h = lp_text_hash(name, nlen) * 31 + lp_text_hash(file, flen) + first, v;
    if (lp_map_get(&p->funcs, h | 1, &v)) return v;
    uint64_t id = ++p->nfuncs;
    if (lp_map_put(&p->funcs, h | 1, id, NULL) < 0) p->out.oom = 1;
    field_varint(&p->m, 1, id);
    field_varint(&p->m, 2, str_of(p, name, nlen));
    field_varint(&p->m, 3, str_of(p, name, nlen));
    field_varint(&p->m, 4, str_of(p, file, flen));
    field_varint(&p->m, 5, first);
    lp_pb_msg(&p->out, 5, &p->m);
    return id;
}

/* The module of native address `a`: its index + 1 in r->modules (its mapping's id), or 0. */
static uint64_t mapping_of(const struct lp_reader *r, uint64_t a) {
    for (uint32_t i = 0; i < r->nmodules; i++)
        if (a >= r->modules[i].m.lo && a < r->modules[i].m.hi) return i + 1;
    return 0;
}

/* The location of frame word `w` (a native return address, an instruction + 1 for a sample's
 * leaf, a Python frame, the mark of frames left out): its id, written when new. */
static uint64_t location_of(struct pp *p, uint64_t w) {
    uint64_t v;
    if (lp_map_get(&p->locs, w | (UINT64_C(1) << 62) /* never 0 */, &v)) return v;
    uint64_t id = ++p->nlocs;
    if (lp_map_put(&p->locs, w | (UINT64_C(1) << 62), id, NULL) < 0) p->out.oom = 1;
    uint64_t fid[16], line[16] = {0}, mapping = 0, addr = 0;
    unsigned nl = 1;
    if (w == LP_FRAME_ELIDED) {
        fid[0] = function_of(p, "…", strlen("…"), "", 0, 0);
    } else if (w & LP_PYFRAME_BIT) {
        uint32_t code = LP_PYFRAME_ID(w);
        const struct lp_pycode_ref *c = code < p->r->npycodes && p->r->pycodes[code].name ? &p->r->pycodes[code] : NULL;
        fid[0] = c ? function_of(p, c->name, c->name_len, c->file, c->file_len, c->firstline)
                   : function_of(p, "python", 6, "", 0, 0);
        line[0] = LP_PYFRAME_LINE(w);
    } else {
        /* a Line per function inlined there, innermost first, the caller they were inlined into
         * last (as profile.proto wants); each function's source file where the debug
         * information has it, else the object's path */
        const char *names[16];
        nl = lp_syms_frames(p->syms, w, 1, names, 16);
        mapping = mapping_of(p->r, w ? w - 1 : 0);
        for (unsigned i = 0; i < nl; i++) {
            struct lp_src_name sn;
            lp_syms_split(names[i], &sn);
            const char *file = sn.file ? sn.file : mapping ? p->r->modules[mapping - 1].path : "";
            size_t flen = sn.file ? sn.file_len : mapping ? p->r->modules[mapping - 1].m.path_len : 0;
            fid[i] = function_of(p, names[i], sn.fn_len, file, flen, 0);
            line[i] = sn.line;
        }
        addr = w ? w - 1 : 0; /* inside the call (or the sampled instruction itself) */
    }
    field_varint(&p->m, 1, id);
    field_varint(&p->m, 2, mapping);
    field_varint(&p->m, 3, addr);
    for (unsigned i = 0; i < nl; i++) {
        field_varint(&p->m2, 1, fid[i]);
        field_varint(&p->m2, 2, line[i]);
        lp_pb_msg(&p->m, 4, &p->m2);
    }
    lp_pb_msg(&p->out, 4, &p->m);
    return id;
}

/* The location of a made-up frame named `name` ("[libprof]", "[GIL wait]"): its id, written when new. */
static uint64_t made_up(struct pp *p, const char *name) {
    uint64_t key = lp_text_hash(name, strlen(name)) & ~(UINT64_C(3) << 62), id;
    if (!lp_map_get(&p->locs, key | 1, &id)) {
        id = ++p->nlocs;
        if (lp_map_put(&p->locs, key | 1, id, NULL) < 0) p->out.oom = 1;
        field_varint(&p->m2, 1, function_of(p, name, strlen(name), "", 0, 0));
        field_varint(&p->m, 1, id);
        lp_pb_msg(&p->m, 4, &p->m2);
        lp_pb_msg(&p->out, 4, &p->m);
    }
    return id;
}

/* A sample: its frames (innermost first), under the made-up frame `leaf` when not NULL (NULL or no
 * frames and no leaf: "[unknown stack]"), and its values; `thread` a label when not NULL. */
static void sample(struct pp *p, const struct lp_frames *v, const char *leaf, const int64_t *values,
                   const char *thread) {
    struct lp_pb ids = {0}, vals = {0}, lab = {0};
    if (leaf) lp_pb_varint(&ids, made_up(p, leaf));
    if (v && v->n)
        for (uint32_t i = 0; i < v->n; i++) lp_pb_varint(&ids, location_of(p, v->f[i]));
    else if (!leaf)
        lp_pb_varint(&ids, made_up(p, "[unknown stack]"));
    for (uint32_t i = 0; i < p->nvalues; i++) lp_pb_varint(&vals, (uint64_t)values[i]);
    lp_pb_bytes(&p->m, 1, ids.d, ids.n); /* packed */
    lp_pb_bytes(&p->m, 2, vals.d, vals.n);
    if (thread) {
        field_varint(&lab, 1, str0(p, "thread"));
        field_varint(&lab, 2, str0(p, thread));
        lp_pb_msg(&p->m, 3, &lab);
    }
    if (ids.oom || vals.oom || lab.oom) p->out.oom = 1;
    lp_os_free(ids.d);
    lp_os_free(vals.d);
    lp_os_free(lab.d);
    lp_pb_msg(&p->out, 2, &p->m);
}

static void value_type(struct pp *p, unsigned field, const char *type, const char *unit) {
    field_varint(&p->m, 1, str0(p, type));
    field_varint(&p->m, 2, str0(p, unit));
    lp_pb_msg(&p->out, field, &p->m);
}

/* The mappings (every loaded object, its build id), the times, the string table. */
static void tail(struct pp *p) {
    const struct lp_reader *r = p->r;
    for (uint32_t i = 0; i < r->nmodules; i++) {
        const struct lp_module_ref *m = &r->modules[i];
        char hex[2 * 64 + 1];
        for (uint16_t k = 0; k < m->m.build_id_len && k < 64; k++) snprintf(hex + 2 * k, 3, "%02x", m->build_id[k]);
        hex[2 * (m->m.build_id_len < 64 ? m->m.build_id_len : 64)] = '\0';
        field_varint(&p->m, 1, i + 1);
        field_varint(&p->m, 2, m->m.lo);
        field_varint(&p->m, 3, m->m.hi);
        field_varint(&p->m, 4, m->m.lo - m->m.base);
        field_varint(&p->m, 5, str_of(p, m->path, m->m.path_len));
        field_varint(&p->m, 6, str0(p, hex));
        field_varint(&p->m, 7, 1); /* has_functions */
        lp_pb_msg(&p->out, 3, &p->m);
    }
    field_varint(&p->out, 9, r->hdr.origin_real_ns);
    field_varint(&p->out, 10, lp_ticks_to_ns(r, r->last_ticks));
    for (size_t i = 0; i < p->strings.n; i++) lp_pb_bytes(&p->out, 6, p->strings.str[i], p->strings.len[i]);
}

/* ---- gzip around stored blocks ------------------------------------------------------------------ */

static uint32_t crc32(const uint8_t *d, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ d[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

static void gzip_out(struct lp_out *o, const uint8_t *d, size_t n) {
    static const uint8_t head[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}; /* deflate, no name, Unix */
    lp_out_write(o, head, sizeof head);
    size_t at = 0;
    do {
        size_t k = n - at > 65535 ? 65535 : n - at;
        uint8_t b[5] = {at + k == n, (uint8_t)k, (uint8_t)(k >> 8), (uint8_t)~k, (uint8_t)(~k >> 8)};
        lp_out_write(o, b, 5);
        lp_out_write(o, d + at, k);
        at += k;
    } while (at < n);
    uint32_t crc = crc32(d, n), size = (uint32_t)n;
    uint8_t t[8] = {(uint8_t)crc,  (uint8_t)(crc >> 8),  (uint8_t)(crc >> 16),  (uint8_t)(crc >> 24),
                    (uint8_t)size, (uint8_t)(size >> 8), (uint8_t)(size >> 16), (uint8_t)(size >> 24)};
    lp_out_write(o, t, 8);
}

static int finish(struct pp *p, struct lp_out *o) {
    int rc = p->out.oom ? -1 : 0;
    if (!rc) gzip_out(o, p->out.d, p->out.n);
    lp_strtab_free(&p->strings);
    lp_map_free(&p->locs);
    lp_map_free(&p->funcs);
    lp_os_free(p->out.d);
    lp_os_free(p->m.d);
    lp_os_free(p->m2.d);
    return rc;
}

static void begin(struct pp *p, const struct lp_reader *r, struct lp_syms *syms) {
    memset(p, 0, sizeof *p);
    p->r = r;
    p->syms = syms;
    str0(p, ""); /* index 0: the empty string, as the format wants */
}

/* ---- the two profiles --------------------------------------------------------------------------- */

struct cpu_arg {
    struct pp *p;
    const struct lp_samples *s;
    const struct lp_reader *r;
    uint64_t period;
};

static void cpu_sample(void *arg, uint32_t thread, const struct lp_frames *v, uint64_t n) {
    struct cpu_arg *c = arg;
    char name[64];
    lp_samples_thread_name(c->s, thread, name, sizeof name);
    int64_t values[3] = {(int64_t)n, (int64_t)(n * c->period), (int64_t)(n * c->period)};
    sample(c->p, v, v ? NULL : "[libprof]", values, name);
}

/* A blocked stretch (gil.h): wall time only, its kind the innermost frame. */
static void blocked_sample(void *arg, uint32_t thread, uint32_t stack, enum lp_block kind, int64_t ns) {
    struct cpu_arg *c = arg;
    char name[64];
    lp_samples_thread_name(c->s, thread, name, sizeof name);
    struct lp_frames v = {0};
    if (stack) lp_stack_view(c->r, stack, &v);
    int64_t values[3] = {0, 0, ns};
    sample(c->p, &v, lp_block_frames[kind], values, name);
}

int lp_pprof_cpu(struct lp_out *o, const struct lp_reader *r, const struct lp_samples *s, struct lp_syms *syms,
                 const struct lp_analysis *a) {
    struct pp p;
    begin(&p, r, syms);
    int wall = a && lp_gil_blocked_each(a, NULL, NULL) > 0;
    p.nvalues = wall ? 3 : 2;
    value_type(&p, 1, "samples", "count");
    value_type(&p, 1, "cpu", "nanoseconds");
    if (wall) value_type(&p, 1, "wall", "nanoseconds");
    struct cpu_arg c = {&p, s, r, lp_samples_period(s)};
    lp_samples_each(s, cpu_sample, &c);
    if (wall) lp_gil_blocked_each(a, blocked_sample, &c);
    value_type(&p, 11, "cpu", "nanoseconds");
    field_varint(&p.out, 12, c.period);
    if (wall) field_varint(&p.out, 14, str0(&p, "cpu")); /* default_sample_type: the CPU, as before */
    tail(&p);
    return finish(&p, o);
}

static void heap_sample(void *arg, uint32_t stack, const struct lp_site_totals *t) {
    struct pp *p = arg;
    int64_t values[4] = {(int64_t)t->calls, (int64_t)t->bytes, (int64_t)t->live_blocks, (int64_t)t->live_bytes};
    struct lp_frames v;
    lp_stack_view(p->r, stack, &v);
    sample(p, &v, NULL, values, NULL);
}

int lp_pprof_heap(struct lp_out *o, const struct lp_reader *r, struct lp_sites *sites, struct lp_syms *syms) {
    struct pp p;
    begin(&p, r, syms);
    p.nvalues = 4;
    value_type(&p, 1, "alloc_objects", "count");
    value_type(&p, 1, "alloc_space", "bytes");
    value_type(&p, 1, "inuse_objects", "count");
    value_type(&p, 1, "inuse_space", "bytes");
    lp_sites_each(sites, heap_sample, &p);
    value_type(&p, 11, "space", "bytes");
    field_varint(&p.out, 14, str0(&p, "inuse_space")); /* default_sample_type */
    tail(&p);
    return finish(&p, o);
}
