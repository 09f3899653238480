#!/usr/bin/env python3
"""Scale-out on one machine with real parts: ortserve replicas behind HAProxy
(bench/lib/scaleout_cluster.py), under a constant open-loop load to 127.0.0.1.

  rolling   every replica in turn gets SIGTERM, exits, restarts and is ready
            again (a rolling update); counts failed and lost requests
  kill      one replica SIGKILLed: through the strict frontend (no retry of a
            request a replica took) only the requests in flight then may fail;
            through the safe frontend HAProxy re-sends them; counts both
  scaling   closed-loop throughput (wrk) straight to one replica, and through
            HAProxy to 1, 2 and 3 replicas sharing the same cores (the thread
            budgets add up to the core count): what the load balancer costs

Writes bench/results/scaleout.json and bench/results/RESULTS-scaleout.md
(linked from bench/RESULTS.md, "Other benches"). Nothing is asserted here;
tests/integration/test_scaleout.py checks the zero-loss claims.

  .venv/bin/python bench/scaleout.py --ortserve-bin build/ortserve [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import BENCH, LIB, ROOT, machine_info
from scaleout_cluster import (MODEL, HAProxy, OpenLoopLoad, Replica, build_repository,
                              infer_body, summarize)

PATH = f"/v2/models/{MODEL}/infer"


def start_cluster(args, work: pathlib.Path, n: int, budget: int):
    replicas = [Replica(args.ortserve_bin, args.repo, work / "logs", f"r{i}_{n}", thread_budget=budget,
                        exit_timeout_secs=args.exit_timeout).start() for i in range(n)]
    for r in replicas:
        r.wait_ready()
    lb = HAProxy(replicas, work / f"haproxy_{n}").start()
    lb.wait_all_up()
    return replicas, lb


def stop_cluster(replicas, lb):
    lb.stop()
    for r in replicas:
        r.stop()


def rolling_restart(args, replicas, lb) -> dict:
    load = OpenLoopLoad(lb.safe_port, PATH, infer_body(), args.rate).start()
    time.sleep(args.settle)
    events = []
    for r in replicas:
        t0 = time.monotonic()
        r.signal(signal.SIGTERM)
        rc = r.wait_exit()
        r.start()
        r.wait_ready()
        lb.wait_all_up()
        events.append({"replica": r.name, "exit_code": rc, "seconds_to_ready_again": round(time.monotonic() - t0, 2)})
        time.sleep(args.settle)
    outcomes = load.stop()
    return {"rate_rps": args.rate, "events": events, "haproxy": lb.retries(), **summarize(outcomes)}


def kill_each(args, replicas, lb, frontend: str, victims) -> dict:
    """SIGKILL each victim in turn under load (restarting it before the next)."""
    port = lb.strict_port if frontend == "strict" else lb.safe_port
    load = OpenLoopLoad(port, PATH, infer_body(args.kill_rows), args.rate).start()
    time.sleep(args.settle)
    before = lb.retries()
    kill_times, outages = [], []
    for victim in victims:
        killed = time.monotonic()
        kill_times.append(killed)
        victim.signal(signal.SIGKILL)
        victim.wait_exit()
        time.sleep(args.settle)
        victim.start()
        victim.wait_ready()
        lb.wait_all_up()
        outages.append((killed, time.monotonic()))
        time.sleep(args.settle)
    outcomes = load.stop()
    after = lb.retries()
    in_flight = [o for o in outcomes if any(o.started <= t <= o.ended for t in kill_times)]
    in_outage = [o for o in outcomes if any(o.started <= back and o.ended >= k for k, back in outages)]
    failed = [o for o in outcomes if not o.ok]
    backend = f"replicas_{frontend}"
    return {"frontend": frontend, "kills": len(victims), "rate_rps": args.rate, "rows_per_request": args.kill_rows,
            "in_flight_at_a_kill_all_replicas": len(in_flight),
            "failed_in_flight_at_a_kill": sum(1 for o in failed if o in in_flight),
            "failed_during_an_outage_not_in_flight_at_a_kill": sum(
                1 for o in failed if o in in_outage and o not in in_flight),
            "failed_outside_outages": sum(1 for o in failed if o not in in_outage),
            "served_outside_outages": sum(1 for o in outcomes if o.ok and o not in in_outage),
            "haproxy_retries": after[backend]["retries"] - before[backend]["retries"],
            "haproxy_redispatches": after[backend]["redispatches"] - before[backend]["redispatches"],
            **summarize(outcomes)}


def wrk(args, port: int, body_file: pathlib.Path) -> dict:
    cmd = ["wrk", "-t2", f"-c{args.connections}", f"-d{args.wrk_seconds}s", "-s", str(LIB / "wrk_post.lua"),
           f"http://127.0.0.1:{port}{PATH}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "WRK_BODY_FILE": str(body_file)},
                         timeout=args.wrk_seconds + 60)
    m = re.search(r"WRK_JSON (\{.*\})", out.stdout)
    if not m:
        return {"error": out.stdout[-500:] + out.stderr[-500:]}
    s = json.loads(m.group(1))
    errors = sum(s["errors"].values())
    return {"rps": round(s["requests"] / (s["duration_us"] / 1e6), 1), "requests": s["requests"], "errors": errors,
            "p50_ms": s["latency_us"]["p50"] / 1000, "p99_ms": s["latency_us"]["p99"] / 1000}


def scaling(args, work: pathlib.Path) -> list:
    body_file = work / "body.json"
    body_file.write_bytes(infer_body())
    cores = os.cpu_count() or 1
    rows = []
    for n in (1, 2, 3):
        budget = max(1, cores // n)
        replicas, lb = start_cluster(args, work, n, budget)
        try:
            if n == 1:
                rows.append({"setup": "1 replica, direct", "replicas": 1, "thread_budget_each": budget,
                             **wrk(args, replicas[0].http_port, body_file)})
            rows.append({"setup": f"{n} replica{'s' if n > 1 else ''} behind HAProxy", "replicas": n,
                         "thread_budget_each": budget, **wrk(args, lb.safe_port, body_file)})
        finally:
            stop_cluster(replicas, lb)
    return rows


def report(results: dict) -> str:
    r, ks, kf = results["rolling"], results["kill_strict"], results["kill_safe"]
    sc = results["scaling"]
    direct = next((row for row in sc if "direct" in row["setup"]), None)
    L = ["# Scale-out: replicas behind HAProxy (`make bench-scaleout`)", "",
         f"Commit {results['commit']}, {results['machine']['cores']} cores ({results['machine']['cpu']}), "
         f"model `{MODEL}` (2 chained 256x256 MatMul+Tanh per row, dynamic batching up to 8; batch-1 JSON "
         "requests), "
         "HAProxy 2.6 (Debian 12) health-checking /v2/health/ready every 100 ms.", "",
         f"Scale-out: rolling restart of {len(r['events'])} replicas under {r['rate_rps']} req/s open loop: "
         f"{r['failed']} failed of {r['requests']}. "
         f"SIGKILL of each replica in turn, no re-send of taken requests: {ks['failed']} failed of "
         f"{ks['requests']} ({ks['failed_in_flight_at_a_kill']} in flight at a kill, "
         f"{ks['failed_during_an_outage_not_in_flight_at_a_kill']} sent to the dead replica before HAProxy "
         f"marked it down, {ks['failed_outside_outages']} outside the outages; "
         f"{ks['in_flight_at_a_kill_all_replicas']} requests were in flight at a kill on all replicas together); "
         f"with HAProxy re-sending them: {kf['failed']} failed of {kf['requests']} "
         f"({kf['failed_during_an_outage_not_in_flight_at_a_kill']} sent on a killed replica's pooled connection "
         f"before its health check noticed, {kf['failed_outside_outages']} outside the outages).", "",
         "## Rolling restart (SIGTERM, exit, restart, ready; one replica at a time)", "",
         "| replica | exit code | s until ready again |", "|---|---|---|"]
    L += [f"| {e['replica']} | {e['exit_code']} | {e['seconds_to_ready_again']} |" for e in r["events"]]
    L += ["", f"Requests {r['requests']}, served {r['ok']}, failed {r['failed']} {r['failed_by_kind'] or ''}; "
          f"latency from the scheduled send p50 {r['latency_ms_p50']} ms, p99 {r['latency_ms_p99']} ms. "
          f"HAProxy retried {r['haproxy']['replicas_safe']['retries']} times and redispatched "
          f"{r['haproxy']['replicas_safe']['redispatches']} (requests refused or answered 503 by a replica "
          "that was shutting down, sent to another).", "",
          f"## Each replica SIGKILLed in turn ({ks['rows_per_request']} rows per request, {ks['rate_rps']} req/s)", "",
          "| frontend | kills | requests | failed | failed: in flight at a kill | failed: sent during an outage "
          "| failed: outside outages | in flight at a kill (all replicas) | HAProxy retries | p99 ms |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for k in (ks, kf):
        L.append(f"| {k['frontend']} | {k['kills']} | {k['requests']} | {k['failed']} {k['failed_by_kind'] or ''} | "
                 f"{k['failed_in_flight_at_a_kill']} | {k['failed_during_an_outage_not_in_flight_at_a_kill']} | "
                 f"{k['failed_outside_outages']} | {k['in_flight_at_a_kill_all_replicas']} | "
                 f"{k['haproxy_retries']} | {k['latency_ms_p99']} |")
    L += ["", "An outage runs from a replica's SIGKILL until HAProxy sees it up again. strict: `retry-on "
          "conn-failure 503` and a server connection per request (a request a replica took is never sent twice: "
          "the killed replica's requests fail); safe: `retry-on conn-failure empty-response 503` (they are sent to "
          "another replica; right for stateless models, wrong for sequence models). safe keeps pooled server "
          "connections: a request HAProxy sends on a killed replica's idle connection before its health check "
          "notices is answered by closing the client's connection without an answer (HAProxy leaves that retry to "
          "the client, as a server closing a keep-alive connection would); it counts under 'sent during an "
          "outage'.", "",
          "## Throughput, 1-3 replicas on the same cores (wrk, closed loop)", "",
          "| setup | thread budget each | req/s | vs direct | p50 ms | p99 ms | errors |", "|---|---|---|---|---|---|---|"]
    for row in sc:
        ratio = f"{row['rps'] / direct['rps']:.2f}x" if direct and "rps" in row and direct.get("rps") else ""
        L.append(f"| {row['setup']} | {row['thread_budget_each']} | {row.get('rps')} | {ratio} | "
                 f"{row.get('p50_ms')} | {row.get('p99_ms')} | {row.get('errors', row.get('error'))} |")
    L += ["", "The replicas share the machine's cores: more replicas add no cores here. HAProxy's own cost is "
          "the 1-replica row against direct. Where 2 or 3 replicas with a budget of 1 beat one replica with a "
          "budget of 2, the gain is two model instances of one thread each instead of one instance of two "
          "(small batches split poorly over intra-op threads), which one replica also gets from "
          "`instance_group { count: 2 }`; it is not the load balancer's doing.", "",
          f"Machine load average at the start: {results['machine']['loadavg_at_start']}.", "",
          "## Commands", "", f"    {results['command']}", ""]
    return "\n".join(L)


def rewrite_report(out: pathlib.Path) -> None:
    """RESULTS-scaleout.md again from scaleout.json (after a change to the report's text)."""
    results = json.loads((out / "scaleout.json").read_text())
    (out / "RESULTS-scaleout.md").write_text(report(results))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--rate", type=float, default=100.0, help="open-loop requests per second")
    ap.add_argument("--kill-rows", type=int, default=4,
                    help="rows per request in the SIGKILL phases (more work in flight to lose)")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds of load between events")
    ap.add_argument("--exit-timeout", type=int, default=10)
    ap.add_argument("--wrk-seconds", type=int, default=15)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--quick", action="store_true", help="short phases (a smoke run)")
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    ap.add_argument("--report-only", action="store_true",
                    help="measure nothing: rewrite RESULTS-scaleout.md from scaleout.json")
    args = ap.parse_args()
    if args.report_only:
        rewrite_report(pathlib.Path(args.out_dir))
        return 0
    if args.quick:
        args.settle, args.wrk_seconds = 1.0, 4
    if not shutil.which("wrk"):
        print("wrk is not installed (scripts/setup.sh)", file=sys.stderr)
        return 1
    work = pathlib.Path(tempfile.mkdtemp(prefix="ortserve-scaleout-"))
    args.repo = build_repository(work / "repo")
    budget = max(1, (os.cpu_count() or 1) // 3)
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip() or "unknown"
    results = {"commit": commit, "machine": machine_info(),
               "command": " ".join(["bench/scaleout.py", *sys.argv[1:]])}
    replicas, lb = start_cluster(args, work, 3, budget)
    try:
        results["rolling"] = rolling_restart(args, replicas, lb)
        results["kill_strict"] = kill_each(args, replicas, lb, "strict", replicas)
        results["kill_safe"] = kill_each(args, replicas, lb, "safe", replicas)
    finally:
        stop_cluster(replicas, lb)
    results["scaling"] = scaling(args, work)
    out = pathlib.Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaleout.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "RESULTS-scaleout.md").write_text(report(results))
    print(report(results))
    print(f"logs: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
