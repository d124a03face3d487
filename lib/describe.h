/* describe.h: how an event of a raw trace is shown to people — its name and category, spelled
 * the same in every output (the Chrome trace, the report's slices, the events CSV), and a
 * call's arguments as the Chrome trace's args. The format says what a record holds; this says
 * what it is called. */
#ifndef LP_DESCRIBE_H
#define LP_DESCRIBE_H

#include <stdint.h>

#include "json.h"
#include "reader.h"

/* The name of event `e` ("sgemm", a oneDNN primitive kind, an annotation's name, "malloc" ...),
 * `*len` bytes (not NUL-terminated when it comes from the trace), and in *cat its category (the
 * family's name). */
const char *lp_event_name(const struct lp_reader *r, const struct lp_event *e, uint32_t *len, const char **cat);
/* The BLAS routine's name for a call and its `op` word ("sgemm", "dgemv", ...). */
const char *lp_blas_name(unsigned call, uint64_t op);
/* Floating-point operations of one BLAS call (2·M·N·K for a GEMM, ×4 for complex). */
uint64_t lp_blas_flops(unsigned call, uint64_t m, uint64_t n, uint64_t k, uint64_t op);

/* The argument words of CALL event payload `w` (header word first): the entry point, its
 * arguments (zeros for words a shorter record lacks, up to LP_CALL_MAX_ARGS), its string. */
struct lp_call_rec {
    unsigned call, nargs, slen;
    int cut; /* the string was cut */
    uint64_t a[LP_CALL_MAX_ARGS];
    const char *str;
};
void lp_call_decode(const uint64_t *w, struct lp_call_rec *c);

/* A call's arguments as members of the Chrome trace's args object (names from LP_CALLS; a
 * pointer in hex, a signed value signed, a oneDNN name id as its name, BLAS op as its
 * transposes; gflops for BLAS when `dur_ns`; the string as "path" or "command"). */
void lp_call_args_json(struct lp_json *j, const struct lp_reader *r, const struct lp_call_rec *c, uint64_t dur_ns);

/* PyTorch operators (torch.op): the scope's name, and the arguments as the Chrome trace's args. */
const char *lp_torch_scope(uint64_t s);
void lp_torch_args_json(struct lp_json *j, const struct lp_reader *r, const struct lp_call_rec *c);

#endif
