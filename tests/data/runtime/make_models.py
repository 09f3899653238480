#!/usr/bin/env python3
"""Generates the tiny ONNX models the runtime unit tests load.

Run from anywhere with the project venv:  .venv/bin/python tests/data/runtime/make_models.py
The outputs are committed, so the C++ tests need no Python. Opset and IR
version are pinned so the files do not change with the onnx package version.
"""
import os

import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

OUT_DIR = os.path.dirname(os.path.abspath(__file__))
OPSET = [helper.make_opsetid("", 17)]
IR_VERSION = 8


def save(graph, name, opset=OPSET):
    model = helper.make_model(graph, opset_imports=opset, producer_name="ortserve-tests")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT_DIR, name))


def add_fp32():
    """sum = a + b over FP32 [batch, 4]; batch is a symbolic dimension."""
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 4])
    s = helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["batch", 4])
    d = helper.make_tensor_value_info("diff", TensorProto.FLOAT, ["batch", 4])
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Sub", ["a", "b"], ["diff"])],
        "add_fp32", [a, b], [s, d])
    save(graph, "add_fp32.onnx")


IDENTITY_TYPES = {
    "bool": TensorProto.BOOL,
    "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16,
    "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64,
    "int8": TensorProto.INT8,
    "int16": TensorProto.INT16,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "fp16": TensorProto.FLOAT16,
    "fp32": TensorProto.FLOAT,
    "fp64": TensorProto.DOUBLE,
    "bf16": TensorProto.BFLOAT16,
    "string": TensorProto.STRING,
}


def identity(suffix, elem_type):
    """output = Identity(input) with a fully dynamic rank-2 shape [n, m]."""
    x = helper.make_tensor_value_info("input", elem_type, ["n", "m"])
    y = helper.make_tensor_value_info("output", elem_type, ["n", "m"])
    graph = helper.make_graph([helper.make_node("Identity", ["input"], ["output"])],
                              f"identity_{suffix}", [x], [y])
    save(graph, f"identity_{suffix}.onnx")


def float8_input():
    """A model ORT runs but whose input type has no KServe equivalent (FLOAT8E4M3FN)."""
    x = helper.make_tensor_value_info("f8", TensorProto.FLOAT8E4M3FN, [2])
    y = helper.make_tensor_value_info("f8_out", TensorProto.FLOAT8E4M3FN, [2])
    graph = helper.make_graph([helper.make_node("Identity", ["f8"], ["f8_out"])], "float8_input", [x], [y])
    save(graph, "float8_input.onnx", opset=[helper.make_opsetid("", 19)])


def slow_loop():
    """Adds 1 to a [1] FP32 counter `trip_count` times inside a Loop.

    Each iteration is a separate subgraph execution, so ORT checks the
    RunOptions terminate flag between them: a huge trip count runs for
    minutes unless terminated, a small one returns at once.
    """
    # Loop body: (iteration, cond, acc) -> (cond, acc + 1)
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "one"], ["acc_out"])],
        "loop_body",
        [helper.make_tensor_value_info("iteration", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1])],
        initializer=[one])
    cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trip_count", "cond", "start"], ["count"], body=body)],
        "slow_loop",
        [helper.make_tensor_value_info("trip_count", TensorProto.INT64, []),
         helper.make_tensor_value_info("start", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("count", TensorProto.FLOAT, [1])],
        initializer=[cond])
    save(graph, "slow_loop.onnx")


def custom_negate():
    """output = ortserve.test:Negate(input), FP32 [n]: the operator of tests/ops/negate_op_library.cpp."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n"])
    graph = helper.make_graph([helper.make_node("Negate", ["input"], ["output"], domain="ortserve.test")],
                              "custom_negate", [x], [y])
    save(graph, "custom_negate.onnx", opset=OPSET + [helper.make_opsetid("ortserve.test", 1)])


def matmul_bias():
    """output = input x weight + bias, FP32 [n, 8] -> [n, 300]: weight[i][j] = (i + j) / 100
    (a 9600-byte matrix), bias[j] = j (a 1200-byte vector); for the shared weights."""
    weight = [(i + j) / 100 for i in range(8) for j in range(300)]
    inits = [helper.make_tensor("weight", TensorProto.FLOAT, [8, 300], weight),
             helper.make_tensor("bias", TensorProto.FLOAT, [300], [float(j) for j in range(300)])]
    for t in inits:  # raw_data, as exporters write weights
        t.raw_data = onnx.numpy_helper.to_array(t).tobytes()
        del t.float_data[:]
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 300])
    graph = helper.make_graph([helper.make_node("MatMul", ["input", "weight"], ["product"]),
                               helper.make_node("Add", ["product", "bias"], ["output"])],
                              "matmul_bias", [x], [y], inits)
    save(graph, "matmul_bias.onnx")


def main():
    add_fp32()
    matmul_bias()
    custom_negate()
    for suffix, elem_type in IDENTITY_TYPES.items():
        identity(suffix, elem_type)
    float8_input()
    slow_loop()
    with open(os.path.join(OUT_DIR, "corrupt.onnx"), "wb") as f:
        f.write(b"this is not an onnx protobuf\x00\xff\x13")


if __name__ == "__main__":
    main()
