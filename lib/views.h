/* views.h: the converter's side of the hook families that make more of a trace than the per-entry
 * point statistics (calls.c) — PyTorch's operators, ONNX Runtime's node profiles, Python call
 * slices, CPU samples, MPI's clock-alignment instants — one row each, as the hook families are
 * rows of LP_FAMILIES. lp_convert creates every view, hands each the events of the shapes it asks
 * for during the one pass, finishes them at its end and frees them; the writers ask each view for
 * its part of the summary, the CSV, the Chrome trace's events and its metadata. A new view is one
 * file (its analysis) and one row here: lp_convert and the writers do not change. */
#ifndef LP_VIEWS_H
#define LP_VIEWS_H

#include <stddef.h>
#include <stdint.h>

struct lp_analysis;
struct lp_event;
struct lp_seen;
struct lp_out;
struct lp_json;

struct lp_view {
    const char *name;
    unsigned shapes; /* the event shapes it sees (bit 1 << LP_SHAPE_*) */
    /* Its state, made for this trace into `a` (its pointer there may stay NULL: nothing to
     * see). 0, or -1 when out of memory. */
    int (*create)(struct lp_analysis *a);
    /* An event of one of its shapes (a CALL's record and meaning in s->call, s->view). 0 or -1. */
    int (*event)(struct lp_analysis *a, const struct lp_event *e, const struct lp_seen *s);
    int (*fit)(struct lp_analysis *a);    /* a followed trace grew new threads; NULL: nothing to do */
    int (*finish)(struct lp_analysis *a); /* the pass is over: its totals. 0 or -1 */
    void (*destroy)(struct lp_analysis *a);
    /* its part of each output (NULL: none) */
    void (*summary)(const struct lp_analysis *a, struct lp_out *o, unsigned top);
    void (*csv)(const struct lp_analysis *a, struct lp_out *o);
    void (*chrome)(const struct lp_analysis *a, struct lp_json *j, uint64_t pid); /* events of its own */
    void (*metadata)(const struct lp_analysis *a, struct lp_out *o);              /* ,"key":{...} */
};
extern const struct lp_view lp_views[];
extern const unsigned lp_nviews;

#endif
