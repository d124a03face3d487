/* call.c: the one writer of CALL records (every runtime entry point: threads, locks, dlopen,
 * I/O, processes, waits, BLAS, oneDNN, OpenMP), LIBPROF_MIN_NS, and finding the real functions.
 *
 * Hooks stay thin: they take the two timestamps around the real call and hand the arguments
 * here. Recording is one reservation in the thread's chunk and a copy; no lock, no system call,
 * no allocation, no formatting. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>

#include "lp.h"

uint64_t lpr_min_ticks;

/* LIBPROF_MIN_NS in ticks. With the TSC the rate is measured over 2 ms, once, and only when
 * the option is used. */
void lpr_call_init(uint64_t min_ns) {
    lpr_min_ticks = 0;
    if (min_ns == 0) return;
    if (lpr_clock_kind != LP_CLOCK_TSC) {
        lpr_min_ticks = min_ns;
        return;
    }
    uint64_t m0 = lpr_mono_ns(), k0 = lpr_ticks(), m1, k1;
    do {
        m1 = lpr_mono_ns();
        k1 = lpr_ticks();
    } while (m1 - m0 < 2000000);
    lpr_min_ticks = (uint64_t)((double)min_ns * (double)(k1 - k0) / (double)(m1 - m0));
    if (lpr_min_ticks == 0) lpr_min_ticks = 1;
}

void lpr_call_record(struct lpr_tls *t, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs, const uint64_t *args,
                     const char *str, size_t slen) {
    if (t->guard || !(lpr_gate & (1u << lp_call_family[call]))) return; /* paused meanwhile */
    int saved = errno;
    t->guard = 1;
    lpr_call_write(t, call, t0, t1, nargs, args, str, slen);
    t->guard = 0;
    errno = saved;
}

void lpr_call_write(struct lpr_tls *t, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs, const uint64_t *args,
                    const char *str, size_t slen) {
    lpr_call_write_stack(t, 0, call, t0, t1, nargs, args, str, slen);
}

void lpr_call_record_stack(struct lpr_tls *t, uint32_t stack, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs,
                           const uint64_t *args) {
    if (t->guard || !(lpr_gate & (1u << lp_call_family[call]))) return;
    int saved = errno;
    t->guard = 1;
    lpr_call_write_stack(t, stack, call, t0, t1, nargs, args, NULL, 0);
    t->guard = 0;
    errno = saved;
}

void lpr_call_write_stack(struct lpr_tls *t, uint32_t stack, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs,
                          const uint64_t *args, const char *str, size_t slen) {
    if (t1 && t1 >= t0 && t1 - t0 < lpr_min_ticks && t->state == LP_TLS_ACTIVE) {
        lpr_tbuf_count_short(t, call, t1 - t0);
        t->py_stack = 0;
    } else {
        uint64_t cut = 0;
        if (!str) slen = 0;
        if (!stack && lpr_py_on && !t->late) { /* the Python line calling, read as the call began */
            stack = t->py_stack;
            t->py_stack = 0;
        }
        size_t room = t->late ? (sizeof t->late_rec / 8 - 3 - nargs) * 8 : LP_CALL_MAX_STR;
        if (slen > room) {
            slen = room;
            cut = LP_CALL_STR_CUT;
        }
        unsigned timed = t1 != 0, sw = stack != 0;
        size_t words = sw + 2 + timed + nargs + (slen + 7) / 8;
        uint64_t *r = lpr_reserve(t, (unsigned)words);
        if (LP_LIKELY(r != NULL)) {
            uint64_t *p = r;
            if (sw) *p++ = lpr_word_stack(stack);
            if (timed) {
                *p++ = lpr_word0_timed(LP_EV_CALL, t0);
                *p++ = lpr_word1(t0, t1);
            } else {
                *p++ = lpr_word0(LP_EV_CALL, t0);
            }
            *p++ = lp_call_header(call, nargs, (unsigned)slen) | cut;
            for (unsigned i = 0; i < nargs; i++) *p++ = args[i];
            if (slen) {
                p[(slen - 1) / 8] = 0; /* the padding after the string */
                memcpy(p, str, slen);
            }
            lpr_commit(t, r + words);
        }
    }
}

/* ---- finding the real function -------------------------------------------------------------- */

static int self_marker;

/* A defined symbol `name` in one loaded object, read from its dynamic symbol table (GNU or SysV
 * hash). Not dlopen(RTLD_NOLOAD) + dlsym: that runs the initialisers of an object that is mapped
 * but not yet initialised (a library's constructor calling dlopen while the program starts), out
 * of order — a crash in libGLdispatch's, under a program linked to libtorch. */
static void *elf_symbol(const struct dl_phdr_info *info, const char *name) {
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return NULL;
    const ElfW(Sym) *sym = NULL;
    const char *str = NULL;
    const uint32_t *gnu = NULL, *sysv = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        ElfW(Addr) p = dyn->d_un.d_ptr;
        if (p && p < info->dlpi_addr) p += info->dlpi_addr; /* not relocated by the loader (the vDSO) */
        if (dyn->d_tag == DT_SYMTAB)
            sym = (const void *)p;
        else if (dyn->d_tag == DT_STRTAB)
            str = (const void *)p;
        else if (dyn->d_tag == DT_GNU_HASH)
            gnu = (const void *)p;
        else if (dyn->d_tag == DT_HASH)
            sysv = (const void *)p;
    }
    if (!sym || !str) return NULL;
#define LPR_DEFINED(i)                                                                                    \
    (sym[i].st_shndx != SHN_UNDEF && sym[i].st_value && ELF64_ST_TYPE(sym[i].st_info) != STT_GNU_IFUNC && \
     !strcmp(str + sym[i].st_name, name))
    if (gnu) {
        uint32_t nb = gnu[0], off = gnu[1], bloom = gnu[2], h = 5381;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = h * 33 + *c;
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + bloom), *chain = buckets + nb;
        for (uint32_t i = nb ? buckets[h % nb] : 0; i >= off && i; i++) {
            uint32_t hv = chain[i - off];
            if ((hv | 1) == (h | 1) && LPR_DEFINED(i)) return (void *)(info->dlpi_addr + sym[i].st_value);
            if (hv & 1) break;
        }
    } else if (sysv) {
        uint32_t nb = sysv[0], h = 0;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
            h = (h << 4) + *c;
            uint32_t g = h & 0xf0000000u;
            h ^= g >> 24;
            h &= ~g;
        }
        const uint32_t *bucket = sysv + 2, *chain = bucket + nb;
        for (uint32_t i = nb ? bucket[h % nb] : 0; i; i = chain[i])
            if (LPR_DEFINED(i)) return (void *)(info->dlpi_addr + sym[i].st_value);
    }
#undef LPR_DEFINED
    return NULL;
}

struct scan {
    const char *name;
    ElfW(Addr) self;
    void *found;
};

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct scan *s = arg;
    if (info->dlpi_addr == s->self || !info->dlpi_name || !info->dlpi_name[0]) return 0;
    s->found = elf_symbol(info, s->name);
    return s->found != NULL;
}

void *lpr_resolve(const char *name) {
    uint8_t g = lpr_guard_hold(&lpr_tls); /* what dlsym allocates is libprof's business, not the program's */
    int saved = errno;
    void *f = lpr_dlsym(RTLD_NEXT, name);
    if (!f) {
        /* the failed lookup left a message malloc'ed for dlerror(): take it and let the second
         * call free it now, under the guard, not in the program's next dl call (a free of a
         * block the program never allocated) */
        (void)dlerror();
        (void)dlerror();
        Dl_info self;
        struct scan s = {name, 0, NULL};
        if (dladdr(&self_marker, &self)) {
            s.self = (ElfW(Addr))self.dli_fbase;
            lpr_dl_iterate(scan_one, &s);
            f = s.found;
        }
    }
    errno = saved;
    lpr_guard_restore(&lpr_tls, g);
    return f;
}
