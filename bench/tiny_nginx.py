#!/usr/bin/env python3
"""The tiny model's wrk JSON load @32 against fixed-answer servers, each in the configurations a
reader would try: ortserve at thread budgets 2 and 1, nginx with 2 workers and with 1, and the
no-op floor, all up at once (idle when not measured) and measured back to back, the order
reversed every round. Per server: requests/s, its CPU per request (its process tree, /proc) and
the ratio to each nginx; the median over the rounds.

    .venv/bin/python bench/tiny_nginx.py [--ortserve-bin build/ortserve] [--rounds 5]
        [--duration 5] [--connections 32]

Needs nginx (make bench-deps) and bench/lib/make_bench_models.py's output (make bench makes it).
Nothing is asserted: this is a measurement; `make bench`'s target row uses nginx with the thread
budget's workers, and this script says what the other counts would change.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import ROOT, WORK, git_head, log, machine_info, manifest_repo
from bench_loads import run_wrk
from bench_procs import tree_cpu_seconds
from bench_servers import (HttpFloor, NginxStatic, OrtServe, nginx_binary, reference_outputs, start_checked,
                           tiny_static_body)


def servers(args, manifest, body):
    binary, repo, nginx = Path(args.ortserve_bin), manifest_repo(manifest), nginx_binary()
    return {"ortserve budget 2": OrtServe(binary, repo, 2, 0, None, log_name="tiny-nginx-ortserve2.log"),
            "ortserve budget 1": OrtServe(binary, repo, 1, 0, None, log_name="tiny-nginx-ortserve1.log"),
            "nginx 2 workers": NginxStatic(nginx, body, 2, None, prefix_name="nginx2"),
            "nginx 1 worker": NginxStatic(nginx, body, 1, None, prefix_name="nginx1"),
            "no-op floor": HttpFloor(binary.parent / "ortserve_http_floor", body, None)}


def measure(server, spec, args):
    c0 = tree_cpu_seconds(server.proc.pid)
    r = run_wrk(f"{server.base}/v2/models/tiny/infer", spec["request_json"], args.connections, args.duration, 1)
    cpu = tree_cpu_seconds(server.proc.pid) - c0
    return None if r is None else {"rps": r["throughput"], "cpu_us": 1e6 * cpu / max(r["requests"], 1)}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5, help="seconds per point (wrk takes whole seconds)")
    ap.add_argument("--connections", type=int, default=32)
    args = ap.parse_args(argv)
    if nginx_binary() is None:
        sys.exit("nginx not installed: make bench-deps")
    manifest = json.loads((WORK / "manifest.json").read_text())
    spec = manifest["tiny"]
    ref = reference_outputs(spec)
    body = tiny_static_body(spec, ref)
    all_servers = servers(args, manifest, body)
    rounds = []
    try:
        for name, server in all_servers.items():
            err = start_checked(server, spec, ref, 60)
            if err:
                sys.exit(f"{name}: {err}")
        order = list(all_servers)
        for rnd in range(args.rounds):
            got = {}
            for name in order if rnd % 2 == 0 else reversed(order):
                got[name] = measure(all_servers[name], spec, args)
            log(f"round {rnd + 1}: " + ", ".join(f"{k} {v['rps']:.0f}/s {v['cpu_us']:.1f} us" for k, v in got.items() if v))
            rounds.append(got)
    finally:
        for server in all_servers.values():
            server.stop()
    report(rounds, order, args)


def report(rounds, order, args):
    med = statistics.median
    print(f"\ntiny wrk JSON @{args.connections}, wrk -t1, {args.rounds} rounds of {args.duration:g} s, "
          f"commit {git_head()}, {machine_info()['cpu']}, {machine_info()['cores']} cores\n")
    print("| server | req/s (median, range) | CPU per request (us) | / nginx 2 workers | / nginx 1 worker |")
    print("|---|---|---|---|---|")
    for name in order:
        rps = [r[name]["rps"] for r in rounds if r.get(name)]
        cpu = [r[name]["cpu_us"] for r in rounds if r.get(name)]
        if not rps:
            print(f"| {name} | no point measured | | | |")
            continue
        ratios = [[r[name]["rps"] / r[n]["rps"] for r in rounds if r.get(name) and r.get(n)]
                  for n in ("nginx 2 workers", "nginx 1 worker")]
        print(f"| {name} | {med(rps):,.0f} ({min(rps):,.0f}-{max(rps):,.0f}) | {med(cpu):.1f} | "
              + " | ".join(f"{med(x):.2f} ({min(x):.2f}-{max(x):.2f})" if x else "–" for x in ratios) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
