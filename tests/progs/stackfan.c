/* stackfan: allocations from 2^DEPTH distinct call stacks, for a heap profile larger than one
 * packet — each block's stack is a path of DEPTH calls, each to left() or right() by one bit of
 * the block's number, then one malloc of 64 B, kept to the end.
 *
 * usage: stackfan [DEPTH]   (default 12: 4096 stacks; prints the blocks allocated) */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

void *volatile sink;
static void **kept;
static unsigned nkept;

/* One frame a level: left() or right() by the level's bit, each calling the next level's (two
 * functions of one body, so that a stack's frames spell its number). */
NOINLINE static void right(unsigned bits, int depth);
NOINLINE static void left(unsigned bits, int depth);
#define LEVEL(name)                                                                         \
    NOINLINE static void name(unsigned bits, int depth) {                                   \
        if (depth == 0)                                                                     \
            kept[nkept++] = sink = malloc(64);                                              \
        else if (bits & 1)                                                                  \
            right(bits >> 1, depth - 1);                                                    \
        else                                                                                \
            left(bits >> 1, depth - 1);                                                     \
        __asm__ volatile("" ::: "memory"); /* (no tail call: each level keeps its frame) */ \
    }
LEVEL(left)
LEVEL(right)

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 12;
    if (depth < 1 || depth > 20) return 2;
    kept = malloc(sizeof *kept << depth);
    for (unsigned i = 0; i < 1u << depth; i++) left(i, depth);
    printf("%u\n", nkept);
    return 0;
}
