/* The CUDA runtime (the cuda family), with no GPU on the machine: tests/progs/cudaprog (nvcc
 * -cudart shared) runs as it does without libprof, and every call it makes is a slice with the
 * error CUDA returned; each kernel launch is named by its __global__ function (demangled), with
 * its grid, block and shared memory. On a machine with a GPU the same test checks the same
 * things with error 0. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(cuda, .timeout = 120);

static const char *str(cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}
static double num(cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The error the program printed for `call` ("call N" lines), -1 if none. */
static int printed(const char *out, const char *call) {
    char *pat = strfmt("\n%s ", call);
    const char *p = strstr(out, pat);
    if (!p && !strncmp(out, pat + 1, strlen(pat + 1))) p = out - 1;
    int v = p ? atoi(p + strlen(pat)) : -1;
    free(pat);
    return v;
}

Test(cuda, calls_and_kernels_with_their_errors) {
    if (access(PROG("cudaprog"), X_OK) != 0) cr_skip_test("no CUDA toolkit at /usr/local/cuda");
    char *dir = make_tmpdir(), *trace = strfmt("%s/c.json", dir);
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){PROG("cudaprog"), NULL});
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", trace), NULL},
             (const char *[]){PROG("cudaprog"), NULL});
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err);
    int err = printed(r.out, "cudaMalloc");
    cr_assert_geq(err, 0, "%s", r.out);
    char *e;
    cJSON *sum = check_trace_py(trace, &e);
    cr_assert_not_null(sum, "%s", e);
    cJSON_Delete(sum);
    cJSON *j = load_json(trace), *ev;
    cr_assert_not_null(j);
    int scale = 0, add = 0, calls = 0, wrong = 0;
    static const char *const each[] = {"cudaMalloc",
                                       "cudaMemcpy",
                                       "cudaMemsetAsync",
                                       "cudaMemcpyAsync",
                                       "cudaStreamSynchronize",
                                       "cudaDeviceSynchronize",
                                       "cudaFree"};
    int seen[7] = {0};
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(str(ev, "cat"), "cuda")) continue;
        cJSON *a = cJSON_GetObjectItem(ev, "args");
        const char *name = str(ev, "name");
        calls++;
        if (!strcmp(name, "scale(float*, float, int)")) {
            scale++;
            cr_expect(num(a, "grid_x") == 4096 && num(a, "block_x") == 256 && num(a, "shared_bytes") == 0);
            wrong += (int)num(a, "error") != printed(r.out, "scale");
        } else if (!strcmp(name, "add_one(float*, int)")) {
            add++;
            cr_expect(num(a, "grid_x") == 1024 && num(a, "block_x") == 1024 && num(a, "shared_bytes") == 128);
            wrong += (int)num(a, "error") != printed(r.out, "add_one");
        }
        for (int k = 0; k < 7; k++)
            if (!strcmp(name, each[k])) {
                seen[k]++;
                wrong += (int)num(a, "error") != printed(r.out, each[k]);
            }
        if (!strcmp(name, "cudaMemcpy")) {
            cr_expect_eq(num(a, "bytes"), 4194304);
            cr_expect_str_eq(str(a, "direction"), "host to device");
        }
        if (!strcmp(name, "cudaMemcpyAsync")) cr_expect_str_eq(str(a, "direction"), "device to host");
        if (!strcmp(name, "cudaMemsetAsync")) cr_expect_eq(num(a, "bytes"), 2097152);
    }
    cr_expect_eq(scale, 3);
    cr_expect_eq(add, 2);
    for (int k = 0; k < 7; k++) cr_expect_eq(seen[k], 1, "%s recorded %d times", each[k], seen[k]);
    cr_expect_eq(wrong, 0, "%d calls recorded with another error than the program got", wrong);
    cr_expect_eq(calls, 12);
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&r);
}
