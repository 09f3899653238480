#!/usr/bin/env python3
"""System shared memory against the same load over the wire: perf_analyzer
with `--shared-memory system` and without it, over HTTP and gRPC, on an
identity model whose input and output are 1 MiB (FP32 [262144]).

    .venv/bin/python bench/shm_bench.py [--seconds 5] [--concurrency 4] [--binary build/ortserve]

Builds the model under bench/work/shm_repo, starts ortserve with
--allow-client-shm=true on free ports, runs the four perf_analyzer loads one
after the other (closed loop, the same concurrency), and writes
bench/results/RESULTS-shared-memory.md (the ratios, a table of throughput, p50
and p99 latency, the exact commands), also printed. Short by design: one
measurement window of --seconds per point (`make bench-shm`).
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
REPORT = ROOT / "bench" / "results" / "RESULTS-shared-memory.md"
# How the report's finding lines begin (bench_report.py's OTHER_BENCHES lists it).
HEADLINE = "Shared memory over the wire"


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

    load_at_start = os.getloadavg()[0]
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

    report = render(rows, commands, args, load_at_start)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(report)
    print(report)
    return 0


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip() or "unknown"
    return f"Commit {commit}, {cpu} ({os.cpu_count()} cores)"


def busy_note(load: float) -> str:
    """The project publishes no figure from a busy machine without saying so (docs/decisions.md)."""
    cores = os.cpu_count() or 1
    if load <= 0.5 * cores:
        return ""
    return f" (a busy machine: load {load:.1f} on {cores} cores at the start; rerun `make bench-shm` on a quiet one)"


def render(rows, commands, args, load_at_start) -> str:
    by = {(protocol, shm): row for protocol, shm, row in rows}

    def ratio(protocol):
        wire, shm = by[(protocol, "none")], by[(protocol, "system")]
        faster = float(shm["Inferences/Second"]) / float(wire["Inferences/Second"])
        p99 = float(wire["p99 latency"]) / float(shm["p99 latency"])
        return f"{ {'http': 'HTTP', 'grpc': 'gRPC'}[protocol]} {faster:.1f}x the throughput, p99 {p99:.1f}x lower"

    L = ["# Shared memory: 1 MiB tensors through system shared memory and over the wire", "",
         f"{machine()}, load average {load_at_start:.1f} at the start.", "",
         f"{HEADLINE} (perf_analyzer, FP32 [{ELEMENTS}] in and out, concurrency {args.concurrency}): "
         f"{ratio('http')}; {ratio('grpc')}{busy_note(load_at_start)}.", "",
         f"One closed-loop perf_analyzer load per row, {args.seconds} s measurement windows, the same "
         "server; `none` sends the tensors in the request and response bodies (HTTP binary tensor data, "
         "gRPC raw contents), `system` registers a region per input and output and sends only their names.", "",
         "| protocol | --shared-memory | infer/s | p50 ms | p99 ms |", "|---|---|---:|---:|---:|"]
    for protocol, shm, row in rows:
        L.append(f"| {protocol} | {shm} | {float(row['Inferences/Second']):.0f} | "
                 f"{float(row['p50 latency']) / 1000:.2f} | {float(row['p99 latency']) / 1000:.2f} |")
    L += ["", "Commands (ports chosen free at run time):", ""] + ["    " + c for c in commands] + [""]
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
