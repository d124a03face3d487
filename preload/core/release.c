/* release.c: which release of a runtime the process has loaded. The hooks of runtimes whose
 * structures libprof reads at fixed offsets (torch.c, executorch.c) keep a table of layouts by
 * release, "major.minor" the first member of each row; a pip wheel says its release in its
 * package's version.py. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "release.h"
#include "state.h"
#include "sys.h"

void lpr_release_of_package(const char *version_py, char *v, size_t cap) {
    char text[1024]; /* not fopen: libprof's own calls skip its hooks */
    v[0] = '\0';
    if (lpr_sys_read_file(version_py, text, sizeof text) < 0) return;
    /* the assignment, at the start of a line (torch 2.x names it in __all__ first) */
    char *q = text;
    while ((q = strstr(q, "__version__")) && q != text && q[-1] != '\n') q++;
    if (q && (q = strpbrk(q, "'\""))) {
        char quote = *q++, *e = strchr(q, quote);
        if (e) snprintf(v, cap, "%.*s", (int)(e - q), q);
    }
}

static const char *row_release(const void *rows, size_t i, size_t stride) {
    return *(const char *const *)((const char *)rows + i * stride);
}

long lpr_release_row(const char *v, const void *rows, size_t n, size_t stride) {
    for (size_t i = 0; i < n; i++) {
        const char *r = row_release(rows, i, stride);
        size_t k = strlen(r);
        if (!strncmp(v, r, k) && (v[k] == '\0' || v[k] == '.' || v[k] == '+')) return (long)i;
    }
    return -1;
}

void lpr_release_list(const void *rows, size_t n, size_t stride, char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && o + 16 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", row_release(rows, i, stride));
}
