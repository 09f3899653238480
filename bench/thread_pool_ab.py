#!/usr/bin/env python3
"""A/B of ortserve's ORT thread pools: --ort-thread-pool shared (one process-wide pool)
against per-session (a pool per instance), on a compute-bound model.

    .venv/bin/python bench/thread_pool_ab.py --repo bench/work/repo --model cnn \
        --instances 4 --concurrency 8 --rounds 3

Each round starts a fresh server per mode, in alternating order (A B, B A, ...), and
measures throughput with perf_analyzer (HTTP, closed loop). Prints one line per run
and the median per mode; the 1-minute load average is printed with every run, since
the figures are only comparable on an otherwise quiet machine."""
import argparse
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_procs import Procs, run_bounded
from server_runs import Ortserve, loadavg

ROOT = Path(__file__).resolve().parents[1]


def model_copy(repo, model, instances, work):
    dst = Path(work) / "repo"
    shutil.copytree(Path(repo) / model, dst / model)
    config = dst / model / "config.pbtxt"
    text = re.sub(r"instance_group \[.*\]", f"instance_group [ {{ count: {instances}, kind: KIND_CPU }} ]",
                  config.read_text())
    config.write_text(text)
    return dst


def throughput(url, model, concurrency, interval_ms):
    pa = Path(sys.executable).parent / "perf_analyzer"
    import nvidia.cuda_runtime  # perf_analyzer needs libcudart even without a GPU
    cudart = Path(list(nvidia.cuda_runtime.__path__)[0]) / "lib"
    cmd = [pa, "-m", model, "-u", url, "-i", "http", "--concurrency-range", str(concurrency),
           "--measurement-interval", str(interval_ms), "--max-trials", "3", "--stability-percentage", "1000"]
    rc, out = run_bounded(cmd, 120, {"LD_LIBRARY_PATH": str(cudart)}, record=False)
    m = re.search(r"Throughput: ([\d.]+) infer/sec", out)
    if rc != 0 or not m:
        raise RuntimeError(out[-2000:])
    p99 = re.search(r"p99 latency: (\d+) usec", out)
    return float(m.group(1)), int(p99.group(1)) if p99 else -1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--repo", default=str(ROOT / "bench" / "work" / "repo"))
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--thread-budget", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval-ms", type=int, default=3000)
    args = ap.parse_args()
    results = {"shared": [], "per-session": []}
    with tempfile.TemporaryDirectory(prefix="ortserve-pool-ab-") as work:
        repo = model_copy(args.repo, args.model, args.instances, work)
        try:
            for r in range(args.rounds):
                order = ["shared", "per-session"] if r % 2 == 0 else ["per-session", "shared"]
                for mode in order:
                    srv = Ortserve(args.ortserve_bin, repo, Path(work) / f"{mode}-{r}.log",
                                   ["--thread-budget", str(args.thread_budget), "--ort-thread-pool", mode])
                    try:
                        srv.wait_ready()
                        load_before = loadavg()
                        inf_s, p99 = throughput(srv.url, args.model, args.concurrency, args.interval_ms)
                        results[mode].append(inf_s)
                        print(f"round {r} {mode:12s} {inf_s:8.1f} inf/s  p99 {p99 / 1000:7.1f} ms  "
                              f"load {load_before}->{loadavg()}", flush=True)
                    finally:
                        srv.stop()
        finally:
            Procs.stop_all()
    shared, per_session = statistics.median(results["shared"]), statistics.median(results["per-session"])
    print(f"median: shared {shared:.1f} inf/s, per-session {per_session:.1f} inf/s, "
          f"shared/per-session {shared / per_session:.3f}")


if __name__ == "__main__":
    main()
