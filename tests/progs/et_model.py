# et_model.py: an ExecuTorch program — a small CNN + MLP of its own, exported to a .pte (the
# convolutions and linears delegated to XNNPACK, the rest left to ExecuTorch's portable
# operators), then run by ExecuTorch's runtime from Python, unmodified.
#
#   et_model.py export OUT.pte            export the model (torch.export -> edge -> XNNPACK -> .pte)
#   et_model.py run PTE N [ETDUMP]        load it and run forward N times; with ETDUMP, with ETDump
#                                         profiling on, written to ETDUMP at the end (the program's
#                                         own profiler, as ExecuTorch's docs show it)
#   et_model.py inspect ETDUMP OUT.json   ExecuTorch's Inspector on the ETDump: the count of each
#                                         event of its table (operator and delegate events), by
#                                         name, written to OUT.json
import json
import os
import sys

# the exporter and the Inspector run flatc, which the wheel puts in the environment's bin/ (not on
# PATH unless the environment is activated)
os.environ.setdefault("FLATC_EXECUTABLE", os.path.join(sys.prefix, "bin", "flatc"))


def model(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
            self.fc1 = nn.Linear(8 * 8 * 8, 64)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x):
            x = torch.relu(self.conv1(x))
            x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2, 2)
            x = torch.relu(self.fc1(x.flatten(1)))
            y = self.fc2(x)
            # not delegated to XNNPACK: ExecuTorch's portable kernels run these
            return torch.cumsum(y, dim=1) + torch.log_softmax(y, dim=1)

    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, 3, 16, 16),)


def export(out):
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    m, example = model(torch)
    ep = torch.export.export(m, example)
    prog = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    with open(out, "wb") as f:
        f.write(prog.buffer)


def run(pte, n, etdump):
    import torch
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte, enable_etdump=etdump is not None)
    forward = program.load_method("forward")
    torch.manual_seed(1)
    x = torch.randn(1, 3, 16, 16)
    total = 0.0
    for _ in range(n):
        total += float(forward.execute([x])[0].sum())
    if etdump:
        program.write_etdump_result_to_file(etdump, etdump + ".debug")
    print("runs %d checksum %.4f" % (n, total))


def inspect(etdump, out):
    from executorch.devtools import Inspector

    counts = {}
    for block in Inspector(etdump_path=etdump).event_blocks:
        for ev in block.events:
            counts[ev.name] = counts.get(ev.name, 0) + len(ev.perf_data.raw if ev.perf_data else [])
    json.dump(counts, open(out, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "export":
        export(sys.argv[2])
    elif mode == "run":
        run(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    elif mode == "inspect":
        inspect(sys.argv[2], sys.argv[3])
