/* pftrace_in.c: a Perfetto protobuf trace (.pftrace, libprof's own) read as the document its
 * Chrome JSON twin is, so that `libprof-report t.pftrace` gives the rows `libprof-report t.json`
 * gives for the same run: the slices of thread tracks become X events (name, category, pid, tid,
 * start and length, their debug annotations as args) and the annotations of the "libprof
 * metadata" instant become the document's metadata (metadata.libprof) — a cJSON tree that chrome_in.c reads on like any
 * parsed JSON. Instants, counters, async ranges, flows and samples are counted, not kept (the
 * Chrome reader skips them too: the report's CPU tables come from the metadata).
 *
 * Times: the trace's timestamps are CLOCK_MONOTONIC; the JSON's are ns since the run's start.
 * The first ClockSnapshot relates MONOTONIC to REALTIME, and metadata.libprof.start_time_unix_ns
 * is REALTIME at the run's start: the start in MONOTONIC is therefore known exactly (a trace
 * without them: its first timestamp is the start).
 *
 * The protobuf is decoded by hand (the few messages above, each field by its number, everything
 * else skipped), compressed packets inflated by zlib (lib/deflate.c). Interned data is kept per
 * packet sequence; libprof writes one. */
#define _GNU_SOURCE
#include "pftrace_in.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chrome_in.h"
#include "lib/deflate.h"
#include "lib/map.h"
#include "lib/os.h"
#include "lib/pftrace_proto.h"
#include "lib/vec.h"

/* ---- protobuf, read ---------------------------------------------------------------------------- */

struct pbr {
    const uint8_t *p, *e;
};
/* A field: its number and wire type, its varint or fixed value, or its bytes. */
struct fld {
    uint32_t num;
    int wt;
    uint64_t v;
    const uint8_t *b;
    size_t n;
};

static int varint(struct pbr *r, uint64_t *v) {
    *v = 0;
    for (unsigned s = 0; s < 64 && r->p < r->e; s += 7) {
        uint8_t c = *r->p++;
        *v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) return 0;
    }
    return -1;
}

/* The next field of the message: 1, 0 at its end, -1 when malformed. */
static int next(struct pbr *r, struct fld *f) {
    if (r->p >= r->e) return 0;
    uint64_t key;
    if (varint(r, &key) != 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX) return -1;
    f->num = (uint32_t)(key >> 3);
    f->wt = (int)(key & 7);
    switch (f->wt) {
    case 0: return varint(r, &f->v) == 0 ? 1 : -1;
    case 1:
    case 5: {
        size_t w = f->wt == 1 ? 8 : 4;
        if ((size_t)(r->e - r->p) < w) return -1;
        f->v = 0;
        for (size_t i = 0; i < w; i++) f->v |= (uint64_t)r->p[i] << (8 * i);
        r->p += w;
        return 1;
    }
    case 2:
        if (varint(r, &f->v) != 0 || f->v > (uint64_t)(r->e - r->p)) return -1;
        f->b = r->p;
        f->n = (size_t)f->v;
        r->p += f->n;
        return 1;
    default: return -1;
    }
}

static struct pbr sub(const struct fld *f) { return (struct pbr){f->b, f->b + f->n}; }

/* ---- the reader's state ------------------------------------------------------------------------ */

struct track {
    int thread; /* a thread's track: its slices are kept */
    int64_t pid, tid;
};
struct open_slice {
    uint64_t track, ts;
    cJSON *ev; /* the X event, its args in place, waiting for its end */
};
struct done {
    uint64_t track, ts;
    cJSON *ev;
};

struct pft {
    struct lp_map interned; /* (sequence, table, iid) -> 1 + index in strs */
    char **strs;
    size_t nstrs, capstrs;
    struct lp_map track_of; /* uuid -> 1 + index in tracks */
    struct track *tracks;
    size_t ntracks, captracks;
    struct open_slice *open;
    size_t nopen, capopen;
    struct done *done;
    size_t ndone, capdone;
    cJSON *meta;         /* the "libprof metadata" instant's annotations */
    uint64_t mono, real; /* the first ClockSnapshot's (0: none) */
    uint64_t first_ts;
    size_t events, skipped, unmatched, depth;
    int bad, oom;
};

static uint64_t ikey(uint64_t seq, unsigned table, uint64_t iid) {
    uint64_t h = (seq * UINT64_C(0x9e3779b97f4a7c15)) ^ ((uint64_t)table << 56) ^ (iid * UINT64_C(0xbf58476d1ce4e5b9));
    return h ? h : 1;
}

static const char *interned(const struct pft *t, uint64_t seq, unsigned table, uint64_t iid) {
    uint64_t v;
    return lp_map_get(&t->interned, ikey(seq, table, iid), &v) ? t->strs[v - 1] : NULL;
}

static void intern_entries(struct pft *t, uint64_t seq, unsigned table, const struct fld *msg) {
    struct pbr r = sub(msg);
    struct fld f;
    uint64_t iid = 0;
    const uint8_t *s = NULL;
    size_t n = 0;
    int rc;
    while ((rc = next(&r, &f)) > 0) {
        if (f.num == IN_IID && f.wt == 0) iid = f.v;
        if (f.num == IN_NAME && f.wt == 2) s = f.b, n = f.n;
    }
    if (rc < 0 || !s) return;
    char *c = strndup((const char *)s, n);
    if (!c || LP_RESERVE(t->strs, t->capstrs, t->nstrs + 1) != 0 ||
        lp_map_put(&t->interned, ikey(seq, table, iid), t->nstrs + 1, NULL) < 0) {
        free(c);
        t->oom = 1;
        return;
    }
    t->strs[t->nstrs++] = c;
}

static void interned_data(struct pft *t, uint64_t seq, const struct fld *msg) {
    struct pbr r = sub(msg);
    struct fld f;
    while (next(&r, &f) > 0)
        if (f.wt == 2 && (f.num == ID_EVENT_CATEGORIES || f.num == ID_EVENT_NAMES ||
                          f.num == ID_DEBUG_ANNOTATION_NAMES || f.num == ID_DEBUG_ANNOTATION_STRING_VALUES))
            intern_entries(t, seq, f.num, &f);
}

static void descriptor(struct pft *t, const struct fld *msg) {
    struct pbr r = sub(msg);
    struct fld f;
    struct track k = {0};
    uint64_t uuid = 0;
    while (next(&r, &f) > 0) {
        if (f.num == TD_UUID && f.wt == 0) uuid = f.v;
        if ((f.num == TD_THREAD || f.num == TD_PROCESS) && f.wt == 2) {
            struct pbr d = sub(&f);
            struct fld g;
            k.thread = f.num == TD_THREAD;
            while (next(&d, &g) > 0)
                if (g.wt == 0 && g.num == (k.thread ? THD_PID : PD_PID))
                    k.pid = (int64_t)g.v;
                else if (g.wt == 0 && k.thread && g.num == THD_TID)
                    k.tid = (int64_t)g.v;
        }
    }
    if (!uuid) return;
    uint64_t at;
    if (lp_map_get(&t->track_of, uuid, &at)) {
        t->tracks[at - 1] = k;
        return;
    }
    if (LP_RESERVE(t->tracks, t->captracks, t->ntracks + 1) != 0 ||
        lp_map_put(&t->track_of, uuid, t->ntracks + 1, NULL) < 0) {
        t->oom = 1;
        return;
    }
    t->tracks[t->ntracks++] = k;
}

/* ---- debug annotations as JSON values ---------------------------------------------------------- */

/* What a JSON value the writer could not say in an annotation became ("{}", "[]", null: strings). */
static cJSON *string_value(const char *s, size_t n) {
    if (n == 2 && !memcmp(s, "{}", 2)) return cJSON_CreateObject();
    if (n == 2 && !memcmp(s, "[]", 2)) return cJSON_CreateArray();
    if (n == 4 && !memcmp(s, "null", 4)) return cJSON_CreateNull();
    char *c = strndup(s, n);
    cJSON *v = c ? cJSON_CreateString(c) : NULL;
    free(c);
    return v;
}

/* The value of annotation `msg` (a dict's entries, an array's values, a scalar); its name, when it
 * has one, into *name (interned: `seq`'s table, or its own bytes) — NULL when none. */
static cJSON *annotation(struct pft *t, uint64_t seq, const struct fld *msg, char **name) {
    struct pbr r = sub(msg);
    struct fld f;
    cJSON *v = NULL;
    if (name) *name = NULL;
    if (++t->depth > 64) { /* (never from libprof's writer) */
        t->depth--;
        t->bad = 1;
        return cJSON_CreateNull();
    }
    while (next(&r, &f) > 0) {
        cJSON *x = NULL;
        switch (f.num) {
        case DA_NAME_IID:
            if (name && f.wt == 0) {
                const char *s = interned(t, seq, ID_DEBUG_ANNOTATION_NAMES, f.v);
                free(*name);
                *name = strdup(s ? s : "?");
            }
            continue;
        case DA_NAME:
            if (name && f.wt == 2) {
                free(*name);
                *name = strndup((const char *)f.b, f.n);
            }
            continue;
        case DA_BOOL: x = f.wt == 0 ? cJSON_CreateBool(f.v != 0) : NULL; break;
        case DA_UINT: x = f.wt == 0 ? cJSON_CreateNumber((double)f.v) : NULL; break;
        case DA_INT: x = f.wt == 0 ? cJSON_CreateNumber((double)(int64_t)f.v) : NULL; break;
        case DA_DOUBLE: {
            double d;
            memcpy(&d, &f.v, sizeof d);
            x = f.wt == 1 ? cJSON_CreateNumber(d) : NULL;
            break;
        }
        case DA_STRING: x = f.wt == 2 ? string_value((const char *)f.b, f.n) : NULL; break;
        case DA_STRING_IID: {
            const char *s = f.wt == 0 ? interned(t, seq, ID_DEBUG_ANNOTATION_STRING_VALUES, f.v) : NULL;
            x = cJSON_CreateString(s ? s : "");
            break;
        }
        case DA_DICT_ENTRIES:
        case DA_ARRAY_VALUES: {
            int dict = f.num == DA_DICT_ENTRIES;
            if (!v) v = dict ? cJSON_CreateObject() : cJSON_CreateArray();
            if (!v || f.wt != 2 || (dict ? !cJSON_IsObject(v) : !cJSON_IsArray(v))) continue;
            char *key = NULL;
            cJSON *e = annotation(t, seq, &f, dict ? &key : NULL);
            if (!e || (dict && !key)) {
                cJSON_Delete(e);
                free(key);
                if (!e) t->oom = 1;
                continue;
            }
            if (dict)
                cJSON_AddItemToObject(v, key, e);
            else
                cJSON_AddItemToArray(v, e);
            free(key);
            continue;
        }
        default: continue;
        }
        if (x) {
            cJSON_Delete(v);
            v = x;
        } else if (f.num != DA_STRING_IID) {
            t->bad = 1;
        }
    }
    t->depth--;
    return v ? v : cJSON_CreateNull();
}

/* The event's annotations as the members of one object (an event's args, the metadata). */
static cJSON *annotations(struct pft *t, uint64_t seq, const struct fld *te) {
    cJSON *o = cJSON_CreateObject();
    struct pbr r = sub(te);
    struct fld f;
    while (o && next(&r, &f) > 0) {
        if (f.num != TE_DEBUG_ANNOTATIONS || f.wt != 2) continue;
        char *key = NULL;
        cJSON *v = annotation(t, seq, &f, &key);
        if (v && key)
            cJSON_AddItemToObject(o, key, v);
        else
            cJSON_Delete(v);
        free(key);
    }
    if (!o) t->oom = 1;
    return o;
}

/* ---- the events -------------------------------------------------------------------------------- */

static void track_event(struct pft *t, uint64_t seq, uint64_t ts, const struct fld *te) {
    struct pbr r = sub(te);
    struct fld f;
    uint64_t type = 0, track = 0;
    const char *name = NULL, *cat = NULL;
    char *own_name = NULL, *own_cat = NULL;
    while (next(&r, &f) > 0) {
        if (f.num == TE_TYPE && f.wt == 0) type = f.v;
        if (f.num == TE_TRACK_UUID && f.wt == 0) track = f.v;
        if (f.num == TE_NAME_IID && f.wt == 0) name = interned(t, seq, ID_EVENT_NAMES, f.v);
        if (f.num == TE_CATEGORY_IIDS && f.wt == 0 && !cat) cat = interned(t, seq, ID_EVENT_CATEGORIES, f.v);
        if (f.num == TE_NAME && f.wt == 2 && !own_name) own_name = strndup((const char *)f.b, f.n);
        if (f.num == TE_CATEGORIES && f.wt == 2 && !own_cat) own_cat = strndup((const char *)f.b, f.n);
    }
    if (own_name) name = own_name;
    if (own_cat) cat = own_cat;
    t->events++;
    if (ts < t->first_ts) t->first_ts = ts;
    if (type == TYPE_SLICE_BEGIN) {
        cJSON *ev = cJSON_CreateObject();
        if (!ev || LP_RESERVE(t->open, t->capopen, t->nopen + 1) != 0) {
            cJSON_Delete(ev);
            t->oom = 1;
        } else {
            cJSON_AddStringToObject(ev, "ph", "X");
            cJSON_AddStringToObject(ev, "cat", cat ? cat : "");
            cJSON_AddStringToObject(ev, "name", name ? name : "");
            cJSON *args = annotations(t, seq, te);
            if (args && args->child)
                cJSON_AddItemToObject(ev, "args", args);
            else
                cJSON_Delete(args);
            t->open[t->nopen++] = (struct open_slice){track, ts, ev};
        }
    } else if (type == TYPE_SLICE_END) { /* the innermost open slice of its track */
        size_t i = t->nopen;
        while (i-- > 0 && t->open[i].track != track) {}
        if (i == (size_t)-1) {
            t->unmatched++;
        } else if (LP_RESERVE(t->done, t->capdone, t->ndone + 1) != 0) {
            t->oom = 1;
        } else {
            cJSON *ev = t->open[i].ev;
            cJSON_AddNumberToObject(ev, "dur", (double)(ts - t->open[i].ts) / 1000.0);
            t->done[t->ndone++] = (struct done){track, t->open[i].ts, ev}; /* ts: made relative at the end */
            memmove(&t->open[i], &t->open[i + 1], (t->nopen - i - 1) * sizeof *t->open);
            t->nopen--;
        }
        t->events--; /* (a slice is one event, as an X is) */
    } else if (name && !strcmp(name, "libprof metadata") && !t->meta) {
        t->meta = annotations(t, seq, te);
    } else {
        t->skipped++;
    }
    free(own_name);
    free(own_cat);
}

static void clock_snapshot(struct pft *t, const struct fld *msg) {
    if (t->mono) return;
    struct pbr r = sub(msg);
    struct fld f;
    while (next(&r, &f) > 0) {
        if (f.num != CS_CLOCKS || f.wt != 2) continue;
        struct pbr c = sub(&f);
        struct fld g;
        uint64_t id = 0, at = 0;
        while (next(&c, &g) > 0)
            if (g.wt == 0 && g.num == CLK_ID)
                id = g.v;
            else if (g.wt == 0 && g.num == CLK_TIMESTAMP)
                at = g.v;
        if (id == CLOCK_MONOTONIC_ID) t->mono = at;
        if (id == CLOCK_REALTIME_ID) t->real = at;
    }
}

static int packets(struct pft *t, const uint8_t *p, size_t n, int depth);

static void packet(struct pft *t, const struct fld *msg, int depth) {
    struct pbr r = sub(msg);
    struct fld f, te = {0}, in = {0};
    uint64_t ts = 0, seq = 0;
    int has_te = 0, has_in = 0;
    while (next(&r, &f) > 0) {
        switch (f.num) {
        case PKT_TIMESTAMP: ts = f.v; break;
        case PKT_SEQUENCE_ID: seq = f.v; break;
        case PKT_TRACK_EVENT: te = f, has_te = f.wt == 2; break;
        case PKT_INTERNED_DATA: in = f, has_in = f.wt == 2; break;
        case PKT_TRACK_DESCRIPTOR:
            if (f.wt == 2) descriptor(t, &f);
            break;
        case PKT_CLOCK_SNAPSHOT:
            if (f.wt == 2) clock_snapshot(t, &f);
            break;
        case PKT_PERF_SAMPLE: t->skipped++; break;
        case PKT_COMPRESSED_PACKETS: {
            uint8_t *z = NULL;
            size_t zn = f.wt == 2 && depth == 0 ? lp_inflate(f.b, f.n, &z) : 0;
            if (!zn || packets(t, z, zn, depth + 1) != 0) t->bad = 1;
            lp_os_free(z);
            break;
        }
        default: break;
        }
    }
    if (has_in) interned_data(t, seq, &in); /* (before the packet's event: it may name it) */
    if (has_te) track_event(t, seq, ts, &te);
}

/* A Trace message's packets (the file, or a bundle inflated). */
static int packets(struct pft *t, const uint8_t *p, size_t n, int depth) {
    struct pbr r = {p, p + n};
    struct fld f;
    int rc;
    while (!t->oom && (rc = next(&r, &f)) > 0)
        if (f.num == TRACE_PACKET && f.wt == 2) packet(t, &f, depth);
    return t->oom ? 0 : rc;
}

/* ---- the document ------------------------------------------------------------------------------ */

int rp_is_pftrace(const void *head, size_t n) {
    const uint8_t *b = head;
    if (n < 4 || b[0] != (TRACE_PACKET << 3 | 2)) return 0;
    struct pbr r = {b + 1, b + n};
    uint64_t len;
    if (varint(&r, &len) != 0 || len == 0) return 0;
    /* the packet's first field: a known packet field with a sane wire type */
    uint64_t key;
    if (varint(&r, &key) != 0) return 0;
    unsigned num = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
    return num > 0 && num < 1000 && (wt == 0 || wt == 1 || wt == 2 || wt == 5);
}

static void state_free(struct pft *t) {
    for (size_t i = 0; i < t->nstrs; i++) free(t->strs[i]);
    free(t->strs);
    for (size_t i = 0; i < t->nopen; i++) cJSON_Delete(t->open[i].ev);
    free(t->open);
    for (size_t i = 0; i < t->ndone; i++) cJSON_Delete(t->done[i].ev);
    free(t->done);
    free(t->tracks);
    lp_map_free(&t->interned);
    lp_map_free(&t->track_of);
    cJSON_Delete(t->meta);
}

struct cJSON *rp_pftrace_doc(const void *data, size_t len, size_t *skipped, size_t *unmatched, char *err,
                             size_t errlen) {
    struct pft t = {.first_ts = UINT64_MAX};
    int rc = packets(&t, data, len, 0);
    if (rc < 0 || t.oom || (!t.ntracks && !t.events)) {
        snprintf(err, errlen, "%s",
                 t.oom ? "out of memory reading the trace" : "not a Perfetto trace (malformed protobuf)");
        state_free(&t);
        return NULL;
    }
    /* the run's start in the trace's clock (see the top) */
    const cJSON *st =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t.meta, "libprof"), "start_time_unix_ns");
    uint64_t origin = t.first_ts == UINT64_MAX ? 0 : t.first_ts;
    if (t.mono && t.real && cJSON_IsNumber(st) && st->valuedouble > 0)
        origin = t.mono - (t.real - (uint64_t)st->valuedouble);
    cJSON *root = cJSON_CreateObject(), *evs = cJSON_CreateArray();
    if (!root || !evs) t.oom = 1;
    cJSON_AddItemToObject(root, "traceEvents", evs);
    for (size_t i = 0; i < t.ndone && root; i++) {
        uint64_t at;
        cJSON *ev = t.done[i].ev;
        const struct track *k = lp_map_get(&t.track_of, t.done[i].track, &at) ? &t.tracks[at - 1] : NULL;
        if (!k || !k->thread) { /* an async range's, or a track it never described */
            t.skipped++;
            continue;
        }
        cJSON_AddNumberToObject(ev, "pid", (double)k->pid);
        cJSON_AddNumberToObject(ev, "tid", (double)k->tid);
        cJSON_AddNumberToObject(ev, "ts", (double)(int64_t)(t.done[i].ts - origin) / 1000.0);
        cJSON_AddItemToArray(evs, ev);
        t.done[i].ev = NULL;
    }
    if (t.meta) { /* (its annotations are the JSON's "metadata": {"libprof": {...}}) */
        cJSON_AddItemToObject(root, "metadata", t.meta);
        t.meta = NULL;
    }
    *skipped = t.skipped + (size_t)t.bad; /* (a part it could not read: counted, as a malformed event is) */
    *unmatched = t.unmatched + t.nopen;
    int oom = t.oom;
    state_free(&t);
    if (oom) {
        cJSON_Delete(root);
        snprintf(err, errlen, "out of memory reading the trace");
        return NULL;
    }
    return root;
}

int rp_pftrace_load(const void *data, size_t len, struct lp_slices *out, char *err, size_t errlen) {
    size_t skipped, unmatched;
    cJSON *root = rp_pftrace_doc(data, len, &skipped, &unmatched, err, errlen);
    if (!root) return -1;
    int rc = lp_chrome_load_tree(root, out, err, errlen);
    cJSON_Delete(root);
    if (rc == 0) {
        out->skipped += skipped;
        out->events += skipped;
        out->unmatched += unmatched;
    }
    return rc;
}
