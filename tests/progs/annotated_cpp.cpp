// annotated_cpp: include/libprof.h from C++ — scopes that end through an exception still pop.
// Records 4 "request" ranges, each with a nested "parse" range; prints "handled 4 errors 2".
#include <cstdio>
#include <stdexcept>

#include "libprof.h"

static int handle(int i) {
    LIBPROF_SCOPE("request");
    {
        LIBPROF_SCOPE("parse");
        if (i % 2) throw std::runtime_error("odd");
    }
    return i;
}

int main() {
    int handled = 0, errors = 0;
    for (int i = 0; i < 4; i++) {
        try {
            handle(i);
        } catch (const std::exception &) {
            errors++;
        }
        handled++;
    }
    std::printf("handled %d errors %d\n", handled, errors);
    return 0;
}
