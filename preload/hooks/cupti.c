/* cupti.c: the GPU's own times — each kernel, copy and set as it ran on the device, on its stream —
 * through CUPTI's activity API, which a program that uses CUDA can always load (it ships with the
 * toolkit and beside PyTorch's libcudart), plus the hooks that hand CUPTI over to a program that
 * wants it for itself.
 *
 * Start: at the program's first recorded CUDA call (hooks/cuda.c, cublas.c, nccl.c, through
 * lpr_gpu_enter), libcupti.so.13 is taken from the process if loaded (PyTorch links it), else
 * from beside the CUDA library the program calls, else from the loader's path and the toolkit.
 * libprof registers a timestamp callback (CLOCK_MONOTONIC, the trace's own clock: CUPTI maps the
 * GPU's clock onto it) and its buffer callbacks, and enables concurrent kernels, copies, sets
 * and external correlations (and the runtime and driver API calls, whose records are dropped: CUPTI
 * correlates only the calls it records). Nothing is done per kernel on the program's threads but a push and
 * a pop of a correlation id around each recorded CUDA call: its start in ticks since origin, the
 * key by which the converter ties a kernel to the slice of the call that queued it.
 *
 * Records: CUPTI hands full buffers to its own worker thread (and every buffer when flushed, at
 * exit); each record becomes one CALL record (LP_ROLE_GPU) with its GPU start and end, written by
 * the thread that receives it. lib/gpu.c puts them on a track per stream. Records CUPTI dropped
 * are counted in the trace.
 *
 * Sharing: CUPTI serves one client. When the program registers its own buffer callbacks or
 * subscribes (torch.profiler's Kineto, Nsight's injection), libprof flushes what it has, turns its
 * kinds off and lets the program's call through: the program's profiler gets its results, and a
 * note says when libprof's GPU times ended. A program started under Nsight (CUDA_INJECTION64_PATH)
 * is left to it. LIBPROF_GPU_TIMES=0 leaves CUPTI alone.
 *
 * Record layouts: CUPTI 13's (CUpti_ActivityKernel10, Memcpy6, Memset4, ExternalCorrelation),
 * at the offsets below; tests/progs/fakecupti.c lays its records out with NVIDIA's header, so a
 * wrong offset fails the tests. Another major version of CUPTI is not used (a note says so). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/os.h"
#include "../core/sys.h"
#include "gpu.h"
#include "hook.h"

typedef int cupti_res;
enum { KIND_MEMCPY = 1, KIND_MEMSET = 2, KIND_KERNEL = 3, KIND_DRIVER = 4, KIND_RUNTIME = 5 };
enum { KIND_CONC_KERNEL = 10, KIND_EXT_CORR = 39 };
enum { EXT_KIND = 5 };     /* CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2: Kineto uses CUSTOM0 and CUSTOM1 */
enum { FLUSH_FORCED = 1 }; /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED */
#define BUF_BYTES (4u << 20)

static struct {
    cupti_res (*version)(uint32_t *);
    cupti_res (*timestamp)(uint64_t (*)(void));
    cupti_res (*callbacks)(void (*)(uint8_t **, size_t *, size_t *),
                           void (*)(void *, uint32_t, uint8_t *, size_t, size_t));
    cupti_res (*enable)(int), (*disable)(int);
    cupti_res (*flush_all)(uint32_t);
    cupti_res (*next)(uint8_t *, size_t, void **);
    cupti_res (*dropped)(void *, uint32_t, size_t *);
    cupti_res (*push)(int, uint64_t), (*pop)(int, uint64_t *);
} cu;

enum { OFF, ON, YIELDED };
static int state; /* OFF until the first call tries (`tried`) */
static int tried;
/* The API kinds are enabled only because CUPTI writes an external correlation record only for an
 * API call it records (seen on an H100; NVIDIA's nvFuser notes the same): their records are
 * dropped here. A PyTorch step makes a few dozen such calls. */
static const int kinds[] = {KIND_CONC_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_EXT_CORR, KIND_RUNTIME, KIND_DRIVER};

/* ---- records ----------------------------------------------------------------------------------- */

static uint64_t u32(const uint8_t *r, unsigned off) {
    uint32_t v;
    memcpy(&v, r + off, 4);
    return v;
}
static uint64_t u64(const uint8_t *r, unsigned off) {
    uint64_t v;
    memcpy(&v, r + off, 8);
    return v;
}

static void record(struct lpr_tls *t, const uint8_t *r) {
    uint64_t now = lpr_ticks();
    switch (u32(r, 0)) {
    case KIND_KERNEL:
    case KIND_CONC_KERNEL: { /* CUpti_ActivityKernel10 */
        const char *name;
        memcpy(&name, r + 104, sizeof name);
        uint16_t regs;
        memcpy(&regs, r + 6, 2);
        uint64_t a[14] = {name ? lpr_cuda_name_id(name) : lpr_name_id("<unnamed kernel>"),
                          u64(r, 16),
                          u64(r, 24),
                          u32(r, 40),
                          u32(r, 48),
                          u32(r, 92),
                          u32(r, 52),
                          u32(r, 56),
                          u32(r, 60),
                          u32(r, 64),
                          u32(r, 68),
                          u32(r, 72),
                          u32(r, 76) + u32(r, 80),
                          regs};
        lpr_call_write(t, LP_CALL_GPU_KERNEL, now, 0, 14, a, NULL, 0);
        break;
    }
    case KIND_MEMCPY: { /* CUpti_ActivityMemcpy6 */
        uint64_t a[7] = {u64(r, 8), r[4], u64(r, 16), u64(r, 24), u32(r, 32), u32(r, 40), u32(r, 44)};
        lpr_call_write(t, LP_CALL_GPU_MEMCPY, now, 0, 7, a, NULL, 0);
        break;
    }
    case KIND_MEMSET: { /* CUpti_ActivityMemset4 */
        uint64_t a[6] = {u64(r, 8), u64(r, 16), u64(r, 24), u32(r, 32), u32(r, 40), u32(r, 44)};
        lpr_call_write(t, LP_CALL_GPU_MEMSET, now, 0, 6, a, NULL, 0);
        break;
    }
    case KIND_EXT_CORR: /* CUpti_ActivityExternalCorrelation: ours only */
        if (u32(r, 4) == EXT_KIND) {
            uint64_t a[2] = {u32(r, 16), u64(r, 8)};
            lpr_call_write(t, LP_CALL_GPU_CORRELATION, now, 0, 2, a, NULL, 0);
        }
        break;
    default: break;
    }
}

static void buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = lp_os_malloc(BUF_BYTES); /* the real malloc: CUPTI's buffers are libprof's, not the program's */
    *size = *buf ? BUF_BYTES : 0;
    *max_records = 0;
}

static void buffer_completed(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)size;
    struct lpr_tls *t = &lpr_tls;
    uint8_t g = lpr_guard_hold(t);
    void *r = NULL;
    while (valid && cu.next(buf, valid, &r) == 0) record(t, r);
    size_t lost = 0;
    if (cu.dropped && cu.dropped(ctx, stream, &lost) == 0 && lost) {
        uint64_t a[1] = {lost};
        lpr_call_write(t, LP_CALL_GPU_DROPPED, lpr_ticks(), 0, 1, a, NULL, 0);
    }
    lp_os_free(buf);
    lpr_guard_restore(t, g);
}

static uint64_t timestamp(void) { return lpr_mono_ns(); }

/* ---- start ----------------------------------------------------------------------------------- */

static void *open_cupti(const void *runtime) {
    static const char lib[] = "libcupti.so.13";
    void *h = LPR_REAL(dlopen)(lib, RTLD_LAZY | RTLD_NOLOAD);
    Dl_info di;
    if (!h && runtime && dladdr(runtime, &di) && di.dli_fname) { /* beside the CUDA runtime in use */
        char path[4096];
        const char *slash = strrchr(di.dli_fname, '/');
        size_t n = slash ? (size_t)(slash - di.dli_fname) + 1 : 0;
        if (n + sizeof lib < sizeof path) {
            memcpy(path, di.dli_fname, n);
            memcpy(path + n, lib, sizeof lib);
            h = LPR_REAL(dlopen)(path, RTLD_LAZY | RTLD_LOCAL);
        }
    }
    static const char *const where[] = {lib, "/usr/local/cuda/lib64/libcupti.so.13",
                                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"};
    for (unsigned i = 0; !h && i < sizeof where / sizeof where[0]; i++)
        h = LPR_REAL(dlopen)(where[i], RTLD_LAZY | RTLD_LOCAL);
    return h;
}

static long started_pid; /* the process that started CUPTI (not a forked child) */
static void at_exit(void);

#define SYM(field, name) (*(void **)&cu.field = lpr_dlsym(h, name)) != NULL

static void start(const void *runtime) {
    /* (its records are the cuda family's: with that family off, as with LIBPROF_GPU_TIMES=0, no CUPTI) */
    if (!lpr_cfg.gpu_times || !(lpr_gate & (1u << LP_FAM_CUDA))) return;
    if (getenv("CUDA_INJECTION64_PATH")) {
        lpr_warn("no GPU times: the program runs under a CUDA injection (Nsight), which holds CUPTI");
        return;
    }
    void *h = open_cupti(runtime);
    if (!h) {
        lpr_warn("no GPU times: libcupti.so.13 was not found beside the CUDA runtime or on the loader's path");
        return;
    }
    if (!(SYM(version, "cuptiGetVersion") && SYM(timestamp, "cuptiActivityRegisterTimestampCallback") &&
          SYM(callbacks, "cuptiActivityRegisterCallbacks") && SYM(enable, "cuptiActivityEnable") &&
          SYM(disable, "cuptiActivityDisable") && SYM(flush_all, "cuptiActivityFlushAll") &&
          SYM(next, "cuptiActivityGetNextRecord") && SYM(push, "cuptiActivityPushExternalCorrelationId") &&
          SYM(pop, "cuptiActivityPopExternalCorrelationId"))) {
        lpr_warn("no GPU times: this libcupti lacks an entry point libprof needs");
        return;
    }
    *(void **)&cu.dropped = lpr_dlsym(h, "cuptiActivityGetNumDroppedRecords"); /* optional: then drops go uncounted */
    uint32_t v = 0;
    if (cu.version(&v) != 0 || v < 130000 || v >= 140000) {
        lpr_warn("no GPU times: CUPTI API version %u, libprof knows CUDA 13's records", v);
        return;
    }
    int r;
    if ((r = cu.timestamp(timestamp)) != 0 || (r = cu.callbacks(buffer_requested, buffer_completed)) != 0) {
        lpr_warn("no GPU times: CUPTI refused its callbacks (error %d)", r);
        return;
    }
    for (unsigned i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((r = cu.enable(kinds[i])) != 0) {
            for (unsigned k = 0; k < i; k++) cu.disable(kinds[k]);
            lpr_warn("no GPU times: CUPTI could not trace the GPU's activity (error %d: no GPU, or no driver)", r);
            return;
        }
    started_pid = lpr_sys_getpid();
    atexit(at_exit);
    __atomic_store_n(&state, ON, __ATOMIC_RELEASE);
}

int lpr_gpu_enter(uint64_t *t0, const void *runtime) {
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (LP_UNLIKELY(s == OFF) && !__atomic_exchange_n(&tried, 1, __ATOMIC_ACQ_REL)) {
        struct lpr_tls *t = &lpr_tls;
        uint8_t g = lpr_guard_hold(t); /* CUPTI's loading and start-up are libprof's doing */
        start(runtime);
        lpr_guard_restore(t, g);
        s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
        *t0 = lpr_ticks(); /* the call's slice starts after CUPTI's */
    }
    /* (a forked child has the parent's CUPTI in name only: it pushes nothing) */
    return s == ON && LP_LIKELY(lpr_pid == started_pid) && cu.push(EXT_KIND, *t0 - lpr_origin_ticks) == 0;
}

void lpr_gpu_leave(void) {
    uint64_t id;
    cu.pop(EXT_KIND, &id);
}

/* Everything CUPTI holds, into the trace, and (`off`) its kinds turned off: at exit, or when the
 * program takes CUPTI. */
static void stop(int to, int off) {
    int on = ON;
    if (!__atomic_compare_exchange_n(&state, &on, to, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
    cu.flush_all(FLUSH_FORCED);
    for (unsigned i = 0; off && i < sizeof kinds / sizeof kinds[0]; i++) cu.disable(kinds[i]);
}

/* At exit CUPTI is flushed by a handler of exit's own, registered when CUPTI started: it runs before
 * the libraries' destructors, CUPTI's among them — libprof's own end (gpu_finish, from its
 * destructor) comes after those, when calling CUPTI crashes (seen on an H100). gpu_finish flushes
 * only where exit's handlers did not run: the program ended with _exit, and no destructor ran
 * either. A forked child's copy of CUPTI is not touched. */
static void at_exit(void) {
    if (lpr_sys_getpid() != started_pid) return;
    struct lpr_tls *t = &lpr_tls;
    uint8_t g = lpr_guard_hold(t);
    stop(OFF, 0);
    lpr_guard_restore(t, g);
}
static void gpu_finish(void) {
    if (lpr_sys_getpid() == started_pid) stop(OFF, 0); /* (after at_exit: already OFF) */
}

/* ---- the program's own CUPTI client -------------------------------------------------------------- */

static void yield(const char *what) {
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != ON) return;
    struct lpr_tls *t = &lpr_tls;
    uint8_t g = lpr_guard_hold(t);
    stop(YIELDED, 1);
    lpr_warn("GPU times end at %.3f s: the program called %s (its own profiler, torch.profiler or Nsight, "
             "now holds CUPTI)",
             (double)(lpr_mono_ns() - lpr_origin_mono_ns) / 1e9, what);
    lpr_guard_restore(t, g);
}

cupti_res cuptiActivityRegisterCallbacks(void (*req)(uint8_t **, size_t *, size_t *),
                                         void (*done)(void *, uint32_t, uint8_t *, size_t, size_t));
cupti_res cuptiSubscribe(void **subscriber, void *callback, void *userdata);
LP_REAL_SLOT(cuptiActivityRegisterCallbacks)
LP_REAL_SLOT(cuptiSubscribe)

LP_EXPORT cupti_res cuptiActivityRegisterCallbacks(void (*req)(uint8_t **, size_t *, size_t *),
                                                   void (*done)(void *, uint32_t, uint8_t *, size_t, size_t)) {
    if (!LP_REAL(cuptiActivityRegisterCallbacks)) return 999; /* CUPTI_ERROR_UNKNOWN */
    yield("cuptiActivityRegisterCallbacks");
    return LP_REAL(cuptiActivityRegisterCallbacks)(req, done);
}

LP_EXPORT cupti_res cuptiSubscribe(void **subscriber, void *callback, void *userdata) {
    if (!LP_REAL(cuptiSubscribe)) return 999;
    yield("cuptiSubscribe");
    return LP_REAL(cuptiSubscribe)(subscriber, callback, userdata);
}

/* A client that finds CUPTI with dlopen and dlsym (not through its PLT) is handed these hooks too
 * (by hidden names: libprof relocates none of its own exports). */
extern __typeof__(cuptiActivityRegisterCallbacks) lpr_self_register
    __attribute__((alias("cuptiActivityRegisterCallbacks"), visibility("hidden")));
extern __typeof__(cuptiSubscribe) lpr_self_subscribe __attribute__((alias("cuptiSubscribe"), visibility("hidden")));
void *lpr_cupti_dlsym(void *handle, const char *name) {
    void *f = lpr_dlsym(handle, name);
    if (!f) return f;
    if (!strcmp(name, "cuptiActivityRegisterCallbacks")) return (void *)lpr_self_register;
    if (!strcmp(name, "cuptiSubscribe")) return (void *)lpr_self_subscribe;
    return f;
}

LP_FAMILY_SETUP(cupti, NULL, NULL, gpu_finish);
