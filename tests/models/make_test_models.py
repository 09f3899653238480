#!/usr/bin/env python3
"""Generates the integration-test model repository (nothing binary is committed).

tests/integration/conftest.py calls build_test_repository() into a pytest tmp
dir once per session; run it by hand to inspect the repository:

    .venv/bin/python tests/models/make_test_models.py /tmp/test_models

Models that must load and serve:
  identity_<dt>       INPUT0 -> OUTPUT0 (Identity) for every KServe datatype
                      ORT CPU runs Identity on: BOOL UINT8 UINT16 UINT32 UINT64
                      INT8 INT16 INT32 INT64 FP16 FP32 FP64 BF16 BYTES.
                      max_batch_size 8, dims [ -1 ] (variable length).
  identity_3d_fp32    max_batch_size 0, dims [ -1, -1, -1 ] (shape-overflow tests).
  add_sub_<dt>        INPUT0, INPUT1 [16] -> OUTPUT0 = a+b, OUTPUT1 = a-b for
                      INT32 INT64 FP16 FP32 FP64 (the ORT CPU Add/Sub types);
                      max_batch_size 8; two outputs for requested-output subsets.
  reshape_transpose   config reshape: client sends/gets [16], the model sees
                      [4,4] and transposes it.
  versioned_add       versions 1, 2, 3 on disk (version k adds k);
                      version_policy latest { num_versions: 2 } -> 2 and 3 serve.
  autocomplete_linear no config.pbtxt; dynamic first dim -> batchable.
  mlp_batching        mlp_classifier with max_batch_size 64,
                      max_queue_delay_microseconds 50000 and Triton's fixed
                      window (batch_window "fixed"): batching certain.
  mlp_adaptive        the same with a 60 s window and the adaptive window
                      (batch_window "adaptive", opt-in): a request nobody
                      else joins must not wait it.
  slow                x[-1,16] -> 256 chained 256x256 MatMul+Tanh -> [-1,4]
                      (~100 ms on one thread), 1 instance, queue policy with
                      allow_timeout_override (request "timeout" parameter).
  slow_queue2         the same ONNX with max_batch_size 1 and
                      default_queue_policy { max_queue_size: 2 } (overload).
  unsupported_field   identity with an instance_group rate_limiter: either
                      served with a log line naming the field, or UNAVAILABLE
                      with a reason naming it; never silently ignored.

Models that must fail to load (UNAVAILABLE with a reason):
  corrupt_model       model.onnx is garbage bytes.
  malformed_config    config.pbtxt has a syntax error (reason has line:column).
  bad_input_name      config names input "NOPE" that the ONNX file lacks.
  no_version          config.pbtxt but no numeric version directory.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
from onnx import TensorProto, helper

_REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_REPO_ROOT / "scripts"))
import make_demo_models as demo  # noqa: E402  (shared builders)

# KServe datatype -> (ONNX elem type, config TYPE_ name)
DATATYPES = {
    "BOOL": (TensorProto.BOOL, "TYPE_BOOL"),
    "UINT8": (TensorProto.UINT8, "TYPE_UINT8"),
    "UINT16": (TensorProto.UINT16, "TYPE_UINT16"),
    "UINT32": (TensorProto.UINT32, "TYPE_UINT32"),
    "UINT64": (TensorProto.UINT64, "TYPE_UINT64"),
    "INT8": (TensorProto.INT8, "TYPE_INT8"),
    "INT16": (TensorProto.INT16, "TYPE_INT16"),
    "INT32": (TensorProto.INT32, "TYPE_INT32"),
    "INT64": (TensorProto.INT64, "TYPE_INT64"),
    "FP16": (TensorProto.FLOAT16, "TYPE_FP16"),
    "FP32": (TensorProto.FLOAT, "TYPE_FP32"),
    "FP64": (TensorProto.DOUBLE, "TYPE_FP64"),
    "BF16": (TensorProto.BFLOAT16, "TYPE_BF16"),
    "BYTES": (TensorProto.STRING, "TYPE_STRING"),
}
ADD_SUB_DATATYPES = ["INT32", "INT64", "FP16", "FP32", "FP64"]

MODELS_THAT_FAIL = ["corrupt_model", "malformed_config", "bad_input_name", "no_version"]
# Models whose config names them READY once loading settles (unsupported_field
# is judged separately: it may legitimately be refused).
MODELS_THAT_SERVE = (
    [f"identity_{dt.lower()}" for dt in DATATYPES]
    + ["identity_3d_fp32"]
    + [f"add_sub_{dt.lower()}" for dt in ADD_SUB_DATATYPES]
    + ["reshape_transpose", "versioned_add", "autocomplete_linear", "mlp_batching",
       "slow", "slow_queue2"]
)

SLOW_DEPTH = 256
SLOW_WIDTH = 256


def io_block(kind: str, name: str, type_name: str, dims, extra: str = "") -> str:
    dims_text = ", ".join(str(d) for d in dims)
    return f'{kind} [ {{ name: "{name}" data_type: {type_name} dims: [ {dims_text} ] {extra}}} ]'


def identity_config(name: str, dt: str, max_batch_size: int, dims, extra: str = "") -> str:
    type_name = DATATYPES[dt][1]
    return f"""
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
{io_block("input", "INPUT0", type_name, dims)}
{io_block("output", "OUTPUT0", type_name, dims)}
{extra}
"""


def build_identity(dt: str, rank: int) -> "demo.onnx.ModelProto":
    elem = DATATYPES[dt][0]
    shape = [f"d{i}" for i in range(rank)]
    return demo.make_model([helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
                           [("INPUT0", elem, shape)], [("OUTPUT0", elem, shape)],
                           name=f"identity_{dt.lower()}")


def build_add_sub(dt: str):
    elem = DATATYPES[dt][0]
    shape = ["batch", 16]
    return demo.make_model(
        [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
         helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
        [("INPUT0", elem, shape), ("INPUT1", elem, shape)],
        [("OUTPUT0", elem, shape), ("OUTPUT1", elem, shape)], name=f"add_sub_{dt.lower()}")


def add_sub_config(name: str, dt: str) -> str:
    t = DATATYPES[dt][1]
    return f"""
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {{ name: "INPUT0" data_type: {t} dims: [ 16 ] }},
  {{ name: "INPUT1" data_type: {t} dims: [ 16 ] }}
]
output [
  {{ name: "OUTPUT0" data_type: {t} dims: [ 16 ] }},
  {{ name: "OUTPUT1" data_type: {t} dims: [ 16 ] }}
]
"""


def build_reshape_transpose():
    return demo.make_model([helper.make_node("Transpose", ["INPUT0"], ["OUTPUT0"], perm=[0, 2, 1])],
                           [("INPUT0", TensorProto.FLOAT, ["batch", 4, 4])],
                           [("OUTPUT0", TensorProto.FLOAT, ["batch", 4, 4])],
                           name="reshape_transpose")


RESHAPE_CONFIG = """
name: "reshape_transpose"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] reshape: { shape: [ 4, 4 ] } } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] reshape: { shape: [ 4, 4 ] } } ]
"""


def build_add_constant(k: float):
    return demo.make_model([helper.make_node("Add", ["INPUT0", "k"], ["OUTPUT0"])],
                           [("INPUT0", TensorProto.FLOAT, ["batch", 4])],
                           [("OUTPUT0", TensorProto.FLOAT, ["batch", 4])],
                           [demo.const("k", np.array(k, np.float32))], name=f"add_{k:g}")


VERSIONED_CONFIG = """
name: "versioned_add"
platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy: { latest: { num_versions: 2 } }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def build_slow(seed: int = 3, depth: int = SLOW_DEPTH, width: int = SLOW_WIDTH):
    """x[-1,16] -> broadcast to [-1,W,W] -> DEPTH x (MatMul W x W, Tanh) -> mean -> [-1,4]."""
    SLOW_DEPTH, SLOW_WIDTH = depth, width  # noqa: N806  (local override of the defaults)
    rng = np.random.default_rng(seed)
    w_in = (rng.standard_normal((16, SLOW_WIDTH)) / 4).astype(np.float32)
    spread = rng.standard_normal((SLOW_WIDTH, SLOW_WIDTH)).astype(np.float32)
    w = (rng.standard_normal((SLOW_WIDTH, SLOW_WIDTH)) / np.sqrt(SLOW_WIDTH)).astype(np.float32)
    w_out = (rng.standard_normal((SLOW_WIDTH, 4)) / 16).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w_in"], ["h"]),
             helper.make_node("Unsqueeze", ["h", "axis1"], ["h3"]),
             helper.make_node("Mul", ["h3", "spread"], ["s0"])]
    for i in range(SLOW_DEPTH):
        nodes += [helper.make_node("MatMul", [f"s{i}", "w"], [f"m{i}"]),
                  helper.make_node("Tanh", [f"m{i}"], [f"s{i + 1}"])]
    nodes += [helper.make_node("ReduceMean", [f"s{SLOW_DEPTH}", "axis1"], ["r"], keepdims=0),
              helper.make_node("MatMul", ["r", "w_out"], ["y"])]
    return demo.make_model(
        nodes, [("x", TensorProto.FLOAT, ["batch", 16])], [("y", TensorProto.FLOAT, ["batch", 4])],
        [demo.const("w_in", w_in), demo.const("spread", spread), demo.const("w", w),
         demo.const("w_out", w_out), demo.const("axis1", np.array([1], np.int64))],
        name="slow", opset=18)


def slow_config(name: str, max_batch_size: int, queue_policy: str) -> str:
    return f"""
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }} ]
dynamic_batching {{
  default_queue_policy {{ {queue_policy} }}
}}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters {{ key: "intra_op_thread_count" value: {{ string_value: "1" }} }}
parameters {{ key: "inter_op_thread_count" value: {{ string_value: "1" }} }}
"""


MALFORMED_CONFIG = """name: "malformed_config"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { count: one } ]
"""


def _builders() -> dict:
    """name -> zero-arg callable writing that model into a repository dir."""
    b = {}

    def add(name, fn):
        b[name] = fn

    for dt in DATATYPES:
        name = f"identity_{dt.lower()}"
        add(name, lambda repo, dt=dt, name=name: demo.write_model(
            repo, name, build_identity(dt, 2), identity_config(name, dt, 8, [-1])))
    add("identity_3d_fp32", lambda repo: demo.write_model(
        repo, "identity_3d_fp32", build_identity("FP32", 3),
        identity_config("identity_3d_fp32", "FP32", 0, [-1, -1, -1])))
    for dt in ADD_SUB_DATATYPES:
        name = f"add_sub_{dt.lower()}"
        add(name, lambda repo, dt=dt, name=name: demo.write_model(
            repo, name, build_add_sub(dt), add_sub_config(name, dt)))
    add("reshape_transpose", lambda repo: demo.write_model(
        repo, "reshape_transpose", build_reshape_transpose(), RESHAPE_CONFIG))

    def versioned(repo):
        d = demo.write_model(repo, "versioned_add", None, VERSIONED_CONFIG)
        for v in (1, 2, 3):
            (d / str(v)).mkdir(exist_ok=True)
            (d / str(v) / "model.onnx").write_bytes(build_add_constant(float(v)).SerializeToString())
    add("versioned_add", versioned)
    add("autocomplete_linear", lambda repo: demo.write_model(
        repo, "autocomplete_linear", demo.build_linear(), None))
    add("mlp_batching", lambda repo: demo.write_model(
        repo, "mlp_batching", demo.build_mlp_classifier(), demo.mlp_classifier_config(
            "mlp_batching", 64, "dynamic_batching { max_queue_delay_microseconds: 50000 }\n"
            'parameters { key: "batch_window" value: { string_value: "fixed" } }')))
    add("mlp_adaptive", lambda repo: demo.write_model(
        repo, "mlp_adaptive", demo.build_mlp_classifier(), demo.mlp_classifier_config(
            "mlp_adaptive", 64, "dynamic_batching { max_queue_delay_microseconds: 60000000 }\n"
            'parameters { key: "batch_window" value: { string_value: "adaptive" } }')))

    def slow_models(repo):
        model = build_slow().SerializeToString()
        demo.write_model(repo, "slow", model, slow_config(
            "slow", 4, "timeout_action: REJECT allow_timeout_override: true"))
    add("slow", slow_models)
    add("slow_queue2", lambda repo: demo.write_model(
        repo, "slow_queue2", build_slow().SerializeToString(),
        slow_config("slow_queue2", 1, "max_queue_size: 2")))
    add("unsupported_field", lambda repo: demo.write_model(
        repo, "unsupported_field", build_identity("FP32", 2),
        identity_config("unsupported_field", "FP32", 8, [-1],
                        'instance_group [ { count: 1 kind: KIND_CPU rate_limiter { priority: 1 } } ]')))

    # ---- models that must fail to load
    add("corrupt_model", lambda repo: demo.write_model(
        repo, "corrupt_model",
        bytes(np.random.default_rng(4).integers(0, 256, 4096, dtype=np.uint8)),
        identity_config("corrupt_model", "FP32", 8, [-1])))
    add("malformed_config", lambda repo: demo.write_model(
        repo, "malformed_config", build_identity("FP32", 2), MALFORMED_CONFIG))

    def bad_input_name(repo):
        cfg = identity_config("bad_input_name", "FP32", 8, [-1]).replace(
            'input [ { name: "INPUT0"', 'input [ { name: "NOPE"')
        demo.write_model(repo, "bad_input_name", build_identity("FP32", 2), cfg)
    add("bad_input_name", bad_input_name)
    add("no_version", lambda repo: demo.write_model(
        repo, "no_version", None, identity_config("no_version", "FP32", 8, [-1])))
    return b


def build_fallback_small(seed: int = 5):
    """x[-1,16] -> x @ W(16x4) = y[-1,4]: fast, and compatible with slow's inputs/outputs."""
    w = (np.random.default_rng(seed).standard_normal((16, 4)) / 4).astype(np.float32)
    return demo.make_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [("x", TensorProto.FLOAT, ["batch", 16])], [("y", TensorProto.FLOAT, ["batch", 4])],
        [demo.const("w", w)], name="fallback_small", opset=18)


def build_gather_fault():
    """INDEX[1] (INT64) -> Gather(table[8] = 0, 10, ..., 70) -> VALUE[1]: an
    index outside -8..7 makes ORT's run fail, for that request only."""
    table = (np.arange(8) * 10).astype(np.float32)
    return demo.make_model([helper.make_node("Gather", ["table", "INDEX"], ["VALUE"], axis=0)],
                           [("INDEX", TensorProto.INT64, [1])], [("VALUE", TensorProto.FLOAT, [1])],
                           [demo.const("table", table)], name="gather_fault")


def build_expand_1mib():
    """X[1] -> Expand to Y[262144]: one float in, 1 MiB out (answers far
    larger than their requests)."""
    return demo.make_model([helper.make_node("Expand", ["X", "shape"], ["Y"])],
                           [("X", TensorProto.FLOAT, [1])], [("Y", TensorProto.FLOAT, [EXPAND_ELEMENTS])],
                           [demo.const("shape", np.array([EXPAND_ELEMENTS], dtype=np.int64))],
                           name="expand_1mib")


EXPAND_ELEMENTS = 1 << 18


def one_instance_config(name: str, max_batch_size: int, inp: tuple, out: tuple) -> str:
    """A config with one input and one output ((name, type, dims) each) and
    one CPU instance."""
    return f"""
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
{io_block("input", *inp)}
{io_block("output", *out)}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


def _extra_builders() -> dict:
    """Models for per-test servers only (build_test_repository(repo, [names])):
    never in the full test repository, whose startup they would slow down.

      very_slow         slow's graph at width 640 (~15x the work: a second or
                        more per run), max_batch_size 1, REJECT on timeout with
                        allow_timeout_override: a run that is terminated is
                        told apart from one that completes by its outcome.
      fallback_small    x[-1,16] -> MatMul -> y[-1,4] (fast), max_batch_size 8.
      fallback_primary  slow_queue2's setup (slow graph, max_batch_size 1,
                        queue of 2) with parameter fallback_model "fallback_small".
      gather_fault      INDEX[1] -> table lookup -> VALUE[1], max_batch_size 0:
                        an out-of-range index fails its run inside ORT.
      expand_1mib       X[1] -> Expand -> Y[262144] FP32, max_batch_size 0:
                        4 bytes in, 1 MiB out.
    """
    b = {}
    b["very_slow"] = lambda repo: demo.write_model(
        repo, "very_slow", build_slow(depth=SLOW_DEPTH, width=640).SerializeToString(),
        slow_config("very_slow", 1, "timeout_action: REJECT allow_timeout_override: true"))
    b["fallback_small"] = lambda repo: demo.write_model(
        repo, "fallback_small", build_fallback_small().SerializeToString(),
        one_instance_config("fallback_small", 8, ("x", "TYPE_FP32", [16]), ("y", "TYPE_FP32", [4])))
    b["fallback_primary"] = lambda repo: demo.write_model(
        repo, "fallback_primary", build_slow().SerializeToString(),
        slow_config("fallback_primary", 1, "max_queue_size: 2")
        + 'parameters { key: "fallback_model" value: { string_value: "fallback_small" } }\n')
    b["gather_fault"] = lambda repo: demo.write_model(
        repo, "gather_fault", build_gather_fault(),
        one_instance_config("gather_fault", 0, ("INDEX", "TYPE_INT64", [1]), ("VALUE", "TYPE_FP32", [1])))
    b["expand_1mib"] = lambda repo: demo.write_model(
        repo, "expand_1mib", build_expand_1mib(),
        one_instance_config("expand_1mib", 0, ("X", "TYPE_FP32", [1]), ("Y", "TYPE_FP32", [EXPAND_ELEMENTS])))
    return b


def model_names() -> list[str]:
    return list(_builders())


def build_test_repository(repo: pathlib.Path, only: list[str] | None = None) -> pathlib.Path:
    """Writes all test models (or just `only`, which may also name the extra
    per-test models) into `repo`; returns repo."""
    repo.mkdir(parents=True, exist_ok=True)
    builders = _builders()
    extra = _extra_builders()
    for name in (only if only is not None else builders):
        (builders.get(name) or extra[name])(repo)
    return repo


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    repo = build_test_repository(pathlib.Path(argv[1]), argv[2:] or None)
    for d in sorted(p for p in repo.iterdir() if p.is_dir()):
        print(d.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
