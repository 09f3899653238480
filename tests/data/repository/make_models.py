#!/usr/bin/env python3
"""Makes the tiny ONNX models used by the repository unit tests.

Run from anywhere: writes next to this script. The outputs are committed so the
C++ tests need no Python.
  add_sub.onnx   INPUT0, INPUT1 float32 [N,4] -> OUTPUT0 = a+b, OUTPUT1 = a-b   (batchable)
  fixed.onnx     X float32 [2,3] -> Y = X+X                                      (fixed shape)
  vector.onnx    V int64 [N] -> W = V+V                                          (batch-only shape)
  accumulator.onnx  INPUT, STATE_IN float32 [N,1] -> OUTPUT = INPUT + STATE_IN, STATE_OUT = OUTPUT
                 (implicit state: the sequence batcher feeds STATE_OUT back as STATE_IN)
"""
import os

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = [helper.make_opsetid("", 17)]


def save(graph, name):
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="ortserve-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name))


def add_sub():
    a = helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", 4])
    b = helper.make_tensor_value_info("INPUT1", TensorProto.FLOAT, ["N", 4])
    s = helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", 4])
    d = helper.make_tensor_value_info("OUTPUT1", TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
             helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])]
    save(helper.make_graph(nodes, "add_sub", [a, b], [s, d]), "add_sub.onnx")


def fixed():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])
    save(helper.make_graph([helper.make_node("Add", ["X", "X"], ["Y"])], "fixed", [x], [y]),
         "fixed.onnx")


def vector():
    v = helper.make_tensor_value_info("V", TensorProto.INT64, ["N"])
    w = helper.make_tensor_value_info("W", TensorProto.INT64, ["N"])
    save(helper.make_graph([helper.make_node("Add", ["V", "V"], ["W"])], "vector", [v], [w]),
         "vector.onnx")


def accumulator():
    x = helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["N", 1])
    state_in = helper.make_tensor_value_info("STATE_IN", TensorProto.FLOAT, ["N", 1])
    y = helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, ["N", 1])
    state_out = helper.make_tensor_value_info("STATE_OUT", TensorProto.FLOAT, ["N", 1])
    nodes = [helper.make_node("Add", ["INPUT", "STATE_IN"], ["OUTPUT"]),
             helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"])]
    save(helper.make_graph(nodes, "accumulator", [x, state_in], [y, state_out]), "accumulator.onnx")


if __name__ == "__main__":
    add_sub()
    fixed()
    vector()
    accumulator()
