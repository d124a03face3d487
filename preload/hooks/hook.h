/* hook.h: the one shape of a hook. Every family file in preload/hooks/ is written with these
 * pieces, and only these: a newcomer who has read one hook has read them all.
 *
 * A hook has two halves:
 *   - the exported function, named as the C library's: its fast path is all an unprofiled
 *     program pays — one load of the real function, one of the gate, a tail jump (LP_PASS);
 *   - the slow half (noinline): find the real function (lpr_next, once), ask the core whether to
 *     record (LP_BEGIN), call it, and append one CALL record with the argument words (LP_RECORD).
 *     The guard is not held during the real call, so calls it makes are recorded as nested
 *     slices.
 *
 * LP_HOOK writes both halves for the common case, a call with plain arguments:
 *
 *     LP_HOOK(IO, READ, ssize_t, read, (int fd, void *buf, size_t n), (fd, buf, n), -1, (void)0,
 *             I(fd), U(n), I(r))
 *
 * family IO, entry point LP_CALL_READ, the prototype, how to pass the parameters on, what to
 * return with ENOSYS when the C library lacks the function, a statement run before the call
 * (values read before the call may change them), and the argument words — expressions of the
 * parameters and of the result `r`, in the order LP_CALLS names them (include/libprof/format.h).
 * Hooks that need more (a path string, a variadic prototype, a trampoline) are written by hand
 * from the same pieces: LP_REAL_SLOT, LP_REAL, LP_NOFN, LP_BEGIN, LP_RECORD, LP_RECORD_STR;
 * LP_HOOK_STR is LP_HOOK for a record that carries a string (a path) after its arguments;
 * LP_HOOK_AROUND is LP_HOOK with the real call wrapped (the GPU families' correlation).
 *
 * Adding a family: one file here, one row in LP_FAMILIES and its entry points in LP_CALLS
 * (include/libprof/format.h), its exported names in preload/libprof.map, one line in the
 * Makefile. ARCHITECTURE.md follows one event from such a hook to the report. */
#ifndef LPR_HOOK_H
#define LPR_HOOK_H

#include <errno.h>
#include <stdint.h>

#include "../core/lp.h"

/* What this family does when libprof starts and when the process ends (see struct lpr_setup
 * in core/life.h); any may be NULL. The entries of a registration section are read as an array: aligned(8) keeps the
 * compiler from padding them apart (it aligns larger objects to 16 by default). */
#define LP_FAMILY_SETUP(family, resolve_fn, start_fn, finish_fn)                                                 \
    __attribute__((used, section("lpr_setup"), aligned(8))) static const struct lpr_setup lpr_setup_##family = { \
        resolve_fn, start_fn, finish_fn}

/* `fn`, of family LP_FAM_<FAM>, is called so often that when its family never records the
 * program's GOT slots are pointed back at the C library (core/unhook.c). */
#define LP_UNHOOKABLE(FAM, fn) LP_UNHOOKABLE_IF(FAM, fn, NULL)
/* The same, when `may()` (asked once, at start-up) says the hook is not needed any more. */
#define LP_UNHOOKABLE_IF(FAM, fn, may)                                                                              \
    extern __typeof__(fn) lpr_self_##fn __attribute__((alias(#fn), visibility("hidden"), copy(fn)));                \
    __attribute__((used, section("lpr_unhook"), aligned(8))) static const struct lpr_unhookable lpr_unhook_##fn = { \
        LP_FAM_##FAM, #fn, (void *)&lpr_self_##fn, may}

/* fn##64, exported as another name of the hook `fn` (one address), where the C library of a
 * 64-bit system has the two as one function (off_t is off64_t there: the same arguments). */
#define LP_ALIAS64(fn)                                                                       \
    _Static_assert(sizeof(off_t) == 8, #fn "64 is another function where off_t is 32 bits"); \
    extern __typeof__(fn) fn##64 __attribute__((alias(#fn), visibility("default"), copy(fn)))

/* Where the real function of `fn` is kept once found (read by LP_PASS on the fast path). */
#define LP_REAL_SLOT(fn) static void *real_##fn;
/* The real function of `fn`: resolved by the first call (dlsym RTLD_NEXT, then every loaded
 * object), NULL while no loaded object defines it. */
#define LP_REAL(fn) ((__typeof__(&fn))lpr_next(&real_##fn, #fn))
/* A hook whose real function is missing fails the way a missing system call would. */
#define LP_NOFN(ret)    \
    do {                \
        errno = ENOSYS; \
        return ret;     \
    } while (0)

/* Argument words: signed values travel sign-extended, pointers and sizes as they are. */
#define I(x) ((uint64_t)(int64_t)(x))
#define U(x) ((uint64_t)(uintptr_t)(x))

/* The fast path, with the parameters passed on as the parenthesised list `args`. */
#define LP_PASS_ARGS(fam, fn, args) LP_PASS_MASK(1u << (fam), fn, args)
/* The same for a hook whose calls may belong to any of the families in `mask` (a timed wait is
 * the sync family's, or the python family's when it waits for the GIL). */
#define LP_PASS_MASK(mask, fn, args)                                                                     \
    do {                                                                                                 \
        __typeof__(&fn) f_ = (__typeof__(&fn))__atomic_load_n(&real_##fn, __ATOMIC_RELAXED);             \
        if (LP_LIKELY(f_ != NULL) && LP_LIKELY(!(lpr_gate & ((mask) | LP_GATE_UNINIT)))) return f_ args; \
    } while (0)

/* Start recording a call of family `fam`: `t` (NULL: not recorded) and `t0`. */
#define LP_BEGIN(fam)                        \
    struct lpr_tls *t = lpr_call_begin(fam); \
    uint64_t t0 = t ? lpr_ticks() : 0

/* End it: one timed CALL record of entry point `call` with the argument words given. */
#define LP_RECORD(fam, call, ...)                                                                  \
    do {                                                                                           \
        if (t) {                                                                                   \
            uint64_t a_[] = {__VA_ARGS__};                                                         \
            lpr_call_record_args(t, (fam), (call), t0, lpr_ticks(), sizeof a_ / sizeof a_[0], a_); \
        }                                                                                          \
    } while (0)

/* The same with a string (a path, a command line) after the arguments. */
#define LP_RECORD_STR(call, str, ...)                                                                           \
    do {                                                                                                        \
        if (t) {                                                                                                \
            uint64_t a_[] = {__VA_ARGS__};                                                                      \
            const char *s_ = (str);                                                                             \
            lpr_call_record(t, (call), t0, lpr_ticks(), sizeof a_ / sizeof a_[0], a_, s_, s_ ? strlen(s_) : 0); \
        }                                                                                                       \
    } while (0)

/* Both halves of a hook of family LP_FAM_<FAM> recording LP_CALL_<CALL> (see the top), the real
 * call made inside AROUND(real, statement). */
#define LP_HOOK_SHAPE(FAM, CALL, RET, FN, PARAMS, ARGS, FAIL, PRE, AROUND, ...) \
    __attribute__((noinline)) static RET FN##_slow PARAMS {                     \
        if (!LP_REAL(FN)) LP_NOFN(FAIL);                                        \
        PRE;                                                                    \
        LP_BEGIN(LP_FAM_##FAM);                                                 \
        RET r;                                                                  \
        AROUND(LP_REAL(FN), r = LP_REAL(FN) ARGS);                              \
        LP_RECORD(LP_FAM_##FAM, LP_CALL_##CALL, __VA_ARGS__);                   \
        return r;                                                               \
    }                                                                           \
    LP_EXPORT RET FN PARAMS {                                                   \
        LP_PASS_ARGS(LP_FAM_##FAM, FN, ARGS);                                   \
        return FN##_slow ARGS;                                                  \
    }
#define LP_PLAIN_CALL(real, call) call

/* The common hook: `PRE` runs before the call is timed. */
#define LP_HOOK(FAM, CALL, RET, FN, PARAMS, ARGS, FAIL, PRE, ...) \
    LP_HOOK_SHAPE(FAM, CALL, RET, FN, PARAMS, ARGS, FAIL, PRE, LP_PLAIN_CALL, __VA_ARGS__)

/* LP_HOOK with the real call made inside AROUND(real, statement): the GPU families bracket it
 * with a correlation id that ties what it queued on the GPU to its slice (gpu.h, LP_GPU_CALL). */
#define LP_HOOK_AROUND(FAM, CALL, RET, FN, PARAMS, ARGS, FAIL, AROUND, ...) \
    LP_HOOK_SHAPE(FAM, CALL, RET, FN, PARAMS, ARGS, FAIL, (void)0, AROUND, __VA_ARGS__)

/* The same for a call whose record carries a string after its arguments (a path). */
#define LP_HOOK_STR(FAM, CALL, RET, FN, PARAMS, ARGS, FAIL, STR, ...) \
    __attribute__((noinline)) static RET FN##_slow PARAMS {           \
        if (!LP_REAL(FN)) LP_NOFN(FAIL);                              \
        LP_BEGIN(LP_FAM_##FAM);                                       \
        RET r = LP_REAL(FN) ARGS;                                     \
        LP_RECORD_STR(LP_CALL_##CALL, STR, __VA_ARGS__);              \
        return r;                                                     \
    }                                                                 \
    LP_EXPORT RET FN PARAMS {                                         \
        LP_PASS_ARGS(LP_FAM_##FAM, FN, ARGS);                         \
        return FN##_slow ARGS;                                        \
    }

#endif
