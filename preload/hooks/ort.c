/* ort.c: the ort family — ONNX Runtime sessions and runs, from unmodified programs.
 *
 * Every ORT binding (C, C++, Node, C#, Java) reaches the runtime through OrtGetApiBase() and the
 * OrtApi table of function pointers it hands out. libprof exports OrtGetApiBase: a program (or a
 * binding's addon) that asks for it gets libprof's, which asks the real one and hands back the
 * same table with a few entries replaced by wrappers — CreateSession, CreateSessionFromArray and
 * their prepacked-weights variants, Run, RunWithBinding, RunAsync, ReleaseSession, the
 * execution-provider appends, the profiling switches. The real OrtGetApiBase is looked for in every loaded object (node's addon
 * loads libonnxruntime.so.1 with local scope: dlsym(RTLD_NEXT) from a preload does not see it).
 *
 * The table is a C ABI that only grows; the entries used here sit at fixed positions
 * (onnxruntime_c_api.h; declared below with the version that added them, ORT's headers are not
 * needed to build), so any ORT and any version a program asks for work: an entry is wrapped only
 * in the copy of a version that has it. A program asking for version V gets a copy of the
 * library's table for V, as long as the library's (what the program may call is in it); the copy
 * is bounded by the library's mapped segment.
 *
 * Records: ort.CreateSession (model path, or "<memory, N bytes>"; the execution providers
 * appended to its options), ort.Run (model base name, inputs "name dtype[shape]", output names;
 * api RunWithBinding / RunAsync for those), ort.ReleaseSession. The inputs are described before
 * the run through the table's own accessors, with the guard held (their allocations are
 * libprof's, not the program's). Python's onnxruntime package calls its C++ core directly, not
 * this table: it is not seen here. */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../core/sys.h"
#include "hook.h"

struct OrtApiBase {
    const void *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
};

/* positions in the OrtApi table (version 1, never moved) */
enum {
    I_CREATE_SESSION = 7,
    I_CREATE_SESSION_FROM_ARRAY = 8,
    I_RUN = 9,
    I_CLONE_SESSION_OPTIONS = 12,
    I_ENABLE_PROFILING = 14,
    I_DISABLE_PROFILING = 15,
    I_IS_TENSOR = 50,
    I_GET_TENSOR_ELEMENT_TYPE = 60,
    I_GET_DIMENSIONS_COUNT = 61,
    I_GET_DIMENSIONS = 62,
    I_GET_TENSOR_TYPE_AND_SHAPE = 65,
    I_ALLOCATOR_FREE = 76,
    I_GET_ALLOCATOR_WITH_DEFAULT_OPTIONS = 78,
    I_RELEASE_STATUS = 93,
    I_RELEASE_SESSION = 95,
    I_RELEASE_TENSOR_TYPE_AND_SHAPE_INFO = 99,
    I_RELEASE_SESSION_OPTIONS = 100,
    V1_ENTRIES = 102,
    I_SESSION_END_PROFILING = 110,               /* version 2 */
    I_RUN_WITH_BINDING = 133,                    /* 5 */
    I_GET_BOUND_OUTPUT_NAMES = 139,              /* 5 */
    I_CREATE_SESSION_PREPACKED = 168,            /* 8 */
    I_CREATE_SESSION_FROM_ARRAY_PREPACKED = 169, /* 8 */
    I_APPEND_EXECUTION_PROVIDER = 216,           /* 12: by name */
    I_RUN_ASYNC = 260,                           /* 16 */
};
/* Entries of each version's table (the "End of Version N" marks of onnxruntime_c_api.cc): an
 * entry is wrapped only in a copy for a version that has it. */
static const uint16_t version_entries[] = {0,   102, 119, 125, 127, 150, 158, 162, 170, 192,
                                           204, 210, 219, 225, 239, 255, 266, 276, 280};
static int has_entry(uint32_t version, unsigned i) {
    uint32_t v = version < sizeof version_entries / sizeof *version_entries
                     ? version
                     : sizeof version_entries / sizeof *version_entries - 1;
    return i < version_entries[v];
}
#define TABLE_MAX 1024 /* entries copied at most (ORT 1.30 has ~400) */
#define VERSIONS 8     /* distinct versions asked for */

typedef void *status_t; /* OrtStatus*: NULL is success */
static const struct OrtApiBase *real_base;
static struct OrtApiBase our_base;
static void *const *real; /* the library's table (its entries, whatever the version asked) */
static int real_has_v2;
#define ORT_FN(i, type) ((type)real[i]) /* entry i of the library's table */
static struct {
    uint32_t version;
    void *table[TABLE_MAX];
} copies[VERSIONS];
static int ncopies, copying;

/* The end of the mapped segment holding `p` (0 when none). */
struct seg {
    uintptr_t p, end;
};
static int seg_of(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct seg *s = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD && s->p >= lo && s->p < hi) {
            s->end = hi;
            return 1;
        }
    }
    return 0;
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* ---- which session is which model ------------------------------------------------------------ */

#define SESSIONS 64
static struct session {
    void *session;
    char model[120];
    int profiled; /* 1: libprof turned ORT's profiling on (its file is libprof's), 2: the program did */
    int folded;   /* its profile is in the spool */
} models[SESSIONS];
static unsigned next_model;

static struct session *remember(void *session, const char *model, int profiled) {
    if (!session) return NULL;
    unsigned i = __atomic_fetch_add(&next_model, 1, __ATOMIC_RELAXED) % SESSIONS;
    snprintf(models[i].model, sizeof models[i].model, "%s", model);
    models[i].profiled = profiled;
    models[i].folded = 0;
    __atomic_store_n(&models[i].session, session, __ATOMIC_RELEASE);
    return &models[i];
}

static struct session *session_of(void *session) {
    for (unsigned i = 0; i < SESSIONS; i++)
        if (session && __atomic_load_n(&models[i].session, __ATOMIC_ACQUIRE) == session) return &models[i];
    return NULL;
}

static const char *model_of(void *session) {
    struct session *s = session_of(session);
    return s ? s->model : "?";
}

/* ---- Python's InferenceSession ----------------------------------------------------------------- *
 * onnxruntime's Python module holds a copy of ORT of its own, linked in, that exports nothing: no
 * OrtGetApiBase to answer. Its sessions are seen through the methods of its Python classes
 * instead (hooks/python.c, the known functions): these make their records' strings, as the C
 * API's wrappers do — a session remembered by its object, a run named by its method. */
static size_t clamp(int n, size_t cap) { return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1; }

size_t lpr_ort_py_session(const void *self, const char *path, const char *providers, char *s, size_t cap) {
    remember((void *)self, path[0] ? base_name(path) : "<memory>", 0);
    return clamp(snprintf(s, cap, "%s\x1f%s", path[0] ? path : "<memory>", providers), cap);
}

size_t lpr_ort_py_run(const void *self, const char *inputs, const char *outputs, const char *api, char *s, size_t cap) {
    return clamp(snprintf(s, cap, "%s\x1f%s\x1f%s\x1f%s", model_of((void *)self), inputs, outputs, api), cap);
}

/* ---- ORT's own per-node profile ------------------------------------------------------------- *
 * Unless LIBPROF_ORT_NODES=0, every session libprof sees created gets ORT's profiling: on a copy
 * of the program's options (the program's own are left as they are), its file in a private
 * directory. At the session's release libprof ends the profiling, copies the file into the spool
 * (STRING chunk LP_STR_ORT_PROFILE: the converter folds the node events into the trace) and
 * removes it. A program that turned profiling on itself keeps its file where it asked; libprof
 * copies it too, when the program ends the profiling or releases the session. */
#define OPTS 64
static const void *program_profiled[OPTS]; /* options the program called EnableProfiling on */
static char tmpdir[64];
static unsigned next_file;

static int program_profiles(const void *opts) {
    for (unsigned i = 0; i < OPTS; i++)
        if (opts && __atomic_load_n(&program_profiled[i], __ATOMIC_ACQUIRE) == opts) return 1;
    return 0;
}

static void release_status(status_t st) {
    if (st) ORT_FN(I_RELEASE_STATUS, void (*)(status_t))(st);
}

/* The profile file `path` into the spool, for `session`; removed when it is libprof's. */
static void fold_file(void *session, const char *path, int ours) {
    int fd = lpr_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd >= 0) {
        struct stat st;
        if (lpr_sys_fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (1l << 30)) {
            size_t len = (size_t)st.st_size;
            char *buf = lpr_sys_mmap(NULL, len + 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (!lpr_sys_failed((long)buf)) {
                uint32_t key = LP_STR_ORT_PROFILE;
                uint64_t sess = (uint64_t)(uintptr_t)session;
                memcpy(buf, &key, 4);
                memcpy(buf + 4, &sess, 8);
                size_t got = 0;
                while (got < len) {
                    long k = lpr_sys_read(fd, buf + 12 + got, len - got);
                    if (k <= 0) break;
                    got += (size_t)k;
                }
                if (lpr_spool_on) lpr_spool_write(LP_CHUNK_STRING, 0, buf, 12 + got, NULL, 0);
                lpr_sys_munmap(buf, len + 16);
            }
        }
        lpr_sys_close(fd);
    }
    if (ours) {
        lpr_sys_unlink(path);
        LP_SYS(SYS_unlinkat, AT_FDCWD, tmpdir, AT_REMOVEDIR); /* when it was the last */
    }
}

/* End ORT's profiling of `s` and fold its file (the guard held). */
static void end_profiling(struct session *s) {
    if (!s || !s->profiled || s->folded || !real_has_v2) return;
    void *alloc = NULL;
    char *path = NULL;
    status_t st = ORT_FN(I_GET_ALLOCATOR_WITH_DEFAULT_OPTIONS, status_t(*)(void **))(&alloc);
    if (st) {
        release_status(st);
        return;
    }
    st = ORT_FN(I_SESSION_END_PROFILING, status_t(*)(void *, void *, char **))(s->session, alloc, &path);
    if (st) {
        release_status(st);
        return;
    }
    if (path && path[0]) fold_file(s->session, path, s->profiled == 1);
    s->folded = 1;
    if (path) release_status(ORT_FN(I_ALLOCATOR_FREE, status_t(*)(void *, void *))(alloc, path));
}

/* ---- execution providers ------------------------------------------------------------------- *
 * The providers a program appends to session options, remembered per options object so that
 * ort.CreateSession can say what the session asked for ("CUDA, CPU"; "CPU (default)" when none
 * was appended). Each append entry of the table is wrapped by its own small function that knows
 * the provider's name and forwards the argument registers unchanged (every append entry takes
 * at most 5 arguments, all in registers on x86-64 and aarch64; extra ones are ignored by the
 * callee). Only appends that succeed are remembered. */
#define PROVIDER_OPTS 64
static struct {
    const void *opts;
    char names[96];
} providers[PROVIDER_OPTS];

static void provider_added(const void *opts, const char *name) {
    int free_slot = -1;
    for (int i = 0; i < PROVIDER_OPTS; i++) {
        const void *o = __atomic_load_n(&providers[i].opts, __ATOMIC_ACQUIRE);
        if (o == opts) {
            size_t n = strlen(providers[i].names);
            snprintf(providers[i].names + n, sizeof providers[i].names - n, "%s%s", n ? ", " : "", name);
            return;
        }
        if (!o && free_slot < 0) free_slot = i;
    }
    if (free_slot < 0) return; /* more live option objects than slots: the session says "?" */
    const void *none = NULL;
    if (__atomic_compare_exchange_n(&providers[free_slot].opts, &none, opts, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        snprintf(providers[free_slot].names, sizeof providers[free_slot].names, "%s", name);
}

static const char *providers_of(const void *opts) {
    for (int i = 0; i < PROVIDER_OPTS; i++)
        if (opts && __atomic_load_n(&providers[i].opts, __ATOMIC_ACQUIRE) == opts) return providers[i].names;
    return "CPU (default)";
}

typedef status_t (*append_fn)(void *, void *, void *, void *, size_t);
#define APPENDER(idx, name)                                                        \
    static status_t w_append_##idx(void *o, void *a, void *b, void *c, size_t d) { \
        status_t st = ORT_FN(idx, append_fn)(o, a, b, c, d);                       \
        if (!st) provider_added(o, name);                                          \
        return st;                                                                 \
    }
APPENDER(152, "CUDA")
APPENDER(153, "ROCM")
APPENDER(154, "OpenVINO")
APPENDER(159, "TensorRT")
APPENDER(170, "TensorRT")
APPENDER(204, "CUDA")
APPENDER(209, "MIGraphX")
APPENDER(220, "CANN")
APPENDER(239, "DNNL")
APPENDER(275, "OpenVINO")
APPENDER(276, "VitisAI")
/* SessionOptionsAppendExecutionProvider(options, provider name, keys, values, n) */
static status_t w_append_by_name(void *o, void *name, void *keys, void *values, size_t n) {
    status_t st = ORT_FN(I_APPEND_EXECUTION_PROVIDER, append_fn)(o, name, keys, values, n);
    if (!st && name) provider_added(o, (const char *)name);
    return st;
}
static const struct {
    uint16_t index;
    status_t (*fn)(void *, void *, void *, void *, size_t);
} appenders[] = {{152, w_append_152}, {153, w_append_153}, {154, w_append_154},
                 {159, w_append_159}, {170, w_append_170}, {204, w_append_204},
                 {209, w_append_209}, {220, w_append_220}, {239, w_append_239},
                 {275, w_append_275}, {276, w_append_276}, {I_APPEND_EXECUTION_PROVIDER, w_append_by_name}};

/* ---- the wrappers ------------------------------------------------------------------------------ */

static void record(struct lpr_tls *t, unsigned call, uint64_t t0, unsigned nargs, const uint64_t *a, const char *s,
                   size_t len) {
    lpr_call_record(t, call, t0, lpr_ticks(), nargs, a, s, len);
}

/* The options a session is created with: the program's, or (to profile its nodes) a copy with
 * ORT's profiling on, its files in libprof's private directory. *profiled: 1 libprof's, 2 the
 * program's own, 0 none. The copy is released by the caller (release_copy). */
static const void *profiling_options(const void *opts, int *profiled) {
    *profiled = 0;
    if (program_profiles(opts)) {
        *profiled = 2;
        return opts;
    }
    if (!lpr_cfg.ort_nodes || !opts || !real_has_v2) return opts;
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/libprof-ort.%d", lpr_sys_getpid());
        lpr_sys_mkdir(tmpdir, 0700);
    }
    uint8_t g = lpr_guard_hold(&lpr_tls);
    void *copy = NULL;
    status_t st = ORT_FN(I_CLONE_SESSION_OPTIONS, status_t(*)(const void *, void **))(opts, &copy);
    if (!st) {
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s/s%u", tmpdir, __atomic_fetch_add(&next_file, 1, __ATOMIC_RELAXED));
        st = ORT_FN(I_ENABLE_PROFILING, status_t(*)(void *, const char *))(copy, prefix);
        if (st) {
            ORT_FN(I_RELEASE_SESSION_OPTIONS, void (*)(void *))(copy);
            copy = NULL;
        }
    }
    release_status(st);
    lpr_guard_restore(&lpr_tls, g);
    if (!copy) return opts;
    *profiled = 1;
    return copy;
}

static void release_copy(const void *opts, const void *used) {
    if (used == opts) return;
    uint8_t g = lpr_guard_hold(&lpr_tls);
    ORT_FN(I_RELEASE_SESSION_OPTIONS, void (*)(void *))((void *)used);
    lpr_guard_restore(&lpr_tls, g);
}

/* "model\x1fproviders" for a session made from `model` with `opts` */
static size_t session_string(char *buf, size_t cap, const char *model, const void *opts) {
    int n = snprintf(buf, cap, "%s\x1f%s", model, providers_of(opts));
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* After any of the creation entries: the session remembered, the slice recorded. */
static void session_created(struct lpr_tls *t, uint64_t t0, status_t st, void **out, const char *model,
                            const char *shown, const void *opts, const void *use, int profiled) {
    void *s = st == NULL && out ? *out : NULL;
    int saved = errno;
    release_copy(opts, use);
    remember(s, model, profiled);
    char str[256];
    size_t len = session_string(str, sizeof str, shown, opts);
    uint64_t a[2] = {(uint64_t)(uintptr_t)s, st != NULL};
    record(t, LP_CALL_ORT_CREATE_SESSION, t0, 2, a, str, len);
    errno = saved;
}

static status_t w_create_session(const void *env, const char *path, const void *opts, void **out) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    int profiled = 0;
    const void *use = t ? profiling_options(opts, &profiled) : opts;
    uint64_t t0 = t ? lpr_ticks() : 0;
    status_t st =
        ORT_FN(I_CREATE_SESSION, status_t(*)(const void *, const char *, const void *, void **))(env, path, use, out);
    if (t) session_created(t, t0, st, out, path ? base_name(path) : "?", path ? path : "", opts, use, profiled);
    return st;
}

static status_t w_create_session_prepacked(const void *env, const char *path, const void *opts, void *container,
                                           void **out) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    int profiled = 0;
    const void *use = t ? profiling_options(opts, &profiled) : opts;
    uint64_t t0 = t ? lpr_ticks() : 0;
    status_t st = ORT_FN(I_CREATE_SESSION_PREPACKED, status_t(*)(const void *, const char *, const void *, void *,
                                                                 void **))(env, path, use, container, out);
    if (t) session_created(t, t0, st, out, path ? base_name(path) : "?", path ? path : "", opts, use, profiled);
    return st;
}

static status_t w_create_session_from_array(const void *env, const void *data, size_t len, const void *opts,
                                            void **out) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    int profiled = 0;
    const void *use = t ? profiling_options(opts, &profiled) : opts;
    uint64_t t0 = t ? lpr_ticks() : 0;
    status_t st = ORT_FN(I_CREATE_SESSION_FROM_ARRAY, status_t(*)(const void *, const void *, size_t, const void *,
                                                                  void **))(env, data, len, use, out);
    if (t) {
        char m[64];
        snprintf(m, sizeof m, "<memory, %zu bytes>", len);
        session_created(t, t0, st, out, m, m, opts, use, profiled);
    }
    return st;
}

static status_t w_create_session_from_array_prepacked(const void *env, const void *data, size_t len, const void *opts,
                                                      void *container, void **out) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    int profiled = 0;
    const void *use = t ? profiling_options(opts, &profiled) : opts;
    uint64_t t0 = t ? lpr_ticks() : 0;
    status_t st = ORT_FN(I_CREATE_SESSION_FROM_ARRAY_PREPACKED,
                         status_t(*)(const void *, const void *, size_t, const void *, void *, void **))(
        env, data, len, use, container, out);
    if (t) {
        char m[64];
        snprintf(m, sizeof m, "<memory, %zu bytes>", len);
        session_created(t, t0, st, out, m, m, opts, use, profiled);
    }
    return st;
}

static const char *dtype_name(int t) {
    static const char *const names[] = {"?",      "float32", "uint8",     "int8",       "uint16",  "int16",
                                        "int32",  "int64",   "string",    "bool",       "float16", "float64",
                                        "uint32", "uint64",  "complex64", "complex128", "bfloat16"};
    return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "?";
}

/* "x float32[1,64]; mask int64[1,128]" into buf (the table's accessors, the guard held). */
static size_t describe_inputs(char *buf, size_t cap, const char *const *names, const void *const *values, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 64 < cap; i++) {
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? "; " : "", names && names[i] ? names[i] : "?");
        int is_tensor = 0;
        void *info = NULL;
        status_t st = values && values[i] ? ORT_FN(I_IS_TENSOR, status_t(*)(const void *, int *))(values[i], &is_tensor)
                                          : (status_t)1;
        if (st) ORT_FN(I_RELEASE_STATUS, void (*)(status_t))(st == (status_t)1 ? NULL : st);
        if (st || !is_tensor) continue;
        st = ORT_FN(I_GET_TENSOR_TYPE_AND_SHAPE, status_t(*)(const void *, void **))(values[i], &info);
        if (st) {
            ORT_FN(I_RELEASE_STATUS, void (*)(status_t))(st);
            continue;
        }
        int type = 0;
        size_t dims = 0;
        int64_t d[16];
        status_t s1 = ORT_FN(I_GET_TENSOR_ELEMENT_TYPE, status_t(*)(const void *, int *))(info, &type);
        status_t s2 = ORT_FN(I_GET_DIMENSIONS_COUNT, status_t(*)(const void *, size_t *))(info, &dims);
        if (dims > 16) dims = 16;
        status_t s3 = s2 ? NULL : ORT_FN(I_GET_DIMENSIONS, status_t(*)(const void *, int64_t *, size_t))(info, d, dims);
        if (s1) ORT_FN(I_RELEASE_STATUS, void (*)(status_t))(s1), type = 0;
        if (s2) ORT_FN(I_RELEASE_STATUS, void (*)(status_t))(s2), dims = 0;
        if (s3) ORT_FN(I_RELEASE_STATUS, void (*)(status_t))(s3), dims = 0;
        o += (size_t)snprintf(buf + o, cap - o, " %s[", dtype_name(type));
        for (size_t k = 0; k < dims && o + 24 < cap; k++)
            o += (size_t)snprintf(buf + o, cap - o, "%s%lld", k ? "," : "", (long long)d[k]);
        if (o + 2 < cap) buf[o++] = ']';
        ORT_FN(I_RELEASE_TENSOR_TYPE_AND_SHAPE_INFO, void (*)(void *))(info);
    }
    if (o >= cap) o = cap - 1;
    return o;
}

/* "model\x1finputs\x1foutputs[\x1fapi]" of a run into s (the guard held by the caller). */
static size_t describe_run(char *s, size_t cap, void *session, const char *const *in_names, const void *const *inputs,
                           size_t nin, const char *const *out_names, size_t nout, const char *api) {
    size_t len = (size_t)snprintf(s, cap, "%s\x1f", model_of(session));
    len += describe_inputs(s + len, cap - len - 64, in_names, inputs, nin);
    if (len < cap - 1) s[len++] = 0x1f;
    for (size_t i = 0; i < nout && len + 8 < cap; i++)
        len +=
            (size_t)snprintf(s + len, cap - len, "%s%s", i ? "; " : "", out_names && out_names[i] ? out_names[i] : "?");
    if (api && len + 2 + strlen(api) < cap) len += (size_t)snprintf(s + len, cap - len, "\x1f%s", api);
    if (len >= cap) len = cap - 1;
    return len;
}

static status_t w_run(void *session, const void *ro, const char *const *in_names, const void *const *inputs, size_t nin,
                      const char *const *out_names, size_t nout, void **outputs) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    char s[LP_CALL_MAX_STR];
    size_t len = 0;
    if (t) { /* model, inputs, outputs: described before the run */
        uint8_t g = lpr_guard_hold(t);
        int saved = errno;
        len = describe_run(s, sizeof s, session, in_names, inputs, nin, out_names, nout, NULL);
        errno = saved;
        lpr_guard_restore(t, g);
    }
    uint64_t t0 = t ? lpr_ticks() : 0;
    status_t st = ORT_FN(I_RUN, status_t(*)(void *, const void *, const char *const *, const void *const *, size_t,
                                            const char *const *, size_t, void **))(session, ro, in_names, inputs, nin,
                                                                                   out_names, nout, outputs);
    if (t) {
        int saved = errno;
        uint64_t a[4] = {(uint64_t)(uintptr_t)session, nin, nout, st != NULL};
        record(t, LP_CALL_ORT_RUN, t0, 4, a, s, len);
        errno = saved;
    }
    return st;
}

/* A run through an IoBinding: its inputs are bound beforehand and the C API cannot list them; the
 * outputs are named from the binding. An ort.Run with api "RunWithBinding". */
static status_t w_run_with_binding(void *session, const void *ro, const void *binding) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    char s[512];
    size_t len = 0, nout = 0;
    if (t) {
        uint8_t g = lpr_guard_hold(t);
        int saved = errno;
        len = (size_t)snprintf(s, sizeof s, "%s\x1f<bound>\x1f", model_of(session));
        void *alloc = NULL;
        char *names = NULL;
        size_t *lens = NULL;
        status_t st = ORT_FN(I_GET_ALLOCATOR_WITH_DEFAULT_OPTIONS, status_t(*)(void **))(&alloc);
        if (!st)
            st = ORT_FN(I_GET_BOUND_OUTPUT_NAMES, status_t(*)(const void *, void *, char **, size_t **, size_t *))(
                binding, alloc, &names, &lens, &nout);
        if (!st && names && lens) {
            const char *p = names;
            for (size_t i = 0; i < nout && len + 8 < sizeof s; i++) {
                len += (size_t)snprintf(s + len, sizeof s - len, "%s%.*s", i ? "; " : "", (int)lens[i], p);
                p += lens[i];
            }
        }
        if (!st && names) release_status(ORT_FN(I_ALLOCATOR_FREE, status_t(*)(void *, void *))(alloc, names));
        if (!st && lens) release_status(ORT_FN(I_ALLOCATOR_FREE, status_t(*)(void *, void *))(alloc, lens));
        release_status(st);
        if (len >= sizeof s - 20) len = sizeof s - 20;
        len += (size_t)snprintf(s + len, sizeof s - len, "\x1fRunWithBinding");
        errno = saved;
        lpr_guard_restore(t, g);
    }
    uint64_t t0 = t ? lpr_ticks() : 0;
    status_t st = ORT_FN(I_RUN_WITH_BINDING, status_t(*)(void *, const void *, const void *))(session, ro, binding);
    if (t) {
        int saved = errno;
        uint64_t a[4] = {(uint64_t)(uintptr_t)session, 0, nout, st != NULL};
        record(t, LP_CALL_ORT_RUN, t0, 4, a, s, len);
        errno = saved;
    }
    return st;
}

/* RunAsync returns at once and calls the program's callback from ORT's pool when the run is
 * done. libprof passes its own callback with a context from a fixed pool: the ort.Run slice (api
 * "RunAsync") spans submission to completion and is recorded on the thread that completes it
 * (the one that ran the model, where its node events are), then the program's callback runs. With
 * more runs in flight than pooled contexts, a context is mapped for the run and unmapped at its
 * completion (no run goes unrecorded). */
typedef void (*async_cb)(void *, void **, size_t, status_t);
#define ASYNC_SLOTS 64
static struct async_ctx {
    int busy, mapped;
    async_cb cb;
    void *user;
    void *session;
    size_t nin, nout;
    uint64_t t0;
    size_t len;
    char s[512];
} asyncs[ASYNC_SLOTS];

static void w_async_done(void *arg, void **outputs, size_t n, status_t status) {
    struct async_ctx *c = arg;
    async_cb cb = c->cb;
    void *user = c->user;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    if (t) {
        int saved = errno;
        uint64_t a[4] = {(uint64_t)(uintptr_t)c->session, c->nin, c->nout, status != NULL};
        record(t, LP_CALL_ORT_RUN, c->t0, 4, a, c->s, c->len);
        errno = saved;
    }
    if (c->mapped)
        lpr_sys_munmap(c, sizeof *c);
    else
        __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
    cb(user, outputs, n, status);
}

static status_t w_run_async(void *session, const void *ro, const char *const *in_names, const void *const *inputs,
                            size_t nin, const char *const *out_names, size_t nout, void **outputs, async_cb cb,
                            void *user) {
    typedef status_t (*run_async_fn)(void *, const void *, const char *const *, const void *const *, size_t,
                                     const char *const *, size_t, void **, async_cb, void *);
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    struct async_ctx *c = NULL;
    for (int i = 0; t && cb && i < ASYNC_SLOTS && !c; i++) {
        int idle = 0;
        if (__atomic_compare_exchange_n(&asyncs[i].busy, &idle, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            c = &asyncs[i];
    }
    if (t && cb && !c) { /* every pooled context in flight */
        void *m = lpr_sys_mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (!lpr_sys_failed((long)m)) {
            c = m;
            c->mapped = 1;
        }
    }
    if (!c)
        return ORT_FN(I_RUN_ASYNC, run_async_fn)(session, ro, in_names, inputs, nin, out_names, nout, outputs, cb,
                                                 user);
    uint8_t g = lpr_guard_hold(t);
    int saved = errno;
    c->len = describe_run(c->s, sizeof c->s, session, in_names, inputs, nin, out_names, nout, "RunAsync");
    c->cb = cb;
    c->user = user;
    c->session = session;
    c->nin = nin;
    c->nout = nout;
    errno = saved;
    lpr_guard_restore(t, g);
    c->t0 = lpr_ticks();
    status_t st = ORT_FN(I_RUN_ASYNC, run_async_fn)(session, ro, in_names, inputs, nin, out_names, nout, outputs,
                                                    w_async_done, c);
    if (st) { /* refused: no callback will come */
        int e = errno;
        uint64_t a[4] = {(uint64_t)(uintptr_t)session, nin, nout, 1};
        record(t, LP_CALL_ORT_RUN, c->t0, 4, a, c->s, c->len);
        if (c->mapped)
            lpr_sys_munmap(c, sizeof *c);
        else
            __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
        errno = e;
    }
    return st;
}

static void w_release_session(void *session) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    uint64_t t0 = t ? lpr_ticks() : 0;
    char m[128];
    snprintf(m, sizeof m, "%s", session ? model_of(session) : "?");
    if (t) { /* its nodes, before it goes */
        uint8_t g = lpr_guard_hold(t);
        int saved = errno;
        end_profiling(session_of(session));
        errno = saved;
        lpr_guard_restore(t, g);
    }
    ORT_FN(I_RELEASE_SESSION, void (*)(void *))(session);
    if (t && session) {
        int saved = errno;
        uint64_t a = (uint64_t)(uintptr_t)session;
        record(t, LP_CALL_ORT_RELEASE_SESSION, t0, 1, &a, m, strlen(m));
        errno = saved;
    }
}

static status_t w_enable_profiling(void *opts, const char *prefix) {
    status_t st = ORT_FN(I_ENABLE_PROFILING, status_t(*)(void *, const char *))(opts, prefix);
    if (!st && !program_profiles(opts))
        for (unsigned i = 0; i < OPTS; i++) {
            const void *none = NULL;
            if (__atomic_compare_exchange_n(&program_profiled[i], &none, opts, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                break;
        }
    return st;
}

static status_t w_disable_profiling(void *opts) {
    for (unsigned i = 0; i < OPTS; i++)
        if (__atomic_load_n(&program_profiled[i], __ATOMIC_ACQUIRE) == opts)
            __atomic_store_n(&program_profiled[i], NULL, __ATOMIC_RELEASE);
    return ORT_FN(I_DISABLE_PROFILING, status_t(*)(void *))(opts);
}

/* The program ends a session's profiling itself: its file stays where it is; libprof copies it. */
static status_t w_session_end_profiling(void *session, void *alloc, char **out) {
    status_t st = ORT_FN(I_SESSION_END_PROFILING, status_t(*)(void *, void *, char **))(session, alloc, out);
    struct session *s = session_of(session);
    if (!st && s && out && *out && (*out)[0] && !s->folded && lpr_spool_on) {
        uint8_t g = lpr_guard_hold(&lpr_tls);
        int saved = errno;
        fold_file(session, *out, s->profiled == 1);
        s->folded = 1;
        errno = saved;
        lpr_guard_restore(&lpr_tls, g);
    }
    return st;
}

/* ---- the entry ------------------------------------------------------------------------------- */

static const void *get_api(uint32_t version) {
    const void *table = real_base->GetApi(version);
    if (!table) return NULL; /* a version this library does not have: as without libprof */
    if (!real) {
        __atomic_store_n(&real, (void *const *)table, __ATOMIC_RELEASE);
        /* the library has version 2 (SessionEndProfiling) when it can hand it out */
        real_has_v2 = version >= 2 || real_base->GetApi(2) != NULL;
    }
    for (int i = 0; i < __atomic_load_n(&ncopies, __ATOMIC_ACQUIRE); i++)
        if (copies[i].version == version) return copies[i].table;
    struct seg sg = {(uintptr_t)table, 0};
    lpr_dl_iterate(seg_of, &sg);
    size_t n = sg.end > sg.p ? (sg.end - sg.p) / sizeof(void *) : 0;
    if (n > TABLE_MAX) n = TABLE_MAX;
    while (__atomic_exchange_n(&copying, 1, __ATOMIC_ACQUIRE)) /* rare: a program asks once or twice */
        ;
    for (int i = 0; i < ncopies; i++)
        if (copies[i].version == version) {
            __atomic_store_n(&copying, 0, __ATOMIC_RELEASE);
            return copies[i].table;
        }
    int k = ncopies;
    if (n < V1_ENTRIES || k >= VERSIONS) { /* cannot copy: unwrapped, as without libprof */
        __atomic_store_n(&copying, 0, __ATOMIC_RELEASE);
        return table;
    }
    memcpy(copies[k].table, table, n * sizeof(void *));
    if (version >= 2 && n >= version_entries[2]) /* the table is as long as its version says */
        for (unsigned i = 0; i < sizeof appenders / sizeof *appenders; i++)
            if (has_entry(version, appenders[i].index) && appenders[i].index < n)
                copies[k].table[appenders[i].index] = (void *)appenders[i].fn;
    if (has_entry(version, I_RUN_WITH_BINDING) && I_RUN_WITH_BINDING < n)
        copies[k].table[I_RUN_WITH_BINDING] = (void *)w_run_with_binding;
    if (has_entry(version, I_CREATE_SESSION_FROM_ARRAY_PREPACKED) && I_CREATE_SESSION_FROM_ARRAY_PREPACKED < n) {
        copies[k].table[I_CREATE_SESSION_PREPACKED] = (void *)w_create_session_prepacked;
        copies[k].table[I_CREATE_SESSION_FROM_ARRAY_PREPACKED] = (void *)w_create_session_from_array_prepacked;
    }
    if (has_entry(version, I_RUN_ASYNC) && I_RUN_ASYNC < n) copies[k].table[I_RUN_ASYNC] = (void *)w_run_async;
    copies[k].table[I_CREATE_SESSION] = (void *)w_create_session;
    copies[k].table[I_CREATE_SESSION_FROM_ARRAY] = (void *)w_create_session_from_array;
    copies[k].table[I_RUN] = (void *)w_run;
    copies[k].table[I_RELEASE_SESSION] = (void *)w_release_session;
    copies[k].table[I_ENABLE_PROFILING] = (void *)w_enable_profiling;
    copies[k].table[I_DISABLE_PROFILING] = (void *)w_disable_profiling;
    if (n > I_SESSION_END_PROFILING && version >= 2)
        copies[k].table[I_SESSION_END_PROFILING] = (void *)w_session_end_profiling;
    copies[k].version = version;
    __atomic_store_n(&ncopies, k + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&copying, 0, __ATOMIC_RELEASE);
    return copies[k].table;
}

static const char *version_string(void) { return real_base->GetVersionString(); }

static const struct OrtApiBase *(*real_entry)(void); /* the library's OrtGetApiBase */

LP_EXPORT const struct OrtApiBase *OrtGetApiBase(void);
LP_EXPORT const struct OrtApiBase *OrtGetApiBase(void) {
    if (!real_base) {
        const struct OrtApiBase *(*fn)(void) = real_entry;
        if (!fn) fn = (const struct OrtApiBase *(*)(void))lpr_resolve("OrtGetApiBase");
        if (!fn) return NULL; /* no ONNX Runtime loaded: what the caller's own lookup would have failed on */
        real_base = fn();
        if (!real_base) return NULL;
        our_base.GetApi = get_api;
        our_base.GetVersionString = version_string;
    }
    struct lpr_tls *t = lpr_call_begin(LP_FAM_ORT);
    return t ? &our_base : real_base; /* not recording ort: the library's own */
}

/* dlsym of OrtGetApiBase (hooks/dl.c sends it here): a program (or a binding: C#, Java) that
 * dlopens ONNX Runtime and asks dlsym for the entry gets libprof's, which hands out the table
 * whose calls are recorded. */
/* libprof's entry by a hidden name: no relocation against its own export */
extern __typeof__(OrtGetApiBase) lpr_ort_entry __attribute__((alias("OrtGetApiBase"), visibility("hidden")));

void *lpr_ort_dlsym(void *handle, const char *name) {
    void *f = lpr_dlsym(handle, name);
    if (!f || !(lpr_gate & (1u << LP_FAM_ORT))) return f;
    if (!real_entry) real_entry = (const struct OrtApiBase *(*)(void))f;
    return f == (void *)real_entry ? (void *)lpr_ort_entry : f;
}
