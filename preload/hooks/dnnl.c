/* dnnl.c: the oneDNN family — dnnl_primitive_execute, named by the primitive's kind
 * (convolution, inner product, matmul, reorder, eltwise, pooling, ...) with its tensor shapes
 * and implementation, as PyTorch's CPU build runs its convolutions.
 *
 * What a primitive is never changes, so it is asked once, through oneDNN's own query API, and
 * cached by primitive pointer (lock-free table; dnnl_primitive_destroy forgets the entry, as
 * the address may be reused). The two strings become interned names, so each record carries
 * two small ids. Shapes are read from oneDNN 2.x memory descriptors (a public struct there);
 * with oneDNN 3 (opaque descriptors) the kind and implementation are still given. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "hook.h"

typedef int dnnl_status_t;
dnnl_status_t dnnl_primitive_execute(const void *prim, void *stream, int nargs, const void *args);
dnnl_status_t dnnl_primitive_destroy(void *prim);

LP_REAL_SLOT(dnnl_primitive_execute)
LP_REAL_SLOT(dnnl_primitive_destroy)
static void *q_get_pd, *q_query, *q_query_md, *q_kind2str, *q_md_query;

/* dnnl_query_t values, the same in oneDNN 2 and 3 */
enum { Q_PRIMITIVE_KIND = 2, Q_IMPL_INFO_STR = 8, Q_SRC_MD = 129, Q_WEIGHTS_MD = 131, Q_DST_MD = 133 };

/* oneDNN 2.x dnnl_memory_desc_t starts with these fields. */
struct md2 {
    int ndims;
    int64_t dims[12];
    int data_type;
};

#define CACHE 4096
static struct { uint64_t key, val; } cache[CACHE];

static unsigned slot_of(uint64_t p) { return (unsigned)((p >> 4) * 0x9E3779B97F4A7C15ull >> 52) & (CACHE - 1); }

static size_t dims(char *buf, size_t len, const char *label, const void *mdp) {
    const struct md2 *md = mdp;
    if (!md || md->ndims <= 0 || md->ndims > 12 || len < 32) return 0;
    size_t o = (size_t)snprintf(buf, len, "%s%s ", label[0] == 's' ? "" : " ", label);
    for (int i = 0; i < md->ndims && o + 24 < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "x" : "", (long long)md->dims[i]);
    return o;
}

/* kind name id | shape name id << 32 */
static uint64_t describe(const void *prim) {
    dnnl_status_t (*get_pd)(const void *, const void **) = lpr_next(&q_get_pd, "dnnl_primitive_get_primitive_desc");
    dnnl_status_t (*query)(const void *, int, int, void *) = lpr_next(&q_query, "dnnl_primitive_desc_query");
    const void *(*query_md)(const void *, int, int) = lpr_next(&q_query_md, "dnnl_primitive_desc_query_md");
    const char *(*kind2str)(int) = lpr_next(&q_kind2str, "dnnl_prim_kind2str");
    int v3 = lpr_next(&q_md_query, "dnnl_memory_desc_query") != NULL;
    const void *pd = NULL;
    char kind[64] = "primitive", shape[512];
    size_t o = 0;
    shape[0] = '\0';
    if (get_pd && query && get_pd(prim, &pd) == 0 && pd) {
        int k = 0;
        if (query(pd, Q_PRIMITIVE_KIND, 0, &k) == 0) {
            const char *s = kind2str ? kind2str(k) : NULL;
            if (s)
                snprintf(kind, sizeof kind, "%s", s);
            else
                snprintf(kind, sizeof kind, "primitive kind %d", k);
        }
        if (query_md && !v3) {
            o += dims(shape + o, sizeof shape - o, "src", query_md(pd, Q_SRC_MD, 0));
            o += dims(shape + o, sizeof shape - o, "wei", query_md(pd, Q_WEIGHTS_MD, 0));
            o += dims(shape + o, sizeof shape - o, "dst", query_md(pd, Q_DST_MD, 0));
        }
        const char *impl = NULL;
        if (query(pd, Q_IMPL_INFO_STR, 0, &impl) == 0 && impl)
            snprintf(shape + o, sizeof shape - o, "%s(%s)", o ? " " : "", impl);
    }
    uint64_t kid = lpr_name_id(kind);
    char full[600];
    snprintf(full, sizeof full, "%s %s", kind, shape);
    uint64_t sid = lpr_name_id(full);
    return kid | sid << 32;
}

static uint64_t lookup(const void *prim) {
    uint64_t key = (uint64_t)(uintptr_t)prim;
    unsigned s = slot_of(key);
    for (unsigned i = 0; i < 16; i++, s = (s + 1) & (CACHE - 1)) {
        uint64_t k = __atomic_load_n(&cache[s].key, __ATOMIC_ACQUIRE);
        if (k == key) {
            uint64_t v = __atomic_load_n(&cache[s].val, __ATOMIC_ACQUIRE);
            if (v) return v;
            v = describe(prim);
            __atomic_store_n(&cache[s].val, v, __ATOMIC_RELEASE);
            return v;
        }
        if (k == 0) {
            uint64_t v = describe(prim);
            uint64_t zero = 0;
            if (__atomic_compare_exchange_n(&cache[s].key, &zero, key, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
                zero == key)
                __atomic_store_n(&cache[s].val, v, __ATOMIC_RELEASE);
            return v;
        }
    }
    return describe(prim); /* table crowded here: ask every time (slow, still right) */
}

LP_EXPORT dnnl_status_t dnnl_primitive_execute(const void *prim, void *stream, int nargs, const void *args) {
    dnnl_status_t (*f)(const void *, void *, int, const void *) = LP_REAL(dnnl_primitive_execute);
    if (!f) return 5; /* dnnl_runtime_error */
    struct lpr_tls *t = lpr_call_begin(LP_FAM_DNNL);
    uint64_t t0 = t ? lpr_ticks() : 0;
    dnnl_status_t r = f(prim, stream, nargs, args);
    if (t) {
        uint64_t t1 = lpr_ticks();
        uint8_t g = lpr_guard_hold(t); /* the queries' allocations are libprof's */
        uint64_t v = lookup(prim);
        lpr_guard_restore(t, g);
        uint64_t a[3] = {v & 0xffffffffu, v >> 32, (uint64_t)(uintptr_t)prim};
        uint32_t sid = 0;
        if (LP_UNLIKELY(lpr_stack_depth)) { /* the call site of the primitive */
            g = lpr_guard_hold(t);
            LP_STACK_CAPTURE(sid);
            lpr_guard_restore(t, g);
        }
        lpr_call_record_stack(t, sid, LP_CALL_DNNL_EXEC, t0, t1, 3, a);
    }
    return r;
}

LP_EXPORT dnnl_status_t dnnl_primitive_destroy(void *prim) {
    dnnl_status_t (*f)(void *) = LP_REAL(dnnl_primitive_destroy);
    if (!f) return 5;
    uint64_t key = (uint64_t)(uintptr_t)prim;
    unsigned s = slot_of(key);
    for (unsigned i = 0; i < 16; i++, s = (s + 1) & (CACHE - 1)) {
        if (__atomic_load_n(&cache[s].key, __ATOMIC_ACQUIRE) == key) {
            __atomic_store_n(&cache[s].val, 0, __ATOMIC_RELEASE);
            break;
        }
    }
    return f(prim);
}
