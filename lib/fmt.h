/* fmt.h: how the tools print a duration or a size for a person — one spelling everywhere (the
 * summary, libprof-report's tables, the HTML page). */
#ifndef LP_FMT_H
#define LP_FMT_H

#include <stdint.h>
#include <stdio.h>

/* Rows a table shows: `top` when the user said (--top), else the table's own number. */
static inline size_t lp_top(unsigned top, size_t dflt) { return top ? top : dflt; }

/* "950 ns", "12.5 us", "9.0 ms", "31.0 ms", "2.5 s": the largest unit the value is at least one
 * of, one decimal — the one rule of every table of the report, the summary and the HTML page
 * (whose script's fmt() spells them the same way), so a column never says "9000.0 us" above
 * "19.0 ms". */
static inline void lp_fmt_ns(char *buf, size_t len, int64_t ns) {
    int64_t a = ns < 0 ? -ns : ns;
    if (a < 1000)
        snprintf(buf, len, "%lld ns", (long long)ns);
    else if (a < 999950)
        snprintf(buf, len, "%.1f us", (double)ns / 1e3);
    else if (a < 999950000)
        snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.1f s", (double)ns / 1e9);
}

/* "4096 B", "12.3 KiB", "45.6 MiB", "1.2 GiB" */
static inline void lp_fmt_bytes(char *buf, size_t len, uint64_t b) {
    if (b < 10 * 1024)
        snprintf(buf, len, "%llu B", (unsigned long long)b);
    else if (b < 10ull * 1024 * 1024)
        snprintf(buf, len, "%.1f KiB", (double)b / 1024);
    else if (b < 10ull * 1024 * 1024 * 1024)
        snprintf(buf, len, "%.1f MiB", (double)b / (1024.0 * 1024));
    else
        snprintf(buf, len, "%.1f GiB", (double)b / (1024.0 * 1024 * 1024));
}

#endif
