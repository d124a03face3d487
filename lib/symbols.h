/* symbols.h: turning return addresses of a trace's call stacks into function names, offline,
 * against the same files: the trace's module map (path, load bias, build-id), each object's ELF
 * symbol tables (.symtab when present, else .dynsym; a separate debug file under
 * /usr/lib/debug/.build-id/ when installed), C++ names demangled with libstdc++'s
 * __cxa_demangle. Each address is looked up once. */
#ifndef LP_SYMBOLS_H
#define LP_SYMBOLS_H

#include <stdint.h>

#include "reader.h"

struct lp_syms;

/* The trace's symbol table, made on first use and freed with the reader (lp_reader_close): every
 * view and writer of a conversion names its addresses through it, so each object's symbols are
 * read and each address named once. A followed trace's module map grows as the run loads
 * libraries: a table made before the map changed is set aside (the names it gave stay valid
 * until the reader closes) and a new one made. NULL when out of memory. */
struct lp_syms *lp_syms_of(const struct lp_reader *r);

/* The name of the function containing `addr` ("module+0xOFF" when unknown), with its source file
 * and line where the object's debug information has them — "function (file.c:line)", the
 * innermost function inlined there; `ret`: the address is a return address (looked up at
 * addr - 1, inside the call). The string lives as long as `s`. */
const char *lp_syms_function(struct lp_syms *s, uint64_t addr, int ret);
/* `on`: from now until it is called again with 0, another thread names frames through `s` too
 * (lp_syms_function, _frames, _module, _metadata then take a lock); called where no other thread
 * uses `s` (before that thread starts, after it ended). */
void lp_syms_share(struct lp_syms *s, int on);
/* The frames at `addr` where functions were inlined there, innermost first, up to `max`: each
 * "function (file:line)" (lib/dwarf.h), the last the function the code belongs to; 1 (the name
 * lp_syms_function gives) where nothing was inlined or nothing is known. */
unsigned lp_syms_frames(struct lp_syms *s, uint64_t addr, int ret, const char **out, unsigned max);
/* A frame's name split: "function (file:line)" into the function's length, the file (NULL where
 * the name has none) and the line. */
struct lp_src_name {
    size_t fn_len;
    const char *file;
    size_t file_len;
    unsigned line;
};
void lp_syms_split(const char *name, struct lp_src_name *out);
struct lp_json;
/* "symbols": {"lines": {module: "the object" | "a debug file" | "debuginfod"}, "no_lines": [module,
 * ...], "rebuilt": [module, ...]} — of the modules whose frames were named so far: where their
 * source lines came from, those without debug information, those whose file on disk is not the
 * one the program ran (not symbolised from it). Nothing when `s` is NULL. */
void lp_syms_metadata(struct lp_syms *s, struct lp_json *j);
/* Basename of the object containing `addr`, or "?" */
const char *lp_syms_module(struct lp_syms *s, uint64_t addr);
/* 1 when `addr` belongs to the C library, the C++ runtime, the loader, libunwind or libprof:
 * frames skipped when charging an allocation to a library. */
int lp_syms_is_runtime(struct lp_syms *s, uint64_t addr);

#endif
