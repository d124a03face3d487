/* faketorch: a library named like libtorch of a version libprof does not know
 * (libtorch_cpu.so.9.99). It exports the function libprof would register its operator callback
 * with; being called is the failure this stands for: it says so and aborts. */
#include <stdio.h>
#include <stdlib.h>

void add_global_callback(void) __asm__("_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE");
void add_global_callback(void) {
    fputs("faketorch: a callback was registered\n", stderr);
    abort();
}

int faketorch_work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += i;
    return s;
}
