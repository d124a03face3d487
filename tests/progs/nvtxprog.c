/* nvtxprog: a C program annotated with NVTX 3 (header-only, from the CUDA toolkit; no GPU, no
 * CUDA library): three "step" ranges, each with a nested "load" and "compute" and a mark
 * between them; two ranges of a domain "io" with a registered message; three start/end ranges
 * that overlap and cross threads ("transfer A" started here and ended by the worker, "transfer
 * B" of domain "io" around the worker's life, "transfer C" started by the worker and ended here);
 * a thread that names itself "nvtx worker" (nvtxNameOsThreadA) and opens a range "worker step".
 * Prints the worker's kernel name (which naming it through NVTX must not change) and "done" (not
 * the levels NVTX returns: they are -1 with no tool attached, the depth with one). */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void work(long ns) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

static nvtxRangeId_t transfer_a, transfer_c;

static void *worker(void *arg) {
    (void)arg;
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "nvtx worker");
    nvtxRangePushA("worker step");
    work(100000);
    nvtxRangeEnd(transfer_a);
    transfer_c = nvtxRangeStartA("transfer C");
    work(100000);
    nvtxRangePop();
    char comm[16] = {0};
    prctl(PR_GET_NAME, comm);
    printf("worker's kernel name: %s\n", comm);
    return NULL;
}

int main(void) {
    for (int i = 0; i < 3; i++) {
        nvtxRangePushA("step");
        nvtxRangePushA("load");
        work(200000);
        nvtxRangePop();
        nvtxMarkA("loaded");
        nvtxEventAttributes_t a = {0};
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = "compute";
        nvtxRangePushEx(&a);
        work(300000);
        nvtxRangePop();
        nvtxRangePop();
    }
    nvtxDomainHandle_t io = nvtxDomainCreateA("io");
    nvtxStringHandle_t rd = nvtxDomainRegisterStringA(io, "read block");
    for (int i = 0; i < 2; i++) {
        nvtxEventAttributes_t a = {0};
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = rd;
        nvtxDomainRangePushEx(io, &a);
        work(100000);
        nvtxDomainRangePop(io);
    }
    transfer_a = nvtxRangeStartA("transfer A");
    work(50000);
    nvtxEventAttributes_t b = {0};
    b.version = NVTX_VERSION;
    b.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    b.messageType = NVTX_MESSAGE_TYPE_ASCII;
    b.message.ascii = "transfer B";
    nvtxRangeId_t transfer_b = nvtxDomainRangeStartEx(io, &b);
    pthread_t th;
    if (pthread_create(&th, NULL, worker, NULL) == 0) pthread_join(th, NULL);
    work(50000);
    nvtxDomainRangeEnd(io, transfer_b);
    nvtxRangeEnd(transfer_c);
    printf("done\n");
    return 0;
}
