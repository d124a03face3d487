/* dlhost: dlopen()s build/progs/libplugin.so, lets it allocate, dlclose()s it, then frees the
 * block it kept — twice over. Prints "ok 2". Plugin calls: 2 x (1 + 5) malloc of its own. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libplugin.so", argc > 1 ? argv[1] : ".");
    int rounds = 0;
    for (int r = 0; r < 2; r++) {
        void *h = dlopen(path, RTLD_NOW);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        void *(*fn)(int) = (void *(*)(int))dlsym(h, "plugin_alloc");
        void *kept = fn(5);
        dlclose(h);
        free(kept); /* a block from code that is gone */
        rounds++;
    }
    printf("ok %d\n", rounds);
    return 0;
}
