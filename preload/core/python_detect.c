/* python_detect.c: the interpreter in the process — found (at start and after each dlopen), its
 * version's layout chosen (python_layouts.h), its symbols and the code table's room set up once;
 * and what the hooks read of its objects through that layout (a frame's code and arguments, a
 * str's text, a list's items, a type's name, a code's name and file). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "config.h"
#include "log.h"
#include "own.h"
#include "python_int.h"
#include "real.h"
#include "stacks.h"
#include "tbuf.h"

const struct lpr_pylayout *L;
int (*py_initialized)(void);
void *(*py_this_tstate)(void);
int (*py_addr2line)(void *code, int addr);
uintptr_t py_code_type, py_str_type, py_list_type, py_tuple_type, py_bytes_type;
uintptr_t eval_lo, eval_hi, interp_lo, interp_hi;
size_t frame_bytes;
struct lpr_py_p3 P3;
uintptr_t lpr_py_gil_lo, lpr_py_gil_span;
int tss_direct;
uintptr_t chunk_data, chunk_head;
uint64_t *slots;
struct pyent *ents;
char *strs;
uint64_t *lines;
struct lpr_ahead ents_ahead, strs_ahead, lines_ahead;
static int tried;

static int interp_range(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t a = *(uintptr_t *)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && a >= lo && a < hi) {
            interp_lo = lo;
            interp_hi = hi;
            return 1;
        }
    }
    return 0;
}

/* The interpreter's `name`: the global scope first (the executable's own exports, which
 * RTLD_NEXT from a preload does not see), then objects loaded with local scope. */
void *lpr_py_sym(const char *name) {
    void *p = lpr_dlsym(RTLD_DEFAULT, name);
    return p ? p : lpr_resolve(name);
}

/* "python3.12", "libpython3.8.so.1.0", "libpython2.7.so" -> major, minor */
static int version_from_name(const char *path, int *major, int *minor) {
    const char *b = path ? strrchr(path, '/') : NULL;
    b = b ? b + 1 : path;
    const char *p = b ? strstr(b, "python") : NULL;
    if (!p || p[6] < '2' || p[6] > '9' || p[7] != '.') return 0;
    *major = p[6] - '0';
    *minor = atoi(p + 8);
    return 1;
}

/* Look for an interpreter (at start and after every dlopen until one is found). Not from a
 * signal handler: it looks symbols up. */
void lpr_python_detect(void) {
    if (lpr_py_on || tried > 1) return;
    if (!lpr_cfg.python) { /* LIBPROF_PYTHON=0 */
        tried = 2;
        return;
    }
    void *init = lpr_py_sym("Py_IsInitialized");
    if (!init) return;
    tried = 2; /* one interpreter per process: decided now */
    int major = 0, minor = 0;
    const unsigned long *hex = lpr_py_sym("Py_Version");
    Dl_info di;
    if (hex) {
        major = (int)(*hex >> 24);
        minor = (int)((*hex >> 16) & 0xff);
    } else if (dladdr(init, &di)) {
        version_from_name(di.dli_fname, &major, &minor);
    }
    for (size_t i = 0; i < sizeof lpr_pylayouts / sizeof lpr_pylayouts[0]; i++)
        if (lpr_pylayouts[i].major == major && lpr_pylayouts[i].minor == minor) L = &lpr_pylayouts[i];
    char ft[32];
    snprintf(ft, sizeof ft, "python%d.%dt", major, minor);
    if (L && dladdr(init, &di) && di.dli_fname && strstr(di.dli_fname, ft)) { /* free-threaded: other layouts */
        lpr_warn("Python %d.%d without the GIL (free-threaded) is not one libprof can read: no Python frames", major,
                 minor);
        return;
    }
    if (!L) {
        if (major)
            lpr_warn("Python %d.%d is not one libprof can read (3.7 to 3.13): no Python frames", major, minor);
        else
            lpr_warn("a Python interpreter of unknown version: no Python frames");
        return;
    }
    int need[] = {L->f_code + 8, L->f_back + 8, L->f_instr + 8, L->f_owner + 1, L->f_entry + 1};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if ((size_t)need[i] > frame_bytes) frame_bytes = (size_t)need[i];
    frame_bytes = (frame_bytes + 7) & ~(size_t)7;
    if (L->kind == 1) chunk_data = (uintptr_t)L->chunk_data, chunk_head = chunk_data + frame_bytes;
    if (L->kind == 1)
        P3.ts_frame = (uintptr_t)L->tstate_frame, P3.cframe = L->cframe_frame >= 0,
        P3.cframe_frame = P3.cframe ? (uintptr_t)L->cframe_frame : 0, P3.datastack = (uintptr_t)L->ts_datastack,
        P3.back = (uintptr_t)L->f_back, P3.instr = (uintptr_t)L->f_instr, P3.code = (uintptr_t)L->f_code,
        P3.entry = L->f_entry;
    const char *runtime = lpr_py_sym("_PyRuntime");
    if (L->kind == 1 && runtime && L->rt_initialized >= 0 && L->rt_tss >= 0)
        P3.initialized = (const int *)(runtime + L->rt_initialized), P3.tss = (const int *)(runtime + L->rt_tss);
    else
        tss_direct = -1;
    if (P3.tss && L->ts_thread >= 0 &&
        (L->rt_holder >= 0 || (L->ts_interp >= 0 && L->interp_gil >= 0 && L->gil_holder >= 0)) &&
        (uintptr_t)pthread_self() == thread_self()) {
        P3.thread = (uintptr_t)L->ts_thread;
        if (L->rt_holder >= 0) {
            __atomic_store_n(&P3.holder, (const uintptr_t *)(runtime + L->rt_holder), __ATOMIC_SEQ_CST);
            lpr_py_holder_again();
        }
    }
    py_initialized = (int (*)(void))init;
    py_this_tstate = (void *(*)(void))lpr_py_sym("PyGILState_GetThisThreadState");
    py_addr2line = (int (*)(void *, int))lpr_py_sym("PyCode_Addr2Line");
    py_code_type = (uintptr_t)lpr_py_sym("PyCode_Type");
    py_str_type = (uintptr_t)lpr_py_sym("PyUnicode_Type");
    py_list_type = (uintptr_t)lpr_py_sym("PyList_Type");
    py_tuple_type = (uintptr_t)lpr_py_sym("PyTuple_Type");
    py_bytes_type = (uintptr_t)lpr_py_sym("PyBytes_Type");
    void *eval = lpr_py_sym("_PyEval_EvalFrameDefault");
    const ElfW(Sym) *sym = NULL;
    if (eval && dladdr1(eval, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
        eval_lo = (uintptr_t)eval;
        eval_hi = eval_lo + sym->st_size;
    }
    if (!py_this_tstate || !py_addr2line || !py_code_type || !eval_hi) {
        lpr_warn("Python 3.%d found without the symbols libprof reads: no Python frames", minor);
        return;
    }
    /* the GIL's condition variable: in _PyRuntime (3.8-3.11 its ceval.gil; 3.12-3.13 the main
     * interpreter's own _gil, which _PyRuntime holds), its mutex right after it — what the
     * sync hooks tell a wait for the GIL by (python.h) */
    if (runtime && dladdr1(runtime, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size)
        lpr_py_gil_lo = (uintptr_t)runtime, lpr_py_gil_span = sym->st_size;
    uintptr_t a = (uintptr_t)init;
    lpr_dl_iterate(interp_range, &a);
    if (lpr_stacks_table() != 0) return;
    const int prot = PROT_READ | PROT_WRITE, flags = MAP_NORESERVE;
    /* (the slots charged whole: a signal handler may touch them, where a page must not fail) */
    slots = lpr_own_map(LP_OWN_PYTHON, CODE_SLOTS * 8ull, prot, 0);
    ents = lpr_own_map(LP_OWN_PYTHON, MAX_CODES * sizeof *ents, prot, flags);
    strs = lpr_own_map(LP_OWN_PYTHON, STR_BYTES, prot, flags);
    if (L->co_linetable >= 0 && py_bytes_type) /* (else CPython's PyCode_Addr2Line alone) */
        lines = lpr_own_map(LP_OWN_PYTHON, LINE_WORDS * 8ull, prot, flags);
    if (!slots || !ents || !strs) {
        lpr_warn("out of memory for the Python code table: no Python frames");
        return;
    }
    if (lpr_cfg.sample_hz) { /* the sampler's signal handler registers code objects too: no page faults there */
        lpr_resident(slots, 0, CODE_SLOTS_FIRST * 8ull); /* (the rest as the table grows: a fault) */
        ents_ahead.on = strs_ahead.on = lines_ahead.on = 1;
    }
    if (lpr_verbose) lpr_info("Python 3.%d found: Python frames in stacks and calls", minor);
    static struct lpr_stack_python part;
    /* (LIBPROF_STACK_CACHE_OFF: the hooks' Python parts walked afresh too, what the caches
     * must give — the sampler's stays cached: its handler has no room for a fresh walk's) */
    part = (struct lpr_stack_python){lpr_py_part,      lpr_cfg.stack_cache_off ? lpr_py_with_fresh : lpr_py_with,
                                     lpr_pycode_write, eval_lo,
                                     eval_hi,          interp_lo,
                                     interp_hi};
    lpr_stacks_python(&part); /* stacks take their Python part from here on */
    __atomic_store_n(&lpr_py_on, 1, __ATOMIC_RELEASE);
    if (lpr_gate & ((1u << LP_FAM_COUNT) - 1)) /* recording: the call hooks read Python lines from now */
        __atomic_fetch_or(&lpr_gate, LP_GATE_PY, __ATOMIC_RELAXED);
}

/* ---- what the hooks read ---- */

/* The profile function set on thread state `ts` (c_profilefunc). */
void *lpr_py_profile_of(void *ts) { return L ? (void *)rd((uintptr_t)ts + (uintptr_t)L->ts_profile) : NULL; }

/* The qualified name of code `id` as copied when first seen (UTF-8, not NUL-terminated). */
const char *lpr_py_code_name(uint32_t id, size_t *len) {
    if (!lpr_py_on || id == 0 || id >= MAX_CODES || !__atomic_load_n(&ents[id].ready, __ATOMIC_ACQUIRE)) {
        *len = 0;
        return "";
    }
    *len = ents[id].name_len;
    return strs + ents[id].str;
}

/* The file of code `id` as copied when first seen (UTF-8, not NUL-terminated). */
const char *lpr_py_code_file(uint32_t id, size_t *len) {
    if (!lpr_py_on || id == 0 || id >= MAX_CODES || !__atomic_load_n(&ents[id].ready, __ATOMIC_ACQUIRE)) {
        *len = 0;
        return "";
    }
    *len = ents[id].file_len;
    return strs + ents[id].str + ents[id].name_len;
}

/* Argument `i` of a frame handed to a PEP 523 evaluation function (its fast locals start with
 * the arguments, set before it is evaluated): the object, or 0. */
uintptr_t lpr_py_frame_arg(const void *frame, unsigned i) {
    if (!lpr_py_on || !frame || L->f_locals < 0) return 0;
    return rd((uintptr_t)frame + (uintptr_t)L->f_locals + 8u * i);
}

/* The items of a list or tuple object (the argument of a known function, read with the GIL held):
 * how many, and where they are; 0 when `o` is neither. Both keep ob_size at 16; a list points to
 * its items at 24, a tuple holds them there. */
size_t lpr_py_items(uintptr_t o, const uintptr_t **items) {
    if (!lpr_py_on || !o) return 0;
    uintptr_t type = rd(o + 8);
    int64_t n = *(const int64_t *)(o + 16);
    if (n <= 0 || (type != py_list_type && type != py_tuple_type) || !type) return 0;
    *items = type == py_list_type ? (const uintptr_t *)rd(o + 24) : (const uintptr_t *)(o + 24);
    return *items ? (size_t)n : 0;
}

/* The name of an object's type (tp_name, just after the type's PyVarObject header). */
const char *lpr_py_type_name(uintptr_t o) {
    if (!lpr_py_on || !o) return "NULL";
    uintptr_t type = rd(o + 8);
    const char *n = type ? (const char *)rd(type + 24) : NULL;
    return n ? n : "?";
}

/* Called once, on the first call recorded from a thread running Python after the interpreter
 * finished starting (hooks/python.c installs its profile function from there). */
void (*lpr_py_ready)(void);
void (*lpr_py_new_thread)(void);
static int ready_done;
void lpr_py_check_ready(void) {
    if (!lpr_py_ready || __atomic_load_n(&ready_done, __ATOMIC_RELAXED) || !py_initialized()) return;
    if (__atomic_exchange_n(&ready_done, 1, __ATOMIC_ACQ_REL)) return;
    lpr_py_ready();
}
void lpr_py_ready_retry(void) { __atomic_store_n(&ready_done, 0, __ATOMIC_RELEASE); }
