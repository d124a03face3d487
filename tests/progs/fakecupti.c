/* fakecupti: a stand-in for libcupti.so.13 on machines with no GPU (CI), for the cuda tests only,
 * beside fakecudart (build/progs/fakecuda/): the activity API a client uses (callbacks, kinds,
 * flush, records, external correlation, the timestamp callback), and a made-up device that
 * fakecudart's launches, copies and sets run on — each queued on its stream after the one
 * before, 1 µs after its call, for a time given by a rule the tests know:
 *   kernel  1000 + grid_x * block_x / 512 + 10 * dynamic shared bytes  ns
 *   copy    bytes / 8 ns;  set  bytes / 64 ns
 * The records are laid out with NVIDIA's own header (cupti_activity.h, CUDA 13's record
 * versions), so libprof's reading of them is checked against the real layout. Not a model of
 * CUPTI: nothing but what those tests need; the device check (scripts/gpu-check) meets the real
 * one on a GPU. */
#include <cupti_activity.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static CUpti_BuffersCallbackRequestFunc want;
static CUpti_BuffersCallbackCompleteFunc done;
static CUpti_TimestampCallbackFunc clock_fn;
static int enabled[64];
static uint8_t *buf;
static size_t cap, used;
static uint32_t next_corr = 1;
static uint64_t ready[2]; /* each stream's device time when its last operation ends */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread uint64_t ext[16];
static __thread int next_ext;
static int ext_kind;

CUptiResult cuptiGetVersion(uint32_t *v) {
    *v = 130001;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
    clock_fn = f;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) {
    want = r, done = c; /* the last client wins, as with CUPTI */
    return CUPTI_SUCCESS;
}
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc cb, void *user) {
    (void)cb, (void)user;
    *subscriber = (CUpti_SubscriberHandle)&want;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
    if ((unsigned)k >= 64) return CUPTI_ERROR_INVALID_KIND;
    enabled[k] = 1;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) {
    if ((unsigned)k < 64) enabled[k] = 0;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind k, uint64_t id) {
    if (next_ext >= 16) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    ext_kind = k;
    ext[next_ext++] = id;
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind k, uint64_t *id) {
    (void)k;
    if (!next_ext) return CUPTI_ERROR_QUEUE_EMPTY;
    *id = ext[--next_ext];
    return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n) {
    (void)c, (void)s;
    *n = 0;
    return CUPTI_SUCCESS;
}

static size_t size_of(const CUpti_Activity *r) {
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    default: return sizeof(CUpti_ActivityExternalCorrelation);
    }
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *b, size_t valid, CUpti_Activity **r) {
    size_t at = *r ? (size_t)((uint8_t *)*r - b) + size_of(*r) : 0;
    if (at >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *r = (CUpti_Activity *)(b + at);
    return CUPTI_SUCCESS;
}

static void deliver(void) { /* (lock held) */
    if (buf && used && done) done(NULL, 0, buf, cap, used);
    buf = NULL, used = cap = 0;
}
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    (void)flag;
    pthread_mutex_lock(&lock);
    deliver();
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

static void put(const void *rec, size_t n) { /* (lock held) */
    if (!want) return;
    if (buf && used + n > cap) deliver();
    if (!buf) {
        size_t max = 0;
        want(&buf, &cap, &max);
        used = 0;
        if (!buf || cap < n) return;
    }
    memcpy(buf + used, rec, n);
    used += n;
}

static uint64_t now(void) {
    if (clock_fn) return clock_fn();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One API call that queues `dur` ns of work on stream `s` (0: the default stream, CUPTI's 7;
 * 1: another, 13): its correlation (and the client's external id), its start and end. */
static uint32_t queue(int s, uint64_t dur, uint64_t *start, uint64_t *end) {
    uint32_t corr = next_corr++;
    if (next_ext && enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]) {
        CUpti_ActivityExternalCorrelation x = {0};
        x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        x.externalKind = (CUpti_ExternalCorrelationKind)ext_kind;
        x.externalId = ext[next_ext - 1];
        x.correlationId = corr;
        put(&x, sizeof x);
    }
    uint64_t t = now() + 1000;
    *start = t > ready[s] ? t : ready[s];
    *end = ready[s] = *start + dur;
    return corr;
}

void fakecupti_kernel(const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      size_t shmem, int s) {
    pthread_mutex_lock(&lock);
    if (enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) {
        CUpti_ActivityKernel10 k = {0};
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.correlationId = queue(s, 1000 + (uint64_t)gx * bx / 512 + 10 * shmem, &k.start, &k.end);
        k.deviceId = 0, k.contextId = 1, k.streamId = s ? 13 : 7;
        k.gridX = (int32_t)gx, k.gridY = (int32_t)gy, k.gridZ = (int32_t)gz;
        k.blockX = (int32_t)bx, k.blockY = (int32_t)by, k.blockZ = (int32_t)bz;
        k.dynamicSharedMemory = (int32_t)shmem, k.registersPerThread = 16;
        k.name = name;
        put(&k, sizeof k);
    }
    pthread_mutex_unlock(&lock);
}

void fakecupti_copy(size_t bytes, int kind, int s) {
    pthread_mutex_lock(&lock);
    if (enabled[CUPTI_ACTIVITY_KIND_MEMCPY]) {
        CUpti_ActivityMemcpy6 m = {0};
        m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
        m.copyKind = (uint8_t)(kind == 1   ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
                               : kind == 2 ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOH
                                           : CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
        m.bytes = bytes;
        m.correlationId = queue(s, bytes / 8, &m.start, &m.end);
        m.deviceId = 0, m.contextId = 1, m.streamId = s ? 13 : 7;
        put(&m, sizeof m);
    }
    pthread_mutex_unlock(&lock);
}

void fakecupti_set(size_t bytes, int s) {
    pthread_mutex_lock(&lock);
    if (enabled[CUPTI_ACTIVITY_KIND_MEMSET]) {
        CUpti_ActivityMemset4 m = {0};
        m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
        m.bytes = bytes;
        m.correlationId = queue(s, bytes / 64, &m.start, &m.end);
        m.deviceId = 0, m.contextId = 1, m.streamId = s ? 13 : 7;
        put(&m, sizeof m);
    }
    pthread_mutex_unlock(&lock);
}
