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

/* The name of the function containing `addr` ("module+0xOFF" when unknown); `ret`: the address is
 * a return address (looked up at addr - 1, inside the call). The string lives as long as `s`. */
const char *lp_syms_function(struct lp_syms *s, uint64_t addr, int ret);
/* Basename of the object containing `addr`, or "?" */
const char *lp_syms_module(struct lp_syms *s, uint64_t addr);
/* 1 when `addr` belongs to the C library, the C++ runtime, the loader, libunwind or libprof:
 * frames skipped when charging an allocation to a library. */
int lp_syms_is_runtime(struct lp_syms *s, uint64_t addr);

#endif
