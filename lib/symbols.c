/* symbols.c: see symbols.h. A small ELF reader (64-bit, host byte order), enough for symbol
 * tables; every failure (missing file, stripped object, damaged ELF) degrades to module+offset. */
#define _GNU_SOURCE
#include "symbols.h"
#include "os.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dwarf.h"
#include "json.h"
#include "map.h"
#include "vec.h"

struct sym {
    uint64_t value, size;
    const char *name;
};

struct module {
    const struct lp_module_ref *ref;
    const char *base; /* basename */
    int loaded, runtime;
    struct sym *syms;
    size_t nsyms, capsyms;
    void *map[2];
    size_t map_len[2];
    const char *str_end[2]; /* the end of the string table of map[k]'s symbols */
    /* its unwind table (.eh_frame_hdr's, in map[0]): where each function starts, for code that
     * has no symbol (a stripped library's assembly); fde_tried: looked for once */
    const int32_t *fde; /* pairs (initial location, FDE), datarel to fde_base, sorted */
    uint64_t fde_base, nfde;
    int fde_tried;
    /* its source lines (dwarf.h): dwarf_tried, decided once; dwarf_opened, asked of libdw (the
     * object may have DWARF); stale: the file on disk is not the one the program ran (another
     * build-id), so nothing is read from it */
    struct lp_dwarf *dwarf;
    const char *dwarf_how;
    int dwarf_tried, dwarf_opened, stale;
};

struct lp_syms {
    const struct lp_reader *r;
    const struct lp_module_ref *made_of; /* the reader's module map when made, and its length */
    uint32_t made_n;
    struct lp_syms *retired; /* tables set aside when the map grew (lp_syms_of), freed with this one */
    struct module *mods;     /* sorted by lo */
    uint32_t nmods;
    struct lp_map cache;  /* addr*2+ret -> the name's text (in a block of the pool) */
    struct lp_map chains; /* addr*2+ret -> its frames' names, inlined ones first, NUL-separated, "" last */
    /* the names, in blocks that never move: a name returned stays valid as long as `s` (a growing
     * array would move them under the callers that keep them, such as the CPU tables) */
    struct pool_block {
        struct pool_block *next;
        size_t len, cap;
        char text[];
    } * pool;
    char *(*demangle)(const char *, char *, size_t *, int *);
    /* its result's free: the C++ runtime allocates it with whatever `malloc` the process's symbol
     * lookup finds (a program's own allocator, as chromium's), so it goes back to the `free` that
     * lookup finds, never to libprof's own */
    void (*demangled_free)(void *);
    int lines; /* source lines looked for (LIBPROF_LINES) */
    /* another thread names frames too (lp_syms_share): each lookup holds the lock — only then,
     * as naming is a conversion's commonest call */
    int shared;
    int lock; /* (lp_lock) */
};

static inline void syms_lock(struct lp_syms *s) {
    if (s->shared) lp_lock(&s->lock);
}
static inline void syms_unlock(struct lp_syms *s) {
    if (s->shared) lp_unlock(&s->lock);
}

void lp_syms_share(struct lp_syms *s, int on) {
    if (s) s->shared = on;
}

static int cmp_mod(const void *a, const void *b) {
    const struct module *x = a, *y = b;
    return x->ref->m.lo < y->ref->m.lo ? -1 : x->ref->m.lo > y->ref->m.lo;
}

/* Sort by value, stably (aliases keep the order the table gave them, so the name chosen for an
 * address never depends on the sort): an LSD radix sort, a byte a pass, skipping the bytes all
 * values share — a large symbol table (a debug file's) sorts in a few linear passes. Returns -1
 * when out of memory (the table is then left as it was). */
static int sort_syms(struct sym *a, size_t n) {
    if (n < 2) return 0;
    struct sym *tmp = lp_os_malloc(n * sizeof *tmp);
    if (!tmp) return -1;
    uint64_t all_or = 0, all_and = ~UINT64_C(0);
    for (size_t i = 0; i < n; i++) {
        all_or |= a[i].value;
        all_and &= a[i].value;
    }
    struct sym *src = a, *dst = tmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if ((((all_or ^ all_and) >> shift) & 0xff) == 0) continue; /* every value has this byte */
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((src[i].value >> shift) & 0xff) + 1]++;
        for (unsigned b = 1; b < 257; b++) count[b] += count[b - 1];
        for (size_t i = 0; i < n; i++) dst[count[(src[i].value >> shift) & 0xff]++] = src[i];
        struct sym *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
    lp_os_free(tmp);
    return 0;
}

static const char *const runtime_prefixes[] = {"libc.so", "libc-",    "libstdc++",  "ld-linux", "ld-",     "libunwind",
                                               "libprof", "libgcc_s", "libpthread", "libm.so",  "libdl.so"};

static struct lp_syms *syms_new(const struct lp_reader *r) {
    struct lp_syms *s = lp_os_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->r = r;
    s->made_of = r->modules;
    s->made_n = r->nmodules;
    s->mods = lp_os_calloc(r->nmodules + 1, sizeof *s->mods);
    if (!s->mods) {
        lp_os_free(s);
        return NULL;
    }
    for (uint32_t i = 0; i < r->nmodules; i++) {
        const struct lp_module_ref *m = &r->modules[i];
        int dup = 0; /* written twice (fork child, full seen-table): keep one */
        for (uint32_t j = 0; j < s->nmods && !dup; j++)
            dup = s->mods[j].ref->m.lo == m->m.lo && s->mods[j].ref->m.hi == m->m.hi;
        if (dup) continue;
        struct module *mm = &s->mods[s->nmods++];
        mm->ref = m;
        const char *b = m->path;
        for (uint32_t k = 0; k < m->m.path_len; k++)
            if (m->path[k] == '/') b = m->path + k + 1;
        size_t blen = (size_t)(m->path + m->m.path_len - b);
        char *copy = lp_os_malloc(blen + 1);
        if (copy) {
            memcpy(copy, b, blen);
            copy[blen] = '\0';
        }
        mm->base = copy ? copy : "?";
        for (size_t k = 0; k < sizeof runtime_prefixes / sizeof *runtime_prefixes; k++)
            if (!strncmp(mm->base, runtime_prefixes[k], strlen(runtime_prefixes[k]))) mm->runtime = 1;
    }
    lp_sort(s->mods, s->nmods, sizeof *s->mods, cmp_mod);
    s->demangle = (char *(*)(const char *, char *, size_t *, int *))lp_os_dlsym(RTLD_DEFAULT, "__cxa_demangle");
    s->demangled_free = (void (*)(void *))lp_os_dlsym(RTLD_DEFAULT, "free");
    const char *lines = getenv("LIBPROF_LINES"); /* 0: functions alone (lib/vars.h) */
    s->lines = !(lines && !strcmp(lines, "0"));
    if (!s->demangle) {
        void *h = lp_os_dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (h) s->demangle = (char *(*)(const char *, char *, size_t *, int *))lp_os_dlsym(h, "__cxa_demangle");
    }
    return s;
}

static void syms_free(struct lp_syms *s) {
    if (!s) return;
    syms_free(s->retired);
    for (uint32_t i = 0; i < s->nmods; i++) {
        struct module *m = &s->mods[i];
        if (m->base && strcmp(m->base, "?")) lp_os_free((void *)m->base);
        lp_os_free(m->syms);
        lp_dwarf_close(m->dwarf);
        for (int k = 0; k < 2; k++)
            if (m->map[k]) lp_os_munmap(m->map[k], m->map_len[k]);
    }
    lp_os_free(s->mods);
    for (struct pool_block *b = s->pool, *next; b; b = next) {
        next = b->next;
        lp_os_free(b);
    }
    lp_map_free(&s->cache);
    lp_map_free(&s->chains);
    lp_os_free(s);
}

struct lp_syms *lp_syms_of(const struct lp_reader *r) {
    struct lp_reader *w = (struct lp_reader *)r; /* (the reader's one cache: the table is not the trace) */
    struct lp_syms *s = w->syms;
    if (s && s->made_of == r->modules && s->made_n == r->nmodules) return s;
    struct lp_syms *n = syms_new(r);
    if (!n) return NULL;
    n->retired = s; /* its modules may be gone (the map moved): only its names are kept */
    w->syms = n;
    w->syms_free = syms_free;
    return n;
}

static struct module *module_of(struct lp_syms *s, uint64_t addr) {
    uint32_t lo = 0, hi = s->nmods;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (s->mods[mid].ref->m.lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (uint32_t i = lo; i-- > 0;) { /* the nearest module starting below; ranges rarely nest */
        if (addr < s->mods[i].ref->m.hi) return &s->mods[i];
        if (lo - i > 4) break;
    }
    return NULL;
}

/* Map `path` and add its function symbols (.symtab, else .dynsym) to m. Returns 0 or -1. */
static int load_elf(struct module *m, const char *path, int slot) {
    /* O_NONBLOCK: a damaged trace may name a FIFO; regular files ignore the flag */
    int fd = lp_os_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        lp_os_close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    const uint8_t *d = lp_os_mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    lp_os_close(fd);
    if (d == MAP_FAILED) return -1;
    m->map[slot] = (void *)d;
    m->map_len[slot] = len;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)d;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > len ||
        (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len - eh->e_shoff)
        return -1;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(d + eh->e_shoff);
    int pick = -1;
    for (int want = SHT_SYMTAB; want >= SHT_SYMTAB && pick < 0; want = want == SHT_SYMTAB ? SHT_DYNSYM : -1)
        for (unsigned i = 0; i < eh->e_shnum; i++)
            if (sh[i].sh_type == (unsigned)want) {
                pick = (int)i;
                break;
            }
    if (pick < 0) return -1;
    const Elf64_Shdr *sym = &sh[pick];
    if (sym->sh_link >= eh->e_shnum) return -1;
    const Elf64_Shdr *str = &sh[sym->sh_link];
    if (sym->sh_offset > len || sym->sh_size > len - sym->sh_offset || str->sh_offset > len ||
        str->sh_size > len - str->sh_offset || sym->sh_entsize != sizeof(Elf64_Sym))
        return -1;
    size_t n = sym->sh_size / sizeof(Elf64_Sym);
    const Elf64_Sym *ss = (const Elf64_Sym *)(d + sym->sh_offset);
    const char *strs = (const char *)d + str->sh_offset;
    if (LP_RESERVE(m->syms, m->capsyms, m->nsyms + n) != 0) return -1;
    struct sym *out = m->syms;
    /* (a name is checked where it is used, name_ok: the string table is not read here — a
     * PyTorch library's is 80 MB, and reading it all would make it all resident) */
    for (size_t i = 0; i < n; i++) {
        unsigned type = ELF64_ST_TYPE(ss[i].st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || ss[i].st_value == 0 || ss[i].st_name >= str->sh_size)
            continue;
        out[m->nsyms++] = (struct sym){ss[i].st_value, ss[i].st_size, strs + ss[i].st_name};
    }
    m->str_end[slot] = strs + str->sh_size;
    /* the symbols are copied: their table's pages need not stay (a file's: read again if need be) */
    uintptr_t a = ((uintptr_t)ss + 4095) & ~(uintptr_t)4095, b = ((uintptr_t)ss + sym->sh_size) & ~(uintptr_t)4095;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
    return 0;
}

/* Does the symbol name at `name` end inside its string table? */
static int name_ok(const struct module *m, const char *name) {
    for (int k = 0; k < 2; k++)
        if (m->map[k] && name >= (const char *)m->map[k] && name < m->str_end[k])
            return memchr(name, '\0', (size_t)(m->str_end[k] - name)) != NULL;
    return 0;
}

/* Does the file mapped in slot k carry another build-id than the one recorded at run time? (No
 * build-id on either side: not known to differ.) */
static int stale(const struct module *m, int k) {
    const uint8_t *d = m->map[k];
    size_t len = m->map_len[k];
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)d;
    if (!d || !m->ref->m.build_id_len || eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > len ||
        (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len - eh->e_phoff)
        return 0;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(d + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_offset > len || ph[i].p_filesz > len - ph[i].p_offset) continue;
        const uint8_t *n = d + ph[i].p_offset, *end = n + ph[i].p_filesz;
        while (end - n >= 12) {
            uint32_t nsz, dsz, type;
            memcpy(&nsz, n, 4);
            memcpy(&dsz, n + 4, 4);
            memcpy(&type, n + 8, 4);
            size_t at = 12 + ((nsz + 3u) & ~3u);
            if (nsz > (size_t)(end - n) || dsz > (size_t)(end - n) || at + dsz > (size_t)(end - n)) break;
            if (type == NT_GNU_BUILD_ID && nsz == 4 && !memcmp(n + 12, "GNU", 4))
                return dsz != m->ref->m.build_id_len || memcmp(n + at, m->ref->build_id, dsz) != 0;
            n += at + ((dsz + 3u) & ~3u);
        }
    }
    return 0;
}

/* The section named `name` of the file mapped in slot k: its bytes and size, or NULL. */
static const char *section(const struct module *m, int k, const char *name, size_t *size) {
    const uint8_t *d = m->map[k];
    size_t len = m->map_len[k];
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)d;
    if (!d || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > len ||
        (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len - eh->e_shoff || eh->e_shstrndx >= eh->e_shnum)
        return 0;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(d + eh->e_shoff), *str = &sh[eh->e_shstrndx];
    if (str->sh_offset > len || str->sh_size > len - str->sh_offset) return 0;
    size_t n = strlen(name) + 1;
    for (unsigned i = 0; i < eh->e_shnum; i++)
        if (sh[i].sh_name < str->sh_size && str->sh_size - sh[i].sh_name >= n &&
            !memcmp(d + str->sh_offset + sh[i].sh_name, name, n)) {
            if (sh[i].sh_type == SHT_NOBITS || sh[i].sh_offset > len || sh[i].sh_size > len - sh[i].sh_offset)
                return NULL;
            *size = sh[i].sh_size;
            return (const char *)d + sh[i].sh_offset;
        }
    return NULL;
}

/* Is the debug file m's .gnu_debuglink names there, where libdwfl looks (beside the object, in
 * its .debug/, under /usr/lib/debug)? */
static int debuglink_found(const struct module *m) {
    size_t n = 0;
    const char *link = section(m, 0, ".gnu_debuglink", &n);
    if (!link || !memchr(link, '\0', n)) return 0;
    char dir[4200], path[8500];
    snprintf(dir, sizeof dir, "%.*s", (int)m->ref->m.path_len, m->ref->path);
    char *slash = strrchr(dir, '/');
    if (!slash) return 0;
    *slash = '\0';
    const char *at[3] = {"%s/%s", "%s/.debug/%s", "/usr/lib/debug%s/%s"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, at[i], dir, link);
        if (access(path, R_OK) == 0) return 1;
    }
    return 0;
}

/* Could libdwfl find debug information for m? Its debug file by build-id was found, its file has
 * DWARF or names a debug file (.gnu_debuglink), or a debuginfod server may have it. Asked before
 * libdw is loaded at all: a trace of objects without any is converted as fast as without lines. */
static int may_have_dwarf(const struct module *m) {
    const char *urls = getenv("DEBUGINFOD_URLS");
    size_t n;
    return m->map[1] || (urls && *urls && m->ref->m.build_id_len) || section(m, 0, ".debug_info", &n) ||
           debuglink_found(m);
}

static void load(struct module *m) {
    m->loaded = 1;
    const struct lp_module_ref *r = m->ref;
    char path[4200];
    /* a separate debug file, by build-id, has the static functions a stripped object lacks */
    if (r->m.build_id_len >= 2) {
        int o = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", r->build_id[0]);
        for (unsigned i = 1; i < r->m.build_id_len && o < (int)sizeof path - 8; i++)
            o += snprintf(path + o, sizeof path - (size_t)o, "%02x", r->build_id[i]);
        snprintf(path + o, sizeof path - (size_t)o, ".debug");
        load_elf(m, path, 1);
    }
    snprintf(path, sizeof path, "%.*s", (int)r->m.path_len, r->path);
    if (m->nsyms == 0 && load_elf(m, path, 0) == 0 && stale(m, 0)) {
        m->stale = 1; /* rebuilt since the run: its symbols would name the wrong code */
        m->nsyms = 0;
    }
    if (m->nsyms && sort_syms(m->syms, m->nsyms) != 0) m->nsyms = 0; /* no memory: module+offset */
}

/* The unwind table of module m's file (PT_GNU_EH_FRAME): every function the compiler or assembler
 * described for unwinding has an entry, symbol or not. Only the usual encoding (datarel sdata4
 * pairs) is read; anything else leaves the module without one. */
static void fde_load(struct module *m) {
    m->fde_tried = 1;
    if (!m->map[0]) {
        char path[4200];
        snprintf(path, sizeof path, "%.*s", (int)m->ref->m.path_len, m->ref->path);
        int fd = lp_os_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
        struct stat st;
        if (fd < 0) return;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
            lp_os_close(fd);
            return;
        }
        void *d = lp_os_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        lp_os_close(fd);
        if (d == MAP_FAILED) return;
        m->map[0] = d;
        m->map_len[0] = (size_t)st.st_size;
    }
    const uint8_t *d = m->map[0];
    size_t len = m->map_len[0];
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)d;
    if (len < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > len ||
        (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len - eh->e_phoff)
        return;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(d + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_GNU_EH_FRAME || ph[i].p_offset > len || ph[i].p_filesz > len - ph[i].p_offset ||
            ph[i].p_filesz < 12)
            continue;
        const uint8_t *h = d + ph[i].p_offset;
        /* version 1; eh_frame_ptr (any 4-byte encoding); fde_count udata4; table datarel sdata4 */
        if (h[0] != 1 || (h[1] & 0x0f) != 0x0b || h[2] != 0x03 || h[3] != 0x3b) return;
        uint32_t n;
        memcpy(&n, h + 8, 4);
        if ((uint64_t)n * 8 > ph[i].p_filesz - 12) return;
        m->fde = (const int32_t *)(h + 12);
        m->nfde = n;
        m->fde_base = ph[i].p_vaddr;
        return;
    }
}

/* Where the function holding `v` (an address in the module's own terms) starts by its unwind
 * table; 0 when the table has none below it. */
static uint64_t fde_start(struct module *m, uint64_t v) {
    if (!m->fde_tried) fde_load(m);
    size_t lo = 0, hi = m->nfde;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->fde_base + (uint64_t)(int64_t)m->fde[2 * mid] <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? m->fde_base + (uint64_t)(int64_t)m->fde[2 * (lo - 1)] : 0;
}

/* `n` bytes of `text` copied into the pool, kept in `map` under `key`; NULL when out of memory. */
static const char *pool_keep(struct lp_syms *s, struct lp_map *map, uint64_t key, const char *text, size_t n) {
    struct pool_block *b = s->pool;
    if (!b || b->cap - b->len < n) {
        size_t cap = n > 65536 - sizeof *b ? n : 65536 - sizeof *b;
        if (!(b = lp_os_malloc(sizeof *b + cap))) return NULL;
        *b = (struct pool_block){s->pool, 0, cap};
        s->pool = b;
    }
    char *at = memcpy(b->text + b->len, text, n);
    b->len += n;
    lp_map_put(map, key, (uint64_t)(uintptr_t)at, NULL);
    return at;
}

static const char *intern(struct lp_syms *s, uint64_t key, const char *text) {
    const char *at = pool_keep(s, &s->cache, key, text, strlen(text) + 1);
    return at ? at : "?";
}

/* A chain of names (NUL-separated, an empty one last: `n` bytes in all) kept under `key`. */
static void intern_chain(struct lp_syms *s, uint64_t key, const char *chain, size_t n) {
    pool_keep(s, &s->chains, key, chain, n);
}

/* A Python frame: "qualname (file:line)". */
static const char *python_frame(struct lp_syms *s, uint64_t w) {
    uint64_t off;
    if (lp_map_get(&s->cache, w, &off)) return (const char *)(uintptr_t)off;
    uint32_t id = LP_PYFRAME_ID(w);
    if (w == LP_FRAME_ELIDED) return "…"; /* native frames left out (the depth asked) */
    const struct lp_pycode_ref *c = id < s->r->npycodes && s->r->pycodes[id].name ? &s->r->pycodes[id] : NULL;
    char buf[2200];
    if (c)
        snprintf(buf, sizeof buf, "%.*s (%.*s:%u)", (int)(c->name_len > 1000 ? 1000 : c->name_len), c->name,
                 (int)(c->file_len > 1000 ? 1000 : c->file_len), c->file, LP_PYFRAME_LINE(w));
    else
        snprintf(buf, sizeof buf, "python#%u (?:%u)", id, LP_PYFRAME_LINE(w));
    return intern(s, w, buf);
}

/* C++ names demangled ("name@@GLIBC_2.2.5" cut at the version, as .symtab spells them) into buf. */
static void demangled(struct lp_syms *s, const char *name, char *buf, size_t len) {
    char *dem = NULL;
    int status = -1;
    if (s->demangle && name[0] == '_' && name[1] == 'Z') dem = s->demangle(name, NULL, NULL, &status);
    snprintf(buf, len, "%s", dem && status == 0 ? dem : name);
    if (dem && s->demangled_free) s->demangled_free(dem);
    char *ver = strchr(buf, '@');
    if (ver && ver != buf) *ver = '\0';
}

/* The function holding v (module m's own address) by m's symbols (else by those of the debug
 * file its source lines came from: a stripped object's), into buf. */
static void by_symbol(struct lp_syms *s, struct module *m, uint64_t v, char *buf, size_t len) {
    const struct sym *best = NULL;
    size_t lo = 0, hi = m->nsyms;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->syms[mid].value <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0) {
        const struct sym *c = &m->syms[lo - 1];
        /* inside its size, or (size unknown) the nearest symbol below */
        if (v < c->value + c->size || c->size == 0)
            best = c;
        else if (lo >= 2 && m->syms[lo - 2].value == c->value && v < m->syms[lo - 2].value + m->syms[lo - 2].size)
            best = &m->syms[lo - 2];
    }
    if (best && !name_ok(m, best->name)) best = NULL; /* (a damaged file's) */
    const char *debug = best ? NULL : lp_dwarf_symbol(m->dwarf, v);
    if (best) {
        demangled(s, best->name, buf, len);
    } else if (debug) {
        demangled(s, debug, buf, len);
    } else if (m->stale) {
        snprintf(buf, len, "%s+0x%llx (rebuilt since the run)", m->base, (unsigned long long)v);
    } else {
        /* no symbol: the function its unwind table says it is in ("+0x… (no symbol)", one row
         * for all of its instructions), else its page of the library */
        uint64_t start = fde_start(m, v);
        if (start)
            snprintf(buf, len, "%s+0x%llx (no symbol)", m->base, (unsigned long long)start);
        else
            snprintf(buf, len, "%s+0x%llx.. (no symbol, by page)", m->base, (unsigned long long)(v & ~UINT64_C(0xfff)));
    }
}

#define MAX_INLINED 16

/* Name address `addr` (key `key` in the caches): the innermost frame's name is returned and
 * cached; its frames' names, inlined ones first, go into the chains. */
static const char *name_native(struct lp_syms *s, uint64_t addr, int ret, uint64_t key) {
    uint64_t at = ret && addr ? addr - 1 : addr;
    struct module *m = module_of(s, at);
    char buf[1024];
    if (!m) {
        snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)addr);
        return intern(s, key, buf);
    }
    if (!m->loaded) load(m);
    uint64_t v = at - m->ref->m.base;
    /* its source lines, where it has them — but the C library's, the C++ runtime's, the loader's
     * and libprof's own: frames of code the user does not write, whose debug information (a
     * distribution's compressed debug file: libc's inflates to ~40 MB) would cost more than the
     * rest of the conversion */
    if (!m->dwarf_tried && !m->stale && s->lines && !m->runtime) {
        m->dwarf_tried = 1; /* (once a module: asking looks for debug files on the disk) */
        if ((m->dwarf_opened = may_have_dwarf(m))) {
            char path[4200];
            snprintf(path, sizeof path, "%.*s", (int)m->ref->m.path_len, m->ref->path);
            m->dwarf = lp_dwarf_open(path, &m->dwarf_how);
        }
    }
    by_symbol(s, m, v, buf, sizeof buf);
    struct lp_src src[MAX_INLINED];
    unsigned n = lp_dwarf_frames(m->dwarf, v, src, MAX_INLINED);
    if (!n) return intern(s, key, buf);
    /* "function (file:line)" for each frame, the innermost first; the outermost named by its
     * symbol where the debug information gives no name */
    char chain[4096], one[1024 + 512];
    size_t o = 0;
    const char *first = NULL;
    for (unsigned i = 0; i < n; i++) {
        char fn[1024];
        if (src[i].fn)
            demangled(s, src[i].fn, fn, sizeof fn);
        else
            snprintf(fn, sizeof fn, "%s", buf);
        int k = snprintf(one, sizeof one, "%s (%s:%u)", fn, src[i].file, src[i].line);
        if (k < 0 || o + (size_t)k + 2 > sizeof chain) break;
        memcpy(chain + o, one, (size_t)k + 1);
        if (!first) first = chain + o;
        o += (size_t)k + 1;
    }
    if (!first) return intern(s, key, buf);
    chain[o++] = '\0';
    const char *inner = intern(s, key, first);
    if (o > strlen(first) + 2) intern_chain(s, key, chain, o); /* inlined frames: the chain too */
    return inner;
}

static const char *function_of(struct lp_syms *s, uint64_t addr, int ret) {
    if (addr & LP_PYFRAME_BIT) return python_frame(s, addr);
    uint64_t key = addr * 2 + (ret != 0) + 2, off;
    if (lp_map_get(&s->cache, key, &off)) return (const char *)(uintptr_t)off;
    return name_native(s, addr, ret, key);
}

const char *lp_syms_function(struct lp_syms *s, uint64_t addr, int ret) {
    syms_lock(s);
    const char *name = function_of(s, addr, ret);
    syms_unlock(s);
    return name;
}

unsigned lp_syms_frames(struct lp_syms *s, uint64_t addr, int ret, const char **out, unsigned max) {
    if (!max) return 0;
    syms_lock(s);
    out[0] = function_of(s, addr, ret);
    uint64_t off;
    unsigned n = 0;
    if ((addr & LP_PYFRAME_BIT) || !lp_map_get(&s->chains, addr * 2 + (ret != 0) + 2, &off))
        n = 1;
    else
        for (const char *p = (const char *)(uintptr_t)off; *p && n < max; p += strlen(p) + 1) out[n++] = p;
    syms_unlock(s);
    return n;
}

void lp_syms_split(const char *name, struct lp_src_name *out) {
    size_t n = strlen(name);
    *out = (struct lp_src_name){n, NULL, 0, 0};
    if (n < 6 || name[n - 1] != ')') return;
    const char *open = NULL; /* the last " (" */
    for (const char *p = name + n - 2; p > name; p--)
        if (p[0] == '(' && p[-1] == ' ') {
            open = p;
            break;
        }
    const char *colon = open ? memrchr(open, ':', (size_t)(name + n - open)) : NULL;
    if (!colon || colon[1] < '0' || colon[1] > '9') return;
    for (const char *p = colon + 1; p < name + n - 1; p++)
        if (*p < '0' || *p > '9') return;
    out->fn_len = (size_t)(open - 1 - name);
    out->file = open + 1;
    out->file_len = (size_t)(colon - open - 1);
    out->line = (unsigned)strtoul(colon + 1, NULL, 10);
}

void lp_syms_metadata(struct lp_syms *s, struct lp_json *j) {
    if (!s) return;
    syms_lock(s);
    lp_json_kobject(j, "symbols");
    lp_json_kobject(j, "lines");
    for (uint32_t i = 0; i < s->nmods; i++)
        if (s->mods[i].dwarf) lp_json_ks(j, s->mods[i].base, s->mods[i].dwarf_how, strlen(s->mods[i].dwarf_how));
    lp_json_object_end(j);
    lp_json_karray(j, "no_lines");
    for (uint32_t i = 0; i < s->nmods; i++)
        if (s->mods[i].dwarf_opened && !s->mods[i].dwarf && !s->mods[i].stale)
            lp_json_str(j, s->mods[i].base, strlen(s->mods[i].base));
    lp_json_array_end(j);
    lp_json_karray(j, "rebuilt");
    for (uint32_t i = 0; i < s->nmods; i++)
        if (s->mods[i].stale) lp_json_str(j, s->mods[i].base, strlen(s->mods[i].base));
    lp_json_array_end(j);
    lp_json_object_end(j);
    syms_unlock(s);
}

static const char *module_name(struct lp_syms *s, uint64_t addr) {
    if (addr == LP_FRAME_ELIDED) return "…";
    if (addr & LP_PYFRAME_BIT) { /* the Python file's base name */
        uint32_t id = LP_PYFRAME_ID(addr);
        const struct lp_pycode_ref *c = id < s->r->npycodes && s->r->pycodes[id].file ? &s->r->pycodes[id] : NULL;
        if (!c) return "python";
        uint64_t key = UINT64_C(1) << 62 | id, off; /* below the Python keys, above every address's */
        if (lp_map_get(&s->cache, key, &off)) return (const char *)(uintptr_t)off;
        const char *b = c->file, *end = c->file + c->file_len;
        for (const char *p = c->file; p < end; p++)
            if (*p == '/') b = p + 1;
        char buf[1100];
        snprintf(buf, sizeof buf, "%.*s", (int)(end - b > 1000 ? 1000 : end - b), b);
        return intern(s, key, buf);
    }
    struct module *m = module_of(s, addr ? addr - 1 : addr);
    return m ? m->base : "?";
}

const char *lp_syms_module(struct lp_syms *s, uint64_t addr) {
    syms_lock(s);
    const char *name = module_name(s, addr);
    syms_unlock(s);
    return name;
}

int lp_syms_is_runtime(struct lp_syms *s, uint64_t addr) {
    if (addr & LP_PYFRAME_BIT) return 0;
    struct module *m = module_of(s, addr ? addr - 1 : addr); /* (the modules' table never changes) */
    return m ? m->runtime : 0;
}
