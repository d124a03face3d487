# ort_session.py: ONNX Runtime from Python (PyPI's onnxruntime), as its users write it: one
# InferenceSession with graph optimisations off (the nodes stay as written) and an intra-op pool of
# THREADS threads, RUNS runs of a [BATCH, 64] input through InferenceSession.run, one through
# run_with_ort_values. usage: ort_session.py MODEL [RUNS [BATCH [THREADS]]]
# Prints "ok" and every y[0, 0] summed.
import sys
import numpy as np
import onnxruntime as ort

model = sys.argv[1]
runs, batch, threads = (int(a) for a in (sys.argv[2:5] + ["50", "1", "1"][len(sys.argv[2:5]):]))
o = ort.SessionOptions()
o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
o.intra_op_num_threads = threads
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
x = np.full((batch, 64), 0.5, dtype=np.float32)
total = 0.0
for i in range(runs):
    total += float(s.run(["y"], {"x": x})[0][0, 0])
v = s.run_with_ort_values(["y"], {"x": ort.OrtValue.ortvalue_from_numpy(x)})
total += float(v[0].numpy()[0, 0])
print("ok %.3f" % total)
