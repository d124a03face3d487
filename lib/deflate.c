/* deflate.c: a buffer as one zlib stream, by the fastest of three deflaters the system has, in
 * this order (one row each in `deflaters`):
 *   - ISA-L's igzip (libisal.so.2, Intel's storage library, in Debian): the fastest here — on a
 *     Perfetto trace's 64 KiB bundles at its level 1, 0.54 ms where libdeflate's fastest level
 *     takes 0.97 ms, for 6 % more bytes;
 *   - libdeflate (libdeflate.so.0): twice zlib's speed at its fastest level, and smaller output;
 *   - zlib (libz.so.1), which every system has.
 * The deflater is loaded when first asked for (libprof.so links nothing it does not need at
 * every program's start) and checked with a stream of its own before it is chosen; each is used
 * at its fastest level, since a trace is deflated while its program exits. libdeflate is not
 * used where the program itself has loaded it: its allocator is set for the whole library, and
 * libprof's is set only in a copy no one else uses. ISA-L and zlib work in memory given to them. */
#define _GNU_SOURCE
#include "deflate.h"

#include <dlfcn.h>
#include <isa-l/igzip_lib.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "os.h"

/* ---- ISA-L ------------------------------------------------------------------------------------ */

/* ISAL_DEF_LVL1_SMALL: room for the tokens of a 64 KiB bundle, deflated as well as with the
 * default's three times the memory (measured on the bundles of a sqlite trace). */
struct isal_state {
    struct isal_zstream s;
    uint8_t level_buf[ISAL_DEF_LVL1_SMALL];
};
static void (*isal_init)(struct isal_zstream *);
static int (*isal_stateless)(struct isal_zstream *);

static int isal_load(void *h) {
    isal_init = (void (*)(struct isal_zstream *))lp_os_dlsym(h, "isal_deflate_stateless_init");
    isal_stateless = (int (*)(struct isal_zstream *))lp_os_dlsym(h, "isal_deflate_stateless");
    return isal_init && isal_stateless;
}

static size_t isal_compress(struct lp_deflate *d, const void *in, size_t n, void *out, size_t cap) {
    struct isal_state *st = d->state;
    if (n > UINT32_MAX || cap > UINT32_MAX) return 0;
    if (!st && !(st = d->state = lp_os_malloc(sizeof *st))) return 0;
    isal_init(&st->s);
    st->s.level = 1;
    st->s.level_buf = st->level_buf;
    st->s.level_buf_size = sizeof st->level_buf;
    st->s.gzip_flag = IGZIP_ZLIB; /* (an older library that cannot fails the check at load) */
    st->s.next_in = (uint8_t *)in;
    st->s.avail_in = (uint32_t)n;
    st->s.next_out = out;
    st->s.avail_out = (uint32_t)cap;
    st->s.end_of_stream = 1;
    st->s.flush = NO_FLUSH;
    return isal_stateless(&st->s) == COMP_OK ? st->s.total_out : 0;
}

static void free_state(struct lp_deflate *d) { lp_os_free(d->state); }

/* ---- libdeflate ------------------------------------------------------------------------------- */

#define LIBDEFLATE_LEVEL 1
static void *(*ld_alloc)(int);
static size_t (*ld_compress)(void *, const void *, size_t, void *, size_t);
static void (*ld_free)(void *);

static int libdeflate_load(void *h) {
    void (*set_alloc)(void *(*)(size_t), void (*)(void *)) =
        (void (*)(void *(*)(size_t), void (*)(void *)))lp_os_dlsym(h, "libdeflate_set_memory_allocator");
    ld_alloc = (void *(*)(int))lp_os_dlsym(h, "libdeflate_alloc_compressor");
    ld_compress = (size_t(*)(void *, const void *, size_t, void *, size_t))lp_os_dlsym(h, "libdeflate_zlib_compress");
    ld_free = (void (*)(void *))lp_os_dlsym(h, "libdeflate_free_compressor");
    if (!set_alloc || !ld_alloc || !ld_compress || !ld_free) return 0;
    set_alloc(lp_os_malloc, lp_os_free);
    return 1;
}

static size_t libdeflate_compress(struct lp_deflate *d, const void *in, size_t n, void *out, size_t cap) {
    if (!d->state && !(d->state = ld_alloc(LIBDEFLATE_LEVEL))) return 0;
    return ld_compress(d->state, in, n, out, cap);
}

static void libdeflate_end(struct lp_deflate *d) {
    if (d->state) ld_free(d->state);
}

/* ---- zlib ------------------------------------------------------------------------------------- */

#define ZLIB_LEVEL 1
static int (*z_init)(z_streamp, int, const char *, int);
static int (*z_deflate)(z_streamp, int);
static int (*z_end)(z_streamp);

static voidpf z_alloc(voidpf opaque, uInt items, uInt size) {
    (void)opaque;
    return lp_os_calloc(items, size);
}
static void z_free(voidpf opaque, voidpf p) {
    (void)opaque;
    lp_os_free(p);
}

static int zlib_load(void *h) {
    z_init = (int (*)(z_streamp, int, const char *, int))lp_os_dlsym(h, "deflateInit_");
    z_deflate = (int (*)(z_streamp, int))lp_os_dlsym(h, "deflate");
    z_end = (int (*)(z_streamp))lp_os_dlsym(h, "deflateEnd");
    return z_init && z_deflate && z_end;
}

static size_t zlib_compress(struct lp_deflate *d, const void *in, size_t n, void *out, size_t cap) {
    (void)d;
    if (n > UINT32_MAX || cap > UINT32_MAX) return 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    z.zalloc = z_alloc;
    z.zfree = z_free;
    if (z_init(&z, ZLIB_LEVEL, ZLIB_VERSION, (int)sizeof z) != Z_OK) return 0;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    size_t done = z_deflate(&z, Z_FINISH) == Z_STREAM_END ? z.total_out : 0;
    z_end(&z);
    return done;
}

static void no_state(struct lp_deflate *d) { (void)d; }

/* ---- inflate (the readers of a .pftrace's compressed packets): zlib's, which every system has -- */

size_t lp_inflate(const void *in, size_t n, uint8_t **out) {
    static int (*i_init)(z_streamp, const char *, int), (*i_inflate)(z_streamp, int), (*i_end)(z_streamp);
    static int tried;
    if (!tried) {
        void *h = lp_os_dlopen("libz.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (h) {
            i_init = (int (*)(z_streamp, const char *, int))lp_os_dlsym(h, "inflateInit_");
            i_inflate = (int (*)(z_streamp, int))lp_os_dlsym(h, "inflate");
            i_end = (int (*)(z_streamp))lp_os_dlsym(h, "inflateEnd");
        }
        tried = 1;
    }
    *out = NULL;
    if (!i_init || !i_inflate || !i_end || n > UINT32_MAX) return 0;
    z_stream z;
    memset(&z, 0, sizeof z);
    z.zalloc = z_alloc;
    z.zfree = z_free;
    if (i_init(&z, ZLIB_VERSION, (int)sizeof z) != Z_OK) return 0;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    size_t cap = 0, done = 0;
    uint8_t *buf = NULL;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (cap - done < 65536) { /* grows by half: a bundle inflates to a few hundred KiB */
            size_t ncap = cap ? cap + cap / 2 : 4 * n + 65536;
            uint8_t *nb = ncap > (size_t)UINT32_MAX * 4 ? NULL : lp_os_realloc(buf, ncap);
            if (!nb) break;
            buf = nb, cap = ncap;
        }
        z.next_out = buf + done;
        z.avail_out = (uInt)(cap - done > UINT32_MAX ? UINT32_MAX : cap - done);
        rc = i_inflate(&z, Z_NO_FLUSH);
        done = (size_t)(z.next_out - buf);
    }
    i_end(&z);
    if (rc != Z_STREAM_END) {
        lp_os_free(buf);
        return 0;
    }
    *out = buf;
    return done ? done : (lp_os_free(buf), *out = NULL, 0);
}

/* ---- the choice ------------------------------------------------------------------------------- */

static const struct deflater {
    const char *lib;
    int not_if_loaded; /* not where the program has loaded the library itself */
    int (*load)(void *h);
    size_t (*compress)(struct lp_deflate *d, const void *in, size_t n, void *out, size_t cap);
    void (*end)(struct lp_deflate *d);
} deflaters[] = {
    {"libisal.so.2", 0, isal_load, isal_compress, free_state},
    {"libdeflate.so.0", 1, libdeflate_load, libdeflate_compress, libdeflate_end},
    {"libz.so.1", 0, zlib_load, zlib_compress, no_state},
};
#define NDEFLATERS (sizeof deflaters / sizeof *deflaters)

static const struct deflater *chosen;
static int loaded;

size_t lp_deflate_bound(size_t n) {
    /* the worst of the three: stored blocks (5 bytes a 64 KiB), or ISA-L's fixed codes (9 bits a
     * byte) before it falls back to them; the zlib header and checksum */
    return n + n / 8 + 64;
}

/* A deflater works: a short text deflated by it is a zlib stream. */
static int works(const struct deflater *x) {
    static const char text[] = "libprof libprof libprof";
    uint8_t out[128];
    struct lp_deflate d = {0};
    size_t n = x->compress(&d, text, sizeof text, out, sizeof out);
    x->end(&d);
    return n >= 6 && (out[0] & 0x0f) == 8 && ((unsigned)out[0] << 8 | out[1]) % 31 == 0;
}

const char *lp_deflate_load(void) {
    if (loaded) return chosen ? chosen->lib : NULL;
    for (size_t i = 0; i < NDEFLATERS && !chosen; i++) {
        const struct deflater *x = &deflaters[i];
        if (x->not_if_loaded && lp_os_dlopen(x->lib, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) continue;
        void *h = lp_os_dlopen(x->lib, RTLD_LAZY | RTLD_LOCAL);
        if (h && x->load(h) && works(x)) chosen = x;
    }
    loaded = 1;
    return chosen ? chosen->lib : NULL;
}

size_t lp_deflate(struct lp_deflate *d, const void *in, size_t n, void *out, size_t cap) {
    if (!lp_deflate_load()) return 0;
    return chosen->compress(d, in, n, out, cap);
}

void lp_deflate_end(struct lp_deflate *d) {
    if (chosen && d->state) chosen->end(d);
    d->state = NULL;
}
