/* real.c: the C library's functions that libprof calls on its own behalf and also intercepts —
 * the next malloc family (glibc's, or an allocator preloaded after libprof), dlopen, dlclose,
 * pthread_create, pthread_join, sigaction, signal — found once with dlsym(RTLD_NEXT) and called only through
 * this table (lpr_real), never through libprof's own exported names: what libprof does for
 * itself never reaches its hooks, so it never appears in a user's trace. Everything else the
 * core asks of the kernel is a raw system call (sys.h); lib/ reaches both through os.c. Here too:
 * the next definition of a hooked name, wherever it was loaded (lpr_resolve).
 *
 * dlsym may itself call calloc before calloc is known: while the allocation functions are being
 * resolved (lpr_real_resolving), the allocation hooks serve such requests from their bootstrap
 * pool (hooks/alloc.c). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "real.h"
#include "state.h"
#include "sys.h"

struct lpr_real_fns lpr_real;
LP_TLS int lpr_real_resolving;

#define RESOLVE(fn) lpr_real.fn = (__typeof__(lpr_real.fn))lpr_dlsym(RTLD_NEXT, #fn)

void lpr_real_resolve_alloc(void) {
    if (lpr_real.free) return;
    lpr_real_resolving = 1;
    RESOLVE(calloc);
    RESOLVE(malloc);
    RESOLVE(realloc);
    RESOLVE(posix_memalign);
    RESOLVE(aligned_alloc);
    RESOLVE(memalign);
    RESOLVE(valloc);
    RESOLVE(pvalloc);
    RESOLVE(free); /* last: it is the "resolved" flag */
    lpr_real_resolving = 0;
    if (!lpr_real.malloc || !lpr_real.free || !lpr_real.calloc || !lpr_real.realloc) {
        static const char msg[] = "libprof: cannot find the real malloc; aborting\n";
        lpr_sys_write(2, msg, sizeof msg - 1);
        abort();
    }
}

void lpr_real_resolve(void) {
    lpr_real_resolve_alloc();
    if (lpr_real.dlopen) return;
    RESOLVE(dl_iterate_phdr);
    RESOLVE(dlclose);
    RESOLVE(pthread_create);
    RESOLVE(pthread_join);
    RESOLVE(sigaction);
    RESOLVE(signal);
    RESOLVE(dlopen); /* last: it is the "resolved" flag */
}

/* The C library's dlsym (GLIBC_2.34, before that GLIBC_2.2.5), found with dlvsym: libprof's own
 * export is the hook. */
lpr_dlsym_fn lpr_dlsym_real(void) {
    static lpr_dlsym_fn f;
    lpr_dlsym_fn g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
    if (!g) {
        g = (lpr_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!g) g = (lpr_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        __atomic_store_n(&f, g, __ATOMIC_RELEASE);
    }
    return g;
}

void *lpr_dlsym(void *handle, const char *name) {
    lpr_dlsym_fn f = lpr_dlsym_real();
    return f ? f(handle, name) : NULL;
}

/* ---- the loader and fork (real.h) ---------------------------------------------------------------- */

int lpr_loader_users, lpr_loader_gate;

/* A thread about to enter the loader while a fork is under way: after it. */
void lpr_loader_wait(void) {
    while (__atomic_load_n(&lpr_loader_gate, __ATOMIC_ACQUIRE)) LP_SYS(SYS_sched_yield, 0, 0, 0);
}

void lpr_loader_fork_begin(void) {
    __atomic_store_n(&lpr_loader_gate, 1, __ATOMIC_SEQ_CST);
    int own = lpr_tls.in_loader; /* a fork from inside the loader (a constructor's) waits for no one */
    /* bounded: a thread that stays inside the loader (a callback that waits for the forking thread)
     * must not hang the program; 2 s, then the fork goes on as it would without libprof */
    for (int i = 0; i < 2000 && __atomic_load_n(&lpr_loader_users, __ATOMIC_SEQ_CST) > own; i++) {
        struct timespec ts = {0, 1000000};
        LP_SYS(SYS_nanosleep, &ts, NULL, 0);
    }
}

void lpr_loader_fork_end(int child) {
    if (child) __atomic_store_n(&lpr_loader_users, lpr_tls.in_loader, __ATOMIC_RELAXED); /* the others are gone */
    __atomic_store_n(&lpr_loader_gate, 0, __ATOMIC_RELEASE);
}

/* dl_iterate_phdr for libprof and for the program (hooks/dl.c exports it): the thread is marked
 * inside the loader meanwhile, so that a CPU sample taken then (sample.c) does not walk the stack
 * with libunwind, which would take the loader's lock again from a signal handler. */
int lpr_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data) {
    lpr_real_resolve();
    lpr_loader_enter();
    int r = LPR_REAL(dl_iterate_phdr)(cb, data);
    lpr_loader_leave();
    return r;
}

/* A handle on an object already loaded and initialised, through the C library's dlopen
 * (RTLD_NOLOAD: nothing is loaded), not the program's hook: libprof's own lookups. */
void *lpr_dl_handle(const char *path) {
    lpr_real_resolve();
    return LPR_REAL(dlopen) ? LPR_REAL(dlopen)(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
}
void lpr_dl_release(void *h) {
    if (h && LPR_REAL(dlclose)) LPR_REAL(dlclose)(h);
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
