/* async.h: ranges opened and closed by a handle, perhaps on two threads and out of nesting order —
 * PyTorch's ranges ended on another thread (torch.c), NVTX's start/end ranges (nvtx.c) — paired in
 * the pass and written as Chrome's async slices ("b"/"e" with an id: an async track of their own
 * in Perfetto). One store per view; async.c. */
#ifndef LP_ASYNC_H
#define LP_ASYNC_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "map.h"
#include "reader.h"

struct lp_async_range {
    uint32_t name, btid, etid, extra; /* name id; the starting and ending threads; the view's word */
    uint64_t b, e;                    /* ns; 0: that end was not seen */
};

struct lp_asyncs {
    struct lp_async_range *v;
    size_t n, cap;
    struct lp_map pend; /* handle -> index + 1, while open */
    int oom;
};

/* The range of `handle` (0: none to pair: a range of its own) starts (`begin`) or ends on thread
 * `tid` at `ns`; a start names it (`name`, `extra`), an end without a start keeps its own name.
 * The range, or NULL when out of memory (s->oom set). */
struct lp_async_range *lp_async_mark(struct lp_asyncs *s, uint64_t handle, int begin, uint32_t tid, uint64_t ns,
                                     uint32_t name, uint32_t extra);
/* Ranges with one end not seen. */
uint64_t lp_async_unpaired(const struct lp_asyncs *s);
/* Each paired range as a "b" and an "e" of category `cat` on its starting thread, ids 1, 2, ...;
 * `args` (may be NULL) writes the begin's arguments after its "ended_on_thread". */
void lp_async_chrome(const struct lp_asyncs *s, const struct lp_reader *r, struct lp_json *j, uint64_t pid,
                     const char *cat, void (*args)(const struct lp_async_range *a, struct lp_json *j, void *ctx),
                     void *ctx);
void lp_async_free(struct lp_asyncs *s);

#endif
