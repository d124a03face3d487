/* fuzz_pftrace: libFuzzer target for the Perfetto trace reader (tools/pftrace_in.c) that
 * libprof-report uses on libprof's .pftrace, with the analyses after it. Seeds:
 * tests/fuzz/corpus-pftrace (traces of tests/progs/sites and cpusplit). */
#include <stddef.h>
#include <stdint.h>

#include "analyses.h"
#include "tools/pftrace_in.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lp_slices c;
    char err[256];
    if (rp_pftrace_load(data, size, &c, err, sizeof err) == 0) fuzz_analyses(&c);
    return 0;
}
