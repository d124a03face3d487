/* torchhost: dlopen()s the library named on the command line (a fake libtorch of an unknown
 * version), calls its faketorch_work, prints "ok N". */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    int (*work)(int) = (int (*)(int))dlsym(h, "faketorch_work");
    printf("ok %d\n", work ? work(10) : -1);
    return 0;
}
