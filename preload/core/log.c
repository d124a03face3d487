/* log.c: libprof's messages to the user, prefixed "libprof:".
 *
 * A profiler writes nothing into the program's streams that the user did not ask for: a test
 * runner that reads its workers' last line of stderr, a program whose captured stderr is its
 * result, must see what they would without libprof. So there are three kinds of message:
 *   - lpr_say: libprof cannot work, or cannot do what a variable asked (not profiling, recording
 *     stops, the trace is lost, a value ignored): on stderr — that line is asked-for;
 *   - lpr_warn, a note: libprof works with less (no Python frames, no CPU samples, a flag
 *     dropped) or has something to report (how long the exit conversion took): kept in the trace
 *     (NOTE strings: metadata.libprof.notes, shown by the report), never on the program's stderr;
 *   - lpr_info: diagnostics asked for with LIBPROF_VERBOSE=1, on stderr (notes too, then).
 * LIBPROF_LOG=FILE sends every kind to that file instead of stderr (appended: one file may serve
 * a whole process tree), notes included.
 *
 * Messages are formatted into a stack buffer and written with one write(2) (the log: opened,
 * written and closed each time, so the program never holds a descriptor of libprof's), so they
 * neither allocate nor interleave with the program's own stdio buffering. Each kind is capped: a
 * profiler that floods a program's stderr has changed the program. A note made before the trace
 * is open waits in a small buffer and is written when it opens (lpr_notes_open). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "state.h"
#include "sys.h"

#define MAX_SAID 16
#define MAX_NOTES 64
#define PENDING 8

int lpr_verbose;
char lpr_log_path[PATH_MAX]; /* LIBPROF_LOG, expanded (config.c); empty: stderr */
static int said, noted;
static struct {
    uint16_t len;
    char text[254];
} pending[PENDING];
static int npending;

/* "libprof: " + the message + "\n" into buf; its length. */
static int format(char *buf, size_t cap, const char *fmt, va_list ap) {
    int n = snprintf(buf, cap, "libprof: ");
    int m = vsnprintf(buf + n, cap - (size_t)n - 1, fmt, ap);
    if (m < 0) m = 0;
    n += m;
    if (n > (int)cap - 2) n = (int)cap - 2;
    buf[n++] = '\n';
    return n;
}

/* To the log the user named, else to stderr. libprof's own writes: not through the hooks. */
void lpr_log_write(const char *buf, size_t n) {
    if (lpr_log_path[0]) {
        int fd = lpr_sys_open(lpr_log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            lpr_sys_write(fd, buf, n);
            lpr_sys_close(fd);
            return;
        }
    }
    lpr_sys_write(STDERR_FILENO, buf, n);
}

/* The spool's writer once the trace is open (lpr_notes_open): log.c sits below the spool. */
static lpr_spool_write_fn spool_write;

/* The note into the trace (a STRING chunk of kind NOTE, without "libprof: " and the newline). */
static int keep(const char *text, size_t len) {
    uint32_t key = LP_STR_NOTE;
    lpr_spool_write_fn w = __atomic_load_n(&spool_write, __ATOMIC_ACQUIRE);
    return w ? w(LP_CHUNK_STRING, 0, &key, sizeof key, text, len) : -1;
}

/* A note: kept in the trace, or for it until it opens. */
static void note(const char *text, size_t len) {
    if (keep(text, len) == 0) return;
    int i = __atomic_fetch_add(&npending, 1, __ATOMIC_RELAXED); /* the trace is not open yet (or no more) */
    if (i < PENDING) {
        size_t k = len < sizeof pending[i].text ? len : sizeof pending[i].text;
        memcpy(pending[i].text, text, k);
        __atomic_store_n(&pending[i].len, (uint16_t)k, __ATOMIC_RELEASE);
    }
}

enum kind { SAY, NOTE, INFO };

/* One message of `kind`: formatted once, then where that kind goes. */
static void message(enum kind kind, const char *fmt, va_list ap) {
    int saved = errno;
    char buf[1024];
    int n = format(buf, sizeof buf, fmt, ap);
    if (kind != NOTE || lpr_log_path[0] || lpr_verbose) lpr_log_write(buf, (size_t)n);
    if (kind == NOTE) note(buf + 9, (size_t)n - 10); /* without "libprof: " and the newline */
    errno = saved;
}

/* libprof cannot work, or cannot do what a variable asked: the user is told. */
void lpr_say(const char *fmt, ...) {
    if (__atomic_fetch_add(&said, 1, __ATOMIC_RELAXED) >= MAX_SAID) return;
    va_list ap;
    va_start(ap, fmt);
    message(SAY, fmt, ap);
    va_end(ap);
}

/* A note: kept in the trace (and the log, or stderr with LIBPROF_VERBOSE=1); never on the
 * program's stderr otherwise. */
void lpr_warn(const char *fmt, ...) {
    if (__atomic_fetch_add(&noted, 1, __ATOMIC_RELAXED) >= MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    message(NOTE, fmt, ap);
    va_end(ap);
}

/* A diagnostic shown only with LIBPROF_VERBOSE=1. */
void lpr_info(const char *fmt, ...) {
    if (!lpr_verbose) return;
    va_list ap;
    va_start(ap, fmt);
    message(INFO, fmt, ap);
    va_end(ap);
}

/* The trace is open (life.c, once the spool is started): notes go into it through `w`, the
 * ones made before it first. */
void lpr_notes_open(lpr_spool_write_fn w) {
    __atomic_store_n(&spool_write, w, __ATOMIC_RELEASE);
    int n = __atomic_exchange_n(&npending, 0, __ATOMIC_ACQ_REL);
    for (int i = 0; i < n && i < PENDING; i++)
        if (pending[i].len) keep(pending[i].text, pending[i].len);
}
