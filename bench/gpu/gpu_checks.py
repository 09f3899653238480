#!/usr/bin/env python3
"""The on-GPU checks of the portable GPU bundle (docs/gpu.md), run by the
bundle's run-gpu-checks.sh on the GPU host. Standard library and numpy only.

    python3 checks/gpu_checks.py --bundle DIR --report FILE.md [--work DIR]
        [--scale 1.0] [--deadline-s 240] [--rehearse]

Steps, in order, each with its verdict in the report:
  unit        bin/runtime_gpu_options_test: strict CUDA instances, IOBinding,
              CUDA graphs, outputs kept across runs, numerical check
  load        one server with every model of checks/plan.json's "main"
              repository; each must be READY on CUDAExecutionProvider with
              no fallback; GPU memory it holds
  outputs     the CNN and the MLP (IOBinding off / on, CUDA graphs,
              numerical check enforced; FP32) and TF32, and the bucket
              bench's encoder, against onnxruntime CPU outputs computed when
              the bundle was built
  graphs      CUDA graphs on vs off at batch 1, concurrency 1: p50, p99
  batching    dynamic batching of the CNN vs bin/ortserve_gpu_baseline (in
              process, CUDA + IOBinding on device memory) at the same batch
              sizes (target: at least 0.9x)
  buckets     shape buckets vs identical-shape batching, the bucket bench's
              encoder and length mix (target: 2x)
  sweep       the CNN over a concurrency sweep: throughput, latency, mean
              batch, GPU utilization (nvidia-smi)
  instances   1 and 4 instances of the CNN on one GPU: resident GPU memory
              (nvidia-smi) and throughput
--rehearse runs every step on a machine without a GPU (KIND_CPU instances,
the baseline on the CPU provider, short windows, concurrency at most 8):
it checks the bundle and this script, not the GPU; GPU-only verdicts read
"n/a (rehearsal)". Writes FILE.md and FILE.json (every figure) as it goes;
exits 1 if any check failed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check_tools import (GpuSampler, Server, environment_summary, gpu_memory_used_mib, load, mib,  # noqa: E402
                             run_json, server_gpu_memory_mib)

BATCHING_TARGET = 0.9
BUCKETS_TARGET = 2.0


class Report:
    """The Markdown report and its JSON twin, rewritten after every step."""

    def __init__(self, path: Path, header: list):
        self.path, self.header = path, header
        self.summary, self.sections, self.results = [], [], {}
        self.failed = False

    def add(self, check: str, verdict: str, figures: str, lines: list | None = None, data=None) -> None:
        self.failed |= verdict.startswith("FAIL")
        self.summary.append(f"| {check} | {verdict} | {figures} |")
        if lines:
            self.sections += [f"## {check}", "", *lines, ""]
        self.results[check] = {"verdict": verdict, "figures": figures, "data": data}
        self.write()

    def write(self) -> None:
        text = [*self.header, "", "| check | verdict | figures |", "|---|---|---|", *self.summary, "",
                *self.sections]
        self.path.write_text("\n".join(text) + "\n")
        self.path.with_suffix(".json").write_text(json.dumps(self.results, indent=1, default=str))


class Checks:
    def __init__(self, args):
        self.args = args
        self.bundle = Path(args.bundle).resolve()
        self.work = Path(args.work).resolve()
        self.plan = json.loads((self.bundle / "checks" / "plan.json").read_text())
        self.started = time.monotonic()
        self.env = dict(os.environ)
        self.sampler = GpuSampler() if not args.rehearse else None
        self.servers = []

    # -- helpers
    def seconds(self, s: float) -> float:
        return max(0.5, s * self.args.scale)

    def concurrency(self, c: int) -> int:
        return min(c, 8) if self.args.rehearse else c

    def time_left(self) -> float:
        return self.args.deadline_s - (time.monotonic() - self.started)

    def body(self, key: str) -> str:
        r = self.plan["requests"][key]
        return f"{self.bundle / r['body']}:{r['header_bytes']}"

    def write_repo(self, name: str) -> Path:
        repo = self.work / "repos" / name
        for model, entry in self.plan["servers"][name].items():
            (repo / model / "1").mkdir(parents=True, exist_ok=True)
            config = entry["config"]
            if self.args.rehearse:
                config = config.replace("KIND_GPU", "KIND_CPU")
            (repo / model / "config.pbtxt").write_text(config)
            link = repo / model / "1" / "model.onnx"
            if not link.exists():
                link.symlink_to(self.bundle / entry["model"])
        return repo

    def start_server(self, name: str) -> tuple:
        server = Server(self.bundle, self.write_repo(name), self.work / "logs" / f"{name}.log", self.env).start()
        self.servers.append(server)
        t0 = time.monotonic()
        states = server.wait_models(list(self.plan["servers"][name]), timeout_s=min(240, max(30, self.time_left())))
        return server, states, time.monotonic() - t0

    def mean_batch(self, server: Server, model: str, before: dict) -> float | None:
        after = server.stats(model)
        executions = after["execution_count"] - before["execution_count"]
        return (after["inference_count"] - before["inference_count"]) / executions if executions else None

    def measured(self, server: Server, model: str, concurrency: int, duration: float, bodies=(),
                 body_list: Path | None = None) -> dict:
        before = server.stats(model)
        warmup = self.seconds(1.0)
        t0 = time.monotonic()
        r = load(self.bundle, server.port, model, list(bodies), self.concurrency(concurrency),
                 self.seconds(duration), warmup, body_list, allow_empty=self.args.rehearse)
        t1 = time.monotonic()
        r["mean_batch"] = self.mean_batch(server, model, before)
        r["gpu_util"], r["gpu_mem_mib"] = self.sampler.mean(t0 + warmup, t1) if self.sampler else (None, None)
        return r

    # -- steps
    def unit(self, report: Report) -> None:
        binary = self.bundle / "bin" / "runtime_gpu_options_test"
        done = subprocess.run([str(binary)], cwd=self.bundle, capture_output=True, text=True, timeout=90,
                              env=self.env)
        (self.work / "logs" / "runtime_gpu_options_test.log").write_text(done.stdout + done.stderr)
        gpu_ok = len(re.findall(r"\[       OK \] IoBindingAndCudaGraphs/GpuInstanceTest", done.stdout))
        skipped = re.findall(r"\[  SKIPPED \] (\S+)", done.stdout)
        failed = sorted(set(re.findall(r"\[  FAILED  \] (\S+)", done.stdout)))
        figures = f"rc {done.returncode}, GPU instance tests passed {gpu_ok}/3, skipped {len(set(skipped))}"
        if done.returncode != 0:
            verdict = "FAIL"
        elif self.args.rehearse:
            verdict = "PASS (rehearsal: the GPU tests skip)"
        else:
            verdict = "PASS" if gpu_ok == 3 else "FAIL (the GPU instance tests did not run)"
        reasons = sorted(set(re.findall(r"no usable CUDA here: (.*)", done.stdout)))[:2]
        report.add("unit test (runtime_gpu_options_test)", verdict, figures,
                   [f"- failed: {failed}" if failed else "- failed: none", *(f"- skip reason: {r}" for r in reasons)])

    def load_main(self, report: Report) -> Server:
        idle = gpu_memory_used_mib()
        server, states, seconds = self.start_server("main")
        log = server.log_text()
        problems = [f"{m}: {s} {r}" for m, (s, r) in states.items() if s != "READY"]
        if not self.args.rehearse:
            for model in states:
                if f"{model}:1#0: instance ready: providers [CUDAExecutionProvider" not in log:
                    problems.append(f"{model}: not on CUDAExecutionProvider")
            if "EXECUTION PROVIDER FALLBACK" in log:
                problems.append("EXECUTION PROVIDER FALLBACK in the log")
            for model in (m for m in states if m.endswith("_checked")):
                if f"{model}:1#0: numerical check vs CPU FP32 passed" not in log:
                    problems.append(f"{model}: no passed numerical check in the log")
        memory = server_gpu_memory_mib(server.proc.pid, idle)
        figures = (f"{len(states)} models READY in {seconds:.1f} s, GPU memory {mib(memory)} MiB" if not problems
                   else "; ".join(problems)[:400])
        report.add("load (every model on CUDA)", "FAIL" if problems else "PASS", figures,
                   [f"- {m}: {s} {r}" for m, (s, r) in states.items()],
                   {"seconds": seconds, "gpu_memory_mib": memory, "problems": problems})
        return server

    def outputs(self, report: Report, server: Server) -> None:
        rows, worst, failures = [], 0.0, []
        for check in self.plan["correctness"]:
            model, rtol, atol = check["model"], check["rtol"], check["atol"]
            ratio, max_abs = 0.0, 0.0
            for key in check["requests"]:
                r = self.plan["requests"][key]
                got = server.infer(model, (self.bundle / r["body"]).read_bytes(), r["header_bytes"])
                want = np.load(self.bundle / r["reference"])
                for name in want.files:
                    g, w = got.get(name), want[name]
                    if g is None or g.shape != w.shape:
                        failures.append(f"{model} {key} {name}: shape {None if g is None else g.shape} != {w.shape}")
                        continue
                    err = np.abs(g.astype(np.float64) - w)
                    bound = atol + rtol * np.abs(w)
                    ratio = max(ratio, float(np.max(err / bound))) if np.all(np.isfinite(err)) else float("inf")
                    max_abs = max(max_abs, float(np.max(err)))
            if ratio > 1.0:
                failures.append(f"{model}: error {ratio:.2f}x its tolerance")
            worst = max(worst, ratio)
            rows.append(f"| {model} | {len(check['requests'])} | {rtol:g} / {atol:g} | {max_abs:.3g} | {ratio:.3f} |")
        verdict = "FAIL" if failures else "PASS"
        report.add("outputs vs onnxruntime CPU", verdict,
                   f"{len(self.plan['correctness'])} models, worst error {worst:.3f}x its tolerance"
                   + (f"; {failures[:3]}" if failures else ""),
                   ["| model | requests | rtol / atol | max abs error | worst error / tolerance |",
                    "|---|---|---|---|---|", *rows, "",
                    "An element passes when |served - onnxruntime CPU| <= atol + rtol * |onnxruntime CPU|."],
                   {"failures": failures, "worst": worst})

    def graphs(self, report: Report, server: Server) -> None:
        rows, data, figures = [], {}, []
        log = server.log_text()
        for g in self.plan["graphs"]:
            res = {}
            for state in ("off", "on"):
                res[state] = self.measured(server, g[state], 1, 3.0, [self.body(g["request"])])
            captured = f"{g['on']}:1#0: CUDA graph id" in log or self.args.rehearse
            off, on = res["off"]["latency_us"], res["on"]["latency_us"]
            rows.append(f"| {g['name']} | {off['p50']:.0f} | {off['p99']:.0f} | {on['p50']:.0f} | {on['p99']:.0f} | "
                        f"{off['p50'] / on['p50']:.2f}x | {'yes' if captured else 'NO'} |")
            figures.append(f"{g['name']} p50 {off['p50']:.0f} -> {on['p50']:.0f} us")
            data[g["name"]] = res
        report.add("CUDA graphs on vs off (batch 1)", "INFO" if "NO |" not in "".join(rows) else "FAIL (no graph)",
                   ", ".join(figures),
                   ["Concurrency 1, batch-1 requests, no dynamic batching; latency of the whole HTTP request (us).", "",
                    "| model | off p50 | off p99 | on p50 | on p99 | p50 off / on | graph captured |",
                    "|---|---|---|---|---|---|---|", *rows], data)

    def baseline(self, batch_sizes: list) -> dict:
        b = self.plan["batching"]["baseline"]
        command = [str(self.bundle / "bin" / "ortserve_gpu_baseline"), "--model-path", str(self.bundle / b["model"]),
                   "--batch-sizes", ",".join(map(str, batch_sizes)), "--duration", f"{self.seconds(2.0):.3f}",
                   "--warmup", f"{self.seconds(1.0):.3f}"]
        for spec in b["inputs"]:
            name, dtype, dims, path = spec.split(":")
            command += ["--input", f"{name}:{dtype}:{dims}:{self.bundle / path}"]
        if self.args.rehearse:
            command.append("--cpu")
        (self.work / "logs" / "baseline.command").write_text(" ".join(command) + "\n")
        return {r["batch_size"]: r for r in run_json(command, 300, env=self.env)["results"]}

    def batching(self, report: Report, server: Server) -> None:
        plan = self.plan["batching"]
        sizes = sorted(int(b) for b in plan["models"])
        base = self.baseline(sizes)
        rows, ratios, data = [], {}, {"baseline": base}
        for b in sizes:
            model = plan["models"][str(b)]
            r = self.measured(server, model, 2 * plan["instances_per_model"] * b, 4.0, [self.body(plan["request"])])
            ratios[b] = r["throughput"] / base[b]["inferences_per_s"]
            mb = "-" if r["mean_batch"] is None else f"{r['mean_batch']:.1f}"
            rows.append(f"| {b} | {base[b]['inferences_per_s']:.0f} | {base[b]['run_latency_us']['p50']:.0f} | "
                        f"{self.concurrency(2 * plan['instances_per_model'] * b)} | {r['throughput']:.0f} | {mb} | "
                        f"{r['latency_us']['p50']:.0f} | {r['latency_us']['p99']:.0f} | {ratios[b]:.2f}x |")
            data[b] = r
        verdict = ("n/a (rehearsal)" if self.args.rehearse else
                   "MET" if min(ratios.values()) >= BATCHING_TARGET else "MISSED")
        report.add(f"dynamic batching vs in-process CUDA + IOBinding (target {BATCHING_TARGET}x)", verdict,
                   ", ".join(f"batch {b}: {x:.2f}x" for b, x in ratios.items()),
                   [f"The CNN, batch-1 requests, max_batch_size = preferred batch size = B, "
                    f"{plan['instances_per_model']} GPU instances, queue delay 1 ms; the baseline: one session, "
                    "inputs and outputs on the device, back-to-back runs of batch B.", "",
                    "| B | baseline inf/s | baseline run p50 us | concurrency | ortserve inf/s | mean batch | "
                    "p50 us | p99 us | ortserve / baseline |", "|---|---|---|---|---|---|---|---|---|", *rows], data)

    def buckets(self, report: Report, server: Server) -> None:
        plan = self.plan["buckets"]
        body_list = self.bundle / plan["list"]
        res = {state: self.measured(server, plan[state], plan["concurrency"], 4.0, body_list=body_list)
               for state in ("on", "off")}
        ratio = res["on"]["throughput"] / res["off"]["throughput"]
        rows = [f"| {state} | {plan[state]} | {r['throughput']:.0f} | "
                f"{'-' if r['mean_batch'] is None else format(r['mean_batch'], '.1f')} | "
                f"{r['latency_us']['p50'] / 1000:.2f} | {r['latency_us']['p99'] / 1000:.2f} |" for state, r in res.items()]
        verdict = "n/a (rehearsal)" if self.args.rehearse else "MET" if ratio >= BUCKETS_TARGET else "MISSED"
        report.add(f"shape buckets vs identical-shape batching (target {BUCKETS_TARGET}x)", verdict, f"{ratio:.2f}x",
                   [f"bench/bucket_bench.py's encoder and length mix (lengths 8-128, skewed short), buckets "
                    f"{plan['buckets']}, one GPU instance, concurrency {self.concurrency(plan['concurrency'])}.", "",
                    "| buckets | model | inf/s | mean batch | p50 ms | p99 ms |", "|---|---|---|---|---|---|", *rows],
                   res)

    def sweep(self, report: Report, server: Server) -> None:
        plan = self.plan["sweep"]
        rows, data = [], {}
        for c in plan["concurrency"]:
            r = self.measured(server, plan["model"], c, 2.0, [self.body(plan["request"])])
            data[c] = r
            util = "n/a" if r["gpu_util"] is None else f"{r['gpu_util']:.0f}"
            rows.append(f"| {self.concurrency(c)} | {r['throughput']:.0f} | "
                        f"{'-' if r['mean_batch'] is None else format(r['mean_batch'], '.1f')} | "
                        f"{r['latency_us']['p50']:.0f} | {r['latency_us']['p99']:.0f} | {util} |")
        peak = max(data.values(), key=lambda r: r["throughput"])
        report.add("GPU utilization over a concurrency sweep", "INFO",
                   f"peak {peak['throughput']:.0f} inf/s at concurrency {peak['concurrency']}, GPU "
                   f"{'n/a' if peak['gpu_util'] is None else format(peak['gpu_util'], '.0f') + ' %'}",
                   [f"{plan['model']}: the CNN, max_batch_size 32, 2 GPU instances; GPU utilization: the mean of "
                    "nvidia-smi's readings every 100 ms over the window.", "",
                    "| concurrency | inf/s | mean batch | p50 us | p99 us | GPU util % |", "|---|---|---|---|---|---|",
                    *rows], data)

    def instances(self, report: Report) -> None:
        plan = self.plan["instances"]
        rows, data = [], {}
        for count, name in sorted(plan["servers"].items(), key=lambda kv: int(kv[0])):
            idle = gpu_memory_used_mib()
            server, states, seconds = self.start_server(name)
            try:
                if states[plan["model"]][0] != "READY":
                    raise RuntimeError(f"{name}: {states[plan['model']]}")
                ready = server_gpu_memory_mib(server.proc.pid, idle)
                r = self.measured(server, plan["model"], plan["concurrency"], 3.0, [self.body(plan["request"])])
                r.update(ready_mib=ready, loaded_mib=server_gpu_memory_mib(server.proc.pid, idle), idle_gpu_mib=idle,
                         start_s=seconds)
            finally:
                server.stop()
            data[count] = r
            rows.append(f"| {count} | {seconds:.1f} | {mib(r['ready_mib'])} | {mib(r['loaded_mib'])} | "
                        f"{r['throughput']:.0f} | "
                        f"{'-' if r['mean_batch'] is None else format(r['mean_batch'], '.1f')} | "
                        f"{r['latency_us']['p99']:.0f} |")
        report.add("1 and 4 instances on one GPU", "INFO",
                   ", ".join(f"{c}: {mib(r['loaded_mib'])} MiB, {r['throughput']:.0f} inf/s" for c, r in data.items()),
                   ["The CNN, max_batch_size 32, dynamic batching; GPU memory: nvidia-smi's used_memory of the "
                    "server process (MiB; where it lists no processes, the device's used memory over its reading "
                    f"before the server started), when READY and after the load (concurrency "
                    f"{self.concurrency(plan['concurrency'])}).", "",
                    "| instances | start s | MiB when ready | MiB after load | inf/s | mean batch | p99 us |",
                    "|---|---|---|---|---|---|---|", *rows], data)

    def stop_all(self) -> None:
        for s in self.servers:
            s.stop()
        if self.sampler:
            self.sampler.stop()


def preflight_lines() -> list:
    """run-gpu-checks.sh's preflight (where each CUDA library was found), as a block."""
    path = os.environ.get("ORTSERVE_GPU_PREFLIGHT")
    if not path or not Path(path).is_file():
        return []
    return ["", "Preflight (run-gpu-checks.sh):", "", "```", *Path(path).read_text().splitlines(), "```"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--report", required=True, help="the Markdown report (FILE.json beside it gets every figure)")
    ap.add_argument("--work", default="/tmp/ortserve-gpu-checks", help="repositories and logs")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every measurement window")
    ap.add_argument("--deadline-s", type=float, default=240.0, help="steps that would start later are skipped")
    ap.add_argument("--rehearse", action="store_true", help="no GPU: KIND_CPU instances, CPU baseline")
    args = ap.parse_args(argv)
    checks = Checks(args)
    (checks.work / "logs").mkdir(parents=True, exist_ok=True)
    bundle_info = json.loads((checks.bundle / "BUNDLE.json").read_text())
    report = Report(Path(args.report), [
        "# ortserve GPU bundle: on-GPU checks", "",
        f"Bundle of commit {bundle_info.get('commit')} (built {bundle_info.get('built')}), run "
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')} on {platform.node()}, Python {platform.python_version()}.",
        "Mode: " + ("CPU REHEARSAL (no GPU: figures are the CPU's, GPU verdicts n/a)" if args.rehearse else "GPU"),
        "", *(f"- {line}" for line in environment_summary()), *preflight_lines()])
    server = {}
    on_main = lambda method: (lambda: method(report, server["main"]))
    # (name, seconds it needs at least, needs the main server, what it runs)
    steps = [("unit", 30, False, lambda: checks.unit(report)),
             ("load", 60, False, lambda: server.update(main=checks.load_main(report))),
             ("outputs", 10, True, on_main(checks.outputs)),
             ("graphs", 25, True, on_main(checks.graphs)),
             ("batching", 30, True, on_main(checks.batching)),
             ("buckets", 20, True, on_main(checks.buckets)),
             ("sweep", 25, True, on_main(checks.sweep)),
             ("instances", 40, False, lambda: checks.instances(report))]
    try:
        for name, needs_s, needs_main, step in steps:
            if name == "instances" and "main" in server:
                server.pop("main").stop()  # its GPU memory would count against the instances'
            if needs_main and "main" not in server:
                report.add(name, "SKIPPED", "the main server did not start")
                continue
            if checks.time_left() < needs_s:
                report.add(name, "SKIPPED", f"{checks.time_left():.0f} s left of --deadline-s, needs about {needs_s}")
                continue
            t0 = time.monotonic()
            try:
                step()
            except Exception as e:  # noqa: BLE001  (every failure is reported, the next step still runs)
                report.add(name, "FAIL", f"{type(e).__name__}: {str(e)[:300]}", [f"```\n{e}\n```"])
            print(f"[gpu-checks] {name}: {time.monotonic() - t0:.1f} s", flush=True)
    finally:
        checks.stop_all()
    report.header.append(f"\nTotal {time.monotonic() - checks.started:.0f} s.")
    report.write()
    print("\n".join(report.summary), flush=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
