/* json.c: see json.h. */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void lp_json_begin(struct lp_json *j, struct lp_out *o) {
    j->o = o;
    j->first_event = 1;
    if (!j->to && !j->tape) lp_out_s(o, "{\"traceEvents\":[");
}

/* ---- the tape: the calls recorded, to be made again (lp_json_divert; the records: json.h) ----- */

struct rec {
    uint8_t b[64];
    size_t n;
    struct lp_out *o;
    const char *s[2]; /* texts after the fixed part */
    size_t sn[2];
    int ns;
};
static void rec_u64(struct rec *r, uint64_t v) {
    memcpy(r->b + r->n, &v, 8);
    r->n += 8;
}
static void rec_text(struct rec *r, const char *s, size_t n) {
    r->s[r->ns] = s;
    r->sn[r->ns++] = n;
}
static void tape(struct lp_json *j, uint8_t op, struct rec *r) {
    uint32_t len = (uint32_t)r->n;
    for (int i = 0; i < r->ns; i++) len += 4 + (uint32_t)r->sn[i];
    uint8_t head[5] = {op};
    memcpy(head + 1, &len, 4);
    lp_out_write(j->tape, (const char *)head, 5);
    lp_out_write(j->tape, (const char *)r->b, r->n);
    for (int i = 0; i < r->ns; i++) {
        uint32_t n = (uint32_t)r->sn[i];
        lp_out_write(j->tape, (const char *)&n, 4);
        lp_out_write(j->tape, r->s[i], r->sn[i]);
    }
}
static void tape0(struct lp_json *j, uint8_t op) { tape(j, op, &(struct rec){.n = 0}); }
static void tape_u64(struct lp_json *j, uint8_t op, uint64_t v) {
    struct rec r = {.n = 0};
    rec_u64(&r, v);
    tape(j, op, &r);
}
static void tape_text(struct lp_json *j, uint8_t op, const char *s, size_t n) {
    struct rec r = {.n = 0};
    rec_text(&r, s, n);
    tape(j, op, &r);
}

void lp_json_event(struct lp_json *j, const char *ph, uint64_t pid, uint64_t tid, const char *cat, const char *name,
                   size_t nlen, int64_t ts_ns) {
    if (j->tape) {
        struct rec r = {.n = 0};
        r.b[r.n++] = (uint8_t)ph[0];
        r.b[r.n++] = (uint8_t)((cat != NULL) | (name != NULL) << 1);
        rec_u64(&r, pid);
        rec_u64(&r, tid);
        rec_u64(&r, (uint64_t)ts_ns);
        rec_text(&r, cat ? cat : "", cat ? strlen(cat) : 0);
        rec_text(&r, name ? name : "", name ? nlen : 0);
        tape(j, T_EVENT, &r);
        return;
    }
    if (j->to) {
        j->ev = (struct lp_json_ev){
            .ph = ph[0], .pid = pid, .tid = tid, .cat = cat, .name = name, .nlen = nlen, .ts_ns = ts_ns};
        j->to->begin(j->to->self, &j->ev);
        j->ev.cat = j->ev.name = NULL; /* (the caller's, valid in begin only) */
        j->depth = 0;
        return;
    }
    struct lp_out *o = j->o;
    lp_out_s(o, j->first_event ? "\n{\"ph\":\"" : ",\n{\"ph\":\"");
    j->first_event = 0;
    lp_out_s(o, ph);
    lp_out_s(o, "\",\"pid\":");
    lp_out_u64(o, pid);
    lp_out_s(o, ",\"tid\":");
    lp_out_u64(o, tid);
    if (cat) {
        lp_out_s(o, ",\"cat\":");
        lp_out_json_str(o, cat, strlen(cat));
    }
    if (name) {
        lp_out_s(o, ",\"name\":");
        lp_out_json_str(o, name, nlen);
    }
    if (ts_ns >= 0) {
        lp_out_s(o, ",\"ts\":");
        lp_out_us(o, (uint64_t)ts_ns);
    }
}

void lp_json_dur(struct lp_json *j, uint64_t ns) {
    if (j->tape) return tape_u64(j, T_DUR, ns);
    if (j->to) {
        j->ev.has_dur = 1;
        j->ev.dur_ns = ns;
        return;
    }
    lp_out_s(j->o, ",\"dur\":");
    lp_out_us(j->o, ns);
}

void lp_json_scope(struct lp_json *j, char scope) {
    if (j->tape) return tape_u64(j, T_SCOPE, (uint8_t)scope);
    if (j->to) {
        j->ev.scope = scope;
        return;
    }
    char t[] = ",\"s\":\"t\"";
    t[6] = scope;
    lp_out_s(j->o, t);
}

void lp_json_id(struct lp_json *j, uint64_t id) {
    if (j->tape) return tape_u64(j, T_ID, id);
    if (j->to) {
        j->ev.has_id = 1;
        j->ev.id = id;
        return;
    }
    lp_out_s(j->o, ",\"id\":");
    lp_out_u64(j->o, id);
}

void lp_json_flow_end(struct lp_json *j, uint64_t id) {
    if (j->tape) return tape_u64(j, T_FLOW_END, id);
    if (j->to)
        j->ev.bind_enclosing = 1;
    else
        lp_out_s(j->o, ",\"bp\":\"e\"");
    lp_json_id(j, id);
}

void lp_json_args(struct lp_json *j) {
    if (j->tape) return tape0(j, T_ARGS);
    j->depth = 0;
    j->arr[0] = 0;
    j->fresh[0] = 1;
    if (!j->to) lp_out_s(j->o, ",\"args\":{");
}

void lp_json_key(struct lp_json *j, const char *key) { lp_json_keyn(j, key, strlen(key)); }

void lp_json_keyn(struct lp_json *j, const char *key, size_t n) {
    if (j->tape) return tape_text(j, T_KEY, key, n);
    int fresh = j->fresh[j->depth];
    j->fresh[j->depth] = 0;
    if (j->to) {
        j->to->key(j->to->self, key, n);
        return;
    }
    if (!fresh) lp_out_c(j->o, ',');
    lp_out_json_str(j->o, key, n);
    lp_out_c(j->o, ':');
}

void lp_json_args_end(struct lp_json *j) {
    if (j->tape) return tape0(j, T_ARGS_END);
    if (!j->to) lp_out_c(j->o, '}');
}

void lp_json_event_end(struct lp_json *j) {
    if (j->tape) return tape0(j, T_EVENT_END);
    if (j->to)
        j->to->end(j->to->self, &j->ev);
    else
        lp_out_c(j->o, '}');
}

/* A value's place: in an array, a comma before all but its first. 1 when it goes to `to`. */
static int value(struct lp_json *j) {
    if (j->arr[j->depth]) {
        if (!j->fresh[j->depth] && !j->to) lp_out_c(j->o, ',');
        j->fresh[j->depth] = 0;
    }
    return j->to != NULL;
}

static void give(struct lp_json *j, struct lp_json_val v) { j->to->value(j->to->self, &v); }

void lp_json_u64(struct lp_json *j, uint64_t v) {
    if (j->tape) return tape_u64(j, T_U64, v);
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_U64, .u = v});
    else
        lp_out_u64(j->o, v);
}

void lp_json_i64(struct lp_json *j, int64_t v) {
    if (j->tape) return tape_u64(j, T_I64, (uint64_t)v);
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_I64, .i = v});
    else
        lp_out_i64(j->o, v);
}

void lp_json_bool(struct lp_json *j, int v) {
    if (j->tape) return tape_u64(j, T_BOOL, v != 0);
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_BOOL, .u = v != 0});
    else
        lp_out_s(j->o, v ? "true" : "false");
}

void lp_json_double(struct lp_json *j, const char *fmt, double v) {
    if (j->tape) {
        struct rec r = {.n = 0};
        uint64_t bits;
        memcpy(&bits, &v, 8);
        rec_u64(&r, bits);
        rec_text(&r, fmt, strlen(fmt));
        return tape(j, T_DOUBLE, &r);
    }
    if (!value(j)) {
        lp_out_fmt(j->o, fmt, v);
        return;
    }
    /* as the text has it: "%.3f" rounds to three decimals (no libm: the preload links none) */
    if (fmt[0] == '%' && fmt[1] == '.' && fmt[2] >= '0' && fmt[2] <= '9' && fmt[3] == 'f' && !fmt[4]) {
        double m = 1;
        for (int k = 0; k < fmt[2] - '0'; k++) m *= 10;
        if (v * m < 4e18 && v * m > -4e18) v = (double)(int64_t)(v * m + (v < 0 ? -0.5 : 0.5)) / m;
    }
    give(j, (struct lp_json_val){.kind = LP_JV_DOUBLE, .d = v});
}

void lp_json_str(struct lp_json *j, const char *s, size_t n) {
    if (j->tape) return tape_text(j, T_STR, s, n);
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_STR, .s = s, .n = n});
    else
        lp_out_json_str(j->o, s, n);
}

void lp_json_hex(struct lp_json *j, uint64_t v) {
    char b[24];
    int n = snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
    lp_json_str(j, b, (size_t)n);
}

static void open_nest(struct lp_json *j, int arr) {
    if (j->tape) return tape0(j, arr ? T_ARRAY : T_OBJECT);
    if (value(j))
        give(j, (struct lp_json_val){.kind = arr ? LP_JV_ARRAY : LP_JV_OBJECT});
    else
        lp_out_c(j->o, arr ? '[' : '{');
    if (j->depth + 1 < LP_JSON_NEST) j->depth++; /* (deeper: the commas of the last level) */
    j->arr[j->depth] = (uint8_t)arr;
    j->fresh[j->depth] = 1;
}

static void close_nest(struct lp_json *j, int arr) {
    if (j->tape) return tape0(j, arr ? T_ARRAY_END : T_OBJECT_END);
    if (j->depth) j->depth--;
    if (j->to)
        give(j, (struct lp_json_val){.kind = LP_JV_END});
    else
        lp_out_c(j->o, arr ? ']' : '}');
}

void lp_json_array(struct lp_json *j) { open_nest(j, 1); }
void lp_json_array_end(struct lp_json *j) { close_nest(j, 1); }
void lp_json_object(struct lp_json *j) { open_nest(j, 0); }
void lp_json_object_end(struct lp_json *j) { close_nest(j, 0); }

int lp_json_memo(struct lp_json *j, uint64_t key) {
    return !j->tape && j->to && j->to->memo ? j->to->memo(j->to->self, key) : 0;
}

void lp_json_memo_end(struct lp_json *j) {
    if (!j->tape && j->to && j->to->memo_end) j->to->memo_end(j->to->self);
}

void lp_json_divert(struct lp_json *j, struct lp_out *o) { j->tape = o; }

void lp_json_back(struct lp_json *j) { j->tape = j->tape_home; }

void lp_json_tape(struct lp_json *j, struct lp_out *o) { j->tape = j->tape_home = o; }

/* The next text of a record's payload at *p (before e): NULL when the record is damaged. */
static const char *get_text(const uint8_t **p, const uint8_t *e, size_t *n) {
    uint32_t len;
    if (e - *p < 4) return NULL;
    memcpy(&len, *p, 4);
    if ((size_t)(e - *p - 4) < len) return NULL;
    const char *s = (const char *)*p + 4;
    *p += 4 + len;
    *n = len;
    return s;
}

static const char *get_text_at(const uint8_t *p, const uint8_t *e, size_t *n) { return get_text(&p, e, n); }

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* One record made again (payload p, n bytes): 0, or -1 when it is not one. */
static int replay_one(struct lp_json *j, uint8_t op, const uint8_t *p, size_t n) {
    const uint8_t *e = p + n;
    size_t tn;
    const char *t;
    char buf[256];
    switch (op) {
    case T_EVENT: {
        if (n < 26) return -1;
        char ph[2] = {(char)p[0], 0};
        unsigned has = p[1];
        uint64_t pid = get_u64(p + 2), tid = get_u64(p + 10), ts = get_u64(p + 18);
        const uint8_t *q = p + 26;
        size_t cn, nn;
        const char *cat = get_text(&q, e, &cn), *name = cat ? get_text(&q, e, &nn) : NULL;
        if (!name || cn >= sizeof buf) return -1;
        memcpy(buf, cat, cn); /* (a category is a C string to the writer) */
        buf[cn] = 0;
        lp_json_event(j, ph, pid, tid, has & 1 ? buf : NULL, has & 2 ? name : NULL, nn, (int64_t)ts);
        return 0;
    }
    case T_DOUBLE:
        if (n < 8 || !(t = (get_text_at(p + 8, e, &tn))) || tn >= sizeof buf) return -1;
        memcpy(buf, t, tn);
        buf[tn] = 0;
        double d;
        memcpy(&d, p, 8);
        lp_json_double(j, buf, d);
        return 0;
    case T_KEY:
    case T_STR:
    case T_INTS:
    case T_META:
        if (!(t = get_text_at(p, e, &tn))) return -1;
        if (op == T_META) {
            if (tn >= sizeof buf) return -1;
            memcpy(buf, t, tn);
            buf[tn] = 0;
            lp_json_metadata(j, buf);
        } else if (op == T_KEY)
            lp_json_keyn(j, t, tn);
        else if (op == T_STR) {
            lp_json_str(j, t, tn);
        } else {
            lp_json_ints(j, t, tn);
        }
        return 0;
    default: break;
    }
    uint64_t v = n >= 8 ? get_u64(p) : 0;
    switch (op) {
    case T_DUR: lp_json_dur(j, v); break;
    case T_SCOPE: lp_json_scope(j, (char)v); break;
    case T_ID: lp_json_id(j, v); break;
    case T_FLOW_END: lp_json_flow_end(j, v); break;
    case T_U64: lp_json_u64(j, v); break;
    case T_I64: lp_json_i64(j, (int64_t)v); break;
    case T_BOOL: lp_json_bool(j, (int)v); break;
    case T_ARGS: lp_json_args(j); break;
    case T_ARGS_END: lp_json_args_end(j); break;
    case T_EVENT_END: lp_json_event_end(j); break;
    case T_ARRAY: lp_json_array(j); break;
    case T_ARRAY_END: lp_json_array_end(j); break;
    case T_OBJECT: lp_json_object(j); break;
    case T_OBJECT_END: lp_json_object_end(j); break;
    case T_NULL: lp_json_null(j); break;
    case T_END: lp_json_end(j); break;
    default: return -1;
    }
    return 0;
}

int64_t lp_json_tape_ts(const void *event) {
    int64_t ts;
    memcpy(&ts, (const uint8_t *)event + 5 + 18, 8);
    return ts;
}

void lp_json_tape_set_ts(void *event, int64_t ts) { memcpy((uint8_t *)event + 5 + 18, &ts, 8); }

int lp_json_tape_is(const void *event, size_t n, char ph, const char *name) {
    const uint8_t *p = event, *e = p + n, *q = p + 5 + 26;
    size_t cn, nn, want = strlen(name);
    if (n < 5 + 26 || p[0] != T_EVENT || p[5] != (uint8_t)ph || !get_text(&q, e, &cn)) return 0;
    const char *nm = get_text(&q, e, &nn);
    return nm && nn == want && !memcmp(nm, name, nn);
}

size_t lp_json_replay(struct lp_json *j, const void *tape, size_t n) {
    const uint8_t *p = tape, *e = p + n;
    while (e - p >= 5) {
        uint32_t len;
        memcpy(&len, p + 1, 4);
        if ((size_t)(e - p - 5) < len) break; /* (the rest comes with the next part) */
        if (replay_one(j, p[0], p + 5, len) != 0) return (size_t)-1;
        p += 5 + len;
    }
    return (size_t)(p - (const uint8_t *)tape);
}

/* Printable ASCII with nothing to escape: written as it is. */
static int plain(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\') return 0;
    return 1;
}

/* Counter samples: a trace has thousands (the heap track). A track whose name and key are plain
 * ASCII composes the text its samples share once; others (a program's counter names) take the
 * general way, which escapes them. */
void lp_json_track(struct lp_json_track *t, uint64_t pid, const char *name, const char *key) {
    size_t nl = strlen(name), kl = strlen(key);
    t->pid = pid;
    t->name = name;
    t->key = key;
    t->plain = nl <= 64 && kl <= 64 && plain(name, nl) && plain(key, kl);
    t->sink_track = 0;
    memset(t->head, 0, sizeof t->head);
    memset(t->mid, 0, sizeof t->mid);
    if (!t->plain) return;
    char num[24], *d;
    char *p = t->head;
#define PUT(s, n) (memcpy(p, (s), (n)), p += (n))
#define PUTS(lit) PUT(lit, sizeof lit - 1)
    PUTS("{\"ph\":\"C\",\"pid\":");
    d = lp_fmt_u64(num + sizeof num, pid);
    PUT(d, (size_t)(num + sizeof num - d));
    PUTS(",\"tid\":");
    PUT(d, (size_t)(num + sizeof num - d));
    PUTS(",\"name\":\"");
    PUT(name, nl);
    PUTS("\",\"ts\":");
    t->head_len = (size_t)(p - t->head);
    p = t->mid;
    PUTS(",\"args\":{\"");
    PUT(key, kl);
    PUTS("\":");
    t->mid_len = (size_t)(p - t->mid);
#undef PUT
#undef PUTS
}

/* `len` bytes of `src` at p, copied as a fixed `small` bytes when they fit (a few moves, no
 * call; `room` bytes of src are readable, and as many writable at p); returns p + len. */
static inline char *piece(char *p, const char *src, size_t len, size_t small, size_t room) {
    if (len <= small)
        memcpy(p, src, small);
    else
        memcpy(p, src, room);
    return p + len;
}

void lp_json_sample(struct lp_json *j, struct lp_json_track *t, uint64_t ts_ns, uint64_t v) {
    struct lp_out *o = j->o;
    if (!j->tape && j->to && j->to->sample && ts_ns <= INT64_MAX) {
        j->to->sample(j->to->self, t, ts_ns, v);
        return;
    }
    if (!t->plain || ts_ns > INT64_MAX || j->to || j->tape) {
        lp_json_event(j, "C", t->pid, t->pid, NULL, t->name, strlen(t->name), (int64_t)ts_ns);
        lp_json_args(j);
        lp_json_key(j, t->key);
        lp_json_u64(j, v);
        lp_json_args_end(j);
        lp_json_event_end(j);
        return;
    }
    /* composed in place in the writer's buffer (a local one when it is nearly full) */
    char local[512], *b = sizeof o->buf - o->n >= sizeof local ? o->buf + o->n : local, *p = b;
    char num[48], *d;
    *p = ',';
    p += !j->first_event;
    *p++ = '\n';
    j->first_event = 0;
    p = piece(p, t->head, t->head_len, 64, sizeof t->head);
    d = lp_fmt_us(num + 24, ts_ns); /* (24 bytes readable from d) */
    p = piece(p, d, (size_t)(num + 24 - d), 24, 24);
    p = piece(p, t->mid, t->mid_len, 32, sizeof t->mid);
    d = lp_fmt_u64(num + 24, v);
    p = piece(p, d, (size_t)(num + 24 - d), 24, 24);
    *p++ = '}';
    *p++ = '}';
    if (b == local)
        lp_out_write(o, b, (size_t)(p - b));
    else
        o->n += (size_t)(p - b);
}

void lp_json_counter(struct lp_json *j, uint64_t pid, const char *name, int64_t ts_ns, const char *key, uint64_t v) {
    struct lp_json_track t;
    lp_json_track(&t, pid, name, key);
    if (ts_ns < 0) t.plain = 0; /* (no "ts": the general way leaves it out) */
    lp_json_sample(j, &t, (uint64_t)ts_ns, v);
}

void lp_json_meta_name(struct lp_json *j, uint64_t pid, uint64_t tid, const char *what, const char *name, size_t nlen) {
    lp_json_event(j, "M", pid, tid, NULL, what, strlen(what), -1);
    lp_json_args(j);
    lp_json_key(j, "name");
    lp_json_str(j, name, nlen);
    lp_json_args_end(j);
    lp_json_event_end(j);
}

void lp_json_meta_sort(struct lp_json *j, uint64_t pid, uint64_t tid, uint64_t index) {
    lp_json_event(j, "M", pid, tid, NULL, "thread_sort_index", 17, -1);
    lp_json_args(j);
    lp_json_key(j, "sort_index");
    lp_json_u64(j, index);
    lp_json_args_end(j);
    lp_json_event_end(j);
}

void lp_json_value_begin(struct lp_json *j) {
    j->depth = 0;
    j->arr[0] = 0;
    j->fresh[0] = 1;
}

void lp_json_raw(struct lp_json *j, const char *json, size_t n) {
    value(j);
    lp_out_write(j->o, json, n);
}

void lp_json_metadata(struct lp_json *j, const char *key) {
    lp_json_value_begin(j);
    if (j->tape) return tape_text(j, T_META, key, strlen(key));
    if (j->to) { /* an event of its own, its one argument `key` (Perfetto: an instant's annotations) */
        j->ev = (struct lp_json_ev){.ph = 'm', .ts_ns = -1};
        j->to->begin(j->to->self, &j->ev);
        j->to->key(j->to->self, key, strlen(key));
        return;
    }
    lp_out_s(j->o, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{");
    lp_out_json_str(j->o, key, strlen(key));
    lp_out_c(j->o, ':');
}

void lp_json_end(struct lp_json *j) {
    if (j->tape)
        tape0(j, T_END);
    else if (j->to)
        j->to->end(j->to->self, &j->ev);
    else
        lp_out_s(j->o, "}}\n");
}

void lp_json_null(struct lp_json *j) {
    if (j->tape) return tape0(j, T_NULL);
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_NULL});
    else
        lp_out_s(j->o, "null");
}

void lp_json_ints(struct lp_json *j, const char *s, size_t n) {
    if (j->tape) return tape_text(j, T_INTS, s, n);
    if (!j->to) { /* as it is */
        value(j);
        lp_out_write(j->o, s, n);
        return;
    }
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c == '[') {
            lp_json_array(j);
        } else if (c == ']') {
            lp_json_array_end(j);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            int neg = c == '-';
            uint64_t v = 0;
            for (i += neg; i < n && s[i] >= '0' && s[i] <= '9'; i++) v = v * 10 + (uint64_t)(s[i] - '0');
            lp_json_i64(j, neg ? -(int64_t)v : (int64_t)v);
            continue;
        }
        i++; /* (commas, spaces) */
    }
}

/* key-value pairs: "KEY":VALUE */
void lp_json_ku(struct lp_json *j, const char *key, uint64_t v) {
    lp_json_key(j, key);
    lp_json_u64(j, v);
}
void lp_json_ki(struct lp_json *j, const char *key, int64_t v) {
    lp_json_key(j, key);
    lp_json_i64(j, v);
}
void lp_json_kb(struct lp_json *j, const char *key, int v) {
    lp_json_key(j, key);
    lp_json_bool(j, v);
}
void lp_json_ks(struct lp_json *j, const char *key, const char *s, size_t n) {
    lp_json_key(j, key);
    lp_json_str(j, s, n);
}
void lp_json_kd(struct lp_json *j, const char *key, const char *fmt, double v) {
    lp_json_key(j, key);
    lp_json_double(j, fmt, v);
}
void lp_json_kobject(struct lp_json *j, const char *key) {
    lp_json_key(j, key);
    lp_json_object(j);
}
void lp_json_karray(struct lp_json *j, const char *key) {
    lp_json_key(j, key);
    lp_json_array(j);
}
void lp_json_kus(struct lp_json *j, const char *key, ...) {
    va_list ap;
    va_start(ap, key);
    for (const char *k = key; k; k = va_arg(ap, const char *)) lp_json_ku(j, k, va_arg(ap, uint64_t));
    va_end(ap);
}
