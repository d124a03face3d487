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
#include <strings.h>

#include "lp.h"

#define DEFAULT_BUFFER_KB 128
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

static void warn_bad(const char *name, const char *value, const char *why) {
    lpr_warn("ignoring %s=\"%s\" (%s)", name, value, why);
}

/* Read every LIBPROF_* variable through `get` into `cfg`. */
void lpr_config_load(struct lpr_config *cfg, lpr_getenv_fn get, const struct lpr_pattern_ctx *ctx) {
    const char *v;
    int b;
    uint64_t n;
    memset(cfg, 0, sizeof *cfg);
    cfg->families = (1u << LP_FAM_COUNT) - 1;
    cfg->buffer_bytes = DEFAULT_BUFFER_KB * 1024;
    cfg->alloc_min = DEFAULT_ALLOC_MIN;
    cfg->clock = -1;
    cfg->children = 1;

    if ((v = get("LIBPROF_VERBOSE")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            cfg->verbose = b;
        else
            warn_bad("LIBPROF_VERBOSE", v, "expected 0 or 1");
    }
    lpr_verbose = cfg->verbose;

    int master = -1; /* LIBPROF=1 turns on the default paths; LIBPROF=0 turns everything off */
    if ((v = get("LIBPROF")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            master = b;
        else
            warn_bad("LIBPROF", v, "expected 0 or 1");
    }
    if ((v = get("LIBPROF_SUMMARY")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            cfg->summary = b;
        else
            warn_bad("LIBPROF_SUMMARY", v, "expected 0 or 1");
    }
    if ((v = get("LIBPROF_KEEP_RAW")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            cfg->keep_raw = b;
        else
            warn_bad("LIBPROF_KEEP_RAW", v, "expected 0 or 1");
    }
    if ((v = get("LIBPROF_ALLOC_TIMING")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            cfg->alloc_timing = b;
        else
            warn_bad("LIBPROF_ALLOC_TIMING", v, "expected 0 or 1");
    }
    if ((v = get("LIBPROF_CHILDREN")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            cfg->children = b;
        else
            warn_bad("LIBPROF_CHILDREN", v, "expected 0 or 1");
    }
    if ((v = get("LIBPROF_CONVERT")) && *v) {
        if (strcasecmp(v, "background") == 0)
            cfg->convert_background = 1;
        else if (strcasecmp(v, "exit") != 0)
            warn_bad("LIBPROF_CONVERT", v, "expected exit or background");
    }
    if ((v = get("LIBPROF_START")) && *v) {
        if (strcasecmp(v, "paused") == 0)
            cfg->start_paused = 1;
        else if (strcasecmp(v, "running") != 0)
            warn_bad("LIBPROF_START", v, "expected paused or running");
    }
    if ((v = get("LIBPROF_DELAY")) && *v && lpr_parse_seconds(v, &cfg->delay_ns) != 0)
        warn_bad("LIBPROF_DELAY", v, "expected seconds, e.g. 2.5");
    if ((v = get("LIBPROF_DURATION")) && *v && lpr_parse_seconds(v, &cfg->duration_ns) != 0)
        warn_bad("LIBPROF_DURATION", v, "expected seconds, e.g. 10");
    if ((v = get("LIBPROF_SIGNAL")) && *v && lpr_parse_signal(v, &cfg->signal) != 0)
        warn_bad("LIBPROF_SIGNAL", v, "expected a catchable signal such as SIGUSR2");
    if ((v = get("LIBPROF_EVENTS")) && *v) {
        uint32_t m;
        char bad[64];
        if (lpr_parse_families(v, &m, bad, sizeof bad) == 0)
            cfg->families = m;
        else {
            char known[512] = "all, none";
            size_t k = strlen(known);
            for (int f = 0; f < LP_FAM_COUNT; f++)
                if (f != LP_FAM_CONTROL) k += (size_t)snprintf(known + k, sizeof known - k, ", %s", lp_family_names[f]);
            lpr_warn("ignoring LIBPROF_EVENTS=\"%s\" (unknown family \"%s\"; known: %s)", v, bad, known);
        }
    }
    if ((v = get("LIBPROF_BUFFER_KB")) && *v) {
        if (lpr_parse_size(v, 4, 256 * 1024, &n) == 0)
            cfg->buffer_bytes = (uint32_t)n * 1024;
        else
            warn_bad("LIBPROF_BUFFER_KB", v, "expected a number of KiB from 4 to 262144");
    }
    if ((v = get("LIBPROF_ALLOC_MIN")) && *v) {
        if (lpr_parse_size(v, 0, UINT64_MAX, &n) == 0)
            cfg->alloc_min = n;
        else
            warn_bad("LIBPROF_ALLOC_MIN", v, "expected bytes, optionally with K, M or G");
    }
    if ((v = get("LIBPROF_STACKS")) && *v) {
        if (lpr_parse_size(v, 0, LP_STACK_MAX_DEPTH, &n) == 0)
            cfg->stacks = (unsigned)n;
        else
            warn_bad("LIBPROF_STACKS", v, "expected a number of frames from 0 to 128");
    }
    if ((v = get("LIBPROF_FLAMEGRAPH")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            cfg->flamegraph = b;
        else
            warn_bad("LIBPROF_FLAMEGRAPH", v, "expected 0 or 1");
    }
    cfg->python = 1;
    if ((v = get("LIBPROF_PYTHON")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            cfg->python = b;
        else
            warn_bad("LIBPROF_PYTHON", v, "expected 0 or 1");
    }
    if ((v = get("LIBPROF_PYTHON_MALLOC")) && *v) {
        if (lpr_parse_bool(v, &b) == 0)
            cfg->python_malloc = b;
        else
            warn_bad("LIBPROF_PYTHON_MALLOC", v, "expected 0 or 1");
    }
    if ((v = get("LIBPROF_PYTHON_CALLS")) && *v) {
        if (strlen(v) < sizeof cfg->python_calls)
            snprintf(cfg->python_calls, sizeof cfg->python_calls, "%s", v);
        else
            warn_bad("LIBPROF_PYTHON_CALLS", v, "expected a regular expression under 512 bytes");
    }
    if ((v = get("LIBPROF_MIN_NS")) && *v) {
        if (lpr_parse_size(v, 0, UINT64_C(1000000000000), &n) == 0)
            cfg->min_ns = n;
        else
            warn_bad("LIBPROF_MIN_NS", v, "expected nanoseconds, e.g. 1000");
    }
    if ((v = get("LIBPROF_CLOCK")) && *v) {
        if (strcasecmp(v, "tsc") == 0)
            cfg->clock = LP_CLOCK_TSC;
        else if (strcasecmp(v, "monotonic") == 0)
            cfg->clock = LP_CLOCK_MONOTONIC;
        else
            warn_bad("LIBPROF_CLOCK", v, "expected tsc or monotonic");
    }

    const char *out = get("LIBPROF_OUTPUT");
    const char *csv = get("LIBPROF_CSV");
    if (out && !*out) out = NULL;
    if (csv && !*csv) csv = NULL;
    if (master == 0) return; /* explicit off switch wins */
    if (!ctx->rank && ((out && strstr(out, "%r")) || (csv && strstr(csv, "%r"))))
        lpr_warn("%%r: no rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID, RANK): "
                 "the pid instead");
    if (out) {
        if (lpr_expand_pattern(out, ctx, cfg->output, sizeof cfg->output) != 0) {
            warn_bad("LIBPROF_OUTPUT", out, "bad %-pattern or too long; use %p %h %t %e %r %%");
            out = NULL;
            if (master != 1) master = 1; /* still profile, into the default place */
        }
    }
    if (!out && master == 1) {
        lpr_expand_pattern(DEFAULT_DIR "/" DEFAULT_STEM ".json", ctx, cfg->output, sizeof cfg->output);
        if (!csv) lpr_expand_pattern(DEFAULT_DIR "/" DEFAULT_STEM ".csv", ctx, cfg->csv, sizeof cfg->csv);
    }
    if (csv && lpr_expand_pattern(csv, ctx, cfg->csv, sizeof cfg->csv) != 0) {
        warn_bad("LIBPROF_CSV", csv, "bad %-pattern or too long");
        cfg->csv[0] = '\0';
    }
    cfg->raw_output = cfg->output[0] && ends_with(cfg->output, ".lpt");
    cfg->enabled = cfg->output[0] || cfg->csv[0] || cfg->summary;
    if (cfg->enabled && cfg->families == 0) {
        lpr_info("LIBPROF_EVENTS selects no family: nothing will be recorded");
    }
}
