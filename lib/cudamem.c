/* cudamem.c: see cudamem.h. Blocks by pointer in a hash map (pointer -> bytes and site), sites in
 * a small array (a program has few device allocation sites; PyTorch's allocator one or two),
 * the counter's points kept for the Chrome trace (one per allocation and free: device
 * allocations are few — a caching allocator's whole point). */
#define _GNU_SOURCE
#include "cudamem.h"
#include "json.h"

#include <string.h>

#include <errno.h>

#include "describe.h"
#include "sites.h"
#include "fmt.h"
#include "map.h"
#include "os.h"
#include "symbols.h"
#include "vec.h"
#include "views.h"
#include "analysis.h"
#include "calls.h"

struct site {
    uint32_t stack;
    uint64_t allocs, bytes, live, at_peak;
};
struct point {
    uint64_t ns, bytes;
};

struct lp_cudamem {
    const struct lp_reader *r;
    struct lp_map blocks; /* pointer -> bytes << 20 | site index */
    struct site *site;
    size_t nsite, capsite;
    struct point *pt;
    size_t npt, cappt;
    uint64_t live, peak, peak_ns, allocs, frees, failed, unknown_frees, leaked_blocks;
    struct lp_syms *syms;
};

struct lp_cudamem *lp_cudamem_new(const struct lp_reader *r) {
    struct lp_cudamem *m = lp_os_calloc(1, sizeof *m);
    if (m) m->r = r;
    return m;
}

void lp_cudamem_free(struct lp_cudamem *m) {
    if (!m) return;
    lp_map_free(&m->blocks);
    lp_os_free(m->site);
    lp_os_free(m->pt);
    lp_os_free(m);
}

static long site_of(struct lp_cudamem *m, uint32_t stack) {
    for (size_t i = 0; i < m->nsite; i++)
        if (m->site[i].stack == stack) return (long)i;
    if (m->nsite >= (1u << 20) || LP_RESERVE(m->site, m->capsite, m->nsite + 1) != 0) return -1;
    m->site[m->nsite] = (struct site){stack, 0, 0, 0, 0};
    return (long)m->nsite++;
}

static int point(struct lp_cudamem *m, uint64_t ns) {
    if (LP_RESERVE(m->pt, m->cappt, m->npt + 1) != 0) return -1;
    m->pt[m->npt++] = (struct point){ns, m->live};
    return 0;
}

int lp_cudamem_call(struct lp_cudamem *m, const struct lp_event *e, const struct lp_call_rec *c) {
    unsigned call = c->call;
    int alloc = call == LP_CALL_CUDA_MALLOC || call == LP_CALL_CUDA_MALLOC_ASYNC;
    int release = call == LP_CALL_CUDA_FREE || call == LP_CALL_CUDA_FREE_ASYNC;
    if ((!alloc && !release) || c->nargs < 2) return 0;
    int64_t err = (int64_t)c->a[c->nargs - 1];
    uint64_t ptr = c->a[0], end = e->start_ns + e->dur_ns;
    if (err != 0 || !ptr) {
        m->failed += alloc;
        return 0;
    }
    uint64_t v;
    if (alloc) {
        long s = site_of(m, e->stack);
        if (s < 0) return -1;
        uint64_t bytes = c->a[1] & ((UINT64_C(1) << 44) - 1);
        if (lp_map_take(&m->blocks, ptr, &v)) m->live -= v >> 20; /* freed where libprof did not see it */
        if (lp_map_put(&m->blocks, ptr, bytes << 20 | (uint64_t)s, NULL) < 0) return -1;
        m->allocs++;
        m->live += bytes;
        m->site[s].allocs++;
        m->site[s].bytes += bytes;
        m->site[s].live += bytes;
        if (m->live > m->peak) { /* the sites' share of the new peak */
            m->peak = m->live;
            m->peak_ns = end;
            for (size_t i = 0; i < m->nsite; i++) m->site[i].at_peak = m->site[i].live;
        }
        return point(m, end);
    }
    m->frees++;
    if (!lp_map_take(&m->blocks, ptr, &v)) {
        m->unknown_frees++;
        return 0;
    }
    m->live -= v >> 20;
    m->site[v & 0xfffff].live -= v >> 20;
    return point(m, e->start_ns);
}

int lp_cudamem_any(const struct lp_cudamem *m) { return m && (m->allocs || m->frees || m->failed); }

static void view_chrome(const struct lp_analysis *a, struct lp_json *j, uint64_t pid) {
    const struct lp_cudamem *m = a->view[LP_VIEW_CUDAMEM];
    if (!lp_cudamem_any(m)) return;
    for (size_t i = 0; i < m->npt; i++)
        lp_json_counter(j, pid, "cuda device memory", (int64_t)m->pt[i].ns, "bytes", m->pt[i].bytes);
}

/* A site's name: its innermost Python line, else its innermost native frame. */
static const char *site_name(struct lp_cudamem *m, uint32_t stack) {
    struct lp_frames v;
    if (!stack || !lp_stack_view(m->r, stack, &v) || !v.n) return "(no call stack: LIBPROF_STACKS)";
    if (!m->syms && !(m->syms = lp_syms_of(m->r))) return "(no symbols)";
    for (uint32_t i = 0; i < v.n; i++)
        if ((v.f[i] & LP_PYFRAME_BIT) && v.f[i] != LP_FRAME_ELIDED) return lp_syms_function(m->syms, v.f[i], 1);
    return lp_syms_function(m->syms, v.f[0], 1);
}

static int by_bytes(const void *x, const void *y) {
    const struct site *a = x, *b = y;
    return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : 0;
}

static void view_summary(const struct lp_analysis *a, struct lp_out *out, unsigned top) {
    struct lp_cudamem *m = a->view[LP_VIEW_CUDAMEM];
    if (!lp_cudamem_any(m)) return;
    char b1[32], b2[32], b3[32];
    uint64_t leaked = 0;
    for (size_t i = 0; i < m->nsite; i++) leaked += m->site[i].live;
    lp_fmt_bytes(b1, sizeof b1, m->peak);
    lp_fmt_bytes(b2, sizeof b2, leaked);
    lp_fmt_ns(b3, sizeof b3, (int64_t)m->peak_ns);
    lp_out_fmt(out,
               "  CUDA device memory: %llu allocations, %llu frees (%llu failed allocations); peak %s at %s; "
               "%s still allocated at exit in %zu blocks\n",
               (unsigned long long)m->allocs, (unsigned long long)m->frees, (unsigned long long)m->failed, b1, b3, b2,
               (size_t)m->blocks.n);
    lp_sort(m->site, m->nsite, sizeof *m->site, by_bytes);
    lp_out_fmt(out, "  %10s %12s %12s %12s  %s\n", "allocs", "bytes", "at peak", "at exit", "site");
    for (size_t i = 0; i < m->nsite && i < lp_top(top, 10); i++) {
        lp_fmt_bytes(b1, sizeof b1, m->site[i].bytes);
        lp_fmt_bytes(b2, sizeof b2, m->site[i].at_peak);
        lp_fmt_bytes(b3, sizeof b3, m->site[i].live);
        lp_out_fmt(out, "  %10llu %12s %12s %12s  %s\n", (unsigned long long)m->site[i].allocs, b1, b2, b3,
                   site_name(m, m->site[i].stack));
    }
}

static int by_at_peak(const void *x, const void *y) {
    const struct site *a = x, *b = y;
    return a->at_peak < b->at_peak ? 1 : a->at_peak > b->at_peak ? -1 : 0;
}

void lp_cudamem_folded_peak(struct lp_cudamem *m, struct lp_out *out) {
    if (!m->syms && !(m->syms = lp_syms_of(m->r))) {
        out->err = ENOMEM;
        return;
    }
    lp_sort(m->site, m->nsite, sizeof *m->site, by_at_peak);
    for (size_t i = 0; i < m->nsite && m->site[i].at_peak; i++) {
        lp_folded_stack(out, m->r, m->syms, m->site[i].stack);
        lp_out_fmt(out, " %llu\n", (unsigned long long)m->site[i].at_peak);
    }
}

static void view_metadata(const struct lp_analysis *a, struct lp_json *j) {
    struct lp_cudamem *m = a->view[LP_VIEW_CUDAMEM];
    if (!lp_cudamem_any(m)) return;
    uint64_t leaked = 0;
    for (size_t i = 0; i < m->nsite; i++) leaked += m->site[i].live;
    lp_json_kobject(j, "cuda_memory");
    lp_json_kus(j, "allocs", LP_U(m->allocs), "frees", LP_U(m->frees), "failed_allocs", LP_U(m->failed),
                "unknown_frees", LP_U(m->unknown_frees), "peak_bytes", LP_U(m->peak), "peak_ns", LP_U(m->peak_ns),
                "leaked_bytes", LP_U(leaked), "leaked_blocks", LP_U(m->blocks.n), NULL);
    lp_json_karray(j, "sites");
    lp_sort(m->site, m->nsite, sizeof *m->site, by_bytes);
    for (size_t i = 0; i < m->nsite; i++) {
        const char *name = site_name(m, m->site[i].stack);
        lp_json_object(j);
        lp_json_ks(j, "site", name, strlen(name));
        lp_json_kus(j, "allocs", LP_U(m->site[i].allocs), "bytes", LP_U(m->site[i].bytes), "at_peak",
                    LP_U(m->site[i].at_peak), "at_exit", LP_U(m->site[i].live), NULL);
        lp_json_object_end(j);
    }
    lp_json_array_end(j);
    lp_json_object_end(j);
}

/* ---- the view (views.h): CUDA device memory, from the cuda family's allocations */
#define CUDAMEM(a) ((struct lp_cudamem *)(a)->view[LP_VIEW_CUDAMEM])
#define SHAPE(s) (1u << LP_SHAPE_##s)
static int view_create(struct lp_analysis *a) { return (a->view[LP_VIEW_CUDAMEM] = lp_cudamem_new(a->r)) ? 0 : -1; }
static int view_event(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s) {
    return lp_call_family[s->call->call] == LP_FAM_CUDA ? lp_cudamem_call(CUDAMEM(a), e, s->call) : 0;
}
static void view_destroy(struct lp_analysis *a) { lp_cudamem_free(CUDAMEM(a)); }

// clang-format off
const struct lp_view lp_view_cudamem = {"cuda memory", SHAPE(CALL), view_create, view_event, NULL, NULL, view_destroy, view_summary, NULL, view_chrome, view_metadata};
// clang-format on
