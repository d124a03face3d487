/* json.h: the one writer of Chrome trace JSON (the Trace Event Format) — the converter's output
 * and libprof-report's. Strict JSON: every string escaped (lp_out_json_str), integer pid and tid
 * on every event, ts/dur in microseconds with three decimals of integer nanoseconds.
 *
 *     lp_json_begin(&j, out);
 *     lp_json_event(&j, "X", pid, tid, "io", "read", 4, start_ns);   // {"ph":"X","pid":..,"tid":..,"cat":"io","name":"read","ts":..
 *     lp_json_dur(&j, dur_ns);                                      // ,"dur":..
 *     lp_json_args(&j); lp_json_key(&j, "fd"); lp_json_i64(&j, 3); ... lp_json_args_end(&j);
 *     lp_json_event_end(&j);                                        // }
 *     lp_json_metadata(&j, "libprof"); ...object... lp_json_end(&j);
 *
 * The same calls are libprof's one stream of typed events: with `to` set (lp_json_sink), each
 * event reaches a reader as its fields and typed argument values, no text made — the Perfetto
 * writer takes the Chrome writer's events so; the metadata too (lp_json_metadata: an event of its
 * own). Everything an event or the metadata holds is therefore written through these calls, never
 * into `o` directly. Diverted (lp_json_divert), the calls are recorded on a tape — a followed
 * trace's window held in segment files — and lp_json_replay makes them again, into text or to
 * the reader alike. */
#ifndef LP_JSON_H
#define LP_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "out.h"

/* An event as a structured reader gets it (see lp_json_sink). */
struct lp_json_ev {
    char ph;    /* 'X' 'i' 'b' 'e' 's' 'f' 'C' 'M' */
    char scope; /* an instant's: 't' thread, 'p' process, 'g' global; 0 when not said */
    uint8_t has_dur, has_id;
    uint8_t bind_enclosing; /* a flow's end bound to the slice enclosing it ("bp":"e") */
    uint64_t pid, tid;
    const char *cat, *name; /* (valid in `begin` only); NULL when not given */
    size_t nlen;
    int64_t ts_ns; /* -1: none */
    uint64_t dur_ns, id;
};
/* An argument's value: a scalar, a JSON value as text (RAW), or an array or object opened
 * (ARRAY, OBJECT: values or keys follow, then END). */
enum { LP_JV_U64, LP_JV_I64, LP_JV_DOUBLE, LP_JV_BOOL, LP_JV_STR, LP_JV_ARRAY, LP_JV_OBJECT, LP_JV_END, LP_JV_NULL };
struct lp_json_val {
    int kind;
    uint64_t u; /* U64, BOOL */
    int64_t i;
    double d;
    const char *s; /* STR (unescaped) */
    size_t n;
};
/* A reader of the events as they are made: begin (the opening's fields), then the arguments' keys
 * and values in order, then end (with the fields that followed the opening: dur, scope, id). The
 * metadata is an event of ph 'm' whose one key is the metadata's name. No value comes as JSON
 * text (lp_json_ints gives its numbers). */
struct lp_json_track;
struct lp_json_sink {
    void *self;
    void (*begin)(void *self, const struct lp_json_ev *e);
    void (*key)(void *self, const char *k, size_t n);
    void (*value)(void *self, const struct lp_json_val *v);
    void (*end)(void *self, const struct lp_json_ev *e);
    /* a run of arguments that is the same whenever `key` is (see lp_json_memo): 1 when the
     * reader gave what it made of them the first time; memo_end closes the run */
    int (*memo)(void *self, uint64_t key);
    void (*memo_end)(void *self);
    /* a counter's sample (lp_json_sample), given whole rather than as an event of one argument:
     * a trace has thousands; NULL: as an event */
    void (*sample)(void *self, struct lp_json_track *t, uint64_t ts_ns, uint64_t v);
};

#define LP_JSON_NEST 16
struct lp_json {
    struct lp_out *o;
    const struct lp_json_sink *to; /* set: events go to it, not as text into o */
    int first_event;               /* no event written yet */
    /* inside args: the depth of arrays and objects in them (0: args itself) and, per depth,
     * whether it is an array and whether nothing is in it yet */
    int depth;
    uint8_t arr[LP_JSON_NEST], fresh[LP_JSON_NEST];
    struct lp_json_ev ev;     /* the event being made (to set) */
    struct lp_out *tape;      /* set: the calls are recorded into it (lp_json_divert, lp_json_tape) */
    struct lp_out *tape_home; /* lp_json_tape's: where lp_json_back goes back to (NULL: as text or to `to`) */
};

/* {"traceEvents":[ */
void lp_json_begin(struct lp_json *j, struct lp_out *o);
/* One event's opening: ph, pid, tid, then "cat" (when not NULL), "name" (when not NULL, `nlen`
 * bytes) and "ts" (when `ts_ns` >= 0). Fields may follow; lp_json_event_end closes it. */
void lp_json_event(struct lp_json *j, const char *ph, uint64_t pid, uint64_t tid, const char *cat, const char *name,
                   size_t nlen, int64_t ts_ns);
void lp_json_dur(struct lp_json *j, uint64_t ns);      /* ,"dur":... */
void lp_json_scope(struct lp_json *j, char scope);     /* ,"s":"t" (an instant's: t, p or g) */
void lp_json_id(struct lp_json *j, uint64_t id);       /* ,"id":N (an async range's, a flow's) */
void lp_json_flow_end(struct lp_json *j, uint64_t id); /* ,"bp":"e","id":N (a flow's end, bound to its slice) */
void lp_json_args(struct lp_json *j);                  /* ,"args":{ */
void lp_json_key(struct lp_json *j, const char *key);  /* [,]"key": (inside args, or an object in them) */
void lp_json_keyn(struct lp_json *j, const char *key, size_t n); /* the same, `n` bytes */
void lp_json_args_end(struct lp_json *j);                        /* } */
void lp_json_event_end(struct lp_json *j);                       /* } */
/* An argument's value (after its key, or an element of an array). */
void lp_json_u64(struct lp_json *j, uint64_t v);
void lp_json_i64(struct lp_json *j, int64_t v);
void lp_json_bool(struct lp_json *j, int v);
void lp_json_double(struct lp_json *j, const char *fmt, double v); /* as text: printed with fmt ("%.3f") */
void lp_json_str(struct lp_json *j, const char *s, size_t n);
void lp_json_hex(struct lp_json *j, uint64_t v); /* "0x1f" (an address) */
/* Nested arrays of integers given as text ("[[1, 2], []]", PyTorch's input shapes as the recorder
 * wrote them): as they are in text, as arrays and numbers to a reader. */
void lp_json_ints(struct lp_json *j, const char *s, size_t n);
void lp_json_null(struct lp_json *j);
/* A value already JSON text, as it is (text output only: a merged input's metadata). */
void lp_json_raw(struct lp_json *j, const char *json, size_t n);
/* One value follows at the top (outside any event: the writer's nesting made ready for it). */
void lp_json_value_begin(struct lp_json *j);
void lp_json_array(struct lp_json *j);      /* [ */
void lp_json_array_end(struct lp_json *j);  /* ] */
void lp_json_object(struct lp_json *j);     /* { */
void lp_json_object_end(struct lp_json *j); /* } */
/* The arguments written between lp_json_memo and lp_json_memo_end are the same whenever `key`
 * is (those made of a call stack, by the stack's id): a structured reader keeps what it made of
 * them the first time and, given the key again, repeats it — lp_json_memo then returns 1 and
 * they are not written again (lp_json_memo_end is not called). As text: always 0. */
int lp_json_memo(struct lp_json *j, uint64_t key);
void lp_json_memo_end(struct lp_json *j);
/* The calls from here are recorded into `o` (a followed trace's segment file), until lp_json_back;
 * lp_json_replay makes a tape's calls again: it takes the whole records of `n` bytes and returns
 * how many bytes it took (the rest: a record cut, to come again with what follows it), or
 * (size_t)-1 when the bytes are not a tape. */
void lp_json_divert(struct lp_json *j, struct lp_out *o);
void lp_json_back(struct lp_json *j);
/* Every call from lp_json_begin on, the metadata's too, recorded into `o` (a merge's input, made
 * again into the merged trace: tools/merge.c). */
void lp_json_tape(struct lp_json *j, struct lp_out *o);
size_t lp_json_replay(struct lp_json *j, const void *tape, size_t n);
/* The tape's records: an op (a byte), its payload's length (4 bytes), the payload — numbers as 8
 * bytes, texts as 4 bytes of length and their bytes. An event is the records from its T_EVENT
 * (ph, which of cat and name it has, pid, tid, ts: 2 + 3 * 8 bytes, then cat and name) to its
 * T_EVENT_END; the metadata, T_META (its name) to T_END. */
enum lp_json_tape_op {
    T_EVENT = 1,
    T_DUR,
    T_SCOPE,
    T_ID,
    T_FLOW_END,
    T_ARGS,
    T_KEY,
    T_ARGS_END,
    T_EVENT_END,
    T_U64,
    T_I64,
    T_BOOL,
    T_DOUBLE,
    T_STR,
    T_INTS,
    T_ARRAY,
    T_ARRAY_END,
    T_OBJECT,
    T_OBJECT_END,
    T_NULL,
    T_META,
    T_END
};
#define LP_JSON_TAPE_EVENT_MIN (5 + 26) /* an event's first record, at least */
/* An event's first record (T_EVENT, at least LP_JSON_TAPE_EVENT_MIN bytes): its time (-1:
 * none), its time changed (a merge's shift); whether it is of `ph` and named `name`. */
int64_t lp_json_tape_ts(const void *event);
void lp_json_tape_set_ts(void *event, int64_t ts);
int lp_json_tape_is(const void *event, size_t n, char ph, const char *name);
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
    size_t sink_track; /* the sink's own mark for this track (0 until it sets one) */
};
void lp_json_track(struct lp_json_track *t, uint64_t pid, const char *name, const char *key);
void lp_json_sample(struct lp_json *j, struct lp_json_track *t, uint64_t ts_ns, uint64_t v);
/* An M event naming a process or a thread: "process_name" / "thread_name" / "thread_sort_index". */
void lp_json_meta_name(struct lp_json *j, uint64_t pid, uint64_t tid, const char *what, const char *name, size_t nlen);
void lp_json_meta_sort(struct lp_json *j, uint64_t pid, uint64_t tid, uint64_t index);
/* The end of the event array and the start of metadata.KEY: the caller writes one value with the
 * calls above. */
void lp_json_metadata(struct lp_json *j, const char *key);
/* Closes metadata and the document. */
void lp_json_end(struct lp_json *j);
/* "KEY":VALUE, an argument's or a member's: unsigned, signed, bool, text, double (as fmt prints
 * it), an object or an array opened; lp_json_kus: pairs of KEY and uint64_t VALUE (cast each),
 * up to a NULL key. */
void lp_json_ku(struct lp_json *j, const char *key, uint64_t v);
void lp_json_ki(struct lp_json *j, const char *key, int64_t v);
void lp_json_kb(struct lp_json *j, const char *key, int v);
void lp_json_ks(struct lp_json *j, const char *key, const char *s, size_t n);
void lp_json_kd(struct lp_json *j, const char *key, const char *fmt, double v);
void lp_json_kobject(struct lp_json *j, const char *key);
void lp_json_karray(struct lp_json *j, const char *key);
void lp_json_kus(struct lp_json *j, const char *key, ...) __attribute__((sentinel));
#define LP_U(x) ((uint64_t)(x))

#endif
