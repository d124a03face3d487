/* ortrun: an application of ONNX Runtime's C API, as its bindings use it (onnxruntime-node,
 * onnxruntime-genai): the API version of the library it finds (GetVersionString), one session on
 * the model argv[1] (input "x" float [1,64], output "y") with graph optimisations off, so its
 * nodes stay as written, argv[2] runs (default 50), the release. "own PREFIX" after the count:
 * the program turns ORT's profiling on itself (EnableProfiling with that prefix, the profile
 * ended by SessionEndProfiling before the release). Prints "ok" and every y[0] summed.
 * Declarations of our own (no ORT headers): positions in the OrtApi table. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct OrtApiBase {
    const void *const *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
};
const struct OrtApiBase *OrtGetApiBase(void);

typedef void *st; /* OrtStatus* */
static const void *const *api;
#define F(i, type) ((type)api[i])
#define CHECK(x)                                                                                          \
    do {                                                                                                  \
        st s_ = (x);                                                                                      \
        if (s_) {                                                                                         \
            fprintf(stderr, "ortrun: %s: %s\n", #x, F(2, const char *(*)(st))(s_)); /* GetErrorMessage */ \
            return 1;                                                                                     \
        }                                                                                                 \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ortrun MODEL [RUNS [own PREFIX]]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 50;
    const char *own = argc > 4 && !strcmp(argv[3], "own") ? argv[4] : NULL;
    const struct OrtApiBase *base = OrtGetApiBase();
    unsigned major = 0, minor = 0;
    if (sscanf(base->GetVersionString(), "%u.%u", &major, &minor) != 2 || major != 1) return 1;
    api = base->GetApi(minor);
    if (!api) return 1;
    void *env = NULL, *opts = NULL, *sess = NULL, *mem = NULL;
    CHECK(F(3, st(*)(int, const char *, void **))(2, "ortrun", &env)); /* CreateEnv */
    CHECK(F(10, st(*)(void **))(&opts));                               /* CreateSessionOptions */
    CHECK(F(23, st(*)(void *, int))(opts, 0));                         /* SetSessionGraphOptimizationLevel */
    if (own) CHECK(F(14, st(*)(void *, const char *))(opts, own));     /* EnableProfiling */
    CHECK(F(7, st(*)(void *, const char *, void *, void **))(env, argv[1], opts, &sess)); /* CreateSession */
    CHECK(F(69, st(*)(int, int, void **))(1, 0, &mem));                                   /* CreateCpuMemoryInfo */
    float x[64], sum = 0;
    for (int i = 0; i < 64; i++) x[i] = 0.5f;
    int64_t shape[2] = {1, 64};
    for (int r = 0; r < runs; r++) {
        void *in = NULL, *out = NULL;
        CHECK(F(49, st(*)(void *, void *, size_t, const int64_t *, size_t, int, void **))(
            mem, x, sizeof x, shape, 2, 1, &in)); /* CreateTensorWithData */
        const char *in_names[] = {"x"}, *out_names[] = {"y"};
        CHECK(F(9, st(*)(void *, void *, const char *const *, void *const *, size_t, const char *const *, size_t,
                         void **))(sess, NULL, in_names, (void *const *)&in, 1, out_names, 1, &out)); /* Run */
        float *y = NULL;
        CHECK(F(51, st(*)(void *, void **))(out, (void **)&y)); /* GetTensorMutableData */
        sum += y[0];
        F(96, void (*)(void *))(out); /* ReleaseValue */
        F(96, void (*)(void *))(in);
    }
    if (own) {
        void *alloc = NULL;
        char *file = NULL;
        CHECK(F(78, st(*)(void **))(&alloc));                              /* GetAllocatorWithDefaultOptions */
        CHECK(F(110, st(*)(void *, void *, char **))(sess, alloc, &file)); /* SessionEndProfiling */
        F(76, st(*)(void *, void *))(alloc, file);                         /* AllocatorFree */
    }
    F(94, void (*)(void *))(mem);   /* ReleaseMemoryInfo */
    F(95, void (*)(void *))(sess);  /* ReleaseSession */
    F(100, void (*)(void *))(opts); /* ReleaseSessionOptions */
    F(92, void (*)(void *))(env);   /* ReleaseEnv */
    printf("ok %.3f\n", sum);
    return 0;
}
