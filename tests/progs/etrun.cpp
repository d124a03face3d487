// etrun: a C++ program that runs an ExecuTorch program with ExecuTorch's runtime (the libraries
// and headers its wheel ships): loads a .pte through extension::Module, runs forward N times on a
// fixed 1x3x16x16 input, prints the runs and the sum of the outputs. With ETDUMP, the program's
// own profiler is on (an ETDumpGen event tracer, as ExecuTorch's executor_runner does it) and the
// ETDump is written to ETDUMP at the end.
//   etrun PTE N [ETDUMP]
#include <executorch/devtools/etdump/etdump_flatcc.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

using executorch::extension::Module;

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: etrun PTE N [ETDUMP]\n");
        return 2;
    }
    int n = std::atoi(argv[2]);
    std::unique_ptr<executorch::runtime::EventTracer> tracer;
    if (argc > 3) tracer = std::make_unique<executorch::etdump::ETDumpGen>();
    Module m(argv[1], Module::LoadMode::File, std::move(tracer));
    std::vector<float> in(1 * 3 * 16 * 16);
    for (size_t i = 0; i < in.size(); i++) in[i] = (float)((i * 7919) % 101) / 50.0f - 1.0f;
    auto x = executorch::extension::from_blob(in.data(), {1, 3, 16, 16});
    double total = 0;
    for (int i = 0; i < n; i++) {
        auto r = m.forward(x);
        if (!r.ok()) {
            std::fprintf(stderr, "etrun: forward failed: error %d\n", (int)r.error());
            return 1;
        }
        const auto &out = r->at(0).toTensor();
        const float *p = out.const_data_ptr<float>();
        for (ssize_t k = 0; k < out.numel(); k++) total += p[k];
    }
    if (argc > 3) {
        auto *gen = static_cast<executorch::etdump::ETDumpGen *>(m.event_tracer());
        executorch::etdump::ETDumpResult res = gen->get_etdump_data();
        FILE *f = std::fopen(argv[3], "wb");
        if (!f || !res.buf || std::fwrite(res.buf, 1, res.size, f) != res.size || std::fclose(f)) {
            std::fprintf(stderr, "etrun: cannot write the ETDump to %s\n", argv[3]);
            return 1;
        }
        std::free(res.buf);
    }
    std::printf("runs %d checksum %.4f\n", n, total);
    return 0;
}
