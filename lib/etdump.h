/* etdump.h: ExecuTorch's own profile (ETDump) folded into libprof's trace — the ETDumps the
 * recorder kept (LP_STR_ETDUMP: what ETDumpGen handed the program), their profiling events
 * aligned to libprof's clock run by run: the k-th Method::execute of the ETDumps is the k-th
 * executorch.execute slice libprof recorded, and each OPERATOR_CALL or DELEGATE_CALL is the
 * executorch.instruction slice of the same index inside it; the events inside a call (the kernel,
 * the delegate's own operators) keep their offsets from it. They are shown on the thread that
 * ran them, nested in its execute and instruction slices — or, for a run where that nesting
 * would not be strict (an event crossing a slice of libprof's), on a row of their own beside the
 * thread ("ETDump (thread N)"), inside the span of the execute slice. A method's load events
 * (Program::load_method and what it holds) are placed the same way by libprof's executorch.init
 * slice: the k-th Method::init event is the k-th of those slices, and the events around it keep
 * their offsets from it. The table sums them by name, as ExecuTorch's Inspector does. */
#ifndef LP_ETDUMP_H
#define LP_ETDUMP_H

#include <stdint.h>

#include "libprof/format.h"
#include "json.h"
#include "out.h"
#include "reader.h"

struct lp_etdump;

struct lp_etdump *lp_etdump_new(const struct lp_reader *r);
void lp_etdump_free(struct lp_etdump *d);
/* A slice of the pass on thread `tid`: an executorch.execute (instruction -1), an
 * executorch.instruction (its index), an executorch.init (LP_ETDUMP_INIT), or any other (LP_ETDUMP_OTHER: the ETDump's events are put
 * on the thread itself only where they cross none). -1: out of memory. */
#define LP_ETDUMP_OTHER (-3)
#define LP_ETDUMP_INIT (-4) /* an executorch.init: a method's load, where the load's events go */
/* What a slice is to the ETDumps, from its record: call, argument count, third argument (the
 * instruction's index). */
static inline int64_t lp_etdump_index(unsigned call, unsigned nargs, uint64_t index_arg) {
    return call == LP_CALL_ET_EXECUTE       ? -1
           : call == LP_CALL_ET_INIT        ? LP_ETDUMP_INIT
           : call != LP_CALL_ET_INSTRUCTION ? LP_ETDUMP_OTHER
           : nargs >= 3                     ? (int64_t)index_arg
                                            : -2;
}
int lp_etdump_slice(struct lp_etdump *d, int64_t instruction, uint32_t tid, uint64_t start_ns, uint64_t dur_ns);
/* After the pass: parse the ETDumps and align them. -1 when out of memory. */
int lp_etdump_finish(struct lp_etdump *d);
int lp_etdump_any(const struct lp_etdump *d); /* events placed on the timeline */
/* The events placed, one by one (libprof-report's slices); `track` is the Chrome tid of their row. */
size_t lp_etdump_count(const struct lp_etdump *d);
void lp_etdump_event(const struct lp_etdump *d, size_t i, const char **name, uint32_t *track, uint64_t *start,
                     uint64_t *dur);

/* The Chrome tid of the ETDump row of thread `tid`. */
#define LP_ETDUMP_TRACK(tid) ((tid) | UINT32_C(0x40000000))

/* its row of the views table (views.h) */
struct lp_view;
extern const struct lp_view lp_view_etdump;

#endif
