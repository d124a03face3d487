/* json.h: the one writer of Chrome trace JSON (the Trace Event Format) — the converter's output
 * and libprof-report's. Strict JSON: every string escaped (lp_out_json_str), integer pid and tid
 * on every event, ts/dur in microseconds with three decimals of integer nanoseconds.
 *
 *     lp_json_begin(&j, out);
 *     lp_json_event(&j, "X", pid, tid, "io", "read", 4, start_ns);   // {"ph":"X","pid":..,"tid":..,"cat":"io","name":"read","ts":..
 *     lp_json_dur(&j, dur_ns);                                      // ,"dur":..
 *     lp_json_args(&j); ... lp_json_key(&j, "fd"); lp_out_i64(out, 3); ... lp_json_args_end(&j);
 *     lp_json_event_end(&j);                                        // }
 *     lp_json_metadata(&j, "libprof"); ...object... lp_json_end(&j);
 */
#ifndef LP_JSON_H
#define LP_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "out.h"

struct lp_json {
    struct lp_out *o;
    int first_event; /* no event written yet */
    int first_key;   /* inside args: no key written yet */
};

/* {"traceEvents":[ */
void lp_json_begin(struct lp_json *j, struct lp_out *o);
/* One event's opening: ph, pid, tid, then "cat" (when not NULL), "name" (when not NULL, `nlen`
 * bytes) and "ts" (when `ts_ns` >= 0). Fields may follow; lp_json_event_end closes it. */
void lp_json_event(struct lp_json *j, const char *ph, uint64_t pid, uint64_t tid, const char *cat, const char *name,
                   size_t nlen, int64_t ts_ns);
void lp_json_dur(struct lp_json *j, uint64_t ns);     /* ,"dur":... */
void lp_json_args(struct lp_json *j);                 /* ,"args":{ */
void lp_json_key(struct lp_json *j, const char *key); /* [,]"key": (inside args) */
void lp_json_args_end(struct lp_json *j);             /* } */
void lp_json_event_end(struct lp_json *j);            /* } */
/* A counter sample: {"ph":"C","pid":P,"tid":P,"name":NAME,"ts":..,"args":{"KEY":V}} */
void lp_json_counter(struct lp_json *j, uint64_t pid, const char *name, int64_t ts_ns, const char *key, uint64_t v);
/* A counter track whose samples are written one after another: the text they share is composed
 * once (the heap track has thousands of samples). `name` and `key` must outlive it. */
struct lp_json_track {
    uint64_t pid;
    const char *name, *key;
    int plain;                /* name and key need no escaping: samples are head, ts, mid, value */
    size_t head_len, mid_len; /* {"ph":"C","pid":P,"tid":P,"name":"NAME","ts":   ,"args":{"KEY": */
    char head[160], mid[80];
};
void lp_json_track(struct lp_json_track *t, uint64_t pid, const char *name, const char *key);
void lp_json_sample(struct lp_json *j, const struct lp_json_track *t, uint64_t ts_ns, uint64_t v);
/* An M event naming a process or a thread: "process_name" / "thread_name" / "thread_sort_index". */
void lp_json_meta_name(struct lp_json *j, uint64_t pid, uint64_t tid, const char *what, const char *name, size_t nlen);
void lp_json_meta_sort(struct lp_json *j, uint64_t pid, uint64_t tid, uint64_t index);
/* The end of the event array and the start of metadata.KEY: the caller writes one JSON value. */
void lp_json_metadata(struct lp_json *j, const char *key);
/* Closes metadata and the document. */
void lp_json_end(struct lp_json *j);

#endif
