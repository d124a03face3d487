/* net.c: the net family — the calls a service makes on sockets: socket, socketpair, connect,
 * accept/accept4, send/recv and their to/from/msg forms, shutdown.
 *
 * As for files, the peer is recorded once, when the descriptor gets one (connect: the address
 * connected to, "10.0.0.7:5432"; accept: the client's address, its port left out so that a
 * server's clients from one host make one peer, "10.0.0.9 (accepted)"; a Unix socket: its path),
 * and the converter keeps the descriptor -> peer table: every send, recv, read or write on it is
 * charged to the peer, "bytes and time per peer". A non-blocking connect counts as connected.
 * The descriptors that dup and pipe make are named in io.c. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "hook.h"

// clang-format off
#define REALS(X) \
    X(socket) X(socketpair) X(connect) X(accept) X(accept4) X(send) X(sendto) X(sendmsg) X(recv) X(recvfrom) \
    X(recvmsg) X(shutdown)
// clang-format on
REALS(LP_REAL_SLOT)

/* `sa` as text ("1.2.3.4:80", "[::1]:8080", "/run/x.sock", "@abstract"); with `port` 0 the
 * address alone and " (accepted)". Empty when the family is not one of those. */
static void peer_text(char *buf, size_t cap, const struct sockaddr *sa, socklen_t len, int port) {
    buf[0] = '\0';
    if (!sa || len < sizeof(sa_family_t)) return;
    char ip[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        if (port)
            snprintf(buf, cap, "%s:%u", ip, ntohs(in->sin_port));
        else
            snprintf(buf, cap, "%s (accepted)", ip);
    } else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        if (port)
            snprintf(buf, cap, "[%s]:%u", ip, ntohs(in6->sin6_port));
        else
            snprintf(buf, cap, "[%s] (accepted)", ip);
    } else if (sa->sa_family == AF_UNIX) {
        const struct sockaddr_un *un = (const void *)sa;
        size_t n = len > offsetof(struct sockaddr_un, sun_path) ? len - offsetof(struct sockaddr_un, sun_path) : 0;
        if (n > sizeof un->sun_path) n = sizeof un->sun_path;
        if (n && un->sun_path[0] == '\0') /* abstract: the name is all n bytes */
            snprintf(buf, cap, "unix @%.*s%s", (int)n - 1, un->sun_path + 1, port ? "" : " (accepted)");
        else if (n && un->sun_path[0])
            snprintf(buf, cap, "unix %.*s%s", (int)strnlen(un->sun_path, n), un->sun_path, port ? "" : " (accepted)");
        else
            snprintf(buf, cap, "unix (unnamed)%s", port ? "" : " (accepted)");
    }
}

LP_HOOK_STR(NET, SOCKET, int, socket, (int domain, int type, int proto), (domain, type, proto), -1, "socket", I(domain),
            I(type), I(r))

__attribute__((noinline)) static int socketpair_slow(int domain, int type, int proto, int sv[2]) {
    if (!LP_REAL(socketpair)) LP_NOFN(-1);
    LP_BEGIN(LP_FAM_NET);
    int r = LP_REAL(socketpair)(domain, type, proto, sv);
    LP_RECORD_STR(LP_CALL_SOCKETPAIR, "socketpair", I(r == 0 ? sv[0] : -1), I(r == 0 ? sv[1] : -1), I(r));
    return r;
}
LP_EXPORT int socketpair(int domain, int type, int proto, int sv[2]) {
    LP_PASS_ARGS(LP_FAM_NET, socketpair, (domain, type, proto, sv));
    return socketpair_slow(domain, type, proto, sv);
}

/* connect: the result is -errno when it failed (EINPROGRESS: a non-blocking connect, which the
 * converter takes as connected). */
__attribute__((noinline)) static int connect_slow(int fd, const struct sockaddr *sa, socklen_t len) {
    if (!LP_REAL(connect)) LP_NOFN(-1);
    LP_BEGIN(LP_FAM_NET);
    int r = LP_REAL(connect)(fd, sa, len);
    if (t) {
        int saved = errno;
        char peer[160];
        peer_text(peer, sizeof peer, sa, len, 1);
        LP_RECORD_STR(LP_CALL_CONNECT, peer[0] ? peer : "(socket of another family)", I(fd), I(r < 0 ? -saved : r));
        errno = saved;
    }
    return r;
}
LP_EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len) {
    LP_PASS_ARGS(LP_FAM_NET, connect, (fd, sa, len));
    return connect_slow(fd, sa, len);
}

/* accept and accept4: the client's address, asked of the kernel when the program did not. */
static void accepted(struct lpr_tls *t, uint64_t t0, int lfd, int r, struct sockaddr *sa, socklen_t *lenp) {
    if (!t) return;
    int saved = errno;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    const struct sockaddr *p = sa;
    if (r >= 0 && (!sa || !lenp)) {
        p = getpeername(r, (struct sockaddr *)&ss, &len) == 0 ? (const struct sockaddr *)&ss : NULL;
    } else if (lenp) {
        len = *lenp;
    }
    char peer[160];
    peer_text(peer, sizeof peer, r >= 0 ? p : NULL, len, 0);
    LP_RECORD_STR(LP_CALL_ACCEPT, peer[0] ? peer : "(peer of another family)", I(lfd), I(r));
    errno = saved;
}

__attribute__((noinline)) static int accept_slow(int fd, struct sockaddr *sa, socklen_t *len) {
    if (!LP_REAL(accept)) LP_NOFN(-1);
    LP_BEGIN(LP_FAM_NET);
    int r = LP_REAL(accept)(fd, sa, len);
    accepted(t, t0, fd, r, sa, len);
    return r;
}
LP_EXPORT int accept(int fd, struct sockaddr *sa, socklen_t *len) {
    LP_PASS_ARGS(LP_FAM_NET, accept, (fd, sa, len));
    return accept_slow(fd, sa, len);
}

__attribute__((noinline)) static int accept4_slow(int fd, struct sockaddr *sa, socklen_t *len, int flags) {
    if (!LP_REAL(accept4)) LP_NOFN(-1);
    LP_BEGIN(LP_FAM_NET);
    int r = LP_REAL(accept4)(fd, sa, len, flags);
    accepted(t, t0, fd, r, sa, len);
    return r;
}
LP_EXPORT int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags) {
    LP_PASS_ARGS(LP_FAM_NET, accept4, (fd, sa, len, flags));
    return accept4_slow(fd, sa, len, flags);
}

/* Bytes of a message: its iovecs' lengths. */
static size_t msg_bytes(const struct msghdr *m) {
    size_t n = 0;
    for (size_t i = 0; m && m->msg_iov && i < (size_t)m->msg_iovlen; i++) n += m->msg_iov[i].iov_len;
    return n;
}

LP_HOOK(NET, SEND, ssize_t, send, (int fd, const void *buf, size_t n, int flags), (fd, buf, n, flags), -1, (void)0,
        I(fd), U(n), I(r))
LP_HOOK(NET, SEND, ssize_t, sendto,
        (int fd, const void *buf, size_t n, int flags, const struct sockaddr *sa, socklen_t len),
        (fd, buf, n, flags, sa, len), -1, (void)0, I(fd), U(n), I(r))
LP_HOOK(NET, SEND, ssize_t, sendmsg, (int fd, const struct msghdr *m, int flags), (fd, m, flags), -1, (void)0, I(fd),
        U(msg_bytes(m)), I(r))
LP_HOOK(NET, RECV, ssize_t, recv, (int fd, void *buf, size_t n, int flags), (fd, buf, n, flags), -1, (void)0, I(fd),
        U(n), I(r))
LP_HOOK(NET, RECV, ssize_t, recvfrom, (int fd, void *buf, size_t n, int flags, struct sockaddr *sa, socklen_t *len),
        (fd, buf, n, flags, sa, len), -1, (void)0, I(fd), U(n), I(r))
LP_HOOK(NET, RECV, ssize_t, recvmsg, (int fd, struct msghdr *m, int flags), (fd, m, flags), -1, (void)0, I(fd),
        U(msg_bytes(m)), I(r))
LP_HOOK(NET, SHUTDOWN, int, shutdown, (int fd, int how), (fd, how), -1, (void)0, I(fd), I(how), I(r))
