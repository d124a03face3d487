/* python_probe.c: reading the interpreter's memory where it may not be memory (see python.c's
 * "frames"): the kernel's copy (process_vm_readv, which fails where a load would fault), or
 * loads libprof's own fault handler steps over (probe_here, python_int.h) while the faults are
 * libprof's — then also the GIL holder's state is read so (holder_ours). */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>

#include "config.h"
#include "python_int.h"
#include "sys.h"

/* n bytes at src into dst if they are mapped: 0, or -1. */
static int copy_safe(void *dst, uintptr_t src, size_t n) {
    struct iovec l = {dst, n}, r = {(void *)src, n};
    return lpr_syscall6(SYS_process_vm_readv, lpr_pid, (long)&l, 1, (long)&r, 1, 0) == (long)n ? 0 : -1;
}

int lpr_faults_ours;

/* P3.holder where the faults are libprof's (lpr_py_with reads the holder's thread through a
 * probed load), else 0: one load for lpr_py_with. Made again by whoever changes either, until
 * what it was made from is still what they are (two threads changing one each end agreeing). */
const uintptr_t *holder_ours;
void lpr_py_holder_again(void) {
    for (;;) {
        const uintptr_t *h = __atomic_load_n(&P3.holder, __ATOMIC_SEQ_CST);
        int ours = __atomic_load_n(&lpr_faults_ours, __ATOMIC_SEQ_CST);
        __atomic_store_n(&holder_ours, ours ? h : NULL, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&P3.holder, __ATOMIC_SEQ_CST) == h &&
            __atomic_load_n(&lpr_faults_ours, __ATOMIC_SEQ_CST) == ours)
            return;
    }
}

void lpr_py_faults_ours(int ours) {
    __atomic_store_n(&lpr_faults_ours, ours, __ATOMIC_SEQ_CST);
    lpr_py_holder_again();
}

int lpr_py_fault_fixup(void *ucv) {
    ucontext_t *uc = ucv;
    uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], to = 0;
    for (const struct probe_site *s = __start_lpr_probes; !to && s < __stop_lpr_probes; s++)
        if ((uintptr_t)&s->load + (uintptr_t)(intptr_t)s->load == ip)
            to = (uintptr_t)&s->done + (uintptr_t)(intptr_t)s->done;
    if (!to) return 0;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)to;
    uc->uc_mcontext.gregs[REG_RAX] = 0;
    lpr_tls.probe_fault = 1;
    return 1;
}

/* n bytes (whole words) at src into dst if they are mapped: 0, or -1. Probed loads where a
 * fault reaches libprof's handler, else the kernel's copy. */
int lpr_py_copy_probed(void *dst, uintptr_t src, size_t n) {
    if (!__atomic_load_n(&lpr_faults_ours, __ATOMIC_ACQUIRE)) return copy_safe(dst, src, n);
    struct lpr_tls *t = &lpr_tls;
    uintptr_t *d = dst;
    t->probe_fault = 0;
    for (size_t i = 0; i < n / 8; i++) d[i] = probe_here(src + 8 * i);
    return t->probe_fault ? -1 : 0;
}
