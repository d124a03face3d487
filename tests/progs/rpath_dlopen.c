/* rpath_dlopen: dlopen()s "libplugin.so" by its bare name, found only through this executable's
 * own DT_RUNPATH ($ORIGIN, set by the Makefile). Under libprof the dlopen is interposed, so
 * glibc would search libprof's RUNPATH instead; libprof must search the caller's. Prints "ok". */
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
    void *h = dlopen("libplugin.so", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    dlclose(h);
    puts("ok");
    return 0;
}
