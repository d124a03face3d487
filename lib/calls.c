/* calls.c: what CALL records mean to a reader — see calls.h.
 *
 * Descriptors and streams are mapped to the file they were opened on as the pass goes (the
 * runtime records a path only at open), so every read or write is charged to its file. A
 * socket is charged to its peer (connect, accept) the same way, a pipe or socketpair to "pipe" or
 * "socketpair", a dup to what it copies; a descriptor libprof never saw made (inherited, or made
 * by a raw system call) to one pseudo-file; GEMM shapes and files are keyed by a hash checked against the stored value. */
#define _GNU_SOURCE
#include "calls.h"
#include "json.h"
#include "os.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "map.h"
#include "vec.h"
#include "fmt.h"
#include "stats.h"
#include "describe.h"

#define MAX_ARGS LP_CALL_MAX_ARGS
#define MMAP_POINTS_MAX 20000

struct file {
    const char *path; /* in the trace's memory (a followed trace's: a copy, owned) */
    uint32_t len;
    uint8_t owned;
    int peer; /* a socket's peer (connect, accept), not a file */
    uint64_t opens, reads, rbytes, writes, wbytes, other, time_ns;
};

struct shape {
    uint64_t m, n, k, op;
    unsigned call;
    struct fnstat st;
};

struct lp_calls {
    const struct lp_reader *r;
    struct fnstat fn[LP_CALL_COUNT];
    struct file *files;
    uint32_t nfiles;
    size_t capfiles;
    struct lp_map path_ix, fd_ix, stream_ix; /* path hash -> file; fd+1 -> file; stream -> file */
    uint32_t unknown_fd, unknown_stream;     /* pseudo-files, 0 = not made yet (index + 1) */
    struct shape *shapes;
    uint32_t nshapes;
    size_t capshapes;
    struct lp_map shape_ix;
    struct fnstat *dnnl_kind, *dnnl_shape; /* by name id */
    uint32_t ndnnl_kind, ndnnl_shape;
    size_t capdnnl_kind, capdnnl_shape;
    struct lp_map maps;              /* anonymous mapping address -> length */
    struct lp_map flow_ts, flow_tid; /* thread-creation flow id -> where its arrow starts */
    struct lp_map life_ts, life_tid; /* ... -> where it ends, when the thread ended first */
    uint64_t mmap_live, mmap_peak, mmap_peak_ns, maps_made, maps_removed;
    uint64_t threads_made, short_calls;
    int oom;
};

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

struct lp_calls *lp_calls_new(const struct lp_reader *r) {
    struct lp_calls *c = lp_os_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->r = r;
    return c;
}

void lp_calls_free(struct lp_calls *c) {
    if (!c) return;
    for (unsigned k = 0; k < LP_CALL_COUNT; k++) lp_fnstat_free(&c->fn[k]);
    for (uint32_t i = 0; i < c->nshapes; i++) lp_fnstat_free(&c->shapes[i].st);
    for (uint32_t i = 0; i < c->ndnnl_kind; i++) lp_fnstat_free(&c->dnnl_kind[i]);
    for (uint32_t i = 0; i < c->ndnnl_shape; i++) lp_fnstat_free(&c->dnnl_shape[i]);
    for (uint32_t i = 0; c->files && i < c->nfiles; i++)
        if (c->files[i].owned) lp_os_free((void *)c->files[i].path);
    lp_os_free(c->files);
    lp_os_free(c->shapes);
    lp_os_free(c->dnnl_kind);
    lp_os_free(c->dnnl_shape);
    lp_map_free(&c->path_ix);
    lp_map_free(&c->fd_ix);
    lp_map_free(&c->stream_ix);
    lp_map_free(&c->shape_ix);
    lp_map_free(&c->maps);
    lp_map_free(&c->flow_ts);
    lp_map_free(&c->flow_tid);
    lp_map_free(&c->life_ts);
    lp_map_free(&c->life_tid);
    lp_os_free(c);
}

/* ---- files ------------------------------------------------------------------------------ */

static uint32_t new_file(struct lp_calls *c, const char *path, uint32_t len) {
    if (LP_RESERVE(c->files, c->capfiles, c->nfiles + 1) != 0) {
        c->oom = 1;
        return UINT32_MAX;
    }
    struct file *f = &c->files[c->nfiles];
    memset(f, 0, sizeof *f);
    f->path = path;
    f->len = len;
    if (c->r->follow) { /* a followed trace's file is given back as it is read */
        if (!(f->path = lp_os_strndup(path, len))) {
            c->oom = 1;
            return UINT32_MAX;
        }
        f->owned = 1;
    }
    return c->nfiles++;
}

/* The file entry for `path`, made on first sight. */
static uint32_t file_for(struct lp_calls *c, const char *path, uint32_t len) {
    uint64_t h = hash_bytes(path, len, 0xcbf29ce484222325ull) | 1;
    for (;; h += 2) {
        uint64_t ix;
        if (!lp_map_get(&c->path_ix, h, &ix)) break;
        const struct file *f = &c->files[ix];
        if (f->len == len && memcmp(f->path, path, len) == 0) return (uint32_t)ix;
    }
    uint32_t ix = new_file(c, path, len);
    if (ix != UINT32_MAX && lp_map_put(&c->path_ix, h, ix, NULL) < 0) c->oom = 1;
    return ix;
}

static struct file *fd_file(struct lp_calls *c, int64_t fd, int stream, uint64_t key) {
    uint64_t ix;
    struct lp_map *m = stream ? &c->stream_ix : &c->fd_ix;
    if (lp_map_get(m, stream ? key : (uint64_t)fd + 1, &ix)) return &c->files[ix];
    uint32_t *u = stream ? &c->unknown_stream : &c->unknown_fd;
    if (!*u) {
        const char *label = stream ? "(streams not opened by fopen)" : "(descriptors libprof did not see made)";
        uint32_t i = new_file(c, label, (uint32_t)strlen(label));
        if (i == UINT32_MAX) return NULL;
        *u = i + 1;
    }
    return &c->files[*u - 1];
}

static void bind(struct lp_calls *c, struct lp_map *m, uint64_t key, uint32_t file) {
    if (file != UINT32_MAX && lp_map_put(m, key, file, NULL) < 0) c->oom = 1;
}

/* ---- shapes ------------------------------------------------------------------------------ */

static uint64_t flops(const struct shape *s) { return lp_blas_flops(s->call, s->m, s->n, s->k, s->op); }

static struct shape *shape_for(struct lp_calls *c, unsigned call, uint64_t m, uint64_t n, uint64_t k, uint64_t op) {
    uint64_t key[5] = {call, m, n, k, op & ~(uint64_t)LP_BLAS_FORTRAN};
    uint64_t h = hash_bytes(key, sizeof key, 0xcbf29ce484222325ull) | 1;
    for (;; h += 2) {
        uint64_t ix;
        if (!lp_map_get(&c->shape_ix, h, &ix)) break;
        struct shape *s = &c->shapes[ix];
        if (s->call == call && s->m == m && s->n == n && s->k == k && s->op == key[4]) return s;
    }
    if (LP_RESERVE(c->shapes, c->capshapes, c->nshapes + 1) != 0) {
        c->oom = 1;
        return NULL;
    }
    struct shape *s = &c->shapes[c->nshapes];
    memset(s, 0, sizeof *s);
    *s = (struct shape){.m = m, .n = n, .k = k, .op = key[4], .call = call};
    if (lp_map_put(&c->shape_ix, h, c->nshapes, NULL) < 0) {
        c->oom = 1;
        return NULL;
    }
    c->nshapes++;
    return s;
}

/* Statistics by interned name id (oneDNN kinds and shapes): grown, zeroed, to hold `id`. */
static struct fnstat *by_id(struct lp_calls *c, struct fnstat **arr, uint32_t *n, size_t *cap, uint64_t id) {
    if (id > LP_MAX_NAME_ID) id = 0;
    if (LP_RESERVE_ZERO(*arr, *cap, id + 1) != 0) {
        c->oom = 1;
        return NULL;
    }
    if (id >= *n) *n = (uint32_t)id + 1;
    return &(*arr)[id];
}

static void add(struct lp_calls *c, struct fnstat *f, const struct lp_event *e, uint64_t bytes) {
    if (f && lp_fnstat_add(f, 1, e->timed, e->dur_ns, bytes, 0) != 0) c->oom = 1;
}

/* ---- the anonymous-mapping track ------------------------------------------------------------ */

static void mmap_changed(struct lp_calls *c, struct lp_call_view *v, uint64_t ns) {
    if (c->mmap_live > c->mmap_peak) {
        c->mmap_peak = c->mmap_live;
        c->mmap_peak_ns = ns;
    }
    v->mmap_point = 1;
    v->mmap_live = c->mmap_live;
}

/* ---- thread-creation arrows -------------------------------------------------------------------
 * An arrow from pthread_create to the new thread's life, drawn when both ends are known — in
 * either order: a short thread can end before pthread_create returns, and events come in the
 * order they ended (a thread that never ran under libprof gets none). */
static void flow(struct lp_calls *c, const struct lp_event *e, int create, uint64_t id, struct lp_call_view *v) {
    uint64_t ts, tid, my_ts = create ? e->start_ns + e->dur_ns / 2 : e->start_ns;
    struct lp_map *mine_ts = create ? &c->flow_ts : &c->life_ts, *mine_tid = create ? &c->flow_tid : &c->life_tid;
    struct lp_map *other_ts = create ? &c->life_ts : &c->flow_ts, *other_tid = create ? &c->life_tid : &c->flow_tid;
    if (lp_map_take(other_ts, id, &ts) && lp_map_take(other_tid, id, &tid)) {
        v->flow = 1;
        v->flow_id = id;
        v->s_ts = create ? my_ts : ts - 1;
        v->f_ts = create ? ts - 1 : my_ts;
        v->s_tid = create ? e->tid : tid;
        v->f_tid = create ? tid : e->tid;
    } else if (lp_map_put(mine_ts, id, my_ts + 1, NULL) < 0 || lp_map_put(mine_tid, id, e->tid, NULL) < 0) {
        c->oom = 1;
    }
}

/* ---- the pass ------------------------------------------------------------------------------ */

int lp_calls_event(struct lp_calls *c, const struct lp_event *e, int counting, struct lp_call_rec *rec,
                   struct lp_call_view *v) {
    memset(v, 0, sizeof *v);
    lp_call_decode(e->w, rec);
    unsigned call = rec->call, nargs = rec->nargs, slen = rec->slen;
    if (call == 0) return 0; /* validated by the reader; be safe */
    const uint64_t *a = rec->a;
    const char *str = rec->str;
    unsigned role = lp_call_role[call];
    struct file *file = NULL;
    uint64_t bytes = 0;
    int64_t ret = (int64_t)a[nargs ? nargs - 1 : 0];
    switch (role) {
    case LP_ROLE_GPU: /* the GPU's own record, not a call of the program's: lib/gpu.c places it */
        v->hidden = 1;
        return 0;
    case LP_ROLE_FDPATH:
        bind(c, &c->fd_ix, a[0] + 1, file_for(c, str, slen));
        v->hidden = 1;
        return c->oom ? -1 : 0; /* a mapping, not an event */
    case LP_ROLE_OPEN: {
        uint32_t ix = file_for(c, str, slen);
        if (ix != UINT32_MAX) {
            file = &c->files[ix];
            if (ret >= 0) {
                file->opens += (uint64_t)counting;
                bind(c, &c->fd_ix, (uint64_t)ret + 1, ix);
            }
        }
        break;
    }
    case LP_ROLE_FOPEN: {
        uint32_t ix = file_for(c, str, slen);
        if (ix != UINT32_MAX) {
            file = &c->files[ix];
            if (ret) {
                file->opens += (uint64_t)counting;
                bind(c, &c->stream_ix, (uint64_t)ret, ix);
            }
        }
        break;
    }
    case LP_ROLE_SOCKET: /* a descriptor with no peer yet: "socket" */
        if (ret >= 0) bind(c, &c->fd_ix, (uint64_t)ret + 1, file_for(c, str, slen));
        break;
    case LP_ROLE_PIPE: /* two descriptors: "pipe", "socketpair" */
        if (ret == 0) {
            uint32_t ix = file_for(c, str, slen);
            bind(c, &c->fd_ix, a[0] + 1, ix);
            bind(c, &c->fd_ix, a[1] + 1, ix);
        }
        break;
    case LP_ROLE_PEER: { /* connect: fd gets the peer; accept: the new descriptor does */
        int64_t fd = call == LP_CALL_CONNECT ? (int64_t)a[0] : ret;
        int ok = call == LP_CALL_CONNECT ? (ret == 0 || ret == -115 /* EINPROGRESS */) : ret >= 0;
        uint32_t ix = file_for(c, str, slen);
        if (ix != UINT32_MAX) {
            file = &c->files[ix];
            file->peer = 1;
            if (ok) {
                file->opens += (uint64_t)counting;
                bind(c, &c->fd_ix, (uint64_t)fd + 1, ix);
            }
        }
        break;
    }
    case LP_ROLE_DUP: { /* the new descriptor names what the old one named */
        uint64_t ix;
        if (ret >= 0 && lp_map_get(&c->fd_ix, a[0] + 1, &ix))
            bind(c, &c->fd_ix, (uint64_t)ret + 1, (uint32_t)ix);
        else if (ret >= 0) { /* unknown: so is the copy (dup2 over a known descriptor forgets it) */
            uint64_t dummy;
            lp_map_take(&c->fd_ix, (uint64_t)ret + 1, &dummy);
        }
        break;
    }
    case LP_ROLE_CLOSE:
    case LP_ROLE_READ:
    case LP_ROLE_WRITE:
    case LP_ROLE_FDOP:
        file = fd_file(c, (int64_t)a[0], 0, 0);
        if (file && counting) {
            if (role == LP_ROLE_READ && ret > 0) {
                file->reads++;
                file->rbytes += (uint64_t)ret;
                bytes = (uint64_t)ret;
            } else if (role == LP_ROLE_READ)
                file->reads++;
            else if (role == LP_ROLE_WRITE) {
                file->writes++;
                if (ret > 0) {
                    file->wbytes += (uint64_t)ret;
                    bytes = (uint64_t)ret;
                }
            } else
                file->other++;
        }
        if (role == LP_ROLE_CLOSE && ret == 0) {
            uint64_t dummy;
            lp_map_take(&c->fd_ix, a[0] + 1, &dummy);
        }
        break;
    case LP_ROLE_FREAD:
    case LP_ROLE_FWRITE:
    case LP_ROLE_FOP:
    case LP_ROLE_FCLOSE:
        file = fd_file(c, 0, 1, a[0]);
        if (file && counting) {
            bytes = role == LP_ROLE_FREAD || role == LP_ROLE_FWRITE ? a[2] : 0;
            if (role == LP_ROLE_FREAD) {
                file->reads++;
                file->rbytes += bytes;
            } else if (role == LP_ROLE_FWRITE) {
                file->writes++;
                file->wbytes += bytes;
            } else
                file->other++;
        }
        if (role == LP_ROLE_FCLOSE) {
            uint64_t dummy;
            lp_map_take(&c->stream_ix, a[0], &dummy);
        }
        break;
    case LP_ROLE_MMAP:
        if ((a[3] & MAP_ANONYMOUS) && a[5] != (uint64_t)(uintptr_t)MAP_FAILED) {
            uint64_t old = 0;
            int rc = lp_map_put(&c->maps, a[5], a[1], &old);
            if (rc < 0) c->oom = 1;
            if (rc == 1) c->mmap_live -= old;
            c->mmap_live += a[1];
            c->maps_made++;
            bytes = a[1];
            mmap_changed(c, v, e->ns);
        } else if ((int64_t)a[4] >= 0) {
            file = fd_file(c, (int64_t)a[4], 0, 0);
        }
        break;
    case LP_ROLE_MUNMAP: {
        uint64_t len;
        if ((int64_t)a[2] == 0 && lp_map_take(&c->maps, a[0], &len)) {
            uint64_t gone = a[1] < len ? a[1] : len;
            if (gone < len && lp_map_put(&c->maps, a[0] + gone, len - gone, NULL) < 0) c->oom = 1;
            c->mmap_live -= gone;
            c->maps_removed++;
            bytes = gone;
            mmap_changed(c, v, e->ns);
        }
        break;
    }
    case LP_ROLE_MREMAP: {
        uint64_t len;
        if (a[3] != (uint64_t)(uintptr_t)MAP_FAILED && lp_map_take(&c->maps, a[0], &len)) {
            c->mmap_live = c->mmap_live - len + a[2];
            if (lp_map_put(&c->maps, a[3], a[2], NULL) < 0) c->oom = 1;
            mmap_changed(c, v, e->ns);
        }
        break;
    }
    case LP_ROLE_CREATE: c->threads_made += ret == 0; break;
    case LP_ROLE_GEMM:
    case LP_ROLE_GEMV:
    case LP_ROLE_VEC:
        if (counting) {
            struct shape *s = role == LP_ROLE_GEMM   ? shape_for(c, call, a[0], a[1], a[2], a[3])
                              : role == LP_ROLE_GEMV ? shape_for(c, call, a[0], a[1], 0, a[2])
                                                     : shape_for(c, call, a[0], 0, 0, a[1]);
            if (s) add(c, &s->st, e, 0);
        }
        break;
    case LP_ROLE_DNNL:
        if (counting) {
            add(c, by_id(c, &c->dnnl_kind, &c->ndnnl_kind, &c->capdnnl_kind, a[0]), e, 0);
            add(c, by_id(c, &c->dnnl_shape, &c->ndnnl_shape, &c->capdnnl_shape, a[1]), e, 0);
        }
        break;
    default: break;
    }
    if (file && counting && e->timed) file->time_ns += e->dur_ns;
    if (counting) add(c, &c->fn[call], e, bytes);
    if (counting && (role == LP_ROLE_CREATE || role == LP_ROLE_THREAD) && a[1])
        flow(c, e, role == LP_ROLE_CREATE, a[1], v);
    if (file && role != LP_ROLE_OPEN && role != LP_ROLE_FOPEN) {
        v->file = file->path;
        v->file_len = file->len;
    }
    v->counting = counting;
    return c->oom ? -1 : 0;
}

int lp_calls_finish(struct lp_calls *c) {
    const struct lp_reader *r = c->r;
    for (uint32_t i = 0; i < r->nshort_chunks; i++) {
        const struct lp_short_ref *sc = &r->short_chunks[i];
        for (uint32_t j = 0; j < sc->n; j++) {
            struct lp_short s;
            memcpy(&s, &sc->s[j], sizeof s);
            if (s.call == 0 || s.call >= LP_CALL_COUNT || s.count == 0) continue;
            /* ticks -> ns with the trace's clock fit; each placed at the group's mean */
            uint64_t total = lp_ticks_to_ns(r, s.ticks);
            if (lp_fnstat_add(&c->fn[s.call], s.count, 1, total / s.count, 0, 0) != 0) return -1;
            c->fn[s.call].total_ns += total - (total / s.count) * s.count; /* keep the exact total */
            c->short_calls += s.count;
        }
    }
    return 0;
}

/* ---- reports ------------------------------------------------------------------------------ */

static int cmp_file_time(const void *x, const void *y) {
    const struct file *a = *(const struct file *const *)x, *b = *(const struct file *const *)y;
    return a->time_ns < b->time_ns ? 1 : a->time_ns > b->time_ns ? -1 : 0;
}

static int cmp_shape_time(const void *x, const void *y) {
    const struct shape *a = *(const struct shape *const *)x, *b = *(const struct shape *const *)y;
    return a->st.total_ns < b->st.total_ns ? 1 : a->st.total_ns > b->st.total_ns ? -1 : 0;
}

static const struct file **sorted_files(const struct lp_calls *c) {
    const struct file **v = lp_os_malloc((c->nfiles + 1) * sizeof *v);
    if (!v) return NULL;
    for (uint32_t i = 0; i < c->nfiles; i++) v[i] = &c->files[i];
    lp_sort(v, c->nfiles, sizeof *v, cmp_file_time);
    return v;
}

static const struct shape **sorted_shapes(const struct lp_calls *c) {
    const struct shape **v = lp_os_malloc((c->nshapes + 1) * sizeof *v);
    if (!v) return NULL;
    for (uint32_t i = 0; i < c->nshapes; i++) v[i] = &c->shapes[i];
    lp_sort(v, c->nshapes, sizeof *v, cmp_shape_time);
    return v;
}

static int file_used(const struct file *f) { return f->opens || f->reads || f->writes || f->other; }

static void shape_label(const struct shape *s, char *buf, size_t len) {
    static const char tr[] = "NTC?";
    const char *n = lp_blas_name(s->call, s->op);
    if (s->call == LP_CALL_GEMM)
        snprintf(buf, len, "%s %llux%llux%llu %c%c", n, (unsigned long long)s->m, (unsigned long long)s->n,
                 (unsigned long long)s->k, tr[(s->op >> LP_BLAS_TA_SHIFT) & 3], tr[(s->op >> LP_BLAS_TB_SHIFT) & 3]);
    else if (s->call == LP_CALL_GEMV)
        snprintf(buf, len, "%s %llux%llu %c", n, (unsigned long long)s->m, (unsigned long long)s->n,
                 tr[(s->op >> LP_BLAS_TA_SHIFT) & 3]);
    else
        snprintf(buf, len, "%s %llu", n, (unsigned long long)s->m);
}

static double gflops(const struct shape *s) {
    return s->st.total_ns ? (double)flops(s) * (double)s->st.timed / (double)s->st.total_ns : 0;
}

/* {"name":{"count":N,"total_ns":T},...} for statistics indexed by interned name id */
static void named_stats_json(const struct lp_calls *c, struct lp_json *j, const struct fnstat *st, uint32_t n) {
    lp_json_object(j);
    for (uint32_t id = 0; id < n; id++) {
        const struct fnstat *f = &st[id];
        if (!f->count) continue;
        uint32_t len;
        const char *name = lp_reader_name(c->r, id, &len);
        lp_json_keyn(j, name, len);
        lp_json_object(j);
        lp_json_kus(j, "count", LP_U(f->count), "total_ns", LP_U(f->total_ns), NULL);
        lp_json_object_end(j);
    }
    lp_json_object_end(j);
}

/* The files, then the sockets' peers: the same columns. */
static void files_json(const struct lp_calls *c, struct lp_json *j) {
    for (int peers = 0; peers < 2; peers++) {
        lp_json_karray(j, peers ? "peers" : "files");
        const struct file **fv = sorted_files(c);
        for (uint32_t i = 0; fv && i < c->nfiles; i++) {
            const struct file *f = fv[i];
            if (!file_used(f) || f->peer != peers) continue;
            lp_json_object(j);
            lp_json_ks(j, peers ? "peer" : "path", f->path, f->len);
            lp_json_kus(j, peers ? "connections" : "opens", LP_U(f->opens), "reads", LP_U(f->reads), "read_bytes",
                        LP_U(f->rbytes), "writes", LP_U(f->writes), "write_bytes", LP_U(f->wbytes), "other",
                        LP_U(f->other), "time_ns", LP_U(f->time_ns), NULL);
            lp_json_object_end(j);
        }
        lp_json_array_end(j);
        lp_os_free(fv);
    }
}

void lp_calls_metadata(const struct lp_calls *c, struct lp_json *j, int capped) {
    lp_json_kobject(j, "calls");
    for (unsigned k = 1; k < LP_CALL_COUNT; k++) {
        const struct fnstat *f = &c->fn[k];
        if (!f->count) continue;
        lp_json_kobject(j, lp_call_names[k]);
        const char *fam = lp_family_names[lp_call_family[k]];
        lp_json_ks(j, "family", fam, strlen(fam));
        lp_json_kus(j, "count", LP_U(f->count), "total_ns", LP_U(f->total_ns), "p50_ns", LP_U(lp_percentile(f, 0.5)),
                    "p99_ns", LP_U(lp_percentile(f, 0.99)), "bytes", LP_U(f->bytes), NULL);
        lp_json_object_end(j);
    }
    lp_json_object_end(j);
    lp_json_kus(j, "calls_under_min_ns", LP_U(c->short_calls), "threads_created", LP_U(c->threads_made), NULL);
    lp_json_kobject(j, "mmap_anon");
    lp_json_kus(j, "maps", LP_U(c->maps_made), "unmaps", LP_U(c->maps_removed), "peak_bytes", LP_U(c->mmap_peak),
                "peak_time_ns", LP_U(c->mmap_peak_ns), "live_at_exit", LP_U(c->mmap_live), NULL);
    lp_json_kb(j, "counter_capped", capped);
    lp_json_object_end(j);
    files_json(c, j);
    lp_json_karray(j, "blas");
    const struct shape **sv = sorted_shapes(c);
    for (uint32_t i = 0; sv && i < c->nshapes; i++) {
        const struct shape *s = sv[i];
        char label[128];
        shape_label(s, label, sizeof label);
        const char *routine = lp_blas_name(s->call, s->op);
        lp_json_object(j);
        lp_json_ks(j, "name", label, strlen(label));
        lp_json_ks(j, "routine", routine, strlen(routine));
        lp_json_kus(j, "m", LP_U(s->m), "n", LP_U(s->n), "k", LP_U(s->k), "count", LP_U(s->st.count), "total_ns",
                    LP_U(s->st.total_ns), NULL);
        lp_json_kd(j, "gflops", "%.3f", gflops(s));
        lp_json_object_end(j);
    }
    lp_os_free(sv);
    lp_json_array_end(j);
    lp_json_kobject(j, "dnnl");
    lp_json_key(j, "kinds");
    named_stats_json(c, j, c->dnnl_kind, c->ndnnl_kind);
    lp_json_key(j, "shapes");
    named_stats_json(c, j, c->dnnl_shape, c->ndnnl_shape);
    lp_json_object_end(j);
}

/* One CSV row in the core's columns, plus `gflops` (BLAS shape rows only); shared with convert.c. */
void lp_csv_row(struct lp_out *o, const char *name, size_t len, const char *cat, const struct fnstat *f, double gf) {
    if (!f->count) return;
    lp_out_csv_str(o, name, len);
    lp_out_fmt(o, ",%s,%llu,", cat, (unsigned long long)f->count);
    if (f->timed)
        lp_out_fmt(o, "%llu,%llu,%llu,%llu,%llu,%llu,%llu,", (unsigned long long)f->total_ns,
                   (unsigned long long)(f->total_ns / f->timed), (unsigned long long)f->min_ns,
                   (unsigned long long)lp_percentile(f, 0.50), (unsigned long long)lp_percentile(f, 0.90),
                   (unsigned long long)lp_percentile(f, 0.99), (unsigned long long)f->max_ns);
    else
        lp_out_s(o, ",,,,,,,");
    lp_out_fmt(o, "%llu,", (unsigned long long)f->bytes);
    if (gf > 0) lp_out_fmt(o, "%.3f", gf);
    lp_out_s(o, ",\n"); /* temporary: allocation sites only */
}

void lp_calls_csv(const struct lp_calls *c, struct lp_out *o) {
    for (unsigned k = 1; k < LP_CALL_COUNT; k++)
        if (lp_call_role[k] != LP_ROLE_FDPATH)
            lp_csv_row(o, lp_call_names[k], strlen(lp_call_names[k]), lp_family_names[lp_call_family[k]], &c->fn[k], 0);
    const struct shape **sv = sorted_shapes(c);
    for (uint32_t i = 0; sv && i < c->nshapes; i++) {
        char label[128];
        shape_label(sv[i], label, sizeof label);
        lp_csv_row(o, label, strlen(label), "blas_shape", &sv[i]->st, gflops(sv[i]));
    }
    lp_os_free(sv);
    for (uint32_t id = 0; id < c->ndnnl_kind; id++) {
        uint32_t len;
        const char *n = lp_reader_name(c->r, id, &len);
        lp_csv_row(o, n, len, "dnnl_kind", &c->dnnl_kind[id], 0);
    }
    for (uint32_t id = 0; id < c->ndnnl_shape; id++) {
        uint32_t len;
        const char *n = lp_reader_name(c->r, id, &len);
        lp_csv_row(o, n, len, "dnnl_shape", &c->dnnl_shape[id], 0);
    }
    const struct file **fv = sorted_files(c);
    for (uint32_t i = 0; fv && i < c->nfiles; i++) {
        const struct file *f = fv[i];
        if (!file_used(f)) continue;
        struct fnstat st = {.count = f->opens + f->reads + f->writes + f->other, .bytes = f->rbytes + f->wbytes};
        lp_out_csv_str(o, f->path, f->len);
        lp_out_fmt(o, ",%s,%llu,%llu,,,,,,,%llu,,\n", f->peer ? "peer" : "file", (unsigned long long)st.count,
                   (unsigned long long)f->time_ns, (unsigned long long)st.bytes);
    }
    lp_os_free(fv);
}

void lp_calls_summary(const struct lp_calls *c, struct lp_out *o, unsigned top) {
    int any = 0;
    for (unsigned k = 1; k < LP_CALL_COUNT; k++) any |= c->fn[k].count && lp_call_role[k] != LP_ROLE_FDPATH;
    if (!any) return;
    lp_out_fmt(o, "  %-24s %-8s %10s %11s %11s %11s %11s\n", "entry point", "family", "calls", "total", "mean", "p50",
               "p99");
    for (unsigned k = 1, rows = 0; k < LP_CALL_COUNT && (!top || rows < top); k++) {
        const struct fnstat *f = &c->fn[k];
        if (!f->count || lp_call_role[k] == LP_ROLE_FDPATH) continue;
        rows++;
        char tot[24] = "-", mean[24] = "-", p50[24] = "-", p99[24] = "-";
        if (f->timed) {
            lp_fmt_ns(tot, sizeof tot, f->total_ns);
            lp_fmt_ns(mean, sizeof mean, f->total_ns / f->timed);
            lp_fmt_ns(p50, sizeof p50, lp_percentile(f, 0.5));
            lp_fmt_ns(p99, sizeof p99, lp_percentile(f, 0.99));
        }
        lp_out_fmt(o, "  %-24s %-8s %10llu %11s %11s %11s %11s\n", lp_call_names[k], lp_family_names[lp_call_family[k]],
                   (unsigned long long)f->count, tot, mean, p50, p99);
    }
    if (c->short_calls)
        lp_out_fmt(o, "  (%llu calls under LIBPROF_MIN_NS are counted above but not in the trace)\n",
                   (unsigned long long)c->short_calls);
    const struct file **fv = sorted_files(c);
    for (int peers = 0; peers < 2; peers++) { /* files, then bytes and time per peer */
        int shown = 0;
        for (uint32_t i = 0; fv && i < c->nfiles && shown < (int)lp_top(top, 12); i++) {
            const struct file *f = fv[i];
            if (!file_used(f) || f->peer != peers) continue;
            if (!shown++)
                lp_out_fmt(o, "  %-44s %6s %8s %10s %8s %10s %10s\n", peers ? "peer" : "file",
                           peers ? "conns" : "opens", "reads", "read", "writes", "written", "time");
            char t[24], rb[24], wb[24];
            lp_fmt_ns(t, sizeof t, f->time_ns);
            snprintf(rb, sizeof rb, "%.1f KiB", (double)f->rbytes / 1024);
            snprintf(wb, sizeof wb, "%.1f KiB", (double)f->wbytes / 1024);
            uint32_t len = f->len;
            const char *p = f->path;
            if (len > 44) {
                p += len - 41;
                len = 41;
            }
            lp_out_fmt(o, "  %s%-*.*s %6llu %8llu %10s %8llu %10s %10s\n", f->len > 44 ? "..." : "",
                       f->len > 44 ? 41 : 44, (int)len, p, (unsigned long long)f->opens, (unsigned long long)f->reads,
                       rb, (unsigned long long)f->writes, wb, t);
        }
    }
    lp_os_free(fv);
    if (c->maps_made)
        lp_out_fmt(o, "  anonymous mmap: %llu maps, %llu unmaps, peak %.1f MiB, %.1f MiB mapped at exit\n",
                   (unsigned long long)c->maps_made, (unsigned long long)c->maps_removed,
                   (double)c->mmap_peak / 1048576.0, (double)c->mmap_live / 1048576.0);
    const struct shape **sv = sorted_shapes(c);
    for (uint32_t i = 0; sv && i < c->nshapes && i < lp_top(top, 12); i++) {
        if (i == 0) lp_out_fmt(o, "  %-32s %10s %11s %11s %9s\n", "BLAS shape", "calls", "total", "mean", "GFLOP/s");
        char label[128], t[24], m[24];
        shape_label(sv[i], label, sizeof label);
        lp_fmt_ns(t, sizeof t, sv[i]->st.total_ns);
        lp_fmt_ns(m, sizeof m, sv[i]->st.timed ? sv[i]->st.total_ns / sv[i]->st.timed : 0);
        lp_out_fmt(o, "  %-32s %10llu %11s %11s %9.2f\n", label, (unsigned long long)sv[i]->st.count, t, m,
                   gflops(sv[i]));
    }
    lp_os_free(sv);
    int dn = 0;
    for (uint32_t id = 0; id < c->ndnnl_shape; id++) {
        const struct fnstat *f = &c->dnnl_shape[id];
        if (!f->count || (top && dn >= (int)top)) continue;
        if (!dn++) lp_out_fmt(o, "  %-64s %8s %11s\n", "oneDNN primitive", "calls", "total");
        uint32_t len;
        const char *n = lp_reader_name(c->r, id, &len);
        char t[24];
        lp_fmt_ns(t, sizeof t, f->total_ns);
        lp_out_fmt(o, "  %-64.*s %8llu %11s\n", (int)(len > 64 ? 64 : len), n, (unsigned long long)f->count, t);
    }
}
