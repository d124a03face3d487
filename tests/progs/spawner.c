/* spawner: posix_spawn()s argv[1] with a cleaned environment (PATH only), waits, and exits with
 * the child's status. libprof must put itself back into that environment. */
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    pid_t pid;
    if (posix_spawn(&pid, argv[1], NULL, NULL, argv + 1, envp) != 0) return 3;
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
