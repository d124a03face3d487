/* torch.c: the torch family — PyTorch's operators, autograd nodes and record_function ranges,
 * from unmodified programs (Python or C++), as torch's own profiler sees them.
 *
 * libtorch calls every "global callback" registered with at::addGlobalCallback at the start and
 * at the end of each operator it dispatches (and of each autograd node and user range), on the
 * thread that runs it. libprof registers one, from C: the callback struct is passed by value
 * (40 bytes, trivially copyable), the start function returns a std::unique_ptr through a hidden
 * return slot (it stores NULL: no context object), and the operator's name comes from the
 * exported at::RecordFunction::name(). The few fields read directly (sequence number, scope,
 * logical thread ids, the handle) sit at offsets that depend on torch's version: they come from
 * a table keyed by the version (below). On a version not in the table, or when the self-check of
 * the first operators fails, libprof says so once and records no operators.
 *
 * Registering is safe only once libtorch's initialisers have run: when the outermost dlopen that
 * loaded it returns after main has started (Python imports it that way, RTLD_LOCAL: its symbols
 * are looked up through its own handle), or as main starts for a program linked to it
 * (hooks/exit.c). A dlopen made by a constructor while the program starts is too early.
 *
 * Records: an operator that starts and ends on one thread is one timed CALL record, torch.op,
 * written when it ends (nested operators end first, as with every other call). Starts wait on a
 * per-thread stack. An operator ended on another thread than the one that started it (an async
 * range: record_function ended on a future's completion, torch.jit.fork) leaves its start on its
 * thread's stack: the start is written as torch.begin when that stack is unwound past it (or at
 * exit), and the end as torch.end wherever it happens; the converter pairs them by handle. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "../core/sys.h"
#include "hook.h"

/* ---- the layouts, by version ------------------------------------------------------------------
 * Offsets in at::RecordFunction, found with offsetof() on the release's ATen/record_function.h
 * (scripts/torch-layout prints a row) and checked by the self-check below. 2.x added kwinputs_
 * (an unordered_map) before fwd_thread_id_; the callback struct and the functions called are
 * the same from 1.13 to 2.11. */
struct layout {
    const char *version; /* major.minor: the layout did not change within a minor series */
    uint16_t thread_id;  /* step_callbacks_.thread_id_: the logical thread that ran the start */
    uint16_t scope;      /* step_callbacks_.scope_ (uint8_t at::RecordScope) */
    uint16_t seq;        /* sequence_nr_ (int64_t, -1: none) */
    uint16_t inputs;     /* inputs_ (ArrayRef: data, size) */
    uint16_t fwd_thread; /* fwd_thread_id_: a backward node's forward thread */
    uint16_t handle;     /* handle_ (set when a callback needs ids) */
};
static const struct layout layouts[] = {
    {"1.13", 88, 96, 200, 208, 248, 256},
    {"2.11", 88, 96, 200, 208, 304, 312},
};

/* at::RecordFunctionCallback, by value */
struct callback {
    void **(*start)(void **ret, const void *rf);
    void (*end)(const void *rf, void *ctx);
    double sampling_prob;
    uint8_t scopes[10];
    uint8_t needs_inputs, needs_outputs, needs_ids;
    uint8_t pad[3];
};
_Static_assert(sizeof(struct callback) == 40, "at::RecordFunctionCallback is 40 bytes");

/* What the start of an operator leaves for its end. */
#define DEPTH 64
struct open_op {
    const void *rf;
    uint64_t handle, t0;
    uint32_t py;    /* the Python line at the start (lpr_call_begin) */
    uint32_t shape; /* name id of the input shapes (LIBPROF_TORCH_SHAPES), 0 */
    uint32_t name;  /* name id, taken at the start (an async op's record may be gone at its end) */
    uint32_t spare;
};
static LP_TLS struct {
    uint32_t depth, lost; /* open starts; starts past DEPTH (not recorded) */
    struct open_op s[DEPTH];
} ops;

static const struct layout *L;
static const char *(*rf_name)(const void *);
static size_t (*rf_num_inputs)(const void *);
static uint64_t (*current_thread)(void);
static void (*input_sizes)(void *out, const void *rf, int flatten);
static void (*cxx_delete)(void *);
static uint64_t registered; /* the callback's handle; 0 before */
static int state;           /* 0 not yet, 1 registered, -1 given up */
static int checks;          /* self-checks passed */

static inline uint64_t field64(const void *rf, unsigned off) {
    uint64_t v;
    memcpy(&v, (const char *)rf + off, 8);
    return v;
}

static void give_up(const char *why) {
    if (__atomic_exchange_n(&state, -1, __ATOMIC_ACQ_REL) == -1) return;
    /* the callback stays registered (removing it from inside a callback is not safe): it
     * returns at once from now on */
    lpr_warn("PyTorch operators not recorded: %s", why);
}

/* The first operators check the offsets against what torch's own functions say: the logical
 * thread (currentThreadId()), the inputs' count (num_inputs()), and values that must be in range. */
static int self_check(const void *rf) {
    uint64_t tid = field64(rf, L->thread_id), n;
    memcpy(&n, (const char *)rf + L->inputs + 8, 8);
    int64_t seq = (int64_t)field64(rf, L->seq);
    unsigned scope = *((const uint8_t *)rf + L->scope);
    /* num_inputs() counts the schema's arguments; inputs_ holds them only when a callback asked */
    if (tid != current_thread() || (n != rf_num_inputs(rf) && (lpr_torch_shapes || n)) || seq < -1 || scope >= 10 ||
        !field64(rf, L->handle)) {
        give_up("torch's RecordFunction does not have the layout libprof knows for this version");
        return 0;
    }
    __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);
    return 1;
}

/* The input shapes as torch.profiler shows them ("[[2, 3], [3], []]"), interned. */
static uint32_t shapes_of(const void *rf) {
    struct vec {
        int64_t *b, *e, *cap;
    };
    struct {
        struct vec *b, *e, *cap;
    } v = {0};
    input_sizes(&v, rf, 0);
    char buf[256];
    size_t o = 0;
    buf[o++] = '[';
    for (struct vec *p = v.b; p && p < v.e; p++) {
        if (o + 4 < sizeof buf) o += (size_t)snprintf(buf + o, sizeof buf - o, "%s[", p == v.b ? "" : ", ");
        for (int64_t *d = p->b; d < p->e; d++)
            if (o + 24 < sizeof buf)
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%lld", d == p->b ? "" : ", ", (long long)*d);
        if (o + 2 < sizeof buf) buf[o++] = ']';
        if (p->b) cxx_delete(p->b);
    }
    if (v.b) cxx_delete(v.b);
    if (o + 1 < sizeof buf) buf[o++] = ']';
    buf[o < sizeof buf ? o : sizeof buf - 1] = '\0';
    return lpr_name_id(buf);
}

static void **op_start(void **ret, const void *rf) {
    *ret = NULL;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_TORCH);
    if (!t || state != 1) return ret;
    uint64_t t0 = lpr_ticks();
    if (LP_UNLIKELY(__atomic_load_n(&checks, __ATOMIC_RELAXED) < 16) && !self_check(rf)) return ret;
    if (ops.depth >= DEPTH) {
        ops.lost++;
        return ret;
    }
    uint8_t g = lpr_guard_hold(t); /* names and shapes are libprof's allocations */
    struct open_op *o = &ops.s[ops.depth];
    o->rf = rf;
    o->handle = field64(rf, L->handle);
    o->py = t->py_stack;
    o->name = lpr_name_id(rf_name(rf));
    o->shape = lpr_torch_shapes && input_sizes ? shapes_of(rf) : 0;
    lpr_guard_restore(t, g);
    o->t0 = t0;
    ops.depth++;
    return ret;
}

/* Argument words: name id, sequence number, scope, logical thread, forward thread, shapes id,
 * handle (LP_CALLS torch.op). */
static unsigned op_args(uint64_t *a, const struct open_op *o, const void *rf) {
    a[0] = o->name;
    a[1] = rf ? field64(rf, L->seq) : (uint64_t)-1;
    a[2] = rf ? *((const uint8_t *)rf + L->scope) : 0;
    a[3] = rf ? field64(rf, L->thread_id) : 0;
    a[4] = rf ? field64(rf, L->fwd_thread) : 0;
    a[5] = o->shape;
    a[6] = o->handle;
    return 7;
}

/* Starts above `keep` on this thread's stack ended elsewhere: their starts are written now. */
static void unwind_to(struct lpr_tls *t, uint32_t keep) {
    while (ops.depth > keep) {
        struct open_op *o = &ops.s[--ops.depth];
        if (!t) continue;
        uint64_t a[7];
        op_args(a, o, NULL);
        t->py_stack = o->py;
        lpr_call_record(t, LP_CALL_TORCH_BEGIN, o->t0, 0, 7, a, NULL, 0);
    }
}

static void op_end(const void *rf, void *ctx) {
    (void)ctx;
    uint64_t t1 = lpr_ticks();
    struct lpr_tls *t = lpr_call_begin(LP_FAM_TORCH);
    if (state != 1) return;
    uint32_t d = ops.depth;
    uint64_t handle = field64(rf, L->handle);
    while (d && (ops.s[d - 1].rf != rf || ops.s[d - 1].handle != handle)) d--;
    if (!d) { /* not started on this thread, or started while nothing recorded */
        if (t && field64(rf, L->thread_id) != current_thread()) {
            uint64_t a[7] = {lpr_name_id(rf_name(rf)), field64(rf, L->seq), 0, 0, 0, 0, handle};
            lpr_call_record(t, LP_CALL_TORCH_END, t1, 0, 7, a, NULL, 0);
        }
        return;
    }
    unwind_to(t, d);
    struct open_op *o = &ops.s[--ops.depth];
    if (!t) return;
    uint64_t a[7];
    op_args(a, o, rf);
    uint32_t sid = 0;
    if (LP_UNLIKELY(lpr_stack_depth)) { /* the operator's call site */
        uint8_t g = lpr_guard_hold(t);
        LP_STACK_CAPTURE(sid);
        lpr_guard_restore(t, g);
    }
    t->py_stack = o->py;
    lpr_call_record_stack(t, sid, LP_CALL_TORCH_OP, o->t0, t1, 7, a);
}

/* At exit: starts still open on the exiting thread (an async range never unwound) are written. */
static void torch_finish(void) {
    if (state == 1 && ops.depth) unwind_to(lpr_call_begin(LP_FAM_TORCH), 0);
}
LP_FAMILY_SETUP(torch, NULL, NULL, torch_finish);

/* ---- finding libtorch --------------------------------------------------------------------------- */

struct found {
    char path[4096];
};
static int find_lib(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    const char *p = info->dlpi_name, *b = p ? strrchr(p, '/') : NULL;
    b = b ? b + 1 : p;
    if (b && !strncmp(b, "libtorch_cpu.so", 15)) {
        snprintf(((struct found *)arg)->path, sizeof((struct found *)arg)->path, "%s", p);
        return 1;
    }
    return 0;
}

/* torch's version: the library's name says it (Debian: libtorch_cpu.so.1.13), or the Python
 * package beside it (pip: torch/lib/libtorch_cpu.so, torch/version.py). "" when neither does. */
static void version_of(const char *path, char *v, size_t cap) {
    v[0] = '\0';
    const char *so = strstr(path, "libtorch_cpu.so.");
    if (so) {
        snprintf(v, cap, "%s", so + 16);
        return;
    }
    char py[4200];
    const char *slash = strrchr(path, '/');
    if (!slash) return;
    snprintf(py, sizeof py, "%.*s/../version.py", (int)(slash - path), path);
    lpr_release_of_package(py, v, cap);
}

static void detect(void);
/* Called when the outermost dlopen of a thread returns and before main: registers the callback
 * once libtorch is in the process. Cheap when it is not (one walk of the loaded objects). */
static int main_started;

void lpr_torch_main(void) {
    main_started = 1;
    lpr_torch_detect();
}

void lpr_torch_detect(void) {
    /* before main, the objects of the program are mapped but maybe not initialised: a dlopen
     * made by a constructor returns into the middle of the program's start */
    if (state || !main_started) return;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_TORCH);
    if (!t) return;
    uint8_t g = lpr_guard_hold(t); /* the look-ups' allocations are libprof's */
    detect();
    lpr_guard_restore(t, g);
}

static void detect(void) {
    struct found f = {{0}};
    int has = lpr_dl_iterate(find_lib, &f);
    if (!has) return;
    static int busy;
    if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQ_REL)) return;
    char v[64];
    version_of(f.path, v, sizeof v);
    long row = lpr_release_row(v, layouts, sizeof layouts / sizeof *layouts, sizeof *layouts);
    L = row >= 0 ? &layouts[row] : NULL;
    if (!L) {
        char known[128];
        lpr_release_list(layouts, sizeof layouts / sizeof *layouts, sizeof *layouts, known, sizeof known);
        state = -1;
        lpr_warn("PyTorch operators not recorded: torch %s is not a version libprof knows (known: %s)",
                 v[0] ? v : "of unknown version", known);
        return;
    }
    void *h = lpr_dl_handle(f.path);
    uint64_t (*add)(struct callback) =
        h ? lpr_dlsym(h, "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE") : NULL;
    rf_name = h ? lpr_dlsym(h, "_ZNK2at14RecordFunction4nameEv") : NULL;
    rf_num_inputs = h ? lpr_dlsym(h, "_ZNK2at14RecordFunction10num_inputsEv") : NULL;
    current_thread = h ? lpr_dlsym(h, "_ZN2at14RecordFunction15currentThreadIdEv") : NULL;
    input_sizes = h ? lpr_dlsym(h, "_ZN5torch8profiler4impl10inputSizesERKN2at14RecordFunctionEb") : NULL;
    cxx_delete = h ? lpr_dlsym(h, "_ZdlPv") : NULL; /* its C++ runtime, among its dependencies */
    lpr_dl_release(h);
    if (!add || !rf_name || !rf_num_inputs || !current_thread || (lpr_torch_shapes && (!input_sizes || !cxx_delete))) {
        state = -1;
        lpr_warn("PyTorch operators not recorded: libtorch %s lacks the functions libprof calls", v);
        return;
    }
    struct callback cb = {op_start, op_end, 1.0, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, 0, 1, {0}};
    cb.needs_inputs = (uint8_t)(lpr_torch_shapes != 0);
    state = 1;
    registered = add(cb);
}
