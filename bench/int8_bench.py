#!/usr/bin/env python3
"""INT8 against FP32 on CPU: the BERT-shaped encoder of
tests/models/make_text_models.py, and the same encoder quantized by
onnxruntime's own `quantize_dynamic` (weights INT8, activations quantized per
run), served side by side by one ortserve and run in process by onnxruntime.

    .venv/bin/python bench/int8_bench.py [--ortserve-bin build/ortserve]
        [--hidden 256] [--layers 4] [--length 128] [--concurrency 4]
        [--window-ms 3000] [--rounds 3]

Each round measures both models in turn (perf_analyzer over HTTP, a closed
loop of --concurrency requests of --length tokens), then both in process
(onnxruntime with an ortserve instance's session options and the same two
threads), so the INT8/FP32 ratio compares runs minutes apart at most. The
median over rounds is reported, with how far the INT8 outputs are from FP32
(pooled output, max abs difference, and the cosine similarity). Writes
bench/results/RESULTS-int8.md. Nothing is asserted: this is a measurement.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from onnxruntime.quantization import QuantType, quantize_dynamic

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import COMMANDS, LOGS, RESULTS, ROOT, WORK, git_head, log, machine_info
from bench_loads import run_perf_analyzer
from bench_procs import Procs
from bench_servers import OrtServe, wait_ready
from bucket_models import write_mix
from inprocess_ort import make_session

sys.path.insert(0, str(ROOT / "tests" / "models"))
import make_text_models as text  # noqa: E402

MODELS = ("encoder_fp32", "encoder_int8")
THREADS = 2  # ortserve --thread-budget and the in-process session's intra-op threads


def write_repository(repo: Path, hidden: int, layers: int) -> dict:
    """Both encoders in `repo`; returns each one's model file."""
    fp32 = text.build_text_encoder(hidden=hidden, layers=layers)
    batching = "dynamic_batching { max_queue_delay_microseconds: 2000 }"
    files = {}
    for name in MODELS:
        text.demo.write_model(repo, name, fp32, text.text_encoder_config(name, hidden, 8, batching=batching))
        files[name] = repo / name / "1" / "model.onnx"
    quantize_dynamic(str(files["encoder_fp32"]), str(files["encoder_int8"]), weight_type=QuantType.QInt8)
    return files


def inprocess_per_second(model: Path, ids: np.ndarray, seconds: float) -> float:
    session = make_session(str(model), THREADS)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    session.run(None, feed)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        session.run(None, feed)
        runs += 1
    return runs / (time.perf_counter() - start)


def agreement(files: dict, length: int, rng) -> dict:
    """INT8 pooled output against FP32's on 32 random requests."""
    sessions = {name: make_session(str(f), THREADS) for name, f in files.items()}
    diffs, cosines = [], []
    for _ in range(32):
        ids, mask = text.token_ids(length, rng)
        out = {name: s.run(["pooled"], {"input_ids": ids, "attention_mask": mask})[0][0]
               for name, s in sessions.items()}
        a, b = out["encoder_fp32"], out["encoder_int8"]
        diffs.append(float(np.max(np.abs(a - b))))
        cosines.append(float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))))
    return {"max_abs": max(diffs), "min_cosine": min(cosines)}


def one_round(args, server, files: dict, mix: Path, ids: np.ndarray) -> dict:
    figures = {}
    for name in MODELS:
        point = run_perf_analyzer(f"127.0.0.1:{server.port}", name, {"request_pa": str(mix)}, "concurrency",
                                  args.concurrency, args.window_ms)
        if point is None:
            raise RuntimeError(f"perf_analyzer failed on {name}: see {LOGS}")
        figures[name] = {"served": point["throughput"], "p99_ms": point["p99_us"] / 1000}
    for name in MODELS:
        figures[name]["inprocess"] = inprocess_per_second(files[name], ids, args.window_ms / 1000)
    return figures


def median_of(rounds: list, name: str, key: str) -> float:
    return statistics.median(r[name][key] for r in rounds)


def write_report(args, rounds: list, agree: dict, sizes: dict) -> Path:
    info = machine_info()
    rows = []
    for name in MODELS:
        rows.append(f"| {name} | {sizes[name] / 2**20:.1f} | {median_of(rounds, name, 'served'):.1f} | "
                    f"{median_of(rounds, name, 'p99_ms'):.1f} | {median_of(rounds, name, 'inprocess'):.1f} |")
    ratio = lambda key: statistics.median(r["encoder_int8"][key] / r["encoder_fp32"][key] for r in rounds)
    text_ = "\n".join([
        "# INT8 (quantize_dynamic) against FP32 on CPU", "",
        f"Commit {git_head()}, {time.strftime('%Y-%m-%d %H:%M')}, machine {info}.", "",
        f"Model: the BERT-shaped encoder of tests/models/make_text_models.py, hidden {args.hidden}, "
        f"{args.layers} masked self-attention layers, requests of {args.length} tokens; INT8: "
        "onnxruntime.quantization.quantize_dynamic (QInt8 weights). ortserve --thread-budget 2, "
        f"max_batch_size 8, perf_analyzer over HTTP at concurrency {args.concurrency}, "
        f"3 windows of {args.window_ms} ms; in process: onnxruntime, 2 intra-op threads, batch 1, one "
        f"caller. Median of {len(rounds)} rounds.", "",
        f"INT8 serves {ratio('served'):.2f}x the inferences per second of FP32 through ortserve and runs "
        f"{ratio('inprocess'):.2f}x as fast in process; its pooled output differs from FP32's by at most "
        f"{agree['max_abs']:.3g} (cosine similarity at least {agree['min_cosine']:.4f}, 32 requests).", "",
        "| model | file MiB | ortserve inferences/s | ortserve p99 ms | in-process runs/s |",
        "|---|---|---|---|---|", *rows, "",
        "Per round (INT8/FP32: ortserve, in process): " + ", ".join(
            f"{r['encoder_int8']['served'] / r['encoder_fp32']['served']:.2f}/"
            f"{r['encoder_int8']['inprocess'] / r['encoder_fp32']['inprocess']:.2f}" for r in rounds), "",
        "Commands:", "", "```", *COMMANDS, "```", ""])
    out = RESULTS / "RESULTS-int8.md"
    out.write_text(text_)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--window-ms", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    work = WORK / "int8"
    repo = work / "repo"
    LOGS.mkdir(parents=True, exist_ok=True)
    files = write_repository(repo, args.hidden, args.layers)
    rng = np.random.default_rng(5)
    write_mix(work / "mix.json", [args.length] * 16, rng)
    ids, _ = text.token_ids(args.length, rng)
    server = OrtServe(args.ortserve_bin, repo, THREADS, None, None, log_name="int8.log")
    server.start()
    try:
        ok, _ = wait_ready(server.base, server.proc, list(MODELS), 180)
        if not ok:
            raise RuntimeError(f"ortserve did not serve both encoders: see {LOGS}")
        rounds = [one_round(args, server, files, work / "mix.json", ids) for _ in range(args.rounds)]
    finally:
        server.stop()
        Procs.stop_all()
    agree = agreement(files, args.length, rng)
    sizes = {name: f.stat().st_size for name, f in files.items()}
    for name in MODELS:
        log(f"{name}: {median_of(rounds, name, 'served'):.1f} inf/s served, "
            f"{median_of(rounds, name, 'inprocess'):.1f} runs/s in process")
    log(f"wrote {write_report(args, rounds, agree, sizes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
