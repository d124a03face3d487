/* handoff.c: what the recorder does when the program hands itself on — an exec (the outgoing
 * image's trace written, or taken back when the exec fails), a change of user (the spool handed
 * to the new user, or the trace written while it still can be), a child reaped after a kill (its
 * spool converted by lineage.c). Called from hooks/exec.c and hooks/process.c; above life.c,
 * whose finish and conversion it calls, so that lineage.c (names, children, the environment an
 * exec carries) stays below it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handoff.h"
#include "config.h"
#include "life.h"
#include "lineage.h"
#include "log.h"
#include "sample.h"
#include "stacks.h"
#include "sys.h"
#include "tbuf.h"

#define spool_path lpr_spool_name()

static int spool_gone;   /* the spool's name was given up before an exec (lpr_exec_prepare) */
static int exec_fd = -1; /* the spool's content while an exec is under way */

/* ---- giving up privileges -------------------------------------------------------------------
 * A process that changes its user (a daemon dropping root, CPython's subprocess with user=)
 * reopens its spool and writes its outputs as the new user from then on. If that user can write
 * where the trace goes, the spool is handed to it and recording goes on; otherwise the trace is
 * written now, while the process still can, and recording ends there (said once). */

/* Can `uid` reach and create files in the directory of each of `paths` (NULL or empty: none)?
 * Asked of the kernel itself by a helper that takes that user (a raw setresuid affects only its
 * own task: the program's credentials are untouched) and tries access(W_OK | X_OK): every
 * directory on the way counts, ACLs and the groups the process holds too (mode bits alone took a
 * world-writable directory inside one the user cannot enter for writable, and the program's child
 * then printed "cannot write the trace"). -1 when the helper cannot take that user. */
struct as_user {
    unsigned uid;
    const char *const *paths;
    int n, result;
};

static int dir_of(const char *path, char *dir, size_t len) {
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    return 0;
}

static int as_user_probe(void *arg) {
    struct as_user *j = arg;
    uint64_t all = ~UINT64_C(0);
    lpr_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, 0, 8, 0, 0);
    if (LP_SYS(SYS_setresuid, j->uid, j->uid, j->uid) != 0) LP_SYS(SYS_exit, 0, 0, 0);
    j->result = 1;
    for (int i = 0; i < j->n; i++) {
        char dir[PATH_MAX + 32];
        if (!j->paths[i] || !j->paths[i][0]) continue;
        if (dir_of(j->paths[i], dir, sizeof dir) != 0 ||
            lpr_syscall6(SYS_faccessat, AT_FDCWD, (long)dir, W_OK | X_OK, 0, 0, 0) != 0)
            j->result = 0;
    }
    LP_SYS(SYS_exit, 0, 0, 0);
    return 0;
}

static int user_can_write(unsigned uid, const char *const *paths, int n) {
    const size_t stack = 64 * 1024;
    void *m = lpr_sys_mmap(NULL, stack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (lpr_sys_failed((long)m)) return -1;
    struct as_user j = {uid, paths, n, -1};
    /* (CLONE_VM | CLONE_VFORK: this thread waits until the helper is gone; no exit signal) */
    int pid = clone(as_user_probe, (char *)m + stack, CLONE_VM | CLONE_VFORK, &j);
    if (pid > 0) {
        int st;
        while (lpr_syscall6(SYS_wait4, pid, (long)&st, __WCLONE, 0, 0, 0) == -EINTR) {}
    }
    lpr_sys_munmap(m, stack);
    return pid > 0 ? j.result : -1;
}

/* The same by the mode bits, where the helper cannot take the user: owner or other write and
 * search permission on the directory itself (groups are not looked up: a group-writable
 * directory counts as no). */
static int dir_writable_by(const char *path, unsigned uid) {
    char dir[PATH_MAX + 32];
    if (dir_of(path, dir, sizeof dir) != 0) return 0;
    struct stat st;
    if (lpr_sys_stat(dir, &st) != 0) return 0;
    if (uid == 0) return 1;
    return (st.st_uid == uid && (st.st_mode & S_IWUSR) && (st.st_mode & S_IXUSR)) ||
           ((st.st_mode & S_IWOTH) && (st.st_mode & S_IXOTH));
}

void lpr_uid_change(unsigned new_euid) {
    if (!lpr_recording()) return;
    unsigned cur = (unsigned)LP_SYS(SYS_geteuid, 0, 0, 0);
    if (new_euid == cur) return;
    const char *paths[] = {spool_path, lpr_cfg.output, lpr_cfg.csv};
    int ok = user_can_write(new_euid, paths, 3);
    if (ok < 0)
        ok = dir_writable_by(spool_path, new_euid) &&
             (!lpr_cfg.output[0] || dir_writable_by(lpr_cfg.output, new_euid)) &&
             (!lpr_cfg.csv[0] || dir_writable_by(lpr_cfg.csv, new_euid));
    if (ok) {
        int rc = (int)LP_SYS(SYS_chown, spool_path, new_euid, -1);
        if (rc == 0) return;
        struct stat st;
        if (lpr_sys_stat(spool_path, &st) == 0 && st.st_uid == new_euid) return;
    }
    lpr_warn("the process takes user id %u, which cannot write %s: its trace ends here", new_euid,
             lpr_cfg.output[0] ? lpr_cfg.output : spool_path);
    lpr_finish(-1);
}

/* ---- a child killed ---------------------------------------------------------------------------- */

/* A child `pid` was reaped with wait status `status` (from the wait family's hooks). */
void lpr_child_reaped(int pid, int status) {
    if (pid <= 0 || !WIFSIGNALED(status)) return;
    if (!lpr_recording() || lpr_cfg.raw_output) return;
    lpr_lineage_child_killed(pid, WTERMSIG(status));
}

/* ---- exec ------------------------------------------------------------------------------------
 * The image that execs writes its trace under its name with ".exec-EXE" inserted; the program
 * that replaces it (same pid) takes the plain name. So a launcher script that ends with
 * `exec real-program` gives the user the real program's trace where they asked for it. */

static char exec_json[PATH_MAX + 64], exec_csv[PATH_MAX + 64], exec_lpt[PATH_MAX + 64];

static void exec_name(char *dst, size_t len, const char *src) {
    dst[0] = '\0';
    if (!src[0]) return;
    char tag[96];
    const char *slash = strrchr(lpr_exe_path, '/');
    snprintf(tag, sizeof tag, "exec-%s", slash ? slash + 1 : "unknown");
    snprintf(dst, len, "%s", src);
    char *s2 = strrchr(dst, '/');
    char *dot = strrchr(dst, '.');
    if (!dot || (s2 && dot < s2)) dot = dst + strlen(dst);
    char tail[PATH_MAX];
    snprintf(tail, sizeof tail, "%s", dot);
    size_t head = (size_t)(dot - dst);
    snprintf(dst + head, len - head, ".%s%s", tag, tail);
}

/* Before an exec in this process: everything recorded so far becomes the outgoing image's
 * trace. The spool must not outlive a successful exec (nobody would remove it), yet a failed
 * exec must find everything again; so the spool's content is held through one close-on-exec
 * descriptor while its name is given up: a successful exec closes it and the file is gone, a
 * failed one writes it back (lpr_exec_failed). Writes of other threads in that window are counted
 * as dropped. */
void lpr_exec_prepare(void) {
    if (!lpr_recording()) return;
    int saved = errno;
    uint8_t g = lpr_tls.guard;
    lpr_tls.guard = 1;
    lpr_sample_finish();
    lpr_tbuf_flush_all(0);
    lpr_spool_recover();
    lpr_tbuf_write_thread_names();
    lpr_modules_write();
    lpr_stacks_write();
    lpr_write_end(-1, 0);
    exec_name(exec_json, sizeof exec_json, lpr_cfg.raw_output ? "" : lpr_cfg.output);
    exec_name(exec_csv, sizeof exec_csv, lpr_cfg.csv);
    exec_lpt[0] = '\0';
    if (lpr_follow_exec(exec_json, exec_csv)) { /* converted by the follower; nothing to take back */
        spool_gone = 1;
        lpr_tls.guard = g;
        errno = saved;
        return;
    }
    if (!lpr_cfg.raw_output) lpr_convert_spool(exec_json[0] ? exec_json : NULL, exec_csv[0] ? exec_csv : NULL);
    lpr_spool_stop();
    /* the raw trace is wanted: it moves to the exec name (unpacked: a failed exec takes it back) */
    if (lpr_cfg.raw_output || lpr_cfg.keep_raw) {
        exec_name(exec_lpt, sizeof exec_lpt, spool_path);
        if (lpr_sys_rename(spool_path, exec_lpt) != 0) exec_lpt[0] = '\0';
    } else {
        exec_fd = lpr_sys_open(spool_path, O_RDONLY, 0);
        lpr_sys_unlink(spool_path);
    }
    spool_gone = 1;
    lpr_tls.guard = g;
    errno = saved;
}

/* Is the executable at `path` statically linked (an ELF file without an interpreter)? */
static int is_static_elf(const char *path) {
    int fd = lpr_sys_open(path, O_RDONLY, 0);
    if (fd < 0) return 0;
    unsigned char eh[64];
    int stat_elf = 0;
    if (lpr_sys_pread(fd, eh, sizeof eh, 0) == (long)sizeof eh && !memcmp(eh, "\177ELF", 4) && eh[4] == 2) {
        uint64_t phoff;
        uint16_t phentsize, phnum;
        memcpy(&phoff, eh + 32, 8);
        memcpy(&phentsize, eh + 54, 2);
        memcpy(&phnum, eh + 56, 2);
        stat_elf = phnum > 0 && phentsize >= 4;
        for (unsigned i = 0; i < phnum && stat_elf; i++) {
            uint32_t type;
            if (lpr_sys_pread(fd, &type, 4, phoff + (uint64_t)i * phentsize) != 4) break;
            if (type == 3 /* PT_INTERP */) stat_elf = 0;
        }
    }
    lpr_sys_close(fd);
    return stat_elf;
}

/* Before an exec or a spawn of `file` (`search`: looked up in PATH, as execvp does): a
 * statically linked program cannot load libprof, so it runs unprofiled — said once. No
 * allocation (vfork children). */
void lpr_exec_check_static(const char *file, int search) {
    static int said;
    if (!file || !lpr_cfg.enabled || !lpr_cfg.children || said) return;
    char path[PATH_MAX];
    const char *found = NULL;
    if (!search || strchr(file, '/')) {
        found = file;
    } else {
        const char *p = getenv("PATH");
        for (p = p ? p : "/usr/local/bin:/usr/bin:/bin"; *p && !found;) {
            size_t n = strcspn(p, ":");
            if (snprintf(path, sizeof path, "%.*s%s%s", (int)n, p, n ? "/" : "", file) < (int)sizeof path &&
                LP_SYS(SYS_access, path, X_OK, 0) == 0)
                found = path;
            p += n + (p[n] == ':');
        }
    }
    if (found && is_static_elf(found)) {
        said = 1;
        lpr_warn("%s is statically linked: LD_PRELOAD cannot reach it, so it runs without libprof", found);
    }
}

/* Write the held spool content back under its name; 0 or -1. */
static int restore_spool(int from) {
    int to = lpr_sys_open(spool_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, (int)lpr_cfg.file_mode);
    if (to < 0) return -1;
    long n;
    while ((n = lpr_sys_copy_file_range(from, to, 1 << 30)) > 0) {}
    if (n < 0) { /* no copy_file_range here: copy through a buffer */
        char buf[16384];
        uint64_t off = 0;
        while ((n = lpr_sys_pread(from, buf, sizeof buf, off)) > 0 && lpr_sys_write(to, buf, (size_t)n) == n)
            off += (uint64_t)n;
    }
    lpr_sys_close(to);
    return n == 0 ? 0 : -1;
}

/* The exec failed: the process goes on and its trace at exit will cover everything, under the
 * plain name again; the outgoing-image files are removed. */
void lpr_exec_failed(void) {
    if (!spool_gone || lpr_sys_getpid() != lpr_pid) return;
    int saved = errno;
    uint8_t g = lpr_tls.guard;
    lpr_tls.guard = 1;
    int back = 0;
    if (exec_lpt[0])
        back = lpr_sys_rename(exec_lpt, spool_path) == 0;
    else if (exec_fd >= 0)
        back = restore_spool(exec_fd) == 0;
    if (exec_fd >= 0) lpr_sys_close(exec_fd);
    exec_fd = -1;
    if (back) {
        lpr_spool_identify(); /* a copy is another file */
        spool_gone = 0;
        lpr_spool_resume();
        lpr_sample_resume(); /* the exec did not happen: sampling goes on */
    } else {
        lpr_warn("the trace could not be kept across a failed exec; recording stops");
        lpr_stop_for_good();
    }
    if (exec_json[0]) lpr_sys_unlink(exec_json);
    if (exec_csv[0]) lpr_sys_unlink(exec_csv);
    exec_lpt[0] = exec_json[0] = exec_csv[0] = '\0';
    lpr_tls.guard = g;
    errno = saved;
}
