/* forker: the parent allocates, forks a child that allocates and exits through exit(), then
 * allocates again. The child's events must never land in the parent's trace.
 * Parent calls: malloc 20 + 20, free 20 + 20 (plus whatever printf needs). Exit status 0. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void churn(int n, size_t size) {
    for (int i = 0; i < n; i++) {
        void *p = malloc(size);
        free(p);
    }
}

int main(void) {
    churn(20, 1000);
    pid_t pid = fork();
    if (pid == 0) {
        churn(500, 3000); /* sizes the parent never uses */
        exit(3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    churn(20, 2000);
    printf("child exited %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}
