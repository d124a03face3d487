/* process.c: the process family — fork, vfork, system, and waiting for children (wait, waitpid,
 * wait3, wait4, waitid). exec and posix_spawn are recorded by exec.c, which already wraps them.
 *
 * fork is a slice in the parent (the child starts a trace of its own, see core.c). vfork cannot
 * be wrapped by a C function — the child would return through the wrapper's frame and the
 * parent would resume on a clobbered stack — so on x86-64 a few instructions record an instant
 * and then jump to the real vfork, which returns straight to the program. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hook.h"

/* the list as it reads best, one group a line */
// clang-format off
#define REALS(X) \
    X(fork) X(system) X(wait) X(waitpid) X(wait3) X(wait4) X(waitid) \
    X(setuid) X(seteuid) X(setreuid) X(setresuid)
// clang-format on
REALS(LP_REAL_SLOT)

LP_EXPORT pid_t fork(void) {
    if (!LP_REAL(fork)) LP_NOFN(-1);
    struct lpr_tls *t = lpr_call_begin(LP_FAM_PROC);
    uint64_t t0 = t ? lpr_ticks() : 0;
    lpr_loader_fork_begin(); /* no other thread inside the dynamic loader (core/real.c) */
    pid_t r = LP_REAL(fork)();
    lpr_loader_fork_end(r == 0);
    if (t && r != 0) { /* in the child, the parent's clock origin and buffers are gone */
        uint64_t a = I(r);
        lpr_call_record(t, LP_CALL_FORK, t0, lpr_ticks(), 1, &a, NULL, 0);
    }
    return r;
}

#if defined(__x86_64__)
static void *real_vfork;
/* Called by the vfork trampoline below: record, and return the real vfork's address. */
LP_HIDDEN void *lpr_vfork_note(void);
void *lpr_vfork_note(void) {
    int saved = errno;
    struct lpr_tls *t = lpr_call_begin(LP_FAM_PROC);
    if (t) lpr_call_record(t, LP_CALL_VFORK, lpr_ticks(), 0, 0, NULL, NULL, 0);
    void *f = lpr_next(&real_vfork, "vfork");
    if (!f) f = lpr_next(&real_fork, "fork"); /* cannot happen with glibc; fork is a valid vfork */
    errno = saved;
    return f;
}
__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork, @function\n"
        "vfork:\n"
        "    .cfi_startproc\n"
        "    subq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset 8\n"
        "    call lpr_vfork_note\n"
        "    addq $8, %rsp\n"
        "    .cfi_adjust_cfa_offset -8\n"
        "    jmp *%rax\n"
        "    .cfi_endproc\n"
        ".size vfork, .-vfork\n");
#endif

LP_EXPORT int system(const char *cmd) {
    if (!LP_REAL(system)) LP_NOFN(-1);
    struct lpr_tls *t = lpr_call_begin(LP_FAM_PROC);
    uint64_t t0 = t ? lpr_ticks() : 0;
    int r = LP_REAL(system)(cmd);
    if (t) {
        uint64_t a = I(r);
        lpr_call_record(t, LP_CALL_SYSTEM, t0, lpr_ticks(), 1, &a, cmd, cmd ? strlen(cmd) : 0);
    }
    return r;
}

static void rec_wait(struct lpr_tls *t, uint64_t t0, long asked, pid_t r, const int *status) {
    uint64_t a[3] = {I(asked), I(r), r > 0 && status ? (uint64_t)(unsigned)*status : 0};
    lpr_call_record(t, LP_CALL_WAITPID, t0, lpr_ticks(), 3, a, NULL, 0);
}

/* Each wait reports the child it reaped to the core (a child killed by a signal gets its trace
 * converted there), also when the caller passed no status: then libprof's own is used. */
#define WAIT_HOOK(ret_pid, asked, call)              \
    int mine_;                                       \
    if (!status) status = &mine_;                    \
    struct lpr_tls *t = lpr_call_begin(LP_FAM_PROC); \
    uint64_t t0 = t ? lpr_ticks() : 0;               \
    pid_t ret_pid = call;                            \
    if (t) rec_wait(t, t0, asked, ret_pid, status);  \
    if (ret_pid > 0) lpr_child_reaped(ret_pid, *status)

LP_EXPORT pid_t wait(int *status) {
    if (!LP_REAL(wait)) LP_NOFN(-1);
    WAIT_HOOK(r, -1, LP_REAL(wait)(status));
    return r;
}

LP_EXPORT pid_t waitpid(pid_t pid, int *status, int options) {
    if (!LP_REAL(waitpid)) LP_NOFN(-1);
    WAIT_HOOK(r, pid, LP_REAL(waitpid)(pid, status, options));
    return r;
}

LP_EXPORT pid_t wait3(int *status, int options, struct rusage *ru) {
    if (!LP_REAL(wait3)) LP_NOFN(-1);
    WAIT_HOOK(r, -1, LP_REAL(wait3)(status, options, ru));
    return r;
}

LP_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru) {
    if (!LP_REAL(wait4)) LP_NOFN(-1);
    WAIT_HOOK(r, pid, LP_REAL(wait4)(pid, status, options, ru));
    return r;
}

LP_EXPORT int waitid(idtype_t type, id_t id, siginfo_t *info, int options) {
    if (!LP_REAL(waitid)) LP_NOFN(-1);
    struct lpr_tls *t = lpr_call_begin(LP_FAM_PROC);
    uint64_t t0 = t ? lpr_ticks() : 0;
    int r = LP_REAL(waitid)(type, id, info, options);
    if (t) {
        uint64_t a[2] = {I(id), I(r)};
        lpr_call_record(t, LP_CALL_WAITID, t0, lpr_ticks(), 2, a, NULL, 0);
    }
    /* a reaped child (WNOWAIT leaves it to a later wait) */
    if (r == 0 && info && info->si_pid > 0 && !(options & WNOWAIT) &&
        (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED))
        lpr_child_reaped(info->si_pid, info->si_status & 0x7f); /* a wait status "killed by signal N" */
    return r;
}

/* ---- user changes: the core hands the spool over, or writes the trace first -------------- */

LP_EXPORT int setuid(uid_t uid) {
    if (!LP_REAL(setuid)) LP_NOFN(-1);
    lpr_uid_change((unsigned)uid);
    return LP_REAL(setuid)(uid);
}

LP_EXPORT int seteuid(uid_t uid) {
    if (!LP_REAL(seteuid)) LP_NOFN(-1);
    lpr_uid_change((unsigned)uid);
    return LP_REAL(seteuid)(uid);
}

LP_EXPORT int setreuid(uid_t ruid, uid_t euid) {
    if (!LP_REAL(setreuid)) LP_NOFN(-1);
    if (euid != (uid_t)-1) lpr_uid_change((unsigned)euid);
    return LP_REAL(setreuid)(ruid, euid);
}

LP_EXPORT int setresuid(uid_t ruid, uid_t euid, uid_t suid) {
    if (!LP_REAL(setresuid)) LP_NOFN(-1);
    if (euid != (uid_t)-1) lpr_uid_change((unsigned)euid);
    return LP_REAL(setresuid)(ruid, euid, suid);
}
