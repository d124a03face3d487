/* dl.c: the dl family — dlopen and dlclose, timed, with the path and flags: the "model loading"
 * time of an inference program, and the moment each plugin arrived.
 *
 * Two things make an interposed dlopen differ from the real one, and both are undone here:
 * - RTLD_DEEPBIND would let the library bind to its own malloc/free before libprof's, so its
 *   allocations would bypass the profiler (and mix with blocks libprof tracks). The flag is
 *   dropped, with one warning, as heaptrack does.
 * - glibc searches a bare library name ("libfoo.so") in the DT_RUNPATH/DT_RPATH of the object
 *   that called dlopen — which is now libprof. When the real dlopen fails for a bare name, the
 *   caller's own RUNPATH/RPATH (with $ORIGIN) is searched, so the program finds what it would
 *   have found without libprof. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hook.h"

#define REALS(X) X(dlopen) X(dlclose)
REALS(LP_REAL_SLOT)

static int deepbind_warned;

/* Try `name` in each directory of `list` (colon-separated, $ORIGIN / ${ORIGIN} = `origin`). */
static void *try_dirs(const char *list, const char *origin, const char *name, int flags) {
    char dir[PATH_MAX], path[PATH_MAX];
    while (list && *list) {
        const char *end = strchr(list, ':');
        size_t n = end ? (size_t)(end - list) : strlen(list);
        size_t o = 0;
        for (size_t i = 0; i < n && o < sizeof dir - 1;) {
            if (!strncmp(list + i, "$ORIGIN", 7) || !strncmp(list + i, "${ORIGIN}", 9)) {
                o += (size_t)snprintf(dir + o, sizeof dir - o, "%s", origin);
                if (o >= sizeof dir) o = sizeof dir - 1;
                i += list[i + 1] == '{' ? 9 : 7;
            } else {
                dir[o++] = list[i++];
            }
        }
        dir[o] = '\0';
        if (o && snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path && access(path, F_OK) == 0) {
            void *h = LP_REAL(dlopen)(path, flags);
            if (h) return h;
        }
        list = end ? end + 1 : NULL;
    }
    return NULL;
}

/* The caller's RUNPATH, or RPATH when it has none. */
static void *search_caller(const void *caller, const char *name, int flags) {
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_ld) return NULL;
    const char *strtab = NULL;
    ElfW(Addr) runpath = 0, rpath = 0;
    int has_runpath = 0, has_rpath = 0;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_STRTAB)
            strtab = (const char *)d->d_un.d_ptr;
        else if (d->d_tag == DT_RUNPATH) {
            runpath = d->d_un.d_val;
            has_runpath = 1;
        } else if (d->d_tag == DT_RPATH) {
            rpath = d->d_un.d_val;
            has_rpath = 1;
        }
    }
    if (!strtab || (!has_runpath && !has_rpath)) return NULL;
    char origin[PATH_MAX];
    const char *obj = lm->l_name && lm->l_name[0] ? lm->l_name : NULL;
    if (obj) {
        snprintf(origin, sizeof origin, "%s", obj);
    } else { /* the main program */
        ssize_t n = readlink("/proc/self/exe", origin, sizeof origin - 1);
        origin[n > 0 ? n : 0] = '\0';
    }
    char *slash = strrchr(origin, '/');
    if (slash) *slash = '\0';
    return try_dirs(strtab + (has_runpath ? runpath : rpath), origin, name, flags);
}

LP_EXPORT void *dlopen(const char *path, int flags) {
    const void *caller = __builtin_return_address(0);
    if (!LP_REAL(dlopen)) return NULL;
#ifdef RTLD_DEEPBIND
    if (flags & RTLD_DEEPBIND) {
        flags &= ~RTLD_DEEPBIND;
        if (!__atomic_exchange_n(&deepbind_warned, 1, __ATOMIC_RELAXED))
            lpr_warn("dlopen(\"%s\", RTLD_DEEPBIND): flag dropped so that the library's allocations stay visible",
                     path ? path : "NULL");
    }
#endif
    struct lpr_tls *t = lpr_call_begin(LP_FAM_DL);
    uint64_t t0 = t ? lpr_ticks() : 0;
    lpr_loader_enter();
    void *h = LP_REAL(dlopen)(path, flags);
    lpr_loader_leave();
    if (!h && path && !strchr(path, '/')) {
        int saved = errno;
        lpr_loader_enter();
        h = search_caller(caller, path, flags);
        if (!h) LP_REAL(dlopen)(path, flags); /* leave dlerror() as the plain call left it */
        lpr_loader_leave();
        errno = saved;
    }
    if (h && lpr_spool_on) { /* new objects join the module map, for symbolising stacks; an
                              * interpreter embedded through dlopen is found */
        uint8_t g = lpr_guard_hold(&lpr_tls);
        if (lpr_stack_depth || lpr_sample_signal()) lpr_modules_write();
        if (!lpr_py_on) lpr_python_detect();
        lpr_guard_restore(&lpr_tls, g);
    }
    if (t) {
        uint64_t a[2] = {(uint64_t)(unsigned)flags, (uint64_t)(uintptr_t)h};
        lpr_call_record(t, LP_CALL_DLOPEN, t0, lpr_ticks(), 2, a, path, path ? strlen(path) : 0);
    }
    /* libtorch's initialisers have run once the outermost dlopen returns (not before: the
     * operator callback is registered then, hooks/torch.c); a Python extension module has been
     * loaded by then too */
    if (h && lpr_spool_on && !lpr_tls.in_loader && !lpr_tls.guard) {
        lpr_torch_detect();
        lpr_python_known_loaded(path); /* a runtime seen through its Python functions (hooks/python.c) */
    }
    return h;
}

LP_EXPORT int dlclose(void *h) {
    if (!LP_REAL(dlclose)) return -1;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_DL);
    uint64_t t0 = t ? lpr_ticks() : 0;
    lpr_loader_enter();
    int r = LP_REAL(dlclose)(h);
    lpr_loader_leave();
    if (lpr_sample_signal()) lpr_walk_forget(); /* the sampler's rules for code that went */
    if (t) {
        uint64_t a[2] = {(uint64_t)(uintptr_t)h, (uint64_t)(int64_t)r};
        lpr_call_record(t, LP_CALL_DLCLOSE, t0, lpr_ticks(), 2, a, NULL, 0);
    }
    return r;
}

/* dlsym: lookups of the names libprof itself exports as hooks go where they would have gone
 * without libprof (ONNX Runtime's entry: to libprof's recorded table, hooks/ort.c; an MPI
 * function: to the MPI library's, hooks/mpi.c; CUPTI's registration: to libprof's, which hands
 * CUPTI over, hooks/cupti.c). Every other lookup goes on to the C library's
 * dlsym as a tail call, so the return address it sees — what RTLD_NEXT is relative to — is the
 * caller's, not libprof's. libprof's own lookups call the C library's directly (lpr_dlsym). */
LP_EXPORT void *dlsym(void *handle, const char *name) {
    if (LP_UNLIKELY(name[0] == 'O' && !strcmp(name, "OrtGetApiBase")) && handle != RTLD_NEXT && handle != RTLD_DEFAULT)
        return lpr_ort_dlsym(handle, name);
    if (LP_UNLIKELY(name[0] == 'M' && name[1] == 'P' && name[2] == 'I' && name[3] == '_') && handle != RTLD_NEXT)
        return lpr_mpi_dlsym(handle, name);
    if (LP_UNLIKELY(name[0] == 'c' && name[1] == 'u' && name[2] == 'p' && name[3] == 't') && handle != RTLD_NEXT)
        return lpr_cupti_dlsym(handle, name);
    return lpr_dlsym_real()(handle, name);
}

/* dl_iterate_phdr: the program's calls too mark the thread inside the loader (core/real.c). */
LP_EXPORT int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data) {
    return lpr_dl_iterate(cb, data);
}
