#!/usr/bin/env python3
"""The response cache under a repeating request mix: the bench's cnn model
served with and without `response_cache`, driven by perf_analyzer cycling
through a fixed set of distinct inputs, in one run on the same server build.

    .venv/bin/python bench/cache_bench.py [--ortserve-bin build/ortserve]
        [--distinct 16] [--concurrency 4] [--window-ms 3000]

Three points, each on a fresh server (--thread-budget 2):
  uncached   cnn, no response_cache: every request runs.
  hits       cnn_cached with a cache that holds every distinct answer: after
             the first of each, every request is a hit.
  misses     cnn_cached with a cache that holds 4 answers while the mix
             cycles through 4x as many: LRU misses every time, which is what
             the cache costs when it never pays (key, lookup, copy, insert).
Hit rates come from the model's statistics (cache_hit / cache_miss) over
the measurement. Writes bench/results/RESULTS-response-cache.md. Nothing is
asserted: this is a measurement.
"""
import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import onnx

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import COMMANDS, LOGS, RESULTS, ROOT, WORK, git_head, log, machine_info
from bench_loads import run_perf_analyzer
from bench_procs import Procs, free_port
from bench_servers import wait_ready
from make_bench_models import config_pbtxt, make_cnn

CNN_DIMS = [3, 64, 64]
# What one cached cnn answer counts against the cache: its key (the input
# bytes plus names and shape), the 10 output floats, and 256 bytes of
# bookkeeping (docs/model-config.md, "Response cache"); rounded up.
CNN_ENTRY_BYTES = 4 * 3 * 64 * 64 + 1024


def write_repository(repo: Path) -> None:
    model = make_cnn(np.random.default_rng(2))
    tensors = lambda n: [{"name": n, "datatype": "FP32", "dims": CNN_DIMS if n == "INPUT0" else [10]}]
    for name, extra in (("cnn", ""), ("cnn_cached", "response_cache { enable: true }\n")):
        (repo / name / "1").mkdir(parents=True, exist_ok=True)
        onnx.save(model, repo / name / "1" / "model.onnx")
        (repo / name / "config.pbtxt").write_text(
            config_pbtxt(name, 8, tensors("INPUT0"), tensors("OUTPUT0"), queue_delay_us=0) + extra)


def write_mix(path: Path, distinct: int) -> None:
    """perf_analyzer --input-data with `distinct` different inputs; each
    client thread cycles through them in order."""
    rng = np.random.default_rng(7)
    entries = [{"INPUT0": {"content": np.round(rng.uniform(-1, 1, 3 * 64 * 64), 4).astype(np.float32).tolist(),
                           "shape": CNN_DIMS}} for _ in range(distinct)]
    path.write_text(json.dumps({"data": entries}))


def cache_counts(base: str, model: str) -> tuple:
    with urllib.request.urlopen(f"{base}/v2/models/{model}/stats", timeout=10) as r:
        stats = json.load(r)["model_stats"][0]["inference_stats"]
    return stats["cache_hit"]["count"], stats["cache_miss"]["count"]


def measure(args, repo: Path, model: str, mix: Path, cache_bytes: int) -> dict:
    port, metrics_port, grpc_port = free_port(), free_port(), free_port()
    cmd = [args.ortserve_bin, "--model-repository", repo, "--http-port", port, "--grpc-port", grpc_port,
           "--metrics-port", metrics_port, "--thread-budget", "2", "--log-verbose", "0"]
    if cache_bytes:
        cmd += ["--cache-config", f"local,size={cache_bytes}"]
    proc = Procs.start(cmd, LOGS / f"cache_{model}_{cache_bytes}.log")
    base = f"http://127.0.0.1:{port}"
    try:
        ok, _ = wait_ready(base, proc, [model], 120)
        if not ok:
            raise RuntimeError(f"ortserve did not serve {model}: see {LOGS}")
        before = cache_counts(base, model)
        point = run_perf_analyzer(f"127.0.0.1:{port}", model, {"request_pa": str(mix)}, "concurrency",
                                  args.concurrency, args.window_ms)
        hits, misses = (a - b for a, b in zip(cache_counts(base, model), before))
    finally:
        Procs.stop(proc)
    if point is None:
        raise RuntimeError(f"perf_analyzer failed on {model}")
    looked_up = hits + misses
    point.update(hits=hits, misses=misses, hit_rate=hits / looked_up if looked_up else None)
    return point


def write_report(points: dict, args) -> Path:
    base = points["uncached"]["throughput"]
    rows = []
    for name, p in points.items():
        rate = "-" if p["hit_rate"] is None else f"{100 * p['hit_rate']:.2f}%"
        rows.append(f"| {name} | {p['throughput']:.1f} | {p['throughput'] / base:.2f}x | {p['p50_us'] / 1000:.2f} | "
                    f"{p['p99_us'] / 1000:.2f} | {rate} |")
    text = "\n".join([
        "# Response cache under a repeating request mix", "",
        f"Commit {git_head()}, {time.strftime('%Y-%m-%d %H:%M')}, machine {machine_info()}.", "",
        f"Model: the bench's cnn ([-1,3,64,64] -> [-1,10], max_batch_size 8), one instance, "
        f"--thread-budget 2. Client: perf_analyzer over HTTP, concurrency {args.concurrency}, "
        f"3 windows of {args.window_ms} ms, cycling through {args.distinct} distinct inputs "
        f"({4 * args.distinct} for `misses`).", "",
        f"Response cache under a repeating request mix: all hits {points['hits']['throughput'] / base:.2f}x the "
        f"throughput of the uncached model, p99 {points['uncached']['p99_us'] / points['hits']['p99_us']:.1f}x "
        f"lower; every lookup a miss {points['misses']['throughput'] / base:.2f}x (load average at the start "
        f"{machine_info()['loadavg_at_start'][0]:.1f} on {machine_info()['cores']} cores).", "",
        "| point | inferences/s | vs uncached | p50 ms | p99 ms | hit rate |",
        "|---|---|---|---|---|---|", *rows, "",
        "- uncached: cnn without response_cache.",
        "- hits: cnn_cached, the cache holds every distinct answer.",
        "- misses: cnn_cached, the cache holds 4 answers and the mix cycles through more, so LRU never hits:",
        "  the cost of building the key, looking up, copying and inserting on every request.", "",
        "Commands:", "", "```", *COMMANDS, "```", ""])
    out = RESULTS / "RESULTS-response-cache.md"
    out.write_text(text)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--distinct", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--window-ms", type=int, default=3000)
    args = ap.parse_args(argv)
    work = WORK / "cache"
    repo = work / "repo"
    LOGS.mkdir(parents=True, exist_ok=True)
    write_repository(repo)
    write_mix(work / "mix.json", args.distinct)
    write_mix(work / "mix_wide.json", 4 * args.distinct)
    try:
        points = {
            "uncached": measure(args, repo, "cnn", work / "mix.json", 0),
            "hits": measure(args, repo, "cnn_cached", work / "mix.json", 2 * args.distinct * CNN_ENTRY_BYTES),
            "misses": measure(args, repo, "cnn_cached", work / "mix_wide.json", 4 * CNN_ENTRY_BYTES),
        }
    finally:
        Procs.stop_all()
    for name, p in points.items():
        log(f"{name}: {p['throughput']:.1f} inf/s, p99 {p['p99_us'] / 1000:.2f} ms, hits {p['hits']}, "
            f"misses {p['misses']}")
    log(f"wrote {write_report(points, args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
