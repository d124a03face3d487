/* unhook.c: take libprof's hottest pass-through hooks out of the program's way when they can
 * never record — libprof off for good (no LIBPROF* asks for a profile), or their family left out
 * of LIBPROF_EVENTS — by pointing the callers' GOT slots back at the C library, so a process pays
 * nothing per call for what it does not profile.
 *
 * Why: a hook that records nothing still costs a few instructions per call, and some programs
 * make millions of such calls (sqlite takes a mutex around every allocation: 0.6 % of its
 * instructions went to the pass-through). A GNU indirect function would decide at binding time,
 * but the dynamic loader refuses one that a library relocated before libprof refers to; so the
 * decision is made here, at libprof's start-up, on the relocations already done.
 *
 * Only slots that hold exactly libprof's hook are rewritten (the slot's value says which hook it
 * is bound to), and lazy PLT slots not bound yet whose symbol's name the program's global lookup
 * resolves to libprof's hook (they would bind to it at their first call); slots inside PT_GNU_RELRO are made
 * writable for the one store and read-only again; other slots are already writable. libprof's
 * own slots and objects loaded later (dlopen) keep the hooks, which simply pass through. A hook
 * may set a condition (LP_UNHOOKABLE_IF): the allocation family is unbound only when its
 * bootstrap pool was never used, since a pool block must always reach libprof's free. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "unhook.h"
#include "real.h"
#include "state.h"

/* The hooks worth unhooking — called often, pure pass-through when their family does not record —
 * are marked so by their families (LP_UNHOOKABLE, hooks/hook.h), in the linker section
 * lpr_unhook, each with its own address through a hidden alias (no relocation, no lookup). */
extern const struct lpr_unhookable __start_lpr_unhook[] __attribute__((weak, visibility("hidden")));
extern const struct lpr_unhookable __stop_lpr_unhook[] __attribute__((weak, visibility("hidden")));

struct target {
    const char *name;
    void *hook, *real;
    int lazy_ok; /* the program's global lookup of `name` finds libprof's hook */
};

static struct target targets[24];
static unsigned ntargets;
static uintptr_t hooks_lo = UINTPTR_MAX, hooks_hi; /* the hooks' addresses lie in [lo, hi] */
static uintptr_t self_base;

/* What relocs needs of one object: where its GOT may be read-only, and, for slots the loader
 * binds lazily (not yet bound: they still point into the object's own PLT), the symbol names. */
struct object {
    uintptr_t base, lo, hi, relro_lo, relro_hi;
    const ElfW(Sym) * symtab;
    const char *strtab;
    const uint32_t *gnu_hash;
    uint32_t sym_of[24]; /* per target: its symbol's index in this object (0: none) */
    uint32_t sym_lo, sym_hi;
};

/* Which of the object's dynamic symbols name the targets. The symbols an object imports are the
 * first ones of its table, below the GNU hash table's first hashed index (only definitions are
 * hashed), so one pass over those finds them. */
static void find_imports(struct object *o) {
    uint32_t nimports = o->gnu_hash[1];
    for (uint32_t k = 1; k < nimports; k++) {
        const char *name = o->strtab + o->symtab[k].st_name;
        for (unsigned i = 0; i < ntargets; i++) {
            if (!targets[i].lazy_ok || targets[i].name[0] != name[0] || strcmp(targets[i].name, name) != 0) continue;
            o->sym_of[i] = k;
            if (k < o->sym_lo) o->sym_lo = k;
            if (k > o->sym_hi) o->sym_hi = k;
        }
    }
}

/* The target whose hook a bound GOT slot holds (the slot's value identifies it: no names). */
static const struct target *bound_to(const void *v) {
    if ((uintptr_t)v < hooks_lo || (uintptr_t)v > hooks_hi) return NULL; /* most slots: one test */
    for (unsigned i = 0; i < ntargets; i++)
        if (targets[i].hook == v) return &targets[i];
    return NULL;
}

static void patch(uintptr_t slot, const struct target *t, uintptr_t relro_lo, uintptr_t relro_hi) {
    void **p = (void **)slot;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = slot & ~(uintptr_t)(page - 1);
    int ro = slot >= relro_lo && slot < relro_hi;
    if (ro && mprotect((void *)start, (size_t)page, PROT_READ | PROT_WRITE) != 0) return; /* keep the hook */
    __atomic_store_n(p, t->real, __ATOMIC_RELEASE); /* one aligned store: callers see one or the other */
    if (ro) mprotect((void *)start, (size_t)page, PROT_READ);
}

/* The target a lazy slot will bind to when first called, by its symbol's name (a program that
 * is not linked with -z now binds its PLT slots at their first call, after libprof's start). */
static const struct target *lazy_target(const struct object *o, const ElfW(Rela) * r, uintptr_t v) {
    uint32_t sym = (uint32_t)ELF64_R_SYM(r->r_info);
    if (sym < o->sym_lo || sym > o->sym_hi || v < o->lo || v >= o->hi) return NULL; /* bound, or not ours */
    for (unsigned i = 0; i < ntargets; i++)
        if (o->sym_of[i] == sym) return &targets[i];
    return NULL;
}

static void relocs(const struct object *o, const ElfW(Rela) * r, size_t bytes) {
    for (size_t i = 0; i < bytes / sizeof *r; i++) {
        unsigned type = (unsigned)ELF64_R_TYPE(r[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
        uintptr_t slot = o->base + r[i].r_offset;
        uintptr_t v = (uintptr_t)__atomic_load_n((void **)slot, __ATOMIC_RELAXED);
        const struct target *t = bound_to((const void *)v);
        if (!t && type == R_X86_64_JUMP_SLOT) t = lazy_target(o, &r[i], v);
        if (t) patch(slot, t, o->relro_lo, o->relro_hi);
    }
}

static int object(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    (void)arg;
    struct object o = {.base = info->dlpi_addr, .lo = UINTPTR_MAX};
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(o.base + ph->p_vaddr);
        if (ph->p_type == PT_LOAD) {
            if (o.base + ph->p_vaddr < o.lo) o.lo = o.base + ph->p_vaddr;
            if (o.base + ph->p_vaddr + ph->p_memsz > o.hi) o.hi = o.base + ph->p_vaddr + ph->p_memsz;
        }
        if (ph->p_type == PT_GNU_RELRO) {
            /* what the loader made read-only: whole pages only (its end is rounded down, so a
             * last partial page stays writable — and must stay so) */
            uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
            o.relro_lo = (o.base + ph->p_vaddr) & ~(page - 1);
            o.relro_hi = (o.base + ph->p_vaddr + ph->p_memsz) & ~(page - 1);
        }
    }
    if (!dyn || o.base == self_base) return 0;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmpsz = 0, relasz = 0;
    /* the loader has already made these addresses absolute in the dynamic section */
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)d->d_un.d_ptr; break;
        case DT_PLTRELSZ: jmpsz = d->d_un.d_val; break;
        case DT_RELA: rela = (const ElfW(Rela) *)d->d_un.d_ptr; break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_SYMTAB: o.symtab = (const ElfW(Sym) *)d->d_un.d_ptr; break;
        case DT_STRTAB: o.strtab = (const char *)d->d_un.d_ptr; break;
        case DT_GNU_HASH: o.gnu_hash = (const uint32_t *)d->d_un.d_ptr; break;
        default: break;
        }
    }
    /* an object whose dynamic section was left relative (read-only .dynamic) is left alone */
    o.sym_lo = UINT32_MAX;
    if ((uintptr_t)o.symtab >= o.base && (uintptr_t)o.strtab >= o.base && (uintptr_t)o.gnu_hash >= o.base)
        find_imports(&o);
    if (jmprel && (uintptr_t)jmprel >= o.base) relocs(&o, jmprel, jmpsz);
    if (rela && (uintptr_t)rela >= o.base) relocs(&o, rela, relasz);
    return 0;
}

void lpr_unhook(uint32_t families) {
#if defined(__x86_64__)
    Dl_info me;
    if (!dladdr((void *)&lpr_unhook, &me)) return;
    self_base = (uintptr_t)me.dli_fbase;
    ntargets = 0;
    for (const struct lpr_unhookable *u = __start_lpr_unhook; u && u < __stop_lpr_unhook; u++) {
        if (families & (1u << u->family)) continue; /* this family records: keep its hook */
        if (u->may && !u->may()) continue;
        void *real = lpr_resolve(u->name);
        if (real && ntargets < sizeof targets / sizeof *targets) {
            /* a lazy slot binds by name: only where that name finds libprof's hook first */
            targets[ntargets++] = (struct target){u->name, u->hook, real, lpr_dlsym(RTLD_DEFAULT, u->name) == u->hook};
            if ((uintptr_t)u->hook < hooks_lo) hooks_lo = (uintptr_t)u->hook;
            if ((uintptr_t)u->hook > hooks_hi) hooks_hi = (uintptr_t)u->hook;
        }
    }
    if (ntargets) lpr_dl_iterate(object, NULL);
#endif
}
