/* ownalloc_dep: a library whose constructor allocates — the first use of ownalloc's built-in
 * allocator, before a preloaded profiler's own constructor has run (see ownalloc.c). */
#include <stdlib.h>

void *ownalloc_dep_block;

__attribute__((constructor)) static void dep_init(void) { ownalloc_dep_block = malloc(64); }
