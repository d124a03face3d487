/* executorch.c: the executorch family — ExecuTorch programs (.pte) run by its runtime, from Python
 * (the executorch wheel's bindings) or C++ (a program linked to its libraries), unmodified: each
 * Method::execute a slice (the model's iterations), each instruction it runs a slice inside it,
 * each method's load (Method::init: its plan read, its delegates initialised) a slice,
 * named by its operator ("aten::convolution.out") or delegate ("delegate XnnpackBackend"), and
 * the ETDumps the program's own profiler hands it, kept in the trace for the converter
 * (lib/etdump.c), which places their operator and delegate events inside the execute slices.
 *
 * How: Method::execute, Method::execute_instruction, Method::init and ETDumpGen::get_etdump_data are exported
 * C++ functions, and the runtime calls them through its PLT — even the bindings, which carry a
 * copy of the runtime of their own — so libprof defines them (their mangled names) and passes the
 * call on to the runtime's definition. The instruction about to run is read from the Method: its
 * step (chain, instruction) and its ExecutionPlan, the program's own flatbuffer, whose
 * instructions name an operator or a delegate. The Method's layout is ExecuTorch's, by release
 * (the table below, scripts/executorch-layout prints a row); each plan is checked before it is
 * read (its chain and instruction in range), and a release not in the table, or a check that
 * fails, leaves the instructions unnamed ("instruction") — the execute slices stay. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../../lib/flatbuf.h"
#include "../core/sys.h"
#include "hook.h"

/* ---- the Method's layout, by release -------------------------------------------------------- */
struct layout {
    const char *version; /* major.minor */
    uint16_t step;       /* step_state_: {size_t chain_idx, instr_idx} */
    uint16_t plan;       /* serialization_plan_: executorch_flatbuffer::ExecutionPlan* */
};
static const struct layout layouts[] = {
    {"1.2", 0, 40},
    {"1.5", 0, 40},
};

/* ExecuTorch's program schema (schema/program.fbs), the fields read */
enum { PLAN_NAME = 0, PLAN_CHAINS = 5, PLAN_OPERATORS = 6, PLAN_DELEGATES = 7 };
enum { CHAIN_INSTRUCTIONS = 2 };
enum { INSTR_ARGS_TYPE = 0, INSTR_ARGS = 1 };
enum { CALL_INDEX = 0 }; /* KernelCall.op_index, DelegateCall.delegate_index */
enum { OPERATOR_NAME = 0, OPERATOR_OVERLOAD = 1 };
enum { DELEGATE_ID = 0 };

static const struct layout *L;
static int state; /* 0 not looked at, 1 layout known, -1 instructions unnamed */
static const struct lp_fb whole = {(const uint8_t *)1, (const uint8_t *)UINTPTR_MAX};

/* The release of the library that defines `fn`: its wheel's executorch/version.py. */
static void version_of(void *fn, char *v, size_t cap) {
    Dl_info info;
    v[0] = '\0';
    if (!dladdr(fn, &info) || !info.dli_fname) return;
    const char *p = info.dli_fname, *at = NULL, *q = p;
    while ((q = strstr(q, "/executorch/"))) at = q++; /* the package's directory: the last one */
    if (!at) return;
    char path[4200];
    snprintf(path, sizeof path, "%.*s/executorch/version.py", (int)(at - p), p);
    lpr_release_of_package(path, v, cap);
}

static void find_layout(void *fn) {
    char v[64];
    version_of(fn, v, sizeof v);
    long row = lpr_release_row(v, layouts, sizeof layouts / sizeof *layouts, sizeof *layouts);
    if (row >= 0) {
        L = &layouts[row];
        state = 1;
        return;
    }
    char known[64];
    lpr_release_list(layouts, sizeof layouts / sizeof *layouts, sizeof *layouts, known, sizeof known);
    state = -1;
    lpr_warn("ExecuTorch instructions not named: executorch %s is not a release libprof knows (known: %s); "
             "its executes are recorded",
             v[0] ? v : "of unknown release", known);
}

static const uint8_t *plan_of(const void *method) {
    const uint8_t *p;
    memcpy(&p, (const char *)method + L->plan, sizeof p);
    return p;
}

/* The instruction the Method is about to run: its name id (0: unnamed) and kind. */
struct instr {
    uint64_t chain, index;
    uint32_t name;
    uint8_t kind;
};

static int describe(const void *method, struct instr *in) {
    uint64_t step[2];
    memcpy(step, (const char *)method + L->step, sizeof step);
    in->chain = step[0];
    in->index = step[1];
    const uint8_t *plan = plan_of(method), *chains, *ins;
    uint32_t nchains, ninstr, len, olen = 0;
    chains = lp_fb_vec(&whole, plan, PLAN_CHAINS, 4, &nchains);
    if (!chains || in->chain >= nchains) return -1;
    ins = lp_fb_vec(&whole, lp_fb_at(&whole, chains, (uint32_t)in->chain), CHAIN_INSTRUCTIONS, 4, &ninstr);
    if (!ins || in->index >= ninstr) return -1;
    const uint8_t *instr = lp_fb_at(&whole, ins, (uint32_t)in->index);
    in->kind = lp_fb_u8(&whole, instr, INSTR_ARGS_TYPE, 0);
    const uint8_t *call = lp_fb_table(&whole, instr, INSTR_ARGS);
    int32_t k = lp_fb_i32(&whole, call, CALL_INDEX, 0); /* absent: the default, 0 */
    char name[256];
    name[0] = '\0';
    if (in->kind == LP_ET_KERNEL || in->kind == LP_ET_DELEGATE) {
        uint32_t n;
        const uint8_t *v = lp_fb_vec(&whole, plan, in->kind == LP_ET_KERNEL ? PLAN_OPERATORS : PLAN_DELEGATES, 4, &n);
        if (k < 0 || (uint32_t)k >= n) return -1;
        const uint8_t *row = lp_fb_at(&whole, v, (uint32_t)k);
        if (in->kind == LP_ET_KERNEL) {
            const char *op = lp_fb_str(&whole, row, OPERATOR_NAME, &len),
                       *ov = lp_fb_str(&whole, row, OPERATOR_OVERLOAD, &olen);
            if (!op) return -1;
            snprintf(name, sizeof name, "%.*s%s%.*s", (int)len, op, olen ? "." : "", (int)olen, ov ? ov : "");
        } else {
            const char *id = lp_fb_str(&whole, row, DELEGATE_ID, &len);
            if (!id) return -1;
            snprintf(name, sizeof name, "delegate %.*s", (int)len, id);
        }
    } else {
        static const char *const other[] = {"move", "jump_false", "free"};
        if (in->kind < LP_ET_MOVE || in->kind > LP_ET_FREE) return -1;
        snprintf(name, sizeof name, "%s", other[in->kind - LP_ET_MOVE]);
    }
    in->name = lpr_name_id(name);
    return 0;
}

/* Names by (plan, chain, instruction), per thread: a model's instructions are few and repeat. */
#define CACHE 256
static LP_TLS struct {
    const void *plan;
    uint64_t key;
    uint32_t name;
    uint8_t kind;
} cache[CACHE];

static void name_of(const void *method, struct instr *in) {
    in->name = 0;
    in->kind = 0;
    if (state != 1) return;
    uint64_t step[2];
    memcpy(step, (const char *)method + L->step, sizeof step);
    const void *plan = plan_of(method);
    uint64_t key = step[0] << 32 ^ step[1];
    unsigned h = (unsigned)(((uintptr_t)plan >> 4 ^ key * 0x9e3779b97f4a7c15u) >> 56) % CACHE;
    if (cache[h].plan == plan && cache[h].key == key) {
        in->chain = step[0];
        in->index = step[1];
        in->name = cache[h].name;
        in->kind = cache[h].kind;
        return;
    }
    if (describe(method, in) != 0) {
        if (__atomic_exchange_n(&state, -1, __ATOMIC_ACQ_REL) == 1)
            lpr_warn("ExecuTorch instructions not named: the Method does not have the layout libprof knows for "
                     "executorch %s",
                     L->version);
        in->name = 0;
        return;
    }
    cache[h].plan = plan;
    cache[h].key = key;
    cache[h].name = in->name;
    cache[h].kind = in->kind;
}

/* ---- the hooks ---------------------------------------------------------------------------------- */

/* The functions by their mangled names (the macros of hook.h take a name as written):
 *   _ZN10executorch7runtime6Method7executeEv              Method::execute()
 *   _ZN10executorch7runtime6Method19execute_instructionEv  Method::execute_instruction()
 *   _ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv    ETDumpGen::get_etdump_data()
 *   _ZN10executorch7runtime6Method4initEPN21executorch_flatbuffer13ExecutionPlanEPKNS0_12NamedDataMapE
 *     PKNS0_21LoadBackendOptionsMapE    Method::init(ExecutionPlan*, const NamedDataMap*,
 *     const LoadBackendOptionsMap*) (the same in 1.2 and 1.5) */
/* executorch::runtime::Error Method::execute() — `this` the one argument, the Error (a uint32_t
 * enum) in the return register. */
uint32_t _ZN10executorch7runtime6Method7executeEv(void *method);
uint32_t _ZN10executorch7runtime6Method19execute_instructionEv(void *method);
struct etdump_result {
    void *buf;
    size_t size;
};
struct etdump_result _ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv(void *gen);
uint32_t
_ZN10executorch7runtime6Method4initEPN21executorch_flatbuffer13ExecutionPlanEPKNS0_12NamedDataMapEPKNS0_21LoadBackendOptionsMapE(
    void *method, const void *plan, const void *data_map, const void *backend_options);

LP_REAL_SLOT(_ZN10executorch7runtime6Method7executeEv)
LP_REAL_SLOT(_ZN10executorch7runtime6Method19execute_instructionEv)
LP_REAL_SLOT(_ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv)
LP_REAL_SLOT(
    _ZN10executorch7runtime6Method4initEPN21executorch_flatbuffer13ExecutionPlanEPKNS0_12NamedDataMapEPKNS0_21LoadBackendOptionsMapE)

/* The method's name ("forward") from its plan, into name[128]; NULL where the release is not known. */
static const char *method_name(const uint8_t *plan, char *name) {
    uint32_t len = 0;
    const char *s = state == 1 && plan ? lp_fb_str(&whole, plan, PLAN_NAME, &len) : NULL;
    if (!s) return NULL;
    snprintf(name, 128, "%.*s", (int)len, s);
    return name;
}

__attribute__((noinline)) static uint32_t execute_slow(void *method) {
    if (!LP_REAL(_ZN10executorch7runtime6Method7executeEv)) return 1; /* Error::Internal */
    if (!state) find_layout(real__ZN10executorch7runtime6Method7executeEv);
    LP_BEGIN(LP_FAM_EXECUTORCH);
    char name[128];
    const char *s = t && state == 1 ? method_name(plan_of(method), name) : NULL; /* (L: the layout known) */
    uint32_t r = LP_REAL(_ZN10executorch7runtime6Method7executeEv)(method);
    LP_RECORD_STR(LP_CALL_ET_EXECUTE, s, U(method), r);
    return r;
}

/* A method's load: what the ETDump's load events (Program::load_method, Method::init) are placed
 * by. The plan is an argument here, so its name needs no layout — only a release known to have
 * this schema. */
__attribute__((noinline)) static uint32_t init_slow(void *method, const void *plan, const void *map, const void *opts) {
    if (!LP_REAL(
            _ZN10executorch7runtime6Method4initEPN21executorch_flatbuffer13ExecutionPlanEPKNS0_12NamedDataMapEPKNS0_21LoadBackendOptionsMapE))
        return 1;
    if (!state)
        find_layout(
            real__ZN10executorch7runtime6Method4initEPN21executorch_flatbuffer13ExecutionPlanEPKNS0_12NamedDataMapEPKNS0_21LoadBackendOptionsMapE);
    LP_BEGIN(LP_FAM_EXECUTORCH);
    char name[128];
    const char *s = t ? method_name(plan, name) : NULL;
    uint32_t r = LP_REAL(
        _ZN10executorch7runtime6Method4initEPN21executorch_flatbuffer13ExecutionPlanEPKNS0_12NamedDataMapEPKNS0_21LoadBackendOptionsMapE)(
        method, plan, map, opts);
    LP_RECORD_STR(LP_CALL_ET_INIT, s, U(method), r);
    return r;
}
LP_EXPORT uint32_t
_ZN10executorch7runtime6Method4initEPN21executorch_flatbuffer13ExecutionPlanEPKNS0_12NamedDataMapEPKNS0_21LoadBackendOptionsMapE(
    void *method, const void *plan, const void *map, const void *opts) {
    LP_PASS_ARGS(
        LP_FAM_EXECUTORCH,
        _ZN10executorch7runtime6Method4initEPN21executorch_flatbuffer13ExecutionPlanEPKNS0_12NamedDataMapEPKNS0_21LoadBackendOptionsMapE,
        (method, plan, map, opts));
    return init_slow(method, plan, map, opts);
}
LP_EXPORT uint32_t _ZN10executorch7runtime6Method7executeEv(void *method) {
    LP_PASS_ARGS(LP_FAM_EXECUTORCH, _ZN10executorch7runtime6Method7executeEv, (method));
    return execute_slow(method);
}

__attribute__((noinline)) static uint32_t instruction_slow(void *method) {
    if (!LP_REAL(_ZN10executorch7runtime6Method19execute_instructionEv)) return 1;
    if (!state) find_layout(real__ZN10executorch7runtime6Method19execute_instructionEv);
    struct lpr_tls *t = lpr_call_begin(LP_FAM_EXECUTORCH);
    struct instr in = {0, 0, 0, 0};
    if (t) {
        uint8_t g = lpr_guard_hold(t); /* names are libprof's allocations */
        name_of(method, &in);
        lpr_guard_restore(t, g);
    }
    uint64_t t0 = t ? lpr_ticks() : 0;
    uint32_t r = LP_REAL(_ZN10executorch7runtime6Method19execute_instructionEv)(method);
    if (t) {
        uint64_t a[5] = {in.name ? in.name : lpr_name_id("instruction"), in.chain, in.index, in.kind, r};
        lpr_call_record(t, LP_CALL_ET_INSTRUCTION, t0, lpr_ticks(), 5, a, NULL, 0);
    }
    return r;
}
LP_EXPORT uint32_t _ZN10executorch7runtime6Method19execute_instructionEv(void *method) {
    LP_PASS_ARGS(LP_FAM_EXECUTORCH, _ZN10executorch7runtime6Method19execute_instructionEv, (method));
    return instruction_slow(method);
}

/* The ETDump the program's profiler hands it: a copy goes into the trace (STRING chunk
 * LP_STR_ETDUMP), the program gets its buffer untouched. */
__attribute__((noinline)) static struct etdump_result etdump_slow(void *gen) {
    struct etdump_result r = {NULL, 0};
    if (!LP_REAL(_ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv)) return r;
    r = LP_REAL(_ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv)(gen);
    struct lpr_tls *t = lpr_call_begin(LP_FAM_EXECUTORCH);
    if (t && r.buf && r.size && r.size < (1u << 30) && lpr_spool_on) {
        uint8_t g = lpr_guard_hold(t);
        uint32_t key = LP_STR_ETDUMP;
        lpr_spool_write(LP_CHUNK_STRING, 0, &key, 4, r.buf, r.size);
        lpr_guard_restore(t, g);
    }
    return r;
}
LP_EXPORT struct etdump_result _ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv(void *gen) {
    LP_PASS_ARGS(LP_FAM_EXECUTORCH, _ZN10executorch6etdump9ETDumpGen15get_etdump_dataEv, (gen));
    return etdump_slow(gen);
}
