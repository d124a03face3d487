// torchc: a C++ program linked to libtorch (no Python): ten rounds of mm and relu on a 16x16
// tensor. Prints the sum of the result. For the torch family: operators are recorded in a
// program whose libtorch was loaded before main.
#include <ATen/ATen.h>
#include <cstdio>

int main() {
    at::manual_seed(0);
    at::Tensor a = at::randn({16, 16});
    at::Tensor c;
    for (int i = 0; i < 10; i++) c = at::relu(at::mm(a, a));
    std::printf("%.3f\n", c.sum().item<float>());
    return 0;
}
