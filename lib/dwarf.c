/* dwarf.c: see dwarf.h. libdwfl does the reading and the search; this file loads it (dlopen, so
 * neither libprof.so nor libprof-report needs it to run), reports one object to it at address 0
 * (so its addresses are the ELF file's own), and turns its line table and scopes into frames as
 * `addr2line -f -i` prints them. */
#define _GNU_SOURCE
#include "dwarf.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os.h"

#ifdef LP_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdwfl.h>

/* libdw's functions this file calls, found once */
static struct {
    int tried, ok;
    Dwfl *(*begin)(const Dwfl_Callbacks *);
    void (*end)(Dwfl *);
    void (*report_begin)(Dwfl *);
    Dwfl_Module *(*report_elf)(Dwfl *, const char *, const char *, int, GElf_Addr, bool);
    int (*report_end)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *), void *);
    Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
    Dwarf *(*getdwarf)(Dwfl_Module *, Dwarf_Addr *);
    const char *(*info)(Dwfl_Module *, void ***, Dwarf_Addr *, Dwarf_Addr *, Dwarf_Addr *, Dwarf_Addr *, const char **,
                        const char **);
    Dwarf_Die *(*addrdie)(Dwfl_Module *, Dwarf_Addr, Dwarf_Addr *);
    Dwfl_Line *(*getsrc)(Dwfl_Module *, Dwarf_Addr);
    const char *(*lineinfo)(Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *, Dwarf_Word *);
    int (*getscopes)(Dwarf_Die *, Dwarf_Addr, Dwarf_Die **);
    int (*getscopes_die)(Dwarf_Die *, Dwarf_Die **);
    int (*tag)(Dwarf_Die *);
    Dwarf_Attribute *(*attr_integrate)(Dwarf_Die *, unsigned int, Dwarf_Attribute *);
    const char *(*formstring)(Dwarf_Attribute *);
    int (*formudata)(Dwarf_Attribute *, Dwarf_Word *);
    int (*getsrcfiles)(Dwarf_Die *, Dwarf_Files **, size_t *);
    const char *(*filesrc)(Dwarf_Files *, size_t, Dwarf_Word *, Dwarf_Word *);
    int (*diecu)(Dwarf_Die *, Dwarf_Die *, uint8_t *, uint8_t *);
    Elf *(*dwarf_getelf)(Dwarf *);
    const char *(*addrname)(Dwfl_Module *, GElf_Addr);
    Elf *(*module_getelf)(Dwfl_Module *, GElf_Addr *);
    Dwfl_Callbacks cb;
    char *debuginfo_path;
    void (*libc_free)(void *); /* the C library's, for what libdw allocates */
} dw;

static int dw_load(void) {
    if (dw.tried) return dw.ok;
    dw.tried = 1;
    void *h = lp_os_dlopen_offline("libdw.so.1");
    if (!h) return 0;
    *(void **)&dw.libc_free = lp_os_dlsym(RTLD_DEFAULT, "free");
#define SYM(field, name) (*(void **)&dw.field = lp_os_dlsym(h, name)) != NULL
    dw.ok =
        SYM(begin, "dwfl_begin") && SYM(end, "dwfl_end") && SYM(report_begin, "dwfl_report_begin") &&
        SYM(report_elf, "dwfl_report_elf") && SYM(report_end, "dwfl_report_end") &&
        SYM(addrmodule, "dwfl_addrmodule") && SYM(getdwarf, "dwfl_module_getdwarf") && SYM(info, "dwfl_module_info") &&
        SYM(addrdie, "dwfl_module_addrdie") && SYM(getsrc, "dwfl_module_getsrc") && SYM(lineinfo, "dwfl_lineinfo") &&
        SYM(getscopes, "dwarf_getscopes") && SYM(getscopes_die, "dwarf_getscopes_die") && SYM(tag, "dwarf_tag") &&
        SYM(attr_integrate, "dwarf_attr_integrate") && SYM(formstring, "dwarf_formstring") &&
        SYM(formudata, "dwarf_formudata") && SYM(getsrcfiles, "dwarf_getsrcfiles") && SYM(filesrc, "dwarf_filesrc") &&
        SYM(diecu, "dwarf_diecu") && SYM(dwarf_getelf, "dwarf_getelf") && SYM(addrname, "dwfl_module_addrname") &&
        SYM(module_getelf, "dwfl_module_getelf") && SYM(cb.find_debuginfo, "dwfl_standard_find_debuginfo") &&
        SYM(cb.section_address, "dwfl_offline_section_address") && dw.libc_free;
#undef SYM
    dw.cb.debuginfo_path = &dw.debuginfo_path; /* NULL: the standard path (".debug" and /usr/lib/debug) */
    return dw.ok;
}

struct lp_dwarf {
    Dwfl *dwfl;
    Dwfl_Module *mod;
    char path[16][1024]; /* the last lookup's files joined to their compilation directory */
};

/* `file` as addr2line prints it: a relative one joined to the unit's compilation directory. */
static const char *full_path(struct lp_dwarf *d, unsigned k, Dwarf_Die *cu, const char *file) {
    Dwarf_Attribute a;
    const char *dir =
        file && file[0] != '/' && cu && k < 16 && dw.attr_integrate(cu, DW_AT_comp_dir, &a) ? dw.formstring(&a) : NULL;
    if (!dir || dir[0] != '/') return file; /* (a relative directory: the file as the line table has it) */
    snprintf(d->path[k], sizeof d->path[k], "%s/%s", dir, file);
    return d->path[k];
}

struct lp_dwarf *lp_dwarf_open(const char *path, const char **how) {
    *how = "";
    if (!dw_load()) return NULL;
    struct lp_dwarf *d = lp_os_calloc(1, sizeof *d);
    if (!d || !(d->dwfl = dw.begin(&dw.cb))) {
        lp_os_free(d);
        return NULL;
    }
    dw.report_begin(d->dwfl);
    d->mod = dw.report_elf(d->dwfl, path, path, -1, 0, false);
    dw.report_end(d->dwfl, NULL, NULL);
    Dwarf_Addr bias;
    Dwarf *dwarf = d->mod ? dw.getdwarf(d->mod, &bias) : NULL;
    if (!dwarf) { /* no debug information found anywhere */
        lp_dwarf_close(d);
        return NULL;
    }
    /* where it came from: the object's own ELF, a file found by its name (a build-id or
     * .gnu_debuglink path), else libdwfl's debuginfod client, which names no file */
    const char *main_file = NULL, *debug_file = NULL;
    dw.info(d->mod, NULL, NULL, NULL, NULL, NULL, &main_file, &debug_file);
    *how = dw.dwarf_getelf(dwarf) == dw.module_getelf(d->mod, &bias) ? "the object"
           : debug_file                                              ? "a debug file"
                                                                     : "debuginfod";
    return d;
}

const char *lp_dwarf_symbol(struct lp_dwarf *d, uint64_t pc) { return d ? dw.addrname(d->mod, pc) : NULL; }

void lp_dwarf_close(struct lp_dwarf *d) {
    if (!d) return;
    if (d->dwfl) dw.end(d->dwfl);
    lp_os_free(d);
}

/* A function's name: its linkage name (a C++ one, mangled: symbols.c demangles) or its name,
 * through an inlined instance's abstract origin. */
static const char *die_name(Dwarf_Die *die) {
    Dwarf_Attribute a;
    const char *s = NULL;
    if (dw.attr_integrate(die, DW_AT_linkage_name, &a) || dw.attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
        s = dw.formstring(&a);
    if (!s && dw.attr_integrate(die, DW_AT_name, &a)) s = dw.formstring(&a);
    return s;
}

static int is_function(Dwarf_Die *die) {
    int t = dw.tag(die);
    return t == DW_TAG_subprogram || t == DW_TAG_inlined_subroutine || t == DW_TAG_entry_point;
}

unsigned lp_dwarf_frames(struct lp_dwarf *d, uint64_t pc, struct lp_src *out, unsigned max) {
    if (!d || !max) return 0;
    Dwfl_Line *l = dw.getsrc(d->mod, pc);
    int line = 0;
    const char *file = l ? dw.lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
    if (!file || line <= 0) return 0;
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dw.addrdie(d->mod, pc, &bias), *scopes = NULL;
    int n = cu ? dw.getscopes(cu, pc - bias, &scopes) : 0;
    if (n > 0) { /* the innermost scope's nesting in the DIE tree, as addr2line -i follows it (the
                  * pc's own list can miss the function an inlined instance sits in) */
        Dwarf_Die inner = scopes[0], *nested = NULL;
        int m = dw.getscopes_die(&inner, &nested);
        dw.libc_free(scopes);
        scopes = m > 0 ? nested : NULL;
        n = m > 0 ? m : 0;
        if (m <= 0) dw.libc_free(nested);
    }
    unsigned k = 0;
    out[k] = (struct lp_src){NULL, full_path(d, k, cu, file), (unsigned)line};
    k++;
    for (int i = 0; i < n; i++) {
        if (!is_function(&scopes[i])) continue;
        out[k - 1].fn = die_name(&scopes[i]); /* the function this frame's line is in */
        if (dw.tag(&scopes[i]) != DW_TAG_inlined_subroutine || k == max) break;
        /* inlined: its caller's frame, at the line of the call */
        Dwarf_Attribute a;
        Dwarf_Word cf = 0, cl = 0;
        if (!dw.attr_integrate(&scopes[i], DW_AT_call_file, &a) || dw.formudata(&a, &cf) != 0 ||
            !dw.attr_integrate(&scopes[i], DW_AT_call_line, &a) || dw.formudata(&a, &cl) != 0)
            break;
        Dwarf_Die cudie;
        Dwarf_Files *files = NULL;
        size_t nfiles = 0;
        const char *cfile = NULL;
        if (dw.diecu(&scopes[i], &cudie, NULL, NULL) && dw.getsrcfiles(&cudie, &files, &nfiles) == 0 && cf < nfiles)
            cfile = dw.filesrc(files, cf, NULL, NULL);
        out[k] = (struct lp_src){NULL, cfile ? full_path(d, k, &cudie, cfile) : "?", (unsigned)cl};
        k++;
    }
    dw.libc_free(scopes); /* (libdw's own malloc: this runs in libprof-report only) */
    return k;
}

#else /* built without elfutils' headers: no lines */

struct lp_dwarf *lp_dwarf_open(const char *path, const char **how) {
    (void)path;
    *how = "";
    return NULL;
}
unsigned lp_dwarf_frames(struct lp_dwarf *d, uint64_t pc, struct lp_src *out, unsigned max) {
    (void)d;
    (void)pc;
    (void)out;
    (void)max;
    return 0;
}
const char *lp_dwarf_symbol(struct lp_dwarf *d, uint64_t pc) {
    (void)d;
    (void)pc;
    return NULL;
}
void lp_dwarf_close(struct lp_dwarf *d) { (void)d; }

#endif
