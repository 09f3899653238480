#!/usr/bin/env python3
"""Resident memory of ortserve with 1 and with N CPU instances of one large model: the
instances of a model version share their pre-packed weights (docs/decisions.md,
"Instances share their pre-packed weights").

    .venv/bin/python bench/weights_memory.py --weights-mb 200 --instances 4

Generates a Gemm stack with about --weights-mb MB of float weights, serves it once with
1 instance and once with --instances, and prints VmRSS (/proc/<pid>/status) after READY,
after one request and after 32 more from 8 threads (every instance runs), and the ratio
N/1. The model is written to a temporary folder (or --work)."""
import argparse
import concurrent.futures
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import requests
from onnx import TensorProto, helper, numpy_helper

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_procs import Procs
from server_runs import Ortserve, loadavg

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1024


def gemm_stack(weights_mb, op="gemm"):
    """[-1, WIDTH] -> `layers` x (Gemm WIDTH x WIDTH, Relu) -> [-1, WIDTH]; with op "matmul",
    MatMul + Add instead of Gemm."""
    layers = max(1, round(weights_mb * 1e6 / (WIDTH * WIDTH * 4)))
    rng = np.random.default_rng(7)
    nodes, inits, prev = [], [], "INPUT0"
    for i in range(layers):
        w = (rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / np.sqrt(WIDTH)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(WIDTH, np.float32), f"b{i}")]
        out = "OUTPUT0" if i == layers - 1 else f"h{i}"
        if op == "matmul":
            nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
            nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"g{i}"]))
        else:
            nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}"]))
        nodes.append(helper.make_node("Relu", [f"g{i}"], [out]))
        prev = out
    graph = helper.make_graph(nodes, "weights", [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [-1, WIDTH])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [-1, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ortserve-bench")
    model.ir_version = 8
    return model, layers


def write_repo(root, model, instances, config_extra=""):
    repo = Path(root) / f"repo-{instances}"
    (repo / "weights" / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(repo / "weights" / "1" / "model.onnx"))
    (repo / "weights" / "config.pbtxt").write_text(
        'name: "weights"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        f'input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]\n'
        f'output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]\n'
        f'instance_group [ {{ count: {instances}, kind: KIND_CPU }} ]\n{config_extra}\n')
    return repo


def one_request(url):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, WIDTH], "datatype": "FP32", "data": [0.5] * WIDTH}]}
    r = requests.post(f"http://{url}/v2/models/weights/infer", json=body, timeout=120)
    r.raise_for_status()


def measure(binary, repo, log, extra_args):
    """VmRSS (KiB) after READY (each instance has run the warm-up), after one request, and
    after 32 more from 8 threads (every instance runs)."""
    srv = Ortserve(binary, repo, log, extra_args)
    try:
        srv.wait_ready()
        time.sleep(1.0)
        ready = srv.rss_kib()
        one_request(srv.url)
        time.sleep(1.0)
        after_one = srv.rss_kib()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: one_request(srv.url), range(32)))
        time.sleep(1.0)
        return ready, after_one, srv.rss_kib()
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--weights-mb", type=float, default=200)
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--thread-budget", type=int, default=2)
    ap.add_argument("--work", default=None, help="keep the generated repositories here")
    ap.add_argument("--op", choices=["gemm", "matmul"], default="gemm")
    ap.add_argument("--config-extra", default="", help="appended to config.pbtxt, e.g. "
                    "'optimization { graph { level: -1 } }'")
    args = ap.parse_args()
    model, layers = gemm_stack(args.weights_mb, args.op)
    with tempfile.TemporaryDirectory(prefix="ortserve-weights-") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        extra = ["--thread-budget", str(args.thread_budget)]
        try:
            rows = {}
            for n in (1, args.instances):
                repo = write_repo(work, model, n, args.config_extra)
                rows[n] = measure(args.ortserve_bin, repo, work / f"ortserve-{n}.log", extra)
        finally:
            Procs.stop_all()
    mb = layers * WIDTH * WIDTH * 4 / 1e6
    print(f"model: {layers} {args.op} {WIDTH}x{WIDTH} layers, {mb:.0f} MB of float weights "
          f"{args.config_extra}; load {loadavg()}")
    for n, (ready, after, after_all) in rows.items():
        print(f"{n} instance(s): VmRSS {ready / 1024:.0f} MiB after READY, {after / 1024:.0f} MiB after one "
              f"request, {after_all / 1024:.0f} MiB after 32 more from 8 threads")
    one, many = rows[1], rows[args.instances]
    print(f"ratio {args.instances}/1: {many[0] / one[0]:.2f} after READY, {many[1] / one[1]:.2f} after one "
          f"request, {many[2] / one[2]:.2f} after 32 more")


if __name__ == "__main__":
    main()
