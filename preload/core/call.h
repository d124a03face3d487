/* call.h: records of the runtime entry points (call.c), and the hooks' inline common case. */
#ifndef LPR_CALL_H
#define LPR_CALL_H

#include <stdint.h>

#include "state.h"
#include "tbuf.h"

/* Every hook is written with preload/hooks/hook.h: ask lpr_call_begin whether to record, take two
 * timestamps around the real call, hand the argument words to lpr_call_record(_args).
 *
 * The guard is NOT held while the real function runs, so interposed calls it makes (a GEMM that
 * opens an OpenMP region, a library that reads a file) are recorded too, as slices nested
 * inside the outer one: a thread's calls are strictly nested in time, so its slices nest. */

/* Append a CALL record: timed from t0 to t1 (t1 == 0: an instant at t0), `nargs` argument words,
 * and an optional string (cut to LP_CALL_MAX_STR bytes). Keeps errno. */
LP_HIDDEN void lpr_call_record(struct lpr_tls *t, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs,
                               const uint64_t *args, const char *str, size_t slen);
/* The same without the checks, for libprof's own records made while it holds the guard. */
LP_HIDDEN void lpr_call_write(struct lpr_tls *t, unsigned call, uint64_t t0, uint64_t t1, unsigned nargs,
                              const uint64_t *args, const char *str, size_t slen);
/* With the call stack `stack` (LIBPROF_STACKS, captured by the hook): BLAS and oneDNN calls. */
LP_HIDDEN void lpr_call_record_stack(struct lpr_tls *t, uint32_t stack, unsigned call, uint64_t t0, uint64_t t1,
                                     unsigned nargs, const uint64_t *args);
LP_HIDDEN void lpr_call_write_stack(struct lpr_tls *t, uint32_t stack, unsigned call, uint64_t t0, uint64_t t1,
                                    unsigned nargs, const uint64_t *args, const char *str, size_t slen);
LP_HIDDEN extern uint64_t lpr_min_ticks; /* LIBPROF_MIN_NS in clock ticks (0 = record everything) */

/* The common case of lpr_call_record, inlined into the hooks: a timed call with arguments and no
 * string. Nothing here touches errno (lpr_reserve's slow path keeps it), so it is not saved. */
static inline void lpr_call_record_args(struct lpr_tls *t, unsigned fam, unsigned call, uint64_t t0, uint64_t t1,
                                        unsigned nargs, const uint64_t *args) {
    uint32_t g = lpr_gate;
    if (LP_UNLIKELY(t->guard || !(g & (1u << fam)) || lpr_min_ticks || t->late)) {
        lpr_call_record(t, call, t0, t1, nargs, args, NULL, 0);
        return;
    }
    t->guard = 1;
    uint32_t py = LP_UNLIKELY(g & LP_GATE_PY) ? t->py_stack : 0; /* the Python line, read as the call began */
    unsigned sw = py != 0;
    uint64_t *r = lpr_reserve(t, 3 + nargs + sw);
    if (LP_LIKELY(r != NULL)) {
        if (sw) {
            *r++ = lpr_word_stack(py);
            t->py_stack = 0;
        }
        r[0] = lpr_word0_timed(LP_EV_CALL, t0);
        r[1] = lpr_word1(t0, t1);
        r[2] = lp_call_header(call, nargs, 0);
        for (unsigned i = 0; i < nargs; i++) r[3 + i] = args[i];
        lpr_commit(t, r + 3 + nargs);
    }
    t->guard = 0;
}
LP_HIDDEN void lpr_call_init(uint64_t min_ns);

#endif
