/* ortapi: a C program linked against ONNX Runtime that uses the API entries beyond version 1
 * (API version 16, ORT 1.16): execution providers appended to the session options (argv[2], a
 * comma-separated list, "-" for none; each through SessionOptionsAppendExecutionProvider, the
 * ones this build lacks fail and are reported), sessions created with a prepacked-weights
 * container from the file argv[1] and from its bytes in memory, runs through an IoBinding
 * (RunWithBinding, 2) and RunAsync (2, waited for), then the releases. The model: input "x" float
 * [1,64], output "y". Prints the appended providers and "ok" with every y[0] summed.
 * Declarations of our own (no ORT headers): positions in the OrtApi table. */
#include <pthread.h>
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
            fprintf(stderr, "ortapi: %s: %s\n", #x, F(2, const char *(*)(st))(s_)); /* GetErrorMessage */ \
            return 1;                                                                                     \
        }                                                                                                 \
    } while (0)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int async_done;
static float async_sum;

static void on_done(void *arg, void **outputs, size_t n, st status) {
    (void)arg;
    float *y = NULL;
    if (!status && n == 1 && !F(51, st(*)(void *, void **))(outputs[0], (void **)&y)) async_sum += y[0];
    if (n == 1) F(96, void (*)(void *))(outputs[0]); /* ReleaseValue */
    pthread_mutex_lock(&mu);
    async_done++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    api = OrtGetApiBase()->GetApi(16);
    if (!api) return 1;
    void *env = NULL, *opts = NULL, *sess = NULL, *sess2 = NULL, *mem = NULL, *pack = NULL;
    CHECK(F(3, st(*)(int, const char *, void **))(2, "ortapi", &env)); /* CreateEnv */
    CHECK(F(10, st(*)(void **))(&opts));                               /* CreateSessionOptions */
    if (strcmp(argv[2], "-")) {
        char *list = strdup(argv[2]);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            st s = F(216, st(*)(void *, const char *, const char *const *, const char *const *, size_t))(opts, p, NULL,
                                                                                                         NULL, 0);
            printf("provider %s %s\n", p, s ? "refused" : "appended");
            if (s) F(93, void (*)(st))(s); /* ReleaseStatus */
        }
        free(list);
    }
    CHECK(F(166, st(*)(void **))(&pack)); /* CreatePrepackedWeightsContainer */
    CHECK(F(168, st(*)(void *, const char *, void *, void *, void **))(env, argv[1], opts, pack,
                                                                       &sess)); /* ...WithPrepackedWeightsContainer */
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 1;
    static char model[1 << 20];
    size_t len = fread(model, 1, sizeof model, f);
    fclose(f);
    CHECK(F(169, st(*)(void *, const void *, size_t, void *, void *, void **))(env, model, len, opts, pack, &sess2));
    CHECK(F(69, st(*)(int, int, void **))(1, 0, &mem)); /* CreateCpuMemoryInfo */
    float x[64], sum = 0;
    for (int i = 0; i < 64; i++) x[i] = 0.5f;
    int64_t shape[2] = {1, 64};
    void *in = NULL;
    CHECK(F(49, st(*)(void *, void *, size_t, const int64_t *, size_t, int, void **))(mem, x, sizeof x, shape, 2, 1,
                                                                                      &in)); /* CreateTensorWithData */
    /* IoBinding on the second session */
    void *bind = NULL, *alloc = NULL;
    CHECK(F(134, st(*)(void *, void **))(sess2, &bind));                      /* CreateIoBinding */
    CHECK(F(136, st(*)(void *, const char *, const void *))(bind, "x", in));  /* BindInput */
    CHECK(F(138, st(*)(void *, const char *, const void *))(bind, "y", mem)); /* BindOutputToDevice */
    CHECK(F(78, st(*)(void **))(&alloc));                                     /* GetAllocatorWithDefaultOptions */
    for (int r = 0; r < 2; r++) {
        CHECK(F(133, st(*)(void *, const void *, const void *))(sess2, NULL, bind)); /* RunWithBinding */
        void **vals = NULL;
        size_t n = 0;
        CHECK(
            F(140, st(*)(const void *, void *, void ***, size_t *))(bind, alloc, &vals, &n)); /* GetBoundOutputValues */
        float *y = NULL;
        if (n != 1) return 1;
        CHECK(F(51, st(*)(void *, void **))(vals[0], (void **)&y));
        sum += y[0];
        F(96, void (*)(void *))(vals[0]);
        F(76, st(*)(void *, void *))(alloc, vals); /* AllocatorFree */
    }
    F(135, void (*)(void *))(bind); /* ReleaseIoBinding */
    /* RunAsync on the first, one at a time */
    const char *in_names[] = {"x"}, *out_names[] = {"y"};
    for (int r = 0; r < 2; r++) {
        void *out[1] = {NULL};
        CHECK(F(260, st(*)(void *, const void *, const char *const *, const void *const *, size_t, const char *const *,
                           size_t, void **, void (*)(void *, void **, size_t, st), void *))(
            sess, NULL, in_names, (const void *const *)&in, 1, out_names, 1, out, on_done, NULL)); /* RunAsync */
        pthread_mutex_lock(&mu);
        while (async_done < r + 1) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
    }
    F(96, void (*)(void *))(in);
    F(94, void (*)(void *))(mem);   /* ReleaseMemoryInfo */
    F(95, void (*)(void *))(sess);  /* ReleaseSession */
    F(95, void (*)(void *))(sess2); /* ReleaseSession */
    F(167, void (*)(void *))(pack); /* ReleasePrepackedWeightsContainer */
    F(100, void (*)(void *))(opts); /* ReleaseSessionOptions */
    F(92, void (*)(void *))(env);   /* ReleaseEnv */
    printf("ok %.3f %.3f\n", sum, async_sum);
    return 0;
}
