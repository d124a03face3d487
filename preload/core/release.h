/* release.h: which release of a runtime is loaded: tables of layouts by release (release.c). */
#ifndef LPR_RELEASE_H
#define LPR_RELEASE_H

#include <stddef.h>

#include "state.h"

/* __version__ of a Python package's version.py ("" when unreadable). */
LP_HIDDEN void lpr_release_of_package(const char *version_py, char *v, size_t cap);
/* The row of `rows` (n of `stride` bytes, each starting with its "major.minor") release `v` is
 * of ("2.11.0+cu130" is of "2.11"), or -1. */
LP_HIDDEN long lpr_release_row(const char *v, const void *rows, size_t n, size_t stride);
/* The releases of the table, "1.13, 2.11", for a message. */
LP_HIDDEN void lpr_release_list(const void *rows, size_t n, size_t stride, char *out, size_t cap);

#endif
