#!/usr/bin/env python3
"""Shape buckets under a realistic length mix: a BERT-shaped text encoder
(tests/models/make_text_models.py) served with and without `shape_buckets`,
and the FastAPI + onnxruntime baseline, driven by perf_analyzer cycling
through requests of lengths 8-128 skewed short.

    .venv/bin/python bench/bucket_bench.py [--ortserve-bin build/ortserve]
        [--concurrency 32] [--window-ms 3000] [--hidden 128] [--layers 2]
        [--buckets 16,32,64,128] [--instances 1]

Three points, each on a fresh server:
  buckets    ortserve, shape_buckets (--buckets): requests padded to their
             bucket batch with the others of that bucket.
  no_buckets ortserve, the same config without them: only requests of
             identical length batch (Triton's rule), so most run alone.
  fastapi    bench/baselines/baseline_fastapi.py, 2 workers x 1 thread, no batching.
ortserve runs with --thread-budget 2. The batches formed come from the
model's statistics (inference_count / execution_count over the measurement).
Writes bench/results/RESULTS-shape-buckets.md. Nothing is asserted: this is a
measurement.
"""
import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import COMMANDS, LOGS, RESULTS, ROOT, WORK, git_head, log, machine_info
from bench_loads import run_perf_analyzer
from bench_procs import Procs
from bench_servers import FastApiBaseline, OrtServe, wait_ready
from bucket_models import BUCKETS, HIDDEN, LAYERS, MAX_BATCH, mix_lengths, write_mix, write_repository


def counts(base: str, model: str) -> tuple:
    """(inferences, executions, compute ns of those executions): the
    compute is summed over the batch sizes' executions, so that compute /
    inferences is what one inference cost the instance."""
    with urllib.request.urlopen(f"{base}/v2/models/{model}/stats", timeout=10) as r:
        stats = json.load(r)["model_stats"][0]
    compute_ns = sum(b["compute_infer"]["ns"] for b in stats.get("batch_stats", []))
    return stats["inference_count"], stats["execution_count"], compute_ns


def measure(args, server, model: str, mix: Path) -> dict:
    server.start()
    try:
        ok, _ = wait_ready(server.base, server.proc, [model], 180)
        if not ok:
            raise RuntimeError(f"{server.name} did not serve {model}: see {LOGS}")
        ortserve = isinstance(server, OrtServe)
        before = counts(server.base, model) if ortserve else (0, 0, 0)
        point = run_perf_analyzer(f"127.0.0.1:{server.port}", model, {"request_pa": str(mix)}, "concurrency",
                                  args.concurrency, args.window_ms)
        after = counts(server.base, model) if ortserve else (0, 0, 0)
    finally:
        server.stop()
    if point is None:
        raise RuntimeError(f"perf_analyzer failed on {server.name} {model}")
    inferences, executions, compute_ns = (a - b for a, b in zip(after, before))
    point["mean_batch"] = inferences / executions if executions else None
    point["compute_us_per_inference"] = compute_ns / inferences / 1000 if inferences else None
    return point


def write_report(points: dict, args, lengths: list) -> Path:
    base = points["no_buckets"]["throughput"]
    rows = []
    for name, p in points.items():
        batch = "-" if p["mean_batch"] is None else f"{p['mean_batch']:.1f}"
        compute = "-" if p["compute_us_per_inference"] is None else f"{p['compute_us_per_inference']:.0f}"
        rows.append(f"| {name} | {p['throughput']:.1f} | {p['throughput'] / base:.2f}x | {p['p50_us'] / 1000:.1f} | "
                    f"{p['p99_us'] / 1000:.1f} | {batch} | {compute} |")
    info = machine_info()
    b, f = points["buckets"], points["fastapi"]
    text_ = "\n".join([
        "# Shape buckets under a mixed-length text load", "",
        f"Commit {git_head()}, {time.strftime('%Y-%m-%d %H:%M')}, machine {info}.", "",
        f"Model: a BERT-shaped encoder (tests/models/make_text_models.py: hidden {args.hidden}, {args.layers} "
        f"masked self-attention layers; outputs last_hidden_state [batch, seq, {args.hidden}] and pooled "
        f"[batch, {args.hidden}]), max_batch_size {MAX_BATCH}, max_queue_delay 2000 us, {args.instances} "
        f"instance(s) ({max(1, 2 // args.instances)} intra-op thread(s) per run), ortserve --thread-budget 2; "
        f"FastAPI 2 workers x 1 intra-op thread. Client: perf_analyzer over HTTP, "
        f"concurrency {args.concurrency}, 3 windows of {args.window_ms} ms, cycling through {len(lengths)} "
        f"requests of lengths {min(lengths)}-{max(lengths)} (median {int(np.median(lengths))}, log-normal, "
        f"skewed short); buckets {','.join(map(str, args.buckets))}.", "",
        f"Shape buckets under a mixed-length text load: {b['throughput'] / base:.2f}x the throughput of "
        f"identical-shape batching, {b['throughput'] / f['throughput']:.2f}x FastAPI's; p99 "
        f"{b['p99_us'] / 1000:.1f} ms vs {points['no_buckets']['p99_us'] / 1000:.1f} ms and "
        f"{f['p99_us'] / 1000:.1f} ms (load average at the start {info['loadavg_at_start'][0]:.1f} on "
        f"{info['cores']} cores).", "",
        "| point | inferences/s | vs no_buckets | p50 ms | p99 ms | mean batch | compute us / inference |",
        "|---|---|---|---|---|---|---|", *rows, "",
        "- compute us / inference: the instance's compute time over the measurement (the statistics' "
        "batch_stats compute_infer) divided by the inferences: what one request cost the model, padding "
        "included, without the HTTP and client work around it.",
        "- buckets: ortserve with shape_buckets (bucket_pad input_ids:0, bucket_mask attention_mask, "
        "bucket_outputs last_hidden_state).",
        "- no_buckets: ortserve, the same model and batching config without buckets.",
        "- fastapi: bench/baselines/baseline_fastapi.py, one session.run per request.", "",
        "Commands:", "", "```", *COMMANDS, "```", ""])
    out = RESULTS / ("RESULTS-shape-buckets.md" if args.instances == 1
                     else f"RESULTS-shape-buckets-{args.instances}-instances.md")
    out.write_text(text_)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--window-ms", type=int, default=3000)
    ap.add_argument("--hidden", type=int, default=HIDDEN)
    ap.add_argument("--layers", type=int, default=LAYERS)
    ap.add_argument("--requests", type=int, default=256, help="distinct requests in the mix")
    ap.add_argument("--buckets", default=",".join(map(str, BUCKETS)), help="the shape_buckets of text_buckets")
    ap.add_argument("--instances", type=int, default=1, help="instances of both ortserve models (the budget of 2 "
                    "threads is shared: 2 instances run on one thread each); a report other than 1 is written "
                    "to RESULTS-shape-buckets-<N>-instances.md")
    args = ap.parse_args(argv)
    args.buckets = [int(b) for b in args.buckets.split(",")]
    work = WORK / "buckets"
    repo = work / "repo"
    LOGS.mkdir(parents=True, exist_ok=True)
    write_repository(repo, args.hidden, args.layers, args.buckets, args.instances)
    rng = np.random.default_rng(9)
    lengths = mix_lengths(args.requests, rng)
    write_mix(work / "mix.json", lengths, rng)
    ortserve = lambda log_name: OrtServe(args.ortserve_bin, repo, 2, None, None, log_name=log_name)
    try:
        points = {
            "buckets": measure(args, ortserve("buckets.log"), "text_buckets", work / "mix.json"),
            "no_buckets": measure(args, ortserve("no_buckets.log"), "text_plain", work / "mix.json"),
            "fastapi": measure(args, FastApiBaseline(repo, 2, 1, None), "text_plain", work / "mix.json"),
        }
    finally:
        Procs.stop_all()
    for name, p in points.items():
        log(f"{name}: {p['throughput']:.1f} inf/s, p99 {p['p99_us'] / 1000:.1f} ms, mean batch {p['mean_batch']}, "
            f"compute us/inference {p['compute_us_per_inference']}")
    log(f"wrote {write_report(points, args, lengths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
