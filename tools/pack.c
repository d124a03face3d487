/* pack.c: compact raw traces — libprof-report X.lpt --pack Y.lpz, and reading Y.lpz back.
 *
 * A raw trace spends 8 bytes on each word of a record: a timestamp with its kind, then a size
 * and a pointer. Most of that is predictable: timestamps rise by little, sizes repeat, a pointer
 * lies near the thread's previous one. The packed file keeps every record, timestamp included,
 * and writes it as columns: the kind bytes; each record's time as the difference from its
 * thread's previous record; sizes; allocated pointers as the difference from the thread's
 * previous one; a released pointer as the age of its block (how many allocations ago it was
 * made: small where blocks live briefly), or, for a block allocated out of sight, as the
 * difference from the thread's previous such pointer; every other word as it is. Numbers are varints (zigzag
 * for differences); each column is then compressed with zstd (level 3: the columns do most of
 * the work, a higher level saves 2 % for 30 times the time — measured on churn). Chunk headers
 * and the chunks that are not events (names, stacks, modules, code objects, the end) go into a
 * column of their own as they are.
 *
 * Reading a packed file rebuilds the raw trace in memory, chunk by chunk, 8-byte aligned as the
 * recorder writes them, and hands it to the one decoder (lp_reader_open_mem): every view of a
 * packed trace is the view of its raw trace. Damaged stretches of the raw trace (which the
 * decoder would skip) are left out; a chunk whose records cannot be walked is kept as it is.
 *
 * zstd is loaded when first needed (libzstd.so.1, in every Debian): no build dependency; without
 * it, --pack and reading a packed file say so and fail. */
#define _GNU_SOURCE
#include "pack.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/map.h"
#include "lib/reader.h"

#define PACK_MAGIC "LPPACK\x1a\x01"
enum { S_META, S_KIND, S_TS, S_DUR, S_SIZE, S_APTR, S_FPTR, S_WORDS, S_FRAW, NSTREAMS };

struct pack_head {
    char magic[8];
    uint32_t version, nstreams;
    uint64_t raw_size;
    uint64_t len[NSTREAMS][2]; /* bytes of each column: as coded, compressed */
};

/* ---- zstd, loaded on first use ---------------------------------------------------------------- */

static struct {
    size_t (*bound)(size_t);
    size_t (*compress)(void *, size_t, const void *, size_t, int);
    size_t (*decompress)(void *, size_t, const void *, size_t);
    unsigned (*is_error)(size_t);
} z;

static int zstd_ready(char *err, size_t errlen) {
    if (z.compress) return 0;
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        z.bound = (size_t(*)(size_t))dlsym(h, "ZSTD_compressBound");
        z.decompress = (size_t(*)(void *, size_t, const void *, size_t))dlsym(h, "ZSTD_decompress");
        z.is_error = (unsigned (*)(size_t))dlsym(h, "ZSTD_isError");
        z.compress = (size_t(*)(void *, size_t, const void *, size_t, int))dlsym(h, "ZSTD_compress");
    }
    if (!h || !z.bound || !z.decompress || !z.is_error || !z.compress) {
        z.compress = NULL;
        snprintf(err, errlen, "packed traces need zstd (libzstd.so.1, Debian's libzstd1): not found");
        return -1;
    }
    return 0;
}

/* ---- columns ------------------------------------------------------------------------------------ */

struct col {
    uint8_t *b;
    size_t n, cap;
    int oom;
};

static void put(struct col *c, const void *p, size_t n) {
    if (c->n + n > c->cap) {
        size_t cap = c->cap ? c->cap : 1 << 16;
        while (cap < c->n + n) cap *= 2;
        uint8_t *b = realloc(c->b, cap);
        if (!b) {
            c->oom = 1;
            return;
        }
        c->b = b;
        c->cap = cap;
    }
    memcpy(c->b + c->n, p, n);
    c->n += n;
}

static void varint(struct col *c, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    put(c, b, n);
}

static uint64_t zz(uint64_t d) { return (d << 1) ^ (uint64_t)((int64_t)d >> 63); } /* a difference, zigzag */
static uint64_t unzz(uint64_t v) { return (v >> 1) ^ (uint64_t) - (int64_t)(v & 1); }

/* The blocks alive so far, by the order they were allocated in (1, 2, ...): the packer finds a
 * released block's number by its pointer, the reader its pointer by its number. Both walk the
 * chunks in the same order, so they number the same. */
struct ages {
    uint64_t seq;      /* allocations so far */
    struct lp_map map; /* packer: pointer -> number; reader: number -> pointer */
};

/* What a thread's previous record left, for the differences (kept per chunk tid). */
struct prev {
    uint64_t ts, aptr, fptr;
};

static struct prev *prev_of(struct lp_map *m, struct prev **v, size_t *n, uint32_t tid) {
    uint64_t ix;
    if (lp_map_get(m, (uint64_t)tid + 1, &ix)) return &(*v)[ix];
    struct prev *g = realloc(*v, (*n + 1) * sizeof **v);
    if (!g || lp_map_put(m, (uint64_t)tid + 1, *n, NULL) < 0) return NULL;
    *v = g;
    memset(&g[*n], 0, sizeof **v);
    return &g[(*n)++];
}

/* The whole file at `path`, malloc'ed (*n bytes); NULL with a message in `err`. */
static uint8_t *read_whole(const char *path, size_t *n, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    size_t size = (size_t)st.st_size, got = 0;
    uint8_t *d = malloc(size ? size : 1);
    while (d && got < size) {
        ssize_t k = read(fd, d + got, size - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (!d || got != size) {
        snprintf(err, errlen, d ? "%s: cannot read it" : "%s: out of memory", path);
        free(d);
        return NULL;
    }
    *n = size;
    return d;
}

/* A released pointer: its block's age, or 0 and its difference in S_FRAW. */
static void put_free(struct col *s, struct ages *ag, struct prev *pv, uint64_t ptr) {
    uint64_t num;
    if (ptr && lp_map_take(&ag->map, ptr, &num)) {
        varint(&s[S_FPTR], ag->seq - num + 1);
        return;
    }
    varint(&s[S_FPTR], 0);
    varint(&s[S_FRAW], zz(ptr - pv->fptr));
    pv->fptr = ptr;
}

static void put_alloc(struct col *s, struct ages *ag, struct prev *pv, uint64_t ptr) {
    varint(&s[S_APTR], zz(ptr - pv->aptr));
    pv->aptr = ptr;
    ag->seq++;
    if (ptr && lp_map_put(&ag->map, ptr, ag->seq, NULL) < 0) s[S_APTR].oom = 1;
}

/* One chunk's records into the columns, counted in *nrec; -1 when they cannot be walked (the
 * chunk is then kept as it is: nothing was written). */
static int encode_records(struct col *s, const uint64_t *w, size_t words, struct prev *pv, struct ages *ag,
                          uint64_t *nrec) {
    for (size_t i = 0, n; i < words; i += n) /* walked first: a chunk that cannot be is left whole */
        if (!(n = lp_rec_size(w + i, words - i)) || (lp_rec_kind(w[i]) == LP_EV_STACK && n != 1)) return -1;
    for (size_t i = 0; i < words;) {
        uint64_t w0 = w[i];
        unsigned k = lp_rec_kind(w0), timed = lp_rec_timed(w0);
        size_t n = lp_rec_size(w + i, words - i);
        *nrec += k != LP_EV_STACK;
        uint8_t kb = (uint8_t)(w0 >> LP_TS_BITS);
        put(&s[S_KIND], &kb, 1);
        if (k == LP_EV_STACK) {
            varint(&s[S_WORDS], w0 & LP_TS_MASK);
            i += 1;
            continue;
        }
        uint64_t ts = w0 & LP_TS_MASK;
        varint(&s[S_TS], zz(ts - pv->ts));
        pv->ts = ts;
        const uint64_t *p = w + i + 1;
        if (timed) varint(&s[S_DUR], *p++);
        size_t left = n - 1 - timed;
        switch (lp_kind_shape[k]) {
        case LP_SHAPE_ALLOC:
            varint(&s[S_SIZE], p[0]);
            put_alloc(s, ag, pv, p[1]);
            break;
        case LP_SHAPE_FREE: put_free(s, ag, pv, p[0]); break;
        case LP_SHAPE_REALLOC: /* the old block released, then the new one made */
            varint(&s[S_SIZE], p[0]);
            put_free(s, ag, pv, p[2]);
            put_alloc(s, ag, pv, p[1]);
            break;
        default:
            for (size_t j = 0; j < left; j++) varint(&s[S_WORDS], p[j]);
        }
        i += n;
    }
    return 0;
}

int rp_pack(const char *in_path, const char *out_path, unsigned mode, char *err, size_t errlen, uint64_t *events,
            uint64_t *out_bytes) {
    if (zstd_ready(err, errlen) != 0) return -1;
    size_t size = 0;
    uint8_t *d = read_whole(in_path, &size, err, errlen);
    if (!d) return -1;
    if (size < LP_FILE_HEADER_SIZE || memcmp(d, LP_FORMAT_MAGIC, 8)) {
        snprintf(err, errlen, "%s: not a raw libprof trace", in_path);
        free(d);
        return -1;
    }
    struct col s[NSTREAMS] = {{0}};
    struct ages ag = {0};
    struct lp_map tids = {0};
    struct prev *pv = NULL;
    size_t npv = 0;
    uint64_t raw = LP_FILE_HEADER_SIZE, nrec = 0;
    put(&s[S_META], d, LP_FILE_HEADER_SIZE);
    for (uint64_t off = LP_FILE_HEADER_SIZE; off + LP_CHUNK_HEADER_SIZE <= size;) {
        struct lp_chunk_header h;
        memcpy(&h, d + off, sizeof h);
        if (!lp_chunk_valid(d, size, off)) { /* damage: on at the next whole chunk, as the reader goes on */
            off = lp_chunk_resync(d, size, off);
            continue;
        }
        put(&s[S_META], &h, sizeof h);
        const uint8_t *payload = d + off + sizeof h;
        uint8_t how = 0; /* 0: the payload as it is, in meta; 1: records, in the columns */
        struct prev *p = NULL;
        if ((h.type == LP_CHUNK_EVENTS || h.type == LP_CHUNK_SAMPLES) && h.length % 8 == 0 &&
            (p = prev_of(&tids, &pv, &npv, h.tid)) != NULL) {
            size_t mark = s[S_META].n;
            how = 1;
            put(&s[S_META], &how, 1);
            if (encode_records(s, (const uint64_t *)(const void *)payload, h.length / 8, p, &ag, &nrec) != 0) {
                s[S_META].n = mark; /* kept as it is */
                how = 0;
            }
        }
        if (!how) {
            put(&s[S_META], &how, 1);
            put(&s[S_META], payload, h.length);
        }
        raw = ((raw + sizeof h + h.length) + 7) & ~(uint64_t)7;
        off = ((off + sizeof h + h.length) + 7) & ~(uint64_t)7;
    }
    free(d);
    free(pv);
    lp_map_free(&tids);
    lp_map_free(&ag.map);
    int rc = -1;
    struct pack_head ph = {.version = 2, .nstreams = NSTREAMS, .raw_size = raw};
    memcpy(ph.magic, PACK_MAGIC, 8);
    uint8_t *zb[NSTREAMS] = {0};
    for (int c = 0; c < NSTREAMS; c++) {
        if (s[c].oom) goto out;
        zb[c] = malloc(z.bound(s[c].n) + 1);
        if (!zb[c]) goto out;
        size_t n = z.compress(zb[c], z.bound(s[c].n) + 1, s[c].b ? s[c].b : (const uint8_t *)"", s[c].n, 3);
        if (z.is_error(n)) goto out;
        ph.len[c][0] = s[c].n;
        ph.len[c][1] = n;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", out_path, (long)getpid());
    unlink(tmp);
    int ofd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (int)(mode ? mode : 0600));
    if (ofd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", out_path, strerror(errno));
        goto out;
    }
    int ok = write(ofd, &ph, sizeof ph) == (ssize_t)sizeof ph;
    uint64_t total = sizeof ph;
    for (int c = 0; c < NSTREAMS && ok; c++) {
        ok = write(ofd, zb[c], ph.len[c][1]) == (ssize_t)ph.len[c][1];
        total += ph.len[c][1];
    }
    if (close(ofd) != 0 || !ok || rename(tmp, out_path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", out_path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (events) *events = nrec;
    if (out_bytes) *out_bytes = total;
    rc = 0;
out:
    if (rc != 0 && !err[0]) snprintf(err, errlen, "out of memory while packing %s", in_path);
    for (int c = 0; c < NSTREAMS; c++) {
        free(s[c].b);
        free(zb[c]);
    }
    return rc;
}

/* ---- reading back ------------------------------------------------------------------------------ */

int rp_is_packed(const void *head, size_t n) { return n >= 8 && !memcmp(head, PACK_MAGIC, 8); }

struct in {
    const uint8_t *p, *end;
};
static int get_varint(struct in *c, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) return -1;
        uint8_t b = *c->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}
static int take(struct in *c, void *to, size_t n) {
    if ((size_t)(c->end - c->p) < n) return -1;
    memcpy(to, c->p, n);
    c->p += n;
    return 0;
}

static int get_free(struct in *s, struct ages *ag, struct prev *pv, uint64_t *ptr) {
    uint64_t v, d;
    if (get_varint(&s[S_FPTR], &v)) return -1;
    if (v) { /* an age */
        if (v - 1 >= ag->seq || !lp_map_take(&ag->map, ag->seq - (v - 1), ptr)) return -1;
        return 0;
    }
    if (get_varint(&s[S_FRAW], &d)) return -1;
    pv->fptr += unzz(d);
    *ptr = pv->fptr;
    return 0;
}

static int get_alloc(struct in *s, struct ages *ag, struct prev *pv, uint64_t *ptr) {
    uint64_t a;
    if (get_varint(&s[S_APTR], &a)) return -1;
    pv->aptr += unzz(a);
    *ptr = pv->aptr;
    ag->seq++;
    return *ptr && lp_map_put(&ag->map, ag->seq, *ptr, NULL) < 0 ? -1 : 0;
}

/* One chunk's records from the columns into `out` (words of them). */
static int decode_records(struct in *s, uint64_t *out, size_t words, struct prev *pv, struct ages *ag) {
    for (size_t i = 0; i < words;) {
        uint8_t kb;
        if (take(&s[S_KIND], &kb, 1) != 0) return -1;
        unsigned k = kb & 0x7f, timed = kb >> 7;
        if (k == LP_EV_STACK) {
            uint64_t id;
            if (get_varint(&s[S_WORDS], &id) != 0) return -1;
            out[i++] = (uint64_t)kb << LP_TS_BITS | (id & LP_TS_MASK);
            continue;
        }
        if (k == 0 || k >= LP_KIND_COUNT) return -1;
        uint64_t d, ts;
        if (get_varint(&s[S_TS], &d) != 0) return -1;
        ts = (pv->ts + unzz(d)) & LP_TS_MASK;
        pv->ts = ts;
        size_t at = i;
        if (i + 1 + timed > words) return -1;
        out[i++] = (uint64_t)kb << LP_TS_BITS | ts;
        if (timed && get_varint(&s[S_DUR], &out[i++]) != 0) return -1;
        size_t payload = lp_kind_words[k];
        if (i + payload > words) return -1;
        switch (lp_kind_shape[k]) {
        case LP_SHAPE_ALLOC:
            if (get_varint(&s[S_SIZE], &out[i]) || get_alloc(s, ag, pv, &out[i + 1])) return -1;
            break;
        case LP_SHAPE_FREE:
            if (get_free(s, ag, pv, &out[i])) return -1;
            break;
        case LP_SHAPE_REALLOC:
            if (get_varint(&s[S_SIZE], &out[i]) || get_free(s, ag, pv, &out[i + 2]) ||
                get_alloc(s, ag, pv, &out[i + 1]))
                return -1;
            break;
        case LP_SHAPE_TALLY: {
            if (get_varint(&s[S_WORDS], &out[i])) return -1;
            int x = lp_tally_extra(out[i]);
            if (x < 0 || i + 1 + (size_t)x > words) return -1;
            payload = 1 + (size_t)x;
            for (size_t j = 1; j < payload; j++)
                if (get_varint(&s[S_WORDS], &out[i + j])) return -1;
            break;
        }
        case LP_SHAPE_CALL: {
            if (get_varint(&s[S_WORDS], &out[i])) return -1;
            unsigned c = lp_call_id(out[i]);
            if (c == 0 || c >= LP_CALL_COUNT) return -1;
            payload = 1 + lp_call_extra(out[i]);
            if (i + payload > words) return -1;
            for (size_t j = 1; j < payload; j++)
                if (get_varint(&s[S_WORDS], &out[i + j])) return -1;
            break;
        }
        default:
            for (size_t j = 0; j < payload; j++)
                if (get_varint(&s[S_WORDS], &out[i + j])) return -1;
        }
        i += payload;
        if (i - at != lp_rec_size(out + at, words - at)) return -1;
    }
    return 0;
}

int rp_unpack(const char *path, uint8_t **image, size_t *size, char *err, size_t errlen) {
    *image = NULL;
    *size = 0;
    size_t n = 0;
    uint8_t *f = read_whole(path, &n, err, errlen);
    if (!f) return -1;
    int rc = rp_unpack_mem(f, n, image, size, err, errlen);
    if (rc != 0) {
        char e2[256];
        snprintf(e2, sizeof e2, "%s", err);
        snprintf(err, errlen, "%s: %s", path, e2);
    }
    free(f);
    return rc;
}

int rp_unpack_mem(const uint8_t *f, size_t n, uint8_t **image, size_t *size, char *err, size_t errlen) {
    *image = NULL;
    *size = 0;
    if (zstd_ready(err, errlen) != 0) return -1;
    struct pack_head ph;
    uint8_t *col[NSTREAMS] = {0}, *out = NULL;
    int rc = -1;
    if (n < sizeof ph) goto bad;
    memcpy(&ph, f, sizeof ph);
    /* sizes a forged header cannot push past: the raw trace at most 65536 times the packed file
     * (real traces pack 5 to 40 times), a column at most twice the raw trace (a varint takes at
     * most 10 bytes for an 8-byte word) */
    if (!rp_is_packed(ph.magic, 8) || ph.version != 2 || ph.nstreams != NSTREAMS || ph.raw_size > ((uint64_t)1 << 40) ||
        ph.raw_size < LP_FILE_HEADER_SIZE || ph.raw_size / 65536 > n) /* (the header is copied in whole) */
        goto bad;
    uint64_t at = sizeof ph;
    struct in s[NSTREAMS];
    for (int c = 0; c < NSTREAMS; c++) {
        if (ph.len[c][1] > n - at || ph.len[c][0] > 2 * ph.raw_size + 4096) goto bad;
        col[c] = malloc(ph.len[c][0] + 1);
        if (!col[c]) goto oom;
        size_t r = z.decompress(col[c], ph.len[c][0] + 1, f + at, ph.len[c][1]);
        if (z.is_error(r) || r != ph.len[c][0]) goto bad;
        s[c] = (struct in){col[c], col[c] + r};
        at += ph.len[c][1];
    }
    out = calloc(ph.raw_size ? ph.raw_size : 1, 1);
    if (!out) goto oom;
    struct ages ag = {0};
    struct lp_map tids = {0};
    struct prev *pv = NULL;
    size_t npv = 0;
    uint64_t o = LP_FILE_HEADER_SIZE;
    if (take(&s[S_META], out, LP_FILE_HEADER_SIZE) != 0) goto bad_map;
    while (s[S_META].p < s[S_META].end) {
        struct lp_chunk_header h;
        uint8_t how;
        if (take(&s[S_META], &h, sizeof h) || take(&s[S_META], &how, 1) || o + sizeof h + h.length > ph.raw_size)
            goto bad_map;
        memcpy(out + o, &h, sizeof h);
        uint8_t *payload = out + o + sizeof h;
        if (!how) {
            if (take(&s[S_META], payload, h.length)) goto bad_map;
        } else {
            struct prev *p = prev_of(&tids, &pv, &npv, h.tid);
            if (!p || h.length % 8 || decode_records(s, (uint64_t *)(void *)payload, h.length / 8, p, &ag))
                goto bad_map;
        }
        o = (o + sizeof h + h.length + 7) & ~(uint64_t)7;
    }
    if (o != ph.raw_size) goto bad_map;
    free(pv);
    lp_map_free(&tids);
    lp_map_free(&ag.map);
    *image = out;
    *size = ph.raw_size;
    rc = 0;
    goto done;
bad_map:
    free(pv);
    lp_map_free(&tids);
    lp_map_free(&ag.map);
bad:
    snprintf(err, errlen, "a damaged packed trace");
    goto done;
oom:
    snprintf(err, errlen, "out of memory unpacking the trace");
done:
    if (rc != 0) free(out);
    for (int c = 0; c < NSTREAMS; c++) free(col[c]);
    return rc;
}
