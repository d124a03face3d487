/* ortc: a C program linked against ONNX Runtime that asks for API version 10 (ORT 1.10), older
 * than the library: loads the model argv[1] (input "x" float [1,64], output "y"), runs it 3
 * times, releases everything. Prints "ok N" with y[0] summed. Declarations of our own (no ORT
 * headers): OrtApi positions of version 1.
 * Built a second time as ortdl (-DORT_DLOPEN): the library (argv[2]) is dlopen'ed with local
 * scope and its OrtGetApiBase asked of dlsym, as the C# and Java bindings do. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

struct OrtApiBase {
    const void *const *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
};
const struct OrtApiBase *OrtGetApiBase(void);

typedef void *st; /* OrtStatus* */
#define F(i, type) ((type)api[i])

int main(int argc, char **argv) {
    if (argc < 2) return 2;
#ifdef ORT_DLOPEN
    if (argc < 3) return 2;
    void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    const struct OrtApiBase *(*entry)(void) =
        lib ? (const struct OrtApiBase *(*)(void))dlsym(lib, "OrtGetApiBase") : NULL;
    if (!entry) return 1;
    const void *const *api = entry()->GetApi(10);
#else
    const void *const *api = OrtGetApiBase()->GetApi(10);
#endif
    if (!api) return 1;
    void *env = NULL, *opts = NULL, *sess = NULL, *mem = NULL;
    if (F(3, st(*)(int, const char *, void **))(2, "ortc", &env)) return 1; /* CreateEnv */
    if (F(10, st(*)(void **))(&opts)) return 1;                             /* CreateSessionOptions */
    if (F(7, st(*)(void *, const char *, void *, void **))(env, argv[1], opts, &sess)) return 1; /* CreateSession */
    if (F(69, st(*)(int, int, void **))(1, 0, &mem)) return 1; /* CreateCpuMemoryInfo */
    float x[64], sum = 0;
    for (int i = 0; i < 64; i++) x[i] = 0.5f;
    int64_t shape[2] = {1, 64};
    for (int r = 0; r < 3; r++) {
        void *in = NULL, *out = NULL;
        if (F(49, st(*)(void *, void *, size_t, const int64_t *, size_t, int, void **))(mem, x, sizeof x, shape, 2, 1,
                                                                                        &in)) /* CreateTensorWithData */
            return 1;
        const char *in_names[] = {"x"}, *out_names[] = {"y"};
        if (F(9, st(*)(void *, void *, const char *const *, void *const *, size_t, const char *const *, size_t,
                       void **))(sess, NULL, in_names, (void *const *)&in, 1, out_names, 1, &out)) /* Run */
            return 1;
        float *y = NULL;
        if (F(51, st(*)(void *, void **))(out, (void **)&y)) return 1; /* GetTensorMutableData */
        sum += y[0];
        F(96, void (*)(void *))(out); /* ReleaseValue */
        F(96, void (*)(void *))(in);
    }
    F(94, void (*)(void *))(mem);   /* ReleaseMemoryInfo */
    F(95, void (*)(void *))(sess);  /* ReleaseSession */
    F(100, void (*)(void *))(opts); /* ReleaseSessionOptions */
    F(92, void (*)(void *))(env);   /* ReleaseEnv */
    printf("ok %.3f\n", sum);
    return 0;
}
