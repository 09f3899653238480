#!/usr/bin/env python3
"""Cold start with and without the optimized-model cache (--model-cache-dir).

    .venv/bin/python bench/model_cache_start.py --repo bench/work/repo --rounds 3

Per round: a start without the cache, a start with an empty cache directory (miss:
optimizes and saves), and a start with the directory the previous start filled (hit).
Prints, per start, each model's load duration (ortserve_model_load_duration_seconds:
instances, warm-up, scheduler) and the cache outcome (ortserve_model_load_cache), and
the median per model and kind of start."""
import argparse
import collections
import re
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np
import onnx
import requests
from onnx import TensorProto, helper, numpy_helper

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_procs import Procs
from server_runs import Ortserve, loadavg

ROOT = Path(__file__).resolve().parents[1]


def deep_model(layers, width=64):
    """A transformer-like stack whose graph ORT rewrites a lot: per layer MatMul + Add
    (fused to Gemm/FusedMatMul), a LayerNorm written out in primitives (fused to
    LayerNormalization) and an erf-GELU written out (fused to Gelu)."""
    rng = np.random.default_rng(5)
    nodes, inits, x = [], [], "INPUT0"
    const = lambda name, value: inits.append(numpy_helper.from_array(np.array(value, np.float32), name))  # noqa: E731
    const("two", 2.0), const("eps", 1e-5), const("sqrt2", np.sqrt(2.0)), const("one", 1.0), const("half", 0.5)
    for i in range(layers):
        p = f"l{i}_"
        inits.append(numpy_helper.from_array((rng.standard_normal((width, width)) / 8).astype(np.float32), p + "w"))
        inits.append(numpy_helper.from_array(np.zeros(width, np.float32), p + "b"))
        inits.append(numpy_helper.from_array(np.ones(width, np.float32), p + "g"))
        inits.append(numpy_helper.from_array(np.zeros(width, np.float32), p + "beta"))
        nodes += [
            helper.make_node("MatMul", [x, p + "w"], [p + "mm"]),
            helper.make_node("Add", [p + "mm", p + "b"], [p + "h"]),
            helper.make_node("ReduceMean", [p + "h"], [p + "mean"], axes=[-1]),
            helper.make_node("Sub", [p + "h", p + "mean"], [p + "d"]),
            helper.make_node("Pow", [p + "d", "two"], [p + "sq"]),
            helper.make_node("ReduceMean", [p + "sq"], [p + "var"], axes=[-1]),
            helper.make_node("Add", [p + "var", "eps"], [p + "ve"]),
            helper.make_node("Sqrt", [p + "ve"], [p + "std"]),
            helper.make_node("Div", [p + "d", p + "std"], [p + "n"]),
            helper.make_node("Mul", [p + "n", p + "g"], [p + "ng"]),
            helper.make_node("Add", [p + "ng", p + "beta"], [p + "ln"]),
            helper.make_node("Div", [p + "ln", "sqrt2"], [p + "q"]),
            helper.make_node("Erf", [p + "q"], [p + "e"]),
            helper.make_node("Add", [p + "e", "one"], [p + "e1"]),
            helper.make_node("Mul", [p + "ln", p + "e1"], [p + "m"]),
            helper.make_node("Mul", [p + "m", "half"], [p + "out"]),
        ]
        x = p + "out"
    nodes.append(helper.make_node("Identity", [x], ["OUTPUT0"]))
    graph = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [-1, width])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [-1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ortserve-bench")
    model.ir_version = 8
    return model


def repo_with_deep_model(repo, layers, work):
    dst = Path(work) / "repo"
    shutil.copytree(repo, dst)
    (dst / "deep" / "1").mkdir(parents=True)
    onnx.save(deep_model(layers), str(dst / "deep" / "1" / "model.onnx"))
    (dst / "deep" / "config.pbtxt").write_text(
        'name: "deep"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 64 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 64 ] } ]\n')
    return dst


def load_figures(srv):
    srv.metric_sum("ortserve_model_load_duration_seconds")  # waits for the metrics endpoint
    text = requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=30).text
    durations, outcomes = {}, {}
    for m in re.finditer(r'^ortserve_model_load_duration_seconds\{model="([^"]+)",version="[^"]*"\} (\S+)$', text, re.M):
        durations[m.group(1)] = float(m.group(2))
    for m in re.finditer(r'^ortserve_model_load_cache\{model="([^"]+)",version="[^"]*",outcome="(\w+)"\} 1$', text, re.M):
        outcomes[m.group(1)] = m.group(2)
    return durations, outcomes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--repo", default=str(ROOT / "bench" / "work" / "repo"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--thread-budget", type=int, default=2)
    ap.add_argument("--deep-layers", type=int, default=0,
                    help="also serve 'deep', a generated transformer-like stack of this many layers")
    args = ap.parse_args()
    figures = collections.defaultdict(list)  # (model, kind) -> seconds
    with tempfile.TemporaryDirectory(prefix="ortserve-cache-start-") as tmp:
        repo = repo_with_deep_model(args.repo, args.deep_layers, tmp) if args.deep_layers else args.repo
        try:
            for r in range(args.rounds):
                cache = Path(tmp) / f"cache-{r}"
                for kind, extra in (("no cache", []), ("miss", ["--model-cache-dir", cache]),
                                    ("hit", ["--model-cache-dir", cache])):
                    srv = Ortserve(args.ortserve_bin, repo, Path(tmp) / f"{r}-{kind}.log",
                                   ["--thread-budget", str(args.thread_budget), *extra])
                    try:
                        srv.wait_ready()
                        durations, outcomes = load_figures(srv)
                    finally:
                        srv.stop()
                    for model, seconds in sorted(durations.items()):
                        figures[(model, kind)].append(seconds)
                    print(f"round {r} {kind:8s} " + ", ".join(
                        f"{m} {s * 1000:.0f} ms ({outcomes.get(m, '?')})" for m, s in sorted(durations.items()))
                        + f"; load {loadavg()}", flush=True)
                shutil.rmtree(cache, ignore_errors=True)
        finally:
            Procs.stop_all()
    for model in sorted({m for m, _ in figures}):
        print(f"median {model}: " + ", ".join(
            f"{kind} {statistics.median(figures[(model, kind)]) * 1000:.0f} ms"
            for kind in ("no cache", "miss", "hit") if figures[(model, kind)]))


if __name__ == "__main__":
    main()
