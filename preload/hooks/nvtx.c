/* nvtx.c: the nvtx family — NVTX ranges, marks and domains as slices (category "nvtx"), from C
 * (NVTX 3, header-only) and from PyTorch (torch.cuda.nvtx), with no GPU needed.
 *
 * NVTX's loader, on a program's first NVTX call, dlopens the library named by the environment
 * variable NVTX_INJECTION64_PATH and calls its InitializeInjectionNvtx2 (the `libprof` command
 * sets the variable to libprof.so when it is not set; with LD_PRELOAD alone, set it too). libprof
 * is already loaded: the dlopen returns it, and its InitializeInjectionNvtx2 fills NVTX's tables
 * of function pointers (the core module's and the domains') with the functions below, which
 * record. What they record:
 *   - push/pop (nvtxRangePush*, nvtxDomainRangePushEx, torch.cuda.nvtx.range_push, nvtx3's
 *     scoped_range): a slice from the push to the pop, on the thread, named by the message, with
 *     its domain and depth — nested as called;
 *   - marks: a slice of no duration;
 *   - a thread named with nvtxNameOsThread has that name in the trace (its kernel name, which the
 *     program owns, is not changed);
 *   - start/end ranges (nvtxRangeStart*, which need not nest and may end on another thread): the
 *     start is an instant record with the range's message, domain and id (libprof hands out the
 *     ids), the end one with the id, on whichever thread ends it; the converter pairs them
 *     (lib/nvtx.c) into one async slice each. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include "hook.h"

enum { MODULE_CORE = 1, MODULE_CORE2 = 5 };
enum { CORE_MARK_EX = 1, CORE_MARK_A = 2, CORE_RANGE_START_EX = 4, CORE_RANGE_START_A = 5, CORE_RANGE_END = 7 };
enum { CORE_PUSH_EX = 8, CORE_PUSH_A = 9, CORE_POP = 11, CORE_NAME_THREAD_A = 14, CORE_NAME_THREAD_W = 15 };
enum { CORE2_MARK_EX = 1, CORE2_START_EX = 2, CORE2_END = 3, CORE2_PUSH_EX = 4, CORE2_POP = 5 };
enum { CORE2_REGISTER_STRING_A = 10, CORE2_CREATE_A = 12 };
enum { MSG_ASCII = 1, MSG_UNICODE = 2, MSG_REGISTERED = 3 };

typedef void (*fnptr)(void);
struct export_callbacks {
    size_t struct_size;
    int (*get_module_table)(int module, fnptr ***table, unsigned *size);
};
struct attrs { /* nvtxEventAttributes_v2 */
    uint16_t version, size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type, reserved0;
    uint64_t payload;
    int32_t message_type;
    const void *message;
};

/* Domains and registered strings: handles are pointers into these tables (never freed: a program
 * makes a few). Slot 0 of domains is NVTX's default domain (a NULL handle). */
#define NDOMAINS 256
#define NSTRINGS 4096
static uint32_t domains[NDOMAINS], strings[NSTRINGS];
static unsigned ndomains = 1, nstrings;
static uint64_t range_ids; /* the last start/end range's id handed out */

#define DEPTH 64
static LP_TLS struct {
    uint32_t depth;
    uint64_t t0[DEPTH];
    uint32_t name[DEPTH], domain[DEPTH];
} stack;

static uint32_t domain_id(const void *handle) {
    const uint32_t *d = handle;
    return d >= domains && d < domains + NDOMAINS ? *d : 0;
}

/* The message of an event, as a name id (0: none). */
static uint32_t message(struct lpr_tls *t, const struct attrs *a) {
    if (!a || a->size < 48 || !a->message) return 0;
    if (a->message_type == MSG_REGISTERED) {
        const uint32_t *s = a->message;
        return s >= strings && s < strings + NSTRINGS ? *s : 0;
    }
    char buf[256];
    if (a->message_type == MSG_UNICODE) {
        const wchar_t *w = a->message;
        size_t i = 0;
        for (; w[i] && i + 1 < sizeof buf; i++) buf[i] = w[i] < 128 ? (char)w[i] : '?';
        buf[i] = '\0';
    } else if (a->message_type == MSG_ASCII) {
        snprintf(buf, sizeof buf, "%s", (const char *)a->message);
    } else {
        return 0;
    }
    uint8_t g = lpr_guard_hold(t);
    uint32_t id = lpr_name_id(buf);
    lpr_guard_restore(t, g);
    return id;
}

static uint32_t text(struct lpr_tls *t, const char *s) {
    uint8_t g = lpr_guard_hold(t);
    uint32_t id = lpr_name_id(s ? s : "");
    lpr_guard_restore(t, g);
    return id;
}

static int push(uint32_t domain, uint32_t name) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    int level = (int)stack.depth;
    if (stack.depth < DEPTH) {
        stack.t0[stack.depth] = t ? lpr_ticks() : 0;
        stack.name[stack.depth] = name;
        stack.domain[stack.depth] = domain;
    }
    stack.depth++;
    return level;
}

static int pop(void) {
    if (!stack.depth) return -1;
    uint32_t d = --stack.depth;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    if (t && d < DEPTH && stack.t0[d]) {
        uint64_t a[3] = {stack.name[d] ? stack.name[d] : text(t, "(nvtx range)"), stack.domain[d], d};
        lpr_call_record(t, LP_CALL_NVTX_RANGE, stack.t0[d], lpr_ticks(), 3, a, NULL, 0);
    }
    return (int)d;
}

static void mark(uint32_t domain, uint32_t name) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    if (!t) return;
    uint64_t now = lpr_ticks(), a[2] = {name ? name : text(t, "(nvtx mark)"), domain};
    lpr_call_record(t, LP_CALL_NVTX_MARK, now, now, 2, a, NULL, 0);
}

/* ---- the functions NVTX calls ------------------------------------------------------------------ */
static int push_a(const char *msg) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    return push(0, t ? text(t, msg) : 0);
}
static int push_ex(const struct attrs *a) { return push(0, message(lpr_call_begin(LP_FAM_NVTX), a)); }
static int pop_core(void) { return pop(); }
static void mark_a(const char *msg) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    if (t) mark(0, text(t, msg));
}
static void mark_ex(const struct attrs *a) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    if (t) mark(0, message(t, a));
}
/* A start/end range: its start now (the id is what NVTX hands the program, which gives it back to
 * end it), its end on whichever thread ends it. */
static uint64_t start(uint32_t domain, uint32_t name) {
    uint64_t id = __atomic_add_fetch(&range_ids, 1, __ATOMIC_RELAXED);
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    if (t) {
        uint64_t now = lpr_ticks(), a[3] = {name ? name : text(t, "(nvtx range)"), domain, id};
        lpr_call_record(t, LP_CALL_NVTX_START, now, now, 3, a, NULL, 0);
    }
    return id;
}
static void end(uint64_t id) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    if (!t) return;
    uint64_t now = lpr_ticks(), a[1] = {id};
    lpr_call_record(t, LP_CALL_NVTX_END, now, now, 1, a, NULL, 0);
}
static uint64_t start_a(const char *msg) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    return start(0, t ? text(t, msg) : 0);
}
static uint64_t start_ex(const struct attrs *a) { return start(0, message(lpr_call_begin(LP_FAM_NVTX), a)); }
static void end_any(uint64_t id) { end(id); }
static int d_push(const void *domain, const struct attrs *a) {
    return push(domain_id(domain), message(lpr_call_begin(LP_FAM_NVTX), a));
}
static int d_pop(const void *domain) {
    (void)domain;
    return pop();
}
static void d_mark(const void *domain, const struct attrs *a) {
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    if (t) mark(domain_id(domain), message(t, a));
}
static uint64_t d_start(const void *domain, const struct attrs *a) {
    return start(domain_id(domain), message(lpr_call_begin(LP_FAM_NVTX), a));
}
static void d_end(const void *domain, uint64_t id) {
    (void)domain;
    end(id);
}
/* nvtxNameOsThread: the thread's name in the trace (its kernel name is left as it is) */
static void name_thread_a(uint32_t tid, const char *name) {
    if (name && lpr_call_begin(LP_FAM_NVTX)) lpr_tbuf_thread_label(tid, name);
}
static void name_thread_w(uint32_t tid, const wchar_t *name) {
    char buf[48];
    size_t i = 0;
    for (; name && name[i] && i + 1 < sizeof buf; i++) buf[i] = name[i] < 128 ? (char)name[i] : '?';
    buf[i] = '\0';
    if (name) name_thread_a(tid, buf);
}
static const void *d_create(const char *name) {
    unsigned i = __atomic_fetch_add(&ndomains, 1, __ATOMIC_RELAXED);
    if (i >= NDOMAINS) return NULL; /* NVTX's default domain then */
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    domains[i] = t ? text(t, name) : 0;
    return &domains[i];
}
static const void *d_register(const void *domain, const char *s) {
    (void)domain;
    unsigned i = __atomic_fetch_add(&nstrings, 1, __ATOMIC_RELAXED);
    if (i >= NSTRINGS) return NULL;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_NVTX);
    strings[i] = t ? text(t, s) : 0;
    return &strings[i];
}

static void fill(const struct export_callbacks *cb, int module, const unsigned *ids, const fnptr *fns, unsigned n) {
    fnptr **table = NULL;
    unsigned size = 0;
    if (!cb->get_module_table(module, &table, &size) || !table) return;
    for (unsigned i = 0; i < n; i++)
        if (ids[i] < size && table[ids[i]]) *table[ids[i]] = fns[i];
}

int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t id));

/* NVTX's loader calls this once (the first NVTX call of the process). 1: libprof takes the calls. */
LP_EXPORT int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t id)) {
    const struct export_callbacks *cb = get_export_table ? get_export_table(1 /* NVTX_ETID_CALLBACKS */) : NULL;
    if (!cb || cb->struct_size < sizeof *cb || !cb->get_module_table) return 0;
    static const unsigned core_ids[] = {CORE_MARK_EX,       CORE_MARK_A,       CORE_RANGE_START_EX, CORE_RANGE_START_A,
                                        CORE_RANGE_END,     CORE_PUSH_EX,      CORE_PUSH_A,         CORE_POP,
                                        CORE_NAME_THREAD_A, CORE_NAME_THREAD_W};
    const fnptr core[] = {(fnptr)mark_ex, (fnptr)mark_a, (fnptr)start_ex, (fnptr)start_a,       (fnptr)end_any,
                          (fnptr)push_ex, (fnptr)push_a, (fnptr)pop_core, (fnptr)name_thread_a, (fnptr)name_thread_w};
    static const unsigned core2_ids[] = {CORE2_MARK_EX, CORE2_START_EX,          CORE2_END,     CORE2_PUSH_EX,
                                         CORE2_POP,     CORE2_REGISTER_STRING_A, CORE2_CREATE_A};
    const fnptr core2[] = {(fnptr)d_mark, (fnptr)d_start,    (fnptr)d_end,   (fnptr)d_push,
                           (fnptr)d_pop,  (fnptr)d_register, (fnptr)d_create};
    fill(cb, MODULE_CORE, core_ids, core, sizeof core_ids / sizeof *core_ids);
    fill(cb, MODULE_CORE2, core2_ids, core2, sizeof core2_ids / sizeof *core2_ids);
    return 1;
}
