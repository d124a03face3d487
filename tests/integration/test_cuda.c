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
    /* with no GPU, CUPTI (the toolkit's, loaded at the first call) cannot trace: the trace says so */
    if (err != 0) cr_expect(notes_with(trace, "no GPU times"), "a note says why there are no GPU times");
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&r);
}

/* NVTX through its injection (NVTX_INJECTION64_PATH names libprof.so, as the libprof command sets
 * it): every push/pop range of a C program a slice, nested as called, marks inside them, a
 * domain's ranges with their registered message; start/end ranges — overlapping, ended on
 * another thread than the one that started them, of a domain — as one async slice each ("b" and
 * "e" with an id), on the thread that started them. */
Test(cuda, nvtx_ranges_of_a_c_program) {
    if (access(PROG("nvtxprog"), X_OK) != 0) cr_skip_test("no NVTX headers at /usr/local/cuda/include/nvtx3");
    char *dir = make_tmpdir(), *trace = strfmt("%s/n.json", dir);
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){PROG("nvtxprog"), NULL});
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, "NVTX_INJECTION64_PATH=" PRELOAD,
                              strfmt("LIBPROF_OUTPUT=%s", trace), NULL},
             (const char *[]){PROG("nvtxprog"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err);
    char *e;
    cJSON *sum = check_trace_py(trace, &e); /* nested as called: the strict reader checks it */
    cr_assert_not_null(sum, "%s", e);
    cJSON_Delete(sum);
    cJSON *j = load_json(trace), *ev;
    cr_assert_not_null(j);
    int step = 0, load = 0, compute = 0, marks = 0, io = 0, inside = 0;
    double s0[3] = {0}, s1[3] = {0};
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(str(ev, "cat"), "nvtx")) continue;
        cJSON *a = cJSON_GetObjectItem(ev, "args");
        const char *name = str(ev, "name");
        double ts = num(ev, "ts"), end = ts + num(ev, "dur");
        if (!strcmp(name, "step")) {
            step++;
            cr_expect_eq(num(a, "depth"), 0);
            cr_expect_geq(num(ev, "dur"), 500);
            if (step <= 3) {
                s0[step - 1] = ts;
                s1[step - 1] = end;
            }
        } else if (!strcmp(name, "load") || !strcmp(name, "compute")) {
            load += !strcmp(name, "load");
            compute += !strcmp(name, "compute");
            cr_expect_eq(num(a, "depth"), 1);
        } else if (!strcmp(name, "loaded")) {
            marks++;
            cr_expect_eq(num(ev, "dur"), 0);
        } else if (!strcmp(name, "read block")) {
            io++;
            cr_expect_str_eq(str(a, "domain"), "io");
        }
    }
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) { /* each inner one inside a step */
        const char *name = str(ev, "name");
        double ts = num(ev, "ts"), end = ts + num(ev, "dur");
        if (strcmp(str(ev, "cat"), "nvtx") || !strcmp(name, "step") || !strcmp(name, "read block")) continue;
        for (int k = 0; k < 3; k++) inside += ts >= s0[k] && end <= s1[k];
    }
    cr_expect_eq(step, 3);
    cr_expect_eq(load, 3);
    cr_expect_eq(compute, 3);
    cr_expect_eq(marks, 3);
    cr_expect_eq(io, 2);
    cr_expect_eq(inside, 9, "%d of the 9 inner ranges and marks inside their step", inside);
    /* the three start/end ranges: a "b" and an "e" each, paired by id, on the starting thread */
    const char *names[3] = {"transfer A", "transfer B", "transfer C"};
    double b_ts[3] = {-1, -1, -1}, e_ts[3] = {-1, -1, -1}, b_tid[3] = {0}, ended_on[3] = {0}, main_tid = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        const char *ph = str(ev, "ph");
        if (!strcmp(str(ev, "name"), "step")) main_tid = num(ev, "tid");
        if (strcmp(str(ev, "cat"), "nvtx") || (strcmp(ph, "b") && strcmp(ph, "e"))) continue;
        for (int k = 0; k < 3; k++)
            if (!strcmp(str(ev, "name"), names[k])) {
                cr_expect(cJSON_GetObjectItem(ev, "id") != NULL, "%s: an id", names[k]);
                if (!strcmp(ph, "b")) {
                    b_ts[k] = num(ev, "ts"), b_tid[k] = num(ev, "tid");
                    cJSON *a = cJSON_GetObjectItem(ev, "args");
                    ended_on[k] = num(a, "ended_on_thread");
                    if (k == 1) cr_expect_str_eq(str(a, "domain"), "io");
                } else {
                    e_ts[k] = num(ev, "ts");
                }
            }
    }
    for (int k = 0; k < 3; k++) cr_expect(b_ts[k] >= 0 && e_ts[k] > b_ts[k], "%s: one async slice", names[k]);
    cr_expect(b_ts[0] < b_ts[1] && b_ts[1] < e_ts[0] && b_ts[2] < e_ts[1] && e_ts[1] < e_ts[2], "they overlap");
    cr_expect_eq(b_tid[0], main_tid, "transfer A started on the main thread");
    cr_expect(ended_on[0] != main_tid && ended_on[0] == b_tid[2], "transfer A ended by the worker, which started C");
    cr_expect_eq(ended_on[2], main_tid, "transfer C ended on the main thread");
    cr_expect_eq(notes_with(trace, "start/end ranges"), 0);
    /* the thread named through NVTX: that name in the trace, its range on it; its kernel name is
     * the program's (printed: the same as without libprof, compared above) */
    double worker = -1, ranged = -1;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (!strcmp(str(ev, "ph"), "M") && !strcmp(str(ev, "name"), "thread_name") &&
            !strcmp(str(cJSON_GetObjectItem(ev, "args"), "name"), "nvtx worker"))
            worker = num(ev, "tid");
        if (!strcmp(str(ev, "name"), "worker step")) ranged = num(ev, "tid");
    }
    cr_expect(worker > 0, "the thread named \"nvtx worker\" in the trace");
    cr_expect_eq(ranged, worker, "its range on it");
    cr_expect(strstr(r.out, "worker's kernel name: nvtxprog\n"), "%s", r.out);
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&r);
}

/* torch.cuda.nvtx (PyTorch 2.x of the project's environment, a CUDA build, no GPU): its pushes,
 * pops, `with range()` and marks, around the operators they hold. */
Test(cuda, nvtx_from_torch) {
    const char *py = LP_VENV "/bin/python3";
    struct run chk;
    run_prog(&chk, NULL, NULL, (const char *[]){py, "-c", "import torch.cuda.nvtx", NULL});
    if (chk.status != 0) cr_skip_test("no torch in the project's environment " LP_VENV);
    run_free(&chk);
    char *dir = make_tmpdir(), *trace = strfmt("%s/t.json", dir);
    const char *code = "import torch\n"
                       "for i in range(3):\n"
                       "    torch.cuda.nvtx.range_push('train step')\n"
                       "    with torch.cuda.nvtx.range('forward'):\n"
                       "        torch.ones(64, 64) @ torch.ones(64, 64)\n"
                       "    torch.cuda.nvtx.mark('after forward')\n"
                       "    torch.cuda.nvtx.range_pop()\n"
                       "print('done')\n";
    struct run r;
    run_prog(&r, dir,
             (const char *[]){"LD_PRELOAD=" PRELOAD, "NVTX_INJECTION64_PATH=" PRELOAD,
                              strfmt("LIBPROF_OUTPUT=%s", trace), NULL},
             (const char *[]){py, "-c", code, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "done\n");
    cJSON *j = load_json(trace), *ev;
    cr_assert_not_null(j);
    int step = 0, fwd = 0, mark = 0, mm_in_fwd = 0;
    double f0[3], f1[3];
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        const char *name = str(ev, "name");
        if (!strcmp(str(ev, "cat"), "nvtx")) {
            step += !strcmp(name, "train step");
            mark += !strcmp(name, "after forward");
            if (!strcmp(name, "forward") && fwd < 3) {
                f0[fwd] = num(ev, "ts");
                f1[fwd] = f0[fwd] + num(ev, "dur");
                fwd++;
            }
        }
    }
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(str(ev, "name"), "aten::mm")) continue;
        for (int k = 0; k < fwd; k++) mm_in_fwd += num(ev, "ts") >= f0[k] && num(ev, "ts") <= f1[k];
    }
    cr_expect_eq(step, 3);
    cr_expect_eq(fwd, 3);
    cr_expect_eq(mark, 3);
    cr_expect_eq(mm_in_fwd, 3, "the GEMM inside each forward range: %d", mm_in_fwd);
    cJSON_Delete(j);
    run_free(&r);
}

/* Device memory over time, with a stand-in for the CUDA runtime whose calls succeed
 * (build/progs/fakecuda: CI has no GPU): cudaprog's one 4 MiB buffer is the peak, freed before
 * exit; the counter track goes up to it and back to 0; the site is the program's main. */
Test(cuda, device_memory_over_time) {
    if (access(PROG("fakecuda/libcudart.so.13"), R_OK) != 0 || access(PROG("cudaprog"), X_OK) != 0)
        cr_skip_test("no CUDA toolkit at /usr/local/cuda");
    char *dir = make_tmpdir(), *trace = strfmt("%s/m.json", dir), *lib = strfmt("LD_LIBRARY_PATH=%s", PROG("fakecuda"));
    struct run r;
    run_prog(&r, dir,
             (const char *[]){lib, "LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", trace), "LIBPROF_STACKS=8",
                              "LIBPROF_KEEP_RAW=1", NULL},
             (const char *[]){PROG("cudaprog"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_eq(printed(r.out, "cudaMalloc"), 0, "the stand-in runtime was not used: %s", r.out);
    /* the device's heap-at-peak flame graph: the one block, under main */
    char *folded = strfmt("%s/m.cuda-peak.folded", dir);
    struct run rep;
    run_prog(&rep, dir, NULL, (const char *[]){REPORT, strfmt("%s.lpz", trace), "--cuda-folded-peak", folded, NULL});
    cr_assert_eq(rep.status, 0, "%s", rep.err);
    char *fl = read_file(folded, NULL);
    cr_expect(fl && strstr(fl, ";main") && strstr(fl, " 4194304\n"), "folded: %s", fl ? fl : "none");
    free(fl);
    run_free(&rep);
    cJSON *j = load_json(trace), *ev, *site;
    cr_assert_not_null(j);
    cJSON *m = cJSON_GetObjectItem(libprof_meta(j), "cuda_memory");
    cr_assert_not_null(m, "no cuda_memory in the trace");
    cr_expect_eq(meta_num(m, "allocs"), 1);
    cr_expect_eq(meta_num(m, "frees"), 1);
    cr_expect_eq(meta_num(m, "peak_bytes"), 4194304);
    cr_expect_eq(meta_num(m, "leaked_bytes"), 0);
    site = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "sites"), 0);
    cr_expect(site && strstr(str(site, "site"), "main"), "site %s", site ? str(site, "site") : "none");
    double top = -1, last = -1;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (strcmp(str(ev, "name"), "cuda device memory")) continue;
        last = num(cJSON_GetObjectItem(ev, "args"), "bytes");
        if (last > top) top = last;
    }
    cr_expect_eq(top, 4194304);
    cr_expect_eq(last, 0);
    cJSON_Delete(j);
    run_free(&r);
}

/* cuBLAS's GEMMs (cublasLt's too, its shapes read from its descriptors) and NCCL's collectives,
 * through the toolkit's real libraries (a NULL handle and communicator: each returns its error,
 * as on a machine with no GPU): a slice each with its shapes and type, or its bytes, root or
 * peer, and the library's status; the program unchanged. */
Test(cuda, cublas_gemms_and_nccl_collectives) {
    if (access(PROG("gpulibs"), X_OK) != 0) cr_skip_test("no cuBLAS and NCCL at /usr/local/cuda");
    char *dir = make_tmpdir(), *trace = strfmt("%s/g.json", dir);
    struct run bare, r;
    run_prog(&bare, dir, NULL, (const char *[]){PROG("gpulibs"), NULL});
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", trace), NULL},
             (const char *[]){PROG("gpulibs"), NULL});
    cr_assert_eq(bare.status, 0, "%s", bare.err);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, bare.out);
    cr_expect_str_eq(r.err, bare.err);
    cJSON *j = load_json(trace), *ev;
    cr_assert_not_null(j);
    int seen = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        const char *name = str(ev, "name"), *cat = str(ev, "cat");
        cJSON *a = cJSON_GetObjectItem(ev, "args");
        if (!name || !cat) continue;
        if (!strcmp(name, "cublasSgemm")) {
            seen |= 1;
            cr_expect_str_eq(cat, "cublas");
            cr_expect(num(a, "m") == 64 && num(a, "n") == 32 && num(a, "k") == 16 && num(a, "transb") == 1);
            cr_expect_eq(num(a, "status"), printed(r.out, "sgemm"));
        } else if (!strcmp(name, "cublasGemmEx")) {
            seen |= 2;
            cr_expect(num(a, "m") == 128 && num(a, "n") == 256 && num(a, "k") == 512 && num(a, "type") == 2);
        } else if (!strcmp(name, "cublasSgemmStridedBatched")) {
            seen |= 4;
            cr_expect_eq(num(a, "batch"), 12);
        } else if (!strcmp(name, "cublasLtMatmul")) {
            seen |= 64; /* its shapes read back from its descriptors */
            cr_expect(num(a, "m") == 40 && num(a, "n") == 80 && num(a, "k") == 96 && num(a, "transa") == 1 &&
                          num(a, "type") == 14,
                      "cublasLtMatmul: m %g n %g k %g transa %g type %g", num(a, "m"), num(a, "n"), num(a, "k"),
                      num(a, "transa"), num(a, "type"));
            cr_expect_eq(num(a, "status"), printed(r.out, "ltmatmul"));
        } else if (!strcmp(name, "ncclAllReduce")) {
            seen |= 8;
            cr_expect_str_eq(cat, "nccl");
            cr_expect_eq(num(a, "bytes"), 4 << 20, "1 Mi floats");
            cr_expect_eq(num(a, "root"), -1);
            cr_expect_eq(num(a, "result"), printed(r.out, "allreduce"));
        } else if (!strcmp(name, "ncclBroadcast")) {
            seen |= 16;
            cr_expect(num(a, "bytes") == 32768 && num(a, "root") == 0);
        } else if (!strcmp(name, "ncclSend")) {
            seen |= 32;
            cr_expect(num(a, "bytes") == 2000 && num(a, "peer") == 3, "1000 halves to rank 3");
        }
    }
    cr_expect_eq(seen, 127, "calls seen: %#x of 0x7f", seen);
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&r);
}

/* The GPU's own times, through CUPTI's activity API: with the stand-in runtime and the stand-in
 * CUPTI beside it (fakecupti: records laid out by NVIDIA's header, a made-up device whose times
 * follow a known rule: a kernel 1000 + grid_x * block_x / 512 + 10 * shared bytes ns, a copy
 * bytes / 8 ns, a set bytes / 64 ns, each after the one before on its stream). Each kernel, copy
 * and set is a slice on its stream's track with those times, an arrow from the call that queued
 * it, and the kernel table counts and times them; a program that then starts its own CUPTI
 * client (as torch.profiler does) gets its own records, and the trace says when libprof's ended.
 * The real CUPTI on a real GPU: scripts/gpu-check. */
static cJSON *by_name(cJSON *arr, const char *name) {
    cJSON *x;
    cJSON_ArrayForEach(x, arr) if (!strcmp(str(x, "name"), name)) return x;
    return NULL;
}

Test(cuda, gpu_times_on_a_track_per_stream_with_arrows_from_their_calls) {
    if (access(PROG("fakecuda/libcupti.so.13"), R_OK) != 0 || access(PROG("cudaprog"), X_OK) != 0)
        cr_skip_test("no CUDA toolkit at /usr/local/cuda");
    char *dir = make_tmpdir(), *trace = strfmt("%s/g.json", dir), *csv = strfmt("%s/g.csv", dir);
    char *lib = strfmt("LD_LIBRARY_PATH=%s", PROG("fakecuda"));
    struct run r;
    run_prog(&r, dir,
             (const char *[]){lib, "LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", trace),
                              strfmt("LIBPROF_CSV=%s", csv), "LIBPROF_SUMMARY=1", NULL},
             (const char *[]){PROG("cudaprog"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_eq(printed(r.out, "cudaMalloc"), 0, "the stand-in runtime was not used: %s", r.out);
    char *e;
    cJSON *sum = check_trace_py(trace, &e); /* strict JSON, no overlapping slices on a track */
    cr_assert_not_null(sum, "%s", e);
    cJSON_Delete(sum);
    cJSON *j = load_json(trace), *ev;
    cr_assert_not_null(j);
    cJSON *g = cJSON_GetObjectItem(libprof_meta(j), "gpu");
    cr_assert_not_null(g, "no metadata.libprof.gpu: %s", r.err);
    cr_expect_eq(meta_num(g, "kernels"), 5);
    cr_expect_eq(meta_num(g, "memcpys"), 2);
    cr_expect_eq(meta_num(g, "memsets"), 1);
    cr_expect_eq(meta_num(g, "linked"), 8, "every operation tied to its call");
    cr_expect_eq(meta_num(g, "dropped"), 0);
    cJSON *k = cJSON_GetObjectItem(g, "by_kernel"), *scale = by_name(k, "scale(float*, float, int)"),
          *add = by_name(k, "add_one(float*, int)");
    cr_assert(scale && add, "kernels named from CUPTI's records");
    cr_expect_eq(meta_num(scale, "count"), 3);
    cr_expect_eq(meta_num(scale, "total_ns"), 3 * (1000 + 4096 * 256 / 512));
    cr_expect_eq(meta_num(add, "count"), 2);
    cr_expect_eq(meta_num(add, "total_ns"), 2 * (1000 + 1024 * 1024 / 512 + 10 * 128));
    /* the slices: each on its stream's track, its own duration; an arrow from its call's slice */
    cJSON *tracks = cJSON_CreateObject();
    double main_tid = -1;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        if (!strcmp(str(ev, "ph"), "M") && !strcmp(str(ev, "name"), "thread_name")) {
            char *t = strfmt("%.0f", num(ev, "tid"));
            cJSON_AddStringToObject(tracks, t, str(cJSON_GetObjectItem(ev, "args"), "name"));
            free(t);
        }
        if (!strcmp(str(ev, "cat"), "cuda") && main_tid < 0) main_tid = num(ev, "tid");
    }
    int ops = 0, arrows = 0, bound = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        const char *cat = str(ev, "cat"), *ph = str(ev, "ph"), *name = str(ev, "name");
        if (strcmp(cat, "gpu")) continue;
        if (!strcmp(ph, "s")) {
            arrows++;
            cr_expect_eq(num(ev, "tid"), main_tid, "an arrow starts on the thread that made the call");
            cJSON *c; /* at the start of a cuda slice of that thread */
            cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "traceEvents")) if (!strcmp(str(c, "cat"), "cuda") &&
                                                                             !strcmp(str(c, "ph"), "X") &&
                                                                             num(c, "ts") == num(ev, "ts")) {
                bound++;
                break;
            }
            continue;
        }
        if (strcmp(ph, "X")) continue;
        ops++;
        char *t = strfmt("%.0f", num(ev, "tid"));
        const char *track = str(tracks, t);
        free(t);
        double dur = num(ev, "dur");
        if (!strcmp(name, "scale(float*, float, int)")) {
            cr_expect_str_eq(track, "GPU 0 stream 7");
            cr_expect_float_eq(dur, 3.048, 1e-6);
        } else if (!strcmp(name, "add_one(float*, int)")) {
            cr_expect_str_eq(track, "GPU 0 stream 13");
            cr_expect_float_eq(dur, 4.328, 1e-6);
        } else if (!strcmp(name, "memcpy HtoD") || !strcmp(name, "memcpy DtoH")) {
            cr_expect_float_eq(dur, 4194304 / 8 / 1000.0, 1e-6);
            cr_expect_eq(num(cJSON_GetObjectItem(ev, "args"), "bytes"), 4194304);
        } else {
            cr_expect_str_eq(name, "memset");
            cr_expect_float_eq(dur, 2097152 / 64 / 1000.0, 1e-6);
        }
    }
    cr_expect_eq(ops, 8);
    cr_expect_eq(arrows, 8);
    cr_expect_eq(bound, 8, "each arrow starts where its call's slice does");
    cr_expect(strstr(r.err, "GPU (CUPTI): 5 kernels, 2 copies, 1 sets on 2 streams"), "summary: %s", r.err);
    cr_expect(strstr(r.err, "GPU 0 stream 13: 4 operations"), "summary: %s", r.err);
    char *c = read_file(csv, NULL);
    cr_expect(c && strstr(c, "\"scale(float*, float, int)\",gpu,3,9144"), "csv: %s", c ? c : "none");
    free(c);
    cJSON_Delete(tracks);
    cJSON_Delete(j);
    run_free(&r);

    /* the program's own CUPTI client: its records are its own, libprof's end there */
    struct run bare, own;
    char *t2 = strfmt("%s/o.json", dir);
    run_prog(&bare, dir, (const char *[]){lib, NULL}, (const char *[]){PROG("cudaprog"), "own-cupti", NULL});
    run_prog(&own, dir, (const char *[]){lib, "LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", t2), NULL},
             (const char *[]){PROG("cudaprog"), "own-cupti", NULL});
    cr_assert_eq(own.status, 0, "%s", own.err);
    cr_expect(strstr(bare.out, "own cupti kernels 1\n"), "%s", bare.out);
    cr_expect_str_eq(own.out, bare.out);
    cr_expect(notes_with(t2, "GPU times end at"), "a note says when libprof's GPU times ended");
    j = load_json(t2);
    cr_assert_not_null(j);
    g = cJSON_GetObjectItem(libprof_meta(j), "gpu");
    cr_expect(g && meta_num(g, "kernels") == 5, "libprof keeps the kernels before the program took CUPTI");
    cJSON_Delete(j);
    run_free(&bare);
    run_free(&own);
}

/* A GEMM's GFLOP/s from its kernels' GPU time: gpulibs with the stand-in cuBLAS beside the stand-in
 * CUPTI (each GEMM runs one kernel of 1000 + m * n * batch / 512 ns on the made-up device); the
 * kernels are tied to their cuBLAS call by its correlation, so each shape's flops (2 m n k batch)
 * over its kernels' time is its throughput on the GPU. */
Test(cuda, gemm_throughput_from_their_kernels_gpu_time) {
    if (access(PROG("gpulibs"), X_OK) != 0 || access(PROG("fakecuda/libcublas.so.13"), R_OK) != 0)
        cr_skip_test("no cuBLAS and NCCL at /usr/local/cuda");
    char *dir = make_tmpdir(), *trace = strfmt("%s/g.json", dir), *lib = strfmt("LD_LIBRARY_PATH=%s", PROG("fakecuda"));
    struct run r;
    run_prog(&r, dir, (const char *[]){lib, "LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s", trace), NULL},
             (const char *[]){PROG("gpulibs"), NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "sgemm 0\n"), "the stand-in cuBLAS was not used: %s", r.out);
    cJSON *j = load_json(trace), *x;
    cr_assert_not_null(j);
    cJSON *g = cJSON_GetObjectItem(libprof_meta(j), "gpu");
    cr_assert_not_null(g, "no metadata.libprof.gpu");
    cr_expect_eq(meta_num(g, "linked"), 4);
    static const struct {
        long long m, n, k, batch, type, gpu_ns;
    } want[] = {
        {64, 32, 16, 1, 0, 1004}, {8, 8, 8, 1, 1, 1000}, {128, 256, 512, 1, 2, 1064}, {16, 16, 16, 12, 0, 1006}};
    int found = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(g, "gemms")) {
        for (int i = 0; i < 4; i++) {
            if (meta_num(x, "m") != want[i].m || meta_num(x, "n") != want[i].n || meta_num(x, "k") != want[i].k ||
                meta_num(x, "batch") != want[i].batch)
                continue;
            found++;
            long long flop = 2 * want[i].m * want[i].n * want[i].k * want[i].batch;
            cr_expect_eq(meta_num(x, "type"), want[i].type);
            cr_expect_eq(meta_num(x, "count"), 1);
            cr_expect_eq(meta_num(x, "flop"), flop);
            cr_expect_eq(meta_num(x, "gpu_ns"), want[i].gpu_ns);
            cr_expect_float_eq(num(x, "gflops"), (double)flop / (double)want[i].gpu_ns, 1e-3);
        }
    }
    cr_expect_eq(found, 4, "every GEMM shape with its kernels' time");
    cJSON_Delete(j);
    run_free(&r);
}
