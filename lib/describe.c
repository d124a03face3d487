/* describe.c: see describe.h. */
#include "describe.h"

#include <stdio.h>
#include <string.h>

/* ---- argument names, parsed once from LP_CALLS ------------------------------------------------ */

struct argdesc {
    char name[24];
    uint8_t is_signed, is_pointer;
};

static struct argdesc args[LP_CALL_COUNT][LP_CALL_MAX_ARGS];
static uint8_t nargs_of[LP_CALL_COUNT];
static int parsed;

static int pointer_arg(unsigned call, const char *name) {
    static const char *const ptrs[] = {"lock",      "cond",   "sem",     "barrier", "addr",  "stream",
                                       "primitive", "handle", "session", "ptr",     "event", "graph"};
    for (unsigned i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (!strcmp(name, ptrs[i])) return 1;
    if (!strcmp(name, "ret")) {
        unsigned role = lp_call_role[call];
        return role == LP_ROLE_MMAP || role == LP_ROLE_MREMAP || role == LP_ROLE_FOPEN || call == LP_CALL_DLOPEN;
    }
    return 0;
}

/* The tables are the same for every caller and written before being read twice the same way:
 * a second thread parsing at the same moment writes the same bytes. */
static void parse(void) {
    if (__atomic_load_n(&parsed, __ATOMIC_ACQUIRE)) return;
    for (unsigned k = 1; k < LP_CALL_COUNT; k++) {
        const char *s = lp_call_args[k];
        unsigned n = 0;
        while (*s && n < LP_CALL_MAX_ARGS) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            struct argdesc *a = &args[k][n++];
            a->is_signed = len > 0 && s[len - 1] == '-';
            if (a->is_signed) len--;
            if (len >= sizeof a->name) len = sizeof a->name - 1;
            memcpy(a->name, s, len);
            a->name[len] = '\0';
            a->is_pointer = (uint8_t)pointer_arg(k, a->name);
            s = e ? e + 1 : s + strlen(s);
        }
        nargs_of[k] = (uint8_t)n;
    }
    __atomic_store_n(&parsed, 1, __ATOMIC_RELEASE);
}

void lp_call_decode(const uint64_t *w, struct lp_call_rec *c) {
    parse();
    uint64_t h = w[0];
    c->call = lp_call_id(h);
    if (c->call >= LP_CALL_COUNT) c->call = 0; /* validated by the reader; be safe */
    unsigned n = lp_call_nargs(h);
    c->slen = lp_call_strlen(h);
    c->cut = (h & LP_CALL_STR_CUT) != 0;
    memcpy(c->a, w + 1, n * 8);
    c->str = (const char *)(w + 1 + n);
    /* fewer words than the list names: read zeros for the rest */
    unsigned want = nargs_of[c->call];
    if (n < want) memset(c->a + n, 0, (want - n) * 8);
    c->nargs = n > want ? n : want;
}

/* ---- names -------------------------------------------------------------------------------------- */

const char *lp_blas_name(unsigned call, uint64_t op) {
    static const char *const names[4][4] = {{"sgemm", "dgemm", "cgemm", "zgemm"},
                                            {"sgemv", "dgemv", "cgemv", "zgemv"},
                                            {"sdot", "ddot", "cdot", "zdot"},
                                            {"saxpy", "daxpy", "caxpy", "zaxpy"}};
    unsigned row = call == LP_CALL_GEMM ? 0 : call == LP_CALL_GEMV ? 1 : call == LP_CALL_DOT ? 2 : 3;
    return names[row][op & 3];
}

uint64_t lp_blas_flops(unsigned call, uint64_t m, uint64_t n, uint64_t k, uint64_t op) {
    uint64_t base = call == LP_CALL_GEMM ? 2 * m * n * k : call == LP_CALL_GEMV ? 2 * m * n : 2 * m;
    return (op & 3) >= LP_BLAS_C ? base * 4 : base;
}

static int is_blas(unsigned role) { return role == LP_ROLE_GEMM || role == LP_ROLE_GEMV || role == LP_ROLE_VEC; }

const char *lp_event_name(const struct lp_reader *r, const struct lp_event *e, uint32_t *len, const char **cat) {
    unsigned shape = lp_kind_shape[e->kind];
    *cat = lp_family_names[lp_kind_family[e->kind]];
    if (shape == LP_SHAPE_RANGE || shape == LP_SHAPE_MARK || shape == LP_SHAPE_COUNTER)
        return lp_reader_name(r, e->w[0], len);
    if (shape == LP_SHAPE_PYCALL) { /* the function's qualified name */
        uint64_t id = e->w[0];
        if (id < r->npycodes && r->pycodes[id].name) {
            *len = r->pycodes[id].name_len;
            return r->pycodes[id].name;
        }
    }
    if (shape != LP_SHAPE_CALL) {
        *len = (uint32_t)strlen(lp_kind_names[e->kind]);
        return lp_kind_names[e->kind];
    }
    unsigned call = lp_call_id(e->w[0]), nargs = lp_call_nargs(e->w[0]);
    if (call >= LP_CALL_COUNT) call = 0;
    *cat = lp_family_names[lp_call_family[call]];
    unsigned role = lp_call_role[call];
    const char *name = lp_call_names[call];
    if (is_blas(role) && nargs)
        name = lp_blas_name(call, e->w[nargs]);
    else if ((role == LP_ROLE_DNNL || role == LP_ROLE_TORCH || call == LP_CALL_ET_INSTRUCTION ||
              call == LP_CALL_CUDA_LAUNCH || role == LP_ROLE_NVTX) &&
             nargs)
        return lp_reader_name(r, e->w[1], len);
    *len = (uint32_t)strlen(name);
    return name;
}

/* torch's at::RecordScope, by value */
const char *lp_torch_scope(uint64_t s) {
    static const char *const names[] = {
        "function",      "backward",         "torchscript", "kernel dtype",      "custom class",
        "build feature", "lite interpreter", "user",        "static runtime op", "static runtime model"};
    return s < sizeof names / sizeof *names ? names[s] : "?";
}

/* A PyTorch operator: its sequence number (when it has one), its scope, its input shapes (a
 * JSON array of arrays, as torch.profiler's "Input Dims"), a backward node's forward thread. */
void lp_torch_args_json(struct lp_json *j, const struct lp_reader *r, const struct lp_call_rec *c) {
    const uint64_t *a = c->a;
    if (c->nargs < 7) return;
    if ((int64_t)a[1] >= 0) {
        lp_json_key(j, "seq");
        lp_json_i64(j, (int64_t)a[1]);
    }
    lp_json_key(j, "scope");
    lp_json_str(j, lp_torch_scope(a[2]), strlen(lp_torch_scope(a[2])));
    if (a[5]) {
        uint32_t len;
        const char *v = lp_reader_name(r, a[5], &len);
        lp_json_key(j, "shapes");
        if (len && v[0] == '[' && v[len - 1] == ']' && strspn(v, "[], -0123456789") >= len)
            lp_json_ints(j, v, len); /* as the recorder wrote it: digits, brackets, commas */
        else
            lp_json_str(j, v, len);
    }
    if (a[4]) {
        lp_json_key(j, "fwd_thread");
        lp_json_u64(j, a[4]);
    }
}

/* ---- arguments ---------------------------------------------------------------------------------- */

void lp_call_args_json(struct lp_json *j, const struct lp_reader *r, const struct lp_call_rec *c, uint64_t dur_ns) {
    unsigned call = c->call, role = lp_call_role[call];
    const uint64_t *a = c->a;
    if (role == LP_ROLE_TORCH) {
        lp_torch_args_json(j, r, c);
        return;
    }
    for (unsigned i = 0; i < c->nargs && i < nargs_of[call]; i++) {
        const struct argdesc *d = &args[call][i];
        lp_json_key(j, d->name);
        if (role == LP_ROLE_FOPEN && !strcmp(d->name, "mode")) {
            char m[9] = {0};
            memcpy(m, &a[i], 8);
            lp_json_str(j, m, strnlen(m, 8));
        } else if (call == LP_CALL_ET_INSTRUCTION && !strcmp(d->name, "kind")) {
            static const char *const kinds[] = {"?", "kernel", "delegate", "move", "jump_false", "free"};
            lp_json_str(j, kinds[a[i] < 6 ? a[i] : 0], strlen(kinds[a[i] < 6 ? a[i] : 0]));
        } else if (role == LP_ROLE_CUDA && !strcmp(d->name, "direction")) {
            static const char *const dirs[] = {"host to host",     "host to device", "device to host",
                                               "device to device", "default",        "?"};
            const char *v = dirs[a[i] < 5 ? a[i] : 5];
            lp_json_str(j, v, strlen(v));
        } else if ((role == LP_ROLE_DNNL && (!strcmp(d->name, "kind") || !strcmp(d->name, "shape"))) ||
                   ((call == LP_CALL_ET_INSTRUCTION || call == LP_CALL_CUDA_LAUNCH || role == LP_ROLE_NVTX) &&
                    !strcmp(d->name, "name")) ||
                   (role == LP_ROLE_NVTX && !strcmp(d->name, "domain") && a[i])) {
            uint32_t len;
            const char *v = lp_reader_name(r, a[i], &len);
            lp_json_str(j, v, len);
        } else if (!strcmp(d->name, "op")) {
            static const char tr[] = "NTC?";
            char op[16];
            int n = snprintf(op, sizeof op, "%s%c%c",
                             a[i] & LP_BLAS_ROWMAJOR  ? "row-major "
                             : a[i] & LP_BLAS_FORTRAN ? "fortran "
                                                      : "col-major ",
                             tr[(a[i] >> LP_BLAS_TA_SHIFT) & 3], tr[(a[i] >> LP_BLAS_TB_SHIFT) & 3]);
            lp_json_str(j, op, (size_t)n);
        } else if (d->is_pointer) {
            lp_json_hex(j, a[i]);
        } else if (d->is_signed) {
            lp_json_i64(j, (int64_t)a[i]);
        } else {
            lp_json_u64(j, a[i]);
        }
    }
    if (is_blas(role) && dur_ns && c->nargs) {
        unsigned n = c->nargs;
        uint64_t fl = lp_blas_flops(call, a[0], n > 2 ? a[1] : 0, n > 3 ? a[2] : 0, a[n - 1]);
        lp_json_key(j, "gflops");
        lp_json_double(j, "%.3f", (double)fl / (double)dur_ns);
    }
    if (c->slen && role == LP_ROLE_ORT) { /* fields split by 0x1f */
        static const char *const run_keys[] = {"model", "inputs", "outputs", "api"};
        static const char *const session_keys[] = {"model", "providers"};
        const char *const *keys = call == LP_CALL_ORT_CREATE_SESSION ? session_keys : run_keys;
        int nkeys = call == LP_CALL_ORT_CREATE_SESSION ? 2 : call == LP_CALL_ORT_RUN ? 4 : 1;
        const char *p = c->str, *end = c->str + c->slen;
        for (int k = 0; k < nkeys && p <= end; k++) {
            const char *q = memchr(p, 0x1f, (size_t)(end - p));
            if (!q) q = end;
            lp_json_key(j, keys[k]);
            lp_json_str(j, p, (size_t)(q - p));
            p = q + 1;
        }
        if (c->cut) {
            lp_json_key(j, "cut");
            lp_json_bool(j, 1);
        }
    } else if (c->slen) {
        lp_json_key(j, role == LP_ROLE_OPEN || role == LP_ROLE_FOPEN || call == LP_CALL_DLOPEN ? "path"
                       : role == LP_ROLE_PEER                                                  ? "peer"
                       : role == LP_ROLE_SOCKET || role == LP_ROLE_PIPE                        ? "kind"
                       : role == LP_ROLE_ET                                                    ? "method"
                                                                                               : "command");
        lp_json_str(j, c->str, c->slen);
        if (c->cut) {
            lp_json_key(j, "cut");
            lp_json_bool(j, 1);
        }
    }
}
