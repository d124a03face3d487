/* kernels.c: CUDA kernels' names — the registry from a kernel's host function or handle (the cuda
 * family's registration hooks, cuda.c) or CUPTI's name string (cupti.c) to its device name, and
 * that name demangled and interned at its first use. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/os.h"
#include "gpu.h"
#include "hook.h"

/* host functions and handles -> the device function's name (the registration's own string, static data of
 * the program's module), open addressing; a program registers hundreds of kernels, PyTorch
 * thousands at load: a name is interned (a trace name id) only when its kernel is first launched */
#define KNAMES 32768
static struct {
    const void *key;
    const char *mangled;
    uint32_t id; /* interned: 0 not yet */
} knames[KNAMES];

static unsigned kslot(const void *key, int add) {
    unsigned h = (unsigned)(((uintptr_t)key >> 4) * 0x9e3779b1u) % KNAMES;
    for (unsigned i = 0; i < KNAMES && key; i++, h = (h + 1) % KNAMES) {
        const void *k = __atomic_load_n(&knames[h].key, __ATOMIC_ACQUIRE);
        if (k == key) return h;
        if (!k) {
            if (!add) return KNAMES;
            if (__atomic_compare_exchange_n(&knames[h].key, &k, key, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) || k == key)
                return h;
        }
    }
    return KNAMES;
}

void lpr_kernel_put(const void *key, const char *mangled) {
    unsigned h = mangled ? kslot(key, 1) : KNAMES;
    if (h < KNAMES) __atomic_store_n(&knames[h].mangled, mangled, __ATOMIC_RELEASE);
}

const char *lpr_kernel_mangled(const void *key) {
    unsigned h = kslot(key, 0);
    return h < KNAMES ? __atomic_load_n(&knames[h].mangled, __ATOMIC_ACQUIRE) : NULL;
}

/* The name id of a device function's mangled name, demangled when the process has a C++ runtime:
 * looked for until found, also where it is loaded only as a dependency of a library opened
 * RTLD_LOCAL (Python's extension modules, PyTorch's), which RTLD_DEFAULT does not search. */
static uint32_t kernel_name(const char *mangled) {
    static char *(*demangle)(const char *, char *, size_t *, int *);
    if (!demangle) {
        void *f = lpr_dlsym(RTLD_DEFAULT, "__cxa_demangle");
        void *h = f ? NULL : LPR_REAL(dlopen)("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (h) f = lpr_dlsym(h, "__cxa_demangle");
        demangle = (char *(*)(const char *, char *, size_t *, int *))f;
    }
    int st = -1;
    char *d = demangle && mangled[0] == '_' && mangled[1] == 'Z' ? demangle(mangled, NULL, NULL, &st) : NULL;
    uint32_t id = lpr_name_id(st == 0 && d ? d : mangled);
    lp_os_free(d); /* the real free: __cxa_demangle allocated it while libprof held the guard */
    return id;
}

/* A launched kernel's name id (the guard held by the caller). */
uint32_t lpr_kernel_id(const void *key) {
    unsigned h = kslot(key, 0);
    if (h >= KNAMES) return lpr_name_id("<unnamed kernel>");
    uint32_t id = __atomic_load_n(&knames[h].id, __ATOMIC_ACQUIRE);
    const char *m = __atomic_load_n(&knames[h].mangled, __ATOMIC_ACQUIRE);
    if (!id && m) __atomic_store_n(&knames[h].id, id = kernel_name(m), __ATOMIC_RELEASE);
    return id ? id : lpr_name_id("<unnamed kernel>");
}

uint32_t lpr_cuda_name_id(const char *mangled) {
    lpr_kernel_put(mangled, mangled); /* keyed by the string itself: CUPTI's names are shared by a kernel's records */
    return lpr_kernel_id(mangled);
}
