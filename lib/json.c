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

/* A counter point, composed in one buffer: a trace has thousands (the heap track). Names and
 * keys that are plain ASCII are copied as they are; others (a program's counter names) take the
 * general way, which escapes them. */
void lp_json_counter(struct lp_json *j, uint64_t pid, const char *name, int64_t ts_ns, const char *key, uint64_t v) {
    size_t nl = strlen(name), kl = strlen(key);
    if (nl > 64 || kl > 64 || ts_ns < 0 || !plain(name, nl) || !plain(key, kl)) {
        lp_json_event(j, "C", pid, pid, NULL, name, nl, ts_ns);
        lp_json_args(j);
        lp_json_key(j, key);
        lp_out_u64(j->o, v);
        lp_json_args_end(j);
        lp_json_event_end(j);
        return;
    }
    char b[320], num[32], *p = b, *d;
#define PUT(s, n) (memcpy(p, (s), (n)), p += (n))
#define PUTS(lit) PUT(lit, sizeof lit - 1)
#define PUTNUM(fmt, x) (d = fmt(num + sizeof num, (x)), PUT(d, (size_t)(num + sizeof num - d)))
    if (j->first_event)
        PUTS("\n{\"ph\":\"C\",\"pid\":");
    else
        PUTS(",\n{\"ph\":\"C\",\"pid\":");
    j->first_event = 0;
    PUTNUM(lp_fmt_u64, pid);
    PUTS(",\"tid\":");
    PUTNUM(lp_fmt_u64, pid);
    PUTS(",\"name\":\"");
    PUT(name, nl);
    PUTS("\",\"ts\":");
    PUTNUM(lp_fmt_us, (uint64_t)ts_ns);
    PUTS(",\"args\":{\"");
    PUT(key, kl);
    PUTS("\":");
    PUTNUM(lp_fmt_u64, v);
    PUTS("}}");
#undef PUT
#undef PUTS
#undef PUTNUM
    lp_out_write(j->o, b, (size_t)(p - b));
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
