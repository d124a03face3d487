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
 * profile function (3.7, 3.8; a program that sets its own replaces libprof's). */
#define _GNU_SOURCE
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/sys.h"
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
static uint8_t *verdict; /* by code id: 0 not asked yet, 1 matches, 2 does not */
static int installed;
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

static int matches(uint32_t id) {
    if (id >= LPR_PY_MAX_CODES) return 0;
    uint8_t v = verdict[id];
    if (LP_UNLIKELY(v == 0)) {
        size_t len;
        const char *name = lpr_py_code_name(id, &len);
        char buf[1100];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < 1024 ? len : 1024), name);
        v = len && regexec(&re, buf, 0, NULL, 0) == 0 ? 1 : 2;
        verdict[id] = v;
    }
    return v == 1;
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
    struct pystate *ps = id && matches(id) ? lpr_tbuf_family_state(t->thr, sizeof *ps) : NULL;
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

/* The PEP 523 evaluation function (3.9+): every frame the interpreter evaluates passes here —
 * each Python call, each resumption of a generator — whatever the thread. A frame whose code
 * does not match goes straight on (one table lookup); one that matches is timed around the
 * evaluation, which ends by return or by exception alike. */
static void *eval(void *ts, void *frame, int throwflag) {
    uint32_t id = lpr_py_frame_code(frame);
    if (!id || !matches(id) || !(lpr_gate & (1u << LP_FAM_PYTHON))) return next_eval(ts, frame, throwflag);
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
        lpr_info("LIBPROF_PYTHON_CALLS: %s",
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

static void request(void) {
    uint8_t g = lpr_guard_hold(&lpr_tls);
    int saved = errno;
    resolve();
    if (!set_profile || !add_pending) {
        lpr_warn("LIBPROF_PYTHON_CALLS: this interpreter has no PyEval_SetProfile: no Python call slices");
    } else if (add_pending(install, NULL) != 0) {
        lpr_py_ready_retry(); /* the queue was full: at the next call */
    }
    errno = saved;
    lpr_guard_restore(&lpr_tls, g);
}

static void new_thread(void) {
    if (!__atomic_load_n(&installed, __ATOMIC_ACQUIRE) || !gil_check || next_eval) return;
    int saved = errno;
    uint8_t g = lpr_guard_hold(&lpr_tls);
    if (lpr_py_thread_running() && gil_check()) cover_threads();
    lpr_guard_restore(&lpr_tls, g);
    errno = saved;
}

static void start(void) {
    if (!lpr_cfg.python_calls[0] || !(lpr_cfg.families & (1u << LP_FAM_PYTHON))) return;
    uint8_t g = lpr_guard_hold(&lpr_tls);
    int rc = regcomp(&re, lpr_cfg.python_calls, REG_EXTENDED | REG_NOSUB);
    lpr_guard_restore(&lpr_tls, g);
    if (rc != 0) {
        lpr_warn("LIBPROF_PYTHON_CALLS=\"%s\" is not a regular expression: no Python call slices",
                 lpr_cfg.python_calls);
        return;
    }
    verdict = lpr_sys_mmap(NULL, LPR_PY_MAX_CODES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
    if (lpr_sys_failed((long)verdict)) return;
    lpr_py_new_thread = new_thread;
    __atomic_store_n(&lpr_py_ready, request, __ATOMIC_RELEASE);
}

LP_FAMILY_SETUP(python, NULL, start, NULL);
