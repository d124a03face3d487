# torch_ops.py: PyTorch operators counted two ways — a small transformer + CNN, 20 inference
# iterations and 3 training steps inside a record_function range "libprof-window", and a range
# that another thread ends (a future completed there).
#
#   torch_ops.py run                 the workload (under libprof: its trace has the operators)
#   torch_ops.py profile OUT.json    the same under torch.profiler (record_shapes, its removal of
#                                    nested same-name ops off): per op and per (op, shapes) counts
#                                    of the window, written to OUT.json
#   torch_ops.py time K [profiler]   seconds the workload at scale K takes (after the import and a
#                                    warm-up round), printed; with "profiler", under torch.profiler
#                                    (the cost scripts/bench-torch compares libprof's with)
#   torch_ops.py run-compiled N      the same kind of model (an MLP with a GELU and a LayerNorm)
#                                    compiled with torch.compile (inductor, CPU): one call to compile,
#                                    then N calls inside the window
#   torch_ops.py profile-compiled N OUT.json   the same under torch.profiler, counted as above
#   torch_ops.py compare TRACE.json PROFILE.json
#                                    libprof's counts of the window (ops inside its slice) against
#                                    the profiler's; prints the differences, exit 1 if any
import json
import sys
import threading


def workload(torch, k=1):
    """k scales the model: 1 (tests) has operators of a microsecond or two, 4 (the bench) of
    tens of microseconds, a small model's."""
    nn = torch.nn
    torch.manual_seed(0)
    torch.set_num_threads(1)
    d, c = 32 * k, 8 * k
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model=d, nhead=4, dim_feedforward=2 * d,
                                                           dropout=0.0, batch_first=True), num_layers=2)
    cnn = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(c, 4))
    x = torch.randn(2 * k, 10 * k, d)
    img = torch.randn(2 * k, 3, 16 * k, 16 * k)
    opt = torch.optim.SGD(list(enc.parameters()) + list(cnn.parameters()), lr=0.01)
    with torch.autograd.profiler.record_function("libprof-window"):
        with torch.no_grad():
            for _ in range(20):
                enc(x)
                cnn(img)
        for _ in range(3):
            opt.zero_grad()
            loss = enc(x).mean() + cnn(img).mean()
            loss.backward()
            opt.step()


def compiled(torch, n):
    """torch.compile's regions (Dynamo's cache lookup, the compiled region, AOTAutograd's wrapper,
    the FX graph's call) around the operators that still dispatch and inductor's own kernels."""
    nn = torch.nn
    torch.manual_seed(0)
    torch.set_num_threads(1)
    m = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 10))
    x = torch.randn(32, 64)
    # Inductor first probes each vector ISA the CPU has by loading a test library in a fresh
    # Python that imports torch (nine of them, two seconds each). With this wheel every probe
    # fails (its libtorch has none of the Sleef functions the vectorised code calls), so inductor
    # writes scalar code whatever they say: said here, the same code is made 18 s sooner.
    import torch._inductor.config as inductor

    inductor.cpp.vec_isa_ok = False
    cm = torch.compile(m)
    with torch.no_grad():
        cm(x)  # compiled here (inductor's cache makes later runs quick)
        with torch.autograd.profiler.record_function("libprof-window"):
            for _ in range(n):
                cm(x)


def cross_thread(torch):
    """A range started here and ended on another thread, when it completes the future."""
    fut = torch.futures.Future()
    with torch.autograd.profiler.record_function("libprof-async") as rf:
        done = rf._call_end_callbacks_on_future(fut)
    torch.ones(3).sum()
    t = threading.Thread(target=lambda: fut.set_result(torch.zeros(1)), name="completer")
    t.start()
    t.join()
    done.wait()


def profile(torch, out, work=None):
    from torch.autograd import profiler_util
    profiler_util.EventList._remove_dup_nodes = lambda self: None  # count every op, nested or not
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        (work or workload)(torch)
    events = prof.events()
    win = [e for e in events if e.name == "libprof-window"][0]
    ops, pairs = {}, {}
    for e in events:
        if e.time_range.start < win.time_range.start or e.time_range.end > win.time_range.end:
            continue
        ops[e.name] = ops.get(e.name, 0) + 1
        key = e.name + " " + str(e.input_shapes)
        pairs[key] = pairs.get(key, 0) + 1
    json.dump({"ops": ops, "pairs": pairs}, open(out, "w"), indent=1, sort_keys=True)


# Ranges torch.compile's code opens only when torch.profiler is on (it tests
# torch.autograd.profiler._is_profiler_enabled first): no other observer sees them.
PROFILER_ONLY = ("AOTDispatcher Runtime Wrapper Prologue", "Pregraph bytecode", "## Call CompiledFxGraph ")


def compare(trace, prof):
    t = json.load(open(trace))["traceEvents"]
    p = json.load(open(prof))
    win = [e for e in t if e.get("name") == "libprof-window" and e.get("ph") == "X"][0]
    lo, hi = win["ts"], win["ts"] + win["dur"]
    ops, pairs = {}, {}
    for e in t:
        if e.get("cat") != "torch" or e.get("ph") != "X" or e["ts"] < lo or e["ts"] + e["dur"] > hi:
            continue
        ops[e["name"]] = ops.get(e["name"], 0) + 1
        if "shapes" in e.get("args", {}):
            key = e["name"] + " " + str(e["args"]["shapes"])
            pairs[key] = pairs.get(key, 0) + 1
    bad = 0
    for what, mine, theirs in (("op", ops, p["ops"]), ("pair", pairs, p["pairs"] if pairs else {})):
        for k in sorted(set(mine) | set(theirs)):
            if k.startswith(PROFILER_ONLY) and not mine.get(k, 0):
                print("%s %s: torch records it only while torch.profiler runs" % (what, k))
                continue
            if mine.get(k, 0) != theirs.get(k, 0):
                print("%s %s: libprof %d, torch.profiler %d" % (what, k, mine.get(k, 0), theirs.get(k, 0)))
                bad += 1
    print("ops %d (%d names), pairs %d, differences %d" % (sum(ops.values()), len(ops), len(pairs), bad))
    sys.exit(1 if bad or not ops else 0)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        import torch
        if mode == "run":
            workload(torch)
            cross_thread(torch)
        elif mode == "profile":
            profile(torch, sys.argv[2])
        elif mode == "run-compiled":
            compiled(torch, int(sys.argv[2]))
        elif mode == "profile-compiled":
            profile(torch, sys.argv[3], lambda t: compiled(t, int(sys.argv[2])))
        elif mode == "time":
            import time
            k = int(sys.argv[2])
            workload(torch, k)  # warm-up: oneDNN's primitives, the allocator
            t0 = time.perf_counter()
            if sys.argv[3:] == ["profiler"]:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
                    workload(torch, k)
            else:
                workload(torch, k)
            print("%.4f" % (time.perf_counter() - t0))
            sys.exit(0)
        print("done")
