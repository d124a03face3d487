/* reader.c: decoding raw libprof traces. See include/libprof/format.h for the layout.
 *
 * lp_reader_open validates the whole file once (every chunk header and every record), so the
 * iterator can trust what it walks; damage or a cut-off tail ends the index at the last whole
 * chunk and sets `truncated`, which every consumer reports to the user. */
#define _GNU_SOURCE
#include "reader.h"

#include "nodes.h"
#include "cc.h"
#include "os.h"
#include "map.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ROUND8(x) (((x) + 7u) & ~(uint64_t)7u)

/* ---- memory: a mapped trace is read once, front to back per thread ---------------------------
 * The pages of a mapped spool count in the resident size of the process that reads it — at
 * exit, the profiled program itself. Pages already read are handed back to the kernel (they are
 * clean file pages: a later access reads them again from the page cache, so nothing pointing into
 * the mapping goes stale), which keeps the reader's resident share to about one chunk a thread
 * whatever the length of the trace. */

#define RELEASE_STEP (4u << 20)

static void release(const struct lp_reader *r, uint64_t from, uint64_t to) {
    if (!r->mapped || to <= from) return;
    uintptr_t page = 4096, a = ((uintptr_t)r->data + from) & ~(page - 1);
    uintptr_t b = ((uintptr_t)r->data + to + page - 1) & ~(page - 1);
    madvise((void *)a, b - a, MADV_DONTNEED);
}

/* The index of thread `tid`'s stream in r->threads — its events, or (samples) its CPU samples —
 * adding it when new. Returns 0 or -1 (out of memory). */
static int stream_index(struct lp_reader *r, struct lp_map *m, uint32_t tid, int samples, uint32_t *out) {
    uint64_t v, key = ((uint64_t)tid + 1) | (uint64_t)samples << 40; /* +1: key 0 means empty */
    if (lp_map_get(m, key, &v)) {
        *out = (uint32_t)v;
        return 0;
    }
    uint32_t owner = 0;
    if (samples && stream_index(r, m, tid, 0, &owner) != 0) return -1; /* its thread, first */
    if (LP_RESERVE_ZERO(r->threads, r->cap.threads, r->nthreads + 1) != 0) return -1;
    r->threads[r->nthreads].tid = tid;
    r->threads[r->nthreads].owner = samples ? owner : r->nthreads;
    r->threads[r->nthreads].samples = (uint8_t)samples;
    if (lp_map_put(m, key, r->nthreads, NULL) < 0) return -1;
    *out = r->nthreads++;
    return 0;
}

static int thread_index(struct lp_reader *r, struct lp_map *m, uint32_t tid, uint32_t *out) {
    return stream_index(r, m, tid, 0, out);
}

/* Check that `n` words at `w` are whole, valid records; count them. Returns -1 on damage. The
 * common records (fixed size, no meaning for the index) take the loop's first branch only. */
/* Check that the chunk's `n` words are whole records (the converter then decodes them without
 * bounds checks); count them and note the last reset. One table load a record for all but the
 * rare kinds: this walk is part of every conversion. */
static int check_records(const uint64_t *w, size_t n, uint64_t *count, uint64_t *reset) {
    const uint64_t *p = w, *end = w + n;
    uint64_t c = 0;
    /* two records a turn while both surely fit (a plain record is at most 255 words) */
    while (end - p > 2 * 255) {
        unsigned l1 = lp_plain_words[p[0] >> LP_TS_BITS];
        if (LP_UNLIKELY(l1 == 0)) break;
        unsigned l2 = lp_plain_words[p[l1] >> LP_TS_BITS];
        if (LP_UNLIKELY(l2 == 0)) {
            p += l1;
            c++;
            break;
        }
        p += l1 + l2;
        c += 2;
    }
    while (p < end) {
        uint64_t w0 = *p;
        unsigned len = lp_plain_words[w0 >> LP_TS_BITS];
        if (LP_LIKELY(len != 0)) {
            p += len;
            c++;
            continue;
        }
        if (w0 >> LP_TS_BITS == LP_EV_STACK) { /* (untimed) the commonest of the others, with stacks */
            if (p + 1 >= end || lp_rec_kind(p[1]) == LP_EV_STACK) return -1;
            p++;
            continue;
        }
        unsigned k = lp_rec_kind(w0);
        size_t size = lp_rec_size(p, (size_t)(end - p));
        if (size == 0) return -1;
        if (k == LP_EV_RESET && (w0 & LP_TS_MASK) > *reset) *reset = w0 & LP_TS_MASK;
        /* a stack word is one untimed word, and belongs to the record that follows it */
        if (k == LP_EV_STACK && (lp_rec_timed(w0) || p + 1 >= end || lp_rec_kind(p[1]) == LP_EV_STACK)) return -1;
        p += size;
        c += k != LP_EV_STACK; /* a stack word is part of the record that follows */
    }
    if (p != end) return -1; /* the last record runs past the chunk */
    *count = c;
    return 0;
}

static int oom(char *err, size_t errlen) {
    snprintf(err, errlen, "out of memory while indexing the trace");
    return -1;
}

/* Does a valid chunk begin at `off`? (its header, its length, an EVENTS chunk's records) */
int lp_chunk_valid(const uint8_t *d, size_t size, uint64_t off) {
    struct lp_chunk_header h;
    if (off % 8 || size - off < sizeof h) return 0;
    memcpy(&h, d + off, sizeof h);
    if (h.magic != LP_CHUNK_MAGIC || h.type == 0 || h.type > LP_CHUNK_LAST || h.flags ||
        h.length > size - off - sizeof h)
        return 0;
    uint64_t cnt, reset = 0;
    if ((h.type == LP_CHUNK_EVENTS || h.type == LP_CHUNK_SAMPLES) &&
        (h.length % 8 || check_records((const uint64_t *)(d + off + sizeof h), h.length / 8, &cnt, &reset)))
        return 0;
    return 1;
}

/* Past damage at `off`: the next offset where a valid chunk begins (chunks start 8-byte aligned),
 * or `size` when none does. */
uint64_t lp_chunk_resync(const uint8_t *d, size_t size, uint64_t off) {
    for (off = (off + 8) & ~(uint64_t)7; off + LP_CHUNK_HEADER_SIZE <= size; off += 8) {
        uint32_t magic;
        memcpy(&magic, d + off, 4);
        if (magic == LP_CHUNK_MAGIC && lp_chunk_valid(d, size, off)) return off;
    }
    return size;
}

uint64_t lp_chunk_events(const uint8_t *d, size_t size, uint64_t off) {
    uint64_t n = 0;
    off = (off + 7) & ~(uint64_t)7;
    while (off < size) {
        if (!lp_chunk_valid(d, size, off)) {
            off = lp_chunk_resync(d, size, off);
            continue;
        }
        struct lp_chunk_header h;
        memcpy(&h, d + off, sizeof h);
        uint64_t count = 0, reset = 0;
        if (h.type == LP_CHUNK_EVENTS &&
            !check_records((const uint64_t *)(d + off + sizeof h), h.length / 8, &count, &reset))
            n += count;
        off += sizeof h + ((h.length + 7) & ~(uint64_t)7);
    }
    return n;
}

/* What indexing keeps from one call to the next: where it stopped, the latest clock pair, how
 * far it handed pages back, the streams by thread. A whole file is indexed in one call; a
 * followed one (lp_reader_follow) in one call per look, its idx kept in its lp_follow. */
struct idx {
    struct lp_map map; /* (tid, samples) -> index in r->threads */
    uint64_t off, sync_ticks, sync_ns, released;
};
static int index_chunks(struct lp_reader *r, struct idx *x, size_t size, int partial);
static void fit_clock(struct lp_reader *r, const struct idx *x);

/* A trace still being written, followed: mapped once for far more than its size (the pages past
 * its end are never touched), indexed as it grows; its metadata is copied out as it is indexed,
 * since what has been read is handed back to the file system (lp_reader_follow_release). */
struct lp_follow {
    struct idx x;
    int fd;
    long pid;
    size_t map_size;
    uint64_t punched;              /* the file below this was given back (a hole punched) */
    uint64_t wait_off, wait_since; /* the index has stopped at wait_off since (ns, CLOCK_MONOTONIC) */
    void **kept;                   /* the metadata copies */
    size_t nkept, capkept;
};

static void *keep(struct lp_reader *r, const void *p, size_t n) {
    struct lp_follow *f = r->follow;
    if (LP_RESERVE(f->kept, f->capkept, f->nkept + 1) != 0) return NULL;
    void *c = lp_os_malloc((n + 7) & ~(size_t)7);
    if (!c) return NULL;
    memcpy(c, p, n);
    return f->kept[f->nkept++] = c;
}

/* Validate the file header of `data` into r->hdr (from its copy when it is damaged). */
static int read_header(struct lp_reader *r, const void *data, size_t size, char *err, size_t errlen) {
    const uint8_t *hdr = data;
    if (size >= 8 && memcmp(data, LP_FORMAT_MAGIC, 8) != 0) {
        /* a damaged header (a stray write of the program's): its copy in the HEADER chunk */
        struct lp_chunk_header ch;
        if (size >= LP_HEADER_COPY_OFFSET + LP_FILE_HEADER_SIZE) {
            memcpy(&ch, hdr + LP_FILE_HEADER_SIZE, sizeof ch);
            if (ch.magic == LP_CHUNK_MAGIC && ch.type == LP_CHUNK_HEADER && ch.length == LP_FILE_HEADER_SIZE &&
                !memcmp(hdr + LP_HEADER_COPY_OFFSET, LP_FORMAT_MAGIC, 8)) {
                hdr += LP_HEADER_COPY_OFFSET;
                r->header_recovered = 1;
            }
        }
    }
    if (size < 8 || memcmp(hdr, LP_FORMAT_MAGIC, 8) != 0) {
        snprintf(err, errlen, "not a libprof raw trace (bad magic)");
        return -1;
    }
    if (size < LP_FILE_HEADER_SIZE) {
        snprintf(err, errlen, "truncated file header (%zu bytes)", size);
        return -1;
    }
    memcpy(&r->hdr, hdr, sizeof r->hdr);
    if (r->hdr.byte_order != LP_BYTE_ORDER_MARK) {
        snprintf(err, errlen, "trace was written on a machine of the other byte order");
        return -1;
    }
    if (r->hdr.version < LP_FORMAT_VERSION_OLDEST || r->hdr.version > LP_FORMAT_VERSION) {
        snprintf(err, errlen, "trace format version %u; this libprof reads versions %u to %u%s", r->hdr.version,
                 LP_FORMAT_VERSION_OLDEST, LP_FORMAT_VERSION,
                 r->hdr.version > LP_FORMAT_VERSION ? " (written by a newer libprof)" : "");
        return -1;
    }
    if (r->hdr.header_size != LP_FILE_HEADER_SIZE || r->hdr.clock > LP_CLOCK_TSC) {
        snprintf(err, errlen, "corrupt file header");
        return -1;
    }
    return 0;
}

static int open_mem(struct lp_reader *r, const void *data, size_t size, int mapped, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->data = data;
    r->size = size;
    r->mapped = mapped;
    if (read_header(r, data, size, err, errlen) != 0) return -1;
    struct idx x = {.off = LP_FILE_HEADER_SIZE, .sync_ns = r->hdr.origin_mono_ns};
    if (index_chunks(r, &x, size, 0) != 0) {
        lp_map_free(&x.map);
        r->mapped = 0; /* the caller unmaps */
        lp_reader_close(r);
        return oom(err, errlen);
    }
    lp_map_free(&x.map);
    fit_clock(r, &x);
    return 0;
}

/* What a chunk's reading says: go on, out of memory, stop the index here (a table cut: the
 * trace is truncated), or the chunk is damage (or, `partial`, not whole yet). */
enum { CH_OK = 0, CH_NOMEM = -1, CH_STOP = 1, CH_DAMAGE = 2 };

/* Events or samples: their records checked, the chunk put on its thread's list. */
static int chunk_events(struct lp_reader *r, struct lp_map *map, const struct lp_chunk_header *h, uint64_t payload) {
    uint64_t count;
    if (h->length % 8 || payload % 8 ||
        check_records((const uint64_t *)(r->data + payload), h->length / 8, &count, &r->reset_ticks))
        return CH_DAMAGE;
    uint32_t ti;
    if (stream_index(r, map, h->tid, h->type == LP_CHUNK_SAMPLES, &ti)) return CH_NOMEM;
    if (h->type == LP_CHUNK_SAMPLES) r->samples += count;
    struct lp_thread_info *t = &r->threads[ti];
    if (LP_RESERVE(r->chunks, r->cap.chunks, r->nchunks + 1) || LP_RESERVE(t->chunks, t->cap, t->nchunks + 1))
        return CH_NOMEM;
    t->chunks[t->nchunks++] = r->nchunks;
    t->events += count;
    r->chunks[r->nchunks++] = (struct lp_chunk_ref){payload, h->length, ti};
    r->events += count;
    return CH_OK;
}

/* A string: the host, the executable, the job, the command line, a name, an ORT profile, an
 * ETDump, a note, a thread's name. */
static int chunk_string(struct lp_reader *r, struct lp_map *map, const struct lp_chunk_header *h, const uint8_t *pl) {
    uint32_t key;
    memcpy(&key, pl, 4);
    const char *s = (const char *)pl + 4;
    uint32_t n = h->length - 4;
    if (key == LP_STR_HOSTNAME) {
        r->hostname = s;
        r->hostname_len = n;
    } else if (key == LP_STR_EXE) {
        r->exe = s;
        r->exe_len = n;
    } else if (key == LP_STR_JOB) {
        r->job = s;
        r->job_len = n;
    } else if (key == LP_STR_CMDLINE) {
        r->cmdline = s;
        r->cmdline_len = n;
    } else if (key == LP_STR_NAME && n >= 4) {
        uint32_t id;
        memcpy(&id, s, 4);
        if (id >= r->nnames) {
            if (id > LP_MAX_NAME_ID) return CH_STOP; /* not a name table */
            if (LP_RESERVE_ZERO(r->names, r->cap.names, (size_t)id + 1) != 0) return CH_NOMEM;
            r->nnames = id + 1;
        }
        r->names[id].s = s + 4;
        r->names[id].len = n - 4;
    } else if (key == LP_STR_ORT_PROFILE && n >= 8) {
        if (LP_RESERVE(r->ort_profiles, r->cap.ort_profiles, r->nort_profiles + 1) != 0) return CH_NOMEM;
        uint64_t sess;
        memcpy(&sess, s, 8);
        r->ort_profiles[r->nort_profiles++] = (struct lp_ort_profile){sess, s + 8, n - 8};
    } else if (key == LP_STR_ETDUMP) {
        if (LP_RESERVE(r->etdumps, r->cap.etdumps, r->netdumps + 1) != 0) return CH_NOMEM;
        r->etdumps[r->netdumps++] = (struct lp_blob){s, n};
    } else if (key == LP_STR_NOTE) {
        if (LP_RESERVE(r->notes, r->cap.notes, r->nnotes + 1) != 0) return CH_NOMEM;
        r->notes[r->nnotes++] = (struct lp_note){s, n};
    } else if (key == LP_STR_THREAD_NAME) {
        uint32_t ti;
        if (thread_index(r, map, h->tid, &ti)) return CH_NOMEM;
        r->threads[ti].name = s;
        r->threads[ti].name_len = n;
    }
    return CH_OK;
}

/* The call-stack tree's nodes (format 17 on), parsed into the tree. */
static int chunk_nodes(struct lp_reader *r, const struct lp_chunk_header *h, const uint8_t *pl) {
    const uint64_t *w = (const uint64_t *)(pl);
    if (!r->nodes && !(r->nodes = lp_nodes_new())) return CH_NOMEM;
    for (size_t i = 0; i < h->length / 8; i += 3) {
        uint32_t id = (uint32_t)w[i], k = (uint32_t)(w[i] >> 32);
        int rc =
            k == LP_STACK_NODE && w[i + 1] <= UINT32_MAX ? lp_nodes_add(r->nodes, id, (uint32_t)w[i + 1], w[i + 2]) : 1;
        if (rc < 0) return CH_NOMEM;
        if (rc > 0) r->damaged = 1; /* (a node past damage: its stacks are unknown) */
    }
    return CH_OK;
}

/* Stacks (before format 17): frames, or a pair of parts defined before. */
static int chunk_stacks(struct lp_reader *r, const struct lp_chunk_header *h, const uint8_t *pl) {
    const uint64_t *w = (const uint64_t *)(pl);
    size_t nw = h->length / 8;
    for (size_t i = 0; i < nw;) {
        uint32_t id = (uint32_t)w[i], k = (uint32_t)(w[i] >> 32);
        int pair = k == LP_STACK_PAIR;
        size_t words = pair ? 2 : k;
        if (id == 0 || id > LP_MAX_STACK_ID || (!pair && k > LP_STACK_MAX_DEPTH) || i + 1 + words > nw ||
            (pair && ((uint32_t)w[i + 1] >= id || (uint32_t)(w[i + 1] >> 32) >= id)))
            return CH_STOP; /* a pair names parts defined before it */
        if (id >= r->nstacks) {
            if (LP_RESERVE_ZERO(r->stacks, r->cap.stacks, (size_t)id + 1) != 0) return CH_NOMEM;
            r->nstacks = (uint32_t)r->cap.stacks;
        }
        struct lp_stack *st = &r->stacks[id];
        if (!st->frames && !st->pair) r->nstacks_found++;
        if (pair)
            *st = (struct lp_stack){
                NULL, 0, (uint32_t)w[i + 1], (uint32_t)(w[i + 1] >> 32), 1, (uint8_t)(w[i + 2] & 0xff)};
        else
            *st = (struct lp_stack){w + i + 1, k, 0, 0, 0, 0};
        i += 1 + words;
    }
    return CH_OK;
}

/* Python code objects: their names, files and first lines. */
static int chunk_pycode(struct lp_reader *r, const struct lp_chunk_header *h, const uint8_t *pl) {
    size_t at = 0;
    while (at + sizeof(struct lp_pycode) <= h->length) {
        struct lp_pycode pc;
        memcpy(&pc, pl + at, sizeof pc);
        size_t words = (sizeof pc + pc.name_len + pc.file_len + 7) / 8;
        if (pc.id == 0 || pc.id > LP_MAX_PYCODE_ID || at + sizeof pc + pc.name_len + pc.file_len > h->length)
            return CH_STOP;
        if (pc.id >= r->npycodes) {
            if (LP_RESERVE_ZERO(r->pycodes, r->cap.pycodes, (size_t)pc.id + 1) != 0) return CH_NOMEM;
            r->npycodes = (uint32_t)r->cap.pycodes;
        }
        const char *name = (const char *)pl + at + sizeof pc;
        r->pycodes[pc.id] = (struct lp_pycode_ref){name, name + pc.name_len, pc.name_len, pc.file_len, pc.firstline};
        at += words * 8;
    }
    return CH_OK;
}

/* One chunk (its header h, its payload at `payload`, `pl` where it is read from) into the index. */
static int chunk(struct lp_reader *r, struct lp_map *map, const struct lp_chunk_header *h, uint64_t payload,
                 const uint8_t *pl, int nodes) {
    unsigned type = h->type;
    int aligned = payload % 8 == 0;
    if (type == LP_CHUNK_EVENTS || type == LP_CHUNK_SAMPLES) return chunk_events(r, map, h, payload);
    if (type == LP_CHUNK_WATERMARK && h->length >= 8) {
        uint64_t wm;
        memcpy(&wm, r->data + payload, 8);
        if (wm > r->watermark) r->watermark = wm;
    } else if (type == LP_CHUNK_STRING && h->length >= 4) {
        return chunk_string(r, map, h, pl);
    } else if (type == LP_CHUNK_SHORT && h->length % sizeof(struct lp_short) == 0 && aligned) {
        if (LP_RESERVE(r->short_chunks, r->cap.short_chunks, r->nshort_chunks + 1) != 0) return CH_NOMEM;
        r->short_chunks[r->nshort_chunks++] =
            (struct lp_short_ref){(const struct lp_short *)(pl), h->length / (uint32_t)sizeof(struct lp_short), h->tid};
    } else if (nodes && h->length % 24 == 0 && aligned) {
        return chunk_nodes(r, h, pl);
    } else if (type == LP_CHUNK_STACKS && h->length % 8 == 0 && aligned) {
        return chunk_stacks(r, h, pl);
    } else if (type == LP_CHUNK_MODULES && h->length >= sizeof(struct lp_module)) {
        struct lp_module m;
        memcpy(&m, pl, sizeof m);
        if (sizeof m + (size_t)m.path_len + m.build_id_len <= h->length && m.lo < m.hi) {
            if (LP_RESERVE(r->modules, r->cap.modules, r->nmodules + 1) != 0) return CH_NOMEM;
            const char *path = (const char *)pl + sizeof m;
            r->modules[r->nmodules++] = (struct lp_module_ref){m, path, (const uint8_t *)path + m.path_len};
        }
    } else if (type == LP_CHUNK_PYCODE) {
        return chunk_pycode(r, h, pl);
    } else if (type == LP_CHUNK_SAMPLING && h->length >= sizeof(struct lp_sampling) && aligned) {
        r->sampling = (const struct lp_sampling *)(pl);
    } else if (type == LP_CHUNK_OWN && h->length >= sizeof(struct lp_own_memory) && aligned) {
        r->own = (const struct lp_own_memory *)(pl);
    } else if (type == LP_CHUNK_END && h->length >= sizeof(struct lp_end) && aligned) {
        r->end = (const struct lp_end *)(pl);
        if (r->end->end_ticks > r->last_ticks) r->last_ticks = r->end->end_ticks;
    }
    /* Unknown chunk types are skipped: newer producers may add them within one version. */
    return CH_OK;
}

/* Index the chunks from x->off up to `size`. `partial` (a trace still being written): a chunk
 * not whole yet ends the index there, to be read again when more is written; otherwise it is
 * damage, skipped or the end of the file. Returns 0, or -1 when out of memory. */
static int index_chunks(struct lp_reader *r, struct idx *x, size_t size, int partial) {
    uint64_t off = x->off;
    const uint8_t *d = r->data;
    while (off < size) {
        struct lp_chunk_header h;
        if (size - off < sizeof h) {
            if (partial) break;
            if (r->end)
                r->damaged_bytes += size - off; /* junk after the end */
            else
                r->truncated = 1;
            break;
        }
        memcpy(&h, d + off, sizeof h);
        int rc = h.magic != LP_CHUNK_MAGIC || h.length > size - off - sizeof h ? CH_DAMAGE : CH_OK;
        uint64_t payload = off + sizeof h;
        const uint8_t *pl = d + payload; /* a followed trace's metadata: a copy (the file is released as read) */
        int nodes = h.type == LP_CHUNK_STACKS && r->hdr.version >= 17; /* (parsed into the tree: no copy) */
        if (rc == CH_OK && r->follow && h.type != LP_CHUNK_EVENTS && h.type != LP_CHUNK_SAMPLES && h.length && !nodes &&
            !(pl = keep(r, pl, h.length)))
            return -1;
        if (rc == CH_OK) rc = chunk(r, &x->map, &h, payload, pl, nodes);
        if (rc == CH_NOMEM) return -1;
        if (rc == CH_STOP) {
            r->truncated = 1;
            break;
        }
        if (rc == CH_DAMAGE) {
            if (partial) break; /* not written yet (or its records are being written) */
            /* a hole left by a failed write, a stray write, a cut-off tail: go on at the next
             * whole chunk, if there is one */
            uint64_t next = lp_chunk_resync(d, size, off);
            if (next >= size) {
                if (r->end)
                    r->damaged_bytes += size - off; /* bytes after the end: nothing lost */
                else
                    r->truncated = 1;
                break;
            }
            r->damaged_bytes += next - off;
            r->damaged = 1;
            off = next;
            continue;
        }
        if (h.sync_ticks >= x->sync_ticks && h.sync_mono_ns >= x->sync_ns) {
            x->sync_ticks = h.sync_ticks;
            x->sync_ns = h.sync_mono_ns;
        }
        if (h.sync_ticks > r->last_ticks) r->last_ticks = h.sync_ticks;
        off = payload + ROUND8(h.length);
        if (off - x->released >= RELEASE_STEP) { /* what is indexed is read again only by chunk */
            release(r, x->released, off);
            x->released = off;
        }
    }
    x->off = off > size ? size : off;
    if (partial) return 0;
    r->valid_bytes = x->off;
    release(r, x->released, size); /* what the pass reads it reads again, chunk by chunk */
    return 0;
}

/* Clock fit through the origin and the latest sync pair. */
static void fit_clock(struct lp_reader *r, const struct idx *x) {
    r->mult = UINT64_C(1) << 32;
    if (r->hdr.clock == LP_CLOCK_TSC && x->sync_ticks > 0 && x->sync_ns > r->hdr.origin_mono_ns)
        r->mult = (uint64_t)(((unsigned __int128)(x->sync_ns - r->hdr.origin_mono_ns) << 32) / x->sync_ticks);
    r->fit_ticks = x->sync_ticks;
    r->fit_ns = x->sync_ns - r->hdr.origin_mono_ns;
}

/* ---- a trace still being written --------------------------------------------------------------
 * The follower (libprof-report --follow) converts a spool while its program runs. The file is
 * read as it grows: a chunk not yet whole ends the index until the next look (writers reserve
 * their place first and write after, so a later chunk may be whole before an earlier one); the
 * preload's WATERMARK chunks say up to when every thread's records are in; what the pass has read
 * is given back to the file system, so the disk holds only what is not yet converted. */

#define FOLLOW_MAP ((size_t)1 << 40) /* address space, not memory: pages past the end are never touched */
#define FOLLOW_STUCK_NS 5000000000u  /* a chunk not whole after this long is damage after all */
#define FOLLOW_END_NS 1000000000u    /* after END: how long chunks of late threads are waited for */
#define FOLLOW_SLACK_NS 50000000u    /* a record may be stamped this long before its thread commits it */
#define FOLLOW_RELEASE_STEP (8u << 20)

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Has process `pid` ended? (a zombie has: only its parent's wait is left) */
static int pid_gone(long pid) {
    if (pid <= 0) return 0;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = lp_os_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    ssize_t n = lp_os_read(fd, buf, sizeof buf - 1);
    lp_os_close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && paren[2] == 'Z';
}

int lp_reader_follow(struct lp_reader *r, const char *path, long pid, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    int fd = lp_os_open(path, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < LP_FILE_HEADER_SIZE ||
        (m = lp_os_mmap(NULL, FOLLOW_MAP, PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, 0)) == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot follow: %s", path,
                 m == MAP_FAILED && errno ? strerror(errno) : "not a trace");
        lp_os_close(fd);
        return -1;
    }
    struct lp_follow *f = lp_os_calloc(1, sizeof *f);
    r->data = m;
    r->size = (size_t)st.st_size;
    r->mapped = 1;
    r->follow = f;
    if (!f) {
        lp_os_munmap(m, FOLLOW_MAP);
        lp_os_close(fd);
        memset(r, 0, sizeof *r);
        return oom(err, errlen);
    }
    f->fd = fd;
    f->pid = pid;
    f->map_size = FOLLOW_MAP;
    f->punched = 4096; /* the header's page stays */
    char e2[200];
    if (read_header(r, m, r->size, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s: %s", path, e2);
        lp_reader_close(r);
        return -1;
    }
    f->x.off = LP_FILE_HEADER_SIZE;
    f->x.sync_ns = r->hdr.origin_mono_ns;
    if (index_chunks(r, &f->x, r->size, 1) != 0) {
        lp_reader_close(r);
        return oom(err, errlen);
    }
    fit_clock(r, &f->x); /* once: every event of the pass is placed on the same clock */
    lp_reader_follow_more(r);
    return 0;
}

int lp_reader_follow_more(struct lp_reader *r) {
    struct lp_follow *f = r->follow;
    if (!f || r->follow_done) return 0;
    struct stat st;
    if (fstat(f->fd, &st) != 0) return 0;
    size_t size = (uint64_t)st.st_size < f->map_size ? (size_t)st.st_size : f->map_size;
    int gone = pid_gone(f->pid);
    uint64_t before = f->x.off, now = mono_ns();
    r->size = size;
    if (index_chunks(r, &f->x, size, 1) != 0) return -1;
    if (f->x.off != f->wait_off) {
        f->wait_off = f->x.off;
        f->wait_since = now;
    }
    int stuck = f->x.off < size && now - f->wait_since > (r->end ? FOLLOW_END_NS : FOLLOW_STUCK_NS);
    if (gone || stuck || (r->end && f->x.off >= size)) {
        /* the run is over (or a hole stays a hole): the rest is read as a whole file is */
        if (gone && !r->end) size = (size_t)(fstat(f->fd, &st) == 0 ? (uint64_t)st.st_size : size);
        r->size = size;
        if (index_chunks(r, &f->x, size, 0) != 0) return -1;
        f->wait_off = f->x.off;
        if (gone || r->end)
            r->follow_done = 1;
        else
            r->truncated = 0; /* (a chunk still being written at the end: read again next time) */
    }
    uint64_t slack = (uint64_t)(((unsigned __int128)FOLLOW_SLACK_NS << 32) / (r->mult ? r->mult : 1));
    r->follow_wm = r->follow_done ? UINT64_MAX : r->watermark > slack ? r->watermark - slack : 0;
    r->valid_bytes = f->x.off;
    return f->x.off != before || r->follow_done;
}

void lp_reader_follow_release(struct lp_reader *r, uint64_t off) {
    struct lp_follow *f = r->follow;
    if (!f) return;
    off &= ~(uint64_t)4095;
    if (off < f->punched + FOLLOW_RELEASE_STEP) return;
    if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)f->punched, (off_t)(off - f->punched)) == 0)
        f->punched = off;
}

uint64_t lp_reader_follow_released(const struct lp_reader *r) { return r->follow ? r->follow->punched : 0; }

int lp_reader_open_mem(struct lp_reader *r, const void *data, size_t size, char *err, size_t errlen) {
    return open_mem(r, data, size, 0, err, errlen);
}

int lp_reader_open_fd(struct lp_reader *r, int fd, const char *path, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        return -1;
    }
    if (st.st_size == 0) {
        snprintf(err, errlen, "%s: empty file", path);
        return -1;
    }
    void *m = lp_os_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        return -1;
    }
    madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
    char e2[200];
    if (open_mem(r, m, (size_t)st.st_size, 1, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s: %s", path, e2);
        lp_os_munmap(m, (size_t)st.st_size);
        return -1;
    }
    return 0;
}

int lp_reader_open(struct lp_reader *r, const char *path, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    int fd = lp_os_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int rc = lp_reader_open_fd(r, fd, path, err, errlen);
    lp_os_close(fd);
    return rc;
}

void lp_reader_close(struct lp_reader *r) {
    if (r->syms_free) r->syms_free(r->syms);
    for (uint32_t i = 0; i < r->nthreads; i++) lp_os_free(r->threads[i].chunks);
    lp_os_free(r->threads);
    lp_os_free(r->chunks);
    lp_os_free(r->names);
    lp_os_free(r->short_chunks);
    lp_os_free(r->stacks);
    lp_nodes_free(r->nodes);
    lp_os_free(r->modules);
    lp_os_free(r->pycodes);
    lp_os_free(r->ort_profiles);
    lp_os_free(r->etdumps);
    lp_os_free(r->notes);
    struct lp_follow *f = r->follow;
    if (r->mapped && r->data) lp_os_munmap((void *)r->data, f ? f->map_size : r->size);
    if (f) {
        lp_os_close(f->fd);
        lp_map_free(&f->x.map);
        for (size_t i = 0; i < f->nkept; i++) lp_os_free(f->kept[i]);
        lp_os_free(f->kept);
        lp_os_free(f);
    }
    memset(r, 0, sizeof *r);
}

/* The words of flat stack `id` without their tags into out (at most max); their number. */
static uint32_t flat(const struct lp_reader *r, uint32_t id, uint64_t *out, uint32_t max) {
    if (!id || id >= r->nstacks || !r->stacks[id].frames) return 0;
    const struct lp_stack *st = &r->stacks[id];
    uint32_t n = st->n < max ? st->n : max;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t w = st->frames[i];
        out[i] = w & LP_PYFRAME_BIT ? w & ~LP_PY_RUN_END : w & ~LP_NATIVE_TAGS;
    }
    return n;
}

uint32_t lp_stack_ref(const struct lp_reader *r, uint64_t raw) {
    if (raw > UINT32_MAX) return 0;
    return r->nodes ? lp_nodes_ref(r->nodes, (uint32_t)raw) : (uint32_t)raw;
}

uint32_t lp_stack_count(const struct lp_reader *r) { return r->nodes ? lp_nodes_nrefs(r->nodes) : r->nstacks; }

uint32_t lp_stack_distinct(const struct lp_reader *r) {
    return r->nodes ? lp_nodes_distinct(r->nodes) : r->nstacks_found;
}

int lp_stack_known(const struct lp_reader *r, uint32_t id) {
    if (r->nodes) {
        struct lp_frames v;
        return lp_nodes_view(r->nodes, id, &v) != 0;
    }
    return id && id < r->nstacks && (r->stacks[id].frames || r->stacks[id].pair);
}

uint32_t lp_stack_view(const struct lp_reader *r, uint32_t id, struct lp_frames *v) {
    v->f = v->buf;
    v->n = 0;
    if (r->nodes) return lp_nodes_view(r->nodes, id, v);
    if (!lp_stack_known(r, id)) return 0;
    const struct lp_stack *st = &r->stacks[id];
    if (!st->pair) {
        int tagged = 0;
        for (uint32_t i = 0; i < st->n && !tagged; i++)
            tagged = st->frames[i] & LP_PYFRAME_BIT ? (st->frames[i] & LP_PY_RUN_END) != 0
                                                    : (st->frames[i] & LP_NATIVE_TAGS) != 0;
        if (!tagged) { /* as written */
            v->f = st->frames;
            return v->n = st->n;
        }
        return v->n = flat(r, id, v->buf, LP_STACK_MAX_FRAMES);
    }
    const struct lp_stack *nat = st->native < r->nstacks ? &r->stacks[st->native] : NULL;
    const struct lp_stack *py = st->python < r->nstacks ? &r->stacks[st->python] : NULL;
    uint32_t nn = nat && nat->frames ? nat->n : 0, np = py && py->frames ? py->n : 0;
    return v->n = lp_stack_join(v->buf, nn ? nat->frames : NULL, nn, np ? py->frames : NULL, np, st->flags);
}

const char *lp_reader_name(const struct lp_reader *r, uint64_t id, uint32_t *len) {
    if (id < r->nnames && r->names[id].s) {
        *len = r->names[id].len;
        return r->names[id].s;
    }
    *len = 7;
    return "(other)";
}

/* ---- merged iteration -----------------------------------------------------------------------
 * A k-way merge of the threads' record streams by effect time. The cursor that yielded last is
 * kept out of the heap: it goes on yielding while it stays ahead of the heap's top, so a run of
 * one thread (and every single-threaded trace) costs no heap operation at all. */

/* The effect time of the record at c->p in its phase c->phase (set to 1 for one-phase kinds). */
static inline void cursor_key(struct lp_cursor *c) {
    uint64_t w0 = c->p[0];
    unsigned kind = lp_rec_kind(w0), shape = lp_kind_shape[kind];
    uint64_t start = w0 & LP_TS_MASK, dur = lp_rec_timed(w0) ? c->p[1] & LP_DUR_MASK : 0;
    if (shape != LP_SHAPE_REALLOC) c->phase = 1;
    /* timed: an allocation takes effect at its end, a release at its start (a realloc does
     * both: phase 0 is its release); untimed records were stamped at their effect already */
    c->key = shape == LP_SHAPE_FREE || c->phase == 0 ? start : start + dur;
}

/* Position cursor `c` on its next record (in the next chunk if need be), phase 0; 0 when the
 * thread is done, 2 when it went on to a new chunk, else 1.
 *
 * A chunk's pages go back to the kernel one chunk late: the kernel maps the pages around a
 * fault (fault-around, 64 KiB), so the first fault in chunk k+1 brings back the end of chunk k;
 * by the time chunk k+2 is entered, that has happened, and releasing chunk k is for good. */
static int cursor_load(const struct lp_reader *r, struct lp_cursor *c) {
    int moved = 1;
    while (c->p >= c->end) {
        release(r, c->prev_from, c->prev_to);
        c->prev_from = c->chunk_from;
        c->prev_to = c->chunk_to;
        c->chunk_from = c->chunk_to = 0;
        const struct lp_thread_info *t = &r->threads[c->thread];
        if (c->next_chunk >= t->nchunks) {
            release(r, c->prev_from, c->prev_to);
            c->prev_from = c->prev_to = 0;
            return 0;
        }
        const struct lp_chunk_ref *ch = &r->chunks[t->chunks[c->next_chunk++]];
        c->p = (const uint64_t *)(r->data + ch->offset);
        c->end = c->p + ch->length / 8;
        c->chunk_from = ch->offset;
        c->chunk_to = ch->offset + ch->length;
        moved = 2;
    }
    c->phase = 0;
    if (LP_UNLIKELY(lp_rec_kind(c->p[0]) == LP_EV_STACK)) { /* validated: a record follows in this chunk */
        c->stack = lp_stack_ref(r, c->p[0] & LP_TS_MASK);
        c->p++;
    }
    cursor_key(c);
    return moved;
}

/* Every few chunks: all of the file below the earliest chunk a live cursor is in has been read
 * by every thread (a thread's chunks are in the file in its time order), so it goes back to the
 * kernel whatever fault-around brought in from between other threads' chunks. */
static void sweep(struct lp_iter *it) {
    if (++it->loads % 32) return;
    uint64_t lo = UINT64_MAX;
    for (uint32_t i = 0; i < it->r->nthreads; i++) {
        const struct lp_cursor *c = &it->c[i];
        uint64_t at = c->prev_to ? c->prev_from : c->chunk_from;
        if ((c->chunk_to || c->prev_to) && at < lo) lo = at;
    }
    if (lo == UINT64_MAX) lo = it->r->size;
    lo &= ~(uint64_t)4095; /* whole pages below it: nothing a cursor still reads */
    if (lo > it->swept) {
        release(it->r, it->swept, lo);
        it->swept = lo;
    }
}

static inline int less(const struct lp_iter *it, uint32_t a, uint32_t b) {
    const struct lp_cursor *x = &it->c[a], *y = &it->c[b];
    return x->key < y->key || (x->key == y->key && a < b);
}

static void sift_down(struct lp_iter *it, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < it->n && less(it, it->heap[l], it->heap[m])) m = l;
        if (r < it->n && less(it, it->heap[r], it->heap[m])) m = r;
        if (m == i) return;
        uint32_t t = it->heap[i];
        it->heap[i] = it->heap[m];
        it->heap[m] = t;
        i = m;
    }
}

static void set_bound(struct lp_iter *it) {
    uint64_t b = it->n ? it->c[it->heap[0]].key : UINT64_MAX;
    it->bound = b < it->wm ? b : it->wm; /* a followed trace: nothing at or past the watermark */
}

/* The heap's top becomes the yielding cursor (the current one is done). */
static void pop_top(struct lp_iter *it) {
    if (it->n == 0) {
        it->cur = NULL;
        return;
    }
    it->cur = &it->c[it->heap[0]];
    it->heap[0] = it->heap[--it->n];
    sift_down(it, 0);
    set_bound(it);
}

static void follow_wait(struct lp_iter *it);

struct lp_iter *lp_iter_new(const struct lp_reader *r) {
    struct lp_iter *it = lp_os_calloc(1, sizeof *it);
    if (!it) return NULL;
    it->r = r;
    it->wm = UINT64_MAX;
    it->hold = UINT64_MAX;
    it->ncursors = r->nthreads;
    it->c = lp_os_calloc(r->nthreads ? r->nthreads : 1, sizeof *it->c);
    it->heap = lp_os_calloc(r->nthreads ? r->nthreads : 1, sizeof *it->heap);
    if (!it->c || !it->heap) {
        lp_iter_free(it);
        return NULL;
    }
    for (uint32_t i = 0; i < r->nthreads; i++) {
        it->c[i].thread = i;
        it->c[i].owner = r->threads[i].owner;
        it->c[i].tid = r->threads[i].tid;
        if (cursor_load(r, &it->c[i]))
            it->heap[it->n++] = i;
        else
            it->c[i].out = 1;
    }
    for (uint32_t i = it->n / 2; i-- > 0;) sift_down(it, i);
    pop_top(it);
    return it;
}

struct lp_iter *lp_iter_follow(struct lp_reader *r, void (*idle)(void *arg), void *arg) {
    struct lp_iter *it = lp_iter_new(r);
    if (!it) return NULL;
    it->idle = idle;
    it->idle_arg = arg;
    if (r->follow && !r->follow_done) {
        it->wm = r->follow_wm;
        set_bound(it);
        follow_wait(it);
    }
    return it;
}

/* The followed file has grown: cursors for new threads, and the ones out of records that have
 * some now, join the heap; the current one goes back into it and the earliest of all is taken.
 * Returns -1 when out of memory. */
static int adopt(struct lp_iter *it) {
    const struct lp_reader *r = it->r;
    uint32_t cur = it->cur ? (uint32_t)(it->cur - it->c) : UINT32_MAX;
    if (r->nthreads > it->ncursors) {
        struct lp_cursor *c = lp_os_realloc(it->c, r->nthreads * sizeof *c);
        if (c) it->c = c;
        uint32_t *h = c ? lp_os_realloc(it->heap, r->nthreads * sizeof *h) : NULL;
        if (!h) return -1;
        it->heap = h;
        for (uint32_t i = it->ncursors; i < r->nthreads; i++) {
            memset(&it->c[i], 0, sizeof it->c[i]);
            it->c[i].thread = i;
            it->c[i].owner = r->threads[i].owner;
            it->c[i].tid = r->threads[i].tid;
            it->c[i].out = 1;
        }
        it->ncursors = r->nthreads;
    }
    for (uint32_t i = 0; i < it->ncursors; i++) {
        struct lp_cursor *c = &it->c[i];
        if (!c->out || c->next_chunk >= r->threads[i].nchunks) continue;
        if (cursor_load(r, c)) {
            c->out = 0;
            it->heap[it->n++] = i;
        }
    }
    if (cur != UINT32_MAX) it->heap[it->n++] = cur;
    for (uint32_t i = it->n / 2; i-- > 0;) sift_down(it, i);
    pop_top(it);
    return 0;
}

/* The next record is not known to come before every record still to be written (or there is
 * none): look at the file again until it is, or until the run is over. */
static void follow_wait(struct lp_iter *it) {
    struct lp_reader *r = (struct lp_reader *)it->r;
    while (r->follow && it->wm != UINT64_MAX && (!it->cur || it->cur->key >= it->wm)) {
        lp_reader_follow_release(r, it->swept < it->hold ? it->swept : it->hold);
        int more = lp_reader_follow_more(r);
        if (more < 0 || adopt(it) != 0) { /* out of memory: what is indexed is all there will be */
            r->follow_done = 1;
            r->truncated = 1;
        }
        it->wm = r->follow_done ? UINT64_MAX : r->follow_wm;
        set_bound(it);
        if (it->cur && it->cur->key < it->wm) break;
        if (it->idle) it->idle(it->idle_arg);
        if (more <= 0) lp_os_sleep_ms(20);
    }
}

/* Everything lp_iter_next does not inline. With `ev`, yield the current record (any kind, any
 * phase) and advance; without, only settle the cursor lp_iter_next has just advanced. */
int lp_iter_next_slow(struct lp_iter *it, struct lp_event *ev) {
    const struct lp_reader *r = it->r;
    struct lp_cursor *c = it->cur;
    if (c) it->hold = c->chunk_from;
    if (ev) {
        if (!c) return 0;
        const uint64_t *p = c->p;
        uint64_t w0 = p[0];
        unsigned kind = lp_rec_kind(w0), timed = lp_rec_timed(w0);
        uint64_t start = w0 & LP_TS_MASK;
        ev->kind = (uint16_t)kind;
        ev->timed = (uint8_t)timed;
        ev->phase = c->phase;
        ev->thread = c->owner;
        ev->tid = c->tid;
        ev->stack = c->stack;
        ev->w = p + 1 + timed;
        ev->start_ns = lp_ticks_to_ns(r, start);
        if (timed) {
            uint64_t end_ns = lp_ticks_to_ns(r, start + (p[1] & LP_DUR_MASK));
            ev->dur_ns = end_ns - ev->start_ns;
            ev->ns = c->key == start ? ev->start_ns : end_ns;
        } else {
            ev->dur_ns = 0;
            ev->ns = ev->start_ns;
        }
        if (c->phase == 0) { /* a realloc's release: its allocation comes next */
            c->phase = 1;
            cursor_key(c);
            goto order;
        }
        size_t n = 1 + timed + lp_kind_words[kind]; /* validated when the file was opened */
        if (lp_kind_shape[kind] == LP_SHAPE_CALL) n += lp_call_extra(p[n - 1]);
        if (lp_kind_shape[kind] == LP_SHAPE_TALLY) n += (size_t)lp_tally_extra(p[n - 1]);
        c->p = p + n;
        c->stack = 0;
        it->consumed++;
    }
    int loaded = cursor_load(r, c);
    if (loaded != 1) sweep(it);
    if (!loaded) { /* this thread is done (a followed one: for now): the heap's top goes next */
        c->out = 1;
        pop_top(it);
        if (it->wm != UINT64_MAX && (!it->cur || it->cur->key >= it->wm)) follow_wait(it);
        return 1;
    }
order:
    if (it->n && less(it, it->heap[0], (uint32_t)(c - it->c))) { /* another thread is now earlier */
        uint32_t top = it->heap[0];
        it->heap[0] = (uint32_t)(c - it->c);
        it->cur = &it->c[top];
        sift_down(it, 0);
    }
    set_bound(it);
    if (it->wm != UINT64_MAX && it->cur->key >= it->wm) follow_wait(it);
    return 1;
}

void lp_iter_run_end(struct lp_iter *it, const uint64_t *p, uint32_t stack, uint64_t records) {
    if (!records) return; /* nothing taken: the cursor is as it was (maybe between a realloc's phases) */
    struct lp_cursor *c = it->cur;
    c->p = p;
    c->stack = stack;
    it->consumed += records;
    lp_iter_next_slow(it, NULL);
}

void lp_iter_free(struct lp_iter *it) {
    if (!it) return;
    lp_os_free(it->c);
    lp_os_free(it->heap);
    lp_os_free(it);
}
