// ort_infer.js: one ONNX Runtime session (onnxruntime-node), 50 runs of a [1, 64] input, the
// release. usage: node ort_infer.js MODEL [own PREFIX] ("own": the program turns ORT's profiling on
// itself). The graph is not optimised, so its nodes stay as written.
const ort = require('onnxruntime-node');
(async () => {
  const o = {graphOptimizationLevel: 'disabled'};
  if (process.argv[3] === 'own') { o.enableProfiling = true; o.profileFilePrefix = process.argv[4]; }
  const s = await ort.InferenceSession.create(process.argv[2], o);
  const x = new ort.Tensor('float32', new Float32Array(64).fill(0.5), [1, 64]);
  let sum = 0;
  for (let i = 0; i < 50; i++) { const r = await s.run({x}); sum += r.y.data[0]; }
  if (process.argv[3] === 'own') s.endProfiling();
  await s.release();
  console.log('ok', sum.toFixed(3));
})();
