/* omp.c: the OpenMP family — GOMP_parallel (GCC's libgomp, which Debian's numpy/PyTorch/oneDNN
 * use) as an "omp parallel" slice on the thread that opens the region, with the threads asked
 * for and the team size; and on every team member, master included, an "omp work" slice for
 * its share of the region, so the work shows on the workers' tracks.
 *
 * The region's function is wrapped: libgomp calls our `work` with a descriptor on the opening
 * thread's stack, which lives until GOMP_parallel returns, i.e. until every member is done.
 * LLVM's libomp (__kmpc_fork_call, variadic) is not wrapped. */
#define _GNU_SOURCE
#include "hook.h"

void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
int omp_get_thread_num(void);
int omp_get_num_threads(void);

#define REALS(X) X(GOMP_parallel) X(omp_get_thread_num) X(omp_get_num_threads)
REALS(LP_REAL_SLOT)

struct region {
    void (*fn)(void *);
    void *data;
    uint64_t flow;
    int team;
};

static uint64_t next_region;

static void work(void *p) {
    struct region *r = p;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_OMP);
    uint64_t t0 = t ? lpr_ticks() : 0;
    r->fn(r->data);
    int (*num)(void) = LP_REAL(omp_get_thread_num);
    int me = num ? num() : -1;
    if (me == 0) {
        int (*team)(void) = LP_REAL(omp_get_num_threads);
        r->team = team ? team() : 0;
    }
    if (t) {
        uint64_t a[2] = {(uint64_t)(int64_t)me, r->flow};
        lpr_call_record(t, LP_CALL_OMP_WORK, t0, lpr_ticks(), 2, a, NULL, 0);
    }
}

LP_EXPORT void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags) {
    void (*f)(void (*)(void *), void *, unsigned, unsigned) = LP_REAL(GOMP_parallel);
    if (!f) return;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_OMP);
    if (!t) {
        f(fn, data, num_threads, flags);
        return;
    }
    struct region r = {fn, data, __atomic_add_fetch(&next_region, 1, __ATOMIC_RELAXED), 0};
    uint64_t t0 = lpr_ticks();
    f(work, &r, num_threads, flags);
    uint64_t a[3] = {num_threads, (uint64_t)r.team, r.flow};
    lpr_call_record(t, LP_CALL_OMP_PARALLEL, t0, lpr_ticks(), 3, a, NULL, 0);
}
