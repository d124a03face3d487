/* dwarf.h: the source file and line of native code, and the functions inlined there, from an
 * object's DWARF debug information — through elfutils' libdwfl (libdw.so.1), loaded at run time
 * the first time it is needed, in the converter only (libprof-report): never inside a profiled
 * program. Its standard search finds the debug information in the object itself, under
 * /usr/lib/debug (by build-id, by .gnu_debuglink) and, where DEBUGINFOD_URLS is set, through
 * debuginfod (its cache under $XDG_CACHE_HOME or ~/.cache/debuginfod_client). Without libdw, or
 * without debug information, every lookup finds nothing and symbols.c names functions by their
 * symbols alone. */
#ifndef LP_DWARF_H
#define LP_DWARF_H

#include <stdint.h>

struct lp_dwarf; /* one object's */

/* One frame at an address: a function (NULL: the caller's symbol names it), its file and line. */
struct lp_src {
    const char *fn, *file; /* valid until lp_dwarf_close */
    unsigned line;
};

/* The object at `path` (libdwfl reads its build-id: the debug file's name, debuginfod's key).
 * NULL where libdw cannot be loaded, the object cannot be read or no debug information is found. `how` is set to where its debug information
 * came from: "" (none), "the object", "a debug file" or "debuginfod". */
struct lp_dwarf *lp_dwarf_open(const char *path, const char **how);
/* The frames at `pc` (an address of the object's own, as its ELF file has it): the innermost
 * (the function inlined deepest there, at pc's line) first, then each caller it was inlined into
 * (at the line of the call), ending with the function the code belongs to. Up to `max`; 0 when
 * there is no line information. */
unsigned lp_dwarf_frames(struct lp_dwarf *d, uint64_t pc, struct lp_src *out, unsigned max);
/* The symbol holding `pc` by the symbol tables libdwfl found (a stripped object's, in its debug
 * file), or NULL. */
const char *lp_dwarf_symbol(struct lp_dwarf *d, uint64_t pc);
void lp_dwarf_close(struct lp_dwarf *d);

#endif
