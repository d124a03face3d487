// torchc: a C++ program linked to libtorch (no Python): ten rounds of mm and relu on a 16x16
// tensor. Prints the sum of the result. For the torch family: operators are recorded in a
// program whose libtorch was loaded before main.
// (the operators' own headers, not ATen/ATen.h: the program builds in half the time)
#include <ATen/Utils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sum.h>
#include <cstdio>

int main() {
    at::manual_seed(0);
    at::Tensor a = at::randn({16, 16});
    at::Tensor c;
    for (int i = 0; i < 10; i++) c = at::relu(at::mm(a, a));
    std::printf("%.3f\n", c.sum().item<float>());
    return 0;
}
