/* etdump.h: ExecuTorch's own profile (ETDump) folded into libprof's trace — the ETDumps the
 * recorder kept (LP_STR_ETDUMP: what ETDumpGen handed the program), their profiling events
 * aligned to libprof's clock run by run: the k-th Method::execute of the ETDumps is the k-th
 * executorch.execute slice libprof recorded, and each OPERATOR_CALL or DELEGATE_CALL is the
 * executorch.instruction slice of the same index inside it; the events inside a call (the kernel,
 * the delegate's own operators) keep their offsets from it. They are shown on a track of their
 * own beside the thread that ran them ("ETDump"), every one inside the span of its execute slice;
 * the table sums them by name, as ExecuTorch's Inspector does. */
#ifndef LP_ETDUMP_H
#define LP_ETDUMP_H

#include <stdint.h>

#include "json.h"
#include "out.h"
#include "reader.h"

struct lp_etdump;

struct lp_etdump *lp_etdump_new(const struct lp_reader *r);
void lp_etdump_free(struct lp_etdump *d);
/* An executorch.execute (instruction < 0) or executorch.instruction slice of the pass. -1: out of memory. */
int lp_etdump_slice(struct lp_etdump *d, int64_t instruction, uint32_t tid, uint64_t start_ns, uint64_t dur_ns);
/* After the pass: parse the ETDumps and align them. -1 when out of memory. */
int lp_etdump_finish(struct lp_etdump *d);
int lp_etdump_any(const struct lp_etdump *d); /* events placed on the timeline */
/* The events placed, one by one (libprof-report's slices); `track` is the Chrome tid of their row. */
size_t lp_etdump_count(const struct lp_etdump *d);
void lp_etdump_event(const struct lp_etdump *d, size_t i, const char **name, uint32_t *track, uint64_t *start,
                     uint64_t *dur);
void lp_etdump_chrome(const struct lp_etdump *d, struct lp_json *j, uint64_t pid);
void lp_etdump_summary(const struct lp_etdump *d, struct lp_out *out, unsigned top);
void lp_etdump_metadata(const struct lp_etdump *d, struct lp_out *out); /* ,"etdump":{...} */

/* The Chrome tid of the ETDump row of thread `tid`. */
#define LP_ETDUMP_TRACK(tid) ((tid) | UINT32_C(0x40000000))

#endif
