#!/usr/bin/env python3
"""Generates the demo model repository in models/ (committed; re-run to refresh).

Every model is built with onnx.helper from fixed seeds, so re-running this
script reproduces the committed files byte for byte. Each model is checked with
onnx.checker and run once in onnxruntime (CPU) before it is written.

Models:
  mlp_classifier     FP32 features[-1,16] -> softmax probabilities[-1,4] and
                     argmax label INT64[-1,1]; max_batch_size 32, dynamic
                     batching with preferred sizes, one CPU instance.
  image_normalize    FP32 image[3,8,8] (0..255) -> per-channel normalized
                     [3,8,8]; max_batch_size 0 (no batch dimension).
  linear_autoconfig  FP32 x[-1,8] -> y[-1,2]; NO config.pbtxt: the server
                     must auto-complete it (dynamic first dim -> batchable).
  greeting           BYTES name[-1,-1] -> "Hello, " + name + "!" (StringConcat,
                     opset 20); max_batch_size 8, variable-length strings.

The builders are imported by tests/models/make_test_models.py as well.

Usage: scripts/make_demo_models.py [OUTPUT_DIR]   (default: <repo>/models)
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
PRODUCER = "ortserve/make_demo_models.py"

# ONNX opset / IR version pairs that ORT 1.20 (tests) and 1.29 (server) load.
DEFAULT_OPSET = 17
DEFAULT_IR = 8


def make_model(nodes, inputs, outputs, initializers=(), name="model",
               opset=DEFAULT_OPSET, ir_version=DEFAULT_IR) -> onnx.ModelProto:
    """Builds and checks a single-graph model from value-info tuples.

    inputs/outputs: sequences of (name, TensorProto elem type, shape list).
    """
    graph = helper.make_graph(
        list(nodes), name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(initializers))
    model = helper.make_model(graph, producer_name=PRODUCER,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    onnx.checker.check_model(model, full_check=True)
    return model


def const(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def write_model(repo: pathlib.Path, name: str, model: onnx.ModelProto | bytes | None,
                config: str | None, versions=(1,)) -> pathlib.Path:
    """Writes <repo>/<name>/config.pbtxt (if given) and <version>/model.onnx."""
    model_dir = repo / name
    model_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (model_dir / "config.pbtxt").write_text(config.strip() + "\n")
    if model is not None:
        data = model if isinstance(model, bytes) else model.SerializeToString()
        for v in versions:
            (model_dir / str(v)).mkdir(exist_ok=True)
            (model_dir / str(v) / "model.onnx").write_bytes(data)
    return model_dir


# --------------------------------------------------------------------------
# Builders (shared with tests/models/make_test_models.py)
# --------------------------------------------------------------------------

def build_mlp_classifier(seed: int = 1) -> onnx.ModelProto:
    """features[-1,16] -> Gemm(16x32) -> Relu -> Gemm(32x4) -> Softmax, ArgMax."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((16, 32)) / 4).astype(np.float32)
    b1 = (rng.standard_normal(32) / 10).astype(np.float32)
    w2 = (rng.standard_normal((32, 4)) / 4).astype(np.float32)
    b2 = (rng.standard_normal(4) / 10).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["features", "w1", "b1"], ["hidden_pre"]),
        helper.make_node("Relu", ["hidden_pre"], ["hidden"]),
        helper.make_node("Gemm", ["hidden", "w2", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=1),
    ]
    return make_model(
        nodes,
        [("features", TensorProto.FLOAT, ["batch", 16])],
        [("probabilities", TensorProto.FLOAT, ["batch", 4]),
         ("label", TensorProto.INT64, ["batch", 1])],
        [const("w1", w1), const("b1", b1), const("w2", w2), const("b2", b2)],
        name="mlp_classifier")


def mlp_classifier_config(name: str, max_batch_size: int, batching: str) -> str:
    return f"""
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
input [
  {{ name: "features" data_type: TYPE_FP32 dims: [ 16 ] }}
]
output [
  {{ name: "probabilities" data_type: TYPE_FP32 dims: [ 4 ] }},
  {{ name: "label" data_type: TYPE_INT64 dims: [ 1 ] }}
]
{batching}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


def build_image_normalize() -> onnx.ModelProto:
    """image[3,8,8] in 0..255 -> (image / 255 - mean[c]) / std[c]."""
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)
    nodes = [
        helper.make_node("Mul", ["image", "inv255"], ["scaled"]),
        helper.make_node("Sub", ["scaled", "mean"], ["centered"]),
        helper.make_node("Div", ["centered", "std"], ["normalized"]),
    ]
    return make_model(
        nodes,
        [("image", TensorProto.FLOAT, [3, 8, 8])],
        [("normalized", TensorProto.FLOAT, [3, 8, 8])],
        [const("inv255", np.array(1.0 / 255.0, np.float32)), const("mean", mean),
         const("std", std)],
        name="image_normalize")


IMAGE_NORMALIZE_CONFIG = """
name: "image_normalize"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [
  { name: "image" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] }
]
output [
  { name: "normalized" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def build_linear(seed: int = 2) -> onnx.ModelProto:
    """x[-1,8] -> x @ W(8x2) + b; no config, the server auto-completes it."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["y"])]
    return make_model(nodes, [("x", TensorProto.FLOAT, ["batch", 8])],
                      [("y", TensorProto.FLOAT, ["batch", 2])],
                      [const("w", w), const("b", b)], name="linear")


def build_greeting() -> onnx.ModelProto:
    """name (strings, any shape) -> "Hello, " + name + "!" (StringConcat, opset 20)."""
    nodes = [helper.make_node("StringConcat", ["prefix", "name"], ["prefixed"]),
             helper.make_node("StringConcat", ["prefixed", "suffix"], ["greeting"])]
    return make_model(
        nodes,
        [("name", TensorProto.STRING, ["batch", "n"])],
        [("greeting", TensorProto.STRING, ["batch", "n"])],
        [const("prefix", np.array("Hello, ", dtype=object)),
         const("suffix", np.array("!", dtype=object))],
        name="greeting", opset=20, ir_version=9)


GREETING_CONFIG = """
name: "greeting"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  { name: "name" data_type: TYPE_STRING dims: [ -1 ] }
]
output [
  { name: "greeting" data_type: TYPE_STRING dims: [ -1 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


# --------------------------------------------------------------------------

def smoke_run(model: onnx.ModelProto, feeds: dict) -> list:
    """Runs the model once in onnxruntime (CPU); raises if it does not run."""
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def build_demo_repository(repo: pathlib.Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)

    mlp = build_mlp_classifier()
    smoke_run(mlp, {"features": rng.standard_normal((3, 16)).astype(np.float32)})
    write_model(repo, "mlp_classifier", mlp, mlp_classifier_config(
        "mlp_classifier", 32,
        "dynamic_batching {\n  preferred_batch_size: [ 8, 16, 32 ]\n"
        "  max_queue_delay_microseconds: 500\n}"))

    image = build_image_normalize()
    smoke_run(image, {"image": rng.uniform(0, 255, (3, 8, 8)).astype(np.float32)})
    write_model(repo, "image_normalize", image, IMAGE_NORMALIZE_CONFIG)

    linear = build_linear()
    smoke_run(linear, {"x": rng.standard_normal((2, 8)).astype(np.float32)})
    write_model(repo, "linear_autoconfig", linear, None)

    greeting = build_greeting()
    out = smoke_run(greeting, {"name": np.array([["ada", "grace"]], dtype=object)})
    assert out[0].tolist() == [["Hello, ada!", "Hello, grace!"]], out
    write_model(repo, "greeting", greeting, GREETING_CONFIG)


def main(argv: list[str]) -> int:
    out = pathlib.Path(argv[1]) if len(argv) > 1 else REPO_ROOT / "models"
    build_demo_repository(out)
    for path in sorted(out.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size:8d}  {path.relative_to(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
