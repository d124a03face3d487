// thrower: C++ exceptions thrown and caught through several frames, for the sampler's churn
// test (tests/progs/cpusplit.c): a stack walk from a signal handler while the C++ runtime unwinds.
#include <stdexcept>

namespace {
__attribute__((noinline)) int deep(int n, int i) {
    if (n == 0) throw std::runtime_error("deep");
    return deep(n - 1, i) + i;
}
} // namespace

extern "C" void lp_throw_and_catch(int i) {
    try {
        deep(8, i);
    } catch (const std::exception &) {}
}
