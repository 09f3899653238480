#!/usr/bin/env python3
"""The models, model configurations, requests and reference outputs of the
GPU bundle's checks (bench/gpu/gpu_checks.py), written on the build machine
so that the GPU host needs no ONNX tooling: scripts/gpu_bundle.py calls
write_check_data() for the bundle.

    .venv/bin/python bench/gpu/make_check_data.py DEST

Writes under DEST:
  models/cnn.onnx, mlp.onnx   the bench's CNN and MLP (bench/lib/make_bench_models.py)
  models/text_encoder.onnx    the bucket bench's encoder (bench/lib/bucket_models.py's defaults)
  requests/*.bin              binary-tensor request bodies (Triton's extension)
  requests/text/*.bin, text.list   the bucket bench's length mix, one request each
  reference/*.npz             onnxruntime CPU (FP32) outputs of those requests
  baseline/cnn_INPUT0.bin     the cnn request's tensor for ortserve_gpu_baseline
  checks/plan.json            what gpu_checks.py runs: the servers' model configs,
                              the requests, the tolerances and the steps
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
import benchlib  # noqa: E402,F401  (bench/lib/ on sys.path)
import bucket_models  # noqa: E402
import make_bench_models as bench_models  # noqa: E402

text = bucket_models.text

CORRECTNESS_BATCHES = (1, 4, 8)
# The default warm-up runs batch 1 and max_batch_size (8), so with CUDA
# graphs those two shapes take the cuda_graph_max_shapes (2) graphs: 1 and 8
# twice (captured graphs replay), then 4 (uncaptured), then 1 again.
CORRECTNESS_ORDER = (1, 8, 1, 8, 4, 1)
# |gpu - cpu| <= atol + rtol * |cpu|. FP32 without TF32: the MLP's matrix
# products as tests/integration/test_gpu.py checks them; the CNN looser, as
# cuDNN may choose Winograd or FFT convolutions, which round differently from
# the CPU's direct ones. TF32 (ONNX Runtime's default) rounds the products'
# inputs to 10 mantissa bits: about 1e-3 relative.
TOLERANCE = {"fp32_mlp": (1e-4, 1e-5), "fp32_cnn": (1e-3, 1e-4), "tf32": (1e-2, 1e-2)}
BATCHING_SIZES = (8, 32)
BATCHING_QUEUE_DELAY_US = 1000
TEXT_MIX_REQUESTS = 256  # as bench/bucket_bench.py's default
TEXT_MIX_SEED = 9
TEXT_CHECKED = 4  # the mix's first requests, compared with onnxruntime


def param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


def f32(name: str, dims: list) -> dict:
    return {"name": name, "datatype": "FP32", "dims": dims}


MODELS = {
    "cnn": dict(inputs=[f32("INPUT0", [3, 64, 64])], outputs=[f32("OUTPUT0", [10])]),
    "mlp": dict(inputs=[f32("INPUT0", [256])], outputs=[f32("OUTPUT0", [10])]),
}


def binary_request(inputs: dict, outputs: list) -> tuple[bytes, int]:
    """A KServe binary-tensor request: JSON header, then the raw inputs."""
    kinds = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}
    header = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": kinds[a.dtype],
                          "parameters": {"binary_data_size": a.nbytes}} for n, a in inputs.items()],
              "outputs": [{"name": o, "parameters": {"binary_data": True}} for o in outputs]}
    head = json.dumps(header, separators=(",", ":")).encode()
    return head + b"".join(np.ascontiguousarray(a).tobytes() for a in inputs.values()), len(head)


class Writer:
    """Writes requests and their onnxruntime CPU references under `dest`."""

    def __init__(self, dest: Path):
        self.dest = dest
        self.requests: dict = {}
        self.sessions: dict = {}
        for sub in ("models", "requests/text", "reference", "baseline", "checks"):
            (dest / sub).mkdir(parents=True, exist_ok=True)

    def model(self, name: str, proto) -> str:
        rel = f"models/{name}.onnx"
        (self.dest / rel).write_bytes(proto.SerializeToString())
        self.sessions[name] = ort.InferenceSession(str(self.dest / rel), providers=["CPUExecutionProvider"])
        return rel

    def request(self, key: str, model: str, inputs: dict, rel: str | None = None, reference: bool = True) -> str:
        outputs = [o.name for o in self.sessions[model].get_outputs()]
        body, header_bytes = binary_request(inputs, outputs)
        rel = rel or f"requests/{key}.bin"
        (self.dest / rel).write_bytes(body)
        self.requests[key] = {"body": rel, "header_bytes": header_bytes,
                              "inputs": {n: list(a.shape) for n, a in inputs.items()}}
        if reference:
            np.savez(self.dest / f"reference/{key}.npz",
                     **dict(zip(outputs, self.sessions[model].run(outputs, inputs))))
            self.requests[key]["reference"] = f"reference/{key}.npz"
        return key


def fixed_model_configs(name: str, max_batch: int = 8) -> dict:
    """The correctness and CUDA-graph variants of the CNN or the MLP: FP32
    (use_tf32 0), one GPU instance, no dynamic batching (a request runs as
    it came, so batch-1 latency is the run's)."""
    spec = MODELS[name]
    rtol_key = "fp32_cnn" if name == "cnn" else "fp32_mlp"
    fp32 = param("use_tf32", "0")
    variants = {
        "graphs_off": fp32,
        "graphs_on": fp32 + param("enable_cuda_graph", "1") + param("cuda_graph_max_shapes", "2"),
        "plain": fp32 + param("io_binding", "0"),
        "checked": fp32 + param("numerical_check", "enforce") +
        param("numerical_tolerance", str(TOLERANCE[rtol_key][0])),
    }
    return {f"{name}_{v}": bench_models.config_pbtxt(f"{name}_{v}", max_batch, spec["inputs"], spec["outputs"],
                                                     kind="KIND_GPU", extra=extra)
            for v, extra in variants.items()}


def batching_config(model_name: str, max_batch: int, count: int) -> str:
    spec = MODELS["cnn"]
    return bench_models.config_pbtxt(model_name, max_batch, spec["inputs"], spec["outputs"],
                                     queue_delay_us=BATCHING_QUEUE_DELAY_US, preferred=[max_batch],
                                     kind="KIND_GPU", count=count)


def text_configs(dest: Path) -> dict:
    """bench/lib/bucket_models.py's two encoder models, on one GPU instance each."""
    tmp = dest / "checks" / "text-repo"
    bucket_models.write_repository(tmp, bucket_models.HIDDEN, bucket_models.LAYERS, list(bucket_models.BUCKETS),
                                   1, kind="KIND_GPU")
    configs = {name: (tmp / name / "config.pbtxt").read_text() for name in ("text_buckets", "text_plain")}
    for path in sorted(tmp.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    tmp.rmdir()
    return configs


def write_check_data(dest: Path) -> dict:
    w = Writer(dest)
    files = {"cnn": w.model("cnn", bench_models.make_cnn(np.random.default_rng(2))),
             "mlp": w.model("mlp", bench_models.make_mlp(np.random.default_rng(1))),
             "text_encoder": w.model("text_encoder", text.build_text_encoder(hidden=bucket_models.HIDDEN,
                                                                             layers=bucket_models.LAYERS))}
    rng = np.random.default_rng(42)
    for name, spec in MODELS.items():
        dims = spec["inputs"][0]["dims"]
        for b in CORRECTNESS_BATCHES:
            w.request(f"{name}_b{b}", name, {"INPUT0": rng.standard_normal([b, *dims]).astype(np.float32)})
    (dest / "baseline" / "cnn_INPUT0.bin").write_bytes(
        (dest / w.requests["cnn_b1"]["body"]).read_bytes()[w.requests["cnn_b1"]["header_bytes"]:])

    text_rng = np.random.default_rng(TEXT_MIX_SEED)
    lengths = bucket_models.mix_lengths(TEXT_MIX_REQUESTS, text_rng)
    lines = []
    for i, n in enumerate(lengths):
        ids, mask = text.token_ids(n, text_rng)
        key = w.request(f"text_{i:03d}", "text_encoder", {"input_ids": ids, "attention_mask": mask},
                        rel=f"requests/text/{i:03d}.bin", reference=i < TEXT_CHECKED)
        lines.append(f"text/{i:03d}.bin:{w.requests[key]['header_bytes']}")
    (dest / "requests" / "text.list").write_text("\n".join(lines) + "\n")

    main = {}
    for name in MODELS:
        main.update({m: {"config": c, "model": files[name]} for m, c in fixed_model_configs(name).items()})
    for b in BATCHING_SIZES:
        main[f"cnn_b{b}"] = {"config": batching_config(f"cnn_b{b}", b, 2), "model": files["cnn"]}
    main.update({m: {"config": c, "model": files["text_encoder"]} for m, c in text_configs(dest).items()})
    servers = {"main": main}
    for count in (1, 4):
        servers[f"instances_{count}"] = {"cnn": {"config": batching_config("cnn", 32, count), "model": files["cnn"]}}

    order = lambda m: [f"{m}_b{b}" for b in CORRECTNESS_ORDER]
    correctness = []
    for m in MODELS:
        rtol, atol = TOLERANCE["fp32_cnn" if m == "cnn" else "fp32_mlp"]
        for v in ("graphs_off", "graphs_on", "plain", "checked"):
            correctness.append({"model": f"{m}_{v}", "requests": order(m), "rtol": rtol, "atol": atol})
    correctness.append({"model": "cnn_b8", "requests": order("cnn"), "rtol": TOLERANCE["tf32"][0],
                        "atol": TOLERANCE["tf32"][1]})
    text_sample = [f"text_{i:03d}" for i in range(TEXT_CHECKED)]
    for m in ("text_buckets", "text_plain"):
        correctness.append({"model": m, "requests": text_sample, "rtol": TOLERANCE["tf32"][0],
                            "atol": TOLERANCE["tf32"][1]})
    plan = {
        "servers": servers,
        "requests": w.requests,
        "correctness": correctness,
        "graphs": [{"name": m, "on": f"{m}_graphs_on", "off": f"{m}_graphs_off", "request": f"{m}_b1"}
                   for m in MODELS],
        "batching": {"request": "cnn_b1", "models": {str(b): f"cnn_b{b}" for b in BATCHING_SIZES},
                     "instances_per_model": 2,
                     "baseline": {"model": files["cnn"], "inputs": ["INPUT0:FP32:1x3x64x64:baseline/cnn_INPUT0.bin"]}},
        "buckets": {"on": "text_buckets", "off": "text_plain", "list": "requests/text.list", "concurrency": 32,
                    "buckets": list(bucket_models.BUCKETS)},
        "sweep": {"model": "cnn_b32", "request": "cnn_b1", "concurrency": [1, 4, 16, 64, 128]},
        "instances": {"servers": {"1": "instances_1", "4": "instances_4"}, "model": "cnn", "request": "cnn_b1",
                      "concurrency": 64},
    }
    (dest / "checks" / "plan.json").write_text(json.dumps(plan, indent=1))
    return plan


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write_check_data(Path(sys.argv[1]))
