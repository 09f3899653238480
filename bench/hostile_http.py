#!/usr/bin/env python3
"""Hostile HTTP clients against one or two ortserve builds (docs/limits.md):
what a normal client's latency, the server's CPU and memory, and its log do
while others attack it. The longer measurements behind
tests/integration/test_hostile_http.py, which only checks generous bounds.

    .venv/bin/python bench/hostile_http.py [--binary build/ortserve] [--before /tmp/ortserve-before]
                                           [--seconds 8] [--report bench/results/RESULTS-hostile.md]

For each build (`--before` first, when given), on identity_fp32
(tests/models), one HTTP I/O thread, thread budget 2:
  - a normal client's sequential requests, alone and while two paced attackers
    send (a) 80 KB gzip bombs (80 MiB inflated) to a model that is not there,
    (b) the same bombs to the model, (c) 157-byte JSON bodies whose shape
    claims 64 MiB: p50 and p99, and p99 as a ratio to alone;
  - server CPU per bad request (schedstat of every thread) as a ratio to a
    valid request's, and the peak RSS growth over the bad requests;
  - under a descriptor limit of 64 (soft = hard), 192 idle connections to the
    HTTP port for --seconds: accept-failure log lines per second and the
    server's CPU seconds per second; then 384 to the metrics port under a
    limit of 128, and whether an infer request is answered meanwhile and
    after the connections closed.
Writes its section ("## HTTP and metrics") of bench/results/RESULTS-hostile.md,
keeping the file's other sections (bench/hostile_grpc.py writes its own), and
prints it. `make bench-hostile` runs every bench/hostile_*.py.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import benchlib  # noqa: F401,E402  (bench/lib/ on sys.path)
from hostile_common import REPORT, Server, measure_and_report, percentile, run_id  # noqa: E402
from hostile_clients import (MODEL, claimed_shape_body, close_all, cpu_ns, gzip_bomb,  # noqa: E402
                             open_connections, reset_peak_rss, status_kib, valid_body)

SECTION = "## HTTP and metrics (bench/hostile_http.py)"
# Descriptor limits (soft = hard) of the descriptor episodes: the HTTP port's
# runs out; the metrics port's leaves room for its default limit of 64.
DESCRIPTORS = {"http": 64, "metrics": 128}
ATTACKERS = 2
# Each attacker's pace: a bomb every 250 ms; a claimed shape every 50 ms
# (about 3 KiB/s of 157-byte bodies).
BOMB_INTERVAL_S = 0.25
CLAIM_INTERVAL_S = 0.05
ATTACKS = ("gzip bombs, unknown model", "gzip bombs, the model", "claimed shapes")


def normal_client(srv: Server, seconds: float) -> list[float]:
    """Latencies (ms) of sequential valid requests on one connection."""
    latencies = []
    body = valid_body()
    with requests.Session() as session:
        session.post(srv.infer_url(), data=body, timeout=60)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            r = session.post(srv.infer_url(), data=body, timeout=60)
            latencies.append((time.perf_counter() - start) * 1e3)
            assert r.status_code == 200, r.text
    return latencies


def attacker(url: str, body: bytes, headers: dict, interval_s: float, stop: threading.Event) -> None:
    with requests.Session() as session:
        while not stop.is_set():
            start = time.monotonic()
            try:
                session.post(url, data=body, headers=headers, timeout=60)
            except requests.RequestException:
                pass
            stop.wait(max(0.0, interval_s - (time.monotonic() - start)))


def latency_under(srv: Server, seconds: float, attack: tuple | None) -> tuple[float, float]:
    """p50 and p99 (ms) of the normal client while ATTACKERS send `attack`
    (url, body, headers, interval), or alone."""
    stop = threading.Event()
    threads = [threading.Thread(target=attacker, args=(*attack, stop)) for _ in range(ATTACKERS if attack else 0)]
    for t in threads:
        t.start()
    try:
        latencies = normal_client(srv, seconds)
    finally:
        stop.set()
        for t in threads:
            t.join()
    return percentile(latencies, 0.5), percentile(latencies, 0.99)


def cost(srv: Server, url: str, body: bytes, headers: dict, count: int) -> tuple[float, float, float]:
    """Server CPU µs per request (all threads, and the HTTP I/O thread's) and
    the peak RSS growth (MiB) over `count` requests."""
    with requests.Session() as session:
        session.post(url, data=body, headers=headers, timeout=60)
        rss = status_kib(srv.pid, "VmRSS")
        peak = reset_peak_rss(srv.pid)
        before, before_io = cpu_ns(srv.pid), cpu_ns(srv.pid, "http-io")
        for _ in range(count):
            session.post(url, data=body, headers=headers, timeout=60)
        cpu_us = (cpu_ns(srv.pid) - before) / count / 1e3
        io_us = (cpu_ns(srv.pid, "http-io") - before_io) / count / 1e3
        growth = (status_kib(srv.pid, "VmHWM") - rss) / 1024 if peak else float("nan")
    return cpu_us, io_us, growth


def infer_answered(srv: Server, timeout_s: float) -> bool:
    try:
        return requests.post(srv.infer_url(), data=valid_body(), timeout=timeout_s).status_code == 200
    except requests.RequestException:
        return False


def descriptor_episode(binary: str, repo: Path, work: Path, seconds: float, port_name: str) -> dict:
    """A server with DESCRIPTORS[port_name] descriptors and three times as
    many idle connections to that port for `seconds`: accept-failure lines
    per second, CPU seconds per second, whether an infer request was answered
    meanwhile and after the connections closed."""
    nofile = DESCRIPTORS[port_name]
    srv = Server(binary, repo, work / f"emfile_{port_name}.log", nofile=nofile)
    try:
        port = srv.http_port if port_name == "http" else srv.metrics_port
        lines_before = len(re.findall(r"accept failed", srv.log_text()))
        before = cpu_ns(srv.pid)
        socks = open_connections(port, 3 * nofile)
        try:
            time.sleep(seconds)
            cpu_s = (cpu_ns(srv.pid) - before) / 1e9
            lines = len(re.findall(r"accept failed", srv.log_text())) - lines_before
            during = infer_answered(srv, 5)
        finally:
            close_all(socks)
        after = infer_answered(srv, 15)
        return {"nofile": nofile, "lines_per_s": lines / seconds, "cpu_per_s": cpu_s / seconds, "during": during,
                "after": after}
    finally:
        srv.stop()


def measure(binary: str, repo: Path, work: Path, seconds: float) -> dict:
    bomb = gzip_bomb()
    gz = {"Content-Encoding": "gzip"}
    out = {}
    srv = Server(binary, repo, work / "latency.log")
    try:
        out["alone"] = latency_under(srv, seconds, None)
        attacks = {
            "gzip bombs, unknown model": (srv.infer_url("not_there"), bomb, gz, BOMB_INTERVAL_S, 20),
            "gzip bombs, the model": (srv.infer_url(), bomb, gz, BOMB_INTERVAL_S, 10),
            "claimed shapes": (srv.infer_url(), claimed_shape_body(), {}, CLAIM_INTERVAL_S, 100),
        }
        for name, (url, body, headers, interval, _) in attacks.items():
            out[name] = latency_under(srv, seconds, (url, body, headers, interval))
        out["cost valid"] = cost(srv, srv.infer_url(), valid_body(), {}, 1000)
        for name, (url, body, headers, _, count) in attacks.items():
            out[f"cost {name}"] = cost(srv, url, body, headers, count)
    finally:
        srv.stop()
    out["emfile http"] = descriptor_episode(binary, repo, work, seconds, "http")
    out["emfile metrics"] = descriptor_episode(binary, repo, work, seconds, "metrics")
    return out


def table(label: str, binary: str, m: dict) -> list[str]:
    alone_p99 = m["alone"][1]
    valid_cpu, valid_io, _ = m["cost valid"]
    shown = os.path.relpath(binary, ROOT) if Path(binary).resolve().is_relative_to(ROOT) else binary
    rows = [f"### {label}: `{shown}`", "",
            "| normal client while | p50 ms | p99 ms | p99 / alone |", "|---|---:|---:|---:|"]
    for name in ("alone", *ATTACKS):
        p50, p99 = m[name]
        rows.append(f"| {name} | {p50:.2f} | {p99:.2f} | {p99 / alone_p99:.1f}x |")
    rows += ["", "| request | server CPU µs each | / valid | on the HTTP I/O thread µs | / valid | "
                 "peak RSS growth MiB |", "|---|---:|---:|---:|---:|---:|"]
    for name in ("valid", *ATTACKS):
        cpu_us, io_us, growth = m[f"cost {name}"]
        rows.append(f"| {name} | {cpu_us:.0f} | {cpu_us / valid_cpu:.1f}x | {io_us:.0f} | {io_us / valid_io:.1f}x | "
                    f"{growth:.0f} |")
    rows += ["", "| idle connections (3x the descriptor limit) to | descriptor limit | accept-failure log lines/s | "
                 "server CPU s/s | infer answered meanwhile | after they closed |", "|---|---:|---:|---:|---|---|"]
    for port in ("http", "metrics"):
        e = m[f"emfile {port}"]
        rows.append(f"| {port} port | {e['nofile']} | {e['lines_per_s']:.2f} | {e['cpu_per_s']:.2f} | "
                    f"{'yes' if e['during'] else 'no'} | {'yes' if e['after'] else 'no'} |")
    return rows + [""]


def headline(results: dict) -> str:
    """The line bench_report.py quotes: each figure as before -> after (or after alone)."""
    def both(fn, fmt):
        return " -> ".join(fmt.format(fn(m)) for m in results.values())

    def p99_ratio(name):
        return both(lambda m: m[name][1] / m["alone"][1], "{:.1f}x")

    return ("Hostile clients: a normal client's p99 under gzip bombs to a model that is not there "
            f"{p99_ratio('gzip bombs, unknown model')}, to the model {p99_ratio('gzip bombs, the model')}, "
            f"under claimed shapes {p99_ratio('claimed shapes')} of alone; a claimed shape costs "
            f"{both(lambda m: m['cost claimed shapes'][0] / m['cost valid'][0], '{:.1f}x')} a valid request's CPU; "
            f"out of descriptors {both(lambda m: m['emfile http']['lines_per_s'], '{:.2f}')} log lines/s "
            f"({' -> '.join(results)}).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "build" / "ortserve"))
    parser.add_argument("--before", help="an ortserve build to measure first, for comparison")
    parser.add_argument("--seconds", type=float, default=8.0, help="each latency window and descriptor episode")
    parser.add_argument("--report", type=Path, default=REPORT, help="the report whose section is written")
    args = parser.parse_args()
    builds = ([("before", args.before)] if args.before else []) + [("after", args.binary)]
    lines = [SECTION, "",
             f"{run_id()}; "
             f"`bench/hostile_http.py --seconds {args.seconds:g}{' --before ' + args.before if args.before else ''}`. "
             "Model identity_fp32, one HTTP I/O thread, "
             f"thread budget 2; {ATTACKERS} attackers, a bomb every {BOMB_INTERVAL_S * 1e3:.0f} ms or a claimed "
             f"shape every {CLAIM_INTERVAL_S * 1e3:.0f} ms each; the normal client sends sequential 16-element "
             "FP32 requests on one connection. CPU is every server thread's schedstat time; peak RSS is VmHWM "
             "after a reset, over the bad requests.", ""]
    measure_and_report("hostile_http", builds, [MODEL], lambda binary, repo, work: measure(binary, repo, work, args.seconds), headline, table, lines, args.report, SECTION)


if __name__ == "__main__":
    main()
