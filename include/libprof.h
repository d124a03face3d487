/* libprof.h: annotations for programs profiled with libprof. Header-only, no link dependency:
 * each call looks up the preloaded libprof.so's function once (dlsym) and is a no-op costing a
 * load and a branch when the program runs without libprof.
 *
 *   libprof_range_push("inference"); ... libprof_range_pop();   a named block, nested freely
 *   { LIBPROF_SCOPE("decode"); ... }                           the same, popped at scope exit
 *   libprof_mark("checkpoint");                                an instant
 *   libprof_counter("queue_depth", 17);                        a counter track
 *   libprof_thread_name("worker-3");                           names the calling thread
 *   libprof_stop(); libprof_start();                           pause and resume recording
 *   libprof_reset();                                           statistics start afresh here
 *
 * Ranges appear as slices on the thread's track in the Chrome trace and as rows (count, total,
 * percentiles) in the CSV. Record them with LIBPROF_EVENTS including "annot" (the default).
 * Link with -ldl on C libraries older than glibc 2.34. Works from C and C++. */
#ifndef LIBPROF_H
#define LIBPROF_H

#ifndef _GNU_SOURCE
#define LIBPROF_UNDEF_GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#ifdef LIBPROF_UNDEF_GNU_SOURCE
#undef _GNU_SOURCE
#undef LIBPROF_UNDEF_GNU_SOURCE
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct libprof__api {
    int resolved;
    void (*range_push)(const char *);
    void (*range_pop)(void);
    void (*mark)(const char *);
    void (*counter)(const char *, double);
    void (*thread_name)(const char *);
    void (*start)(void);
    void (*stop)(void);
    void (*reset)(void);
};

/* One table per program (inline function with a static local: one instance across translation
 * units in C++; per translation unit in C, which only costs one lookup each). */
static inline struct libprof__api *libprof__api(void) {
    static struct libprof__api api;
    if (__builtin_expect(!__atomic_load_n(&api.resolved, __ATOMIC_ACQUIRE), 0)) {
        /* dlsym returns void *; the casts are the documented POSIX idiom */
        *(void **)&api.range_push = dlsym(RTLD_DEFAULT, "libprof_range_push");
        *(void **)&api.range_pop = dlsym(RTLD_DEFAULT, "libprof_range_pop");
        *(void **)&api.mark = dlsym(RTLD_DEFAULT, "libprof_mark");
        *(void **)&api.counter = dlsym(RTLD_DEFAULT, "libprof_counter");
        *(void **)&api.thread_name = dlsym(RTLD_DEFAULT, "libprof_thread_name");
        *(void **)&api.start = dlsym(RTLD_DEFAULT, "libprof_start");
        *(void **)&api.stop = dlsym(RTLD_DEFAULT, "libprof_stop");
        *(void **)&api.reset = dlsym(RTLD_DEFAULT, "libprof_reset");
        __atomic_store_n(&api.resolved, 1, __ATOMIC_RELEASE);
    }
    return &api;
}

static inline void libprof_range_push(const char *name) {
    struct libprof__api *a = libprof__api();
    if (a->range_push) a->range_push(name);
}

static inline void libprof_range_pop(void) {
    struct libprof__api *a = libprof__api();
    if (a->range_pop) a->range_pop();
}

static inline void libprof_mark(const char *name) {
    struct libprof__api *a = libprof__api();
    if (a->mark) a->mark(name);
}

static inline void libprof_counter(const char *name, double value) {
    struct libprof__api *a = libprof__api();
    if (a->counter) a->counter(name, value);
}

static inline void libprof_thread_name(const char *name) {
    struct libprof__api *a = libprof__api();
    if (a->thread_name) a->thread_name(name);
}

static inline void libprof_start(void) {
    struct libprof__api *a = libprof__api();
    if (a->start) a->start();
}

static inline void libprof_stop(void) {
    struct libprof__api *a = libprof__api();
    if (a->stop) a->stop();
}

static inline void libprof_reset(void) {
    struct libprof__api *a = libprof__api();
    if (a->reset) a->reset();
}

static inline void libprof__scope_end(int *unused) {
    (void)unused;
    libprof_range_pop();
}

#define LIBPROF__CAT2(a, b) a##b
#define LIBPROF__CAT(a, b) LIBPROF__CAT2(a, b)
/* A range from here to the end of the enclosing scope (GCC/Clang cleanup attribute). */
#define LIBPROF_SCOPE(name)                                                                            \
    __attribute__((cleanup(libprof__scope_end), unused)) int LIBPROF__CAT(libprof__scope_, __LINE__) = \
        (libprof_range_push(name), 0)

#ifdef __cplusplus
}
#endif

#endif
