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
                                            [--compare /tmp/ortserve-main]
                                            [--server-cpus 0 --client-cpus 1]
                                            [--report bench/results/RESULTS-quotas.md]

--compare measures another build in the same rounds (paired before/after).
--server-cpus / --client-cpus pin the server and both clients to CPU sets of
their own (default unpinned: all share the machine), to tell the server's
share of the calm client's tail from the load generator's.

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
from bench_procs import tree_cpu_seconds  # noqa: E402
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
ALL_CPUS = os.sched_getaffinity(0)
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


def parse_cpus(text: str | None) -> set[int] | None:
    """A taskset-style CPU list ("0", "1-3", "0,2"); None stays None (unpinned)."""
    if not text:
        return None
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def start_server(binary: str, repo: Path, work: Path, quotas: Path, server_cpus: set[int] | None,
                 client_cpus: set[int] | None, tag: str) -> Server:
    """One server, pinned to `server_cpus` when given: it inherits this
    thread's affinity at its start (its thread pools included), then this
    thread (the calm client and every load generator it starts) moves to
    `client_cpus`."""
    if server_cpus is not None:
        os.sched_setaffinity(0, server_cpus)
    try:
        return Server(binary, repo, work / f"server-{tag}.log", ready_model=MODEL,
                      extra_args=("--client-quota-config", str(quotas), "--client-id-header", HEADER))
    finally:
        os.sched_setaffinity(0, client_cpus if client_cpus is not None else ALL_CPUS)


def measure(binaries: list[str], seconds: float, rounds: int, connections: int, protocols: list[str],
            server_cpus: set[int] | None = None, client_cpus: set[int] | None = None) -> dict:
    """Per binary and protocol: the calm client's latencies alone and under
    overload, its refusals, and the greedy client's summary of each round.
    Each round runs both phases of every protocol against every binary in
    turn (one server per binary, all started first), so that what else runs
    on the machine falls on all alike."""
    with tempfile.TemporaryDirectory(prefix="quota_latency_") as tmp:
        work = Path(tmp)
        repo = make_test_models.build_test_repository(work / "repo", [MODEL])
        quotas = work / "quotas.json"
        quotas.write_text(json.dumps(CONFIG))
        body_file = work / "body.json"
        body_file.write_bytes(BODY)
        servers: list[Server] = []
        m = {b: {p: {"alone": [], "overload": [], "refused": {"alone": 0, "overload": 0}, "greedy": []}
                 for p in protocols} for b in binaries}
        try:
            for i, b in enumerate(binaries):
                servers.append(start_server(b, repo, work, quotas, server_cpus, client_cpus, str(i)))
            for srv in servers:
                for p in protocols:
                    LEGS[p][0](srv, 1.0)  # warm-up: connections, allocator
            for r in range(rounds):
                for b, srv in zip(binaries, servers):
                    for p in protocols:
                        run_round(m[b][p], srv, p, body_file, seconds, connections, f"round {r + 1}/{rounds} {b} {p}")
        finally:
            for srv in servers:
                srv.stop()
    return m


def run_round(m: dict, srv: Server, protocol: str, body_file: Path, seconds: float, connections: int,
              label: str) -> None:
    """One round of one protocol on one server: the calm client alone, then
    while the greedy client overloads; appended to `m`."""
    calm, greedy = LEGS[protocol]
    print(f"[quota_latency] {label}: alone", flush=True)
    lat, ref = calm(srv, seconds)
    m["alone"] += lat
    m["refused"]["alone"] += ref
    print(f"[quota_latency] {label}: overload", flush=True)
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(greedy(srv, body_file, seconds + 2, connections)))
    server_cpu = tree_cpu_seconds(srv.pid)
    runner.start()
    time.sleep(1.0)  # the greedy client's connections open and its load is on
    lat, ref = calm(srv, seconds)
    runner.join()
    result["server_cpu_s"] = tree_cpu_seconds(srv.pid) - server_cpu
    m["overload"] += lat
    m["refused"]["overload"] += ref
    m["greedy"].append(result)


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
         "cpu_pct": 100.0 * sum(x["cpu_s"] for x in g) / duration,
         # The calm client's ~50 requests/s are in it too: a few percent at most.
         "server_us": 1e6 * sum(x["server_cpu_s"] for x in g) / max(1, sum(x["requests"] for x in g)),
         "server_pct": 100.0 * sum(x["server_cpu_s"] for x in g) / duration}
    s["ratio"] = s["p99o"] / s["p99a"]
    s["rate_ratio"] = s["accepted_s"] / GREEDY["rate"]
    return s


def pinning(args) -> str:
    """How server and clients were placed on the machine's CPUs."""
    if not args.server_cpus and not args.client_cpus:
        return "unpinned: client and server share all the machine's CPUs"
    return (f"server on CPUs {args.server_cpus or 'all'}, both clients (calm and greedy) on CPUs "
            f"{args.client_cpus or 'all'} (sched_setaffinity, inherited by each process's threads)")


def report(m_all: dict, args, load_start: float, load_end: float) -> list[str]:
    protocols = list(next(iter(m_all.values())))
    command = (f".venv/bin/python bench/quota_latency.py --binary {args.binary} "
               + "".join(f"--compare {b} " for b in args.compare)
               + f"--seconds {args.seconds:g} --rounds {args.rounds} --connections {args.connections} "
               f"--protocol {','.join(protocols)}"
               + (f" --server-cpus {args.server_cpus}" if args.server_cpus else "")
               + (f" --client-cpus {args.client_cpus}" if args.client_cpus else ""))
    greedy_tool = {"http": f"wrk (one thread, closed loop, {args.connections} connections)",
                   "grpc": f"bench/lib/grpc_greedy.py (grpc.aio, one thread, {args.connections} calls in "
                           f"flight on one channel)"}
    calm_tool = {"http": "Python requests, one keep-alive connection",
                 "grpc": "tritonclient.grpc sync client, one channel"}
    refusal = {"http": "429", "grpc": "RESOURCE_EXHAUSTED"}
    lines = ["# Per-client quotas under overload", "",
             f"Commit {git_head()}, {time.strftime('%Y-%m-%d')}, load average {load_start:.1f} at the start and "
             f"{load_end:.1f} at the end ({os.cpu_count()} shared cores); {pinning(args)}.", ""]
    sums = {b: {p: summary(m[p]) for p in m} for b, m in m_all.items()}
    for b, m in m_all.items():
        for p, s in sums[b].items():
            verdict = "meets" if s["ratio"] <= 1.5 else "misses"
            within = "within" if abs(s["rate_ratio"] - 1.0) <= 0.1 else "not within"
            lines += [f"`{b}`, quotas over {p.upper() if p == 'http' else 'gRPC'}: the calm client's p99 while "
                      f"another client overloads the server is {s['ratio']:.2f}x its p99 alone ({s['p99o']:.2f} vs "
                      f"{s['p99a']:.2f} ms; p50 {s['p50o']:.2f} vs {s['p50a']:.2f} ms; target <= 1.5x: {verdict} "
                      f"it); the greedy client got {s['answers_s']:.0f} answers/s, {s['refused_pct']:.1f}% of them "
                      f"{refusal[p]}, and {s['accepted_s']:.2f} accepted/s against its configured "
                      f"{GREEDY['rate']}/s ({s['rate_ratio']:.3f}x, {within} 10%; the burst allows "
                      f"{s['expected_s']:.2f}/s); the calm client was refused {m[p]['refused']['overload']} times "
                      f"of {len(m[p]['overload'])}.", ""]
    lines += [f"Command: `{command}` (`make bench-quotas`).", "",
              "| binary | protocol | phase | calm requests | refused | p50 ms | p99 ms | p99 ratio |",
              "|---|---|---|---|---|---|---|---|"]
    for b, m in m_all.items():
        for p, s in sums[b].items():
            lines += [f"| {b} | {p} | alone | {len(m[p]['alone'])} | {m[p]['refused']['alone']} | "
                      f"{s['p50a']:.2f} | {s['p99a']:.2f} | |",
                      f"| {b} | {p} | greedy at {args.connections} in flight | {len(m[p]['overload'])} | "
                      f"{m[p]['refused']['overload']} | {s['p50o']:.2f} | {s['p99o']:.2f} | {s['ratio']:.2f} |"]
    lines += ["", "| binary | protocol | greedy client | answers/s | refused | refused (count) | other errors | "
              "accepted/s | accepted / configured | client CPU (% of a core) | server CPU (% of a core) | "
              "server CPU per greedy request (us) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for b, m in m_all.items():
        for p, s in sums[b].items():
            lines += [f"| {b} | {p} | {greedy_tool[p].split(' (')[0]} | {s['answers_s']:.0f} | "
                      f"{s['refused_pct']:.1f}% | {sum(x['refused'] for x in m[p]['greedy'])} | "
                      f"{s['other_errors']} | {s['accepted_s']:.2f} | {s['rate_ratio']:.3f} | {s['cpu_pct']:.0f} | "
                      f"{s['server_pct']:.0f} | {s['server_us']:.1f} |"]
    lines += ["", f"Setup: {MODEL}, one HTTP I/O thread, `--thread-budget 2`; quotas greedy {GREEDY['rate']}/s "
              f"(burst {GREEDY['burst']}), calm 200/s (burst 20), the id in `{HEADER}` (HTTP header; over gRPC "
              f"the metadata key `{HEADER.lower()}`); the calm client sends one request every "
              f"{PACE_S * 1e3:.0f} ms ("
              + "; ".join(f"{p}: {calm_tool[p]}" for p in protocols) + "); the greedy client runs for the phase "
              "plus 2 s (" + "; ".join(f"{p}: {greedy_tool[p]}" for p in protocols) + f"); {args.rounds} rounds of "
              f"{args.seconds:g} s per phase, alternating between binaries and protocols, pooled per binary and "
              f"protocol. Accepted/s is the greedy client's answered calls over its run; "
              f"its bucket is full at each run's start (the alone phase refills it), so `burst` more pass per "
              f"run than the rate alone. Client CPU is the greedy process's user+system time over its run "
              f"(the Python client's start-up included); server CPU is the server process's user+system time "
              f"over the same run (all threads, the calm client's requests included), also per greedy request. "
              f"Placement: {pinning(args)}; unpinned, the overload "
              f"phase also measures the CPU the greedy client takes from the calm client's requests."]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--compare", action="append", default=[], metavar="BINARY",
                    help="another build measured in the same rounds (e.g. main's), repeatable")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--protocol", default="http,grpc", help="comma-separated: http, grpc (default both)")
    ap.add_argument("--server-cpus", help="CPU list (taskset style: 0 or 0-1 or 0,2) for the server; default: "
                                          "unpinned")
    ap.add_argument("--client-cpus", help="CPU list for the calm and the greedy clients; default: unpinned")
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args()
    protocols = [p for p in args.protocol.split(",") if p]
    if not protocols or any(p not in LEGS for p in protocols):
        ap.error(f"--protocol: a comma-separated list of {', '.join(LEGS)}, got {args.protocol!r}")
    try:
        server_cpus, client_cpus = parse_cpus(args.server_cpus), parse_cpus(args.client_cpus)
    except ValueError:
        ap.error(f"--server-cpus/--client-cpus: CPU lists such as 0 or 0-1 or 0,2, got "
                 f"{args.server_cpus!r} / {args.client_cpus!r}")
    for cpus in (server_cpus, client_cpus):
        if cpus is not None and not cpus <= ALL_CPUS:
            ap.error(f"CPUs {sorted(cpus - ALL_CPUS)} are not available here (have {sorted(ALL_CPUS)})")
    load_start = os.getloadavg()[0]
    m = measure([args.binary, *args.compare], args.seconds, args.rounds, args.connections, protocols,
                server_cpus, client_cpus)
    lines = report(m, args, load_start, os.getloadavg()[0])
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
