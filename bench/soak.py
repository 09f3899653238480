#!/usr/bin/env python3
"""Overload and soak: ortserve at 3x its sustainable request rate (issue 5).

    .venv/bin/python bench/soak.py --ortserve-bin build/ortserve            # 180 s at 3x
    .venv/bin/python bench/soak.py --duration 20 --capacity-seconds 8        # smoke run
    make soak SOAK_ARGS="--duration 600"

What it does, on one freshly started ortserve (free 127.0.0.1 ports):
  model     `cnn_soak`: the bench CNN (make_bench_models.make_cnn, same weights
            as `cnn`), written with its own config into bench/work/soak/repo:
            max_batch_size 8, dynamic batching, priority_levels 2 (1 = high),
            default_priority_level 2, a bounded max_queue_size per level
            (priority_queue_policy) and in default_queue_policy.
  step 1    capacity: a closed loop of --capacity-concurrency clients for
            --capacity-seconds; sustainable rate = answered requests / s.
  step 2    overload: open-loop Poisson arrivals at --multiplier x capacity for
            --duration s, --high-share of them with `parameters: {"priority": 1}`,
            the rest with priority 2. Arrivals never wait for the server: each
            arrival takes an idle keep-alive HTTP/1.1 connection from a pool, or
            opens a new one. Latency is measured from the scheduled arrival, so
            a late generator shows up as latency, never hides it.
  checks    every 200 is compared with onnxruntime in Python (8 distinct inputs,
            binary tensors in, JSON out); every 503 must name its limit
            (max_queue_size); afterwards the server must still be ready, answer
            one JSON inference correctly, and its /metrics outcome counters must
            equal the client's counts over the overload phase.
  sampled   per second: server RSS (/proc/<pid>/status VmRSS), threads, open
            fds, server CPU, generator CPU, and the whole machine's CPU (so
            other load on a shared machine is visible).

Outputs: bench/results/soak.json (raw per-second windows and samples),
bench/results/soak.png, bench/SOAK.md (`--from-json bench/results/soak.json`
rewrites the last two from the first without measuring). Timing is measured,
never asserted.
Exit status 1 when the server crashed or stopped being ready, an answer was
neither 200 nor a 503 naming its limit (connection errors, timeouts, other
statuses), an output was wrong, or the metrics disagree with the client.
"""
import argparse
import asyncio
import collections
import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import numpy as np

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import BENCH, COMMANDS, LOGS, RESULTS, ROOT, git_head, machine_info, results_json
from bench_measure import histogram_delta, scrape_metrics
from bench_procs import Procs, log_tail, tree_cpu_seconds
from bench_servers import OrtServe, wait_ready
from soak_generator import Generator
from soak_model import (HIGH, HISTOGRAMS, LOW, MODEL, N_INPUTS, build_request,
                        check_json_inference, is_ready, log, make_inputs_and_refs, write_repo)
from soak_plot import plot
from soak_report import reading, write_md
from soak_sampler import Sampler, rss_slope, sample_rows, thread_delta, thread_times
from soak_stats import ms, over_time, pct, spans, summarize, windows


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--duration", type=float, default=180.0, help="seconds of overload (default 180)")
    ap.add_argument("--multiplier", type=float, default=3.0, help="offered rate / measured capacity")
    ap.add_argument("--rate", type=float, help="offered rate in req/s (overrides --multiplier)")
    ap.add_argument("--high-share", type=float, default=0.2, help="share of requests with priority 1")
    ap.add_argument("--capacity-seconds", type=float, default=20.0)
    ap.add_argument("--capacity-concurrency", type=int, default=16)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--queue-delay-us", type=int, default=0)
    ap.add_argument("--queue-high", type=int, default=16, help="max_queue_size of priority level 1")
    ap.add_argument("--queue-low", type=int, default=16, help="max_queue_size of priority level 2")
    ap.add_argument("--connections", type=int, default=256,
                    help="keep-alive connections opened up front (more than are ever in flight on a quiet "
                    "machine, so the server's connection count, and the memory it holds, is set at the start)")
    ap.add_argument("--max-connections", type=int, default=4096,
                    help="more are opened on demand up to this; then arrivals wait for one (counted, and "
                    "their latency still runs from the scheduled arrival)")
    ap.add_argument("--request-timeout", type=float, default=30.0, help="client timeout per request (an error)")
    ap.add_argument("--warmup-seconds", type=float, default=30.0,
                    help="start of the overload left out of the RSS slope (at most a quarter of it)")
    ap.add_argument("--idle-seconds", type=float, default=5.0, help="RSS sampled this long after the load")
    ap.add_argument("--thread-budget", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--http-thread-count", type=int, default=0)
    ap.add_argument("--server-cpus", help="taskset CPU list for the server")
    ap.add_argument("--client-cpus", help="CPU list for the generator (sched_setaffinity), e.g. 4-5")
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--from-json", help="only rewrite the report (SOAK.md, PNG, JSON) from this soak.json")
    ap.add_argument("--out-json", default=str(RESULTS / "soak.json"))
    ap.add_argument("--out-png", default=str(RESULTS / "soak.png"))
    ap.add_argument("--out-md", default=str(BENCH / "SOAK.md"))
    return ap.parse_args(argv)


def build_type(binary):
    """CMAKE_BUILD_TYPE of the build folder the binary sits in (None if unknown)."""
    try:
        for line in (Path(binary).resolve().parent / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return line.split("=", 1)[1] or None
    except OSError:
        pass
    return None


def cpu_list(spec):
    cpus = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


async def run_phases(args, server, gen, sampler, rng):
    out = {"capacity": await capacity_phase(args, server, gen, rng)}
    cap_errors = out["capacity"]["errors"]
    rate = args.rate or args.multiplier * out["capacity"]["rate_per_s"]
    await gen.close_pool()   # a fresh pool: none left idle long enough to meet the server's idle timeout
    gen.recs, gen.messages, gen.opened_on_demand, gen.stale_dropped, gen.max_in_flight = \
        [], collections.Counter(), 0, 0, 0
    gen.conn_waits, gen.max_open = 0, gen.open_now
    await gen.fill_pool(args.connections)
    out.update(await overload_phase(args, server, gen, rng, rate))
    s = out["overload"]["summary"]
    log(f"overload: sent {out['overload']['sent']} ({out['overload']['achieved_rate_per_s']} req/s), accepted "
        f"{s['all']['accepted']}, rejected {s['all']['rejected']} ({s['all']['rejected_pct']}%), "
        f"errors {out['overload']['errors']}, p99 accepted high/low {s['high']['p99_ms']}/"
        f"{s['low']['p99_ms']} ms")
    return out, cap_errors


async def capacity_phase(args, server, gen, rng):
    """The sustainable rate: a closed loop of --capacity-concurrency clients."""
    await gen.fill_pool(min(args.connections, args.capacity_concurrency))
    log(f"capacity: closed loop, {args.capacity_concurrency} clients, {args.capacity_seconds:g} s")
    c0, t0 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    await gen.closed_loop(args.capacity_concurrency, args.capacity_seconds, args.high_share, rng)
    c1, t1 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    # Answers completed after the first seconds (connections and caches warm
    # up) and before the clients stopped sending.
    skip = min(2.0, args.capacity_seconds / 4)
    recs = [r for r in gen.recs if skip <= r.t_sched + r.lat <= args.capacity_seconds]
    secs = args.capacity_seconds - skip
    lat = np.array([r.lat for r in recs if r.code == 200])
    cap = {"rate_per_s": round(sum(1 for r in recs if r.code == 200) / secs, 1),
           "requests": len(gen.recs), "rejected": sum(1 for r in gen.recs if r.code == 503),
           "errors": sum(1 for r in gen.recs if r.code not in (200, 503)),
           "p50_ms": ms(pct(lat, 50)), "p99_ms": ms(pct(lat, 99)),
           "server_cpu_pct": round(100 * (c1 - c0) / (t1 - t0), 1)}
    log(f"capacity: {cap['rate_per_s']:.1f} req/s, p99 {cap['p99_ms']} ms, "
        f"server CPU {cap['server_cpu_pct']}%, {cap['rejected']} rejected, "
        f"{cap['errors']} errors")
    if cap["rate_per_s"] <= 0:
        raise RuntimeError("capacity measured as 0 req/s: the server answered nothing")
    cap["messages"] = dict(gen.messages)
    return cap


async def overload_phase(args, server, gen, rng, rate):
    """Open-loop Poisson arrivals at `rate`: the overload's figures, the /metrics deltas over it and
    the server's threads' time."""
    m0 = scrape_metrics(server.metrics_port, MODEL, HISTOGRAMS)
    log(f"overload: open loop, Poisson {rate:.1f} req/s for {args.duration:g} s, "
        f"{args.high_share:.0%} priority 1, {args.connections} pooled connections")
    c0 = tree_cpu_seconds(server.proc.pid)
    th0 = thread_times(server.proc.pid)
    g0 = sum(os.times()[:2])
    t_base, sent, t_last = await gen.open_loop(rate, args.duration, args.high_share, rng)
    t_end = time.monotonic()
    c1 = tree_cpu_seconds(server.proc.pid)
    th1 = thread_times(server.proc.pid)
    g1 = sum(os.times()[:2])
    try:
        m1 = scrape_metrics(server.metrics_port, MODEL, HISTOGRAMS)
    except (urllib.error.URLError, OSError) as e:  # the server is gone: the checks below say so
        log(f"/metrics unreachable after the load: {e}")
        m1 = None
    await gen.close_pool()
    done = len(gen.recs)
    first = min((r.t_sched + r.lag for r in gen.recs), default=0)
    last = max((r.t_sched + r.lag for r in gen.recs), default=0)
    summary = summarize(gen.recs, args.duration)
    rej_lat = np.array([r.lat for r in gen.recs if r.code == 503])
    out = {"overload": {
        "target_rate_per_s": round(rate, 1), "seconds": args.duration, "t_base": t_base,
        "sent": sent, "completed": done, "unfinished": sent - done,
        "achieved_rate_per_s": round(sent / max(1e-9, last - first) if sent > 1 else 0, 1),
        "server_cpu_pct": round(100 * (c1 - c0) / (t_end - t_base), 1),
        "generator_cpu_pct": round(100 * (g1 - g0) / (t_end - t_base), 1),
        "connections_opened_on_demand": gen.opened_on_demand, "stale_connections_dropped": gen.stale_dropped,
        "max_connections_open": gen.max_open, "arrivals_that_waited_for_a_connection": gen.conn_waits,
        "max_in_flight": gen.max_in_flight,
        "rejected_latency_ms": {"p50": ms(pct(rej_lat, 50)), "p99": ms(pct(rej_lat, 99))},
        "summary": summary, "windows": windows(gen.recs, args.duration), "spans": spans(gen.recs, args.duration),
        "messages": {k: v for k, v in gen.messages.items() if k.startswith("503:")},
        "error_messages": {k: v for k, v in gen.messages.items() if not k.startswith("503:")},
        "errors": (sent - done) + sum(v for k, v in summary["error_codes"].items()),
    }}
    out["metrics_delta"] = out["server_side"] = None
    if m1:
        o0, o1 = m0["outcomes"], m1["outcomes"]
        out["metrics_delta"] = {k: o1.get(k, 0) - o0.get(k, 0) for k in sorted(set(o0) | set(o1))}
        out["server_side"] = {h: histogram_delta(m0, m1, h) for h in HISTOGRAMS}
    out["server_threads"] = thread_delta(th0, th1)
    return out


def main(argv):
    args = parse_args(argv)
    if args.from_json:  # re-render the report of an earlier run, measuring nothing
        out = json.loads(Path(args.from_json).read_text())
        return render(out, args)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: (Procs.stop_all(), sys.exit(128 + s)))
    import atexit
    atexit.register(Procs.stop_all)
    RESULTS.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    binary = Path(args.ortserve_bin)
    if not (binary.exists() and os.access(binary, os.X_OK)):
        log(f"ortserve binary {binary} not found (make build)")
        return 2
    meta = start_meta(argv, binary, prepare_process(args))
    repo, cfg, model_path = write_repo(args)
    xs, refs = make_inputs_and_refs(model_path)

    server = OrtServe(binary, repo, args.thread_budget, args.http_thread_count, args.server_cpus,
                      log_name="ortserve-soak.log")
    server.start()
    sampler = None
    failures = []
    out = {"meta": meta, "args": vars(args), "config_pbtxt": cfg}
    try:
        ok, ready = wait_ready(server.base, server.proc, [MODEL], args.ready_timeout)
        if not ok or MODEL not in ready or not server.metrics_port:
            log("ortserve did not become ready (or has no metrics port):\n" + log_tail(LOGS / "ortserve-soak.log"))
            return 1
        meta["server_command"] = COMMANDS[-1] if COMMANDS else ""
        sampler = Sampler(server.proc.pid)
        sampler.start()
        if not load_and_check(args, server, sampler, xs, refs, out, failures):
            return 1
    finally:
        if sampler and sampler.is_alive():
            sampler.stop()
        proc = server.proc
        alive_at_stop = proc is not None and proc.poll() is None
        server.stop()
        rc = proc.returncode if proc else None
        Procs.stop_all()
    out.setdefault("checks", {})["exit_status"] = rc
    if alive_at_stop and rc not in (0, None):
        failures.append(f"ortserve exited with status {rc} on SIGTERM")
    finish_run(out, args, meta, sampler, failures)
    return render(out, args)


def prepare_process(args):
    """The generator's CPUs, room for every connection, the event loop; returns the loop's name."""
    if args.client_cpus:
        os.sched_setaffinity(0, cpu_list(args.client_cpus))
    import resource  # room for every connection, here and in the server (which inherits it)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.max_connections + 256
    if soft < want and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    try:
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        return "uvloop"
    except ImportError:
        return "asyncio"


def start_meta(argv, binary, loop_name):
    command = " ".join(shlex.quote(x) for x in [".venv/bin/python", "bench/soak.py"] + list(argv))
    meta = {"started": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine_info(),
            "commit": git_head(), "uptime_before": uptime(), "command": command, "event_loop": loop_name}
    meta["build_type"] = build_type(binary)
    log(f"machine: {meta['uptime_before']}; ortserve build type {meta['build_type'] or 'unknown'}")
    if meta["build_type"] not in (None, "Release", "RelWithDebInfo"):
        log(f"WARNING: {binary} is a {meta['build_type']} build; its figures say little about a Release build")
    return meta


def load_and_check(args, server, sampler, xs, refs, out, failures):
    """Both phases, then the server's state after them; False when the load could not even run."""
    rng = np.random.default_rng(args.seed)
    gen = Generator(server.port, {p: [build_request(xs[i], p, server.port) for i in range(N_INPUTS)]
                                  for p in (HIGH, LOW)}, refs, args.request_timeout, args.max_connections)
    try:
        phases, cap_errors = asyncio.run(run_phases(args, server, gen, sampler, rng))
    except Exception as e:  # a load that could not even run: say why, with the server's log
        log(f"the load failed: {type(e).__name__}: {e}\n" + log_tail(LOGS / "ortserve-soak.log"))
        return False
    out.update(phases)
    time.sleep(args.idle_seconds)
    alive = server.proc.poll() is None
    ready_after = alive and is_ready(server.base)
    inf_ok, inf_msg = check_json_inference(server.base, xs, refs) if alive else (False, "server gone")
    sampler.stop()
    md = out["metrics_delta"]
    s = out["overload"]["summary"]["all"]
    metrics_ok = md is not None and (md.get("success", 0) == s["accepted"] and md.get("rejected", 0) == s["rejected"]
                  and all(v == 0 for k, v in md.items() if k not in ("success", "rejected")))
    out["checks"] = {"server_alive": alive, "ready_after": ready_after, "inference_after": inf_msg,
                     "inference_ok": inf_ok, "metrics": md, "metrics_consistent": metrics_ok,
                     "capacity_phase_errors": cap_errors}
    if not alive:
        failures.append(f"the server died (exit status {server.proc.returncode})")
    if alive and not ready_after:
        failures.append("the server is not ready after the load")
    if not inf_ok:
        failures.append(f"inference after the load: {inf_msg}")
    if out["overload"]["errors"] or cap_errors:
        failures.append(f"{out['overload']['errors'] + cap_errors} errors: "
                        f"{out['overload']['error_messages'] or out['capacity']['messages']}")
    if not metrics_ok:
        failures.append(f"/metrics outcomes {md} differ from the client's {s['accepted']} accepted / "
                        f"{s['rejected']} rejected")
    return True


def finish_run(out, args, meta, sampler, failures):
    """The samples as rows, memory and machine CPU over the overload, the figures over time, the
    verdict."""
    meta["finished"] = dt.datetime.now().isoformat(timespec="seconds")
    meta["uptime_after"] = uptime()
    log(f"machine: {meta['uptime_after']}")
    t_base = out["overload"]["t_base"]
    srows = sample_rows(sampler.samples, t_base)
    out["samples"] = srows
    dur = args.duration
    in_ov = [r for r in srows if 0 <= r["t"] <= dur]
    out["memory"] = memory_summary(srows, in_ov, args)
    mc = [r["machine_cpu_pct"] for r in in_ov if r["machine_cpu_pct"] is not None]
    out["machine_cpu_pct_overload"] = round(float(np.mean(mc)), 1) if mc else None
    out["other_cpu_pct_overload"] = (round(out["machine_cpu_pct_overload"] - out["overload"]["server_cpu_pct"]
                                           - out["overload"]["generator_cpu_pct"], 1) if mc else None)
    out["over_time"] = over_time(out["overload"].pop("spans"), srows)
    out["failures"] = failures
    out["verdict"] = "PASS" if not failures else "FAIL"


def memory_summary(srows, in_ov, args):
    """Server RSS at the overload's start, end, maximum and after the idle time; its slope after the
    warm-up; threads and fds at the overload's start and end."""
    dur = args.duration
    warm = min(args.warmup_seconds, dur / 4)
    rs = [r for r in srows if r["rss_mib"] is not None] or [{"t": 0, "rss_mib": None}]  # none: the server is gone
    rss_at = lambda t: min(rs, key=lambda r: abs(r["t"] - t))["rss_mib"]
    return {"ready_mib": rs[0]["rss_mib"], "overload_start_mib": rss_at(0), "overload_end_mib": rss_at(dur),
            "max_mib": max((r["rss_mib"] for r in rs if r["rss_mib"] is not None), default=None),
            "after_idle_mib": rs[-1]["rss_mib"],
            "warmup_s": warm, "slope_mib_per_min": rss_slope(srows, warm, dur),
            "threads_start": in_ov[0]["threads"] if in_ov else None,
            "threads_end": in_ov[-1]["threads"] if in_ov else None,
            "fds_start": in_ov[0]["fds"] if in_ov else None, "fds_end": in_ov[-1]["fds"] if in_ov else None}


def render(out, args):
    """soak.json, soak.png and SOAK.md from the measured data; the exit status."""
    out["reading"] = reading(out)
    failures = out["failures"]
    Path(args.out_json).write_text(results_json(out))
    try:
        plot(out, args.out_png)
    except Exception as e:  # a plotting problem must not lose the numbers
        log(f"plotting failed: {e}")
    png_rel = os.path.relpath(args.out_png, Path(args.out_md).parent)
    write_md(out, args.out_md, png_rel)
    log(f"wrote {args.out_md}, {args.out_json}, {args.out_png}")
    for line in out["reading"]:
        log(line)
    for fl in failures:
        log("FAIL: " + fl)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
