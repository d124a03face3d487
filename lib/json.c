/* json.c: see json.h. */
#include "json.h"

#include <string.h>

void lp_json_begin(struct lp_json *j, struct lp_out *o) {
    j->o = o;
    j->first_event = 1;
    lp_out_s(o, "{\"traceEvents\":[");
}

void lp_json_event(struct lp_json *j, const char *ph, uint64_t pid, uint64_t tid, const char *cat, const char *name,
                   size_t nlen, int64_t ts_ns) {
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
    lp_out_s(j->o, ",\"dur\":");
    lp_out_us(j->o, ns);
}

void lp_json_args(struct lp_json *j) {
    lp_out_s(j->o, ",\"args\":{");
    j->first_key = 1;
}

void lp_json_key(struct lp_json *j, const char *key) {
    if (!j->first_key) lp_out_c(j->o, ',');
    j->first_key = 0;
    lp_out_json_str(j->o, key, strlen(key));
    lp_out_c(j->o, ':');
}

void lp_json_args_end(struct lp_json *j) { lp_out_c(j->o, '}'); }
void lp_json_event_end(struct lp_json *j) { lp_out_c(j->o, '}'); }

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

void lp_json_sample(struct lp_json *j, const struct lp_json_track *t, uint64_t ts_ns, uint64_t v) {
    struct lp_out *o = j->o;
    if (!t->plain || ts_ns > INT64_MAX) {
        lp_json_event(j, "C", t->pid, t->pid, NULL, t->name, strlen(t->name), (int64_t)ts_ns);
        lp_json_args(j);
        lp_json_key(j, t->key);
        lp_out_u64(o, v);
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
    lp_out_json_str(j->o, name, nlen);
    lp_json_args_end(j);
    lp_json_event_end(j);
}

void lp_json_meta_sort(struct lp_json *j, uint64_t pid, uint64_t tid, uint64_t index) {
    lp_json_event(j, "M", pid, tid, NULL, "thread_sort_index", 17, -1);
    lp_json_args(j);
    lp_json_key(j, "sort_index");
    lp_out_u64(j->o, index);
    lp_json_args_end(j);
    lp_json_event_end(j);
}

void lp_json_metadata(struct lp_json *j, const char *key) {
    lp_out_s(j->o, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{");
    lp_out_json_str(j->o, key, strlen(key));
    lp_out_c(j->o, ':');
}

void lp_json_end(struct lp_json *j) { lp_out_s(j->o, "}}\n"); }
