#!/usr/bin/env python3
"""Writes a model repository equivalent to Triton's quick-start example
repository (docs/examples/model_repository of triton-inference-server/server,
its ONNX models), made here with onnx.helper, so that the tests which serve
"Triton's examples" need nothing outside this checkout.

Each model keeps the name, tensors, data types, shapes and config of Triton's,
and computes what Triton's ONNX file computes with the same operators:
  simple                INT32 INPUT0, INPUT1 [16] -> OUTPUT0 = sum, OUTPUT1 =
                        difference; max_batch_size 8
  simple_int8           the same in INT8 (computed in INT32, cast back: a sum
                        out of range wraps as Triton's does)
  simple_string         the same with numbers carried as decimal strings
                        (TYPE_STRING / BYTES): Cast to INT32, add and subtract,
                        Cast back to strings
  simple_sequence       sequence batcher (direct), controls START and READY:
                        OUTPUT = READY * (INPUT + START)
  simple_dyna_sequence  sequence batcher (oldest, two instances), controls
                        START, END, READY and CORRID (UINT64):
                        OUTPUT = READY * (INPUT + START + END * CORRID)
The two sequence models are stateless, as Triton's ONNX ones are: Triton's
example clients expect 1 for a sequence's first request (0 + START), then each
value as sent, and the correlation id added to the last answer of a dynamic
sequence (tritonclient's simple_*_sequence_*_client.py).

The models are built from fixed definitions, so re-running the script writes
the same bytes; tests/data/triton-examples is its committed output for the C++
unit tests (test_models_offline.py checks the two agree).

Usage: scripts/make_triton_examples.py OUT_DIR
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# The shared builders: opset and IR version, the checker, the layout on disk, one run in onnxruntime.
from make_demo_models import make_model, smoke_run, write_model  # noqa: E402

MODELS = ["simple", "simple_int8", "simple_string", "simple_sequence", "simple_dyna_sequence"]

BATCH = None  # the batch dimension: dynamic, as max_batch_size 8 asks


def add_sub(name: str, elem: int) -> onnx.ModelProto:
    """INPUT0 + INPUT1 and INPUT0 - INPUT1 over [batch, 16], computed in INT32."""
    io = [(n, elem, [BATCH, 16]) for n in ("INPUT0", "INPUT1")]
    outs = [(n, elem, [BATCH, 16]) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [helper.make_node("Cast", ["INPUT0"], ["a"], to=TensorProto.INT32),
             helper.make_node("Cast", ["INPUT1"], ["b"], to=TensorProto.INT32),
             helper.make_node("Add", ["a", "b"], ["sum"]),
             helper.make_node("Sub", ["a", "b"], ["difference"]),
             helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=elem),
             helper.make_node("Cast", ["difference"], ["OUTPUT1"], to=elem)]
    return make_model(nodes, io, outs, name=name)


def sequence(name: str, dyna: bool) -> onnx.ModelProto:
    """READY * (INPUT + START [+ END * CORRID]) over [batch, 1]."""
    controls = ["START", "END", "READY"] if dyna else ["START", "READY"]
    inputs = [("INPUT", TensorProto.INT32, [BATCH, 1])] + [(c, TensorProto.INT32, [BATCH, 1]) for c in controls]
    nodes = [helper.make_node("Add", ["INPUT", "START"], ["started"])]
    total = "started"
    if dyna:
        inputs.append(("CORRID", TensorProto.UINT64, [BATCH, 1]))
        nodes += [helper.make_node("Cast", ["CORRID"], ["corrid"], to=TensorProto.INT32),
                  helper.make_node("Mul", ["END", "corrid"], ["corrid_at_end"]),
                  helper.make_node("Add", ["started", "corrid_at_end"], ["ended"])]
        total = "ended"
    nodes.append(helper.make_node("Mul", ["READY", total], ["OUTPUT"]))
    return make_model(nodes, inputs, [("OUTPUT", TensorProto.INT32, [BATCH, 1])], name=name)


def add_sub_config(name: str, data_type: str) -> str:
    tensors = lambda names: ",\n".join(
        f'  {{ name: "{n}" data_type: {data_type} dims: [ 16 ] }}' for n in names)
    return (f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
            f'input [\n{tensors(["INPUT0", "INPUT1"])}\n]\n'
            f'output [\n{tensors(["OUTPUT0", "OUTPUT1"])}\n]\n')


def control(name: str, kind: str) -> str:
    if kind == "CONTROL_SEQUENCE_CORRID":
        setting = "data_type: TYPE_UINT64"
    else:
        setting = "int32_false_true: [ 0, 1 ]"
    return f'    {{ name: "{name}" control [ {{ kind: {kind} {setting} }} ] }}'


SEQUENCE_IO = ('input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
               'output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n')


def sequence_config(name: str, dyna: bool) -> str:
    if dyna:
        controls = [("START", "CONTROL_SEQUENCE_START"), ("END", "CONTROL_SEQUENCE_END"),
                    ("READY", "CONTROL_SEQUENCE_READY"), ("CORRID", "CONTROL_SEQUENCE_CORRID")]
        # Triton's oldest strategy, an idle timeout of 10 s, two instances.
        strategy = ("  max_sequence_idle_microseconds: 10000000\n"
                    "  oldest { max_candidate_sequences: 1024 max_queue_delay_microseconds: 10000 }\n")
        # execute_delay_ms is read by Triton's custom sequence backend; an ONNX
        # model ignores it (kept so that the config is Triton's).
        extra = ('parameters [ { key: "execute_delay_ms" value: { string_value: "3" } } ]\n'
                 'instance_group [ { count: 2 kind: KIND_CPU } ]\n')
    else:
        controls = [("START", "CONTROL_SEQUENCE_START"), ("READY", "CONTROL_SEQUENCE_READY")]
        strategy = ""
        extra = 'instance_group [ { kind: KIND_CPU } ]\n'
    control_inputs = ",\n".join(control(n, k) for n, k in controls)
    return (f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
            f'sequence_batching {{\n{strategy}  control_input [\n{control_inputs}\n  ]\n}}\n'
            f'{SEQUENCE_IO}{extra}')


def build(name: str) -> tuple[onnx.ModelProto, str]:
    if name in ("simple", "simple_int8", "simple_string"):
        elem, data_type = {"simple": (TensorProto.INT32, "TYPE_INT32"),
                           "simple_int8": (TensorProto.INT8, "TYPE_INT8"),
                           "simple_string": (TensorProto.STRING, "TYPE_STRING")}[name]
        return add_sub(name, elem), add_sub_config(name, data_type)
    dyna = name == "simple_dyna_sequence"
    return sequence(name, dyna), sequence_config(name, dyna)


def check_arithmetic(name: str, model: onnx.ModelProto) -> None:
    """One run in onnxruntime with the example clients' numbers: the model
    computes what the module docstring says."""
    column = lambda v: np.array([[v]], dtype=np.int32)
    if name == "simple_sequence":
        got = smoke_run(model, {"INPUT": column(5), "START": column(1), "READY": column(1)})
        assert got[0].tolist() == [[6]], (name, got)
        return
    if name == "simple_dyna_sequence":
        got = smoke_run(model, {"INPUT": column(5), "START": column(0), "END": column(1), "READY": column(1),
                                "CORRID": np.array([[1000]], dtype=np.uint64)})
        assert got[0].tolist() == [[1005]], (name, got)
        return
    a, b = np.arange(16, dtype=np.int32).reshape(1, 16), np.ones((1, 16), dtype=np.int32)
    if name == "simple_string":
        as_text = lambda x: x.astype(str).astype(object)
        got = smoke_run(model, {"INPUT0": as_text(a), "INPUT1": as_text(b)})
        got = [g.astype(np.int32) for g in got]
    else:
        dtype = np.int8 if name == "simple_int8" else np.int32
        got = smoke_run(model, {"INPUT0": a.astype(dtype), "INPUT1": b.astype(dtype)})
    assert got[0].tolist() == (a + b).tolist() and got[1].tolist() == (a - b).tolist(), (name, got)


def build_triton_examples(out_dir: pathlib.Path) -> pathlib.Path:
    """Writes <out_dir>/<model>/config.pbtxt and <model>/1/model.onnx for the
    five models; returns out_dir."""
    out_dir = pathlib.Path(out_dir)
    for name in MODELS:
        model, config = build(name)
        check_arithmetic(name, model)
        write_model(out_dir, name, model, config)
    return out_dir


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = build_triton_examples(pathlib.Path(argv[1]))
    print(f"[make_triton_examples] {', '.join(MODELS)} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
