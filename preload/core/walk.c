/* walk.c: the CPU sampler's stack walk — the callers of an interrupted context, read from the
 * unwind tables the compilers emit (.eh_frame, found through .eh_frame_hdr), without libunwind:
 * in a signal handler it would take the loader's lock from inside the loader, and its caches,
 * keyed by instruction, send every new instruction a sample lands on through the loader's list
 * and a parse of the tables (10-20 us a sample on a program that runs much different code).
 *
 * A frame steps by its function's rule at the instruction: where the caller's frame begins (the
 * CFA: rsp or rbp plus an offset, or the word rbp points near in a realigned frame), and where
 * the return address and the caller's rbp were saved, relative to it. Rules live in one table for
 * every thread, keyed by instruction (insert-only and lock-free: a slot is claimed by a
 * compare-and-swap of its address, its rule published after it), so a loop's samples find them
 * in one probe. A missing rule is computed from the object's binary-search table of FDEs and
 * the FDE's call-frame program, inside dl_iterate_phdr (the object cannot be unmapped while the
 * loader's lock is held; never when the interrupted thread is in the loader, nor while the
 * loader's list is being changed). Every read of the stack is checked against the interrupted
 * thread's stack mapping (found once per thread in /proc/self/maps), so a wrong rule — code
 * unloaded and other code loaded at its address — makes a wrong stack, never a fault.
 *
 * The walk ends at a frame without unwind tables (JIT code), at a signal frame (a handler of the
 * program's own that the sample interrupted), at the outermost frame (its return address is
 * undefined), or on a rule this reader does not take (a CFA expression other than the
 * realigned-frame form). Async-signal-safe: no allocation, no lock but the loader's. */
#define _GNU_SOURCE
#include <elf.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "walk.h"
#include "real.h"
#include "os_real.h"
#include "own.h"
#include "state.h"
#include "sys.h"

enum { DW_RBP = 6, DW_RSP = 7, DW_RA = 16 };

/* ---- a rule, packed in one word -----------------------------------------------------------------
 * bits 0-1   how the CFA is found: CFA_REG (register + offset), CFA_DEREF (the word at rbp + offset)
 * bit  2     the register: 0 rsp, 1 rbp
 * bits 3-4   the caller's rbp: BP_SAME, BP_AT_CFA (saved at CFA + offset), BP_AT_RBP (at rbp + offset)
 * bit  5     the return address is undefined: the outermost frame
 * bits 8-31  the CFA's offset (signed); bits 32-47 the return address's offset from the CFA;
 * bits 48-62 rbp's offset; bit 63 set in every rule (0: none). */
enum { CFA_REG = 1, CFA_DEREF = 2 };
enum { BP_SAME = 0, BP_AT_CFA = 1, BP_AT_RBP = 2 };
#define RULE_SET (UINT64_C(1) << 63)
#define RULE_END (UINT64_C(1) << 5)
#define RULE_NONE (RULE_SET | UINT64_C(1) << 6) /* code of a loaded object, without a rule taken here */

struct rule {
    int cfa, cfa_rbp, bp, end;
    int64_t cfa_off, ra_off, bp_off;
};

static uint64_t pack(const struct rule *r) {
    return RULE_SET | (uint64_t)r->cfa | (uint64_t)(r->cfa_rbp != 0) << 2 | (uint64_t)r->bp << 3 |
           (r->end ? RULE_END : 0) | ((uint64_t)r->cfa_off & 0xffffff) << 8 | ((uint64_t)r->ra_off & 0xffff) << 32 |
           ((uint64_t)r->bp_off & 0x7fff) << 48;
}

static void unpack(uint64_t w, struct rule *r) {
    r->cfa = (int)(w & 3);
    r->cfa_rbp = (int)(w >> 2 & 1);
    r->bp = (int)(w >> 3 & 3);
    r->end = (w & RULE_END) != 0;
    r->cfa_off = (int64_t)(int32_t)(uint32_t)((w >> 8 & 0xffffff) << 8) >> 8;
    r->ra_off = (int16_t)(uint16_t)(w >> 32);
    r->bp_off = (int64_t)(int16_t)(uint16_t)((w >> 48 & 0x7fff) << 1) >> 1;
}

/* Does the rule fit its fields? (Offsets beyond them: a frame of more than 8 MiB.) */
static int fits(const struct rule *r) {
    return r->cfa_off >= -(1 << 23) && r->cfa_off < (1 << 23) && r->ra_off >= -32768 && r->ra_off < 32768 &&
           r->bp_off >= -16384 && r->bp_off < 16384;
}

/* ---- the table of rules ------------------------------------------------------------------------- */

/* The table's first part (1 MiB) is made resident at start: no page fault in the handler. It
 * grows fourfold each time it is 3/4 full, up to 512 Ki rules (8 MiB reserved: a PyTorch import
 * walks 190 k return addresses), its pages touched as used; the rules put under the smaller size
 * are computed again once. */
#define RULE_SLOTS_FIRST (1u << 16)
#define RULE_SLOTS (1u << 19)
#define RULE_PROBES 16
static struct rule_slot {
    uint64_t key, rule; /* key: the address, the generation in its top 16 bits (user addresses have 47) */
} * rules;
static uint32_t rules_used, gen;
static uint32_t rule_mask = RULE_SLOTS_FIRST - 1; /* the part in use */
static uint64_t subs_seen;                        /* the loader's count of objects unloaded, when last looked at */

static inline uint32_t rule_hash(uintptr_t ip, uint32_t mask) {
    return (uint32_t)((ip * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}
static inline uint64_t rule_key(uintptr_t ip) {
    return (uint64_t)ip | (uint64_t)(__atomic_load_n(&gen, __ATOMIC_ACQUIRE) & 0xffff) << 48;
}

static uint64_t rule_get(uintptr_t ip) {
    uint64_t key = rule_key(ip);
    uint32_t mask = __atomic_load_n(&rule_mask, __ATOMIC_RELAXED);
    for (uint32_t i = 0, s = rule_hash(ip, mask); i < RULE_PROBES; i++, s = (s + 1) & mask) {
        uint64_t k = __atomic_load_n(&rules[s].key, __ATOMIC_ACQUIRE);
        if (k == key) return __atomic_load_n(&rules[s].rule, __ATOMIC_ACQUIRE); /* 0 while being written */
        if (!k) return 0;
    }
    return 0;
}

static void rule_put(uintptr_t ip, uint64_t rule) {
    uint32_t mask = __atomic_load_n(&rule_mask, __ATOMIC_RELAXED);
    if (__atomic_load_n(&rules_used, __ATOMIC_RELAXED) > (mask + 1) / 4 * 3) {
        if (mask == RULE_SLOTS - 1) return; /* full: computed each time */
        /* (racing threads: the same larger mask; the slots used so far stay counted) */
        __atomic_store_n(&rule_mask, (mask + 1) * 4 - 1, __ATOMIC_RELAXED);
        mask = (mask + 1) * 4 - 1;
    }
    uint64_t key = rule_key(ip);
    for (uint32_t i = 0, s = rule_hash(ip, mask); i < RULE_PROBES; i++, s = (s + 1) & mask) {
        uint64_t k = 0;
        if (__atomic_compare_exchange_n(&rules[s].key, &k, key, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&rules[s].rule, rule, __ATOMIC_RELEASE);
            __atomic_fetch_add(&rules_used, 1, __ATOMIC_RELAXED);
            return;
        }
        if (k == key) return; /* another thread is putting it */
    }
}

/* ---- reading the tables: every read inside the object's mapped range -------------------------- */

struct rd {
    const uint8_t *p, *lo, *hi; /* the cursor; the object's bounds */
    int bad;
};

static int room(struct rd *r, size_t n) {
    if (r->bad || r->p < r->lo || r->p + n > r->hi || r->p + n < r->p) return r->bad = 1, 0;
    return 1;
}
static uint64_t u8(struct rd *r) { return room(r, 1) ? *r->p++ : 0; }
static uint64_t un(struct rd *r, size_t n) {
    uint64_t v = 0;
    if (!room(r, n)) return 0;
    memcpy(&v, r->p, n);
    r->p += n;
    return v;
}
static uint64_t uleb(struct rd *r) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint64_t b = u8(r);
        v |= (b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}
static int64_t sleb(struct rd *r) {
    uint64_t v = 0, b = 0;
    unsigned shift = 0;
    do {
        b = u8(r);
        v |= (b & 0x7f) << shift;
        shift += 7;
    } while ((b & 0x80) && shift < 64);
    if (shift < 64 && (b & 0x40)) v |= ~UINT64_C(0) << shift;
    return (int64_t)v;
}

/* A pointer in DW_EH_PE encoding `enc`; `data` the base of datarel (.eh_frame_hdr). */
static uintptr_t ptr(struct rd *r, unsigned enc, uintptr_t data) {
    if (enc == 0xff) return 0; /* DW_EH_PE_omit */
    uintptr_t at = (uintptr_t)r->p, v;
    switch (enc & 0x0f) {
    case 0x00: v = (uintptr_t)un(r, 8); break;
    case 0x01: v = (uintptr_t)uleb(r); break;
    case 0x02: v = (uintptr_t)un(r, 2); break;
    case 0x03: v = (uintptr_t)un(r, 4); break;
    case 0x04: v = (uintptr_t)un(r, 8); break;
    case 0x09: v = (uintptr_t)sleb(r); break;
    case 0x0a: v = (uintptr_t)(int64_t)(int16_t)un(r, 2); break;
    case 0x0b: v = (uintptr_t)(int64_t)(int32_t)un(r, 4); break;
    case 0x0c: v = (uintptr_t)un(r, 8); break;
    default: r->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += at; break;   /* pcrel */
    case 0x30: v += data; break; /* datarel */
    default: r->bad = 1; return 0;
    }
    if (enc & 0x80) r->bad = 1; /* indirect: never for the locations read here */
    return v;
}

/* ---- the call-frame program ----------------------------------------------------------------------- */

struct cfa_state {
    struct rule r;
    int ra_at_cfa; /* the return address's rule is "saved at CFA + ra_off" */
};

struct cie {
    uint64_t code_align;
    int64_t data_align;
    unsigned ra_reg, fde_enc;
    int signal, z; /* a signal frame's; 'z': FDEs carry an augmentation length */
    const uint8_t *insns, *end;
};

/* The expression of a realigned frame's CFA or rbp, "DW_OP_breg6 k" alone (an address: the word
 * there is the value) or followed by DW_OP_deref: 1 with *k, else 0 (a form not taken). */
static int rbp_expr(struct rd *r, size_t len, int64_t *k, int *deref) {
    const uint8_t *end = r->p + len;
    if (!room(r, len)) return 0;
    if (u8(r) != 0x76) return r->p = end, 0; /* DW_OP_breg6 */
    *k = sleb(r);
    *deref = 0;
    if (r->p < end && u8(r) == 0x06) *deref = 1; /* DW_OP_deref */
    int ok = r->p == end && !r->bad;
    r->p = end;
    return ok;
}

/* The rows of a whole FDE, as the table of FDEs (below) keeps them: from each location (an offset
 * from the function's start) on, a rule (0: none taken here). */
struct row {
    uint32_t off, pad;
    uint64_t rule;
};
struct rows_out {
    struct row *row;
    uint32_t n, cap;
    uintptr_t begin;
    int full; /* more rows than room */
};

static uint64_t rule_of(const struct cfa_state *st) {
    return st->ra_at_cfa && st->r.cfa && fits(&st->r) ? pack(&st->r) : 0;
}

/* The state from `loc` on, as a row (the same rule as the row before: nothing new). */
static void emit(struct rows_out *o, uintptr_t loc, uint64_t rule) {
    uint32_t off = (uint32_t)(loc - o->begin);
    if (o->n && o->row[o->n - 1].off == off) {
        o->row[o->n - 1].rule = rule;
        if (o->n > 1 && o->row[o->n - 2].rule == rule) o->n--;
        return;
    }
    if (o->n && o->row[o->n - 1].rule == rule) return;
    if (o->n == o->cap) {
        o->full = 1;
        return;
    }
    o->row[o->n++] = (struct row){off, 0, rule};
}

/* Run `insns` from location `loc` until the row past `ip`; 0, or -1 for what is not taken. With
 * `out`, every row is emitted on the way. */
#define FAIL         \
    do {             \
        *locp = loc; \
        return -1;   \
    } while (0)
#define ADVANCE(to)                                         \
    do {                                                    \
        uintptr_t to_ = (to);                               \
        if (out && to_ != loc) emit(out, loc, rule_of(st)); \
        loc = to_;                                          \
        if (loc > ip) {                                     \
            *locp = loc;                                    \
            return 0;                                       \
        }                                                   \
    } while (0)
static int run_ops(struct rd *r, const struct cie *c, uintptr_t *locp, uintptr_t ip, struct cfa_state *st,
                   const struct cfa_state *init, uintptr_t data, struct rows_out *out) {
    uintptr_t loc = *locp;
    struct cfa_state saved[8];
    int depth = 0;
    while (r->p < r->hi && !r->bad) {
        unsigned op = (unsigned)u8(r), arg = op & 0x3f;
        uint64_t reg = 0;
        int64_t off = 0;
        switch (op & 0xc0) {
        case 0x40: /* advance_loc */ ADVANCE(loc + arg * c->code_align); continue;
        case 0x80: /* offset */
            reg = arg;
            off = (int64_t)uleb(r) * c->data_align;
            goto saved_at;
        case 0xc0: /* restore */ reg = arg; goto restore;
        }
        switch (op) {
        case 0x00: break; /* nop */
        case 0x01: /* set_loc */ ADVANCE(ptr(r, c->fde_enc, data)); break;
        case 0x02: ADVANCE(loc + un(r, 1) * c->code_align); break;
        case 0x03: ADVANCE(loc + un(r, 2) * c->code_align); break;
        case 0x04: ADVANCE(loc + un(r, 4) * c->code_align); break;
        case 0x05: /* offset_extended */
            reg = uleb(r);
            off = (int64_t)uleb(r) * c->data_align;
            goto saved_at;
        case 0x11: /* offset_extended_sf */
            reg = uleb(r);
            off = sleb(r) * c->data_align;
            goto saved_at;
        case 0x2f: /* GNU_negative_offset_extended */
            reg = uleb(r);
            off = -(int64_t)uleb(r) * c->data_align;
            goto saved_at;
        case 0x06: /* restore_extended */ reg = uleb(r); goto restore;
        case 0x07: /* undefined */
            reg = uleb(r);
            if (reg == c->ra_reg) st->r.end = 1;
            if (reg == DW_RBP) st->r.bp = BP_SAME; /* (nothing to restore it from) */
            break;
        case 0x08: /* same_value */
            reg = uleb(r);
            if (reg == DW_RBP) st->r.bp = BP_SAME;
            if (reg == c->ra_reg) FAIL;
            break;
        case 0x09: /* register */
            reg = uleb(r);
            uleb(r);
            if (reg == DW_RBP || reg == c->ra_reg) FAIL;
            break;
        case 0x0a: /* remember_state */
            if (depth == 8) FAIL;
            saved[depth++] = *st;
            break;
        case 0x0b: /* restore_state */
            if (!depth) FAIL;
            *st = saved[--depth];
            break;
        case 0x0c: /* def_cfa */
            reg = uleb(r);
            st->r.cfa = CFA_REG;
            st->r.cfa_rbp = reg == DW_RBP;
            st->r.cfa_off = (int64_t)uleb(r);
            if (reg != DW_RBP && reg != DW_RSP) FAIL;
            break;
        case 0x12: /* def_cfa_sf */
            reg = uleb(r);
            st->r.cfa = CFA_REG;
            st->r.cfa_rbp = reg == DW_RBP;
            st->r.cfa_off = sleb(r) * c->data_align;
            if (reg != DW_RBP && reg != DW_RSP) FAIL;
            break;
        case 0x0d: /* def_cfa_register */
            reg = uleb(r);
            if (reg != DW_RBP && reg != DW_RSP) FAIL;
            if (st->r.cfa != CFA_REG) FAIL;
            st->r.cfa_rbp = reg == DW_RBP;
            break;
        case 0x0e: /* def_cfa_offset */ st->r.cfa_off = (int64_t)uleb(r); break;
        case 0x13: /* def_cfa_offset_sf */ st->r.cfa_off = sleb(r) * c->data_align; break;
        case 0x0f: { /* def_cfa_expression: the realigned frame's *(rbp + k) */
            int deref;
            int64_t k;
            if (!rbp_expr(r, uleb(r), &k, &deref) || !deref) FAIL;
            st->r.cfa = CFA_DEREF;
            st->r.cfa_off = k;
            break;
        }
        case 0x10: { /* expression: rbp saved at rbp + k */
            reg = uleb(r);
            int deref;
            int64_t k;
            size_t len = uleb(r);
            if (reg == DW_RBP) {
                if (!rbp_expr(r, len, &k, &deref) || deref) FAIL;
                st->r.bp = BP_AT_RBP;
                st->r.bp_off = k;
            } else if (reg == c->ra_reg) {
                FAIL;
            } else if (room(r, len)) {
                r->p += len;
            }
            break;
        }
        case 0x14: /* val_offset */
        case 0x15:
            reg = uleb(r);
            if (op == 0x14)
                uleb(r);
            else
                sleb(r);
            if (reg == DW_RBP || reg == c->ra_reg) FAIL;
            break;
        case 0x16: /* val_expression */
            reg = uleb(r);
            if (reg == DW_RBP || reg == c->ra_reg) FAIL;
            off = (int64_t)uleb(r);
            if (room(r, (size_t)off)) r->p += off;
            break;
        case 0x2e: /* GNU_args_size */ uleb(r); break;
        default: FAIL;
        }
        continue;
    saved_at:
        if (reg == DW_RBP) {
            st->r.bp = BP_AT_CFA;
            st->r.bp_off = off;
        } else if (reg == c->ra_reg) {
            st->r.ra_off = off;
            st->ra_at_cfa = 1;
        }
        continue;
    restore:
        if (reg == DW_RBP) {
            st->r.bp = init->r.bp;
            st->r.bp_off = init->r.bp_off;
        } else if (reg == c->ra_reg) {
            st->r.ra_off = init->r.ra_off;
            st->ra_at_cfa = init->ra_at_cfa;
        }
    }
    *locp = loc;
    return r->bad ? -1 : 0;
}
#undef ADVANCE
#undef FAIL

static int run(struct rd *r, const struct cie *c, uintptr_t loc, uintptr_t ip, struct cfa_state *st,
               const struct cfa_state *init, uintptr_t data, struct rows_out *out) {
    int rc = run_ops(r, c, &loc, ip, st, init, data, out);
    if (out) emit(out, loc, rc == 0 ? rule_of(st) : 0); /* the last row (none after what is not taken) */
    return rc;
}

/* The rule of the row holding offset `off` (rows sorted by offset); 0 before the first. */
static uint64_t rows_rule(const struct row *row, uint32_t n, uintptr_t off) {
    uint32_t lo = 0, hi = n; /* the first row past off */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (row[mid].off <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? row[lo - 1].rule : 0;
}

/* The CIE at `at`: 0, or -1. */
static int read_cie(const uint8_t *at, const uint8_t *lo, const uint8_t *hi, struct cie *c) {
    struct rd r = {at, lo, hi, 0};
    uint64_t len = un(&r, 4);
    if (len == 0xffffffff) len = un(&r, 8);
    const uint8_t *end = r.p + len;
    if (r.bad || end > hi || un(&r, 4) != 0) return -1; /* a CIE's id is 0 in .eh_frame */
    unsigned version = (unsigned)u8(&r);
    const char *aug = (const char *)r.p;
    while (r.p < end && *r.p) r.p++;
    r.p++;
    if (version != 1 && version != 3) return -1;
    c->code_align = uleb(&r);
    c->data_align = sleb(&r);
    c->ra_reg = (unsigned)(version == 1 ? u8(&r) : uleb(&r));
    c->fde_enc = 0;
    c->signal = 0;
    c->z = aug[0] == 'z';
    if (aug[0] == 'z') {
        uint64_t alen = uleb(&r);
        const uint8_t *aend = r.p + alen;
        for (const char *a = aug + 1; *a && !r.bad; a++) {
            if (*a == 'R')
                c->fde_enc = (unsigned)u8(&r);
            else if (*a == 'L')
                u8(&r);
            else if (*a == 'P') {
                unsigned e = (unsigned)u8(&r);
                ptr(&r, e & 0x7f, 0); /* (the personality, indirect or not: skipped) */
                r.bad = 0;
            } else if (*a == 'S')
                c->signal = 1;
            else if (*a != 'B')
                break;
        }
        r.p = aend;
    } else if (aug[0]) {
        return -1; /* "eh" and the like: not written by compilers of this century */
    }
    c->insns = r.p;
    c->end = end;
    return r.bad || c->insns > end ? -1 : 0;
}

/* The rule at `ip` from the FDE at `fde` of the object mapped at [lo, hi): 0 (none), else packed. */
/* With `out`, every row of the FDE is emitted there, and *end_of is set to the function's end. */
static uint64_t rule_from_fde(const uint8_t *fde, const uint8_t *lo, const uint8_t *hi, uintptr_t ip, uintptr_t data,
                              struct rows_out *out, uintptr_t *end_of) {
    struct rd r = {fde, lo, hi, 0};
    uint64_t len = un(&r, 4);
    if (len == 0xffffffff) len = un(&r, 8);
    const uint8_t *end = r.p + len, *id_at = r.p;
    uint32_t cie_off = (uint32_t)un(&r, 4);
    if (r.bad || !cie_off || end > hi) return 0;
    struct cie c;
    if (read_cie(id_at - cie_off, lo, hi, &c) != 0) return 0;
    uintptr_t begin = ptr(&r, c.fde_enc, data), range = ptr(&r, c.fde_enc & 0x0f, data);
    if (r.bad || ip < begin || ip - begin >= range) return 0;
    if (c.z) { /* the FDE's augmentation data (an LSDA pointer): skipped */
        uint64_t alen = uleb(&r);
        r.p += alen;
    }
    struct cfa_state init = {{CFA_REG, 0, BP_SAME, 0, 8, -8, 0}, 1}, st;
    struct rd ci = {c.insns, lo, c.end, 0};
    if (run(&ci, &c, 0, UINTPTR_MAX, &init, &init, data, NULL) != 0) return 0;
    st = init;
    struct rd fi = {r.p, lo, end, 0};
    if (out && !c.signal) { /* every row of the function, kept: its other instructions need no parse */
        out->begin = begin;
        out->n = 0;
        out->full = 0;
        run(&fi, &c, begin, UINTPTR_MAX, &st, &init, data, out);
        *end_of = begin + range;
        return out->full ? 0 : rows_rule(out->row, out->n, ip - begin);
    }
    if (run(&fi, &c, begin, ip, &st, &init, data, NULL) != 0) return 0;
    if (c.signal) return 0;
    return rule_of(&st);
}

/* ---- finding the FDE: dl_iterate_phdr, the object's search table ---------------------------- */

struct find {
    uintptr_t ip;
    uint64_t rule;
    int found;            /* the object holding ip was seen */
    struct rows_out *out; /* when set: every row of ip's function, and its range */
    uintptr_t fn_end;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct find *f = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0, hdr = 0;
    int in = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            if (a < lo) lo = a;
            if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
            if ((ph->p_flags & PF_X) && f->ip >= a && f->ip < a + ph->p_memsz) in = 1;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            hdr = a;
        }
    }
    if (!in) return 0;
    f->found = 1;
    if (!hdr) return 1;
    const uint8_t *blo = (const uint8_t *)lo, *bhi = (const uint8_t *)hi;
    struct rd r = {(const uint8_t *)hdr, blo, bhi, 0};
    unsigned version = (unsigned)u8(&r), eh_enc = (unsigned)u8(&r), count_enc = (unsigned)u8(&r),
             table_enc = (unsigned)u8(&r);
    if (version != 1 || table_enc != 0x3b) return 1; /* datarel | sdata4: what linkers write */
    ptr(&r, eh_enc, hdr);
    uint64_t count = ptr(&r, count_enc, hdr);
    if (r.bad || !count || !room(&r, count * 8)) return 1;
    const int32_t *t = (const int32_t *)r.p;
    size_t a = 0, b = count; /* the last entry starting at or before ip */
    while (b - a > 1) {
        size_t m = (a + b) / 2;
        if (hdr + (intptr_t)t[2 * m] <= f->ip)
            a = m;
        else
            b = m;
    }
    if (hdr + (intptr_t)t[2 * a] > f->ip) return 1;
    f->rule = rule_from_fde((const uint8_t *)(hdr + (intptr_t)t[2 * a + 1]), blo, bhi, f->ip, hdr, f->out, &f->fn_end);
    return 1;
}

/* ---- the loader's lock ------------------------------------------------------------------------------
 * dl_iterate_phdr takes the loader's write lock, which is not recursive: a sample that interrupted
 * a thread holding it (the loader inside dlopen or dlclose, or any caller of dl_iterate_phdr)
 * must not call it again. The lock is found at start, inside a dl_iterate_phdr callback — then
 * it is held by the calling thread: the one mutex in the loader's globals (_rtld_global) locked
 * and owned by this thread. A handler reads its word first: taken (by anyone) means no new rule
 * this time; free means dl_iterate_phdr may wait for another thread at most (the interrupted one
 * cannot take it meanwhile). Not found (another C library): the handler never calls
 * dl_iterate_phdr, and only the rules already kept serve. */
struct glibc_mutex { /* the head of glibc's pthread_mutex_t on x86-64 */
    int lock;
    unsigned count;
    int owner;
};
static const struct glibc_mutex *loader_lock;

static int find_loader_lock(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)info, (void)size, (void)arg;
    void *g = lpr_dlsym(RTLD_DEFAULT, "_rtld_global");
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    if (!g || !dladdr1(g, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size) return 1;
    int tid = lpr_sys_gettid(), found = 0;
    const struct glibc_mutex *at = NULL;
    for (size_t off = 0; off + sizeof(pthread_mutex_t) <= sym->st_size; off += 4) {
        const struct glibc_mutex *m = (const struct glibc_mutex *)((char *)g + off);
        if (m->lock != 0 && m->owner == tid) {
            at = m;
            found++;
        }
    }
    if (found == 1) loader_lock = at;
    return 1;
}

static int loader_free(void) { return loader_lock && __atomic_load_n(&loader_lock->lock, __ATOMIC_ACQUIRE) == 0; }

/* ---- the functions seen: their rows, for their other instructions -------------------------------
 * A function's first instruction that samples land on costs a search and a run of its FDE's
 * program; its rows are kept, so the next instructions of it (a loop's, the interpreter's) cost a
 * scan of this table and a binary search. One table for all threads, behind a lock that is only
 * tried: a handler that finds it taken does without (and keeps nothing). */
#define FNS 256         /* functions kept, by address (the one kept longest ago goes) */
#define ROWS (1u << 16) /* their rows (1 MiB, resident), all of them dropped when full */
static struct fn_ent {
    uintptr_t begin, end;
    uint32_t first, n, kept; /* kept: when (fn_clock) */
} fns[FNS];
static uint32_t nfns, fn_clock, rows_used;
static struct row *rows_kept;
static int fns_lock;

/* (a binary search: most instructions a walk meets first belong to no function kept, and a scan
 * of the table for each was a sixth of a PyTorch import's time with stacks) */
static uint64_t fn_rule(uintptr_t ip, int *known) {
    uint32_t lo = 0, hi = nfns; /* the first function beginning after ip */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (fns[mid].begin <= ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo && ip < fns[lo - 1].end) {
        *known = 1;
        return rows_rule(rows_kept + fns[lo - 1].first, fns[lo - 1].n, ip - fns[lo - 1].begin);
    }
    *known = 0;
    return 0;
}

/* Keep the rows just made at rows_kept + rows_used (under the lock), in the table's order. */
static void fn_keep(const struct rows_out *o, uintptr_t end) {
    if (o->full || !o->n) return;
    if (nfns == FNS) { /* the one kept longest ago goes */
        uint32_t old = 0;
        for (uint32_t i = 1; i < nfns; i++)
            if ((int32_t)(fns[i].kept - fns[old].kept) < 0) old = i;
        memmove(&fns[old], &fns[old + 1], (nfns - old - 1) * sizeof fns[0]);
        nfns--;
    }
    uint32_t at = 0;
    while (at < nfns && fns[at].begin < o->begin) at++;
    if (at < nfns && fns[at].begin == o->begin) return; /* (already kept) */
    memmove(&fns[at + 1], &fns[at], (nfns - at) * sizeof fns[0]);
    fns[at] = (struct fn_ent){o->begin, end, rows_used, o->n, fn_clock++};
    rows_used += o->n;
    nfns++;
}

/* The rule at `ip`: from the table of rules, else from the functions seen, else computed (and
 * kept); 0 when there is none. */
static uint64_t rule_at(uintptr_t ip) {
    uint64_t w = rule_get(ip);
    if (w) return w;
    struct find f = {ip, 0, 0, NULL, 0};
    struct rows_out out;
    int locked = rows_kept && !__atomic_exchange_n(&fns_lock, 1, __ATOMIC_ACQUIRE), known = 0;
    if (locked) {
        w = fn_rule(ip, &known);
        if (!known) {
            if (rows_used + ROWS / 4 > ROWS) rows_used = nfns = 0; /* (room for a big function) */
            out = (struct rows_out){rows_kept + rows_used, 0, ROWS - rows_used, 0, 0};
            f.out = &out;
        }
    }
    if (!known) {
        if (_r_debug.r_state != RT_CONSISTENT) { /* the loader is changing its list */
            if (locked) __atomic_store_n(&fns_lock, 0, __ATOMIC_RELEASE);
            return 0;
        }
        if (!loader_free()) { /* held, maybe by the thread interrupted here: waiting would be for ever */
            if (locked) __atomic_store_n(&fns_lock, 0, __ATOMIC_RELEASE);
            return 0;
        }
        LPR_REAL(dl_iterate_phdr)(find_cb, &f);
        if (f.out && f.fn_end) fn_keep(&out, f.fn_end);
        w = f.rule;
        if (!w) w = RULE_NONE; /* no rule, or no object (JIT code): the walk ends there, every time */
    }
    if (locked) __atomic_store_n(&fns_lock, 0, __ATOMIC_RELEASE);
    if (w) rule_put(ip, w);
    return w;
}

/* ---- the thread's stack, and the walk ------------------------------------------------------------ */

/* The mapping of /proc/self/maps that holds `sp`: 0, or -1. Raw reads, a line at a time, into a
 * small buffer: this may run on a signal handler's alternate stack (a few KiB). A line longer
 * than the buffer (a long path) is skipped to its end: its start has the addresses, and those of
 * a stack are never followed by a path that long. */
static int stack_mapping(uintptr_t sp, uintptr_t *lo, uintptr_t *hi) {
    int fd = lpr_sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    char buf[512];
    size_t have = 0;
    int found = -1, skip = 0; /* skip: the rest of a line longer than buf */
    for (;;) {
        long n = lpr_sys_read(fd, buf + have, sizeof buf - have);
        if (n <= 0) break;
        have += (size_t)n;
        size_t start = 0;
        for (size_t i = 0; i < have && found < 0; i++) {
            if (buf[i] != '\n') continue;
            if (skip) {
                skip = 0;
                start = i + 1;
                continue;
            }
            uintptr_t a = 0, b = 0;
            size_t k = start;
            for (; k < i && buf[k] != '-'; k++)
                a = a * 16 + (uintptr_t)(buf[k] <= '9' ? buf[k] - '0' : buf[k] - 'a' + 10);
            for (k++; k < i && buf[k] != ' '; k++)
                b = b * 16 + (uintptr_t)(buf[k] <= '9' ? buf[k] - '0' : buf[k] - 'a' + 10);
            if (sp >= a && sp < b) {
                *lo = a;
                *hi = b;
                found = 0;
            }
            start = i + 1;
        }
        if (found == 0) break;
        memmove(buf, buf + start, have - start);
        have -= start;
        if (have == sizeof buf) have = 0, skip = 1; /* a line longer than the buffer */
    }
    lpr_sys_close(fd);
    return found;
}

#define RESCANS 8 /* a thread whose stack pointer leaves its stack (coroutines): looked up this often */

int lpr_stack_bounds(struct lpr_tls *t, uintptr_t sp) {
    if (sp >= t->stack_lo && sp < t->stack_hi) return 0;
    if (t->stack_scans >= RESCANS || stack_mapping(sp, &t->stack_lo, &t->stack_hi) != 0) {
        t->stack_scans = RESCANS;
        return -1;
    }
    t->stack_scans++;
    return 0;
}

int lpr_walk_context(struct lpr_tls *t, const void *ucv, uint64_t *out, int max, int *whole) {
    int blocked;
    return lpr_walk_frames(t, ucv, out, NULL, NULL, max, whole, &blocked);
}

/* The same, with each frame's CFA (its caller's stack pointer) and the stack word its return
 * address was read from, when `cfas`/`slots` are given (the allocation stacks' cache checks a
 * chain by those words); *blocked: the walk stopped at a frame whose rule could not be looked up
 * just then (the loader busy), not where the stack or its tables end — the same stack walked
 * again later would be longer (an allocation's stack then comes from libunwind). */
int lpr_walk_frames(struct lpr_tls *t, const void *ucv, uint64_t *out, uint64_t *cfas, uint64_t *slots, int max,
                    int *whole, int *blocked) {
    const ucontext_t *uc = ucv;
    return lpr_walk_regs(t, (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], out, cfas, slots, max, whole, blocked, NULL, NULL);
}

/* Do `join`'s frames outside its frame e (entries [0, e): outermost first) all still hold their
 * return addresses (read inside the thread's stack [lo, hi))? Slots read last under the same
 * bounds are inside them: not checked again (a deep stack's outer frames are checked at every
 * capture: a PyTorch import's are 100). */
static int join_holds(const struct lpr_join *join, uint32_t e, uintptr_t lo, uintptr_t hi) {
    if (join->lo == lo && join->hi == hi) {
        for (uint32_t i = 0; i < e; i++)
            if (*(const uintptr_t *)join->slot[i] != join->ra[i]) return 0;
        return 1;
    }
    for (uint32_t i = 0; i < e; i++) {
        uintptr_t a = join->slot[i];
        if (a < lo || a > hi - 8 || (a & 7) || *(const uintptr_t *)a != join->ra[i]) return 0;
    }
    return 1;
}

/* A prefix of `j` that holds at this start (ip, sp inside the stack [lo, hi)): its frames put in
 * out, cfas and slots, and the state after them; its number of frames, or 0. */
static int prefix_serves(const struct lpr_join *j, uintptr_t *ip, uintptr_t *sp, uintptr_t *bp, uintptr_t lo,
                         uintptr_t hi, uint64_t *out, uint64_t *cfas, uint64_t *slots, int max) {
    const uintptr_t sp0 = *sp;
    for (unsigned e = 0; e < LPR_PREFIXES; e++) {
        const struct lpr_prefix *p = &j->pre[e];
        uint32_t n = p->n, i = 0;
        if (!n || p->ip != *ip || (int)n > max || sp0 + (uintptr_t)p->cfa_off[n - 1] > hi) continue;
        while (i < n && *(const uintptr_t *)(sp0 + (uintptr_t)p->slot_off[i]) == p->ra[i]) i++;
        if (i < n) continue;
        uintptr_t nbp = *bp;
        if (p->bp_off != INT32_MIN) {
            uintptr_t a = sp0 + (uintptr_t)(intptr_t)p->bp_off;
            if (a < lo || a > hi - 8) continue;
            nbp = *(const uintptr_t *)a;
        }
        for (i = 0; i < n; i++) {
            out[i] = p->ra[i];
            if (cfas) cfas[i] = sp0 + (uintptr_t)(intptr_t)p->cfa_off[i];
            if (slots) slots[i] = sp0 + (uintptr_t)(intptr_t)p->slot_off[i];
        }
        *ip = p->ra[n - 1];
        *sp = sp0 + (uintptr_t)(intptr_t)p->cfa_off[n - 1];
        *bp = nbp;
        return (int)n;
    }
    return 0;
}

int lpr_walk_regs(struct lpr_tls *t, uintptr_t ip, uintptr_t sp, uintptr_t bp, uint64_t *out, uint64_t *cfas,
                  uint64_t *slots, int max, int *whole, int *blocked, struct lpr_join *join, int *joined) {
    if (joined) *joined = -1;
    if (!rules || lpr_stack_bounds(t, sp) != 0) return -1;
    const uintptr_t lo = t->stack_lo, hi = t->stack_hi, ip0 = ip, sp0 = sp;
    int jj = join ? (int)join->m - 1 : -1; /* (join's innermost frame not below this one's CFA) */
#define LOAD(addr, dst)                                    \
    do {                                                   \
        uintptr_t a_ = (addr);                             \
        if (a_ < lo || a_ > hi - 8 || (a_ & 7)) goto done; \
        dst = *(const uintptr_t *)a_;                      \
    } while (0)
    int n = 0, k = 0;
    *whole = *blocked = 0;
    /* the walker's own frames: a prefix kept, else walked and kept (keeping: while every frame so
     * far is the walker's, with rules of offsets from the stack pointer) */
    int keeping = join && join->own_hi;
    int64_t bp_off = INT32_MIN;
    if (keeping && (n = prefix_serves(join, &ip, &sp, &bp, lo, hi, out, cfas, slots, max)) > 0) keeping = 0, k = 1;
    for (; n < max; k++) {
        uint64_t w = rule_at(k ? ip - 1 : ip); /* a caller: inside its call instruction */
        struct rule r;
        if (!w || w == RULE_NONE) {
            *blocked = !w; /* (0: not looked up now; no rule is RULE_NONE) */
            /* code without unwind tables (JIT output): a hook's walk of the same frames ends here
             * every time, so its stack is as whole as a walk makes it (joined, kept: a node
             * worker's allocations come from JIT code). A sample's stays cut (format.h). */
            if (k && w && join) *whole = 1;
            if (k || !w) break;
            /* the interrupted instruction is in an object, without a rule taken here (a PLT
             * stub): the rule of a function's first instruction, its return address on top */
            r = (struct rule){CFA_REG, 0, BP_SAME, 0, 8, -8, 0};
        } else {
            unpack(w, &r);
        }
        if (r.end) { /* the outermost frame: the stack is whole */
            *whole = 1;
            break;
        }
        uintptr_t cfa;
        if (r.cfa == CFA_DEREF)
            LOAD(bp + (uintptr_t)r.cfa_off, cfa);
        else
            cfa = (r.cfa_rbp ? bp : sp) + (uintptr_t)r.cfa_off;
        if (cfa <= sp || cfa > hi) break; /* a caller's frame lies above its callee's */
        uintptr_t ra, nbp = bp;
        LOAD(cfa + (uintptr_t)r.ra_off, ra);
        if (r.bp == BP_AT_CFA)
            LOAD(cfa + (uintptr_t)r.bp_off, nbp);
        else if (r.bp == BP_AT_RBP)
            LOAD(bp + (uintptr_t)r.bp_off, nbp);
        if (ra < 4096 || ra >> 61) break; /* (no code there; the top bits would read as a frame's tags) */
        if (keeping) {
            if (ra - join->own_lo >= join->own_hi - join->own_lo) { /* the program's: the prefix is whole */
                keeping = 0;
                struct lpr_prefix *p = &join->pre[join->pre_next++ % LPR_PREFIXES];
                if (n && n <= LPR_PREFIX_MAX && cfas && slots) {
                    p->n = 0;
                    p->ip = ip0;
                    p->bp_off = (int32_t)bp_off;
                    for (int i = 0; i < n; i++)
                        p->ra[i] = out[i], p->cfa_off[i] = (int32_t)(cfas[i] - sp0),
                        p->slot_off[i] = (int32_t)(slots[i] - sp0);
                    p->n = (uint32_t)n;
                }
            } else if (r.cfa != CFA_REG || r.cfa_rbp || r.bp == BP_AT_RBP || cfa - sp0 > INT32_MAX) {
                keeping = 0; /* (a frame not of fixed offsets) */
            } else if (r.bp == BP_AT_CFA) {
                bp_off = (int64_t)(cfa - sp0) + r.bp_off;
            }
        }
        if (join) {
            while (jj >= 0 && join->cfa[jj] < cfa) jj--;
            if (jj >= 0 && join->cfa[jj] == cfa && join->ra[jj] == ra && join_holds(join, (uint32_t)jj, lo, hi)) {
                *joined = jj;
                break;
            }
        }
        if (cfas) cfas[n] = cfa;
        if (slots) slots[n] = cfa + (uintptr_t)r.ra_off;
        out[n++] = ra;
        ip = ra;
        sp = cfa;
        bp = nbp;
    }
done:
#undef LOAD
    return n;
}

/* ---- start, and code unloaded ---------------------------------------------------------------------- */

/* The loader's count of objects unloaded so far (every object carries it). */
static int subs_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    *(uint64_t *)arg = size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs ? info->dlpi_subs : 0;
    return 1;
}

int lpr_walk_init(void) {
    if (rules) return 0;
    void *m = lpr_own_map(LP_OWN_WALKER, RULE_SLOTS * sizeof *rules, PROT_READ | PROT_WRITE, MAP_NORESERVE);
    if (!m) return -1;
    lpr_resident(m, 0, RULE_SLOTS_FIRST * sizeof *rules); /* (the rest as the table grows: a fault) */
    void *r = lpr_own_map(LP_OWN_WALKER, ROWS * sizeof(struct row), PROT_READ | PROT_WRITE, MAP_POPULATE);
    if (r) rows_kept = r; /* (without: every instruction's rule computed afresh) */
    lpr_dl_iterate(find_loader_lock, NULL);
    lpr_dl_iterate(subs_cb, &subs_seen);
    rules = m;
    return 0;
}

/* After a dlclose (normal context): if an object went, the rules kept for its addresses go with
 * it — a new generation, so that they no longer match; the slots they hold are emptied once half
 * the table is taken (a handler reading meanwhile finds a slot empty, or its rule not there yet:
 * both are misses). */
void lpr_walk_forget(void) {
    if (!rules) return;
    uint64_t subs = 0;
    lpr_dl_iterate(subs_cb, &subs);
    if (subs == subs_seen) return;
    subs_seen = subs;
    __atomic_fetch_add(&gen, 1, __ATOMIC_ACQ_REL);
    while (__atomic_exchange_n(&fns_lock, 1, __ATOMIC_ACQUIRE)) {} /* (held by a handler for microseconds) */
    rows_used = nfns = 0;
    __atomic_store_n(&fns_lock, 0, __ATOMIC_RELEASE);
    uint32_t mask = __atomic_load_n(&rule_mask, __ATOMIC_RELAXED);
    if (__atomic_load_n(&rules_used, __ATOMIC_RELAXED) < (mask + 1) / 2) return;
    for (uint32_t s = 0; s <= mask; s++) {
        __atomic_store_n(&rules[s].rule, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&rules[s].key, 0, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&rules_used, 0, __ATOMIC_RELAXED);
}
