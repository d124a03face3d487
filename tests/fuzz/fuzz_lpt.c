/* fuzz_lpt: libFuzzer target for the raw-trace decoder and the converter — any bytes must give
 * an error or a trace, never a crash, a hang or a leak (built with ASan). Packed traces
 * (libprof-report --pack) are unpacked first, as libprof-report does.
 *
 *   make fuzz                                  a short run (part of make test)
 *   build/fuzz/fuzz_lpt -max_total_time=600 build/fuzz/corpus tests/fuzz/corpus   by hand */
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdio.h>

#include "lib/convert.h"
#include "lib/reader.h"
#include "tools/pack.h"
#include "tools/events_csv.h"
#include "tools/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int devnull = -1;
    if (devnull < 0) {
        devnull = open("/dev/null", O_WRONLY);
        /* every run allocates and frees the same large buffers: keep them instead of giving the
         * pages back and faulting them in again (10x the executions per second) */
        mallopt(M_TRIM_THRESHOLD, 256 << 20);
        mallopt(M_MMAP_THRESHOLD, 256 << 20);
    }
    /* a mapped file is page-aligned: give the decoder the same alignment */
    void *buf = NULL;
    char err[256];
    if (rp_is_packed(data, size)) { /* a packed trace: its raw trace, rebuilt */
        uint8_t *image;
        if (rp_unpack_mem(data, size, &image, &size, err, sizeof err) != 0) return 0;
        buf = image;
    } else {
        if (posix_memalign(&buf, 64, size ? size : 1)) return 0;
        memcpy(buf, data, size);
    }
    struct lp_reader r;
    if (lp_reader_open_mem(&r, buf, size, err, sizeof err) == 0) {
        struct lp_convert_opts o = {.fd = {[LP_OUT_CHROME] = devnull, [LP_OUT_SUMMARY] = devnull},
                                    .fds = 1u << LP_OUT_CHROME | 1u << LP_OUT_SUMMARY};
        lp_convert(&r, &o, err, sizeof err);
        /* libprof-report's analyses of the same trace */
        static FILE *null;
        static struct rp_opts ro;
        if (!null) null = fopen("/dev/null", "w");
        struct lp_slices c;
        if (lp_slices_from_reader(&r, &c, NULL, err, sizeof err) == 0) {
            rp_print(null, "fuzz", &c, &ro);
            lp_slices_free(&c);
        }
        rp_events_csv_lpt(null, &r, 0);
        lp_reader_close(&r);
    }
    free(buf);
    return 0;
}
