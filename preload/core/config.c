/* config.c: the LIBPROF_* environment variables, read once, with one warning per bad value.
 *
 * Like mimalloc's options, every setting has a default, values are checked, and a bad value
 * keeps the default after a single "libprof:" warning. Nothing here allocates: it may run from
 * inside the first malloc call of the process, before the C runtime is fully up. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <strings.h>

#include "config.h"
#include "log.h"
#include "state.h"
#include "lib/outputs.h"
#include "lib/vars.h"

/* This process as the recorder knows it: its configuration (read at start by life.c) and what
 * the %-patterns of its paths expand to. */
struct lpr_config lpr_cfg;
long lpr_pid;
char lpr_exe_path[PATH_MAX];
char lpr_host[256];
struct lpr_pattern_ctx lpr_pattern;
struct lpr_job lpr_job; /* the launcher's rank, size, local rank (names of the job's processes) */

#define DEFAULT_BUFFER_KB 128
#define LPR_DEFAULT_SAMPLE_HZ 1000 /* LIBPROF=1 samples at this rate unless LIBPROF_SAMPLE_HZ says */
#define DEFAULT_ALLOC_MIN (64u * 1024)
#define DEFAULT_DIR "libprof_profiling"
#define DEFAULT_STEM "profile_%e_%t_%p"

/* Parse a boolean: 1/true/yes/on and 0/false/no/off, any case. Returns 0 or -1. */
int lpr_parse_bool(const char *s, int *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* Parse a size with an optional K/M/G suffix (powers of 1024, optional trailing B/iB) into
 * `out`, which must land in [lo, hi]. Returns 0 or -1; `out` is untouched on error. */
int lpr_parse_size(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    if (s == NULL || *s < '0' || *s > '9') return -1; /* no sign, no space, no empty string */
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0) return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end != '\0') return -1;
    if (shift && v > (UINT64_MAX >> shift)) return -1;
    v <<= shift;
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* Parse a duration in seconds ("2", "0.5", "1e-3") into nanoseconds. Returns 0 or -1. */
int lpr_parse_seconds(const char *s, uint64_t *ns) {
    if (!s || ((*s < '0' || *s > '9') && *s != '.')) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= 0) || v > 1e7) return -1;
    *ns = (uint64_t)(v * 1e9);
    return 0;
}

/* Parse a signal usable for toggling: a name (SIGUSR2, USR2, ...) or a number from 1 to 64.
 * Signals that mean a fault or cannot be caught are refused. Returns 0 or -1. */
int lpr_parse_signal(const char *s, int *sig) {
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
                 {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"WINCH", SIGWINCH}, {"PROF", SIGPROF}, {"URG", SIGURG}};
    if (!s || !*s) return -1;
    if (strncasecmp(s, "SIG", 3) == 0) s += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *sig = names[i].sig;
            return 0;
        }
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 64) return -1;
    switch (v) {
    case SIGKILL:
    case SIGSTOP:
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
    case SIGABRT:
    case SIGCHLD: return -1;
    default: *sig = (int)v; return 0;
    }
}

/* Parse a comma-separated family list ("alloc", "all", "none", or names) into `mask`, left to
 * right; "-name" removes a family ("all,-io"), and a list that starts with one starts from all.
 * On an unknown name copies it to `bad` and returns -1. */
int lpr_parse_families(const char *s, uint32_t *mask, char *bad, size_t badlen) {
    uint32_t m = *s == '-' ? (1u << LP_FAM_COUNT) - 1 : 0;
    const char *p = s;
    while (*p) {
        const char *q = strchr(p, ',');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        int drop = n > 1 && *p == '-';
        if (drop) {
            p++;
            n--;
        }
        if (n == 3 && strncasecmp(p, "all", 3) == 0) {
            m = (1u << LP_FAM_COUNT) - 1;
        } else if (n == 4 && strncasecmp(p, "none", 4) == 0) {
            /* nothing */
        } else if (n > 0) {
            int found = 0;
            for (int f = 0; f < LP_FAM_COUNT; f++) {
                if (strlen(lp_family_names[f]) == n && strncasecmp(p, lp_family_names[f], n) == 0) {
                    if (drop)
                        m &= ~(1u << f);
                    else
                        m |= 1u << f;
                    found = 1;
                }
            }
            if (!found) {
                snprintf(bad, badlen, "%.*s", (int)n, p);
                return -1;
            }
        }
        p += n;
        if (*p == ',') p++;
    }
    *mask = m;
    return 0;
}

/* The launchers libprof knows, in the order their variables are read: Open MPI, PMIx (Open MPI 5,
 * PRRTE), MPICH/Hydra (PMI), Slurm's srun, PyTorch's torchrun. */
void lpr_job_from_env(struct lpr_job *j, lpr_getenv_fn get) {
    static const struct {
        const char *launcher, *rank, *size, *local;
    } known[] = {
        {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
        {"pmix", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"},
        {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
        {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
        {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    };
    memset(j, 0, sizeof *j);
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const char *r = get(known[i].rank);
        if (!r || !*r || strspn(r, "0123456789") != strlen(r) || strlen(r) >= sizeof j->rank) continue;
        snprintf(j->rank, sizeof j->rank, "%s", r);
        const char *s = get(known[i].size), *l = get(known[i].local);
        if (s) snprintf(j->size, sizeof j->size, "%s", s);
        if (l) snprintf(j->local_rank, sizeof j->local_rank, "%s", l);
        j->launcher = known[i].launcher;
        return;
    }
}

/* Expand %p %h %t %e %r %% in `pat` into `out`. Returns 0, or -1 if the result does not fit or the
 * pattern has an unknown %-sequence. */
int lpr_expand_pattern(const char *pat, const struct lpr_pattern_ctx *ctx, char *out, size_t outlen) {
    size_t o = 0;
    for (const char *p = pat; *p; p++) {
        char tmp[32];
        const char *add = tmp;
        if (*p != '%') {
            tmp[0] = *p;
            tmp[1] = '\0';
        } else {
            switch (*++p) {
            case 'p': snprintf(tmp, sizeof tmp, "%ld", ctx->pid); break;
            case 't': snprintf(tmp, sizeof tmp, "%ld", ctx->start_time); break;
            case 'h': add = ctx->host ? ctx->host : "localhost"; break;
            case 'e': add = ctx->exe ? ctx->exe : "unknown"; break;
            case 'r': /* the rank; the pid (with one warning, from the caller) when there is none */
                if (ctx->rank)
                    add = ctx->rank;
                else
                    snprintf(tmp, sizeof tmp, "%ld", ctx->pid);
                break;
            case '%': add = "%"; break;
            default: return -1; /* includes a trailing lone '%' */
            }
        }
        size_t n = strlen(add);
        if (o + n >= outlen) return -1;
        memcpy(out + o, add, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}

/* Make `path` unique to process `pid` by inserting ".PID" before its extension
 * (trace.json -> trace.1234.json). Used when another live process already owns the name. */
int lpr_path_insert_pid(char *path, size_t len, long pid) {
    char *slash = strrchr(path, '/');
    char *dot = strrchr(path, '.');
    if (dot == NULL || (slash && dot < slash) || dot == path || dot[-1] == '/') dot = path + strlen(path);
    char tail[PATH_MAX];
    snprintf(tail, sizeof tail, "%s", dot);
    size_t head = (size_t)(dot - path);
    int n = snprintf(path + head, len - head, ".%ld%s", pid, tail);
    return n < 0 || (size_t)n >= len - head ? -1 : 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ---- the table ----------------------------------------------------------------------------------
 * Every variable the preload reads, in the order it reads them: name, argument, default and one
 * line of help, and how its value is read. The loader below, the documentation test
 * (tests/unit/test_docs.c) and `libprof --variables` read this table and nothing else, so a
 * variable cannot exist without its help line, nor be documented without existing. */
enum { V_BOOL, V_SIZE, V_SECONDS, V_SIGNAL, V_FAMILIES, V_CHOICE, V_STRING, V_MODE };

#define F(field) (unsigned)offsetof(struct lpr_config, field)
#define ROOM(field) sizeof(((struct lpr_config *)0)->field)
// clang-format off
#define ROW(name, arg, dflt, help, type, field, lo, hi, choices) \
    {name, arg, dflt, help, V_##type, F(field), lo, (hi) ? (hi) : ROOM(field), choices},
const struct lpr_var lpr_vars[] = {LP_VARS(ROW)};
#undef ROW
// clang-format on
const unsigned lpr_nvars = sizeof lpr_vars / sizeof lpr_vars[0];
#undef F
#undef ROOM

static void warn_bad(const struct lpr_var *v, const char *value) {
    const char *why = "";
    char buf[96];
    switch (v->type) {
    case V_BOOL: why = "expected 0 or 1"; break;
    case V_SECONDS: why = "expected seconds, e.g. 2.5"; break;
    case V_SIGNAL: why = "expected a catchable signal such as SIGUSR2"; break;
    case V_STRING: why = "too long"; break;
    case V_MODE: why = "expected an octal mode such as 0600"; break;
    case V_CHOICE:
        snprintf(buf, sizeof buf, "expected one of %s", v->choices);
        why = buf;
        break;
    case V_SIZE:
        snprintf(buf, sizeof buf, "expected a number from %llu to %llu, K/M/G allowed", (unsigned long long)v->lo,
                 (unsigned long long)v->hi);
        why = buf;
        break;
    default: break;
    }
    lpr_say("ignoring %s=\"%s\" (%s)", v->name, value, why);
}

/* Read `s` as variable `v` into the config. Returns 0, or -1 (bad value, default kept). */
static int read_var(const struct lpr_var *v, const char *s, struct lpr_config *cfg) {
    char *at = (char *)cfg + v->off;
    switch (v->type) {
    case V_BOOL: {
        int b;
        if (lpr_parse_bool(s, &b) != 0) return -1;
        *(int *)at = b;
        return 0;
    }
    case V_SIZE: return lpr_parse_size(s, v->lo, v->hi, (uint64_t *)at);
    case V_SECONDS: return lpr_parse_seconds(s, (uint64_t *)at);
    case V_SIGNAL: return lpr_parse_signal(s, (int *)at);
    case V_STRING:
        if (strlen(s) >= v->hi) return -1;
        memcpy(at, s, strlen(s) + 1);
        return 0;
    case V_MODE: {
        char *end;
        unsigned long m = strtoul(s, &end, 8);
        if (!*s || *end || m > v->hi || !(m & 0600)) return -1; /* the owner must keep read and write */
        *(uint64_t *)at = m;
        return 0;
    }
    case V_CHOICE: {
        int i = 0;
        for (const char *c = v->choices; *c; i++) {
            size_t n = strcspn(c, ",");
            if (strlen(s) == n && !strncasecmp(s, c, n)) {
                *(int *)at = i;
                return 0;
            }
            c += n + (c[n] == ',');
        }
        return -1;
    }
    case V_FAMILIES: {
        uint32_t m;
        char bad[64];
        if (lpr_parse_families(s, &m, bad, sizeof bad) == 0) {
            *(uint32_t *)at = m;
            return 0;
        }
        char known[512] = "all, none";
        size_t k = strlen(known);
        for (int f = 0; f < LP_FAM_COUNT; f++)
            if (f != LP_FAM_CONTROL) k += (size_t)snprintf(known + k, sizeof known - k, ", %s", lp_family_names[f]);
        lpr_say("ignoring %s=\"%s\" (unknown family \"%s\"; known: %s)", v->name, s, bad, known);
        return 1; /* said already */
    }
    default: return -1;
    }
}

/* Expand the output pattern `pat` into `out` (PATH_MAX), resolved against `dir` when relative. */
int lpr_expand_path(const char *pat, const char *dir, const struct lpr_pattern_ctx *ctx, char *out) {
    char tmp[PATH_MAX];
    if (lpr_expand_pattern(pat, ctx, tmp, sizeof tmp) != 0) return -1;
    if (tmp[0] == '/' || !dir[0]) {
        memcpy(out, tmp, strlen(tmp) + 1);
        return 0;
    }
    return snprintf(out, PATH_MAX, "%s/%s", dir, tmp) < PATH_MAX ? 0 : -1;
}

/* Read every LIBPROF_* variable through `get` into `cfg`, row by row of lpr_vars. */
void lpr_config_load(struct lpr_config *cfg, lpr_getenv_fn get, const struct lpr_pattern_ctx *ctx) {
    memset(cfg, 0, sizeof *cfg);
    cfg->master = -1;
    cfg->families = (1u << LP_FAM_COUNT) - 1;
    cfg->buffer_kb = DEFAULT_BUFFER_KB;
    cfg->alloc_min = DEFAULT_ALLOC_MIN;
    cfg->clock = -1;
    cfg->children = 1;
    cfg->python = 1;
    cfg->lines = 1;
    cfg->ort_nodes = 1;
    cfg->gpu_times = 1;
    cfg->timeline_ns = UINT64_C(300000000000);
    cfg->timeline_min_ns = 10000000;
    cfg->follow_mb = 64;
    cfg->file_mode = 0600;
    int sample_hz_set = 0;

    for (unsigned i = 0; i < lpr_nvars; i++) {
        const struct lpr_var *v = &lpr_vars[i];
        const char *s = get(v->name);
        if (!s || !*s) continue;
        if (read_var(v, s, cfg) < 0) warn_bad(v, s);
        if (!strcmp(v->name, "LIBPROF")) snprintf(cfg->master_raw, sizeof cfg->master_raw, "%s", s);
        if (!strcmp(v->name, "LIBPROF_SAMPLE_HZ")) sample_hz_set = 1;
        if (i == 0) lpr_verbose = cfg->verbose; /* the first row: the warnings that follow may need it */
        if (!strcmp(v->name, "LIBPROF_LOG") &&  /* relative: to where the process starts */
            lpr_expand_path(cfg->log_pat, ctx->cwd ? ctx->cwd : "", ctx, lpr_log_path) != 0)
            lpr_log_path[0] = '\0';
    }
    lpr_verbose = cfg->verbose;
    cfg->buffer_bytes = (uint32_t)cfg->buffer_kb * 1024;
    if (cfg->alloc_sample && !cfg->stacks) cfg->stacks = 16; /* sampled stacks: stacks asked for */
    if (cfg->dir[0] != '/') { /* unset (or relative, which would mean nothing): where we start */
        if (cfg->dir[0]) lpr_say("ignoring LIBPROF_DIR=\"%s\" (not an absolute path)", cfg->dir);
        cfg->dir[0] = '\0';
        if (ctx->cwd && ctx->cwd[0] == '/' && strlen(ctx->cwd) < sizeof cfg->dir)
            memcpy(cfg->dir, ctx->cwd, strlen(ctx->cwd) + 1);
    }

    const char *out = cfg->output_pat[0] ? cfg->output_pat : NULL;
    const char *csv = cfg->csv_pat[0] ? cfg->csv_pat : NULL;
    int master = cfg->master;
    if (master == 0) return; /* explicit off switch wins */
    if (!ctx->rank && ((out && strstr(out, "%r")) || (csv && strstr(csv, "%r"))))
        lpr_say("%%r: no rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID, RANK): "
                "the pid instead");
    if (out && lpr_expand_path(out, cfg->dir, ctx, cfg->output) != 0) {
        lpr_say("ignoring LIBPROF_OUTPUT=\"%s\" (bad %%-pattern or too long; use %%p %%h %%t %%e %%r %%%%)", out);
        out = NULL;
        cfg->output_pat[0] = '\0';
        master = 1; /* still profile, into the default place */
    }
    if (master == 1 && !sample_hz_set) cfg->sample_hz = LPR_DEFAULT_SAMPLE_HZ; /* LIBPROF=1: where the CPU goes too */
    if (!out && master == 1) {
        cfg->output_defaulted = 1;
        snprintf(cfg->output_pat, sizeof cfg->output_pat, "%s", DEFAULT_DIR "/" DEFAULT_STEM ".json");
        lpr_expand_path(cfg->output_pat, cfg->dir, ctx, cfg->output);
        if (!csv) {
            snprintf(cfg->csv_pat, sizeof cfg->csv_pat, "%s", DEFAULT_DIR "/" DEFAULT_STEM ".csv");
            csv = cfg->csv_pat;
        }
    }
    if (csv && lpr_expand_path(csv, cfg->dir, ctx, cfg->csv) != 0) {
        lpr_say("ignoring LIBPROF_CSV=\"%s\" (bad %%-pattern or too long)", csv);
        cfg->csv[0] = cfg->csv_pat[0] = '\0';
    }
    /* NAME.lpz: the packed raw trace — recorded as NAME.lpt, packed into NAME.lpz at exit */
    cfg->packed_output = cfg->output[0] && ends_with(cfg->output, ".lpz");
    if (cfg->packed_output) cfg->output[strlen(cfg->output) - 1] = 't';
    cfg->raw_output = cfg->output[0] && ends_with(cfg->output, ".lpt");
    cfg->output_kind = lp_output_timeline(cfg->output);
    cfg->enabled = cfg->output[0] || cfg->csv[0] || cfg->summary;
    if (cfg->enabled && cfg->families == 0) lpr_info("LIBPROF_EVENTS selects no family: nothing will be recorded");
    if (cfg->enabled && cfg->sample_hz && sample_hz_set && !(cfg->families & (1u << LP_FAM_CPU)))
        lpr_say("LIBPROF_SAMPLE_HZ is set but LIBPROF_EVENTS leaves out cpu: no CPU samples");
}
