/* python.c: the CPython interpreter's own frames — what makes a Python program's stacks and
 * calls read `function (file.py:LINE)` instead of interpreter offsets, with no change to the
 * program and no extension module.
 *
 * Detection: an interpreter is in the process when some loaded object exports Py_IsInitialized
 * (Debian's python3 links libpython in and exports it; pyenv's builds and embedders load a
 * libpython3.X.so; an interpreter dlopen'ed later is found after that dlopen). Its version
 * (Py_Version, else the object's file name) picks a row of python_layouts.h; a version without
 * a row says so once and libprof records without Python frames.
 *
 * Reading, never writing: the calling thread's state comes from PyGILState_GetThisThreadState
 * (a pthread_getspecific: it works while the thread has released the GIL, so a GEMM numpy runs
 * without the GIL still finds the line that called it); its frames are followed through the
 * layout's offsets; a frame's line is PyCode_Addr2Line on the instruction it is executing (a pure
 * walk of the code's line table). No reference is taken, no object touched, no lock: the frames
 * of the calling thread cannot change under it, though a signal may catch them mid-change (see
 * "frames": from 3.11 on a frame or code object is read only where it is sure to be memory).
 * Every code object read is checked to be one (its type is PyCode_Type) before anything else of
 * it is read; a chain that fails a check ends there.
 *
 * Code objects get dense ids in a lock-free table (keyed by address, checked against the
 * object's file, name and first line, so a code object freed and another made at its address
 * is a new entry); their names are copied once, when first seen, and reach the spool as PYCODE
 * chunks before any stack that names them. A Python frame in a stack is the word
 * LP_PYFRAME(code id, line). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>

#include "python_int.h"
#include "config.h"
#include "log.h"
#include "os_real.h"
#include "own.h"
#include "real.h"
#include "stacks.h"
#include "state.h"
#include "tbuf.h"
#include "walk.h"
#include "sys.h"

static uint32_t next_code = 1, str_used, codes_full;

/* ---- strings and code objects -------------------------------------------------------------- */

/* A str's characters as UTF-8 into out (at most cap bytes, whole characters); its length (out
 * NULL: only counted). Compact strings only (every identifier and file name is): ASCII ones are
 * their bytes, others are encoded here from their 1-, 2- or 4-byte characters. */
static size_t str_utf8(uintptr_t o, char *out, size_t cap) {
    if (!o) return 0;
    uint32_t state = *(const uint32_t *)(o + 32);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    size_t len = (size_t) * (const int64_t *)(o + 16), n = 0;
    if (!compact) return 0;
    if (ascii) {
        n = len < cap ? len : cap;
        if (out) memcpy(out, (const char *)(o + (uintptr_t)L->str_ascii), n);
        return n;
    }
    const unsigned char *d = (const unsigned char *)(o + (uintptr_t)L->str_compact);
    for (size_t i = 0; i < len; i++) {
        uint32_t c = kind == 1 ? d[i] : kind == 2 ? ((const uint16_t *)d)[i] : ((const uint32_t *)d)[i];
        char b[4];
        size_t k;
        if (c < 0x80) {
            b[0] = (char)c;
            k = 1;
        } else if (c < 0x800) {
            b[0] = (char)(0xc0 | c >> 6);
            b[1] = (char)(0x80 | (c & 0x3f));
            k = 2;
        } else if (c < 0x10000) {
            b[0] = (char)(0xe0 | c >> 12);
            b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
            b[2] = (char)(0x80 | (c & 0x3f));
            k = 3;
        } else {
            b[0] = (char)(0xf0 | c >> 18);
            b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
            b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
            b[3] = (char)(0x80 | (c & 0x3f));
            k = 4;
        }
        if (n + k > cap) break;
        if (out) memcpy(out + n, b, k);
        n += k;
    }
    return n;
}

static uintptr_t code_name(uintptr_t code) {
    return rd(code + (uintptr_t)(L->co_qualname >= 0 ? L->co_qualname : L->co_name));
}

#define SLOT_LOW(code) (((code) >> 4) & ((UINT64_C(1) << 43) - 1))
#define SLOT_HASH(code) ((uint32_t)(((code) >> 4) * 0x9E3779B97F4A7C15ull >> 32))
#define LOW_OF(v) ((v) & ((UINT64_C(1) << 43) - 1))

/* The table is used in part, its first code_mask + 1 slots, four times as many once a quarter of
 * them hold codes: a program of a few thousand code objects touches 128 KiB of it, not 8 MiB (its
 * slots are scattered by the hash). Slots are only ever filled, so a code put in under a smaller
 * mask is still found along that mask's probes: a lookup tries each mask the table has had. */
static uint32_t code_mask = CODE_SLOTS_FIRST - 1;

/* The slot value of code object `code` — of `id3` (file, name, first line) when not NULL, else
 * of its address alone — or 0. */
static uint64_t code_find(uintptr_t code, const uintptr_t *id3) {
    uint64_t low = SLOT_LOW(code);
    uint32_t h = SLOT_HASH(code);
    for (uint32_t mask = __atomic_load_n(&code_mask, __ATOMIC_ACQUIRE);; mask = (mask + 1) / 4 - 1) {
        uint32_t s = h & mask;
        for (unsigned probe = 0; probe < 64; probe++, s = (s + 1) & mask) {
            uint64_t v = __atomic_load_n(&slots[s], __ATOMIC_ACQUIRE);
            if (v == 0) break;
            if (LOW_OF(v) != low) continue;
            const struct pyent *e = &ents[v >> 43];
            if (e->code == code &&
                (!id3 || (e->file == id3[0] && e->name == id3[1] && e->firstline == (int32_t)id3[2])))
                return v;
        }
        if (mask < CODE_SLOTS_FIRST) return 0;
    }
}

/* A code object at `code` has an entry (its address alone is looked up: nothing of it is read). */
static int code_known(uintptr_t code) { return code_find(code, NULL) != 0; }

/* The id of code object `code` (0: table full). */
static uint32_t code_id(uintptr_t code) {
    uintptr_t file = rd(code + (uintptr_t)L->co_filename), name = code_name(code);
    int32_t first = *(const int32_t *)(code + (uintptr_t)L->co_firstlineno);
    const uintptr_t id3[3] = {file, name, (uintptr_t)first};
    uint64_t found = code_find(code, id3), low = SLOT_LOW(code);
    if (found) return (uint32_t)(found >> 43);
    uint32_t mask = __atomic_load_n(&code_mask, __ATOMIC_ACQUIRE), s = SLOT_HASH(code) & mask;
    for (unsigned probe = 0; probe < 64; probe++, s = (s + 1) & mask) {
        uint64_t v = __atomic_load_n(&slots[s], __ATOMIC_ACQUIRE);
        if (v == 0) {
            uint32_t id = __atomic_fetch_add(&next_code, 1, __ATOMIC_RELAXED);
            if (id >= MAX_CODES) {
                __atomic_store_n(&codes_full, 1, __ATOMIC_RELAXED);
                return 0;
            }
            lpr_ahead(&ents_ahead, ents, (id + 1) * sizeof *ents, MAX_CODES * sizeof *ents);
            struct pyent *e = &ents[id];
            /* (counted, then written where they go: no copy on the stack, which may be a signal
             * handler's alternate stack of a few KiB) */
            size_t nl = str_utf8(name, NULL, NAME_MAX_BYTES), fl = str_utf8(file, NULL, NAME_MAX_BYTES);
            uint32_t at = __atomic_fetch_add(&str_used, (uint32_t)(nl + fl), __ATOMIC_RELAXED);
            lpr_ahead(&strs_ahead, strs, at + nl + fl, STR_BYTES);
            if (at + nl + fl > STR_BYTES) {
                nl = fl = 0, at = 0;
            } else {
                str_utf8(name, strs + at, nl);
                str_utf8(file, strs + at + nl, fl);
            }
            *e = (struct pyent){code, file, name, first, at, (uint16_t)nl, (uint16_t)fl, 0, 0};
            __atomic_store_n(&e->ready, 1, __ATOMIC_RELEASE);
            uint64_t expect = 0;
            if (__atomic_compare_exchange_n(&slots[s], &expect, (uint64_t)id << 43 | low, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                if (id > (mask + 1) / 4 && mask < CODE_SLOTS - 1) /* (racing: the same larger mask) */
                    __atomic_store_n(&code_mask, (mask + 1) * 4 - 1, __ATOMIC_RELEASE);
                return id;
            }
            v = expect; /* another thread took the slot: ours stays a valid (duplicate) entry */
            if (LOW_OF(v) != low) return id;
        }
        if (LOW_OF(v) == low) {
            const struct pyent *e = &ents[v >> 43];
            if (e->code == code && e->file == file && e->name == name && e->firstline == first)
                return (uint32_t)(v >> 43);
        }
    }
    __atomic_store_n(&codes_full, 1, __ATOMIC_RELAXED);
    return 0;
}

/* A str object's characters as UTF-8 (at most cap bytes): their length, 0 when `o` is not a
 * compact str. */
size_t lpr_py_str(uintptr_t o, char *out, size_t cap) {
    if (!lpr_py_on || !o || !py_str_type || rd(o + 8) != py_str_type) return 0;
    return str_utf8(o, out, cap);
}

/* ---- frames --------------------------------------------------------------------------------- */

/* A thread's chain of frames is consistent at almost every instruction, but not at every one, and
 * a sample — or a hook reached from a signal handler of the program's, such as the byte Python's
 * own C handler writes to its wakeup descriptor — may interrupt the interpreter anywhere:
 *   - 3.11 and 3.12 make a new evaluation loop's state current before its frame is stored in it
 *     (for a few instructions the thread's cframe holds whatever that stack slot held before);
 *   - 3.11 to 3.13 may link a frame before its `previous` is written (what was there before);
 *   - 3.11 keeps a returning frame current while the chunk of frame stack under it is unmapped.
 * So from 3.11 on a frame is read only where it is sure to be memory: inside one of the thread's
 * frame-stack chunks (a few compares: almost every frame), on the thread's own C stack (3.12+:
 * the evaluation loop's entry shims), or else — a generator's or coroutine's frame, which lives
 * in its object — through loads libprof's fault handler steps over (probe_here), or where
 * the program has taken SIGSEGV/SIGBUS itself, a copy the kernel makes (process_vm_readv, which
 * fails where a load would fault). A code object is read when the table knows its address, or
 * after such a read of its header shows PyCode_Type. A chain that reaches what it cannot read ends there; a stale frame
 * read as a frame costs one sample a wrong line, never a fault. Up to 3.10 the chain is frame
 * objects, linked once made and unlinked before freed: read as they are. */
struct pyframe {
    uintptr_t code, back, instr;
    int owner, entry;
};
struct chain {
    uintptr_t chunk;    /* the chunk the last frame was found in: frames go outward through them */
    uintptr_t lo, span; /* where a frame may start in it: [lo, lo + span] */
};

/* Chunk k, where the chain looks first from now on. */
static inline void chain_at(struct chain *c, uintptr_t k) {
    c->chunk = k;
    uintptr_t size = k ? rd(k + 8) : 0;
    c->lo = c->span = 0; /* no frame in it (a frame is never at 0) */
    if (k && size >= chunk_head) {
        c->lo = k + chunk_data;
        c->span = size - chunk_head;
    }
}

/* f lies in an older chunk of the thread's frame stack (then the chain looks there first). */
static int in_older_chunk(struct chain *c, uintptr_t f) {
    uintptr_t k = c->chunk ? rd(c->chunk) : 0;
    for (unsigned hops = 0; k && hops < 4096; hops++, k = rd(k)) {
        uintptr_t size = rd(k + 8);
        if (f >= k + chunk_data && f + frame_bytes <= k + size) {
            chain_at(c, k);
            return 1;
        }
    }
    return 0;
}

/* Where a frame may start on the calling thread's C stack: [*lo, *lo + *span] (its mapping looked
 * up once, walk.c); left as it is when unknown. */
static void cstack_range(uintptr_t *lo, uintptr_t *span) {
    struct lpr_tls *t = &lpr_tls;
    if (!t->stack_hi && lpr_stack_bounds(t, (uintptr_t)__builtin_frame_address(0)) != 0) return;
    if (t->stack_hi - t->stack_lo < frame_bytes) return;
    *lo = t->stack_lo;
    *span = t->stack_hi - t->stack_lo - frame_bytes;
}

/* f lies on the calling thread's C stack. */
static int on_cstack(uintptr_t f) {
    uintptr_t lo = 0, span = 0;
    cstack_range(&lo, &span);
    return f && f - lo <= span;
}

/* A frame outside the chunk the chain is in: in an older chunk or on the C stack (f returned),
 * else copied into `copy` (returned); NULL where it cannot be read. */
static __attribute__((noinline)) const char *frame_far(struct chain *c, uintptr_t f, char *copy) {
    if (!f || (f & 7)) return NULL;
    if (in_older_chunk(c, f) || (L->minor >= 12 && on_cstack(f))) return (const char *)f;
    return lpr_py_copy_probed(copy, f, frame_bytes) == 0 ? copy : NULL;
}

#define FRAME_COPY 128 /* room for a frame's fields read by frame_far */

/* Frame f's fields into *o: 0, or -1 where f cannot be read. (lpr_py_part, which every capture
 * runs, makes the same in-chunk test in its own loops, with the bounds in registers.) */
static int frame_read(struct chain *c, uintptr_t f, struct pyframe *o) {
    char copy[FRAME_COPY];
    const char *p = LP_LIKELY(f - c->lo <= c->span) ? (const char *)f : frame_far(c, f, copy);
    if (!p) return -1;
    const intptr_t oc = L->f_code, ob = L->f_back, oi = L->f_instr, oo = L->f_owner, oe = L->f_entry;
    uintptr_t code = *(const uintptr_t *)(p + oc), back = *(const uintptr_t *)(p + ob), instr;
    int owner = 0, entry = 1;
    if (L->kind == 0) {
        instr = (uintptr_t) * (const int *)(p + oi);
    } else {
        instr = *(const uintptr_t *)(p + oi);
        owner = *(const char *)(p + oo);
        entry = oe >= 0 ? *(const char *)(p + oe) != 0 : 0;
    }
    *o = (struct pyframe){code, back, instr, owner, entry};
    return 0;
}

/* `code` is a code object that may be read. */
static int code_readable(uintptr_t code) {
    if (!code || (code & 7)) return 0;
    if (L->kind == 1 && !code_known(code)) {
        uintptr_t head[2];
        if (lpr_py_copy_probed(head, code, sizeof head) != 0) return 0;
    }
    return rd(code + 8) == py_code_type;
}

/* The calling thread's PyThreadState, or 0 (no interpreter yet or any more, a thread that never
 * ran Python). From 3.11 read as PyGILState_GetThisThreadState reads it — the runtime initialized,
 * its key made, the key's value for this thread — in a dozen instructions, not 25 to 35 through
 * the interpreter's calls; where that reads other than the interpreter's own call on the first
 * thread with a state, never again. */
static __attribute__((noinline)) uintptr_t this_tstate_called(void);
static inline uintptr_t this_tstate(void) {
    if (LP_LIKELY(__atomic_load_n(&tss_direct, __ATOMIC_RELAXED) > 0)) {
        if (!*(const volatile int *)P3.initialized || !P3.tss[0]) return 0;
        return (uintptr_t)pthread_getspecific((pthread_key_t)P3.tss[1]);
    }
    return this_tstate_called();
}

/* (this_tstate through the interpreter's calls, the direct read checked against them once) */
static __attribute__((noinline)) uintptr_t this_tstate_called(void) {
    if (!py_initialized()) return 0;
    uintptr_t ts = (uintptr_t)py_this_tstate();
    if (ts && __atomic_load_n(&tss_direct, __ATOMIC_RELAXED) == 0) {
        int same = *P3.initialized && P3.tss[0] && (uintptr_t)pthread_getspecific((pthread_key_t)P3.tss[1]) == ts;
        if (same && P3.thread && !P3.holder) { /* (3.12+) the main interpreter's GIL, from this state */
            uintptr_t gil = rd(rd(ts + (uintptr_t)L->ts_interp) + (uintptr_t)L->interp_gil);
            if (gil) {
                __atomic_store_n(&P3.holder, (const uintptr_t *)(gil + (uintptr_t)L->gil_holder), __ATOMIC_SEQ_CST);
                lpr_py_holder_again();
            }
        }
        __atomic_store_n(&tss_direct, same ? 1 : -1, __ATOMIC_RELAXED);
    }
    return ts;
}

/* The calling thread's state as the interpreter's GIL holder (P3.holder; the object allocator's
 * callers hold the GIL), where that is *last (the state the thread's key gave the last time),
 * the runtime is initialized and the state's thread is this one — a few loads where the key's
 * read is a call; else 0. The thread is read through a probed load (another thread's state may
 * be freed meanwhile), so only where the faults are libprof's (holder_ours). */
static inline __attribute__((always_inline)) uintptr_t holder_state(const uintptr_t *last) {
    const uintptr_t *holder = __atomic_load_n(&holder_ours, __ATOMIC_RELAXED);
    if (LP_UNLIKELY(!holder)) return 0;
    uintptr_t ts = __atomic_load_n(holder, __ATOMIC_RELAXED);
    if (LP_UNLIKELY(ts != *last) || LP_UNLIKELY(!ts) || LP_UNLIKELY(!*(const volatile int *)P3.initialized) ||
        LP_UNLIKELY(probe_here(ts + P3.thread) != thread_self()))
        return 0;
    return ts;
}
/* The calling thread's state for a capture through a part cache (part_fast; *last: the state its
 * key gave the last time): the GIL holder's (holder_state), else through the key. */
static inline uintptr_t part_tstate(uintptr_t *last) {
    uintptr_t ts = holder_state(last);
    return LP_LIKELY(ts != 0) ? ts : (*last = this_tstate());
}

/* The calling thread's current frame, or 0 (no interpreter yet or any more, a thread that never
 * ran Python, no Python running on it); `c` set up to read the chain from it. */
static inline uintptr_t top_frame_in(struct chain *c) {
    c->chunk = c->lo = 0;
    c->span = ~(uintptr_t)0; /* up to 3.10 (frame objects): every frame is read where it is */
    uintptr_t ts = this_tstate();
    if (!ts) return 0;
    uintptr_t f = rd(ts + (uintptr_t)L->tstate_frame);
    if (L->cframe_frame >= 0) f = f ? rd(f + (uintptr_t)L->cframe_frame) : 0;
    if (L->ts_datastack >= 0) chain_at(c, rd(ts + (uintptr_t)L->ts_datastack));
    return f;
}

static uintptr_t top_frame(void) {
    struct chain c;
    return top_frame_in(&c);
}

int lpr_py_thread_running(void) { return lpr_py_on && top_frame() != 0; }

/* The code object the calling thread is executing (its id; 0: none). For a profile function:
 * the frame being entered or left is the current one. */
uint32_t lpr_py_top_code(void) {
    if (!lpr_py_on) return 0;
    struct chain c;
    struct pyframe fr;
    uintptr_t f = top_frame_in(&c);
    for (unsigned hops = 0; f && hops < 4 && frame_read(&c, f, &fr) == 0; hops++, f = fr.back) {
        if (L->kind == 1 && L->minor >= 12 && fr.owner == SHIM) continue;
        return code_readable(fr.code) ? code_id(fr.code) : 0;
    }
    return 0;
}

/* The code object a frame handed to a PEP 523 evaluation function runs (a PyFrameObject up to
 * 3.10, an interpreter frame after): its id, 0 when it is not a code object. */
uint32_t lpr_py_frame_code(const void *frame) {
    if (!lpr_py_on || !frame) return 0;
    uintptr_t code = rd((uintptr_t)frame + (uintptr_t)L->f_code);
    return code && rd(code + 8) == py_code_type ? code_id(code) : 0;
}

/* Per thread (kept with its registry node): the last locations found, keyed by the top frame,
 * its code and its instruction — the same three mean the same line, so a loop making the same
 * call again costs a few loads, not a walk of the code's line table. */
#define LOC_WAYS 64
#define LINE_WAYS 512
#define PART LP_STACK_MAX_DEPTH
#define LINKS (2 * PART + 2) /* a part's frames and the 3.12+ entry shims between them */
#define PAIRS 64             /* (with_pair's hash takes 6 bits) */
#define JOIN_NEW 32          /* new links part_join joins at most (more: walked whole) */
#define MOVES 16             /* (a loop's body allocates at several places: 4 were too few to keep them) */
struct pycache {
    struct {
        uintptr_t frame, code, instr;
        uint32_t id, code_id;
    } loc[LOC_WAYS];
    struct { /* the lines looked up last (addr2line) */
        uintptr_t table;
        uint32_t id;
        int addr, line;
    } line[LINE_WAYS];
    /* the Python part of the last stack captured here (lpr_py_part), outermost last: one for the
     * hooks, one for the sampler's signal handler (which may interrupt a hook using the other) */
    struct pypart {
        uint32_t n, id;
        int sampler;  /* the sampler's (part_of[1]): its stacks go through the sampler's memo */
        uintptr_t ts; /* the thread's state as its key gave it last (part_tstate) */
        uintptr_t frame[PART], code[PART], instr[PART];
        uint64_t word[PART];
        uint8_t end[PART];
        /* (3.11+) the chain as the walk followed it, from the thread's frame to its end — the
         * frames and (3.12+) the entry shims on the C stack — with their instructions: what
         * part_fast compares; nlink 0: not kept (more than LINKS, a walk cut short, a link
         * neither in the chunk nor on the C stack). link[nlink].at is 1, where no frame is. */
        uint32_t nlink;
        int fast; /* one chunk, the chain kept: part_fast serves */
        /* (innermost_moved) the innermost frame's instructions under the same outer frames, each
         * with its word and the part's id, in one of two entries its address picks (move_find);
         * cleared when the part is walked */
        struct {
            uintptr_t instr;
            uint64_t word;
            uint32_t id, at; /* at: when it was put (nmoved then) */
        } moved[MOVES];
        uint32_t nmoved;
        uintptr_t chunk, chunk_size; /* the chunk of frame stack every frame lay in, and its size */
        /* part_walk's room for the frames it walks, here rather than on the stack: a capture may
         * run in a signal handler of the program's on an alternate stack of a few KiB (CPython's
         * own, from faulthandler: 16 KiB), and a CPU sample may land in it, on that stack too */
        struct {
            uintptr_t frame[PART], code[PART], instr[PART];
            uint8_t end[PART];
            uintptr_t link_at[JOIN_NEW], link_instr[JOIN_NEW]; /* (part_join's new links) */
        } walked;
        struct link {
            uintptr_t at, instr;
        } link[LINKS + 1];
    } part_of[2];
    struct {          /* (native part, Python part) -> their stack, as the hooks made them last: lpr_py_with */
        uint64_t key; /* native | py << 32 (py is never 0: 0, an entry never made) */
        uint32_t id;
    } pair[PAIRS];
};

/* Code `code` is still the object entry `id` was made for (a code object freed and another made
 * at its address is a different entry unless file, name and first line are the same). */
static int still(uintptr_t code, uint32_t id) {
    const struct pyent *e = &ents[id];
    return e->code == code && e->file == rd(code + (uintptr_t)L->co_filename) && e->name == code_name(code) &&
           e->firstline == *(const int32_t *)(code + (uintptr_t)L->co_firstlineno);
}

/* The line of `code` (entry `id`) at instruction offset `addr`. */
static int line_of(uintptr_t code, uint32_t id, int addr) {
    struct pycache *c = lpr_py_cache_of(&lpr_tls, sizeof *c);
    /* (keyed by entry and line table: code objects are freed and their memory reused) */
    uintptr_t lt = L->co_linetable >= 0 ? rd(code + (uintptr_t)L->co_linetable) : 0;
    if (!c) return lpr_py_addr2line(code, id, lt, addr);
    unsigned w =
        (unsigned)((((uintptr_t)id * 0x9E3779B1u) ^ (uintptr_t)(unsigned)addr * 0x85EBCA6Bu) >> 3) & (LINE_WAYS - 1);
    if (c->line[w].id == id && c->line[w].addr == addr && c->line[w].table == lt) return c->line[w].line;
    int line = lpr_py_addr2line(code, id, lt, addr);
    c->line[w].table = lt;
    c->line[w].id = id;
    c->line[w].addr = addr;
    c->line[w].line = line;
    return line;
}

/* The calling thread's Python frames, innermost first, as LP_PYFRAME words (at most max);
 * end[i] = 1 when frame i is the outermost of one run of the evaluation loop (where the native
 * stack leaves _PyEval_EvalFrameDefault). */
int lpr_py_frames(uint64_t *out, uint8_t *end, int max) {
    if (!lpr_py_on) return 0;
    struct chain c;
    struct pyframe fr;
    uintptr_t f = top_frame_in(&c);
    int n = 0;
    for (unsigned hops = 0; f && n < max && hops < 4096 && frame_read(&c, f, &fr) == 0; hops++, f = fr.back) {
        int addr;
        if (L->kind == 0) {
            int lasti = (int)fr.instr;
            addr = L->minor == 10 ? lasti * 2 : lasti; /* 3.10 counts instructions, older bytes */
        } else {
            if (L->minor >= 12 && fr.owner == SHIM) { /* the evaluation loop's entry: a run ends */
                if (n) end[n - 1] = 1;
                continue;
            }
            addr = (int)(fr.instr - (fr.code + (uintptr_t)L->co_code));
        }
        if (!code_readable(fr.code)) break;
        uint32_t id = code_id(fr.code);
        if (!id) break;
        int line = line_of(fr.code, id, addr);
        out[n] = LP_PYFRAME(id, line > 0 ? (uint32_t)line : 0);
        end[n] = (uint8_t)fr.entry;
        n++;
    }
    if (n) end[n - 1] = 1;
    return n;
}

/* An innermost frame's instruction in its memo (struct pypart's moved): in either of the two
 * entries its address picks (with one, two of a loop body's few instructions that picked the same
 * entry put each other out at every turn: 3.12's json loop missed 43 k times), or -1. */
static inline void move_pick(uintptr_t instr, unsigned *a, unsigned *b) {
    uint64_t h = instr * 0x9E3779B97F4A7C15ull;
    *a = (unsigned)(h >> 60) & (MOVES - 1);
    *b = (unsigned)(h >> 56) & (MOVES - 1);
}
static inline int move_find(const struct pypart *c, uintptr_t instr) {
    unsigned a, b;
    move_pick(instr, &a, &b);
    return c->moved[a].instr == instr && c->moved[a].id   ? (int)a
           : c->moved[b].instr == instr && c->moved[b].id ? (int)b
                                                          : -1;
}
/* Where a new instruction goes: a free entry of its two, else the one put there first. */
static inline unsigned move_slot(struct pypart *c, uintptr_t instr) {
    unsigned a, b;
    move_pick(instr, &a, &b);
    if (!c->moved[a].instr) return a;
    if (!c->moved[b].instr) return b;
    return (int32_t)(c->moved[a].at - c->moved[b].at) <= 0 ? a : b;
}

/* The last capture's frames again, but for the innermost one (f, still at the same address) whose
 * instruction is now `instr`: where it runs the same code with the same entry flag, its word is
 * made again (a line-cache lookup; the part interned anew only when its line changed) and 1 is
 * returned; else 0, and the frames are walked. The common step between two allocations of a
 * Python loop: only the innermost frame moved. The code is checked to be still its entry's, since
 * the frame at this address may be a new call of a code object made where the old one was. */
static int innermost_moved(struct pypart *c, uintptr_t f, uintptr_t instr) {
    uintptr_t code = rd(f + (uintptr_t)L->f_code);
    uint32_t cid = LP_PYFRAME_ID(c->word[0]);
    if (code != c->code[0] || !cid || !still(code, cid)) return 0;
    /* (3.11: the entry flag; 3.12+: the run's end, which part_again compared) */
    if (c->n > 1 && L->f_entry >= 0 && (((const char *)f)[L->f_entry] != 0) != c->end[0]) return 0;
    c->instr[0] = instr;
    if (c->nlink && c->link[0].at == f) c->link[0].instr = instr;
    /* the instructions this frame stood at since its part was walked: their words and parts
     * (part_kept looked there first; part_again did not) */
    int m = move_find(c, instr);
    if (m >= 0) {
        c->word[0] = c->moved[m].word;
        c->id = c->moved[m].id;
        return 1;
    }
    int line = line_of(code, cid, (int)(instr - (code + (uintptr_t)L->co_code)));
    uint64_t w = LP_PYFRAME(cid, line > 0 ? (uint32_t)line : 0) | (c->word[0] & LP_PY_RUN_END);
    if (w != c->word[0]) {
        c->word[0] = w;
        c->id = lpr_stack_intern_words(c->word, c->n, c->sampler);
    }
    unsigned k = move_slot(c, instr);
    c->moved[k].instr = instr, c->moved[k].word = w, c->moved[k].id = c->id, c->moved[k].at = c->nmoved++;
    return 1;
}

/* The common case first (where part_again_fast does not serve): the same frames as
 * the last capture, each at the same line but maybe the innermost — compared as they are walked
 * from `f`, nothing stored. Their number, with the part's id in *id; -1 when they differ (then
 * they are walked, part_walk). Kept apart from the walk, whose frame arrays every capture would
 * otherwise set up. */
static inline int part_again(struct pypart *c, const struct chain *ch, uintptr_t f, uint32_t *id) {
    const int shims = L->minor >= 12;
    const uintptr_t o_back = (uintptr_t)L->f_back, o_instr = (uintptr_t)L->f_instr, o_owner = (uintptr_t)L->f_owner;
    /* every frame here must lie in the chunk the chain starts in, or (3.12+ shims) on the C
     * stack; anything else — an older chunk, a generator's frame — is left to part_walk */
    const uintptr_t lo = ch->lo, span = ch->span;
    uint32_t i = 0, cn = c->n;
    uintptr_t g = f, moved = 0, mf = f; /* moved: the innermost frame's (mf) new instruction */
    uintptr_t cs_lo = 0, cs_span = 0;   /* (none: g is never 0 here) */
    if (shims) cstack_range(&cs_lo, &cs_span);
    int shim = 0; /* (3.12+) an entry shim since the last frame: that frame ends a run */
    while (g && i < cn) {
        if (LP_UNLIKELY(g - lo > span) && g - cs_lo > cs_span) break;
        if (shims && *(const char *)(g + o_owner) == SHIM) {
            shim = 1;
            g = rd(g + o_back);
            continue;
        }
        if (shims && i && shim != c->end[i - 1]) break; /* the runs end where they ended */
        shim = 0;
        /* (3.11+: the instruction lies inside its code object, so it names the code too) */
        if (g != c->frame[i]) break;
        uintptr_t x = rd(g + o_instr);
        if (x != c->instr[i]) {
            if (i) break;
            moved = x; /* the innermost frame: only it may have moved */
            mf = g;
        }
        g = rd(g + o_back);
        i++;
    }
    /* (3.12+) the outermost run's entry shim, below the last frame */
    while (shims && g && i == cn && (g - lo <= span || g - cs_lo <= cs_span) && *(const char *)(g + o_owner) == SHIM)
        g = rd(g + o_back);
    /* every frame, and no more */
    if (i == cn && !g && (!moved || innermost_moved(c, mf, moved))) {
        *id = c->id;
        return (int)cn;
    }
    return -1;
}

/* The LP_PYFRAME word of a frame running `code` at instruction `instr` (3.11+ a pointer, up to
 * 3.10 an index), tagged LP_PY_RUN_END where `end`; 0 when the code table is full. */
static uint64_t frame_word(uintptr_t code, uintptr_t instr, int end) {
    uint32_t cid = code_readable(code) ? code_id(code) : 0;
    if (!cid) return 0;
    int addr =
        L->kind == 0 ? (L->minor == 10 ? (int)instr * 2 : (int)instr) : (int)(instr - (code + (uintptr_t)L->co_code));
    int line = line_of(code, cid, addr);
    return LP_PYFRAME(cid, line > 0 ? (uint32_t)line : 0) | (end ? LP_PY_RUN_END : 0);
}

/* The frames from `f` walked (up to PART), compared with the last capture's from the outermost:
 * only those that changed get their code's id and line looked up, and a part found unchanged is
 * not interned again. As lpr_py_part returns. */
static __attribute__((noinline)) int part_walk(struct pypart *c, struct chain *chp, uintptr_t f, uint32_t *id) {
    /* (the frames walked, in the part's room: not on the stack, see struct pypart) */
    uintptr_t *fr = c->walked.frame, *co = c->walked.code, *in = c->walked.instr;
    uint8_t *en = c->walked.end;
    int n = 0;
    struct chain ch = *chp;
    char copy[FRAME_COPY];
    const int shims = L->kind == 1 && L->minor >= 12;
    /* the layout's offsets in registers: these loops run for every frame of every capture */
    const uintptr_t o_code = (uintptr_t)L->f_code, o_back = (uintptr_t)L->f_back, o_instr = (uintptr_t)L->f_instr,
                    o_owner = (uintptr_t)L->f_owner;
    /* up to 3.10 frame objects, the instruction an index; then interpreter frames, a pointer */
    const intptr_t o_entry = L->f_entry;
    const uintptr_t lo0 = ch.lo, span0 = ch.span;
    uintptr_t lo = lo0, span = span0;
    int one_chunk = L->kind == 1, links = one_chunk; /* links: the chain kept for part_fast */
    uint32_t nl = 0;
    c->nlink = 0;
    c->fast = 0;
    const int kind1 = L->kind == 1, entry = o_entry >= 0;
    for (unsigned hops = 0; f && n < PART && hops < 4096; hops++) {
        const char *p = (const char *)f;
        if (LP_UNLIKELY(f - lo > span)) {
            if (!(p = frame_far(&ch, f, copy))) break;
            lo = ch.lo;
            span = ch.span;
        }
        uintptr_t g = f, x = kind1 ? rd((uintptr_t)p + o_instr) : (uintptr_t) * (const int *)(p + o_instr);
        f = rd((uintptr_t)p + o_back);
        if (links) {
            if (nl == LINKS) {
                links = 0;
            } else {
                c->link[nl].at = g;
                c->link[nl++].instr = x;
            }
        }
        if (shims && p[o_owner] == SHIM) {
            if (n) en[n - 1] = 1; /* the evaluation loop's entry: a run ends */
            if (links && g - lo0 > span0 && !on_cstack(g)) links = 0;
            continue;
        }
        uintptr_t code = rd((uintptr_t)p + o_code);
        if (!code) { /* (whether it is one is checked below, where a frame's code is read) */
            links = 0;
            break;
        }
        fr[n] = g;
        co[n] = code;
        in[n] = x;
        en[n++] = !kind1 || (entry && p[o_entry] != 0);
        if (g - lo0 > span0) one_chunk = 0;
    }
    /* a chain not kept starts where no frame is: lpr_py_with's common case never takes it */
    if (!(n && links && !f && one_chunk && chp->chunk)) c->link[0].at = 1;
    if (n == 0) return 0;
    en[n - 1] = 1;
    if (links && !f && one_chunk && chp->chunk) { /* the chain walked to its end: kept */
        c->nlink = nl;
        c->link[nl].at = 1;
        c->chunk = chp->chunk;
        c->chunk_size = rd(chp->chunk + 8);
        c->fast = 1;
    }
    /* frames equal to the last capture's, from the outermost */
    uint32_t k = 0, cn = c->n, most = (uint32_t)n < cn ? (uint32_t)n : cn;
    const uintptr_t *pf = &c->frame[cn], *pc = &c->code[cn], *pi = &c->instr[cn];
    const uint8_t *pe = &c->end[cn];
    while (k < most && fr[n - 1 - k] == pf[-1 - (int)k] && co[n - 1 - k] == pc[-1 - (int)k] &&
           in[n - 1 - k] == pi[-1 - (int)k] && en[n - 1 - k] == pe[-1 - (int)k])
        k++;
    if (k == (uint32_t)n && cn == (uint32_t)n && c->id) {
        *id = c->id;
        return n;
    }
    /* the outer k frames keep their words (moved to their new places), the others are looked up */
    if ((uint32_t)n != cn) memmove(&c->word[n - k], &c->word[cn - k], k * sizeof c->word[0]);
    for (int i = 0; i < n - (int)k; i++)
        if (!(c->word[i] = frame_word(co[i], in[i], en[i]))) {
            n = i; /* the code table is full: the part ends here */
            break;
        }
    c->n = 0;
    if (n == 0) {
        c->link[0].at = 1;
        return c->fast = 0;
    }
    memset(c->moved, 0, sizeof c->moved); /* (its instructions were another frame's) */
    memcpy(c->frame, fr, (size_t)n * sizeof fr[0]);
    memcpy(c->code, co, (size_t)n * sizeof co[0]);
    memcpy(c->instr, in, (size_t)n * sizeof in[0]);
    memcpy(c->end, en, (size_t)n);
    c->n = (uint32_t)n;
    c->id = lpr_stack_intern_words(c->word, (unsigned)n, c->sampler);
    *id = c->id;
    return n;
}

/* (3.11+) After a call or a return, the thread's frames from `f` are a few new ones over the kept
 * chain's from some link j on. Those are compared link by link with the kept chain, as part_kept
 * compares the whole of it, and keep their words; only the new links are walked and their frames
 * looked up. As lpr_py_part returns; -1 where the frames do not end so (then part_walk walks them
 * all). Frames of one chunk lie at falling addresses from the innermost out, so the kept link a
 * new frame's caller may be is found by moving along the kept chain, never back. From 3.12 the
 * chain also holds the evaluation loop's entry shims, on the C stack: a new one ends the run of
 * the frame before it, and the kept ones are passed over in that search (their addresses are the
 * C stack's) and compared with the rest. */
static __attribute__((noinline)) int part_join(struct pypart *c, uintptr_t f, uint32_t *id) {
    const uintptr_t o_back = P3.back, o_instr = P3.instr, o_code = (uintptr_t)L->f_code,
                    o_owner = (uintptr_t)L->f_owner;
    const intptr_t o_entry = L->f_entry;
    const int shims = L->minor >= 12;
    const uintptr_t lo = c->chunk + chunk_data, span = c->chunk_size - chunk_head; /* (as chain_at) */
    uintptr_t *fr = c->walked.frame, *co = c->walked.code, *in = c->walked.instr;
    uint8_t *en = c->walked.end;
    uintptr_t *lat = c->walked.link_at, *lin = c->walked.link_instr; /* the new links */
    uint32_t nl = c->nlink, j = 0, m = 0, q = 0;
    uintptr_t g = f;
    for (int joined = 0; !joined;) { /* the new links, up to the first that is a kept one */
        if (!g || q == JOIN_NEW) return -1;
        if (g - lo > span) { /* (3.12+) an entry shim on the C stack; anything else is walked */
            if (!shims || !on_cstack(g) || *(const char *)(g + o_owner) != SHIM) return -1;
            if (m) en[m - 1] = 1; /* the evaluation loop's entry: the run ends */
            lat[q] = g, lin[q++] = rd(g + o_instr);
            g = rd(g + o_back);
            continue;
        }
        while (j < nl && (c->link[j].at - lo > span || c->link[j].at > g)) j++;
        /* the first kept frame reached may have moved on (returned from one callee, calling the
         * next): walked as a new one too, the links after it compared */
        if (j < nl && c->link[j].at == g) {
            if (rd(g + o_instr) == c->link[j].instr) break;
            joined = 1;
            j++;
        }
        uintptr_t code = rd(g + o_code);
        if (!code) return -1;
        fr[m] = g;
        co[m] = code;
        in[m] = rd(g + o_instr);
        en[m++] = o_entry >= 0 && ((const char *)g)[o_entry] != 0;
        lat[q] = g, lin[q++] = in[m - 1];
        g = rd(g + o_back);
    }
    uint32_t keep = 0; /* the kept frames: those of the kept links from j, to the end */
    for (uint32_t t = j; t < nl; t++, g = rd(g + o_back)) {
        if (g != c->link[t].at || rd(g + o_instr) != c->link[t].instr) return -1;
        keep += c->link[t].at - lo <= span;
    }
    uint32_t n = m + keep, jf = c->n - keep; /* (jf: the first kept frame's place) */
    if (g || n > PART || q + (nl - j) > LINKS || keep > c->n || (!m && !j)) return -1;
    if (!keep) en[m - 1] = 1; /* (the outermost frame ends a run, as part_walk marks it) */
    if (m && shims && j < nl && c->link[j].at - lo > span) en[m - 1] = 1; /* (a kept shim follows) */
    uint64_t words[JOIN_NEW];
    for (uint32_t i = 0; i < m; i++)
        if (!(words[i] = frame_word(co[i], in[i], en[i]))) return -1; /* (the code table is full) */
    /* the kept frames and links move to follow the new ones (the links with the end mark after them) */
    if (m != jf) {
        memmove(&c->frame[m], &c->frame[jf], keep * sizeof c->frame[0]);
        memmove(&c->code[m], &c->code[jf], keep * sizeof c->code[0]);
        memmove(&c->instr[m], &c->instr[jf], keep * sizeof c->instr[0]);
        memmove(&c->end[m], &c->end[jf], keep);
        memmove(&c->word[m], &c->word[jf], keep * sizeof c->word[0]);
    }
    if (q != j) memmove(&c->link[q], &c->link[j], (nl - j + 1) * sizeof c->link[0]);
    for (uint32_t i = 0; i < m; i++)
        c->frame[i] = fr[i], c->code[i] = co[i], c->instr[i] = in[i], c->end[i] = en[i], c->word[i] = words[i];
    for (uint32_t i = 0; i < q; i++) c->link[i].at = lat[i], c->link[i].instr = lin[i];
    c->n = n;
    c->nlink = q + (nl - j);
    memset(c->moved, 0, sizeof c->moved);
    c->id = lpr_stack_intern_words(c->word, n, c->sampler);
    *id = c->id;
    return (int)n;
}

/* 3.11+, the common case of a capture through a part cache: the kept chain (part_walk's) is the
 * thread's still. From its state `ts`, its frame is read with P3's offsets and its chunk compared
 * with the last capture's, then the chain compared link by link — the frames and the entry shims
 * alike, so the runs end where they ended — each link read only where the last one led to the
 * address kept: in the same chunk, or on the thread's C stack. The innermost frame may have moved
 * to one of the instructions it stood at since it was walked (its memo, move_find: the same frame
 * address and instruction address is the same code, as for every outer link). The part's id, or
 * 0 where it does not serve: *fp and *kp the thread's frame and chunk, read on the way, and
 * *movedp the innermost frame's new instruction where nothing else changed (0: more did). No call
 * on its way: lpr_py_with, which inlines it, saves no register and makes no frame. */
static inline __attribute__((always_inline)) uint32_t part_kept(struct pypart *c, uintptr_t ts, uintptr_t *fp,
                                                                uintptr_t *kp, uintptr_t *movedp) {
    uintptr_t f = rd(ts + P3.ts_frame);
    if (P3.cframe) f = f ? rd(f + P3.cframe_frame) : 0;
    uintptr_t k = rd(ts + P3.datastack);
    *fp = f, *kp = k, *movedp = 0;
    /* (c->chunk is never 0 once kept; a chain not kept starts at 1, no frame's address) */
    if (LP_UNLIKELY(k != c->chunk) || LP_UNLIKELY(rd(k + 8) != c->chunk_size) || LP_UNLIKELY(f != c->link[0].at))
        return 0;
    const uintptr_t o_back = P3.back, o_instr = P3.instr;
    const struct link *l = c->link + 1;
    uintptr_t instr = rd(f + o_instr), g = rd(f + o_back);
    while (g == l->at && rd(g + o_instr) == l->instr) { /* (the link past the last is at 1) */
        g = rd(g + o_back);
        l++;
    }
    if (LP_UNLIKELY(g != 0) || LP_UNLIKELY(l->at != 1)) return 0;
    if (LP_UNLIKELY(instr != c->link[0].instr)) {
        if (f != c->frame[0]) return 0; /* (a shim first: 3.12+) */
        int m = move_find(c, instr);
        if (m < 0 || rd(f + P3.code) != c->code[0] ||
            (c->n > 1 && P3.entry >= 0 && (((const char *)f)[P3.entry] != 0) != c->end[0])) {
            *movedp = instr;
            return 0;
        }
        c->instr[0] = c->link[0].instr = instr;
        c->word[0] = c->moved[m].word;
        c->id = c->moved[m].id;
    }
    return c->id;
}

/* 3.11+, the last capture's frames all in one chunk: the part's id (0: no Python frames). The
 * kept chain where it serves (part_kept); where only the innermost frame moved, its new line
 * looked up (innermost_moved); after a call or a return (3.11) the new frames joined to the kept
 * ones (part_join); else walked. */
static inline __attribute__((always_inline)) uint32_t part_fast(struct pypart *c) {
    uintptr_t ts = part_tstate(&c->ts);
    if (!ts) return 0;
    uintptr_t f, k, moved;
    uint32_t id = part_kept(c, ts, &f, &k, &moved);
    if (id) return id;
    if (moved && innermost_moved(c, f, moved)) return c->id;
    if (k == c->chunk && rd(k + 8) == c->chunk_size && c->nlink) {
        int n = part_join(c, f, &id);
        if (n >= 0) return n > 0 ? id : 0;
    }
    struct chain ch;
    chain_at(&ch, k);
    return part_walk(c, &ch, f, &id) > 0 ? id : 0;
}

/* The part where part_fast does not serve: compared as it is walked, else walked. (Apart
 * from lpr_py_part, which every capture runs, as is the thread with no cache yet: their rooms and
 * registers would be every capture's.) */
static __attribute__((noinline)) int part_again_or_walk(struct pypart *c, uint32_t *id) {
    struct chain ch;
    uintptr_t f = top_frame_in(&ch);
    if (L->kind == 1 && c->id) {
        int n = part_again(c, &ch, f, id);
        if (n >= 0) return n;
    }
    return part_walk(c, &ch, f, id);
}

static __attribute__((noinline)) uint32_t part_uncached(int sampler) {
    uint64_t buf[PART];
    uint8_t end[PART];
    int n = lpr_py_frames(buf, end, PART);
    for (int i = 0; i < n; i++) buf[i] |= end[i] ? LP_PY_RUN_END : 0;
    return n > 0 ? lpr_stack_intern_words(buf, (unsigned)n, sampler) : 0;
}

/* The calling thread's Python frames as the Python part of a stack: the id of the interned stack
 * of their LP_PYFRAME words (innermost first, the last frame of each run of the evaluation loop
 * tagged LP_PY_RUN_END); 0: no Python running here. Through the thread's cache of its last part:
 * the frames are walked (a few loads each), and only those that differ from the last capture's —
 * counted from the outermost, which change least — get their code's id and line looked up; a part
 * found unchanged is not interned again. A frame that is the same (address, code, instruction) is
 * the same Python frame at the same line: a live frame holds its code object, so neither can have
 * been replaced under it. `sampler`: the cache of the sampler's signal handler. */
uint32_t lpr_py_part(int sampler) {
    if (!lpr_py_on) return 0;
    /* (3.11+) not yet or no longer initialized: no state is read then (this_tstate) — the
     * interpreter's own start-up allocates thousands of times before */
    if (P3.initialized && !*(const volatile int *)P3.initialized) return 0;
    struct pycache *cache = lpr_py_cache_of(&lpr_tls, sizeof *cache);
    if (LP_UNLIKELY(!cache)) return part_uncached(sampler);
    struct pypart *c = &cache->part_of[sampler != 0];
    c->sampler = sampler != 0;
    if (LP_LIKELY(c->fast && c->id)) return part_fast(c);
    uint32_t id = 0;
    return part_again_or_walk(c, &id) > 0 ? id : 0;
}

/* (lpr_py_with) The pair of native part `native` and Python part `py`: from the thread's memo of
 * pairs, else made and remembered. */
static __attribute__((noinline)) uint32_t pair_made(struct pycache *cache, unsigned e, uint64_t key) {
    if (!(key >> 32)) return (uint32_t)key; /* no Python part (no node for it) */
    uint32_t id = lpr_stack_pair((uint32_t)key, (uint32_t)(key >> 32));
    if (id) cache->pair[e].key = key, cache->pair[e].id = id;
    return id;
}
static inline uint32_t with_pair(struct pycache *cache, uint32_t native, uint32_t py) {
    uint64_t key = native | (uint64_t)py << 32;
    unsigned e = (unsigned)((key * 0x9E3779B97F4A7C15ull) >> 58); /* (PAIRS: 64) */
    if (LP_LIKELY(cache->pair[e].key == key)) return cache->pair[e].id;
    return pair_made(cache, e, key);
}

/* (lpr_py_with where its common case does not serve) The part as lpr_py_part makes it. */
static __attribute__((noinline)) uint32_t with_part(uint32_t native) {
    uint32_t py = lpr_py_part(0);
    if (!py) return native;
    struct pycache *cache = lpr_tls.pycache;
    return LP_LIKELY(cache != NULL) ? with_pair(cache, native, py) : lpr_stack_pair(native, py);
}

/* (lpr_py_with) The kept chain but for its innermost frame f, now at `instr`: the part as
 * innermost_moved makes it, else walked. */
static __attribute__((noinline)) uint32_t with_moved(struct pycache *cache, uint32_t native, uintptr_t f,
                                                     uintptr_t instr) {
    struct pypart *c = &cache->part_of[0];
    if (!innermost_moved(c, f, instr)) return with_part(native);
    return c->id ? with_pair(cache, native, c->id) : native;
}

/* The stack of native part `native` with the calling thread's Python part (stacks.c's capture).
 * A thread remembers the pairs it made last, so a loop allocating from the same lines makes none:
 * under one Python line a program reaches several native stacks, and one native stack (an
 * allocation inside a library) is reached from many Python lines.
 *
 * Its common case makes no call: the thread's state (the GIL holder, the state the key gave
 * last, its thread this one), the kept chain (part_kept), the pair from the memo. Anything else
 * leaves through a call that does it the long way (with_part, with_moved); so this path saves
 * no registers and makes no frame. */
uint32_t lpr_py_with(uint32_t native) {
    struct pycache *cache = lpr_tls.pycache;
    if (LP_UNLIKELY(cache == NULL)) return with_part(native);
    struct pypart *c = &cache->part_of[0];
    /* the thread's state: part_tstate's, but where it would read the key, the long way */
    uintptr_t ts = holder_state(&c->ts);
    if (LP_UNLIKELY(!ts)) return with_part(native);
    uintptr_t f, k, moved;
    uint32_t py = part_kept(c, ts, &f, &k, &moved);
    if (LP_LIKELY(py != 0)) return with_pair(cache, native, py);
    return moved ? with_moved(cache, native, f, moved) : with_part(native);
}

/* lpr_py_with's work done afresh, no cache of the thread's consulted (LIBPROF_STACK_CACHE_OFF). */
uint32_t lpr_py_with_fresh(uint32_t native) {
    uint32_t py = lpr_py_on ? part_uncached(0) : 0;
    return lpr_stack_pair(native, py);
}

/* ---- the location of a call ----------------------------------------------------------------- */

/* The calling thread's Python frames as a stack id (0: none): what a call made from Python
 * carries (the innermost frame; LIBPROF_STACKS frames when asked). */
uint32_t lpr_py_location(void) {
    if (LP_UNLIKELY(lpr_py_ready != NULL)) lpr_py_check_ready();
    uint64_t py[1];
    uint8_t end[1];
    struct lpr_thread *node = lpr_tls.thr;
    if (lpr_stack_depth == 0 && node) {
        struct chain ch;
        struct pyframe x;
        uintptr_t f = top_frame_in(&ch);
        if (!f || frame_read(&ch, f, &x) != 0) return 0;
        if (L->kind == 1 && L->minor >= 12 && x.owner == SHIM)
            return lpr_py_frames(py, end, 1) > 0 ? lpr_stack_intern_words(py, 1, 0) : 0;
        uintptr_t code = x.code, instr = x.instr;
        struct pycache *c = lpr_py_cache_of(&lpr_tls, sizeof *c);
        unsigned w = (unsigned)(((instr ^ (code >> 4)) * 0x9E3779B97F4A7C15ull) >> 58) & (LOC_WAYS - 1);
        if (c && c->loc[w].frame == f && c->loc[w].code == code && c->loc[w].instr == instr && c->loc[w].id &&
            still(code, c->loc[w].code_id))
            return c->loc[w].id;
        uint32_t id = lpr_py_frames(py, end, 1) > 0 ? lpr_stack_intern_words(py, 1, 0) : 0;
        if (c) {
            c->loc[w].frame = f;
            c->loc[w].code = code;
            c->loc[w].instr = instr;
            c->loc[w].id = id;
            c->loc[w].code_id = id ? LP_PYFRAME_ID(py[0]) : 0;
        }
        return id;
    }
    /* with LIBPROF_STACKS: every Python frame, whatever the depth asked */
    return lpr_py_part(0);
}

/* ---- the spool ------------------------------------------------------------------------------ */

static uint32_t written_upto = 1;
static int writing;
static uint64_t wbuf[8192];

/* Write the code objects seen since the last call (before the stacks that name them); same
 * rules as lpr_stacks_write. Async-signal-safe. */
void lpr_pycode_write(void) {
    if (!lpr_py_on || __atomic_exchange_n(&writing, 1, __ATOMIC_ACQUIRE)) return;
    uint32_t n = __atomic_load_n(&next_code, __ATOMIC_ACQUIRE), id = written_upto;
    if (n > MAX_CODES) n = MAX_CODES;
    size_t used = 0;
    for (; id < n; id++) {
        const struct pyent *e = &ents[id];
        if (!__atomic_load_n(&e->ready, __ATOMIC_ACQUIRE)) break;
        size_t words = (sizeof(struct lp_pycode) + e->name_len + e->file_len + 7) / 8;
        if (used + words > sizeof wbuf / 8) {
            lpr_spool_write(LP_CHUNK_PYCODE, 0, wbuf, used * 8, NULL, 0);
            used = 0;
        }
        struct lp_pycode pc = {id, (uint32_t)(e->firstline > 0 ? e->firstline : 0), e->name_len, e->file_len, 0};
        char *p = (char *)&wbuf[used];
        memset(p, 0, words * 8);
        memcpy(p, &pc, sizeof pc);
        memcpy(p + sizeof pc, strs + e->str, (size_t)e->name_len + e->file_len);
        used += words;
    }
    if (used) lpr_spool_write(LP_CHUNK_PYCODE, 0, wbuf, used * 8, NULL, 0);
    written_upto = id;
    __atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
}

uint64_t lpr_py_codes(void) { return lpr_py_on ? __atomic_load_n(&next_code, __ATOMIC_RELAXED) - 1 : 0; }
int lpr_py_codes_full(void) { return __atomic_load_n(&codes_full, __ATOMIC_RELAXED); }
int lpr_py_minor(void) { return L && lpr_py_on ? L->minor : 0; }

void lpr_python_after_fork_child(void) {
    written_upto = 1;
    writing = 0;
    /* the stacks its thread's cache names are the parent's (nodes.c): forgotten, as it was new */
    struct pycache *c = lpr_tls.pycache;
    if (c) {
        memset(c->part_of, 0, sizeof c->part_of);
        memset(c->pair, 0, sizeof c->pair);
        for (unsigned i = 0; i < LOC_WAYS; i++) c->loc[i].id = 0;
    }
}
