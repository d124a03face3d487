/* bound: which object the program's pthread_mutex_lock and read are bound to, after libprof has
 * started (its first hook: the malloc below). With libprof off for good they must be the C
 * library's again (core/unhook.c); recording, libprof's. Prints "<object> <object>". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *where(void *f) {
    Dl_info i;
    if (!dladdr(f, &i) || !i.dli_fname) return "?";
    const char *b = strrchr(i.dli_fname, '/');
    return b ? b + 1 : i.dli_fname;
}

int main(void) {
    free(malloc(10));
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int (*volatile lock)(pthread_mutex_t *) = pthread_mutex_lock;
    ssize_t (*volatile rd)(int, void *, size_t) = read;
    lock(&m);
    printf("%s %s\n", where((void *)lock), where((void *)rd));
    return 0;
}
