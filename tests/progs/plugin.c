/* plugin: a shared library that allocates in its constructor and in plugin_alloc(), for the
 * dlclose test (tests/progs/dlhost.c). Built as build/progs/libplugin.so. */
#include <stdlib.h>

static void *ctor_block;

__attribute__((constructor)) static void plugin_init(void) { ctor_block = malloc(3001); }
__attribute__((destructor)) static void plugin_fini(void) { free(ctor_block); }

void *plugin_alloc(int n);
void *plugin_alloc(int n) {
    void *keep = NULL;
    for (int i = 0; i < n; i++) {
        void *p = malloc(3333);
        if (i == 0)
            keep = p;
        else
            free(p);
    }
    return keep;
}
