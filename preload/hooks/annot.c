/* annot.c: the public annotation API (family "annot") — what include/libprof.h resolves at run
 * time: named ranges ("blocks"), marks, counters, thread names, and start/stop/reset.
 *
 * A range is recorded once, when it is popped, as a timed record (start = the push), so ranges of
 * one thread always nest. The stack of open ranges lives in the thread's TLS; pushes deeper than
 * LP_RANGE_DEPTH are counted so that pops stay matched, but are not recorded. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>

#include "hook.h"

static inline void rec_named(struct lpr_tls *t, unsigned kind, uint32_t id, int has_value, uint64_t value) {
    uint64_t *r = lpr_reserve(t, has_value ? 3 : 2);
    if (LP_LIKELY(r != NULL)) {
        r[0] = lpr_word0(kind, lpr_ticks());
        r[1] = id;
        if (has_value) r[2] = value;
        lpr_commit(t, r + (has_value ? 3 : 2));
    }
}

LP_EXPORT void libprof_range_push(const char *name) {
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ANNOT);
    if (!t) return;
    uint32_t d = t->range_depth++;
    if (d < LP_RANGE_DEPTH) {
        t->range_id[d] = name ? lpr_name_id(name) : 0;
        t->range_t0[d] = lpr_ticks();
    }
    lpr_hook_leave(t);
}

LP_EXPORT void libprof_range_pop(void) {
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ANNOT);
    if (!t) return;
    if (t->range_depth > 0) {
        uint32_t d = --t->range_depth;
        if (d < LP_RANGE_DEPTH) {
            uint64_t t0 = t->range_t0[d], t1 = lpr_ticks();
            uint64_t *r = lpr_reserve(t, 3);
            if (LP_LIKELY(r != NULL)) {
                r[0] = lpr_word0_timed(LP_EV_RANGE, t0);
                r[1] = lpr_word1(t0, t1);
                r[2] = t->range_id[d];
                lpr_commit(t, r + 3);
            }
        }
    }
    lpr_hook_leave(t);
}

LP_EXPORT void libprof_mark(const char *name) {
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ANNOT);
    if (!t) return;
    rec_named(t, LP_EV_MARK, name ? lpr_name_id(name) : 0, 0, 0);
    lpr_hook_leave(t);
}

LP_EXPORT void libprof_counter(const char *name, double value) {
    struct lpr_tls *t = lpr_hook_enter(LP_FAM_ANNOT);
    if (!t) return;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    rec_named(t, LP_EV_COUNTER, name ? lpr_name_id(name) : 0, 1, bits);
    lpr_hook_leave(t);
}

/* Names the calling thread the way pthread_setname_np does (the kernel keeps 15 bytes); libprof
 * reads thread names from the kernel, so the trace shows it. */
LP_EXPORT void libprof_thread_name(const char *name) {
    char n[16];
    if (!name) return;
    strncpy(n, name, sizeof n - 1);
    n[sizeof n - 1] = '\0';
    pthread_setname_np(pthread_self(), n);
}

/* Recording control for programs that opt in; see core/control.c for the rules. */
LP_EXPORT void libprof_start(void) { lpr_control_resume(LP_CTL_API, 0); }
LP_EXPORT void libprof_stop(void) { lpr_control_pause(LP_CTL_API, 0); }
LP_EXPORT void libprof_reset(void) { lpr_control_reset(LP_CTL_API); }
