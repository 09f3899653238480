#!/usr/bin/env python3
"""Per-client quotas under overload (issue 37, docs/limits.md): does a client
within its quota keep its latency while another client overloads the server?
The issue's figure: the calm client's p99 while the greedy client is refused
against its p99 alone, target <= 1.5x. tests/integration/test_quotas.py checks
the refusals and that the calm client is never refused; timing is measured here.

    .venv/bin/python bench/quota_latency.py [--binary build/ortserve] [--seconds 8]
                                            [--rounds 3] [--connections 32]
                                            [--report bench/results/RESULTS-quotas.md]

One server (identity_fp32 from tests/models, one HTTP I/O thread, thread
budget 2, --client-quota-config with greedy at 20 requests/s (burst 5) and
calm at 200/s (burst 20), --client-id-header X-Client-Id). Rounds alternate
two phases of --seconds each, so that what else runs on the machine falls on
both alike:
  alone:     the calm client's paced sequential requests (one every 20 ms,
             about 50/s, one keep-alive connection), nothing else;
  overload:  the same, while wrk (one thread, --connections connections,
             closed loop) sends the greedy client's requests as fast as the
             server answers them: almost all 429.
Reports the calm client's p50/p99 per phase (all rounds pooled), their ratio,
its refusals, and the greedy client's answers per second and share of 429.
Writes bench/results/RESULTS-quotas.md and prints it. A measurement, not a
test: nothing asserts on timing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import benchlib  # noqa: F401,E402  (bench/lib/ on sys.path)
import make_test_models  # noqa: E402
from bench_common import git_head  # noqa: E402
from hostile_common import Server, percentile  # noqa: E402

MODEL = "identity_fp32"
HEADER = "X-Client-Id"
CONFIG = {
    "default": {"rate": 1, "burst": 2},
    "clients": {"greedy": {"rate": 20, "burst": 5}, "calm": {"rate": 200, "burst": 20}},
}
BODY = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                               "data": [1.5, -2.0, 3.25, 4.0]}]}).encode()
PACE_S = 0.02
REPORT = ROOT / "bench" / "results" / "RESULTS-quotas.md"
WRK_SCRIPT = ROOT / "bench" / "lib" / "wrk_post.lua"


def calm_client(srv: Server, seconds: float) -> tuple[list[float], int]:
    """Latencies (ms) of the calm client's paced requests, and its refusals."""
    latencies, refused = [], 0
    with requests.Session() as session:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            r = session.post(srv.infer_url(MODEL), data=BODY, headers={HEADER: "calm"}, timeout=30)
            latencies.append((time.perf_counter() - start) * 1e3)
            if r.status_code != 200:
                refused += 1
            time.sleep(max(0.0, PACE_S - (time.perf_counter() - start)))
    return latencies, refused


def greedy_wrk(srv: Server, body_file: Path, seconds: float, connections: int) -> dict:
    """wrk as the greedy client; its WRK_JSON summary (bench/lib/wrk_summary.lua)."""
    cmd = ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds:.0f}s", "--timeout", "10s",
           "-H", f"{HEADER}: greedy", "-s", str(WRK_SCRIPT), srv.infer_url(MODEL)]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "WRK_BODY_FILE": str(body_file)},
                          timeout=seconds + 60)
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary: {done.stdout} {done.stderr}")
    return json.loads(line[len("WRK_JSON "):])


def measure(binary: str, seconds: float, rounds: int, connections: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="quota_latency_") as tmp:
        work = Path(tmp)
        repo = make_test_models.build_test_repository(work / "repo", [MODEL])
        quotas = work / "quotas.json"
        quotas.write_text(json.dumps(CONFIG))
        body_file = work / "body.json"
        body_file.write_bytes(BODY)
        srv = Server(binary, repo, work / "server.log", ready_model=MODEL,
                     extra_args=("--client-quota-config", str(quotas), "--client-id-header", HEADER))
        try:
            calm_client(srv, 1.0)  # warm-up: connections, allocator
            alone, loaded, greedy = [], [], []
            refused = {"alone": 0, "overload": 0}
            for r in range(rounds):
                print(f"[quota_latency] round {r + 1}/{rounds}: alone", flush=True)
                lat, ref = calm_client(srv, seconds)
                alone += lat
                refused["alone"] += ref
                print(f"[quota_latency] round {r + 1}/{rounds}: overload", flush=True)
                result: dict = {}
                runner = threading.Thread(target=lambda: result.update(
                    greedy_wrk(srv, body_file, seconds + 2, connections)))
                runner.start()
                time.sleep(1.0)  # wrk's connections open and its load is on
                lat, ref = calm_client(srv, seconds)
                runner.join()
                loaded += lat
                refused["overload"] += ref
                greedy.append(result)
        finally:
            srv.stop()
    return {"alone": alone, "overload": loaded, "refused": refused, "greedy": greedy}


def report(m: dict, args, load_start: float, load_end: float) -> list[str]:
    p50a, p99a = percentile(m["alone"], 0.5), percentile(m["alone"], 0.99)
    p50o, p99o = percentile(m["overload"], 0.5), percentile(m["overload"], 0.99)
    answered = sum(g["requests"] for g in m["greedy"])
    not_ok = sum(g["errors"]["status"] for g in m["greedy"])
    greedy_s = sum(g["duration_us"] for g in m["greedy"]) / 1e6
    ratio = p99o / p99a
    verdict = "meets" if ratio <= 1.5 else "misses"
    command = (f".venv/bin/python bench/quota_latency.py --binary {args.binary} --seconds {args.seconds:g} "
               f"--rounds {args.rounds} --connections {args.connections}")
    return [
        "# Per-client quotas under overload",
        "",
        f"Commit {git_head()}, {time.strftime('%Y-%m-%d')}, load average {load_start:.1f} at the start and "
        f"{load_end:.1f} at the end (2 shared cores).",
        "",
        f"Quotas: the calm client's p99 while another client overloads the server is {ratio:.2f}x its p99 "
        f"alone ({p99o:.2f} vs {p99a:.2f} ms; p50 {p50o:.2f} vs {p50a:.2f} ms; target <= 1.5x: {verdict} it); "
        f"the greedy client got {answered / greedy_s:.0f} answers/s, {100.0 * not_ok / max(1, answered):.1f}% "
        f"of them 429; the calm client was refused {m['refused']['overload']} times of {len(m['overload'])}.",
        "",
        f"Command: `{command}` (`make bench-quotas`).",
        "",
        "| phase | calm requests | refused | p50 ms | p99 ms |",
        "|---|---|---|---|---|",
        f"| alone | {len(m['alone'])} | {m['refused']['alone']} | {p50a:.2f} | {p99a:.2f} |",
        f"| greedy at {args.connections} connections | {len(m['overload'])} | {m['refused']['overload']} | "
        f"{p50o:.2f} | {p99o:.2f} |",
        "",
        f"Setup: {MODEL}, one HTTP I/O thread, `--thread-budget 2`; quotas greedy 20/s (burst 5), calm "
        f"200/s (burst 20); the calm client (Python requests, one keep-alive connection) sends one request "
        f"every {PACE_S * 1e3:.0f} ms; the greedy client is wrk (one thread, closed loop, "
        f"{args.connections} connections); {args.rounds} rounds of {args.seconds:g} s per phase, alternating, "
        f"pooled. Client and server share the machine's 2 cores, so the overload phase also measures the "
        f"CPU wrk and the refusals take from the calm client's requests.",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args()
    load_start = os.getloadavg()[0]
    m = measure(args.binary, args.seconds, args.rounds, args.connections)
    lines = report(m, args, load_start, os.getloadavg()[0])
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
