/* fuzz_chrome: libFuzzer target for the Chrome trace JSON reader (tools/chrome_in.c) that
 * libprof-report uses on other profilers' traces. Seeds: tests/fuzz/corpus-json. */
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

#include "tools/chrome_in.h"
#include "tools/events_csv.h"
#include "tools/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lp_slices c;
    char err[256];
    static FILE *null;
    static struct rp_opts o;
    if (!null) { /* the analyses too: every slice an iteration, a what-if on every name */
        null = fopen("/dev/null", "w");
        regcomp(&o.iter_re, ".", REG_EXTENDED | REG_NOSUB);
        o.iterations = ".";
        regcomp(&o.whatif_re[0], "a", REG_EXTENDED | REG_NOSUB);
        o.whatif_ratio[0] = 2;
        o.whatif_text[0] = "a=2";
        o.nwhatif = 1;
    }
    if (lp_chrome_load((const char *)data, size, &c, err, sizeof err) == 0) {
        rp_print(null, "fuzz", &c, &o);
        rp_diff(null, &c, &c, &o);
        rp_events_csv(null, &c, 0);
        rp_events_csv(null, &c, 1);
        lp_slices_free(&c);
    }
    return 0;
}
