/* signal.c: signals, without the program noticing libprof.
 *
 * libprof installs handlers only on signals the program has left at their default action: the
 * fatal ones (so that a crash or a kill still leaves a trace), LIBPROF_SIGNAL and
 * LIBPROF_SNAPSHOT_SIGNAL. sigaction()
 * and signal() are interposed so that the program still sees SIG_DFL there (Python, for one,
 * installs its KeyboardInterrupt handler only if SIGINT is at its default), and so that a
 * handler the program installs simply replaces libprof's.
 *
 * A program that installs its own handler keeps it, and it runs first: libprof's handler stands
 * only where the default action would. SIGTRAP while the CPU sampler uses it is the exception: the
 * program's action is kept by the sampler, whose handler calls it for every SIGTRAP that is not a
 * sample (core/sample.c). When the program gives a fatal signal back to the default
 * (Python's faulthandler does so before it re-raises the signal), libprof's handler takes that
 * place again, so the program's handler runs, then libprof's, then the default action.
 *
 * On a fatal signal libprof flushes every thread's records to the spool (async-signal-safe) and
 * has a fresh libprof-report convert it while this process waits, bounded in time (core/life.c,
 * lpr_finish_signal): the process may have been stopped anywhere, inside malloc too, so it must
 * not convert by itself. Then the default action runs as it would have: same exit status, same
 * core dump. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "hook.h"

#define NSIG_MAX 65

static volatile sig_atomic_t ours[NSIG_MAX]; /* libprof's handler is installed on this signal */

/* ours[sig] = v, and whether a fault reaches libprof's handler first (core/python.c reads
 * memory it cannot vouch for through a load that handler can step over: lpr_py_fault_fixup). */
static void mark(int sig, int v) {
    ours[sig] = v;
    lpr_py_faults_ours(ours[SIGSEGV] && ours[SIGBUS]);
}

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT};
static int started; /* the fatal signals are watched (this process records) */

static int is_fatal(int sig) {
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        if (fatal_signals[i] == sig) return 1;
    return 0;
}

static int is_fault(int sig) {
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
    if ((sig == SIGSEGV || sig == SIGBUS) && si->si_code > 0 && lpr_py_fault_fixup(uc)) return; /* a probe */
    int saved = errno;
    lpr_finish_signal(sig, -1);
    mark(sig, 0);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    LPR_REAL(sigaction)(sig, &dfl, NULL);
    errno = saved;
    /* A real fault re-executes its instruction on return and dies by it; a signal sent by
     * kill/raise/abort (si_code <= 0) or an asynchronous one is raised again. */
    if (!is_fault(sig) || si->si_code <= 0) raise(sig);
}

static int resolve(void) {
    lpr_real_resolve();
    return lpr_real.sigaction && lpr_real.signal ? 0 : -1;
}

/* Install `handler` on `sig` if the program left it at the default action. Returns 0 or -1. */
static int install(int sig, void (*handler)(int)) {
    struct sigaction old, sa;
    if (sig <= 0 || sig >= NSIG_MAX || resolve() || LPR_REAL(sigaction)(sig, NULL, &old) != 0) return -1;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (LPR_REAL(sigaction)(sig, &sa, NULL) != 0) return -1;
    mark(sig, 1);
    return 0;
}

/* Put libprof's handler on fatal signal `sig` (it is at its default action). */
static int install_fatal(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (LPR_REAL(sigaction)(sig, &sa, NULL) != 0) return -1;
    mark(sig, 1);
    return 0;
}

/* When libprof records: LIBPROF_SIGNAL's toggle (core/control.c), then the fatal signals' handler
 * on every fatal signal the program left at its default. */
static void start(void) {
    if (resolve()) return;
    int sig = lpr_cfg.signal;
    if (sig && install(sig, lpr_control_on_signal) != 0)
        lpr_say("LIBPROF_SIGNAL: the program already handles signal %d; not using it", sig);
    sig = lpr_cfg.snapshot_signal;
    if (sig && (sig == lpr_cfg.signal || install(sig, lpr_snapshot_on_signal) != 0))
        lpr_say("LIBPROF_SNAPSHOT_SIGNAL: the program already handles signal %d; not using it", sig);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        sig = fatal_signals[i];
        struct sigaction old;
        if (LPR_REAL(sigaction)(sig, NULL, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
        install_fatal(sig);
    }
    started = 1;
}

/* What the program would have seen had libprof not been there. */
static void as_default(struct sigaction *old) {
    memset(old, 0, sizeof *old);
    old->sa_handler = SIG_DFL;
    sigemptyset(&old->sa_mask);
}

/* The program sets fatal signal `sig` to its default action: libprof's handler stands in for it
 * (a handler of the program's that re-raises its signal reaches libprof's this way). */
static int wants_default(int sig, const struct sigaction *act) {
    return act && started && is_fatal(sig) && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL &&
           lpr_recording();
}

/* sigaction as the program sees it (the exported hook, and signal() through it). A change of
 * action first lets through a signal libprof holds for a moment (core/tbuf.c's write before a
 * wait): it came under the action in place, and is handled by it. */
static int program_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (act) lpr_tbuf_held_settle();
    if (sig <= 0 || sig >= NSIG_MAX) return LPR_REAL(sigaction)(sig, act, old);
    if (sig == SIGTRAP &&
        lpr_sample_trap_held()) { /* the sampler's: it keeps the program's action and calls it (sample.c) */
        lpr_sample_program_action(act, old);
        return 0;
    }
    if (wants_default(sig, act)) {
        struct sigaction prev;
        int rc = LPR_REAL(sigaction)(sig, NULL, &prev);
        if (rc == 0 && !ours[sig] && install_fatal(sig) != 0) rc = LPR_REAL(sigaction)(sig, act, NULL);
        if (rc == 0 && old) {
            if (ours[sig] && prev.sa_sigaction == on_fatal)
                as_default(old);
            else
                *old = prev;
        }
        return rc;
    }
    if (!ours[sig]) return LPR_REAL(sigaction)(sig, act, old);
    if (act) mark(sig, 0); /* (before: from now on the program's handler, or SIG_IGN, rules) */
    int rc = LPR_REAL(sigaction)(sig, act, old);
    if (rc == 0 && old) as_default(old);
    if (rc != 0 && act) mark(sig, 1);
    return rc;
}

LP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (resolve()) {
        errno = ENOSYS;
        return -1;
    }
    return program_sigaction(sig, act, old);
}

LP_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
    if (resolve()) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    if (sig <= 0 || sig >= NSIG_MAX) return LPR_REAL(signal)(sig, handler);
    if (handler == SIG_DFL ||
        (sig == SIGTRAP && lpr_sample_trap_held())) { /* through sigaction, which knows when libprof stands in */
        struct sigaction act, old;
        memset(&act, 0, sizeof act);
        act.sa_handler = handler;
        act.sa_flags = handler == SIG_DFL ? 0 : SA_RESTART; /* signal()'s BSD semantics, as glibc's */
        sigemptyset(&act.sa_mask);
        if (program_sigaction(sig, &act, &old) != 0) return SIG_ERR;
        return old.sa_handler; /* shares its storage with sa_sigaction */
    }
    lpr_tbuf_held_settle();
    if (!ours[sig]) return LPR_REAL(signal)(sig, handler);
    mark(sig, 0);
    sighandler_t prev = LPR_REAL(signal)(sig, handler);
    if (prev == SIG_ERR) {
        mark(sig, 1);
        return prev;
    }
    return SIG_DFL;
}

LP_FAMILY_SETUP(signal, NULL, start, NULL);
