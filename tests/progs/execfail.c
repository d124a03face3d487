/* execfail: exec calls that fail must leave the program exactly as it was: same errno, and its
 * recording goes on. Allocates 10 blocks, tries execv/execvp/execl on missing programs, allocates
 * 10 more, prints what errno said. Exit status 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *volatile sink;

int main(void) {
    for (int i = 0; i < 10; i++) sink = malloc(1111);
    char *argv[] = {"nope", NULL};
    int a = execv("/nonexistent/nope", argv) == -1 && errno == ENOENT;
    int b = execvp("libprof-no-such-program", argv) == -1 && errno == ENOENT;
    int c = execl("/nonexistent/nope", "nope", (char *)NULL) == -1 && errno == ENOENT;
    for (int i = 0; i < 10; i++) sink = malloc(2222);
    printf("execv %d execvp %d execl %d\n", a, b, c);
    return 0;
}
