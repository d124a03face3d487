/* sample.c: where the CPU goes — every thread's stack, sampled by its own CPU clock
 * (LIBPROF_SAMPLE_HZ).
 *
 * The clock: one perf event for the whole process, the kernel's task-clock (user time), with a
 * period of 1/HZ second of CPU, `inherit` to every thread created after it (inherit_thread: not
 * to child processes, which open their own), `sigtrap`: on each period the kernel sends SIGTRAP
 * (si_code TRAP_PERF, si_perf_data libprof's cookie) to the thread that used that CPU, at the
 * moment it used it. Measured here against the alternatives (tests/integration/test_sample.c):
 *   - POSIX CPU-clock timers (timer_create(CLOCK_THREAD_CPUTIME_ID), gperftools' per-thread
 *     mode) are checked on the kernel tick — 250 Hz on these machines: asked for 1000 Hz they
 *     deliver a quarter; one ITIMER_PROF per process (gperftools' default) also drifts to threads
 *     that did not spend the time;
 *   - a perf event per thread with a signal through fcntl(F_SETSIG) needs a descriptor per
 *     thread, held for the thread's life;
 *   - this one: the rate asked (within 2 %), per thread, one descriptor for the process, no
 *     thread to register. Linux 5.13 or later.
 * An event lives as long as a descriptor on it, and the program's table must hold none of
 * libprof's (a program that lists its descriptors — test_subprocess's pass_fds checks — or closes
 * "all" of them would see or close it): the descriptors are given to a holder (see hold()).
 * A thread that sleeps or waits uses no CPU and takes no sample; the timer fires only while the
 * thread runs user code, so no system call of the program's is ever interrupted by it.
 *
 * The handler (on_sample) never touches what a hook may be in the middle of: samples go to a
 * buffer of their own (tbuf.c), the Python frames through a cache of their own (python.c); a
 * sample that interrupted libprof's own code is recorded without a stack (and counted), one that
 * interrupted the dynamic loader gets no walk of its callers (walk.c would ask the loader again).
 * It allocates nothing and takes no lock but the samples buffer's, which it only tries.
 *
 * The program's own signals stay its own. SIGTRAP is taken only if the program left it at its
 * default action at start. A handler the program installs for it later is kept by libprof
 * (hooks/signal.c) and gets every SIGTRAP that is not a sample — a breakpoint, a raise() —
 * called as the kernel would have (its mask, SA_SIGINFO, SA_RESETHAND, SA_NODEFER); without one, such
 * a SIGTRAP gets the default action it would have had. The program reads back what it installed.
 * A process being debugged is not sampled (its debugger would stop at every SIGTRAP). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 1U
#endif
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "sample.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "real.h"
#include "spawn.h"
#include "stacks.h"
#include "state.h"
#include "tbuf.h"
#include "sys.h"

#ifndef TRAP_PERF
#define TRAP_PERF 6 /* si_code of a perf event's SIGTRAP (Linux 5.13) */
#endif
#define COOKIE UINT64_C(0x6c6962726f66) /* si_perf_data: "librof", this sampler's */
#define DEFAULT_DEPTH 32
#define MAX_EXTRA 256 /* threads that ran before the sampler started, each with an event of its own */

static int event_fd = -1; /* (in our table only until the holder has it) */
static int extra_fd[MAX_EXTRA], nextra;
static int holder; /* the holder's pid, 0: none (the descriptors are ours) */
static unsigned depth;
static uint64_t period_ns;
static struct lp_sampling st; /* the statistics, updated with atomic adds */
static LP_TLS int took;       /* this thread took a sample (for st.threads) */

static int trap_held; /* libprof's handler is on SIGTRAP (from the start of sampling on, for good) */
int lpr_sample_trap_held(void) { return __atomic_load_n(&trap_held, __ATOMIC_ACQUIRE); }
int lpr_sample_taken(void) { return st.hz != 0 && __atomic_load_n(&st.samples, __ATOMIC_RELAXED) != 0; }

/* The program's own action for SIGTRAP while libprof's handler holds it (SIG_DFL until it sets
 * one): what its sigaction installs and reads back (hooks/signal.c). */
static struct sigaction prog_trap;
static int prog_lock;

void lpr_sample_program_action(const struct sigaction *act, struct sigaction *old) {
    while (__atomic_exchange_n(&prog_lock, 1, __ATOMIC_ACQUIRE)) {}
    if (old) *old = prog_trap;
    if (act) prog_trap = *act;
    __atomic_store_n(&prog_lock, 0, __ATOMIC_RELEASE);
}

/* A SIGTRAP that is not a sample (a breakpoint, a raise()): to the program's handler, as the
 * kernel would have called it; without one, the default action it would have had (sent again to
 * this thread with the default in place, it takes effect as the handler returns — a trap
 * instruction is not executed again: it is behind the pc). */
static void not_ours(int sig, siginfo_t *si, void *uc) {
    struct sigaction a;
    if (__atomic_exchange_n(&prog_lock, 1, __ATOMIC_ACQUIRE)) { /* (the program is setting it: the default) */
        memset(&a, 0, sizeof a);
        a.sa_handler = SIG_DFL;
    } else {
        a = prog_trap;
        if (a.sa_flags & SA_RESETHAND) { /* once, then the default again */
            memset(&prog_trap, 0, sizeof prog_trap);
            prog_trap.sa_handler = SIG_DFL;
        }
        __atomic_store_n(&prog_lock, 0, __ATOMIC_RELEASE);
    }
    if (!(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_IGN) return;
    if (!(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        LPR_REAL(sigaction)(sig, &dfl, NULL);
        LP_SYS(SYS_tgkill, lpr_sys_getpid(), lpr_sys_gettid(), sig);
        return;
    }
    /* its mask while it runs (SIGTRAP itself stays blocked unless SA_NODEFER) */
    uint64_t mask, old;
    memcpy(&mask, &a.sa_mask, sizeof mask);
    if (a.sa_flags & SA_NODEFER) {
        uint64_t trap = UINT64_C(1) << (sig - 1);
        lpr_syscall6(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&trap, 0, 8, 0, 0);
    }
    lpr_syscall6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&mask, (long)&old, 8, 0, 0);
    if (a.sa_flags & SA_SIGINFO)
        a.sa_sigaction(sig, si, uc);
    else
        a.sa_handler(sig);
    lpr_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One sample of the calling thread, interrupted at `uc`. */
static void take(struct lpr_tls *t, const ucontext_t *uc) {
    if (!(lpr_gate & (1u << LP_FAM_CPU))) return; /* paused, or the family is off */
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    uint64_t flags = 1, stack = 0; /* weight 1 */
    if (lpr_in_libprof(pc)) {
        flags |= LP_SAMPLE_IN_LIBPROF;
        __atomic_fetch_add(&st.in_libprof, 1, __ATOMIC_RELAXED);
    } else {
        int walk = !t->in_loader; /* (the walk would ask the loader for a rule it lacks) */
        stack = lpr_stack_sample(uc, walk, depth, &flags);
        if (flags & LP_SAMPLE_SHALLOW) __atomic_fetch_add(&st.shallow, 1, __ATOMIC_RELAXED);
    }
    uint64_t *r = lpr_tbuf_sample_reserve(t, 4);
    if (!r) {
        __atomic_fetch_add(&st.dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    r[0] = lpr_word_stack((uint32_t)stack);
    r[1] = lpr_word0(LP_EV_SAMPLE, lpr_ticks());
    r[2] = flags;
    r[3] = flags & LP_SAMPLE_IN_LIBPROF ? 0 : pc;
    lpr_tbuf_sample_commit(t, r + 4);
    __atomic_fetch_add(&st.samples, 1, __ATOMIC_RELAXED);
    if (!took) {
        took = 1;
        __atomic_fetch_add(&st.threads, 1, __ATOMIC_RELAXED);
    }
}

/* si_perf_data: in the kernel's siginfo it follows si_addr (older C library headers lack it). */
static uint64_t perf_data(const siginfo_t *si) {
    uint64_t v;
    memcpy(&v, (const char *)&si->si_addr + sizeof(void *), sizeof v);
    return v;
}

static void on_sample(int sig, siginfo_t *si, void *ucv) {
    if (si->si_code != TRAP_PERF || perf_data(si) != COOKIE) {
        not_ours(sig, si, ucv);
        return;
    }
    int saved = errno;
    uint64_t t0 = now_ns();
    struct lpr_tls *t = &lpr_tls;
    take(t, ucv);
    uint64_t dt = now_ns() - t0, b = dt / 100;
    __atomic_fetch_add(&st.handler_ns, dt, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st.hist[b < LP_SAMPLING_HIST ? b : LP_SAMPLING_HIST - 1], 1, __ATOMIC_RELAXED);
    uint64_t m = __atomic_load_n(&st.handler_max_ns, __ATOMIC_RELAXED);
    while (dt > m && !__atomic_compare_exchange_n(&st.handler_max_ns, &m, dt, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    errno = saved;
}

/* The task-clock event of thread `tid` (0: the caller, inherited by the threads it creates),
 * moved above the program's descriptor numbers; or -errno. */
static int open_event(int tid, int inherit) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.sample_period = period_ns;
    a.inherit = (unsigned)inherit;
    a.inherit_thread = (unsigned)inherit;
    a.remove_on_exec = 1;
    a.sigtrap = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.sig_data = COOKIE;
    long fd = lpr_syscall6(SYS_perf_event_open, (long)&a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC, 0);
    if (fd < 0) return (int)fd;
    long hi = LP_SYS(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 4096);
    if (hi >= 0) {
        lpr_sys_close((int)fd);
        fd = hi;
    }
    return (int)fd;
}

/* A debugger attached (TracerPid in /proc/self/status)? */
static int traced(void) {
    char buf[2048];
    if (lpr_sys_read_file("/proc/self/status", buf, sizeof buf) <= 0) return 0;
    const char *p = strstr(buf, "TracerPid:");
    return p && strtol(p + 10, NULL, 10) != 0;
}

/* Threads that ran before the event existed do not inherit it: each gets one of its own. */
static void cover_running_threads(void) {
    int dfd = lpr_sys_open("/proc/self/task", O_RDONLY | O_DIRECTORY, 0);
    if (dfd < 0) return;
    int self = lpr_sys_gettid(), missed = 0;
    char buf[4096];
    long k;
    while ((k = LP_SYS(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < k;) {
            const struct lpr_dirent64 *d = (const void *)(buf + off);
            off += d->reclen;
            int tid = atoi(d->name);
            if (tid <= 0 || tid == self) continue;
            int fd = nextra < MAX_EXTRA ? open_event(tid, 1) : -1;
            if (fd >= 0)
                extra_fd[nextra++] = fd;
            else
                missed++;
        }
    }
    lpr_sys_close(dfd);
    if (missed) lpr_warn("LIBPROF_SAMPLE_HZ: %d thread(s) that ran before libprof started are not sampled", missed);
}

/* ---- the events' holder ------------------------------------------------------------------------
 * `libprof-report --hold-events` (spawn.c starts it): a process of its own — not our child, no
 * memory of ours — that keeps the events' descriptors open in its table. It shares one page with
 * us (a memfd, mapped by both): we set its first word to 1 to ask it to go; it closes the events,
 * sets 2 and goes. It also goes when we end (it watches us). No signal is involved, so a program
 * that changes its user meanwhile can still end it. Without libprof-report (or when it cannot be
 * started) the descriptors stay in the program's table. */
static int *holder_word; /* the shared page: 0 holding, 1 asked to go, 2 gone */

static void hold(void) {
    int fds[LPR_HOLD_MAX], n = 0;
    if (event_fd >= 0) fds[n++] = event_fd;
    for (int i = 0; i < nextra && n < LPR_HOLD_MAX; i++) fds[n++] = extra_fd[i];
    if (!n || !lpr_spawn_available()) return;
    int page = (int)LP_SYS(SYS_memfd_create, "libprof-hold", MFD_CLOEXEC, 0);
    if (page < 0) return;
    void *m = LP_SYS(SYS_ftruncate, page, 4096, 0) == 0
                  ? lpr_sys_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, page, 0)
                  : (void *)(long)-ENOMEM;
    int pid = lpr_sys_failed((long)m) ? -1 : lpr_spawn_holder(fds, n, page);
    lpr_sys_close(page);
    if (pid <= 0) {
        if (!lpr_sys_failed((long)m)) lpr_sys_munmap(m, 4096);
        lpr_info("CPU sampling: no holder process for its descriptors; they stay in the program's table");
        return;
    }
    holder = pid;
    holder_word = m;
    if (event_fd >= 0) lpr_sys_close(event_fd); /* the holder's copies keep the events */
    for (int i = 0; i < nextra; i++) lpr_sys_close(extra_fd[i]);
    event_fd = -1;
    nextra = 0;
}

/* Ask the holder to go, and wait (up to two seconds) until it has closed the events. */
static void unhold(void) {
    if (holder <= 0) return;
    __atomic_store_n(holder_word, 1, __ATOMIC_RELEASE);
    lpr_syscall6(SYS_futex, (long)holder_word, FUTEX_WAKE, 1, 0, 0, 0);
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 200 && __atomic_load_n(holder_word, __ATOMIC_ACQUIRE) != 2; i++)
        lpr_syscall6(SYS_futex, (long)holder_word, FUTEX_WAIT, 1, (long)&tick, 0, 0);
    lpr_sys_munmap(holder_word, 4096);
    holder_word = NULL;
    holder = 0;
}

static void write_info(void) { lpr_spool_write(LP_CHUNK_SAMPLING, 0, &st, sizeof st, NULL, 0); }

/* Start sampling (the start-up that may look symbols up; a process that records). */
void lpr_sample_init(void) {
    unsigned hz = (unsigned)lpr_cfg.sample_hz;
    if (!hz || !(lpr_cfg.families & (1u << LP_FAM_CPU))) return;
    if (traced()) {
        lpr_say("LIBPROF_SAMPLE_HZ: a debugger is attached: no CPU samples (it would stop at every one)");
        return;
    }
    struct sigaction old, sa;
    if (LPR_REAL(sigaction)(SIGTRAP, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
        lpr_warn("LIBPROF_SAMPLE_HZ: the program handles SIGTRAP itself: no CPU samples");
        return;
    }
    depth = (unsigned)(lpr_cfg.sample_depth ? lpr_cfg.sample_depth : lpr_cfg.stacks ? lpr_cfg.stacks : DEFAULT_DEPTH);
    period_ns = 1000000000u / hz;
    if (lpr_stacks_for_samples() != 0) depth = 1; /* the interrupted instruction only */
    if (lpr_stacks_table() != 0) return;
    memset(&prog_trap, 0, sizeof prog_trap);
    prog_trap.sa_handler = SIG_DFL;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (LPR_REAL(sigaction)(SIGTRAP, &sa, NULL) != 0) return;
    __atomic_store_n(&trap_held, 1, __ATOMIC_RELEASE);
    event_fd = open_event(0, 1);
    if (event_fd < 0) {
        LPR_REAL(sigaction)(SIGTRAP, &old, NULL);
        lpr_say("LIBPROF_SAMPLE_HZ: no CPU samples: perf_event_open of the task clock failed (%s; Linux 5.13 or "
                "later, and /proc/sys/kernel/perf_event_paranoid at most 2, are needed)",
                strerror(-event_fd));
        return;
    }
    st.period_ns = period_ns;
    st.hz = hz;
    __atomic_store_n(&lpr_sampling, 1, __ATOMIC_RELEASE);
    cover_running_threads();
    hold();
    write_info();
    lpr_info("sampling every thread's CPU at %u Hz (%u native frames a sample)", hz, depth);
}

static void close_events(void) {
    unhold();
    if (event_fd >= 0) lpr_sys_close(event_fd);
    for (int i = 0; i < nextra; i++) lpr_sys_close(extra_fd[i]);
    event_fd = -1;
    nextra = 0;
}

/* How sampling went, for the trace's end (an END follows). */
void lpr_sample_finish(void) {
    if (!st.hz) return;
    if (__atomic_exchange_n(&lpr_sampling, 0, __ATOMIC_ACQ_REL)) close_events(); /* the events end with their holder */
    write_info();
}

void lpr_sample_resume(void) {
    if (!st.hz || __atomic_load_n(&lpr_sampling, __ATOMIC_ACQUIRE)) return;
    event_fd = open_event(0, 1);
    if (event_fd < 0) return;
    __atomic_store_n(&lpr_sampling, 1, __ATOMIC_RELEASE);
    cover_running_threads();
    hold();
}

/* A forked child: the parent's event is the parent's (its descriptor came with the fork). The
 * child samples its own threads with an event of its own. Only system calls here. */
void lpr_sample_after_fork_child(void) {
    if (!__atomic_load_n(&lpr_sampling, __ATOMIC_ACQUIRE)) return;
    holder = 0; /* the parent's, not ours to end (nor its page: the parent's word, shared) */
    if (holder_word) lpr_sys_munmap(holder_word, 4096);
    holder_word = NULL;
    close_events();
    memset(&st, 0, sizeof st);
    st.period_ns = period_ns;
    st.hz = (uint32_t)(1000000000u / period_ns);
    took = 0;
    event_fd = open_event(0, 1);
    if (event_fd < 0)
        __atomic_store_n(&lpr_sampling, 0, __ATOMIC_RELEASE);
    else
        hold();
}
