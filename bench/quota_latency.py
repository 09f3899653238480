#!/usr/bin/env python3
"""Per-client quotas under overload (issue 37, docs/limits.md): does a client
within its quota keep its latency while another client overloads the server,
and is the other held to its configured rate? Over HTTP and over gRPC. The
issue's figures: the calm client's p99 while the greedy client is refused
against its p99 alone, target <= 1.5x; the greedy client's accepted rate
within 10% of its configured rate. tests/integration/test_quotas.py checks
the refusals (429 with Retry-After, RESOURCE_EXHAUSTED) and that the calm
client is never refused; timing is measured here.

    .venv/bin/python bench/quota_latency.py [--binary build/ortserve] [--seconds 8]
                                            [--rounds 3] [--connections 32]
                                            [--protocol http,grpc]
                                            [--report bench/results/RESULTS-quotas.md]

One server (identity_fp32 from tests/models, one HTTP I/O thread, thread
budget 2, --client-quota-config with greedy at 20 requests/s (burst 5) and
calm at 200/s (burst 20), --client-id-header X-Client-Id, which gRPC calls
carry as the metadata key x-client-id). Each round runs, for each protocol in
turn, two phases of --seconds each, so that what else runs on the machine
falls on all alike:
  alone:     the calm client's paced sequential requests (one every 20 ms,
             about 50/s; HTTP: Python requests on one keep-alive connection,
             gRPC: tritonclient.grpc's sync client), nothing else;
  overload:  the same, while the greedy client (HTTP: wrk, one thread,
             --connections connections; gRPC: bench/lib/grpc_greedy.py,
             grpc.aio in one thread, --connections calls in flight) sends
             requests as fast as the server answers them: almost all refused.
Reports per protocol the calm client's p50/p99 per phase (all rounds pooled),
their ratio, its refusals, and the greedy client's answers per second, share
refused, accepted per second against its configured rate, and its own CPU.
Writes bench/results/RESULTS-quotas.md and prints it. A measurement, not a
test: nothing asserts on timing.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import requests
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import benchlib  # noqa: F401,E402  (bench/lib/ on sys.path)
import make_test_models  # noqa: E402
from bench_common import git_head  # noqa: E402
from hostile_common import Server, percentile  # noqa: E402

MODEL = "identity_fp32"
HEADER = "X-Client-Id"
GREEDY = {"rate": 20, "burst": 5}
CONFIG = {
    "default": {"rate": 1, "burst": 2},
    "clients": {"greedy": GREEDY, "calm": {"rate": 200, "burst": 20}},
}
BODY = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                               "data": [1.5, -2.0, 3.25, 4.0]}]}).encode()
PACE_S = 0.02
REPORT = ROOT / "bench" / "results" / "RESULTS-quotas.md"
WRK_SCRIPT = ROOT / "bench" / "lib" / "wrk_post.lua"
GRPC_GREEDY = ROOT / "bench" / "lib" / "grpc_greedy.py"


def paced(send, seconds: float) -> tuple[list[float], int]:
    """The calm client: send() (True when answered, False when refused) once
    every PACE_S for `seconds`; the latencies (ms) and the refusals."""
    latencies, refused = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        ok = send()
        latencies.append((time.perf_counter() - start) * 1e3)
        refused += not ok
        time.sleep(max(0.0, PACE_S - (time.perf_counter() - start)))
    return latencies, refused


def calm_http(srv: Server, seconds: float) -> tuple[list[float], int]:
    """Python requests, one keep-alive connection."""
    with requests.Session() as session:
        return paced(lambda: session.post(srv.infer_url(MODEL), data=BODY, headers={HEADER: "calm"},
                                          timeout=30).status_code == 200, seconds)


def calm_grpc(srv: Server, seconds: float) -> tuple[list[float], int]:
    """tritonclient.grpc's sync client, one channel; the id in the call's metadata."""
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc_port}")
    inp = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(np.array([[1.5, -2.0, 3.25, 4.0]], dtype=np.float32))

    def send() -> bool:
        try:
            client.infer(MODEL, [inp], headers={HEADER.lower(): "calm"}, client_timeout=30)
            return True
        except InferenceServerException:
            return False
    try:
        return paced(send, seconds)
    finally:
        client.close()


def run_greedy(cmd: list[str], env: dict, seconds: float, marker: str) -> tuple[dict, float]:
    """Runs a greedy load to its end: the JSON after `marker` in its output,
    and the CPU seconds it used (this process's only other child, the server,
    runs on, so the children's rusage grows by the load's alone)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=seconds + 60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    line = next((x for x in done.stdout.splitlines() if x.startswith(marker)), None)
    if line is None:
        raise RuntimeError(f"{cmd[0]} printed no summary: {done.stdout} {done.stderr}")
    return json.loads(line[len(marker):]), cpu_s


def greedy_http(srv: Server, body_file: Path, seconds: float, connections: int) -> dict:
    """wrk (one thread, closed loop) as the greedy client; its WRK_JSON summary
    (bench/lib/wrk_summary.lua) in the form greedy_grpc gives."""
    cmd = ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds:.0f}s", "--timeout", "10s",
           "-H", f"{HEADER}: greedy", "-s", str(WRK_SCRIPT), srv.infer_url(MODEL)]
    w, cpu_s = run_greedy(cmd, {"WRK_BODY_FILE": str(body_file)}, seconds, "WRK_JSON ")
    refused = w["errors"]["status"]  # non-2xx answers: the 429s
    return {"requests": w["requests"], "ok": w["requests"] - refused, "refused": refused,
            "other_errors": sum(w["errors"].values()) - refused, "duration_s": w["duration_us"] / 1e6,
            "cpu_s": cpu_s}


def greedy_grpc(srv: Server, body_file: Path, seconds: float, connections: int) -> dict:
    """bench/lib/grpc_greedy.py (grpc.aio, one thread, `connections` calls in
    flight on one channel) as the greedy client."""
    del body_file  # the gRPC load builds its own request
    cmd = [sys.executable, str(GRPC_GREEDY), "--url", f"127.0.0.1:{srv.grpc_port}", "--model", MODEL,
           "--header", HEADER, "--client-id", "greedy", "--concurrency", str(connections),
           "--seconds", f"{seconds:g}"]
    g, cpu_s = run_greedy(cmd, {}, seconds, "GREEDY_JSON ")
    return {"requests": g["requests"], "ok": g["ok"], "refused": g["resource_exhausted"],
            "other_errors": g["other_errors"], "duration_s": g["duration_s"], "cpu_s": cpu_s}


LEGS = {"http": (calm_http, greedy_http), "grpc": (calm_grpc, greedy_grpc)}


def measure(binary: str, seconds: float, rounds: int, connections: int, protocols: list[str]) -> dict:
    """Per protocol: the calm client's latencies alone and under overload, its
    refusals, and the greedy client's summary of each round. Each round runs
    both phases of every protocol in turn, on one server."""
    with tempfile.TemporaryDirectory(prefix="quota_latency_") as tmp:
        work = Path(tmp)
        repo = make_test_models.build_test_repository(work / "repo", [MODEL])
        quotas = work / "quotas.json"
        quotas.write_text(json.dumps(CONFIG))
        body_file = work / "body.json"
        body_file.write_bytes(BODY)
        srv = Server(binary, repo, work / "server.log", ready_model=MODEL,
                     extra_args=("--client-quota-config", str(quotas), "--client-id-header", HEADER))
        m = {p: {"alone": [], "overload": [], "refused": {"alone": 0, "overload": 0}, "greedy": []}
             for p in protocols}
        try:
            for p in protocols:
                LEGS[p][0](srv, 1.0)  # warm-up: connections, allocator
            for r in range(rounds):
                for p in protocols:
                    calm, greedy = LEGS[p]
                    print(f"[quota_latency] round {r + 1}/{rounds} {p}: alone", flush=True)
                    lat, ref = calm(srv, seconds)
                    m[p]["alone"] += lat
                    m[p]["refused"]["alone"] += ref
                    print(f"[quota_latency] round {r + 1}/{rounds} {p}: overload", flush=True)
                    result: dict = {}
                    runner = threading.Thread(target=lambda: result.update(
                        greedy(srv, body_file, seconds + 2, connections)))
                    runner.start()
                    time.sleep(1.0)  # the greedy client's connections open and its load is on
                    lat, ref = calm(srv, seconds)
                    runner.join()
                    m[p]["overload"] += lat
                    m[p]["refused"]["overload"] += ref
                    m[p]["greedy"].append(result)
        finally:
            srv.stop()
    return m


def summary(m: dict) -> dict:
    """The figures of one protocol's rounds, pooled."""
    g = m["greedy"]
    duration = sum(x["duration_s"] for x in g)
    s = {"p50a": percentile(m["alone"], 0.5), "p99a": percentile(m["alone"], 0.99),
         "p50o": percentile(m["overload"], 0.5), "p99o": percentile(m["overload"], 0.99),
         "answers_s": sum(x["requests"] for x in g) / duration,
         "refused_pct": 100.0 * sum(x["refused"] for x in g) / max(1, sum(x["requests"] for x in g)),
         "other_errors": sum(x["other_errors"] for x in g),
         "accepted_s": sum(x["ok"] for x in g) / duration,
         # A full bucket at each round's start lets `burst` more through.
         "expected_s": GREEDY["rate"] + len(g) * GREEDY["burst"] / duration,
         "cpu_pct": 100.0 * sum(x["cpu_s"] for x in g) / duration}
    s["ratio"] = s["p99o"] / s["p99a"]
    s["rate_ratio"] = s["accepted_s"] / GREEDY["rate"]
    return s


def report(m: dict, args, load_start: float, load_end: float) -> list[str]:
    command = (f".venv/bin/python bench/quota_latency.py --binary {args.binary} --seconds {args.seconds:g} "
               f"--rounds {args.rounds} --connections {args.connections} --protocol {','.join(m)}")
    greedy_tool = {"http": f"wrk (one thread, closed loop, {args.connections} connections)",
                   "grpc": f"bench/lib/grpc_greedy.py (grpc.aio, one thread, {args.connections} calls in "
                           f"flight on one channel)"}
    calm_tool = {"http": "Python requests, one keep-alive connection",
                 "grpc": "tritonclient.grpc sync client, one channel"}
    refusal = {"http": "429", "grpc": "RESOURCE_EXHAUSTED"}
    lines = ["# Per-client quotas under overload", "",
             f"Commit {git_head()}, {time.strftime('%Y-%m-%d')}, load average {load_start:.1f} at the start and "
             f"{load_end:.1f} at the end (2 shared cores).", ""]
    sums = {p: summary(m[p]) for p in m}
    for p, s in sums.items():
        verdict = "meets" if s["ratio"] <= 1.5 else "misses"
        within = "within" if abs(s["rate_ratio"] - 1.0) <= 0.1 else "not within"
        lines += [f"Quotas over {p.upper() if p == 'http' else 'gRPC'}: the calm client's p99 while another "
                  f"client overloads the server is {s['ratio']:.2f}x its p99 alone ({s['p99o']:.2f} vs "
                  f"{s['p99a']:.2f} ms; p50 {s['p50o']:.2f} vs {s['p50a']:.2f} ms; target <= 1.5x: {verdict} it); "
                  f"the greedy client got {s['answers_s']:.0f} answers/s, {s['refused_pct']:.1f}% of them "
                  f"{refusal[p]}, and {s['accepted_s']:.2f} accepted/s against its configured "
                  f"{GREEDY['rate']}/s ({s['rate_ratio']:.3f}x, {within} 10%; the burst allows "
                  f"{s['expected_s']:.2f}/s); the calm client was refused {m[p]['refused']['overload']} times of "
                  f"{len(m[p]['overload'])}.", ""]
    lines += [f"Command: `{command}` (`make bench-quotas`).", "",
              "| protocol | phase | calm requests | refused | p50 ms | p99 ms |", "|---|---|---|---|---|---|"]
    for p, s in sums.items():
        lines += [f"| {p} | alone | {len(m[p]['alone'])} | {m[p]['refused']['alone']} | {s['p50a']:.2f} | "
                  f"{s['p99a']:.2f} |",
                  f"| {p} | greedy at {args.connections} in flight | {len(m[p]['overload'])} | "
                  f"{m[p]['refused']['overload']} | {s['p50o']:.2f} | {s['p99o']:.2f} |"]
    lines += ["", "| protocol | greedy client | answers/s | refused | other errors | accepted/s | "
              "accepted / configured | client CPU (% of a core) |", "|---|---|---|---|---|---|---|---|"]
    for p, s in sums.items():
        lines += [f"| {p} | {greedy_tool[p].split(' (')[0]} | {s['answers_s']:.0f} | {s['refused_pct']:.1f}% | "
                  f"{s['other_errors']} | {s['accepted_s']:.2f} | {s['rate_ratio']:.3f} | {s['cpu_pct']:.0f} |"]
    lines += ["", f"Setup: {MODEL}, one HTTP I/O thread, `--thread-budget 2`; quotas greedy {GREEDY['rate']}/s "
              f"(burst {GREEDY['burst']}), calm 200/s (burst 20), the id in `{HEADER}` (HTTP header; over gRPC "
              f"the metadata key `{HEADER.lower()}`); the calm client sends one request every "
              f"{PACE_S * 1e3:.0f} ms ("
              + "; ".join(f"{p}: {calm_tool[p]}" for p in m) + "); the greedy client runs for the phase plus 2 s ("
              + "; ".join(f"{p}: {greedy_tool[p]}" for p in m) + f"); {args.rounds} rounds of {args.seconds:g} s "
              f"per phase, alternating, pooled. Accepted/s is the greedy client's answered calls over its run; "
              f"its bucket is full at each run's start (the alone phase refills it), so `burst` more pass per "
              f"run than the rate alone. Client CPU is the greedy process's user+system time over its run "
              f"(the Python client's start-up included). Client and server share the machine's 2 cores, so "
              f"the overload phase also measures the CPU the greedy client and the refusals take from the "
              f"calm client's requests."]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--protocol", default="http,grpc", help="comma-separated: http, grpc (default both)")
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args()
    protocols = [p for p in args.protocol.split(",") if p]
    if not protocols or any(p not in LEGS for p in protocols):
        ap.error(f"--protocol: a comma-separated list of {', '.join(LEGS)}, got {args.protocol!r}")
    load_start = os.getloadavg()[0]
    m = measure(args.binary, args.seconds, args.rounds, args.connections, protocols)
    lines = report(m, args, load_start, os.getloadavg()[0])
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
