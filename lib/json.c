/* json.c: see json.h. */
#include "json.h"

#include <stdio.h>
#include <string.h>

void lp_json_begin(struct lp_json *j, struct lp_out *o) {
    j->o = o;
    j->first_event = 1;
    lp_out_s(o, "{\"traceEvents\":[");
}

void lp_json_event(struct lp_json *j, const char *ph, uint64_t pid, uint64_t tid, const char *cat, const char *name,
                   size_t nlen, int64_t ts_ns) {
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
    if (j->to) {
        j->ev.has_dur = 1;
        j->ev.dur_ns = ns;
        return;
    }
    lp_out_s(j->o, ",\"dur\":");
    lp_out_us(j->o, ns);
}

void lp_json_scope(struct lp_json *j, char scope) {
    if (j->to) {
        j->ev.scope = scope;
        return;
    }
    char t[] = ",\"s\":\"t\"";
    t[6] = scope;
    lp_out_s(j->o, t);
}

void lp_json_id(struct lp_json *j, uint64_t id) {
    if (j->to) {
        j->ev.has_id = 1;
        j->ev.id = id;
        return;
    }
    lp_out_s(j->o, ",\"id\":");
    lp_out_u64(j->o, id);
}

void lp_json_flow_end(struct lp_json *j, uint64_t id) {
    if (j->to)
        j->ev.bind_enclosing = 1;
    else
        lp_out_s(j->o, ",\"bp\":\"e\"");
    lp_json_id(j, id);
}

void lp_json_args(struct lp_json *j) {
    j->depth = 0;
    j->arr[0] = 0;
    j->fresh[0] = 1;
    if (!j->to) lp_out_s(j->o, ",\"args\":{");
}

void lp_json_key(struct lp_json *j, const char *key) {
    int fresh = j->fresh[j->depth];
    j->fresh[j->depth] = 0;
    if (j->to) {
        j->to->key(j->to->self, key, strlen(key));
        return;
    }
    if (!fresh) lp_out_c(j->o, ',');
    lp_out_json_str(j->o, key, strlen(key));
    lp_out_c(j->o, ':');
}

void lp_json_args_end(struct lp_json *j) {
    if (!j->to) lp_out_c(j->o, '}');
}

void lp_json_event_end(struct lp_json *j) {
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
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_U64, .u = v});
    else
        lp_out_u64(j->o, v);
}

void lp_json_i64(struct lp_json *j, int64_t v) {
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_I64, .i = v});
    else
        lp_out_i64(j->o, v);
}

void lp_json_bool(struct lp_json *j, int v) {
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_BOOL, .u = v != 0});
    else
        lp_out_s(j->o, v ? "true" : "false");
}

void lp_json_double(struct lp_json *j, const char *fmt, double v) {
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

void lp_json_raw(struct lp_json *j, const char *json, size_t n) {
    if (value(j))
        give(j, (struct lp_json_val){.kind = LP_JV_RAW, .s = json, .n = n});
    else
        lp_out_write(j->o, json, n);
}

static void open_nest(struct lp_json *j, int arr) {
    if (value(j))
        give(j, (struct lp_json_val){.kind = arr ? LP_JV_ARRAY : LP_JV_OBJECT});
    else
        lp_out_c(j->o, arr ? '[' : '{');
    if (j->depth + 1 < LP_JSON_NEST) j->depth++; /* (deeper: the commas of the last level) */
    j->arr[j->depth] = (uint8_t)arr;
    j->fresh[j->depth] = 1;
}

static void close_nest(struct lp_json *j, int arr) {
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

int lp_json_memo(struct lp_json *j, uint64_t key) { return j->to && j->to->memo ? j->to->memo(j->to->self, key) : 0; }

void lp_json_memo_end(struct lp_json *j) {
    if (j->to && j->to->memo_end) j->to->memo_end(j->to->self);
}

void lp_json_divert(struct lp_json *j, struct lp_out *o) {
    if (j->diverted) return;
    j->diverted = 1;
    j->diverted_o = j->o;
    j->diverted_to = j->to;
    j->o = o;
    j->to = NULL;
}

void lp_json_back(struct lp_json *j) {
    if (!j->diverted) return;
    j->diverted = 0;
    j->o = j->diverted_o;
    j->to = j->diverted_to;
}

void lp_json_text(struct lp_json *j, const char *p, size_t n) {
    if (j->to)
        j->to->text(j->to->self, p, n);
    else
        lp_out_write(j->o, p, n);
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
    if (j->to && j->to->sample && ts_ns <= INT64_MAX) {
        j->to->sample(j->to->self, t, ts_ns, v);
        return;
    }
    if (!t->plain || ts_ns > INT64_MAX || j->to) {
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

void lp_json_metadata(struct lp_json *j, const char *key) {
    lp_out_s(j->o, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{");
    lp_out_json_str(j->o, key, strlen(key));
    lp_out_c(j->o, ':');
}

void lp_json_end(struct lp_json *j) { lp_out_s(j->o, "}}\n"); }
