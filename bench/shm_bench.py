#!/usr/bin/env python3
"""System shared memory against the same load over the wire: perf_analyzer
with `--shared-memory system` and without it, over HTTP and gRPC, on an
identity model whose input and output are 1 MiB (FP32 [262144]).

    .venv/bin/python bench/shm_bench.py [--seconds 5] [--concurrency 4] [--binary build/ortserve]

Builds the model under bench/work/shm_repo, starts ortserve with
--allow-client-shm=true on free ports, runs the four perf_analyzer loads one
after the other (closed loop, the same concurrency), and prints a markdown
table (throughput, p50 and p99 latency) and the exact commands. Short by
design: one measurement window of --seconds per point.
"""
import argparse
import csv
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx
import requests
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "work"
MODEL = "shm_identity"
ELEMENTS = 262144  # 1 MiB of FP32


def build_repo(repo: Path) -> None:
    graph = helper.make_graph([helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], MODEL,
                              [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [ELEMENTS])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [ELEMENTS])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (repo / MODEL / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, repo / MODEL / "1" / "model.onnx")
    (repo / MODEL / "config.pbtxt").write_text(f"""name: "{MODEL}"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {ELEMENTS} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {ELEMENTS} ] }} ]
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def perf_env() -> dict:
    env = dict(os.environ)
    cudart = next((ROOT / ".venv" / "lib").glob("python3*/site-packages/nvidia/cuda_runtime/lib"), None)
    if cudart:  # perf_analyzer links libcudart even without a GPU
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(cudart), env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def run_point(url: str, protocol: str, shm: str, args, out_csv: Path) -> tuple[dict, str]:
    cmd = [str(ROOT / ".venv" / "bin" / "perf_analyzer"), "-m", MODEL, "-u", url, "-i", protocol,
           "--shared-memory", shm, "--concurrency-range", str(args.concurrency),
           "--measurement-interval", str(args.seconds * 1000), "--max-trials", "3", "--stability-percentage", "999",
           "-f", str(out_csv)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=perf_env(), timeout=args.seconds * 20 + 60)
    if done.returncode != 0:
        raise SystemExit(f"perf_analyzer failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    with out_csv.open() as f:
        row = next(csv.DictReader(f))
    return row, " ".join(shlex.quote(c) for c in cmd).replace(str(ROOT) + "/", "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()

    repo = WORK / "shm_repo"
    build_repo(repo)
    http_port, grpc_port = free_port(), free_port()
    server_cmd = [args.binary, "--model-repository", str(repo), "--http-port", str(http_port), "--grpc-port",
                  str(grpc_port), "--metrics-port", "0", "--allow-client-shm=true"]
    log = tempfile.NamedTemporaryFile(prefix="ortserve_shm_bench_", suffix=".log", delete=False)
    server = subprocess.Popen(server_cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{http_port}/v2/models/{MODEL}/ready", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"ortserve did not get ready; log: {log.name}")
            time.sleep(0.2)
        rows, commands = [], [" ".join(shlex.quote(c) for c in server_cmd).replace(str(ROOT) + "/", "")]
        for protocol, port in (("http", http_port), ("grpc", grpc_port)):
            for shm in ("none", "system"):
                row, cmd = run_point(f"localhost:{port}", protocol, shm, args, WORK / f"shm_{protocol}_{shm}.csv")
                rows.append((protocol, shm, row))
                commands.append(cmd)
    finally:
        server.terminate()
        server.wait(timeout=60)

    print(f"| protocol | --shared-memory | infer/s | p50 ms | p99 ms |  (concurrency {args.concurrency}, "
          f"{args.seconds} s windows, FP32 [{ELEMENTS}] in and out)")
    print("|---|---|---:|---:|---:|")
    for protocol, shm, row in rows:
        print(f"| {protocol} | {shm} | {float(row['Inferences/Second']):.0f} | "
              f"{float(row['p50 latency']) / 1000:.2f} | {float(row['p99 latency']) / 1000:.2f} |")
    print("\nCommands:")
    for c in commands:
        print("    " + c)
    return 0


if __name__ == "__main__":
    sys.exit(main())
