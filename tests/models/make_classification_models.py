#!/usr/bin/env python3
"""Generates the repository of Triton's classification extension tests
(tests/integration/test_classification.py) and of Triton's image examples
(image_client.py, grpc_image_client.py); nothing binary is committed.

    .venv/bin/python tests/models/make_classification_models.py /tmp/classify_models

Models that serve:
  image_classifier        input FP32 [3,32,32] (config format FORMAT_NCHW, what
                          image_client.py reads to lay out the pixels),
                          max_batch_size 8: Conv(3->8, s2) Relu Conv(8->16, s2)
                          Relu GlobalAveragePool Gemm(16->10) Softmax ->
                          probabilities FP32 [10], label_filename labels.txt
                          (CIFAR-10's class names, one per line).
  image_classifier_plain  the same network without batching (input [3,32,32],
                          probabilities [10]) and without a labels file.
  identity_<dt>           INPUT0 -> OUTPUT0 [-1], max_batch_size 8, for the
                          datatypes classification accepts (INT32, UINT8) and
                          refuses (BOOL, FP16, BYTES).
Models that must fail to load:
  missing_labels          image_classifier whose label_filename names a file
                          that is not there (only when asked for by name).
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_test_models as tm  # noqa: E402  (identity builders, shared helpers)

demo = tm.demo

IMAGE_SIZE = 32
LABELS = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
CLASSES = len(LABELS)
IDENTITY_DATATYPES = ["INT32", "UINT8", "BOOL", "FP16", "BYTES"]

MODELS_THAT_SERVE = ["image_classifier", "image_classifier_plain"] + [
    f"identity_{dt.lower()}" for dt in IDENTITY_DATATYPES]


def _weights(seed: int):
    rng = np.random.default_rng(seed)
    # Pixels arrive unscaled (0..255) or scaled to about -1..1; the first
    # layer's small weights keep the logits apart in both cases.
    return [
        demo.const("conv1_w", (rng.standard_normal((8, 3, 3, 3)) / 300).astype(np.float32)),
        demo.const("conv1_b", (rng.standard_normal(8) / 10).astype(np.float32)),
        demo.const("conv2_w", (rng.standard_normal((16, 8, 3, 3)) / 8).astype(np.float32)),
        demo.const("conv2_b", (rng.standard_normal(16) / 10).astype(np.float32)),
        demo.const("fc_w", rng.standard_normal((16, CLASSES)).astype(np.float32)),
        demo.const("fc_b", (rng.standard_normal(CLASSES) / 10).astype(np.float32)),
    ]


def build_image_classifier(batched: bool, seed: int = 11):
    """[batch,3,32,32] -> [batch,10] probabilities; without batching the
    graph reshapes [3,32,32] to one image and its answer back to [10]."""
    side = IMAGE_SIZE
    nodes, inits = [], _weights(seed)
    first = "input"
    if not batched:
        inits.append(demo.const("one_image", np.array([1, 3, side, side], dtype=np.int64)))
        nodes.append(helper.make_node("Reshape", ["input", "one_image"], ["image"]))
        first = "image"
    nodes += [
        helper.make_node("Conv", [first, "conv1_w", "conv1_b"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "conv2_w", "conv2_b"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["features"], axis=1),
        helper.make_node("Gemm", ["features", "fc_w", "fc_b"], ["logits"]),
    ]
    if batched:
        nodes.append(helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1))
        inputs = [("input", TensorProto.FLOAT, ["batch", 3, side, side])]
        outputs = [("probabilities", TensorProto.FLOAT, ["batch", CLASSES])]
    else:
        inits.append(demo.const("classes", np.array([CLASSES], dtype=np.int64)))
        nodes += [helper.make_node("Softmax", ["logits"], ["softmax"], axis=-1),
                  helper.make_node("Reshape", ["softmax", "classes"], ["probabilities"])]
        inputs = [("input", TensorProto.FLOAT, [3, side, side])]
        outputs = [("probabilities", TensorProto.FLOAT, [CLASSES])]
    return demo.make_model(nodes, inputs, outputs, inits, name="image_classifier")


def image_config(name: str, max_batch_size: int, label_filename: str | None) -> str:
    labels = f'label_filename: "{label_filename}" ' if label_filename else ""
    return f"""
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
input [ {{ name: "input" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, {IMAGE_SIZE}, {IMAGE_SIZE} ] }} ]
output [ {{ name: "probabilities" data_type: TYPE_FP32 dims: [ {CLASSES} ] {labels}}} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


def _builders() -> dict:
    b = {}

    def labelled(repo):
        d = demo.write_model(repo, "image_classifier", build_image_classifier(True),
                             image_config("image_classifier", 8, "labels.txt"))
        (d / "labels.txt").write_text("\n".join(LABELS) + "\n")
    b["image_classifier"] = labelled
    b["image_classifier_plain"] = lambda repo: demo.write_model(
        repo, "image_classifier_plain", build_image_classifier(False),
        image_config("image_classifier_plain", 0, None))
    for dt in IDENTITY_DATATYPES:
        name = f"identity_{dt.lower()}"
        b[name] = lambda repo, dt=dt, name=name: demo.write_model(
            repo, name, tm.build_identity(dt, 2), tm.identity_config(name, dt, 8, [-1]))
    return b


def _failing_builders() -> dict:
    return {"missing_labels": lambda repo: demo.write_model(
        repo, "missing_labels", build_image_classifier(True),
        image_config("missing_labels", 8, "no_such_labels.txt"))}


def build_classification_repository(repo: pathlib.Path, only: list[str] | None = None) -> pathlib.Path:
    """Writes the serving models (or just `only`, which may also name
    missing_labels) into `repo`; returns repo."""
    repo.mkdir(parents=True, exist_ok=True)
    builders = {**_builders(), **_failing_builders()}
    for name in (only if only is not None else list(_builders())):
        builders[name](repo)
    return repo


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    repo = build_classification_repository(pathlib.Path(argv[1]), argv[2:] or None)
    for d in sorted(p for p in repo.iterdir() if p.is_dir()):
        print(d.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
