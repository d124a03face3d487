/* python_int.h: what the parts of the Python frames share — python.c (the frames, their caches,
 * the code table), python_detect.c (the interpreter found, what hooks read of its objects),
 * python_probe.c (reads that cannot fault), python_lines.c (line tables decoded): the
 * interpreter's layout and symbols, found once by lpr_python_detect and read-only after, and the
 * code table. The preload's own insides (python.h is what the rest of the preload calls). */
#ifndef LPR_PYTHON_INT_H
#define LPR_PYTHON_INT_H

#include <stddef.h>
#include <stdint.h>

#include "os_real.h"
#include "python.h"
#include "python_layouts.h"
#include "state.h"

/* ---- the interpreter (set by lpr_python_detect before lpr_py_on, never after) ---- */
LP_HIDDEN extern const struct lpr_pylayout *L; /* its row of python_layouts.h */
LP_HIDDEN extern int (*py_initialized)(void);
LP_HIDDEN extern void *(*py_this_tstate)(void);
LP_HIDDEN extern int (*py_addr2line)(void *code, int addr);
LP_HIDDEN extern uintptr_t py_code_type, py_str_type, py_list_type, py_tuple_type, py_bytes_type;
LP_HIDDEN extern uintptr_t eval_lo, eval_hi;     /* _PyEval_EvalFrameDefault */
LP_HIDDEN extern uintptr_t interp_lo, interp_hi; /* the object holding the interpreter */
LP_HIDDEN extern size_t frame_bytes;             /* how much of a frame is read: its first fields (3.11+) */
/* 3.11+'s offsets that every capture reads (lpr_py_part's common case), copied out of L when the
 * interpreter is found: a load each, not two (cframe: the thread's frame is read through its
 * _PyCFrame, 3.11 and 3.12) */
struct lpr_py_p3 {
    uintptr_t ts_frame, cframe_frame, datastack, back, instr, code;
    intptr_t entry; /* a frame's entry flag (3.11; -1: none) */
    int cframe;
    const int *initialized, *tss; /* _PyRuntime's, where this_tstate reads them */
    /* where the state holding the GIL is (part_tstate): 3.11 in _PyRuntime, 3.12+ in the main
     * interpreter's GIL (the state that took it last: the one holding it while it is held), found
     * from the first thread's state (this_tstate_called); 0 until known */
    const uintptr_t *holder;
    uintptr_t thread; /* a state's thread_id (0: no holder is read) */
};
LP_HIDDEN extern struct lpr_py_p3 P3;
/* this_tstate: 1 reads the thread's state through CPython's own key (checked against
 * PyGILState_GetThisThreadState on the first thread that has one), 0 not checked yet, -1 calls */
LP_HIDDEN extern int tss_direct;
/* (3.11+) where a chunk's frames start, and its header and one frame's first fields (chain_at) */
LP_HIDDEN extern uintptr_t chunk_data, chunk_head;

/* ---- the code table (python.c) and its line tables (python_lines.c) ---- */
#define CODE_SLOTS (1u << 20)       /* (id << 43) | (code address >> 4), at the table's largest (8 MiB) */
#define CODE_SLOTS_FIRST (1u << 14) /* at first (128 KiB; see code_find) */
#define MAX_CODES LPR_PY_MAX_CODES  /* distinct code objects */
#define STR_BYTES (64u << 20)       /* their names and files */
#define LINE_WORDS (4u << 20)       /* their line tables, decoded (3.11+; 32 MiB reserved) */
#define NAME_MAX_BYTES 1024         /* a longer name or path is cut */
#define SHIM 3                      /* FRAME_OWNED_BY_CSTACK (3.12+) */
struct pyent {
    uintptr_t code, file, name;
    int32_t firstline;
    uint32_t str; /* offset of name then file in `strs` */
    uint16_t name_len, file_len;
    uint32_t ready; /* written: the entry may be spooled */
    /* (3.11+) its line table decoded (line_table): 1 + its offset in `lines` << 32 | its ranges */
    uint64_t table;
};
LP_HIDDEN extern uint64_t *slots;
LP_HIDDEN extern struct pyent *ents;
LP_HIDDEN extern char *strs;
LP_HIDDEN extern uint64_t *lines; /* line tables, each its size, its bytes and its ranges (python_lines.c) */
LP_HIDDEN extern struct lpr_ahead ents_ahead, strs_ahead, lines_ahead; /* resident ahead while sampling */

static inline uintptr_t rd(uintptr_t a) { return *(const uintptr_t *)a; }

/* pthread_self() as glibc keeps it on x86-64: the thread descriptor's own address, at %fs:16
 * (checked against pthread_self() once before it is relied on) */
static inline uintptr_t thread_self(void) {
    uintptr_t self;
    __asm__("mov %%fs:16, %0" : "=r"(self));
    return self;
}

/* ---- reads that cannot fault (python_probe.c) ---- */
/* One word at `a`, a load libprof's fault handler can step over: where it faults, the handler
 * (hooks/signal.c, on SIGSEGV and SIGBUS while the program has not taken them) moves the
 * instruction pointer past it with 0 as the word, and sets lpr_tls.probe_fault. One instruction
 * where process_vm_readv is a system call (a generator's frame, read at every capture, would
 * otherwise cost one), written where it is used (no call, nothing saved around one): each such
 * load and the instruction after it are recorded in section lpr_probes, as their offsets from the
 * words holding them (nothing for the dynamic linker to relocate), for the handler to find; the
 * word comes in %rax, which the handler sets. */
struct probe_site {
    int32_t load, done;
};
LP_HIDDEN extern const struct probe_site __start_lpr_probes[], __stop_lpr_probes[];
static inline __attribute__((always_inline)) uintptr_t probe_here(uintptr_t a) {
    uintptr_t v;
    __asm__ volatile("1: movq (%1), %0\n"
                     "2:\n"
                     ".pushsection lpr_probes, \"a\"\n"
                     ".p2align 2\n"
                     ".long 1b - ., 2b - .\n"
                     ".popsection\n"
                     : "=a"(v)
                     : "r"(a)
                     : "memory");
    return v;
}
/* n bytes (whole words) at src into dst if they are mapped: 0, or -1. */
LP_HIDDEN int lpr_py_copy_probed(void *dst, uintptr_t src, size_t n);
/* P3.holder where the faults are libprof's, else NULL (see python_probe.c), and its remaking. */
LP_HIDDEN extern const uintptr_t *holder_ours;
LP_HIDDEN void lpr_py_holder_again(void);

/* ---- lines (python_lines.c) ---- */
/* The line of code `code` (entry `id`, line table `lt`) at byte offset `addr`. */
LP_HIDDEN int lpr_py_addr2line(uintptr_t code, uint32_t id, uintptr_t lt, int addr);

/* ---- python.c's, for the detection ---- */
LP_HIDDEN uint32_t lpr_py_with_fresh(uint32_t native);

#endif
