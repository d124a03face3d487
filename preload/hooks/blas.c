/* blas.c: the BLAS family — GEMM, GEMV, DOT and AXPY through the CBLAS interface
 * (cblas_?gemm, cblas_?gemv, cblas_?dot, cblas_?axpy, as numpy calls them) and the Fortran one
 * (?gemm_, ?gemv_, as libtorch calls them), with their shapes, so the converter can report
 * achieved GFLOP/s per GEMM shape.
 *
 * The real functions live in whatever BLAS is loaded (often dlopen'ed RTLD_LOCAL by an extension
 * module, hence lpr_resolve's search of every loaded object); with none loaded the hooks are
 * simply never called. A BLAS call made by another BLAS call (netlib's cblas_sgemm calls sgemm_)
 * is not recorded again: the outer call is the one the program made. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>

#include "hook.h"

/* CBLAS enums (cblas.h): layout 101 row-major / 102 column-major; 111 no transpose, 112
 * transpose, 113 conjugate transpose. blasint is int in the LP64 builds Debian ships. */
typedef int blasint;

/* No BLAS header is needed at build time: each wrapper's macro states the prototype it defines. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

/* the list as it reads best, one group a line */
// clang-format off
#define REALS(X) \
    X(cblas_sgemm) X(cblas_dgemm) X(cblas_cgemm) X(cblas_zgemm) X(cblas_sgemv) X(cblas_dgemv) \
    X(cblas_sdot) X(cblas_ddot) X(cblas_saxpy) X(cblas_daxpy) \
    X(sgemm_) X(dgemm_) X(cgemm_) X(zgemm_) X(sgemv_) X(dgemv_)
// clang-format on
REALS(LP_REAL_SLOT)

static uint64_t op_c(int type, int layout, int ta, int tb) {
    uint64_t a = ta >= 111 && ta <= 113 ? (uint64_t)(ta - 111) : 0,
             b = tb >= 111 && tb <= 113 ? (uint64_t)(tb - 111) : 0;
    return (uint64_t)type | a << LP_BLAS_TA_SHIFT | b << LP_BLAS_TB_SHIFT | (layout == 101 ? LP_BLAS_ROWMAJOR : 0);
}

static uint64_t trans_f(const char *t) {
    char c = t ? *t : 'N';
    return c == 'T' || c == 't' ? 1 : c == 'C' || c == 'c' ? 2 : 0;
}

static uint64_t op_f(int type, const char *ta, const char *tb) {
    return (uint64_t)type | trans_f(ta) << LP_BLAS_TA_SHIFT | trans_f(tb) << LP_BLAS_TB_SHIFT | LP_BLAS_FORTRAN;
}

/* Depth of BLAS calls on this thread: only the outermost is recorded. */
static LP_TLS unsigned depth;

static inline struct lpr_tls *blas_begin(uint64_t *t0) {
    if (depth++) return NULL;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_BLAS);
    if (t) *t0 = lpr_ticks();
    return t;
}

/* With LIBPROF_STACKS the call gets its call site (captured here, in the hook's frame). */
__attribute__((always_inline)) static inline void blas_end(struct lpr_tls *t, unsigned call, uint64_t t0, unsigned n,
                                                           const uint64_t *a) {
    uint64_t t1 = lpr_ticks();
    if (LP_UNLIKELY(lpr_stack_depth)) {
        uint32_t sid;
        uint8_t g = lpr_guard_hold(t);
        LP_STACK_CAPTURE(sid);
        lpr_guard_restore(t, g);
        lpr_call_record_stack(t, sid, call, t0, t1, n, a);
        return;
    }
    lpr_call_record_args(t, LP_FAM_BLAS, call, t0, t1, n, a);
}

#define GEMM_C(fn, T, type)                                                                                     \
    LP_EXPORT void fn(int layout, int ta, int tb, blasint m, blasint n, blasint k, T alpha, const void *a,      \
                      blasint lda, const void *b, blasint ldb, T beta, void *c, blasint ldc) {                  \
        void (*f)(int, int, int, blasint, blasint, blasint, T, const void *, blasint, const void *, blasint, T, \
                  void *, blasint) = LP_REAL(fn);                                                               \
        if (!f) return;                                                                                         \
        uint64_t t0 = 0;                                                                                        \
        struct lpr_tls *t = blas_begin(&t0);                                                                    \
        f(layout, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                                        \
        depth--;                                                                                                \
        if (t) {                                                                                                \
            uint64_t args[4] = {(uint64_t)m, (uint64_t)n, (uint64_t)k, op_c(type, layout, ta, tb)};             \
            blas_end(t, LP_CALL_GEMM, t0, 4, args);                                                             \
        }                                                                                                       \
    }
GEMM_C(cblas_sgemm, float, LP_BLAS_S)
GEMM_C(cblas_dgemm, double, LP_BLAS_D)
GEMM_C(cblas_cgemm, const void *, LP_BLAS_C)
GEMM_C(cblas_zgemm, const void *, LP_BLAS_Z)

#define GEMV_C(fn, T, type)                                                                                   \
    LP_EXPORT void fn(int layout, int ta, blasint m, blasint n, T alpha, const T *a, blasint lda, const T *x, \
                      blasint incx, T beta, T *y, blasint incy) {                                             \
        void (*f)(int, int, blasint, blasint, T, const T *, blasint, const T *, blasint, T, T *, blasint) =   \
            LP_REAL(fn);                                                                                      \
        if (!f) return;                                                                                       \
        uint64_t t0 = 0;                                                                                      \
        struct lpr_tls *t = blas_begin(&t0);                                                                  \
        f(layout, ta, m, n, alpha, a, lda, x, incx, beta, y, incy);                                           \
        depth--;                                                                                              \
        if (t) {                                                                                              \
            uint64_t args[3] = {(uint64_t)m, (uint64_t)n, op_c(type, layout, ta, 111)};                       \
            blas_end(t, LP_CALL_GEMV, t0, 3, args);                                                           \
        }                                                                                                     \
    }
GEMV_C(cblas_sgemv, float, LP_BLAS_S)
GEMV_C(cblas_dgemv, double, LP_BLAS_D)

#define DOT_C(fn, T, type)                                                          \
    LP_EXPORT T fn(blasint n, const T *x, blasint incx, const T *y, blasint incy) { \
        T (*f)(blasint, const T *, blasint, const T *, blasint) = LP_REAL(fn);      \
        if (!f) return 0;                                                           \
        uint64_t t0 = 0;                                                            \
        struct lpr_tls *t = blas_begin(&t0);                                        \
        T r = f(n, x, incx, y, incy);                                               \
        depth--;                                                                    \
        if (t) {                                                                    \
            uint64_t args[2] = {(uint64_t)n, (uint64_t)(type)};                     \
            blas_end(t, LP_CALL_DOT, t0, 2, args);                                  \
        }                                                                           \
        return r;                                                                   \
    }
DOT_C(cblas_sdot, float, LP_BLAS_S)
DOT_C(cblas_ddot, double, LP_BLAS_D)

#define AXPY_C(fn, T, type)                                                               \
    LP_EXPORT void fn(blasint n, T alpha, const T *x, blasint incx, T *y, blasint incy) { \
        void (*f)(blasint, T, const T *, blasint, T *, blasint) = LP_REAL(fn);            \
        if (!f) return;                                                                   \
        uint64_t t0 = 0;                                                                  \
        struct lpr_tls *t = blas_begin(&t0);                                              \
        f(n, alpha, x, incx, y, incy);                                                    \
        depth--;                                                                          \
        if (t) {                                                                          \
            uint64_t args[2] = {(uint64_t)n, (uint64_t)(type)};                           \
            blas_end(t, LP_CALL_AXPY, t0, 2, args);                                       \
        }                                                                                 \
    }
AXPY_C(cblas_saxpy, float, LP_BLAS_S)
AXPY_C(cblas_daxpy, double, LP_BLAS_D)

/* Fortran interface: every argument by reference, then the hidden lengths of the character
 * arguments (passed through unchanged, whether or not the caller supplied them). */
#define GEMM_F(fn, type)                                                                                               \
    LP_EXPORT void fn(const char *ta, const char *tb, const blasint *m, const blasint *n, const blasint *k,            \
                      const void *alpha, const void *a, const blasint *lda, const void *b, const blasint *ldb,         \
                      const void *beta, void *c, const blasint *ldc, size_t la, size_t lb) {                           \
        void (*f)(const char *, const char *, const blasint *, const blasint *, const blasint *, const void *,         \
                  const void *, const blasint *, const void *, const blasint *, const void *, void *, const blasint *, \
                  size_t, size_t) = LP_REAL(fn);                                                                       \
        if (!f) return;                                                                                                \
        uint64_t t0 = 0;                                                                                               \
        struct lpr_tls *t = blas_begin(&t0);                                                                           \
        f(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, la, lb);                                               \
        depth--;                                                                                                       \
        if (t) {                                                                                                       \
            uint64_t args[4] = {(uint64_t)*m, (uint64_t)*n, (uint64_t)*k, op_f(type, ta, tb)};                         \
            blas_end(t, LP_CALL_GEMM, t0, 4, args);                                                                    \
        }                                                                                                              \
    }
GEMM_F(sgemm_, LP_BLAS_S)
GEMM_F(dgemm_, LP_BLAS_D)
GEMM_F(cgemm_, LP_BLAS_C)
GEMM_F(zgemm_, LP_BLAS_Z)

#define GEMV_F(fn, type)                                                                                       \
    LP_EXPORT void fn(const char *ta, const blasint *m, const blasint *n, const void *alpha, const void *a,    \
                      const blasint *lda, const void *x, const blasint *incx, const void *beta, void *y,       \
                      const blasint *incy, size_t la) {                                                        \
        void (*f)(const char *, const blasint *, const blasint *, const void *, const void *, const blasint *, \
                  const void *, const blasint *, const void *, void *, const blasint *, size_t) = LP_REAL(fn); \
        if (!f) return;                                                                                        \
        uint64_t t0 = 0;                                                                                       \
        struct lpr_tls *t = blas_begin(&t0);                                                                   \
        f(ta, m, n, alpha, a, lda, x, incx, beta, y, incy, la);                                                \
        depth--;                                                                                               \
        if (t) {                                                                                               \
            uint64_t args[3] = {(uint64_t)*m, (uint64_t)*n, op_f(type, ta, "N")};                              \
            blas_end(t, LP_CALL_GEMV, t0, 3, args);                                                            \
        }                                                                                                      \
    }
GEMV_F(sgemv_, LP_BLAS_S)
GEMV_F(dgemv_, LP_BLAS_D)
