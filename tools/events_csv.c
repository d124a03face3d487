/* events_csv.c: see events_csv.h. */
#define _GNU_SOURCE
#include "events_csv.h"

#include <stdlib.h>
#include <string.h>

#include "lib/describe.h"
#include "lib/fmt.h"
#include "lib/vec.h"

static void csv_str(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

#define EVENTS_CSV_HEADER "pid,tid,ts_ns,dur_ns,category,name,size,ptr,rank,host\n"

static const struct lp_slice *sort_base;
static int by_start(const void *a, const void *b) {
    int64_t x = sort_base[*(const size_t *)a].ts_ns, y = sort_base[*(const size_t *)b].ts_ns;
    return x < y ? -1 : x > y;
}

int rp_events_csv(FILE *f, const struct lp_slices *c, int keyed) {
    size_t *order = NULL;
    if (keyed) { /* in start order, each row led by its start */
        order = malloc((c->nslices + 1) * sizeof *order);
        if (!order) return -1;
        for (size_t i = 0; i < c->nslices; i++) order[i] = i;
        sort_base = c->slices;
        lp_sort(order, c->nslices, sizeof *order, by_start);
    } else {
        fputs(EVENTS_CSV_HEADER, f);
    }
    for (size_t i = 0; i < c->nslices; i++) {
        const struct lp_slice *s = &c->slices[order ? order[i] : i];
        if (keyed) fprintf(f, "%lld\t", (long long)s->ts_ns);
        fprintf(f, "%lld,%lld,%lld,%lld,", (long long)s->pid, (long long)s->tid, (long long)s->ts_ns,
                (long long)s->dur_ns);
        csv_str(f, c->names[s->cat]);
        fputc(',', f);
        csv_str(f, c->names[s->name]);
        fputs(",,,", f);
        if (c->rank >= 0) fprintf(f, "%lld", (long long)c->rank);
        fputc(',', f);
        csv_str(f, c->host);
        fputc('\n', f);
    }
    free(order);
    return ferror(f) ? -1 : 0;
}

/* Every event of a raw trace, streamed: allocations with their size and pointer, calls and ranges
 * with their duration. */
int rp_events_csv_lpt(FILE *f, const struct lp_reader *r, int keyed) {
    struct lp_iter *it = lp_iter_new(r);
    if (!it) return -1;
    if (!keyed) fputs(EVENTS_CSV_HEADER, f);
    /* the job's rank and the host, the same on every row: a fleet's CSVs are one table */
    char tail[128] = ",";
    long long rank = -1;
    if (r->job) {
        const char *rk = memchr(r->job, 0, r->job_len);
        if (rk && rk + 1 < r->job + r->job_len) rank = strtoll(rk + 1, NULL, 10);
    }
    if (rank >= 0) snprintf(tail, sizeof tail, ",%lld,", rank);
    size_t tl = strlen(tail);
    snprintf(tail + tl, sizeof tail - tl, "%.*s", (int)(r->hostname_len < 100 ? r->hostname_len : 100),
             r->hostname ? r->hostname : "");
    struct lp_event e;
    while (lp_iter_next(it, &e)) {
        int shape = lp_kind_shape[e.kind];
        if (e.phase != 1 || shape == LP_SHAPE_CONTROL) continue;
        uint32_t len;
        const char *cat, *n = lp_event_name(r, &e, &len, &cat); /* named as in the Chrome trace */
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)len, n);
        uint64_t size = 0, ptr = 0;
        int has_mem = 0;
        if (shape == LP_SHAPE_ALLOC || shape == LP_SHAPE_REALLOC) {
            size = e.w[0];
            ptr = e.w[1];
            has_mem = 1;
        } else if (shape == LP_SHAPE_FREE) {
            ptr = e.w[0];
            has_mem = 1;
        }
        if (keyed) fprintf(f, "%llu\t", (unsigned long long)e.ns); /* the decoder's order: effect time */
        fprintf(f, "%u,%u,%llu,", r->hdr.pid, e.tid, (unsigned long long)e.start_ns);
        if (e.timed) fprintf(f, "%llu", (unsigned long long)e.dur_ns);
        fputc(',', f);
        csv_str(f, cat);
        fputc(',', f);
        csv_str(f, name);
        if (has_mem)
            fprintf(f, ",%llu,0x%llx%s\n", (unsigned long long)size, (unsigned long long)ptr, tail);
        else
            fprintf(f, ",,%s\n", tail);
    }
    lp_iter_free(it);
    return ferror(f) ? -1 : 0;
}

/* One record of a keyed CSV (a quoted field may hold a newline): into *buf, 0 at the end. */
static int keyed_record(FILE *in, char **buf, size_t *cap) {
    size_t len = 0;
    int quotes = 0;
    for (;;) {
        if (len + 2 >= *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            char *p = realloc(*buf, nc);
            if (!p) return -1;
            *buf = p;
            *cap = nc;
        }
        int ch = getc(in);
        if (ch == EOF) {
            (*buf)[len] = '\0';
            return len > 0;
        }
        (*buf)[len++] = (char)ch;
        quotes += ch == '"';
        if (ch == '\n' && quotes % 2 == 0) {
            (*buf)[len] = '\0';
            return 1;
        }
    }
}

int rp_merge_keyed_csv(FILE **in, const int64_t *shift_ns, int n, FILE *out) {
    struct pend {
        char *buf;
        size_t cap;
        int64_t key;
        int live;
    } *p = calloc((size_t)n, sizeof *p);
    if (!p) return -1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        int k = keyed_record(in[i], &p[i].buf, &p[i].cap);
        p[i].live = k > 0;
        if (k < 0) rc = -1;
        if (p[i].live) p[i].key = strtoll(p[i].buf, NULL, 10) + shift_ns[i];
    }
    fputs(EVENTS_CSV_HEADER, out);
    for (;;) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (p[i].live && (best < 0 || p[i].key < p[best].key)) best = i;
        if (best < 0) break;
        /* KEY\tpid,tid,ts,...: the row without its key, ts shifted */
        const char *row = strchr(p[best].buf, '\t');
        const char *c1 = row ? strchr(row + 1, ',') : NULL, *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        if (c2) {
            char *end;
            long long ts = strtoll(c2 + 1, &end, 10);
            fwrite(row + 1, 1, (size_t)(c2 + 1 - (row + 1)), out);
            fprintf(out, "%lld", ts + (long long)shift_ns[best]);
            fputs(end, out);
        }
        int k = keyed_record(in[best], &p[best].buf, &p[best].cap);
        p[best].live = k > 0;
        if (k < 0) rc = -1;
        if (p[best].live) p[best].key = strtoll(p[best].buf, NULL, 10) + shift_ns[best];
    }
    for (int i = 0; i < n; i++) free(p[i].buf);
    free(p);
    return rc || ferror(out) ? -1 : 0;
}
