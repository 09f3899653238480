#!/usr/bin/env python3
"""ortserve benchmark orchestrator: ortserve vs FastAPI+onnxruntime vs in-process ORT.

    .venv/bin/python bench/run_bench.py            # full sweep and 5 paired rounds (about 35 min on 2 cores)
    .venv/bin/python bench/run_bench.py --quick    # smoke run, a few seconds per point
    .venv/bin/python bench/run_bench.py --models tiny,mlp --concurrency 1,8,32

Run bench/lib/make_bench_models.py first (`make bench` does both). Every server is
started here on free 127.0.0.1 ports, waited for with bounded waits, driven by
time-bounded loads, and killed at the end, on error and on Ctrl-C too.

Contenders, same models, same machine, one run:
  ortserve   (perf_analyzer, binary tensors, -i http)   and JSON via wrk (same bytes)
             gRPC hook: perf_analyzer -i grpc, run only when the gRPC port answers
             binary tensors via wrk too: the lightest client, so on shared cores
             the figure is the server's (perf_analyzer's own CPU is recorded)
  fastapi    bench/baselines/baseline_fastapi.py, N workers x 1 intra-op thread = thread budget,
             driven by the same two loads
  inprocess  bench/lib/inprocess_ort.py, back-to-back runs at batch 1 and at the batch
             sizes ortserve's batcher chose (from its statistics), on the server's
             own runtime (ortserve_inprocess_limit: same ORT, same session options)
  http_floor ortserve_http_floor (bench/programs/http_floor.cpp), a no-op HTTP server that
             answers every request with the tiny model's reference response:
             the wrk JSON load on tiny only, the most any server could reach
             there with the load generator on the same machine
  nginx      nginx (Debian's nginx-light, `make bench-deps`) answering every request with the
             same response (`return 200`), worker_processes = the thread budget: the tiny
             model's wrk JSON load only, and the tiny target's paired rounds

Then paired rounds (--target-rounds): each target's pair measured again back to
back, both servers up, order flipping per round; verdicts use the median round.

Outputs: bench/RESULTS.md (targets, headline table, details, every command),
bench/results/results.json (raw), bench/results/*.png (plots). Server logs go to
bench/work/logs/. Timing is reported, never asserted.
"""
import argparse
import atexit
import datetime as dt
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import (BENCH, COMMANDS, LOGS, NOTES, PERF_ANALYZER, RESULTS, ROOT, WORK,
                          git_head, log, machine_info, manifest_repo, note, results_json)
from bench_loads import pa_available
from bench_plots import plot
from bench_procs import Procs
from bench_report import write_report
from bench_rounds import paired_rounds
from bench_servers import FastApiBaseline, OrtServe, reference_outputs
from bench_sweep import bench_inprocess, bench_server, bench_static
from bench_targets import compute_targets


ALL_MODELS = ["tiny", "mlp", "mlp_nobatch", "cnn", "ocr_cls"]
FULL_CONCURRENCY = [1, 2, 4, 8, 16, 32, 64]
QUICK_CONCURRENCY = [1, 4, 32]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: concurrency 1,4,32, ~2-3 s per point")
    ap.add_argument("--models", default=",".join(ALL_MODELS), help="comma separated subset")
    ap.add_argument("--concurrency", help="comma separated (default 1,2,4,8,16,32,64; quick 1,4,32)")
    ap.add_argument("--duration", type=float, help="seconds per load point (default 10, quick 2)")
    ap.add_argument("--rate-fractions", help="request-rate sweep as fractions of each contender's peak "
                    "(default 0.25,0.5,0.75,0.9; quick 0.5; 'none' to skip)")
    ap.add_argument("--contenders", default="ortserve,fastapi,inprocess,http_floor,nginx")
    ap.add_argument("--no-pa", dest="pa", action="store_false", help="skip perf_analyzer loads")
    ap.add_argument("--no-wrk", dest="wrk", action="store_false", help="skip wrk JSON loads")
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--thread-budget", type=int, default=os.cpu_count() or 1,
                    help="cores given to each contender (default: all)")
    ap.add_argument("--fastapi-workers", type=int, help="default: the thread budget (1 intra-op thread each)")
    ap.add_argument("--nginx-workers", type=int, help="nginx worker_processes (default: the thread budget)")
    ap.add_argument("--http-thread-count", type=int, default=0, help="ortserve --http-thread-count (0: its default)")
    ap.add_argument("--client-threads", type=int, default=1 if (os.cpu_count() or 1) <= 4 else 2,
                    help="wrk threads")
    ap.add_argument("--server-cpus", help="taskset CPU list for servers and in-process runs (e.g. 0-3)")
    ap.add_argument("--client-cpus", help="taskset CPU list for load generators (e.g. 4-5)")
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    ap.add_argument("--inprocess-duration", type=float, help="seconds per batch size (default 10, quick 2)")
    ap.add_argument("--target-rounds", type=int,
                    help="after the sweep, measure each target's pair this many more times, back to back in "
                    "alternating order; verdicts use the median round (default 5, quick 1; 0: the sweep's points)")
    ap.add_argument("--manifest", default=str(WORK / "manifest.json"))
    ap.add_argument("--results-md", default=str(BENCH / "RESULTS.md"))
    ap.add_argument("--compare-with", action="append", default=[], metavar="REPORT",
                    help="an earlier run's RESULTS-*.md whose targets table the report shows next to this "
                    "run's (e.g. the same bench on the previous build); repeatable")
    ap.add_argument("--report-only", action="store_true",
                    help="measure nothing: rewrite RESULTS.md and the plots from bench/results/results.json, "
                    "with the arguments of the run that made it")
    args = ap.parse_args(argv)
    args.argv = argv
    args.models = [m for m in args.models.split(",") if m]
    args.contenders = [c for c in args.contenders.split(",") if c]
    args.concurrency = ([int(x) for x in args.concurrency.split(",")] if args.concurrency
                        else (QUICK_CONCURRENCY if args.quick else FULL_CONCURRENCY))
    args.duration = args.duration or (2.0 if args.quick else 10.0)
    args.duration = max(1, int(round(args.duration)))
    args.pa_window_ms = max(500, int(args.duration * 1000 / 3))  # 3 windows ~ one wrk run
    rf = args.rate_fractions or ("0.5" if args.quick else "0.25,0.5,0.75,0.9")
    args.rate_fractions = [] if rf == "none" else [float(x) for x in rf.split(",")]
    args.inprocess_duration = args.inprocess_duration or (2.0 if args.quick else 10.0)
    args.fastapi_workers = args.fastapi_workers or args.thread_budget
    if args.target_rounds is None:
        args.target_rounds = 1 if args.quick else 5
    return args


def finish(out, manifest, args):
    """Targets, results.json, plots and RESULTS.md from a run's measurements."""
    targets = compute_targets(out, manifest)
    out["targets"] = targets
    out["notes"] = NOTES
    out["commands"] = COMMANDS
    (RESULTS / "results.json").write_text(results_json(out))
    try:
        plots = plot(out, args.models)
    except Exception as e:  # a plotting problem must not lose the numbers
        note(f"plotting failed: {e}")
        plots = []
    write_report(out, targets, plots, args, out["meta"]["started"], out["meta"]["finished"])
    log(f"wrote {args.results_md}, {RESULTS / 'results.json'} and {len(plots)} plots")
    for t in targets:
        log(f"target: {t['target']}: {t['measured']} -> {t['verdict']}")


def rewrite_report(results_md, compare_with):
    """--report-only: the report of the run saved in results.json, with that run's arguments."""
    out = json.loads((RESULTS / "results.json").read_text())
    args = parse_args(out["meta"]["argv"])
    args.results_md = results_md
    args.compare_with = compare_with or args.compare_with
    NOTES[:] = out.get("notes", [])
    COMMANDS[:] = out.get("commands", [])
    finish(out, out["meta"]["manifest"], args)
    return 0


def main(argv):
    args = parse_args(argv)
    if args.report_only:
        return rewrite_report(args.results_md, args.compare_with)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, f: (Procs.stop_all(), sys.exit(128 + s)))
    atexit.register(Procs.stop_all)
    RESULTS.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)

    mpath = Path(args.manifest)
    if not mpath.exists():
        log(f"{mpath} missing: run `.venv/bin/python bench/lib/make_bench_models.py` first (make bench does)")
        return 2
    manifest = json.loads(mpath.read_text())
    missing = [m for m in args.models if m not in manifest]
    if missing:
        note(f"models not in the manifest, skipped: {missing}")
    args.models = [m for m in args.models if m in manifest]

    started = dt.datetime.now().isoformat(timespec="seconds")
    out = {"meta": {"started": started, "argv": argv, "machine": machine_info(), "commit": git_head(),
                    "args": {k: v for k, v in vars(args).items() if k != "argv"},
                    "manifest": {m: manifest[m] for m in args.models}}}
    log(f"models {args.models}, concurrency {args.concurrency}, {args.duration} s per point, "
        f"thread budget {args.thread_budget}")
    check_load_tools(args)

    refs = {m: reference_outputs(manifest[m]) for m in args.models}
    try:
        run_contenders(args, manifest, refs, out)
    finally:
        Procs.stop_all()
        out["meta"]["finished"] = dt.datetime.now().isoformat(timespec="seconds")
        finish(out, manifest, args)
    return 0


def check_load_tools(args):
    """Turns off a load whose tool is missing (noted)."""
    if args.pa and not pa_available():
        note(f"perf_analyzer not runnable at {PERF_ANALYZER}; perf_analyzer loads skipped")
        args.pa = False
    if args.wrk and subprocess.run(["which", "wrk"], capture_output=True).returncode != 0:
        note("wrk not installed (apt-get install wrk); JSON loads skipped")
        args.wrk = False


def run_contenders(args, manifest, refs, out):
    """The sweep, contender by contender, then the paired rounds."""
    if "ortserve" in args.contenders:
        binary = Path(args.ortserve_bin)
        if binary.exists() and os.access(binary, os.X_OK):
            bench_server(OrtServe(binary, manifest_repo(manifest), args.thread_budget,
                                  args.http_thread_count, args.server_cpus),
                         args.models, manifest, refs, args, out)
        else:
            note(f"ortserve binary {binary} not found (run `make build`); ortserve skipped")
    if "fastapi" in args.contenders:
        workers = args.fastapi_workers
        bench_server(FastApiBaseline(manifest_repo(manifest), workers, max(1, args.thread_budget // workers),
                                     args.server_cpus), args.models, manifest, refs, args, out)
    for kind in ("http_floor", "nginx"):
        if kind in args.contenders:
            bench_static(kind, manifest, refs, args, out)
    if "inprocess" in args.contenders:
        bench_inprocess(args.models, manifest, args, out)
    if args.target_rounds:
        paired_rounds(args, manifest, refs, out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
