#!/usr/bin/env python3
"""Silero VAD, the stateful model of the sequence tests and benchmark.

The ONNX file comes from the PyPI package `silero-vad`, pinned and checked the
way scripts/setup.sh checks ONNX Runtime: the wheel's SHA-256 and then the
model file's. It is fetched once into a git-ignored cache
(ORTSERVE_MODEL_CACHE, default .cache/models/ at the repository root);
setup.sh's python step does it, and the tests and bench/sequence_bench.py
call fetch() again, which only re-checks the cached file.

    .venv/bin/python scripts/silero_vad.py fetch      # prints the model's path
    .venv/bin/python scripts/silero_vad.py repo DIR   # writes a model repository

The model (silero-vad 6.2.3, opset 16): inputs `input` FP32 [B, 576] (512 new
samples at 16 kHz after the last 64 of the previous chunk, the "context" the
package's OnnxWrapper prepends), `state` FP32 [2, B, 128], `sr` INT64 scalar;
outputs `output` FP32 [B, 1] (speech probability) and `stateN` FP32
[2, B, 128]. Served with implicit state (`stateN` fed back as `state`), a
client sends only `input` and `sr`.

Two model directories are written:
  silero_vad          the package's file unchanged; max_batch_size 0 (its
                      state's batch dimension is the second, which a batching
                      server cannot stack), direct strategy: one sequence per
                      execution, as Triton would serve this file.
  silero_vad_batched  a wrapper built here with the onnx helper API: `state`
                      and `stateN` batch-major [B, 2, 128] (a Transpose on each
                      side of the original graph) and `sr` a constant 16000, so
                      that max_batch_size > 0 and the oldest strategy can batch
                      sequences. Its outputs equal the original's, sequence by
                      sequence (tests/integration/test_sequence_vad.py checks
                      this against onnxruntime on the original file).
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

PACKAGE = "silero-vad"
VERSION = "6.2.3"
WHEEL = f"silero_vad-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8"
MEMBER = "silero_vad/data/silero_vad.onnx"
ONNX_SHA256 = "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"
# Licence of the model (MIT), kept beside it in the cache.
LICENSE_MEMBER = f"silero_vad-{VERSION}.dist-info/licenses/LICENSE"

SAMPLE_RATE = 16000
CHUNK = 512          # new samples per request at 16 kHz
CONTEXT = 64         # samples of the previous chunk prepended to each request
WINDOW = CHUNK + CONTEXT
STATE_SHAPE = (2, 128)  # per sequence; the file's state is [2, B, 128]


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("ORTSERVE_MODEL_CACHE", REPO_ROOT / ".cache" / "models"))


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(cache: pathlib.Path | None = None) -> pathlib.Path:
    """The checked silero_vad.onnx, downloaded (pip, PyPI) if not cached."""
    target_dir = (cache or cache_dir()) / f"silero-vad-{VERSION}"
    model = target_dir / "silero_vad.onnx"
    if model.is_file() and _sha256(model) == ONNX_SHA256:
        return model
    with tempfile.TemporaryDirectory() as tmp:
        # --no-deps: the package's own dependencies (torch, ...) are not needed
        # for its ONNX file.
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary", ":all:", f"{PACKAGE}=={VERSION}", "-d", tmp], check=True)
        wheel = pathlib.Path(tmp) / WHEEL
        if not wheel.is_file():
            raise RuntimeError(f"pip download did not produce {WHEEL}: {os.listdir(tmp)}")
        got = _sha256(wheel)
        if got != WHEEL_SHA256:
            raise RuntimeError(f"{WHEEL} integrity mismatch: expected sha256 {WHEEL_SHA256}, got {got}")
        target_dir.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            partial = model.with_suffix(".partial")
            partial.write_bytes(z.read(MEMBER))
            (target_dir / "LICENSE").write_bytes(z.read(LICENSE_MEMBER))
        got = _sha256(partial)
        if got != ONNX_SHA256:
            partial.unlink()
            raise RuntimeError(f"{MEMBER} integrity mismatch: expected sha256 {ONNX_SHA256}, got {got}")
        partial.replace(model)
    return model


# --------------------------------------------------------------------------
# The batch-major wrapper

def _rename_inputs(graph, old: str, new: str) -> None:
    """Every use of `old` as a node input, in `graph` and its subgraphs."""
    from onnx import AttributeProto
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                _rename_inputs(attr.g, old, new)
            elif attr.type == AttributeProto.GRAPHS:
                for g in attr.graphs:
                    _rename_inputs(g, old, new)


def build_batched(model_path: pathlib.Path):
    """The wrapper described in the module docstring, as an onnx.ModelProto."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(model_path))
    graph = model.graph
    # Inside: state [2, B, 128] as before, fed from the batch-major input.
    _rename_inputs(graph, "state", "state_2b")
    _rename_inputs(graph, "sr", "sr_const")
    for node in graph.node:
        for i, name in enumerate(node.output):
            if name == "stateN":
                node.output[i] = "stateN_2b"
    kept_inputs = [i for i in graph.input if i.name not in ("state", "sr")]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    graph.input.append(helper.make_tensor_value_info("state", TensorProto.FLOAT, ["batch", *STATE_SHAPE]))
    outputs = [o for o in graph.output if o.name != "stateN"]
    del graph.output[:]
    graph.output.extend(outputs)
    graph.output.append(helper.make_tensor_value_info("stateN", TensorProto.FLOAT, ["batch", *STATE_SHAPE]))
    head = [
        helper.make_node("Transpose", ["state"], ["state_2b"], perm=[1, 0, 2], name="state_to_2b"),
        helper.make_node("Constant", [], ["sr_const"], name="sr_16k",
                         value=helper.make_tensor("sr_value", TensorProto.INT64, [], [SAMPLE_RATE])),
    ]
    tail = [helper.make_node("Transpose", ["stateN_2b"], ["stateN"], perm=[1, 0, 2], name="stateN_to_b2")]
    nodes = head + list(graph.node) + tail
    del graph.node[:]
    graph.node.extend(nodes)
    model.producer_name = "ortserve scripts/silero_vad.py"
    onnx.checker.check_model(model)
    return model


# --------------------------------------------------------------------------
# Model repository

def _state_block(dims: list[int]) -> str:
    d = ", ".join(str(x) for x in dims)
    return f"""  state [
    {{
      input_name: "state"
      output_name: "stateN"
      data_type: TYPE_FP32
      dims: [ {d} ]
      initial_state: {{ data_type: TYPE_FP32 dims: [ {d} ] zero_data: true name: "zeros" }}
    }}
  ]"""


def unbatched_config(name: str = "silero_vad", idle_us: int = 60_000_000) -> str:
    return f"""name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 0
sequence_batching {{
  max_sequence_idle_microseconds: {idle_us}
  direct {{ }}
{_state_block([2, 1, 128])}
}}
input [
  {{ name: "input" data_type: TYPE_FP32 dims: [ 1, {WINDOW} ] }},
  {{ name: "sr" data_type: TYPE_INT64 dims: [ 1 ] reshape: {{ shape: [ ] }} }}
]
output [
  {{ name: "output" data_type: TYPE_FP32 dims: [ 1, 1 ] }}
]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


def batched_config(name: str = "silero_vad_batched", max_batch_size: int = 16,
                   candidates: int = 16, queue_delay_us: int = 2000, instances: int = 1,
                   idle_us: int = 60_000_000) -> str:
    return f"""name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
sequence_batching {{
  max_sequence_idle_microseconds: {idle_us}
  oldest {{
    max_candidate_sequences: {candidates}
    max_queue_delay_microseconds: {queue_delay_us}
  }}
{_state_block(list(STATE_SHAPE))}
}}
input [
  {{ name: "input" data_type: TYPE_FP32 dims: [ {WINDOW} ] }}
]
output [
  {{ name: "output" data_type: TYPE_FP32 dims: [ 1 ] }}
]
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
"""


def write_model(repo: pathlib.Path, name: str, model, config: str) -> pathlib.Path:
    """<repo>/<name>/config.pbtxt and 1/model.onnx (a path is copied)."""
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config)
    target = repo / name / "1" / "model.onnx"
    if isinstance(model, (str, pathlib.Path)):
        shutil.copyfile(model, target)
    else:
        target.write_bytes(model.SerializeToString())
    return target


def write_repository(repo: pathlib.Path, source: pathlib.Path | None = None) -> pathlib.Path:
    source = source or fetch()
    repo.mkdir(parents=True, exist_ok=True)
    write_model(repo, "silero_vad", source, unbatched_config())
    write_model(repo, "silero_vad_batched", build_batched(source), batched_config())
    return repo


# --------------------------------------------------------------------------
# Audio and the in-process reference

def synthetic_clip(seed: int, chunks: int) -> np.ndarray:
    """`chunks` * CHUNK samples of FP32 audio at 16 kHz: voiced-like bursts
    (a harmonic series on a gliding pitch, syllable-rate envelope) between
    stretches of low noise, different for every seed. No recording ships with
    the package, and a test must not depend on one."""
    rng = np.random.default_rng(seed)
    n = chunks * CHUNK
    t = np.arange(n) / SAMPLE_RATE
    f0 = rng.uniform(90, 240) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(0.3, 1.5) * t))
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    voiced = sum(np.sin(k * phase + rng.uniform(0, 2 * np.pi)) / k for k in range(1, 12))
    syllables = np.clip(np.sin(2 * np.pi * rng.uniform(2.5, 5.0) * t + rng.uniform(0, 6)), 0, None) ** 2
    gate = np.zeros(n)
    pos = 0
    while pos < n:  # alternating speech-like and silent stretches
        length = int(rng.uniform(0.2, 0.6) * SAMPLE_RATE)
        if rng.random() < 0.6:
            gate[pos:pos + length] = 1.0
        pos += length
    audio = 0.3 * voiced * syllables * gate + 0.01 * rng.standard_normal(n)
    return (audio / max(1e-6, np.abs(audio).max()) * 0.8).astype(np.float32)


def windows(clip: np.ndarray) -> np.ndarray:
    """[chunks, WINDOW]: each chunk after the previous chunk's last CONTEXT
    samples (zeros before the first), as silero_vad's OnnxWrapper feeds it."""
    chunks = clip.reshape(-1, CHUNK)
    context = np.zeros((len(chunks), CONTEXT), np.float32)
    context[1:] = chunks[:-1, -CONTEXT:]
    return np.concatenate([context, chunks], axis=1).astype(np.float32)


def reference_probabilities(session, chunk_windows: np.ndarray, thread_state: bool = True) -> np.ndarray:
    """onnxruntime on the package's file, one chunk per run, the state threaded
    by hand (or, thread_state=False, reset for every chunk)."""
    state = np.zeros((2, 1, 128), np.float32)
    sr = np.array(SAMPLE_RATE, np.int64)
    probabilities = []
    for window in chunk_windows:
        if not thread_state:
            state = np.zeros((2, 1, 128), np.float32)
        out, state = session.run(["output", "stateN"], {"input": window[None, :], "state": state, "sr": sr})
        probabilities.append(float(out[0, 0]))
    return np.array(probabilities, np.float32)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "fetch":
        print(fetch())
        return 0
    if len(argv) == 3 and argv[1] == "repo":
        print(write_repository(pathlib.Path(argv[2])))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
