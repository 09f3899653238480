#!/usr/bin/env python3
"""Many small models in one ortserve process: resident memory, threads, load time, p99
of requests spread over every model, and idle CPU.

    .venv/bin/python bench/many_models.py --models 100 --modes shared,per-session

Per --ort-thread-pool mode: generates --models small MLPs ([-1,64] -> Gemm 64 -> Relu ->
Gemm 64, one CPU instance each), starts ortserve, and reports the seconds to READY,
VmRSS, the threads (all, and ORT's: ort-pool-N / ort-<model>; all again after the
requests, which start each model's watchdog), the CPU the idle process
uses over --idle-secs, and the latency of --requests requests (JSON over HTTP, binary-free,
--concurrency client threads, each picking a model at random).

    .venv/bin/python bench/many_models.py --models 200 --on-demand

--on-demand (--model-load-on-demand=true, shared pool): VmRSS with every model listed and
none loaded against an empty repository (the cost of an idle-but-listed model), the cold
start of each model's first request (p50/p99, one model after another, outputs checked),
VmRSS once all are loaded, and then the --requests mix over the loaded models, with
ortserve_model_loads_total{reason="on_demand"} checked to equal the model count.
--width W makes every model two W x W layers (default 64: 33 KiB; 2048: 32 MiB), for
the cold start by model size.

    .venv/bin/python bench/many_models.py --models 200 --budget-fits 20 --requests 4000 --concurrency 16

--budget-fits N (on demand, --model-memory-budget = N models' accounted cost; N >= --models:
every model is loaded first, the all-loaded baseline): --requests
requests with Zipf popularity (--zipf-s) over all the models from --concurrency clients,
every output checked; VmRSS sampled throughout against the empty-repository VmRSS plus
the budget; p50/p99; evictions and loads from the metrics (loads - evictions must equal
the models resident); the accounted memory never over the budget.

    .venv/bin/python bench/many_models.py --cycles 1000

--cycles N: two models and a budget that fits one; requests alternate between them, so
each one loads one model and evicts the other: VmRSS after a warm-up of 50 cycles and
after N more."""
import argparse
import concurrent.futures
import random
import re
import tempfile
import threading
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
WIDTH = 64


def set_width(width):
    """Every model, request and reference of this run uses `width` (module-wide, as the
    helpers below read WIDTH)."""
    global WIDTH
    WIDTH = width


def small_mlp(seed):
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32), "w0"),
             numpy_helper.from_array(np.zeros(WIDTH, np.float32), "b0"),
             numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32), "w1"),
             numpy_helper.from_array(np.zeros(WIDTH, np.float32), "b1")]
    nodes = [helper.make_node("Gemm", ["INPUT0", "w0", "b0"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w1", "b1"], ["OUTPUT0"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [-1, WIDTH])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [-1, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ortserve-bench")
    model.ir_version = 8
    return model


def write_repo(repo, count):
    for i in range(count):
        d = Path(repo) / f"m{i:03d}"
        (d / "1").mkdir(parents=True, exist_ok=True)
        onnx.save(small_mlp(i), str(d / "1" / "model.onnx"))
        (d / "config.pbtxt").write_text(
            f'name: "m{i:03d}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
            f'input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]\n'
            f'output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]\n'
            'instance_group [ { count: 1, kind: KIND_CPU } ]\n')


def latencies(url, count, n_requests, concurrency):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, WIDTH], "datatype": "FP32", "data": [0.25] * WIDTH}]}
    local = __import__("threading").local()

    def one(i):
        if not hasattr(local, "s"):
            local.s = requests.Session()
        model = f"m{random.Random(i).randrange(count):03d}"
        t0 = time.perf_counter()
        r = local.s.post(f"http://{url}/v2/models/{model}/infer", json=body, timeout=60)
        r.raise_for_status()
        return time.perf_counter() - t0

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        return sorted(pool.map(one, range(n_requests)))


def run_mode(binary, repo, mode, args, work):
    srv = Ortserve(binary, repo, work / f"ortserve-{mode}.log",
                   ["--thread-budget", str(args.thread_budget), "--ort-thread-pool", mode])
    try:
        ready_s = srv.wait_ready()
        load_s = srv.metric_sum("ortserve_model_load_duration_seconds")
        time.sleep(1.0)
        cpu0 = srv.cpu_seconds()
        time.sleep(args.idle_secs)
        idle_cpu = srv.cpu_seconds() - cpu0
        threads = srv.threads_by_name()
        rss_ready = srv.rss_kib()
        lat = latencies(srv.url, args.models, args.requests, args.concurrency)
        rss_after = srv.rss_kib()
        threads_after = sum(srv.threads_by_name().values())
        ort = sum(n for name, n in threads.items() if name.startswith("ort-"))
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
        print(f"{mode}: {args.models} models READY {ready_s:.2f} s after the start (loads {load_s:.2f} s "
              f"in all); VmRSS {rss_ready / 1024:.0f} MiB "
              f"(after requests {rss_after / 1024:.0f} MiB); threads {sum(threads.values())} "
              f"(ORT {ort}; {threads_after} after requests); idle CPU {idle_cpu:.2f} s over {args.idle_secs:.0f} s; "
              f"{args.requests} requests over all models, concurrency {args.concurrency}: "
              f"p50 {p(0.50):.1f} ms, p99 {p(0.99):.1f} ms; load {loadavg()}", flush=True)
    finally:
        srv.stop()


def first_requests(url, count):
    """The latency of each model's first request, one model after another (seconds, sorted);
    every answer is checked against numpy."""
    x = np.full((1, WIDTH), 0.25, np.float32)
    body = {"inputs": [{"name": "INPUT0", "shape": [1, WIDTH], "datatype": "FP32", "data": x.ravel().tolist()}]}
    session, out = requests.Session(), []
    for i in range(count):
        t0 = time.perf_counter()
        r = session.post(f"http://{url}/v2/models/m{i:03d}/infer", json=body, timeout=120)
        out.append(time.perf_counter() - t0)
        r.raise_for_status()
        want = expected(i, x)
        got = np.array(r.json()["outputs"][0]["data"], np.float32).reshape(want.shape)
        check_output(got, want)
    return sorted(out)


def run_on_demand(binary, repo, args, work):
    flags = ["--thread-budget", str(args.thread_budget), "--model-load-on-demand=true"]
    (work / "empty").mkdir(exist_ok=True)
    empty = Ortserve(binary, work / "empty", work / "ortserve-empty.log", flags)
    try:
        empty.wait_ready()
        time.sleep(1.0)
        rss_empty = empty.rss_kib()
    finally:
        empty.stop()
    srv = Ortserve(binary, repo, work / "ortserve-on-demand.log", flags)
    try:
        ready_s = srv.wait_ready()
        time.sleep(1.0)
        rss_listed = srv.rss_kib()
        cold = first_requests(srv.url, args.models)
        rss_loaded = srv.rss_kib()
        lat = latencies(srv.url, args.models, args.requests, args.concurrency)
        loads = srv.metric_sum('ortserve_model_loads_total{reason="on_demand"}')
        p = lambda v, q: v[min(len(v) - 1, int(q * len(v)))] * 1000  # noqa: E731
        print(f"on-demand, width {WIDTH} ({model_cost(repo) / 2**20:.2f} MiB accounted a model): {args.models} models listed, ready {ready_s:.2f} s after the start; VmRSS empty "
              f"repository {rss_empty / 1024:.1f} MiB, {args.models} listed {rss_listed / 1024:.1f} MiB "
              f"({(rss_listed - rss_empty) / args.models:.1f} KiB per listed model), all loaded "
              f"{rss_loaded / 1024:.1f} MiB ({(rss_loaded - rss_listed) / args.models:.0f} KiB per loaded model); "
              f"first request per model (cold start, sequential): p50 {p(cold, 0.50):.1f} ms, "
              f"p99 {p(cold, 0.99):.1f} ms; then {args.requests} requests, concurrency {args.concurrency}: "
              f"p50 {p(lat, 0.50):.1f} ms, p99 {p(lat, 0.99):.1f} ms; on-demand loads {loads:.0f}; "
              f"load {loadavg()}", flush=True)
        if int(loads) != args.models:
            raise SystemExit(f"ortserve_model_loads_total{{reason=on_demand}} is {loads}, not {args.models}")
    finally:
        srv.stop()


# A version's accounted cost: OVERHEAD + FILE_FACTOR x its folder's bytes (src/repository/MemoryBudget.h).
OVERHEAD, FILE_FACTOR = 384 * 1024, 1.25


def check_output(got, want):
    # Float sums of WIDTH products of N(0, 1) weights: outputs and their
    # rounding grow with the width.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, WIDTH / 64) ** 2)


def expected(i, x):
    inits = {t.name: numpy_helper.to_array(t) for t in small_mlp(i).graph.initializer}
    return np.maximum(x @ inits["w0"] + inits["b0"], 0) @ inits["w1"] + inits["b1"]


def model_cost(repo):
    files = sum(f.stat().st_size for f in (Path(repo) / "m000" / "1").iterdir())
    return OVERHEAD + int(FILE_FACTOR * files)


def empty_rss(binary, flags, work):
    (work / "empty").mkdir(exist_ok=True)
    empty = Ortserve(binary, work / "empty", work / "ortserve-empty.log", flags)
    try:
        empty.wait_ready()
        time.sleep(1.0)
        return empty.rss_kib()
    finally:
        empty.stop()


def accounted_memory(srv):
    text = requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(r"^ortserve_model_memory_bytes\{[^}]*\} (\S+)$", text, re.M))


def zipf_mix(url, count, n_requests, concurrency, s):
    """n_requests requests, model i+1 with weight 1/(i+1)^s; each output checked. Latencies (s), sorted."""
    weights = 1.0 / np.arange(1, count + 1) ** s
    picks = np.random.default_rng(7).choice(count, size=n_requests, p=weights / weights.sum())
    x = np.full((1, WIDTH), 0.25, np.float32)
    body = {"inputs": [{"name": "INPUT0", "shape": [1, WIDTH], "datatype": "FP32", "data": x.ravel().tolist()}]}
    wants = {}
    local = threading.local()

    def one(i):
        if not hasattr(local, "s"):
            local.s = requests.Session()
        m = int(picks[i])
        t0 = time.perf_counter()
        r = local.s.post(f"http://{url}/v2/models/m{m:03d}/infer", json=body, timeout=120)
        took = time.perf_counter() - t0
        if r.status_code != 200:
            raise SystemExit(f"m{m:03d}: HTTP {r.status_code} {r.text}")
        want = wants.setdefault(m, expected(m, x))
        got = np.array(r.json()["outputs"][0]["data"], np.float32).reshape(want.shape)
        check_output(got, want)
        return took

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        return sorted(pool.map(one, range(n_requests)))


def run_budget(binary, repo, args, work):
    cost = model_cost(repo)
    budget = args.budget_fits * cost
    flags = ["--thread-budget", str(args.thread_budget), "--model-load-on-demand=true",
             f"--model-memory-budget={budget}"]
    rss_empty = empty_rss(binary, flags, work)
    srv = Ortserve(binary, repo, work / "ortserve-budget.log", flags)
    try:
        srv.wait_ready()
        if args.budget_fits >= args.models:  # the baseline: every model loaded before the mix
            first_requests(srv.url, args.models)
        peak, accounted_peak, done = [0], [0.0], threading.Event()

        def sample():
            while not done.wait(0.2):
                peak[0] = max(peak[0], srv.rss_kib())
                accounted_peak[0] = max(accounted_peak[0], accounted_memory(srv))

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            lat = zipf_mix(srv.url, args.models, args.requests, args.concurrency, args.zipf_s)
        finally:
            done.set()
            sampler.join()
        loads = srv.metric_sum('ortserve_model_loads_total{reason="on_demand"}')
        evictions = srv.metric_sum("ortserve_model_evictions_total")
        resident = len(re.findall(r"^ortserve_model_memory_bytes\{", requests.get(
            f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10).text, re.M))
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
        print(f"budget: {args.models} models, budget {budget / 1024:.0f} KiB (fits {args.budget_fits} at "
              f"{cost / 1024:.0f} KiB each); {args.requests} requests, Zipf s={args.zipf_s}, concurrency "
              f"{args.concurrency}, all outputs checked: p50 {p(0.50):.1f} ms, p99 {p(0.99):.1f} ms; "
              f"on-demand loads {loads:.0f}, evictions {evictions:.0f}, resident at the end {resident}; "
              f"accounted peak {accounted_peak[0] / 1024:.0f} KiB; VmRSS empty repository "
              f"{rss_empty / 1024:.1f} MiB, peak {peak[0] / 1024:.1f} MiB (empty + budget = "
              f"{(rss_empty + budget / 1024) / 1024:.1f} MiB); load {loadavg()}", flush=True)
        if int(loads - evictions) != resident or accounted_peak[0] > budget:
            raise SystemExit("loads - evictions != resident models, or the accounted memory went over the budget")
    finally:
        srv.stop()


def run_cycles(binary, repo, args, work):
    budget = model_cost(repo) + model_cost(repo) // 2
    flags = ["--thread-budget", str(args.thread_budget), "--model-load-on-demand=true",
             f"--model-memory-budget={budget}"]
    srv = Ortserve(binary, repo, work / "ortserve-cycles.log", flags)
    body = {"inputs": [{"name": "INPUT0", "shape": [1, WIDTH], "datatype": "FP32", "data": [0.25] * WIDTH}]}
    session = requests.Session()

    def cycles(n):
        for i in range(n):
            for m in (0, 1):
                session.post(f"http://{srv.url}/v2/models/m{m:03d}/infer", json=body, timeout=60).raise_for_status()

    try:
        srv.wait_ready()
        cycles(50)
        rss_before = srv.rss_kib()
        t0 = time.perf_counter()
        cycles(args.cycles)
        took = time.perf_counter() - t0
        rss_after = srv.rss_kib()
        evictions = srv.metric_sum("ortserve_model_evictions_total")
        print(f"cycles: {args.cycles} load/evict cycles of two models (budget fits one) in {took:.1f} s; "
              f"evictions {evictions:.0f}; VmRSS after 50 warm-up cycles {rss_before / 1024:.1f} MiB, after "
              f"{args.cycles} more {rss_after / 1024:.1f} MiB ({(rss_after - rss_before) / rss_before * 100:+.1f}%); "
              f"load {loadavg()}", flush=True)
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--modes", default="shared,per-session")
    ap.add_argument("--thread-budget", type=int, default=2)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--idle-secs", type=float, default=10.0)
    ap.add_argument("--on-demand", action="store_true",
                    help="measure --model-load-on-demand instead of the --modes")
    ap.add_argument("--budget-fits", type=int, default=0,
                    help="measure --model-memory-budget fitting this many models under a Zipf mix")
    ap.add_argument("--zipf-s", type=float, default=1.1)
    ap.add_argument("--cycles", type=int, default=0, help="measure this many load/evict cycles (RSS before/after)")
    ap.add_argument("--width", type=int, default=WIDTH,
                    help="the MLPs' width: 2 x width^2 FP32 weights (64: 33 KiB a model, 1024: 8 MiB, 2048: 32 MiB); "
                    "with --on-demand, the cold start of models of that size")
    args = ap.parse_args()
    set_width(args.width)
    if args.cycles:
        args.models = 2
        args.modes = ""
    with tempfile.TemporaryDirectory(prefix="ortserve-many-") as tmp:
        work = Path(tmp)
        write_repo(work / "repo", args.models)
        try:
            special = args.on_demand or args.budget_fits or args.cycles
            if args.on_demand:
                run_on_demand(args.ortserve_bin, work / "repo", args, work)
            if args.budget_fits:
                run_budget(args.ortserve_bin, work / "repo", args, work)
            if args.cycles:
                run_cycles(args.ortserve_bin, work / "repo", args, work)
            for mode in [] if special else args.modes.split(","):
                run_mode(args.ortserve_bin, work / "repo", mode, args, work)
        finally:
            Procs.stop_all()


if __name__ == "__main__":
    main()
