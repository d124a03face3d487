/* call.c: the one writer of CALL records (every runtime entry point: threads, locks, dlopen,
 * I/O, processes, waits, BLAS, oneDNN, OpenMP) and LIBPROF_MIN_NS.
 *
 * Hooks stay thin: they take the two timestamps around the real call and hand the arguments
 * here. Recording is one reservation in the thread's chunk and a copy; no lock, no system call,
 * no allocation, no formatting. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>

#include "call.h"
#include "clock.h"
#include "state.h"
#include "tbuf.h"

uint64_t lpr_min_ticks;

/* LIBPROF_MIN_NS in ticks. With the TSC the rate is measured over 2 ms, once, and only when
 * the option is used. */
void lpr_call_init(uint64_t min_ns) {
    lpr_min_ticks = 0;
    if (min_ns == 0) return;
    if (lpr_clock_kind != LP_CLOCK_TSC) {
        lpr_min_ticks = min_ns;
        return;
    }
    uint64_t m0 = lpr_mono_ns(), k0 = lpr_ticks(), m1, k1;
    do {
        m1 = lpr_mono_ns();
        k1 = lpr_ticks();
    } while (m1 - m0 < 2000000);
    lpr_min_ticks = (uint64_t)((double)min_ns * (double)(k1 - k0) / (double)(m1 - m0));
    if (lpr_min_ticks == 0) lpr_min_ticks = 1;
}

void lpr_call_record(struct lpr_tls *t, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs, const uint64_t *args,
                     const char *str, size_t slen) {
    if (t->guard || !(lpr_gate & (1u << lp_call_family[call]))) return; /* paused meanwhile */
    int saved = errno;
    t->guard = 1;
    lpr_call_write(t, call, t0, t1, nargs, args, str, slen);
    t->guard = 0;
    errno = saved;
}

void lpr_call_write(struct lpr_tls *t, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs, const uint64_t *args,
                    const char *str, size_t slen) {
    lpr_call_write_stack(t, 0, call, t0, t1, nargs, args, str, slen);
}

void lpr_call_record_stack(struct lpr_tls *t, uint32_t stack, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs,
                           const uint64_t *args) {
    if (t->guard || !(lpr_gate & (1u << lp_call_family[call]))) return;
    int saved = errno;
    t->guard = 1;
    lpr_call_write_stack(t, stack, call, t0, t1, nargs, args, NULL, 0);
    t->guard = 0;
    errno = saved;
}

void lpr_call_write_stack(struct lpr_tls *t, uint32_t stack, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs,
                          const uint64_t *args, const char *str, size_t slen) {
    if (t1 && t1 >= t0 && t1 - t0 < lpr_min_ticks && t->state == LP_TLS_ACTIVE) {
        lpr_tbuf_count_short(t, call, t1 - t0);
        t->py_stack = 0;
    } else {
        uint64_t cut = 0;
        if (!str) slen = 0;
        if (!stack && lpr_py_on && !t->late) { /* the Python line calling, read as the call began */
            stack = t->py_stack;
            t->py_stack = 0;
        }
        size_t room = t->late ? (sizeof t->late_rec / 8 - 3 - nargs) * 8 : LP_CALL_MAX_STR;
        if (slen > room) {
            slen = room;
            cut = LP_CALL_STR_CUT;
        }
        unsigned timed = t1 != 0, sw = stack != 0;
        size_t words = sw + 2 + timed + nargs + (slen + 7) / 8;
        uint64_t *r = lpr_reserve(t, (unsigned)words);
        if (LP_LIKELY(r != NULL)) {
            uint64_t *p = r;
            if (sw) *p++ = lpr_word_stack(stack);
            if (timed) {
                *p++ = lpr_word0_timed(LP_EV_CALL, t0);
                *p++ = lpr_word1(t0, t1);
            } else {
                *p++ = lpr_word0(LP_EV_CALL, t0);
            }
            *p++ = lp_call_header(call, nargs, (unsigned)slen) | cut;
            for (unsigned i = 0; i < nargs; i++) *p++ = args[i];
            if (slen) {
                p[(slen - 1) / 8] = 0; /* the padding after the string */
                memcpy(p, str, slen);
            }
            lpr_commit(t, r + words);
        }
    }
}
