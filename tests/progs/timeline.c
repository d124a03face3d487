/* timeline: 3 s of a program with short calls and long waits, for the bounded timeline. Thirty
 * times: a 20 ms sleep, 50 rounds of fopen + fread + fclose of /proc/self/stat (a few µs each),
 * an 80 ms sleep. So 60 sleeps of 10 ms or more and 4,500 short calls, evenly over the run.
 * Prints "ok". */
#include <stdio.h>
#include <time.h>

int main(void) {
    for (int s = 0; s < 30; s++) {
        struct timespec t = {0, 20000000};
        nanosleep(&t, NULL);
        char b[16];
        for (int i = 0; i < 50; i++) {
            FILE *f = fopen("/proc/self/stat", "r");
            if (!f) return 1;
            if (fread(b, 1, sizeof b, f) == 0) return 1;
            fclose(f);
        }
        t.tv_nsec = 80000000;
        nanosleep(&t, NULL);
    }
    puts("ok");
    return 0;
}
