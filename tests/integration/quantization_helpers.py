"""An FP32 MLP classifier and its INT8 version made by onnxruntime's own
quantize_dynamic: the pair the reference check at load (test_reference_check)
and the shadow comparison (test_shadow) compare."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from harness import make_test_models

demo = make_test_models.demo
FEATURES, HIDDEN, CLASSES = 32, 64, 10


def build_mlp():
    rng = np.random.default_rng(7)
    w1 = rng.normal(0, 0.5, (FEATURES, HIDDEN)).astype(np.float32)
    w2 = rng.normal(0, 0.5, (HIDDEN, CLASSES)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["logits"])]
    return demo.make_model(nodes, [("x", TensorProto.FLOAT, ["batch", FEATURES])],
                           [("logits", TensorProto.FLOAT, ["batch", CLASSES])],
                           [demo.const("w1", w1), demo.const("b1", rng.normal(0, 0.1, HIDDEN).astype(np.float32)),
                            demo.const("w2", w2), demo.const("b2", rng.normal(0, 0.1, CLASSES).astype(np.float32))],
                           name="mlp")


def quantize_mlp(directory):
    """(fp32 path, int8 path) in `directory`: the INT8 file is quantize_dynamic's output."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    fp32, int8 = directory / "model_fp32.onnx", directory / "model_int8.onnx"
    fp32.write_bytes(build_mlp().SerializeToString())
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    ops = {n.op_type for n in onnx.load(str(int8)).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeLinear" in ops, ops  # quantization applied
    return fp32, int8
