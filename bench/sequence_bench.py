#!/usr/bin/env python3
"""Sequences: N concurrent streams of Silero VAD (1, 4, 16, 64 by default)
through ortserve's sequence batcher, batched by the oldest strategy against
one sequence per execution, and against onnxruntime in process running the
same streams one after another with the same threads (and, as the ceiling of
batching, all streams' chunk k in one batch). Writes
bench/results/RESULTS-sequences.md and bench/results/sequences.json.

    .venv/bin/python bench/sequence_bench.py                      # ~5 min on 2 cores
    .venv/bin/python bench/sequence_bench.py --streams 1,16 --chunks 32
    .venv/bin/python bench/sequence_bench.py --dry-run            # the report from made-up points
    .venv/bin/python bench/sequence_bench.py --report-only        # rewrite the report from sequences.json

Each stream is one sequence of --chunks requests (512 new samples after the
previous 64, scripts/silero_vad.py), sent over gRPC (tritonclient.grpc.aio,
one event loop for all streams), each chunk after the answer to the one
before: a closed loop per stream. Before a contender is measured, one
stream's answers are compared with onnxruntime on the package's file; a
contender that answers wrongly is not measured. The batched models are then
measured again with two lighter clients: wrk over HTTP with binary tensors
(the `_wrk` rows, bench/lib/wrk_sequence.lua: one connection per stream) and
perf_analyzer over gRPC (the `_pa` rows, random audio). It is a
measurement, not a test: nothing asserts on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import (COMMANDS, LIB, LOGS, NOTES, RESULTS, ROOT, WORK, git_head, log,
                          machine_info, note)
import sequence_report

sys.path.insert(0, str(ROOT / "scripts"))
import silero_vad  # noqa: E402

MAX_STREAMS = 64
MODELS = {"oldest": "vad_oldest", "one_per_execution": "vad_one_per_execution",
          "direct_one_slot": "vad_direct_one_slot"}
# The batched models' max_sequence_idle_microseconds (Triton's default).
IDLE_US = 1_000_000
JSON_OUT = RESULTS / "sequences.json"
CHUNK_FILE = WORK / "sequences" / "chunk.bin"  # one request's audio for wrk
MD_OUT = RESULTS / "RESULTS-sequences.md"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--streams", default="1,4,16,64", help="concurrent streams per point (at most 64)")
    ap.add_argument("--chunks", type=int, default=64, help="requests per stream (64 = ~2 s of audio)")
    ap.add_argument("--warmup-chunks", type=int, default=4, help="per stream, before each point")
    ap.add_argument("--thread-budget", type=int, default=2, help="the server's --thread-budget and "
                    "the in-process session's intra-op threads")
    ap.add_argument("--queue-delay-us", type=int, default=0,
                    help="the oldest strategy's max_queue_delay_microseconds (default Triton's, 0: a batch "
                         "runs with what is queued when the instance is free; docs/decisions.md, \"Sequence "
                         "batcher: one queue and one worker per instance\", says what 1000 costs)")
    ap.add_argument("--pa-window-ms", type=int, default=2000,
                    help="perf_analyzer's measurement window (3 per point); 0: no perf_analyzer points")
    ap.add_argument("--wrk-duration", type=int, default=6, help="seconds per wrk point; 0: no wrk points")
    ap.add_argument("--timeout", type=float, default=600, help="bound on each point, seconds")
    ap.add_argument("--results-md", default=str(MD_OUT))
    ap.add_argument("--results-json", default=str(JSON_OUT))
    ap.add_argument("--dry-run", action="store_true", help="no server: made-up points, report to bench/work/")
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from --results-json")
    args = ap.parse_args(argv)
    args.streams = [int(s) for s in args.streams.split(",") if s]
    if any(not 1 <= s <= MAX_STREAMS for s in args.streams):
        ap.error(f"--streams: each count must be in [1, {MAX_STREAMS}]")
    if args.chunks < 1 or args.warmup_chunks < 0:
        ap.error("--chunks must be >= 1 and --warmup-chunks >= 0")
    return args


# --------------------------------------------------------------------------
# The repository and the in-process contenders

def write_repository(repo: Path, source: Path, queue_delay_us: int) -> None:
    batched = silero_vad.build_batched(source)
    silero_vad.write_model(repo, MODELS["oldest"], batched, silero_vad.batched_config(
        MODELS["oldest"], max_batch_size=MAX_STREAMS, candidates=MAX_STREAMS, queue_delay_us=queue_delay_us,
        idle_us=IDLE_US))
    silero_vad.write_model(repo, MODELS["one_per_execution"], batched, silero_vad.batched_config(
        MODELS["one_per_execution"], max_batch_size=1, candidates=MAX_STREAMS, queue_delay_us=queue_delay_us,
        idle_us=IDLE_US))
    silero_vad.write_model(repo, MODELS["direct_one_slot"], source,
                           silero_vad.unbatched_config(MODELS["direct_one_slot"]))


def session(model, threads: int):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as the server's default
    so.log_severity_level = 3
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def inprocess_sequential(sess, clips: list) -> dict:
    """The streams one after another, one chunk per run, state threaded."""
    latencies, sr = [], np.array(silero_vad.SAMPLE_RATE, np.int64)
    t0, c0 = time.perf_counter(), time.process_time()
    for windows in clips:
        state = np.zeros((2, 1, 128), np.float32)
        for w in windows:
            s = time.perf_counter()
            _, state = sess.run(["output", "stateN"], {"input": w[None, :], "state": state, "sr": sr})
            latencies.append((time.perf_counter() - s) * 1e6)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = sum(len(w) for w in clips)
    return {"chunks": n, "wall_s": wall, "latencies_us": latencies, "executions": n, "inferences": n,
            "server_cpu_pct": 100 * cpu / wall}


def inprocess_lockstep(sess, clips: list) -> dict:
    """Chunk k of every stream in one run of the batch-major wrapper."""
    stacked = np.stack(clips)  # streams, chunks, window
    state = np.zeros((len(clips), *silero_vad.STATE_SHAPE), np.float32)
    latencies = []
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(stacked.shape[1]):
        s = time.perf_counter()
        _, state = sess.run(["output", "stateN"], {"input": stacked[:, k, :], "state": state})
        latencies += [(time.perf_counter() - s) * 1e6] * len(clips)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"chunks": stacked.shape[0] * stacked.shape[1], "wall_s": wall, "latencies_us": latencies,
            "executions": stacked.shape[1], "inferences": stacked.shape[0] * stacked.shape[1],
            "server_cpu_pct": 100 * cpu / wall}


# --------------------------------------------------------------------------
# ortserve

async def _streams(grpc_url: str, model: str, clips: list, id_base: int, batched: bool) -> tuple:
    import tritonclient.grpc.aio as grpcaio
    latencies: list = []
    outputs = [grpcaio.InferRequestedOutput("output")]

    def request(window):
        inputs = [grpcaio.InferInput("input", [1, silero_vad.WINDOW], "FP32")]
        inputs[0].set_data_from_numpy(window[None, :])
        if not batched:
            inputs.append(grpcaio.InferInput("sr", [1], "INT64"))
            inputs[1].set_data_from_numpy(np.array([silero_vad.SAMPLE_RATE], np.int64))
        return inputs

    async def one(client, index, windows):
        prepared = [request(w) for w in windows]
        probabilities = []
        for n, inputs in enumerate(prepared):
            s = time.perf_counter()
            r = await client.infer(model, inputs, outputs=outputs, sequence_id=id_base + index,
                                   sequence_start=(n == 0), sequence_end=(n == len(prepared) - 1))
            latencies.append((time.perf_counter() - s) * 1e6)
            probabilities.append(float(r.as_numpy("output").reshape(-1)[0]))
        return probabilities

    async with grpcaio.InferenceServerClient(grpc_url) as client:
        t0 = time.perf_counter()
        answers = await asyncio.gather(*(one(client, i, w) for i, w in enumerate(clips)))
        return time.perf_counter() - t0, latencies, answers


def model_stats(base: str, model: str) -> tuple:
    with urllib.request.urlopen(f"{base}/v2/models/{model}/stats", timeout=10) as r:
        stats = json.loads(r.read())["model_stats"][0]
    return int(stats["execution_count"]), int(stats["inference_count"])


def measure_ortserve(server, contender: str, clips: list, warmup: int, timeout_s: float, id_base: int) -> dict:
    from bench_procs import tree_cpu_seconds
    model, batched = MODELS[contender], contender != "direct_one_slot"
    grpc_url = f"127.0.0.1:{server.grpc_port}"
    if warmup:
        asyncio.run(asyncio.wait_for(_streams(grpc_url, model, [w[:warmup] for w in clips], id_base, batched),
                                     timeout_s))
    e0, i0 = model_stats(server.base, model)
    s0, r0 = tree_cpu_seconds(server.proc.pid), resource.getrusage(resource.RUSAGE_SELF)
    wall, latencies, _ = asyncio.run(asyncio.wait_for(
        _streams(grpc_url, model, clips, id_base + MAX_STREAMS, batched), timeout_s))
    s1, r1 = tree_cpu_seconds(server.proc.pid), resource.getrusage(resource.RUSAGE_SELF)
    e1, i1 = model_stats(server.base, model)
    client_cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"chunks": len(latencies), "wall_s": wall, "latencies_us": latencies,
            "executions": e1 - e0, "inferences": i1 - i0,
            "server_cpu_pct": 100 * (s1 - s0) / wall, "client_cpu_pct": 100 * client_cpu / wall}


def measured_on_server(server, model: str, load) -> dict | None:
    """Runs `load()` (a load generator's point: throughput, p50_us, p99_us, client_cpu_pct, or None)
    between two reads of the model's statistics and the server's CPU; the point with them."""
    from bench_procs import tree_cpu_seconds
    e0, i0 = model_stats(server.base, model)
    s0, t0 = tree_cpu_seconds(server.proc.pid), time.perf_counter()
    r = load()
    s1, wall = tree_cpu_seconds(server.proc.pid), time.perf_counter() - t0
    e1, i1 = model_stats(server.base, model)
    if r is None:
        return None
    return {"chunks": i1 - i0, "throughput": r["throughput"], "p50_us": r["p50_us"], "p99_us": r["p99_us"],
            "executions": e1 - e0, "inferences": i1 - i0, "server_cpu_pct": 100 * (s1 - s0) / wall,
            "client_cpu_pct": r["client_cpu_pct"]}


def perf_analyzer_load(server, model: str, streams: int, args, first_id: int):
    """perf_analyzer over gRPC: `streams` sequences of --chunks random-audio requests in flight at
    once (--concurrency-range), ids from `first_id`."""
    from bench_loads import run_perf_analyzer
    return lambda: run_perf_analyzer(
        f"127.0.0.1:{server.grpc_port}", model, {"request_pa": "random"}, "concurrency", streams,
        args.pa_window_ms, protocol="grpc",
        extra_args=["--sequence-length", str(args.chunks), "--sequence-id-range", f"{first_id}:{first_id + 1_000_000}"])


def wrk_load(server, model: str, streams: int, args, first_id: int):
    """wrk over HTTP with bench/lib/wrk_sequence.lua: one connection per thread, each a stream of
    sequences of --chunks binary-tensor requests of CHUNK_FILE's audio, for --wrk-duration s."""
    from bench_loads import parse_wrk_summary
    from bench_procs import run_load
    cmd = ["wrk", "-t", str(streams), "-c", str(streams), "-d", f"{args.wrk_duration}s", "--timeout", "10s",
           "-s", LIB / "wrk_sequence.lua", f"{server.base}/v2/models/{model}/infer"]
    env = {"WRK_CHUNK_FILE": str(CHUNK_FILE), "WRK_SEQUENCE_LENGTH": str(args.chunks),
           "WRK_FIRST_SEQUENCE_ID": str(first_id)}

    def load():
        rc, out, client_cpu = run_load(cmd, args.wrk_duration + 40, env)
        return parse_wrk_summary(rc, out, client_cpu, f"wrk {model} streams={streams}")
    return load


# The lighter clients the batched models are measured with again: (suffix of the contender, load).
CLIENTS = {"wrk": wrk_load, "pa": perf_analyzer_load}


def run_client_points(args, server) -> list:
    """The oldest strategy and one sequence per execution again under each of CLIENTS. The
    sequences a client leaves open when it stops end at the models' idle timeout, which each point
    waits out, so that the next finds its slots free."""
    from bench_loads import pa_available
    clients = dict(CLIENTS)
    if args.pa_window_ms <= 0 or not pa_available():
        note("perf_analyzer not run (--pa-window-ms 0, or not available): no _pa rows")
        clients.pop("pa")
    if args.wrk_duration <= 0 or shutil.which("wrk") is None:
        note("wrk not run (--wrk-duration 0, or not installed): no _wrk rows")
        clients.pop("wrk")
    CHUNK_FILE.parent.mkdir(parents=True, exist_ok=True)
    CHUNK_FILE.write_bytes(silero_vad.windows(silero_vad.synthetic_clip(1000, 2))[1].astype(np.float32).tobytes())
    points = []
    for suffix, make_load in clients.items():
        for contender in ("oldest", "one_per_execution"):
            for n in args.streams:
                log(f"ortserve {contender}, {n} streams, client {suffix}")
                time.sleep(IDLE_US / 1e6 + 0.5)
                load = make_load(server, MODELS[contender], n, args, first_id=10_000_000 * (len(points) + 1))
                point = measured_on_server(server, MODELS[contender], load)
                if point is not None:
                    points.append(dict(point, contender=f"{contender}_{suffix}", streams=n))
    return points


def check_answers(server, contender: str, reference_sess, timeout_s: float) -> str | None:
    """None if one stream's answers equal onnxruntime's; else why not."""
    windows = silero_vad.windows(silero_vad.synthetic_clip(7, 16))
    try:
        _, _, answers = asyncio.run(asyncio.wait_for(_streams(
            f"127.0.0.1:{server.grpc_port}", MODELS[contender], [windows], 900_000,
            contender != "direct_one_slot"), timeout_s))
    except Exception as e:  # noqa: BLE001 - reported, the contender is skipped
        return f"infer failed: {e}"
    expected = silero_vad.reference_probabilities(reference_sess, windows)
    got = np.array(answers[0], np.float32)
    if not np.allclose(got, expected, rtol=1e-4, atol=1e-5):
        return f"answers differ from onnxruntime (max abs diff {np.abs(got - expected).max():.3g})"
    return None


def run_ortserve(args, repo: Path, clips_for, reference_sess) -> list:
    from bench_procs import Procs
    from bench_servers import OrtServe, wait_ready
    server = OrtServe(args.ortserve_bin, repo, args.thread_budget, 0, None, log_name="ortserve_sequences.log")
    server.start()
    points = []
    try:
        ok, ready = wait_ready(server.base, server.proc, list(MODELS.values()), 180)
        if not ok:
            note(f"ortserve did not become ready: see {LOGS / 'ortserve_sequences.log'}")
            return points
        for contender, model in MODELS.items():
            if model not in ready:
                note(f"{model} is not READY in ortserve: {contender} not measured")
                continue
            wrong = check_answers(server, contender, reference_sess, args.timeout)
            if wrong:
                note(f"{contender}: {wrong}; not measured")
                continue
            for n in args.streams:
                if contender == "direct_one_slot" and n > 1:
                    continue  # one slot holds one sequence
                log(f"ortserve {contender}, {n} streams")
                point = measure_ortserve(server, contender, clips_for(n), args.warmup_chunks, args.timeout,
                                         id_base=1_000_000 * (len(points) + 1))
                points.append(dict(point, contender=contender, streams=n))
        points += run_client_points(args, server)
    finally:
        Procs.stop(server.proc)
    return points


# --------------------------------------------------------------------------

def dry_run_points(streams: list, chunks: int) -> list:
    """Made-up points with the shape of real ones (for --dry-run)."""
    points = []
    for n in streams:
        per_exec_us = {"oldest": 300 + 20 * n, "one_per_execution": 300, "direct_one_slot": 320,
                       "inprocess_sequential": 250, "inprocess_lockstep": 250 + 15 * n}
        for contender, us in per_exec_us.items():
            if contender == "direct_one_slot" and n > 1:
                continue
            batch = n if contender in ("oldest", "inprocess_lockstep") else 1
            total = n * chunks
            wall = total / batch * us / 1e6
            points.append({"contender": contender, "streams": n, "chunks": total, "wall_s": wall,
                           "latencies_us": [us * (n / batch)] * total, "executions": total // batch,
                           "inferences": total, "server_cpu_pct": 180.0, "client_cpu_pct": 40.0})
    return points


def write(run: dict, args) -> None:
    """The points summarised (latency lists become p50/p99), as JSON and Markdown."""
    run = dict(run, points=[sequence_report.summarize(p) for p in run["points"]])
    Path(args.results_json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results_json).write_text(json.dumps(run, indent=1))
    Path(args.results_md).write_text(sequence_report.render(run))
    log(f"wrote {args.results_md} and {args.results_json}")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.report_only:
        write(json.loads(Path(args.results_json).read_text()), args)
        return 0
    run = {"commit": git_head(), "machine": machine_info(), "thread_budget": args.thread_budget,
           "chunks_per_stream": args.chunks, "chunk_samples": silero_vad.CHUNK,
           "model": f"{silero_vad.PACKAGE} {silero_vad.VERSION} (sha256 {silero_vad.ONNX_SHA256[:12]}…)"}
    if args.dry_run:
        if args.results_md == str(MD_OUT):  # never over the real results
            args.results_md = str(WORK / "RESULTS-sequences-dry-run.md")
            args.results_json = str(WORK / "sequences-dry-run.json")
        write(dict(run, dry_run=True, points=dry_run_points(args.streams, args.chunks)), args)
        return 0
    LOGS.mkdir(parents=True, exist_ok=True)
    COMMANDS.append(" ".join([".venv/bin/python", "bench/sequence_bench.py", *(argv or sys.argv[1:])]))
    source = silero_vad.fetch()
    repo = WORK / "sequences" / "repo"
    write_repository(repo, source, args.queue_delay_us)
    clips = [silero_vad.windows(silero_vad.synthetic_clip(1000 + s, args.chunks)) for s in range(max(args.streams))]
    reference = session(source, 1)
    if Path(args.ortserve_bin).is_file():
        points = run_ortserve(args, repo, lambda n: clips[:n], reference)
    else:
        points = []
        note(f"no ortserve binary at {args.ortserve_bin}: only the in-process contenders ran")
    sequential, lockstep = session(source, args.thread_budget), session(silero_vad.build_batched(source),
                                                                        args.thread_budget)
    for n in args.streams:
        log(f"in process, {n} streams")
        points.append(dict(inprocess_sequential(sequential, clips[:n]), contender="inprocess_sequential", streams=n))
        points.append(dict(inprocess_lockstep(lockstep, clips[:n]), contender="inprocess_lockstep", streams=n))
    write(dict(run, points=points, notes=list(NOTES), commands=list(COMMANDS)), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
