/* Jobs of many processes (issue 18): an unmodified 4-rank Open MPI job (tests/progs/mpiring.c,
 * known calls and bytes per rank) under mpirun writes one trace per rank through %r, with exact
 * MPI counts and bytes and the job in its metadata; the merged report names the ranks and their
 * imbalance (the rank made to compute least waits longest in MPI); %r without a launcher; a
 * program probing for MPI is not fooled by libprof's exports. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

TestSuite(mpi, .timeout = 180);

static char *dir;
static void setup(void) {
    dir = make_tmpdir();
    if (access("/usr/bin/mpirun", X_OK) != 0 || access(PROG("mpiring"), X_OK) != 0)
        cr_skip_test("Open MPI (openmpi-bin, libopenmpi-dev) is not installed");
}

static void job(const char *ms) {
    const char *argv[] = {"/usr/bin/mpirun",
                          "--oversubscribe",
                          "-np",
                          "4",
                          "-x",
                          "LD_PRELOAD=" PRELOAD,
                          "-x",
                          strfmt("LIBPROF_OUTPUT=%s/r%%r.json", dir),
                          PROG("mpiring"),
                          ms,
                          NULL};
    struct run r;
    run_prog(&r, dir, (const char *[]){"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", NULL}, argv);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    for (int k = 0; k < 4; k++) cr_expect_not_null(strstr(r.out, strfmt("rank %d ok", k)), "%s", r.out);
    run_free(&r);
}

struct tally {
    int n;
    long long bytes;
};

static struct tally tally(cJSON *j, const char *name) {
    struct tally t = {0, 0};
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name"), *cat = cJSON_GetObjectItem(ev, "cat");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name) || !cJSON_IsString(cat) ||
            strcmp(cat->valuestring, "mpi"))
            continue;
        t.n++;
        cJSON *b = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "bytes");
        if (cJSON_IsNumber(b)) t.bytes += (long long)b->valuedouble;
    }
    return t;
}

/* Processes of a merged trace named "rank N (host)". */
static int ranks_named(cJSON *trace) {
    cJSON *ev;
    int named = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "process_name") &&
            !strncmp(cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "args"), "name")->valuestring, "rank ", 5))
            named++;
    }
    return named;
}

Test(mpi, four_ranks_exact_calls_and_bytes, .init = setup) {
    job("0");
    for (int k = 0; k < 4; k++) {
        char *path = strfmt("%s/r%d.json", dir, k);
        cr_assert(python_json_ok(path), "%s", path);
        cJSON *j = load_json(path), *jb = cJSON_GetObjectItem(libprof_meta(j), "job");
        cr_assert_not_null(jb, "rank %d: no metadata.libprof.job", k);
        cr_expect_str_eq(cJSON_GetObjectItem(jb, "launcher")->valuestring, "openmpi");
        cr_expect_eq(cJSON_GetObjectItem(jb, "rank")->valueint, k);
        cr_expect_eq(cJSON_GetObjectItem(jb, "world_size")->valueint, 4);
        struct tally t;
        t = tally(j, "MPI_Init");
        cr_expect_eq(t.n, 1, "rank %d MPI_Init", k);
        t = tally(j, "MPI_Finalize");
        cr_expect_eq(t.n, 1, "rank %d MPI_Finalize", k);
        t = tally(j, "MPI_Sendrecv");
        cr_expect(t.n == 10 && t.bytes == 80000, "rank %d Sendrecv %d %lld", k, t.n, t.bytes);
        t = tally(j, "MPI_Allreduce");
        cr_expect(t.n == 5 && t.bytes == 10240, "rank %d Allreduce %d %lld", k, t.n, t.bytes);
        t = tally(j, "MPI_Bcast");
        cr_expect(t.n == 1 && t.bytes == 400, "rank %d Bcast %d %lld", k, t.n, t.bytes);
        t = tally(j, "MPI_Barrier");
        cr_expect_eq(t.n, 2, "rank %d Barrier", k);
        struct tally s = tally(j, "MPI_Send"), r = tally(j, "MPI_Recv");
        cr_expect(s.n == (k == 0 ? 3 : 0) && s.bytes == (k == 0 ? 12288 : 0), "rank %d Send %d %lld", k, s.n, s.bytes);
        cr_expect(r.n == (k == 1 ? 3 : 0) && r.bytes == (k == 1 ? 12288 : 0), "rank %d Recv %d %lld", k, r.n, r.bytes);
        cJSON_Delete(j);
    }
}

/* Rank r computes 400 ms x (r + 1) before the last barrier, rank 3 nothing: it spends the most
 * time in MPI, waiting. (Steps of 400 ms: four ranks on two cores of a busy machine start up and
 * end a few hundred ms apart, and that time outside MPI counts as compute too.) */
Test(mpi, merged_report_names_ranks_and_imbalance, .init = setup) {
    job("400");
    const char *argv[] = {REPORT,
                          "--merge",
                          strfmt("%s/r0.json", dir),
                          strfmt("%s/r1.json", dir),
                          strfmt("%s/r2.json", dir),
                          strfmt("%s/r3.json", dir),
                          "--chrome",
                          strfmt("%s/all.json", dir),
                          "--summary",
                          NULL};
    struct run r;
    run_prog(&r, dir, NULL, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *t = strstr(r.out, "per rank (main thread");
    cr_assert_not_null(t, "%s", r.out);
    /* rows: rank host wall MPI waits compute ... heaviest */
    double compute[4] = {-1, -1, -1, -1}, mpi[4] = {-1, -1, -1, -1};
    char heaviest[4][64] = {"", "", "", ""};
    for (const char *l = strchr(t, '\n') + 1; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        l = strchr(l, '\n') ? l : l;
        int rank;
        char host[32], w[16], wu[8], m[16], mu[8], wt[16], wtu[8], c[16], cu[8];
        if (sscanf(l, "%d %31s %15s %7s %15s %7s %15s %7s %15s %7s", &rank, host, w, wu, m, mu, wt, wtu, c, cu) != 10 ||
            rank < 0 || rank > 3)
            continue;
        double v = atof(c) * (!strcmp(cu, "ms") ? 1e6 : !strcmp(cu, "us") ? 1e3 : !strcmp(cu, "s") ? 1e9 : 1);
        compute[rank] = v;
        mpi[rank] = atof(m) * (!strcmp(mu, "ms") ? 1e6 : !strcmp(mu, "us") ? 1e3 : !strcmp(mu, "s") ? 1e9 : 1);
        const char *eol = strchr(l, '\n');
        const char *h = strstr(l, "MPI_");
        while (h && eol && h < eol) {
            const char *nx = strstr(h + 4, "MPI_");
            if (!nx || nx > eol) break;
            h = nx;
        }
        if (h && (!eol || h < eol)) sscanf(h, "%63s", heaviest[rank]);
    }
    cr_expect(compute[2] > compute[1] && compute[1] > compute[0] && compute[0] > compute[3],
              "compute per rank: %g %g %g %g\n%s", compute[0], compute[1], compute[2], compute[3], t);
    cr_expect(compute[2] > 1000e6 && compute[3] < 20e6, "%s", t);
    cr_expect(mpi[3] > mpi[0] && mpi[3] > mpi[1] && mpi[3] > mpi[2], "rank 3 waits longest in MPI:\n%s", t);
    cr_expect(heaviest[3][0] != '\0', "%s", t);
    cr_expect_not_null(strstr(t, "the slowest rank: 2 "), "%s", t);
    cJSON *all = load_json(strfmt("%s/all.json", dir));
    cr_expect_eq(ranks_named(all), 4);
    cJSON_Delete(all);
    run_free(&r);
}

/* %r with no launcher: the pid, and one line saying so. */
Test(mpi, rank_pattern_without_a_launcher, .init = setup) {
    const char *argv[] = {"/bin/true", NULL};
    struct run r;
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/x%%r.json", dir), NULL}, argv);
    cr_assert_eq(r.status, 0);
    cr_expect_eq(count_lines_with(r.err, "libprof: %r: no rank in the environment"), 1, "%s", r.err);
    int n;
    char **files = child_traces(dir, "x", &n);
    (void)files;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^x[0-9][0-9]*\\.json$'", dir);
    const char *ls[] = {"/bin/sh", "-c", cmd, NULL};
    struct run l;
    run_prog(&l, NULL, NULL, ls);
    cr_expect_str_eq(l.out, "1\n", "files: %s", l.out);
    run_free(&l);
    run_free(&r);
}

/* A program that probes the global scope for MPI finds none, as without libprof. */
Test(mpi, probing_for_mpi_finds_none, .init = setup) {
    const char *argv[] = {"/usr/bin/python3", "-c",
                          "import ctypes; g = ctypes.CDLL(None); print(hasattr(g, 'MPI_Init'), hasattr(g, 'MPI_Send'))",
                          NULL};
    struct run bare, r;
    run_prog(&bare, dir, NULL, argv);
    run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, strfmt("LIBPROF_OUTPUT=%s/p.json", dir), NULL}, argv);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(bare.out, "False False\n");
    cr_expect_str_eq(r.out, bare.out);
    run_free(&r);
    run_free(&bare);
}

/* Past one machine: every rank's events CSV (rank and host columns) is one table `events` for a
 * real engine, and the fleet query is the SQL statement of docs/jobs-and-mpi.md, read from the
 * page: DuckDB for Python and Spark SQL (pyspark, local[2], Debian's Java 17), both from the
 * project's environment, run it over the MPI test's four ranks and return the same rows. */
static const char duck_py[] = "import duckdb, json, sys\n"
                              "duckdb.sql(\"create view events as select * from read_csv_auto('%s')\" % sys.argv[1])\n"
                              "print(json.dumps([list(r) for r in duckdb.sql(sys.argv[2]).fetchall()]))\n";
static const char spark_py[] =
    "import json, sys, warnings\n"
    "warnings.simplefilter('ignore')\n"
    "from pyspark.sql import SparkSession\n"
    "spark = (SparkSession.builder.master('local[2]').appName('libprof-fleet')\n"
    "         .config('spark.ui.enabled', 'false').config('spark.ui.showConsoleProgress', 'false')\n"
    "         .config('spark.sql.shuffle.partitions', '2').getOrCreate())\n"
    "spark.sparkContext.setLogLevel('ERROR')\n"
    "spark.read.option('header', True).option('inferSchema', True).csv(sys.argv[1]).createOrReplaceTempView('events')\n"
    "print(json.dumps([list(r) for r in spark.sql(sys.argv[2]).collect()]))\n"
    "spark.stop()\n";

/* The job's four events CSVs, e0.csv ... e3.csv; returns the documented fleet query. */
static char *fleet_csvs(void) {
    job("0");
    for (int k = 0; k < 4; k++) {
        struct run r;
        const char *argv[] = {REPORT, strfmt("%s/r%d.json", dir, k), "--events-csv", strfmt("%s/e%d.csv", dir, k), "-q",
                              NULL};
        run_prog(&r, dir, NULL, argv);
        cr_assert_eq(r.status, 0, "%s", r.err);
        run_free(&r);
    }
    size_t len;
    char *page = read_file(LP_SOURCE_DIR "/docs/jobs-and-mpi.md", &len);
    cr_assert_not_null(page);
    char *sql = strstr(page, "```sql\n");
    cr_assert_not_null(sql, "no sql block in docs/jobs-and-mpi.md");
    sql += 7;
    char *end = strstr(sql, "```");
    cr_assert_not_null(end);
    *end = '\0';
    cr_assert_not_null(strstr(sql, "from events"), "%s", sql);
    return sql;
}

static char *duckdb_rows(const char *sql) {
    struct run q;
    run_venv(&q, dir, (const char *[]){write_text(dir, "duck.py", duck_py), strfmt("%s/e*.csv", dir), sql, NULL});
    cr_assert_eq(q.status, 0, "%s%s", q.out, q.err);
    char *rows = strdup(q.out);
    run_free(&q);
    return rows;
}

Test(mpi, fleet_query_on_duckdb, .init = setup) {
    if (!venv_has("duckdb")) cr_skip_test("duckdb is not in the project's Python environment (scripts/install-deps)");
    char *rows = duckdb_rows(fleet_csvs());
    /* MPI calls per rank: Init, 10 Sendrecv, 5 Allreduce, Bcast, 2 Barrier, Finalize, and 3 Send or Recv on 0, 1 */
    cJSON *j = cJSON_Parse(rows), *row;
    cr_assert_not_null(j, "%s", rows);
    int calls[4] = {0}, n = 0;
    double last = 1e300;
    cJSON_ArrayForEach(row, j) {
        int rank = cJSON_GetArrayItem(row, 0)->valueint;
        const char *name = cJSON_GetArrayItem(row, 2)->valuestring;
        double ms = cJSON_GetArrayItem(row, 4)->valuedouble;
        cr_assert(rank >= 0 && rank < 4 && !strncmp(name, "MPI_", 4), "%s", rows);
        calls[rank] += cJSON_GetArrayItem(row, 3)->valueint;
        cr_expect(ms <= last && ms > 0, "rows by time, descending: %s", rows);
        last = ms;
        n++;
        if (!strcmp(name, "MPI_Sendrecv")) cr_expect_eq(cJSON_GetArrayItem(row, 3)->valueint, 10, "%s", rows);
    }
    cr_expect_eq(n, 4 * 6 + 2, "%s", rows);
    cr_expect(calls[0] == 23 && calls[1] == 23 && calls[2] == 20 && calls[3] == 20, "%s", rows);
    cJSON_Delete(j);
}

Test(mpi, fleet_query_on_spark_equals_duckdb, .init = setup, .timeout = 300) {
    if (!venv_has("duckdb") || !venv_has("pyspark"))
        cr_skip_test("duckdb or pyspark is not in the project's Python environment (scripts/install-deps)");
    if (access("/usr/bin/java", X_OK) != 0) cr_skip_test("no Java runtime (openjdk-17-jre-headless)");
    char *sql = fleet_csvs(), *rows = duckdb_rows(sql);
    struct run q;
    run_venv(&q, dir, (const char *[]){write_text(dir, "spark.py", spark_py), strfmt("%s/e*.csv", dir), sql, NULL});
    cr_assert_eq(q.status, 0, "%s%s", q.out, q.err);
    cr_expect_gt(strlen(rows), 100, "%s", rows);
    cr_expect_str_eq(q.out, rows, "Spark's rows:\n%s\nDuckDB's:\n%s", q.out, rows);
    run_free(&q);
}

/* A PyTorch job with the gloo backend, launched the way torchrun launches its workers (RANK,
 * WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT: Debian's torchrun itself fails before starting
 * any worker — AttributeError in torch.distributed.elastic's to_map — so the test sets what it
 * would set): one trace per rank through %r, the job in each. */
Test(mpi, torch_gloo_ranks_through_the_torchrun_contract, .init = setup, .timeout = 240) {
    const char *py = "import torch, torch.distributed as dist\n"
                     "dist.init_process_group('gloo')\n"
                     "t = torch.ones(1000) * (dist.get_rank() + 1)\n"
                     "for _ in range(5): dist.all_reduce(t)\n"
                     "print('rank', dist.get_rank(), float(t[0]))\n"
                     "dist.destroy_process_group()\n";
    struct run probe;
    run_prog(&probe, dir, NULL, (const char *[]){"/usr/bin/python3", "-c", "import torch.distributed", NULL});
    if (probe.status != 0) cr_skip_test("python3-torch is not installed");
    run_free(&probe);
    char *cmd = strfmt("for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=%d "
                       "LD_PRELOAD=%s LIBPROF_OUTPUT=%s/t%%r.json /usr/bin/python3 -c \"$PY\" & done; wait",
                       29500 + (int)(getpid() % 400), PRELOAD, dir);
    struct run r;
    run_prog(&r, dir, (const char *[]){strfmt("PY=%s", py), NULL}, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    /* all_reduce of 1 and 2, five times: (1 + 2) x 2^4 = 48 on both (their lines may interleave) */
    int got = 0;
    for (const char *p = r.out; (p = strstr(p, "48.0")) != NULL; p++) got++;
    cr_expect_eq(got, 2, "%s%s", r.out, r.err);
    for (int k = 0; k < 2; k++) {
        cJSON *j = load_json(strfmt("%s/t%d.json", dir, k));
        cr_assert_not_null(j, "no trace t%d.json", k);
        cJSON *jb = cJSON_GetObjectItem(libprof_meta(j), "job");
        cr_assert_not_null(jb);
        cr_expect_str_eq(cJSON_GetObjectItem(jb, "launcher")->valuestring, "torchrun");
        cr_expect_eq(cJSON_GetObjectItem(jb, "rank")->valueint, k);
        cr_expect_eq(cJSON_GetObjectItem(jb, "world_size")->valueint, 2);
        cJSON_Delete(j);
    }
    run_free(&r);
}

/* --merge --chrome streams: 4 raw traces of 500k recorded calls each (2 M events) merge with a
 * peak RSS under 64 MiB; every call is in the merged trace once; the ranks' merge (small) is
 * strict JSON with its processes named by rank. */
Test(mpi, bounded_streaming_merge, .init = setup, .timeout = 300) {
    const char *in[4];
    for (int k = 0; k < 4; k++) {
        struct run r;
        char *out = strfmt("LIBPROF_OUTPUT=%s/c%d.lpt", dir, k);
        run_prog(&r, dir, (const char *[]){"LD_PRELOAD=" PRELOAD, out, NULL},
                 (const char *[]){PROG("call_loop"), "read", "500000", NULL});
        cr_assert_eq(r.status, 0, "%s", r.err);
        run_free(&r);
        in[k] = strfmt("%s/c%d.lpt", dir, k);
    }
    char *merged = strfmt("%s/m.json", dir), *rss = strfmt("%s/rss", dir);
    const char *argv[] = {"/usr/bin/time", "-f",  "%M",  "-o",       rss,    REPORT, "--merge", in[0],
                          in[1],           in[2], in[3], "--chrome", merged, "-q",   NULL};
    struct run m;
    run_prog(&m, dir, NULL, argv);
    cr_assert_eq(m.status, 0, "%s", m.err);
    size_t len;
    char *kib = read_file(rss, &len);
    cr_assert_not_null(kib);
    cr_expect_lt(atol(kib), 64 * 1024, "peak RSS of the merge: %s KiB", kib);
    char *cmd = strfmt("grep -o '\"name\":\"read\"' %s | wc -l", merged);
    struct run c;
    run_prog(&c, NULL, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_expect_eq(atol(c.out), 4 * 500000, "read slices in the merged trace: %s", c.out);
    run_free(&c);
    run_free(&m);
    /* the events CSV of the four, merged in bounded memory: every read row, in time order */
    char *csv = strfmt("%s/m.csv", dir);
    const char *cargv[] = {"/usr/bin/time", "-f",  "%M",  "-o",           rss, REPORT, "--merge", in[0],
                           in[1],           in[2], in[3], "--events-csv", csv, "-q",   NULL};
    run_prog(&m, dir, NULL, cargv);
    cr_assert_eq(m.status, 0, "%s", m.err);
    free(kib);
    kib = read_file(rss, &len);
    cr_expect_lt(atol(kib), 64 * 1024, "peak RSS of the events CSV merge: %s KiB", kib);
    cmd = strfmt("head -1 %s; awk -F, 'NR > 1 && $6 == \"read\" {n++} NR > 2 && $3 + $4 < last {back++} "
                 "{last = $3 + $4} END {print n, back + 0}' %s",
                 csv, csv);
    run_prog(&c, NULL, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    cr_expect_not_null(strstr(c.out, "pid,tid,ts_ns,dur_ns,category,name,size,ptr,rank,host\n"), "%s", c.out);
    long rows = 0, back = -1;
    const char *nl = strchr(c.out, '\n');
    cr_assert_not_null(nl);
    sscanf(nl + 1, "%ld %ld", &rows, &back);
    cr_expect_eq(rows, 4 * 500000, "read rows in the merged CSV: %s", c.out);
    cr_expect_eq(back, 0, "rows whose end goes back in time: %s", c.out);
    run_free(&c);
    run_free(&m);
    /* the ranks: strict JSON, named */
    job("0");
    char *small = strfmt("%s/ranks.json", dir);
    const char *rargv[] = {REPORT,
                           "--merge",
                           strfmt("%s/r0.json", dir),
                           strfmt("%s/r1.json", dir),
                           strfmt("%s/r2.json", dir),
                           strfmt("%s/r3.json", dir),
                           "--chrome",
                           small,
                           NULL};
    run_prog(&m, dir, NULL, rargv);
    cr_assert_eq(m.status, 0, "%s", m.err);
    cr_expect(python_json_ok(small));
    char *err;
    cJSON *sum = check_trace_py(small, &err);
    cr_expect_not_null(sum, "%s", err);
    cJSON *j = load_json(small);
    cr_expect_eq(ranks_named(j), 4);
    cJSON_Delete(j);
    cJSON_Delete(sum);
    run_free(&m);
}

/* Ranks 2 and 3 made to look like another host whose clock is 250 ms ahead: their traces'
 * host and wall-clock anchor edited as such a host would have written them. The merge aligns
 * hosts on the first MPI_Barrier exits (tools/skew.c): the barrier ends again coincide, the
 * correction is -250 ms for that host and nothing for the reference host; one host alone is never
 * corrected. */
static void as_other_host(const char *from, const char *to, long long ahead_ns) {
    size_t len;
    char *t = read_file(from, &len), *host = NULL;
    cr_assert_not_null(t);
    cJSON *j = load_json(from);
    host = strdup(cJSON_GetObjectItem(cJSON_GetObjectItem(libprof_meta(j), "job"), "host")->valuestring);
    cJSON_Delete(j);
    FILE *f = fopen(to, "w");
    cr_assert_not_null(f);
    char *key = strfmt("\"host\":\"%s\"", host);
    for (char *p = t; *p;) {
        char *st = strstr(p, "\"start_time_unix_ns\":"), *h = strstr(p, key);
        char *next = st && (!h || st < h) ? st : h;
        if (!next) {
            fputs(p, f);
            break;
        }
        fwrite(p, 1, (size_t)(next - p), f);
        if (next == st) {
            char *end;
            long long v = strtoll(st + 21, &end, 10);
            fprintf(f, "\"start_time_unix_ns\":%lld", v + ahead_ns);
            p = end;
        } else {
            fputs("\"host\":\"nodeB\"", f);
            p = h + strlen(key);
        }
    }
    fclose(f);
    free(t);
    free(host);
}

/* merged first-barrier end (us) of each rank's main thread, from a merged Chrome trace */
static void barrier_ends(const char *merged, double end[4], cJSON **meta) {
    cJSON *j = load_json(merged), *ev, *f;
    long long pid[4] = {0};
    int k = 0;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "libprof_merge")) {
        cJSON *lp = cJSON_GetObjectItem(f, "libprof");
        int rank = cJSON_GetObjectItem(cJSON_GetObjectItem(lp, "job"), "rank")->valueint;
        if (rank >= 0 && rank < 4) pid[rank] = (long long)cJSON_GetObjectItem(lp, "pid")->valuedouble;
        k++;
    }
    cr_assert_eq(k, 4);
    for (int r = 0; r < 4; r++) end[r] = -1;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, "MPI_Barrier")) continue;
        long long p = (long long)cJSON_GetObjectItem(ev, "pid")->valuedouble;
        if (p != (long long)cJSON_GetObjectItem(ev, "tid")->valuedouble) continue;
        double e = cJSON_GetObjectItem(ev, "ts")->valuedouble + cJSON_GetObjectItem(ev, "dur")->valuedouble;
        for (int r = 0; r < 4; r++)
            if (pid[r] == p && (end[r] < 0 || e < end[r])) end[r] = e;
    }
    *meta = cJSON_DetachItemFromObject(j, "metadata");
    cJSON_Delete(j);
}

Test(mpi, cross_host_skew_aligned_on_barriers, .init = setup) {
    job("0");
    const char *in[4], *same[4];
    for (int k = 0; k < 4; k++) {
        same[k] = strfmt("%s/r%d.json", dir, k);
        in[k] = k < 2 ? same[k] : strfmt("%s/b%d.json", dir, k);
        if (k >= 2) as_other_host(same[k], in[k], 250000000LL);
    }
    double end[4], base[4];
    cJSON *meta;
    /* one host: nothing corrected */
    char *one = strfmt("%s/one.json", dir);
    struct run m;
    run_prog(&m, dir, NULL,
             (const char *[]){REPORT, "--merge", same[0], same[1], same[2], same[3], "--chrome", one, NULL});
    cr_assert_eq(m.status, 0, "%s", m.err);
    run_free(&m);
    barrier_ends(one, base, &meta);
    cr_expect_null(cJSON_GetObjectItem(meta, "clock_aligned_on"));
    cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(meta, "libprof_merge"))
        cr_expect_eq(cJSON_GetObjectItem(f, "skew_correction_ns")->valuedouble, 0);
    cJSON_Delete(meta);
    /* two hosts, streamed (--chrome) and through the report (--summary): corrected */
    for (int path = 0; path < 2; path++) {
        char *two = strfmt("%s/two%d.json", dir, path);
        const char *argv[] = {REPORT, "--merge", in[0], in[1], in[2], in[3], "--chrome", two, path ? "--summary" : NULL,
                              NULL};
        run_prog(&m, dir, NULL, argv);
        cr_assert_eq(m.status, 0, "%s", m.err);
        if (path) cr_expect_not_null(strstr(m.out, "clocks: hosts aligned on the first MPI_Barrier exit"), "%s", m.out);
        run_free(&m);
        barrier_ends(two, end, &meta);
        cJSON *al = cJSON_GetObjectItem(meta, "clock_aligned_on");
        cr_expect(cJSON_IsString(al) && !strcmp(al->valuestring, "MPI_Barrier"), "path %d", path);
        int k = 0;
        cJSON_ArrayForEach(f, cJSON_GetObjectItem(meta, "libprof_merge")) {
            double c = cJSON_GetObjectItem(f, "skew_correction_ns")->valuedouble;
            if (k < 2)
                cr_expect_eq(c, 0, "rank %d correction %g", k, c);
            else
                cr_expect(c > -270e6 && c < -230e6, "rank %d correction %g ns", k, c);
            k++;
        }
        /* each host's earliest first-barrier exit: the same instant again (250 ms apart uncorrected) */
        double a = base[0] < base[1] ? base[0] : base[1], b = base[2] < base[3] ? base[2] : base[3];
        double ea = end[0] < end[1] ? end[0] : end[1], eb = end[2] < end[3] ? end[2] : end[3];
        cr_expect(fabs((eb - ea) - (b - a)) < 20000, "path %d: host exits %g vs %g us apart (one host: %g)", path, ea,
                  eb, b - a);
        cJSON_Delete(meta);
    }
    /* the merged events CSV moves the other host's rows the same way */
    char *csv = strfmt("%s/two.csv", dir);
    run_prog(&m, dir, NULL, (const char *[]){REPORT, "--merge", in[0], in[1], in[2], in[3], "--events-csv", csv, NULL});
    cr_assert_eq(m.status, 0, "%s", m.err);
    run_free(&m);
    char *cmd = strfmt("awk -F, '$6 == \"MPI_Barrier\" && $1 == $2 && !($9 in e) {e[$9] = $3 + $4} "
                       "END {for (r = 0; r < 4; r++) printf \"%%d \", e[r]}' %s",
                       csv);
    run_prog(&m, NULL, NULL, (const char *[]){"/bin/sh", "-c", cmd, NULL});
    double ce[4] = {0};
    cr_assert_eq(sscanf(m.out, "%lf %lf %lf %lf", &ce[0], &ce[1], &ce[2], &ce[3]), 4, "%s", m.out);
    double ca = ce[0] < ce[1] ? ce[0] : ce[1], cb = ce[2] < ce[3] ? ce[2] : ce[3];
    double a = base[0] < base[1] ? base[0] : base[1], b = base[2] < base[3] ? base[2] : base[3];
    cr_expect(fabs((cb - ca) / 1e3 - (b - a)) < 20000, "CSV: host exits %g vs %g ns apart (one host: %g us)", ca, cb,
              b - a);
    run_free(&m);
}
