/* pyembed: an application that embeds CPython through dlopen (local scope, as plugins and
 * bindings do): loads the libpython3.X.so given as argv[1], runs the script argv[2] (its sys.argv:
 * the script twice) with the interpreter, finalises. Nothing of Python is linked in. Prints "embedded ok". */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pyembed LIBPYTHON SCRIPT\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    void (*init)(int) = (void (*)(int))dlsym(h, "Py_InitializeEx");
    int (*run)(const char *) = (int (*)(const char *))dlsym(h, "PyRun_SimpleString");
    int (*fini)(void) = (int (*)(void))dlsym(h, "Py_FinalizeEx");
    if (!init || !run || !fini) return 1;
    init(0);
    char code[8192];
    snprintf(code, sizeof code,
             "import sys\nsys.argv = ['pyembed', '%s', '%s']\nexec(compile(open('%s').read(), '%s', 'exec'))\n",
             argv[2], argv[2], argv[2], argv[2]);
    int rc = run(code);
    fini();
    printf("embedded %s\n", rc == 0 ? "ok" : "failed");
    return rc != 0;
}
