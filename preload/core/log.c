/* log.c: messages from the preload to the user, always on stderr and prefixed "libprof:".
 *
 * Messages are formatted into a stack buffer and written with one write(2), so they neither
 * allocate nor interleave with the program's own stdio buffering. Warnings are capped: a
 * profiler that floods a program's stderr has changed the program. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lp.h"
#include "sys.h"

#define MAX_WARNINGS 16

int lpr_verbose;
static int warnings;

static void emit(const char *fmt, va_list ap) {
    int saved = errno;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "libprof: ");
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    if (m < 0) m = 0;
    n += m;
    if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    lpr_sys_write(STDERR_FILENO, buf, (size_t)n); /* libprof's own write: not through the hook */
    errno = saved;
}

/* A problem the user should know about; the program carries on. */
void lpr_warn(const char *fmt, ...) {
    if (__atomic_fetch_add(&warnings, 1, __ATOMIC_RELAXED) >= MAX_WARNINGS) return;
    va_list ap;
    va_start(ap, fmt);
    emit(fmt, ap);
    va_end(ap);
}

/* A diagnostic shown only with LIBPROF_VERBOSE=1. */
void lpr_info(const char *fmt, ...) {
    if (!lpr_verbose) return;
    va_list ap;
    va_start(ap, fmt);
    emit(fmt, ap);
    va_end(ap);
}
