# mlp_onnx.py: writes a 4-block MLP (MatMul, Add, Relu; 64 wide) as an ONNX model, with
# Debian's python3-onnx. usage: mlp_onnx.py OUT.onnx [dynamic]  (dynamic: the batch dimension of x
# and y is 'N', any size; else 1)
import onnx, numpy as np, sys
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
nodes, inits, prev = [], [], 'x'
for b in range(4):
    inits += [numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32) * 0.1, f'w{b}'),
              numpy_helper.from_array(np.zeros(64, np.float32), f'b{b}')]
    out = f'r{b}' if b < 3 else 'y'
    nodes += [helper.make_node('MatMul', [prev, f'w{b}'], [f'm{b}'], name=f'block{b}/matmul'),
              helper.make_node('Add', [f'm{b}', f'b{b}'], [f'a{b}'], name=f'block{b}/add'),
              helper.make_node('Relu', [f'a{b}'], [out], name=f'block{b}/relu')]
    prev = out
n = 'N' if sys.argv[2:] == ['dynamic'] else 1
g = helper.make_graph(nodes, 'mlp', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [n, 64])],
                      [helper.make_tensor_value_info('y', TensorProto.FLOAT, [n, 64])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
