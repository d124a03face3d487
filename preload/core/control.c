/* control.c: pausing, resuming and resetting the recording — from the program (libprof_start,
 * libprof_stop, libprof_reset), from a signal (LIBPROF_SIGNAL toggles), and from timers
 * (LIBPROF_DELAY, LIBPROF_DURATION).
 *
 * Pausing closes the gate, so a paused program pays what an unprofiled one pays. Every change is
 * recorded as a control event (whatever LIBPROF_EVENTS says), so the trace shows when recording
 * was off. Memory accounting stays coherent by construction: a block allocated while paused is
 * simply unknown to the trace; its free, if recorded, counts as a free of an untracked block and
 * changes neither the heap counter nor the leak report. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "control.h"
#include "clock.h"
#include "log.h"
#include "real.h"
#include "state.h"
#include "tbuf.h"
#include "sys.h"

static uint32_t families_on; /* the gate while recording */
static int paused;
static uint64_t markers_lost;
static LP_TLS int on_timer; /* this thread is libprof's timer */

/* Append a control record on the calling thread. From a signal handler only when the thread is
 * not inside libprof (then no append is half done) and already has a buffer (creating one is not
 * async-signal-safe); otherwise the marker is counted as lost. libprof's own timer thread is no
 * thread of the program: its markers are written straight to the spool as the process's
 * (thread id 0), so the thread never shows in the trace. */
static void record_control(unsigned kind, unsigned reason, int from_signal) {
    struct lpr_tls *t = &lpr_tls;
    if (on_timer) {
        uint64_t rec[2] = {lpr_word0(kind, lpr_ticks()), reason};
        if (lpr_spool_write(LP_CHUNK_EVENTS, 0, rec, sizeof rec, NULL, 0) == 0)
            __atomic_fetch_add(&lpr_events_written, 1, __ATOMIC_RELAXED);
        else
            __atomic_fetch_add(&lpr_events_dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    if (from_signal && (t->guard || t->state != LP_TLS_ACTIVE)) {
        __atomic_fetch_add(&markers_lost, 1, __ATOMIC_RELAXED);
        return;
    }
    uint8_t g = t->guard;
    t->guard = 1;
    uint64_t *r = lpr_reserve(t, 2);
    if (r) {
        r[0] = lpr_word0(kind, lpr_ticks());
        r[1] = reason;
        lpr_commit(t, r + 2);
    }
    t->guard = g;
}

void lpr_control_pause(unsigned reason, int from_signal) {
    if (!families_on || __atomic_exchange_n(&paused, 1, __ATOMIC_ACQ_REL)) return;
    record_control(LP_EV_PAUSE, reason, from_signal);
    lpr_gate_set(0);
}

void lpr_control_resume(unsigned reason, int from_signal) {
    if (!families_on || !__atomic_exchange_n(&paused, 0, __ATOMIC_ACQ_REL)) return;
    lpr_gate_set(families_on);
    record_control(LP_EV_RESUME, reason, from_signal);
}

void lpr_control_reset(unsigned reason) {
    if (families_on) record_control(LP_EV_RESET, reason, 0);
}

void lpr_control_on_signal(int sig) {
    (void)sig;
    int saved = errno;
    if (__atomic_load_n(&paused, __ATOMIC_ACQUIRE))
        lpr_control_resume(LP_CTL_SIGNAL, 1);
    else
        lpr_control_pause(LP_CTL_SIGNAL, 1);
    errno = saved;
}

struct timers {
    uint64_t delay_ns, duration_ns;
};
static struct timers timers;

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (LP_SYS(SYS_nanosleep, &ts, &ts, 0) == -EINTR) {}
}

static void *timer_thread(void *arg) {
    (void)arg;
    /* This thread is libprof's, not the program's: nothing it does is recorded except markers,
     * and those as the process's (record_control). */
    lpr_tls.guard = 1;
    on_timer = 1;
    pthread_setname_np(pthread_self(), "libprof-timer");
    if (timers.delay_ns) {
        sleep_ns(timers.delay_ns);
        lpr_control_resume(LP_CTL_DELAY, 0);
    }
    if (timers.duration_ns) {
        sleep_ns(timers.duration_ns);
        lpr_control_pause(LP_CTL_DURATION, 0);
    }
    return NULL;
}

/* Decide the initial state (called at the end of a successful start-up, with the gate still
 * closed). Returns the gate to open. */
uint32_t lpr_control_init(const struct lpr_config *cfg) {
    families_on = cfg->families;
    uint32_t gate = families_on;
    if (cfg->start_paused || cfg->delay_ns) {
        paused = 1;
        record_control(LP_EV_PAUSE, cfg->delay_ns ? LP_CTL_DELAY : LP_CTL_START, 0);
        gate = 0;
    }
    timers.delay_ns = cfg->delay_ns;
    timers.duration_ns = cfg->duration_ns;
    return gate;
}

/* Start the timer thread if LIBPROF_DELAY or LIBPROF_DURATION asked for one. Called from the
 * preload's constructor, when creating a thread is safe (not from inside a first malloc). */
void lpr_control_start_timers(void) {
    if (!families_on || (!timers.delay_ns && !timers.duration_ns)) return;
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 64 * 1024);
    lpr_real_resolve();
    if (LPR_REAL(pthread_create)(&t, &a, timer_thread, NULL) != 0) /* libprof's: not the hook */
        lpr_warn("cannot start the timer for LIBPROF_DELAY/LIBPROF_DURATION (%s)", strerror(errno));
    pthread_attr_destroy(&a);
}

/* In a forked child the timer thread does not exist: the child keeps the parent's paused or
 * recording state, and no timer will change it. */
void lpr_control_after_fork_child(void) { timers.delay_ns = timers.duration_ns = 0; }

/* The gate a forked child opens once its own spool is ready. */
uint32_t lpr_control_child_gate(void) { return __atomic_load_n(&paused, __ATOMIC_ACQUIRE) ? 0 : families_on; }

uint64_t lpr_control_markers_lost(void) { return __atomic_load_n(&markers_lost, __ATOMIC_RELAXED); }
