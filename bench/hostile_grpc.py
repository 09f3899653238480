#!/usr/bin/env python3
"""Hostile gRPC clients against one or two ortserve builds (docs/limits.md,
"gRPC"): what the server's memory, a normal gRPC client's latency and the
gRPC port do while others attack it. The longer measurements behind
tests/integration/test_hostile_grpc.py, which only checks generous bounds.

    .venv/bin/python bench/hostile_grpc.py [--binary build/ortserve] [--before /tmp/ortserve-before]
                                           [--seconds 8] [--report bench/results/RESULTS-hostile.md]

For each build (`--before` first, when given), with its default gRPC limits,
one HTTP I/O thread and thread budget 2:
  - unfinished messages: one raw HTTP/2 connection with 100 ModelInfer calls
    that each announce 60 MiB and send all but its last byte as fast as flow
    control allows (a call the server ends is opened again), for 4 x --seconds
    or until the server has grown by 6 GiB; the same without credentials against
    --grpc-restricted-protocol=inference:...;
  - unread answers: one ModelStreamInfer stream sending 3,000 requests whose
    answers are 1 MiB (expand_1mib) and never reading them;
  - for each: the server's peak RSS growth (VmHWM after a reset), and a normal
    tritonclient.grpc client's sequential identity_fp32 requests meanwhile: p50,
    p99 and p99 as a ratio to alone;
  - under a descriptor limit of 64 (soft = hard), 192 idle connections to the
    gRPC port for --seconds: accept-failure log lines per second (gRPC's own
    "Failed accept4", or ortserve's "grpc: accept failed"), the server's CPU
    seconds per second, whether a gRPC request is answered meanwhile and after
    the connections closed, and whether HTTP answers after.
Writes its section ("## gRPC") of bench/results/RESULTS-hostile.md, keeping
the file's other sections, and prints it. `make bench-hostile` runs every
bench/hostile_*.py.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np
import requests
import tritonclient.grpc as grpcclient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import benchlib  # noqa: F401,E402  (bench/lib/ on sys.path)
from hostile_clients import MODEL, close_all, cpu_ns, open_connections, reset_peak_rss, status_kib  # noqa: E402
from hostile_grpc_clients import EXPAND, UnfinishedCalls, UnreadStream, expand_request  # noqa: E402
from hostile_common import REPORT, Server, measure_and_report, percentile, run_id  # noqa: E402

SECTION = "## gRPC (bench/hostile_grpc.py)"
CALLS, CLAIMED = 100, 60 << 20
UNREAD_REQUESTS = 3000
KEY, SECRET = "infer-key", "s3cret"
GROWTH_STOP = 6 << 30  # a growth without bound is stopped here
# Unfinished messages run this many --seconds: long enough for a server
# without a bound to grow well past the default quota (1 GiB) even when the
# attacker (one Python thread) gets 100 MiB/s through on a loaded machine.
UNFINISHED_FACTOR = 4
NOFILE = 64
ATTACKS = ("unfinished messages", "unfinished messages, no credentials", "unread stream answers")


def rss(pid: int) -> int:
    return status_kib(pid, "VmRSS") << 10


def normal_client(url: str, headers: dict, stop: threading.Event, latencies: list[float]) -> None:
    """Sequential identity_fp32 requests on one channel until `stop`."""
    client = grpcclient.InferenceServerClient(url)
    inp = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_data_from_numpy(np.arange(16, dtype=np.float32).reshape(1, 16))
    client.infer(MODEL, [inp], headers=headers, client_timeout=60)
    while not stop.is_set():
        start = time.perf_counter()
        try:
            client.infer(MODEL, [inp], headers=headers, client_timeout=60)
            latencies.append((time.perf_counter() - start) * 1e3)
        except Exception:  # noqa: BLE001 - a failed request counts as its time
            latencies.append((time.perf_counter() - start) * 1e3)
    client.close()


def under(srv: Server, attack, headers: dict) -> dict:
    """Runs attack(srv) (None: a pause) while the normal client sends with
    `headers`; the client's p50/p99 and the peak RSS growth in MiB."""
    stop, latencies = threading.Event(), []
    client = threading.Thread(target=normal_client,
                              args=(f"127.0.0.1:{srv.grpc_port}", headers, stop, latencies))
    before = rss(srv.pid)
    peak = reset_peak_rss(srv.pid)
    client.start()
    try:
        detail = attack(srv) if attack else time.sleep(SECONDS) or ""
    finally:
        stop.set()
        client.join()
    growth = ((status_kib(srv.pid, "VmHWM") << 10) if peak else rss(srv.pid)) - before
    return {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99), "growth": growth / 2**20,
            "detail": detail, "alive": srv.proc.poll() is None}


def unfinished(metadata: dict | None):
    def attack(srv: Server) -> str:
        pid, before = srv.pid, rss(srv.pid)
        with UnfinishedCalls(srv.grpc_port, CALLS, CLAIMED, metadata) as calls:
            calls.run(UNFINISHED_FACTOR * SECONDS, stop=lambda: rss(pid) - before > GROWTH_STOP)
            statuses = ", ".join(f"{n}x {code}" for code, n in sorted(calls.statuses.items())) or "none"
            return (f"{calls.bytes_sent >> 20} MiB sent on {calls.opened} calls; answered: {statuses}; "
                    f"{calls.resets} resets")
    return attack


def unread(srv: Server) -> str:
    pid, before = srv.pid, rss(srv.pid)
    with UnreadStream(srv.grpc_port, [expand_request(i) for i in range(UNREAD_REQUESTS)]) as stream:
        stream.run(SECONDS, stop=lambda: rss(pid) - before > GROWTH_STOP)
        runs = requests_run(srv)
        return f"{runs} of {UNREAD_REQUESTS} requests run"


def wait_ready(srv: Server, model: str) -> None:
    deadline = time.monotonic() + 60
    while requests.get(f"{srv.base}/v2/models/{model}/ready", timeout=5).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{model} not ready")
        time.sleep(0.1)


def requests_run(srv: Server) -> int:
    r = requests.get(f"{srv.base}/v2/models/{EXPAND}/stats", timeout=10)
    return int(r.json()["model_stats"][0]["inference_count"])


def grpc_answered(srv: Server, timeout_s: float) -> bool:
    try:
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc_port}")
        ok = client.is_server_live(client_timeout=timeout_s)
        client.close()
        return ok
    except Exception:  # noqa: BLE001
        return False


def http_answered(srv: Server, timeout_s: float) -> bool:
    try:
        return requests.get(f"{srv.base}/v2/health/live", timeout=timeout_s).status_code == 200
    except requests.RequestException:
        return False


def descriptor_episode(binary: str, repo: Path, work: Path) -> dict:
    srv = Server(binary, repo, work / "emfile_grpc.log", nofile=NOFILE)
    try:
        before = cpu_ns(srv.pid)
        socks = open_connections(srv.grpc_port, 3 * NOFILE)
        try:
            time.sleep(SECONDS)
            cpu_s = (cpu_ns(srv.pid) - before) / 1e9
            lines = len(re.findall(r"Failed accept4|grpc: accept failed", srv.log_text()))
            during = grpc_answered(srv, 5)
        finally:
            close_all(socks)
        time.sleep(2)
        after = grpc_answered(srv, 10)
        http_after = http_answered(srv, 15)
        return {"lines_per_s": lines / SECONDS, "cpu_per_s": cpu_s / SECONDS, "during": during, "after": after,
                "http_after": http_after}
    finally:
        srv.stop()


def measure(binary: str, repo: Path, work: Path) -> dict:
    out = {}
    for name, args, attack in (("alone", (), None), (ATTACKS[0], (), unfinished(None)),
                               (ATTACKS[1], (f"--grpc-restricted-protocol=inference:{KEY}={SECRET}",),
                                unfinished(None)),
                               (ATTACKS[2], (), unread)):
        srv = Server(binary, repo, work / f"{len(out)}.log", extra_args=args, ready_model=EXPAND)
        try:
            wait_ready(srv, MODEL)
            out[name] = under(srv, attack, {f"triton-grpc-protocol-{KEY}": SECRET} if args else {})
        finally:
            srv.stop()
    out["emfile"] = descriptor_episode(binary, repo, work)
    return out


def table(label: str, binary: str, m: dict) -> list[str]:
    alone = m["alone"]["p99"]
    shown = os.path.relpath(binary, ROOT) if Path(binary).resolve().is_relative_to(ROOT) else binary
    rows = [f"### {label}: `{shown}`", "",
            "| while | peak RSS growth MiB | normal client p50 ms | p99 ms | p99 / alone | server alive | attack |",
            "|---|---:|---:|---:|---:|---|---|"]
    for name in ("alone", *ATTACKS):
        r = m[name]
        rows.append(f"| {name} | {r['growth']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['p99'] / alone:.1f}x | "
                    f"{'yes' if r['alive'] else 'no'} | {r['detail']} |")
    e = m["emfile"]
    rows += ["", "| idle connections (3x the descriptor limit) to | descriptor limit | accept-failure lines/s | "
                 "server CPU s/s | gRPC answered meanwhile | gRPC after they closed | HTTP after they closed |",
             "|---|---:|---:|---:|---|---|---|",
             f"| gRPC port | {NOFILE} | {e['lines_per_s']:.2f} | {e['cpu_per_s']:.2f} | "
             f"{'yes' if e['during'] else 'no'} | {'yes' if e['after'] else 'no'} | "
             f"{'yes' if e['http_after'] else 'no'} |"]
    return rows + [""]


def headline(results: dict) -> str:
    def both(fn, fmt):
        return " -> ".join(fmt.format(fn(m)) for m in results.values())

    def growth(name):
        return both(lambda m: m[name]["growth"], "{:.0f}")

    def p99(name):
        return both(lambda m: m[name]["p99"] / m["alone"]["p99"], "{:.1f}x")

    return (f"Hostile gRPC clients: peak RSS growth (MiB) under unfinished messages {growth(ATTACKS[0])}, "
            f"without credentials {growth(ATTACKS[1])}, under unread stream answers {growth(ATTACKS[2])}; a normal "
            f"client's p99 {p99(ATTACKS[0])}, {p99(ATTACKS[1])}, {p99(ATTACKS[2])} of alone "
            f"({' -> '.join(results)}).")


SECONDS = 8.0


def main() -> None:
    global SECONDS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "build" / "ortserve"))
    parser.add_argument("--before", help="an ortserve build to measure first, for comparison")
    parser.add_argument("--seconds", type=float, default=SECONDS,
                        help="each attack (unfinished messages: 4x) and the descriptor episode")
    parser.add_argument("--report", type=Path, default=REPORT, help="the report whose section is written")
    args = parser.parse_args()
    SECONDS = args.seconds
    builds = ([("before", args.before)] if args.before else []) + [("after", args.binary)]
    lines = [SECTION, "",
             f"{run_id()}; "
             f"`bench/hostile_grpc.py --seconds {args.seconds:g}{' --before ' + args.before if args.before else ''}`. "
             f"Each build with its default gRPC limits; {CALLS} calls announcing {CLAIMED >> 20} MiB on one "
             f"connection for {UNFINISHED_FACTOR * args.seconds:g} s, {UNREAD_REQUESTS} unread 1 MiB answers on one "
             "stream; the normal client sends sequential "
             "16-element FP32 requests (tritonclient.grpc) during each attack. Peak RSS is VmHWM after a reset.", ""]
    measure_and_report("hostile_grpc", builds, [MODEL, EXPAND], measure, headline, table, lines, args.report, SECTION)


if __name__ == "__main__":
    main()
