/* python.c: the python family — Python functions as slices (LIBPROF_PYTHON_CALLS=REGEX).
 *
 * Every Python function whose qualified name (co_qualname on 3.11+, co_name before) matches the
 * regular expression becomes a slice on its thread, named by that name, with the file and line
 * of its definition: `forward$` makes every nn.Module layer of an unmodified PyTorch program a
 * slice around the GEMMs and oneDNN primitives it runs.
 *
 * The hook, on 3.9+, is a PEP 523 frame-evaluation function: every frame the interpreter
 * evaluates, on any thread, passes through it; a frame whose code does not match goes straight
 * on to the evaluation function that was there before (the interpreter's own loop), a matching
 * one is timed around it. On 3.7 and 3.8 (no setter exported) it is CPython's C profile function
 * (what cProfile uses), called on every Python call and return, on the main thread only. Either
 * is installed with the GIL held, from a pending call the interpreter runs on its main thread at
 * its next check: requested on the first runtime call recorded after the interpreter has
 * started (core/python.c, lpr_py_ready). A name is matched once per code object (cached by code
 * id).
 *
 * What it changes in the interpreter: its frame-evaluation function (3.11+ stop inlining
 * Python-to-Python calls while one is set: the cost of this feature), or the main thread's
 * profile function (3.7, 3.8; a program that sets its own replaces libprof's).
 *
 * The same evaluation function serves the known functions: runtime entry points written in
 * Python whose runtime libprof cannot reach in C (onnxruntime's Python module holds a copy of
 * ORT of its own, exporting nothing). Once such a runtime's extension module is loaded (dlopen,
 * lpr_python_known_loaded), its functions are recorded as that runtime's calls — its family, its
 * entry points, the strings its hook file makes — with no LIBPROF_PYTHON_CALLS (3.9+). */
#define _GNU_SOURCE
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/sys.h"
#include "../core/own.h"
#include "hook.h"

#define DEPTH 256 /* nested matching calls followed per thread */
#define PY_CALL 0 /* PyTrace_CALL */
#define PY_RETURN 3

struct pystate {
    uint32_t tid, depth;
    uint32_t id[DEPTH];
    uint64_t t0[DEPTH];
};

static regex_t re;
static int have_re;      /* LIBPROF_PYTHON_CALLS was given and compiled */
static uint8_t *verdict; /* by code id: 0 not asked yet, then one of: */
enum { V_MATCH = 1, V_NO = 2, V_KNOWN = 3 /* + the row of `known` */ };
static int installed, requested;

/* The known functions: where (the end of the code's file name), which (its qualified name; before
 * 3.11 code objects have only the part after the last dot), and what it is recorded as. A row is
 * looked for once the extension module `module` of its runtime has been loaded. */
enum { K_ORT_SESSION, K_ORT_RUN };
static const struct known {
    const char *module, *file, *name;
    unsigned fam, call, kind;
    const char *api;
} known[] = {
    {"onnxruntime_pybind11_state", "onnxruntime/capi/onnxruntime_inference_collection.py", "InferenceSession.__init__",
     LP_FAM_ORT, LP_CALL_ORT_CREATE_SESSION, K_ORT_SESSION, NULL},
    {"onnxruntime_pybind11_state", "onnxruntime/capi/onnxruntime_inference_collection.py", "Session.run", LP_FAM_ORT,
     LP_CALL_ORT_RUN, K_ORT_RUN, "InferenceSession.run"},
    {"onnxruntime_pybind11_state", "onnxruntime/capi/onnxruntime_inference_collection.py",
     "Session.run_with_ort_values", LP_FAM_ORT, LP_CALL_ORT_RUN, K_ORT_RUN, "InferenceSession.run_with_ort_values"},
    {"onnxruntime_pybind11_state", "onnxruntime/capi/onnxruntime_inference_collection.py", "Session.run_with_iobinding",
     LP_FAM_ORT, LP_CALL_ORT_RUN, K_ORT_RUN, "InferenceSession.run_with_iobinding"},
};
#define NKNOWN (sizeof known / sizeof known[0])
static uint32_t known_on; /* the rows whose module is loaded (bit i: row i) */
typedef int (*tracefunc)(void *, void *, int, void *);
typedef void *(*evalfunc)(void *, void *, int);
static evalfunc next_eval; /* what evaluated frames before libprof (the default loop) */
static void (*set_eval)(void *, evalfunc);
static evalfunc (*get_eval)(void *);
static void *(*interp_get)(void);
static int (*set_profile_all)(tracefunc, void *);
static void (*set_profile)(tracefunc, void *);
static int (*set_profile_ts)(void *, tracefunc, void *);
static void *(*interp_main)(void);
static void *(*thread_head)(void *);
static void *(*thread_next)(void *);
static int (*gil_check)(void);
static int (*add_pending)(int (*)(void *), void *);

static int ends_with(const char *s, size_t n, const char *tail) {
    size_t k = strlen(tail);
    return n >= k && !memcmp(s + n - k, tail, k) && (n == k || s[n - k - 1] == '/');
}

static int name_is(const char *s, size_t n, const char *qualname) {
    const char *dot = strrchr(qualname, '.');
    if (n == strlen(qualname) && !memcmp(s, qualname, n)) return 1;
    return lpr_py_minor() < 11 && dot && n == strlen(dot + 1) && !memcmp(s, dot + 1, n); /* co_name */
}

/* What code `id` is to libprof: one of the known functions, a LIBPROF_PYTHON_CALLS match, or
 * neither — decided once per code object. */
static unsigned verdict_of(uint32_t id) {
    if (id >= LPR_PY_MAX_CODES) return V_NO;
    uint8_t v = verdict[id];
    if (LP_LIKELY(v != 0)) return v;
    size_t len, flen;
    const char *name = lpr_py_code_name(id, &len), *file = lpr_py_code_file(id, &flen);
    v = V_NO;
    uint32_t on = __atomic_load_n(&known_on, __ATOMIC_ACQUIRE);
    for (unsigned k = 0; k < NKNOWN && on; k++)
        if ((on >> k & 1) && ends_with(file, flen, known[k].file) && name_is(name, len, known[k].name)) {
            v = (uint8_t)(V_KNOWN + k);
            break;
        }
    if (v == V_NO && have_re) {
        char buf[1100];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < 1024 ? len : 1024), name);
        v = len && regexec(&re, buf, 0, NULL, 0) == 0 ? V_MATCH : V_NO;
    }
    verdict[id] = v;
    return v;
}

static int profile(void *obj, void *frame, int what, void *arg) {
    (void)obj;
    (void)frame;
    (void)arg;
    if (what != PY_CALL && what != PY_RETURN) return 0;
    if (!(lpr_gate & (1u << LP_FAM_PYTHON))) return 0;
    struct lpr_tls *t = &lpr_tls;
    if (t->guard || !t->thr) return 0;
    uint64_t now = lpr_ticks();
    int saved = errno;
    t->guard = 1;
    uint32_t id = lpr_py_top_code();
    struct pystate *ps = id && verdict_of(id) == V_MATCH ? lpr_tbuf_family_state(t->thr, sizeof *ps) : NULL;
    if (ps) {
        if (ps->tid != t->tid) { /* a node another thread used before */
            ps->tid = t->tid;
            ps->depth = 0;
        }
        if (what == PY_CALL) {
            if (ps->depth < DEPTH) {
                ps->id[ps->depth] = id;
                ps->t0[ps->depth] = now;
            }
            ps->depth++;
        } else if (ps->depth && (ps->depth > DEPTH || ps->id[ps->depth - 1] == id)) {
            /* (a return whose call came before the profile function was set is not ours) */
            uint32_t d = --ps->depth;
            if (d < DEPTH) {
                uint64_t *r = lpr_reserve(t, 3);
                if (LP_LIKELY(r != NULL)) {
                    r[0] = lpr_word0_timed(LP_EV_PYCALL, ps->t0[d]);
                    r[1] = lpr_word1(ps->t0[d], now);
                    r[2] = id;
                    lpr_commit(t, r + 3);
                }
            }
        }
    }
    t->guard = 0;
    errno = saved;
    return 0;
}

/* The strings of a known function's record, read from its arguments before it runs (with the GIL:
 * the objects stay as they are while libprof reads them). */
/* An array's element type and shape, "float32[1,64]", from numpy's PyArrayObject (data, nd,
 * dimensions after the object header) and its descriptor's type_num (at 28 in numpy 1 and 2);
 * any other object as "<its type>". */
static size_t describe_value(uintptr_t v, char *s, size_t cap) {
    const char *type = lpr_py_type_name(v);
    if (strcmp(type, "numpy.ndarray") != 0) return (size_t)snprintf(s, cap, "<%s>", type);
    static const char *const dtypes[] = {"bool",  "int8",   "uint8", "int16",  "uint16",  "int32",   "uint32",
                                         "int64", "uint64", "int64", "uint64", "float32", "float64", "float128"};
    int nd = *(const int *)(v + 24);
    const int64_t *dims = *(const int64_t *const *)(v + 32);
    uintptr_t descr = *(const uintptr_t *)(v + 56);
    int num = descr ? *(const int *)(descr + 28) : -1;
    size_t o = (size_t)snprintf(s, cap, "%s[", num >= 0 && num < 14 ? dtypes[num] : num == 23 ? "float16" : "?");
    for (int i = 0; i < nd && i < 8 && dims && o + 24 < cap; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (o + 2 < cap) o += (size_t)snprintf(s + o, cap - o, "]");
    return o < cap ? o : cap - 1;
}

/* A run's input feed, {name: array}: "x float32[1,64]; ...", read with PyDict_Next (the GIL is
 * held; it neither allocates nor runs Python code). */
static int (*dict_next)(uintptr_t, intptr_t *, uintptr_t *, uintptr_t *);
static size_t describe_feed(uintptr_t feed, char *s, size_t cap, uint64_t *n) {
    if (!dict_next) dict_next = (int (*)(uintptr_t, intptr_t *, uintptr_t *, uintptr_t *))lpr_py_sym("PyDict_Next");
    size_t o = 0;
    *n = 0;
    s[0] = '\0';
    if (!dict_next || !feed || strcmp(lpr_py_type_name(feed), "dict") != 0) return 0;
    intptr_t pos = 0;
    uintptr_t key, value;
    while (dict_next(feed, &pos, &key, &value) && o + 40 < cap) {
        if ((*n)++) o += (size_t)snprintf(s + o, cap - o, "; ");
        o += lpr_py_str(key, s + o, cap - o - 32);
        s[o++] = ' ';
        o += describe_value(value, s + o, cap - o);
    }
    s[o < cap ? o : cap - 1] = '\0';
    return o;
}

/* Output names asked for, a list of str ("<all>" for None). */
static size_t describe_names(uintptr_t list, char *s, size_t cap, uint64_t *n) {
    const uintptr_t *items = NULL;
    size_t k = lpr_py_items(list, &items), o = 0;
    s[0] = '\0';
    *n = 0;
    if (!strcmp(lpr_py_type_name(list), "NoneType")) return (size_t)snprintf(s, cap, "<all>");
    for (size_t i = 0; i < k && o + 8 < cap; i++) {
        if (i) o += (size_t)snprintf(s + o, cap - o, "; ");
        o += lpr_py_str(items[i], s + o, cap - o - 1);
    }
    s[o < cap ? o : cap - 1] = '\0';
    *n = k;
    return o;
}

static size_t describe_known(const struct known *k, const void *frame, uintptr_t self, char *s, size_t cap,
                             uint64_t *nin, uint64_t *nout) {
    if (k->kind == K_ORT_RUN) { /* run(output_names, input_feed, ...), run_with_iobinding(iobinding, ...) */
        char in[384], out[192];
        int bound = strstr(k->api, "iobinding") != NULL;
        if (bound) {
            snprintf(in, sizeof in, "<bound>");
            out[0] = '\0';
            *nin = *nout = 0;
        } else {
            describe_feed(lpr_py_frame_arg(frame, 2), in, sizeof in, nin);
            describe_names(lpr_py_frame_arg(frame, 1), out, sizeof out, nout);
        }
        return lpr_ort_py_run((const void *)self, in, out, k->api, s, cap);
    }
    /* InferenceSession(path_or_bytes, sess_options, providers, ...): the model's path (or the
     * type of what was given instead: bytes), the providers asked for */
    char path[512], prov[256];
    uintptr_t model = lpr_py_frame_arg(frame, 1);
    size_t n = lpr_py_str(model, path, sizeof path - 1);
    if (!n) n = (size_t)snprintf(path, sizeof path, "<%s>", lpr_py_type_name(model));
    path[n < sizeof path ? n : sizeof path - 1] = '\0';
    const uintptr_t *items = NULL;
    size_t np = lpr_py_items(lpr_py_frame_arg(frame, 3), &items), o = 0;
    prov[0] = '\0';
    for (size_t i = 0; i < np && o + 2 < sizeof prov; i++) {
        uintptr_t it = items[i];
        const uintptr_t *pair = NULL;
        if (lpr_py_items(it, &pair) >= 1) it = pair[0]; /* (name, options) */
        char one[128];
        size_t m = lpr_py_str(it, one, sizeof one - 1);
        one[m] = '\0';
        char *tail = strstr(one, "ExecutionProvider");
        if (tail && !tail[17]) *tail = '\0';
        o += (size_t)snprintf(prov + o, sizeof prov - o, "%s%s", i ? ", " : "", one);
    }
    if (!np) snprintf(prov, sizeof prov, "(default)");
    return lpr_ort_py_session((const void *)self, path, prov, s, cap);
}

/* A known function: timed around its evaluation as its runtime's call (recorded whether it returns
 * or raises: failed = 1 then). */
static void *eval_known(const struct known *k, void *ts, void *frame, int throwflag) {
    struct lpr_tls *t = throwflag ? NULL : lpr_call_begin(k->fam);
    if (!t) return next_eval(ts, frame, throwflag);
    char s[LP_CALL_MAX_STR];
    uint8_t g = lpr_guard_hold(t);
    int saved = errno;
    uintptr_t self = lpr_py_frame_arg(frame, 0);
    uint64_t nin = 0, nout = 0;
    size_t len = describe_known(k, frame, self, s, sizeof s, &nin, &nout);
    errno = saved;
    lpr_guard_restore(t, g);
    uint64_t t0 = lpr_ticks();
    void *ret = next_eval(ts, frame, throwflag);
    saved = errno;
    if (k->kind == K_ORT_SESSION) {
        uint64_t a[2] = {self, ret == NULL};
        lpr_call_record(t, k->call, t0, lpr_ticks(), 2, a, s, len);
    } else {
        uint64_t a[4] = {self, nin, nout, ret == NULL};
        lpr_call_record(t, k->call, t0, lpr_ticks(), 4, a, s, len);
    }
    errno = saved;
    return ret;
}

/* The PEP 523 evaluation function (3.9+): every frame the interpreter evaluates passes here —
 * each Python call, each resumption of a generator — whatever the thread. A frame whose code
 * is neither matched nor known goes straight on (one table lookup); one that matches is timed
 * around the evaluation, which ends by return or by exception alike. */
static void *eval(void *ts, void *frame, int throwflag) {
    uint32_t id = lpr_py_frame_code(frame);
    unsigned v = id ? verdict_of(id) : V_NO;
    if (LP_UNLIKELY(v >= V_KNOWN)) return eval_known(&known[v - V_KNOWN], ts, frame, throwflag);
    if (v != V_MATCH || !(lpr_gate & (1u << LP_FAM_PYTHON))) return next_eval(ts, frame, throwflag);
    uint64_t t0 = lpr_ticks();
    void *ret = next_eval(ts, frame, throwflag);
    uint64_t t1 = lpr_ticks();
    struct lpr_tls *t = &lpr_tls;
    if (!t->guard) {
        int saved = errno;
        t->guard = 1;
        uint64_t *r = lpr_reserve(t, 3);
        if (LP_LIKELY(r != NULL)) {
            r[0] = lpr_word0_timed(LP_EV_PYCALL, t0);
            r[1] = lpr_word1(t0, t1);
            r[2] = id;
            lpr_commit(t, r + 3);
        }
        t->guard = 0;
        errno = saved;
    }
    return ret;
}

/* Every thread of the main interpreter without libprof's profile function gets it (3.9-3.11;
 * the caller holds the GIL). */
static void cover_threads(void) {
    if (!set_profile_ts || !interp_main || !thread_head || !thread_next) return;
    for (void *ts = thread_head(interp_main()); ts; ts = thread_next(ts))
        if (lpr_py_profile_of(ts) != (void *)profile) set_profile_ts(ts, profile, NULL);
}

/* The pending call: on the main thread, with the GIL. */
static int install(void *arg) {
    (void)arg;
    if (__atomic_load_n(&installed, __ATOMIC_ACQUIRE)) return 0; /* asked twice: LIBPROF_PYTHON_CALLS, a known module */
    uint8_t g = lpr_guard_hold(&lpr_tls);
    if (set_eval && get_eval && interp_get && lpr_py_minor() >= 9) { /* PEP 523: every thread, no tracing */
        void *interp = interp_get();
        next_eval = get_eval(interp);
        set_eval(interp, eval);
    } else if (set_profile_all) {
        set_profile_all(profile, NULL);
    } else {
        set_profile(profile, NULL);
        cover_threads();
    }
    __atomic_store_n(&installed, 1, __ATOMIC_RELEASE);
    lpr_guard_restore(&lpr_tls, g);
    if (lpr_verbose)
        lpr_info("Python calls: %s",
                 next_eval ? "evaluation function installed (PEP 523)" : "profile function installed");
    return 0;
}

/* The interpreter's functions (found now: an interpreter loaded by dlopen came after start). */
static void resolve(void) {
    set_profile_all = (int (*)(tracefunc, void *))lpr_py_sym("PyEval_SetProfileAllThreads");
    set_profile = (void (*)(tracefunc, void *))lpr_py_sym("PyEval_SetProfile");
    set_profile_ts = (int (*)(void *, tracefunc, void *))lpr_py_sym("_PyEval_SetProfile");
    interp_main = (void *(*)(void))lpr_py_sym("PyInterpreterState_Main");
    thread_head = (void *(*)(void *))lpr_py_sym("PyInterpreterState_ThreadHead");
    thread_next = (void *(*)(void *))lpr_py_sym("PyThreadState_Next");
    gil_check = (int (*)(void))lpr_py_sym("PyGILState_Check");
    add_pending = (int (*)(int (*)(void *), void *))lpr_py_sym("Py_AddPendingCall");
    set_eval = (void (*)(void *, evalfunc))lpr_py_sym("_PyInterpreterState_SetEvalFrameFunc");
    get_eval = (evalfunc(*)(void *))lpr_py_sym("_PyInterpreterState_GetEvalFrameFunc");
    interp_get = (void *(*)(void))lpr_py_sym("PyInterpreterState_Get");
}

static void ready(void);
static void request(void) {
    uint8_t g = lpr_guard_hold(&lpr_tls);
    int saved = errno;
    resolve();
    if (!set_profile || !add_pending) {
        lpr_warn("this interpreter has no PyEval_SetProfile: no Python call slices");
    } else if (add_pending(install, NULL) != 0) { /* the queue was full: at the next call */
        __atomic_store_n(&requested, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&lpr_py_ready, ready, __ATOMIC_RELEASE);
        lpr_py_ready_retry();
    }
    errno = saved;
    lpr_guard_restore(&lpr_tls, g);
}

/* The verdicts by code id (the pages are reserved, not used until a code id is looked up). */
static int verdicts(void) {
    if (__atomic_load_n(&verdict, __ATOMIC_ACQUIRE)) return 0;
    uint8_t *v = lpr_own_map(LP_OWN_PYTHON, LPR_PY_MAX_CODES, PROT_READ | PROT_WRITE, MAP_NORESERVE);
    if (!v) return -1;
    uint8_t *expect = NULL;
    /* (a thread that lost the race leaves its pages untouched: reserved, never resident) */
    __atomic_compare_exchange_n(&verdict, &expect, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return 0;
}

/* After each dlopen (hooks/dl.c): a known runtime's extension module arrived — its rows are looked
 * for from now on (codes already judged are judged again), and the evaluation function is
 * installed if it was not (from a pending call: the importing thread holds the GIL, but the
 * interpreter takes the new function at its next check). 3.9+ only (PEP 523). */
void lpr_python_known_loaded(const char *path) {
    if (!path || !lpr_py_on || lpr_py_minor() < 9) return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    uint32_t add = 0;
    for (unsigned k = 0; k < NKNOWN; k++)
        if (strstr(base, known[k].module) && (lpr_cfg.families & (1u << known[k].fam))) add |= 1u << k;
    if (!add || (__atomic_load_n(&known_on, __ATOMIC_ACQUIRE) & add) == add || verdicts() != 0) return;
    __atomic_fetch_or(&known_on, add, __ATOMIC_ACQ_REL);
    memset(verdict, 0, LPR_PY_MAX_CODES); /* judged before these rows were looked for */
    if (lpr_verbose) lpr_info("Python calls: %s loaded, its known functions recorded", base);
    if (!__atomic_exchange_n(&requested, 1, __ATOMIC_ACQ_REL)) request();
}

static void new_thread(void) {
    if (!__atomic_load_n(&installed, __ATOMIC_ACQUIRE) || !gil_check || next_eval) return;
    int saved = errno;
    uint8_t g = lpr_guard_hold(&lpr_tls);
    if (lpr_py_thread_running() && gil_check()) cover_threads();
    lpr_guard_restore(&lpr_tls, g);
    errno = saved;
}

static void ready(void) {
    if (!__atomic_exchange_n(&requested, 1, __ATOMIC_ACQ_REL)) request();
}

static void start(void) {
    if (!lpr_cfg.python_calls[0] || !(lpr_cfg.families & (1u << LP_FAM_PYTHON))) return;
    uint8_t g = lpr_guard_hold(&lpr_tls);
    int rc = regcomp(&re, lpr_cfg.python_calls, REG_EXTENDED | REG_NOSUB);
    lpr_guard_restore(&lpr_tls, g);
    if (rc != 0) {
        lpr_say("LIBPROF_PYTHON_CALLS=\"%s\" is not a regular expression: no Python call slices", lpr_cfg.python_calls);
        return;
    }
    if (verdicts() != 0) return;
    have_re = 1;
    lpr_py_new_thread = new_thread;
    __atomic_store_n(&lpr_py_ready, ready, __ATOMIC_RELEASE);
}

LP_FAMILY_SETUP(python, NULL, start, NULL);
