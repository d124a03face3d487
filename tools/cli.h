/* cli.h: libprof-report's command line — one table of options (name, argument, help, what it
 * sets), read by the parser, by --help and by the documentation test, and the struct it fills. */
#ifndef RP_CLI_H
#define RP_CLI_H

#include <stdint.h>

#include "lib/outputs.h"
#include "report.h"

/* Everything the command line says. */
struct rp_cli {
    const char **inputs;
    int ninputs;
    /* outputs: those a conversion writes (lib/outputs.h: --chrome, --csv, the flame graphs, pprof),
     * NULL when not asked; then the report's own */
    const char *out[LP_OUT_COUNT];
    const char *events_csv, *html, *diff, *pack;
    const char *log;  /* --log: stdout and stderr go there (removed if nothing was written) */
    const char *wait; /* --wait FILE: wait for that trace to be complete */
    const char *hold; /* --hold-events PID:N (the preload's CPU sampler starts it) */
    double wait_timeout;
    const char *live;                      /* --live PID: the report of a running process */
    const char *follow;                    /* --follow PID: convert the spool while PID writes it */
    double interval;                       /* --interval S: again every S seconds (with --live) */
    uint64_t timeline_ns, timeline_min_ns; /* --timeline, --timeline-min-ns */
    int have_timeline;
    unsigned file_mode; /* --file-mode: the files written (0600 unless said) */
    int summary, merge, quiet, remove_raw, general_path;
    int have_min, killed_by;
    int py_user_lines; /* --py-lines user */
    uint64_t alloc_min;
    unsigned temp_threshold; /* --temporary-threshold: memray's definition (0: heaptrack's) */
    uint64_t peak_at_ns;     /* --at: the instant the peak views show instead of the peak */
    struct rp_opts o;        /* the report's own options */
};

struct rp_option {
    const char *name, *alias; /* "--top", and a short form or NULL */
    const char *arg;          /* the argument's name, NULL for a flag */
    const char *group;        /* the --help section it is listed under */
    const char *help;         /* one line; '\n' continues it on the next line */
    int (*set)(struct rp_cli *c, const char *name, const char *value); /* 0, 1 (done: exit 0), 2 (bad) */
};
extern const struct rp_option rp_options[];
extern const unsigned rp_noptions;

/* Fill `c` from argv. Returns -1 to go on, else the exit status (help printed: 0; bad usage: 2,
 * message printed). */
int rp_cli_parse(struct rp_cli *c, int argc, char **argv);
/* A POSIX extended regular expression of option `opt`: 0, or -1 with a message on stderr. */
int rp_compile(regex_t *re, const char *s, const char *opt);
void rp_cli_usage(FILE *f);

/* run.c: libprof-report as a process — --log, file modes and inherited limits (0, or -1 with a
 * message); outputs no wider than the inputs; --wait (the exit status). */
int rp_setup_process(struct rp_cli *c);
void rp_inputs_mode(struct rp_cli *c, const char *const *paths, int n);
int rp_wait(const char *file, double timeout, int quiet);
int rp_hold_events(const char *spec);
/* --live PID (tools/live.c): `once` run on the process's spool, again every `interval` seconds
 * (0: once) while the process runs. Returns the exit status. */
int rp_live(const char *pid, double interval, int (*once)(const char *path), int quiet);
/* A followed run's look (live.c): the follower listens (its socket, nonblocking; -1 when it
 * cannot); --live asks with its command line and its standard output and error — the connected
 * socket, whose end is the look's end (what comes before it: the Chrome trace asked for the
 * report's tables), or -1 when no follower listens, -2 on an error. */
int rp_live_listen(const char *spool);
int rp_live_ask(const char *spool, int argc, char **argv);
struct rp_live_request {
    int conn, out_fd, err_fd; /* the connection, the asker's standard output and error */
    char cwd[4096];           /* its working directory */
    int argc;                 /* its command line */
    char **argv, *buf;
};
/* The follower: a look asked (the listening socket read without waiting): 1 with the request. */
int rp_live_take(int listen_fd, struct rp_live_request *q);
void rp_live_request_free(struct rp_live_request *q);

#endif
