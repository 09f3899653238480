#!/usr/bin/env python3
"""The limit: onnxruntime in-process, back-to-back runs, no server.

    .venv/bin/python bench/lib/inprocess_ort.py --model cnn --threads 2 --batch-sizes 1,4 --duration 10

Two engines. `ortserve` (the default when build/ortserve_inprocess_limit
exists): a small C++ program on the server's own runtime layer, so the same
libonnxruntime (the C++ SDK ortserve links, which is not the version of the
pip wheel) and the same session options as an ortserve CPU instance, with no
interpreter in the loop; this script only writes its inputs. `python`: one
onnxruntime (pip) InferenceSession with ortserve's options; for "tiny"
Python's per-call overhead is then a large part of each call.

One session with intra_op_num_threads = the server's thread budget
(sequential execution, like one server instance). For each batch size, inputs
are built once (the batch-1 request tensor repeated along dim 0) and run
back-to-back for --duration seconds after a short warm-up. Prints one JSON
object: per batch size, runs, inferences/s, per-run latency percentiles.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

DTYPES = {"FP32": np.float32, "FP16": np.float16, "INT32": np.int32, "INT64": np.int64}


def make_session(model_path: str | bytes, threads: int, spinning: bool = False) -> ort.InferenceSession:
    """`model_path`: a file, or the serialized model."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ortserve's default (config parameter allow_spinning, off): the same
    # thread behaviour, so the ratio measures the server, not a setting.
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])


def request_tensors(spec: dict) -> list:
    """The bench request's inputs: (name, KServe datatype, array of its shape)."""
    body = json.loads(Path(spec["request_json"]).read_text())
    return [(t["name"], t["datatype"], np.asarray(t["data"], dtype=DTYPES[t["datatype"]]).reshape(t["shape"]))
            for t in body["inputs"]]


def batch_inputs(spec: dict, batch: int) -> dict:
    return {name: np.ascontiguousarray(np.repeat(one, batch, axis=0)) for name, _, one in request_tensors(spec)}


def run_one(sess, feeds, batch, duration_s, warmup_s):
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        sess.run(None, feeds)
    lat = []
    start = time.perf_counter()
    end = start + duration_s
    t = start
    while t < end:
        sess.run(None, feeds)
        t2 = time.perf_counter()
        lat.append(t2 - t)
        t = t2
    elapsed = t - start
    lat_us = np.asarray(lat) * 1e6
    return {
        "batch_size": batch, "runs": len(lat), "elapsed_s": round(elapsed, 4),
        "inferences_per_s": round(batch * len(lat) / elapsed, 2),
        "run_latency_us": {p: round(float(np.percentile(lat_us, q)), 1)
                           for p, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99))},
        "mean_run_us": round(float(lat_us.mean()), 1),
    }


LIMIT_BIN = Path(__file__).resolve().parents[2] / "build" / "ortserve_inprocess_limit"


def run_native(binary: Path, spec: dict, args, sizes) -> dict:
    """The C++ engine: writes each request tensor as raw bytes for it."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [str(binary), "--model-path", spec["model_path"], "--threads", str(args.threads),
               "--batch-sizes", ",".join(map(str, sizes)), "--duration", str(args.duration),
               "--warmup", str(args.warmup)]
        if args.spinning == "on":
            cmd.append("--spinning")
        for i, (name, datatype, one) in enumerate(request_tensors(spec)):
            path = Path(tmp) / f"input{i}.bin"
            path.write_bytes(np.ascontiguousarray(one).tobytes())
            cmd += ["--input", f'{name}:{datatype}:{"x".join(map(str, one.shape))}:{path}']
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model name in the manifest")
    ap.add_argument("--manifest", default=str(Path(__file__).resolve().parents[1] / "work" / "manifest.json"))
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads (the thread budget)")
    ap.add_argument("--batch-sizes", default="1", help="comma separated")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per batch size")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--spinning", choices=("off", "on"), default="off",
                    help="ORT intra-op spinning (off: ortserve's default; on: ORT's)")
    ap.add_argument("--engine", choices=("auto", "ortserve", "python"), default="auto",
                    help="ortserve: the C++ program on the server's runtime (auto: when built); "
                    "python: the onnxruntime wheel")
    ap.add_argument("--limit-bin", default=str(LIMIT_BIN), help="the C++ engine's binary")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()

    spec = json.loads(Path(args.manifest).read_text())[args.model]
    sizes = sorted({int(x) for x in args.batch_sizes.split(",") if x.strip()})
    if spec["max_batch_size"] == 0:
        sizes = [b for b in sizes if b == 1]
    binary = Path(args.limit_bin)
    if args.engine == "ortserve" or (args.engine == "auto" and binary.exists()):
        result = {"model": args.model, **run_native(binary, spec, args, sizes)}
    else:
        sess = make_session(spec["model_path"], args.threads, args.spinning == "on")
        result = {"model": args.model, "engine": "python", "threads": args.threads,
                  "onnxruntime": ort.__version__,
                  "results": [run_one(sess, batch_inputs(spec, b), b, args.duration, args.warmup) for b in sizes]}
    text = json.dumps(result)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
