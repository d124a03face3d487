/* fuzz_chrome: libFuzzer target for the Chrome trace JSON reader (tools/chrome_in.c) that
 * libprof-report uses on other profilers' traces. Seeds: tests/fuzz/corpus-json. */
#include <stddef.h>
#include <stdint.h>

#include "analyses.h"
#include "tools/chrome_in.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lp_slices c;
    char err[256];
    if (lp_chrome_load((const char *)data, size, &c, err, sizeof err) == 0) fuzz_analyses(&c);
    return 0;
}
