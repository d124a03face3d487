/* netpeers: a TCP server and its client in one process, over 127.0.0.1 — for the net family.
 * The server thread accepts one connection and echoes what it receives (recv, then send) until
 * the client shuts its side; the client connects (port chosen by the kernel), sends 10 x 1000
 * bytes with send and 5 x 1000 with write on a dup of its socket, reads every echo back with
 * recv, then shuts down. Then 3 x 100 bytes through a pipe and 2 x 50 through a socketpair, and a
 * UDP datagram of 64 bytes to the server's address with sendto. Prints "ok PORT" (the server's
 * port, for the test to find its peer). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int lfd;

static void *server(void *arg) {
    (void)arg;
    int c = accept(lfd, NULL, NULL);
    char buf[4096];
    ssize_t n;
    while ((n = recv(c, buf, sizeof buf, 0)) > 0)
        for (ssize_t o = 0; o < n;) o += send(c, buf + o, (size_t)(n - o), 0);
    close(c);
    return NULL;
}

static void read_all(int fd, size_t n) {
    char buf[4096];
    while (n) {
        ssize_t k = recv(fd, buf, n < sizeof buf ? n : sizeof buf, 0);
        if (k <= 0) return;
        n -= (size_t)k;
    }
}

int main(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1) ||
        getsockname(lfd, (struct sockaddr *)&a, &len))
        return 1;
    pthread_t th;
    pthread_create(&th, NULL, server, NULL);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&a, sizeof a)) return 2;
    char block[1000];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < 10; i++) send(s, block, sizeof block, 0);
    int d = dup(s);
    for (int i = 0; i < 5; i++) write(d, block, sizeof block);
    read_all(s, 15000);
    shutdown(s, SHUT_WR);
    pthread_join(th, NULL);
    close(d);
    close(s);
    int p[2], sp[2];
    if (pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, sp)) return 3;
    for (int i = 0; i < 3; i++) write(p[1], block, 100);
    read(p[0], block, 300);
    for (int i = 0; i < 2; i++) send(sp[0], block, 50, 0);
    recv(sp[1], block, 100, MSG_WAITALL);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    sendto(u, block, 64, 0, (struct sockaddr *)&a, sizeof a);
    printf("ok %u\n", ntohs(a.sin_port));
    return 0;
}
