/* write_perfetto.h: the Perfetto trace writer (write_perfetto.c): Perfetto's native protobuf
 * trace, made from the Chrome writer's events plus the CPU samples' stacks. */
#ifndef LP_WRITE_PERFETTO_H
#define LP_WRITE_PERFETTO_H

#include <stdint.h>

struct lp_sink;
struct lp_reader;

/* As lp_sink_chrome (write_chrome.h), whose options it takes: 0, or -1 when out of memory. */
int lp_sink_perfetto(struct lp_sink *k, const struct lp_reader *r, const char *path, uint64_t alloc_min,
                     uint64_t timeline_ns, uint64_t timeline_min_ns);

#endif
