/* skew.c: cross-host clock-skew correction for `--merge` of a job's ranks.
 *
 * Each trace's timeline is anchored on its host's CLOCK_REALTIME, which NTP keeps within
 * milliseconds between machines at best — more than an MPI call lasts. A collective that no rank
 * leaves before every rank has entered it gives a common instant: all ranks leave an
 * MPI_Barrier within one release latency (microseconds on one switch). So the first MPI_Barrier
 * on each rank's main thread (else MPI_Init's end, which Open MPI ends with a fence of all ranks)
 * is taken as the same instant on every rank. A rank can leave late (descheduled, busy-polling on
 * an oversubscribed node) but none leaves before the release, so per host the earliest exit of
 * its ranks is the best estimate of the release on that host's clock; its difference to the
 * reference host's (the host of the lowest rank) is that host's clock offset, and its ranks are
 * shifted by it. Ranks on one host share a clock and are never moved
 * against each other.
 *
 * Limits (README "Jobs of many processes"): the offset is constant over the run (drift is not
 * followed: a long job on unsynchronised clocks drifts by ppm); it is exact to within the
 * barrier's release latency; it needs the same synchronising call on every rank (a first barrier
 * on a sub-communicator, or a rank without one, turns the correction off for the job, and the
 * merge says so). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/describe.h"
#include "lib/reader.h"
#include "report.h"

/* The earliest sync instant of the ranks on `host` (INT64_MAX for none). */
static int64_t host_earliest(const struct rp_sync *in, int n, const char *host, int which) {
    int64_t t = INT64_MAX;
    for (int i = 0; i < n; i++)
        if (in[i].rank >= 0 && !strcmp(in[i].host, host) && in[i].origin_ns + in[i].sync_ns[which] < t)
            t = in[i].origin_ns + in[i].sync_ns[which];
    return t;
}

const char *rp_skew(const struct rp_sync *in, int n, int64_t *corr_ns) {
    for (int i = 0; i < n; i++) corr_ns[i] = 0;
    int ranks = 0, ref = -1, hosts = 0;
    for (int i = 0; i < n; i++) {
        if (in[i].rank < 0) continue;
        ranks++;
        if (ref < 0 || in[i].rank < in[ref].rank) ref = i;
        int seen = 0;
        for (int k = 0; k < i && !seen; k++) seen = in[k].rank >= 0 && !strcmp(in[k].host, in[i].host);
        hosts += !seen;
    }
    if (ranks < 2 || hosts < 2) return NULL; /* one clock: nothing to correct */
    static const char *const names[2] = {"MPI_Barrier", "MPI_Init"};
    int which = -1;
    for (int w = 0; w < 2 && which < 0; w++) {
        int all = 1;
        for (int i = 0; i < n && all; i++) all = in[i].rank < 0 || in[i].sync_ns[w] > 0;
        if (all) which = w;
    }
    if (which < 0) return "none";
    int64_t base = host_earliest(in, n, in[ref].host, which);
    for (int i = 0; i < n; i++) {
        if (in[i].rank < 0 || !strcmp(in[i].host, in[ref].host)) continue;
        int done = 0; /* computed already for an earlier rank of this host */
        for (int k = 0; k < i && !done; k++)
            if (in[k].rank >= 0 && !strcmp(in[k].host, in[i].host)) {
                corr_ns[i] = corr_ns[k];
                done = 1;
            }
        if (!done) corr_ns[i] = base - host_earliest(in, n, in[i].host, which);
    }
    return names[which];
}

void rp_sync_of_slices(const struct lp_slices *c, struct rp_sync *s) {
    s->origin_ns = c->origin_real_ns;
    s->rank = c->rank;
    memcpy(s->host, c->host, sizeof s->host);
    s->sync_ns[0] = s->sync_ns[1] = 0;
    int64_t first[2] = {INT64_MAX, INT64_MAX};
    for (size_t k = 0; k < c->nslices; k++) {
        const struct lp_slice *sl = &c->slices[k];
        if ((c->pid && sl->tid != c->pid) || strcmp(c->names[sl->cat], "mpi")) continue;
        const char *nm = c->names[sl->name];
        int w = !strcmp(nm, "MPI_Barrier") ? 0 : !strcmp(nm, "MPI_Init") || !strcmp(nm, "MPI_Init_thread") ? 1 : -1;
        if (w >= 0 && sl->ts_ns < first[w]) {
            first[w] = sl->ts_ns;
            s->sync_ns[w] = sl->ts_ns + sl->dur_ns;
        }
    }
}

void rp_sync_of_reader(const struct lp_reader *r, struct rp_sync *s) {
    s->origin_ns = (int64_t)r->hdr.origin_real_ns;
    s->rank = -1;
    snprintf(s->host, sizeof s->host, "%.*s", (int)r->hostname_len, r->hostname ? r->hostname : "");
    s->sync_ns[0] = s->sync_ns[1] = 0;
    if (!r->job) return; /* not a job's rank: nothing to align */
    const char *rk = memchr(r->job, 0, r->job_len);
    if (rk && rk + 1 < r->job + r->job_len) s->rank = strtoll(rk + 1, NULL, 10);
    /* the main thread's first MPI_Init and MPI_Barrier ends, as the converter finds them
     * (lib/views.c): the run's first events, so the scan stops early */
    struct lp_iter *it = lp_iter_new(r);
    struct lp_event e;
    while (it && (!s->sync_ns[0] || !s->sync_ns[1]) && lp_iter_next(it, &e)) {
        if (lp_kind_shape[e.kind] != LP_SHAPE_CALL || !e.timed || e.tid != r->hdr.pid) continue;
        struct lp_call_rec c;
        lp_call_decode(e.w, &c);
        if (c.call != LP_CALL_MPI_BARRIER && c.call != LP_CALL_MPI_INIT && c.call != LP_CALL_MPI_INIT_THREAD) continue;
        int w = c.call != LP_CALL_MPI_BARRIER;
        if (!s->sync_ns[w]) s->sync_ns[w] = (int64_t)(e.start_ns + e.dur_ns);
    }
    lp_iter_free(it);
}
