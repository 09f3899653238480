#!/usr/bin/env python3
"""The text pipeline (tokenize -> classify -> softmax/top-1/label) served three ways, same client:

  separate  ortserve, the three models of scripts/make_pipeline_models.py called one after another
            by the client (three HTTP requests per sentence, the client moves the tensors)
  ensemble  ortserve's text_pipeline ensemble: one request, the server moves the tensors
            (skipped, with a note, when the build serves no ensemble)
  fastapi   bench/baselines/baseline_fastapi_pipeline.py: FastAPI + onnxruntime, tokenization and
            softmax/labels in Python around the classifier: one request

    make bench-pipeline      # or:
    .venv/bin/python bench/pipeline_bench.py [--concurrency 1,8,32] [--duration 4] [--legs separate,ensemble,fastapi] [--rounds 5]

Throughput and latency percentiles (one sentence = one pipeline run, from the first byte sent to
the last answer) at each concurrency, closed loop: N client threads, each on its own keep-alive
connection(s), send the next sentence when the last is answered. The client is Python (http.client)
and runs on the same cores as the servers: its CPU is taken from them (more in the separate leg,
whose client sends three requests and parses three answers per sentence).
Before measuring, each leg's answers for the sample sentences must equal the others'.
Writes bench/results/RESULTS-pipeline.md and bench/results/pipeline.json.
"""
import argparse
import http.client
import json
import os
import sys
import statistics
import threading
import time
from pathlib import Path

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import LOGS, NOTES, RESULTS, ROOT, WORK, git_head, log, machine_info, note
from bench_procs import Procs
from bench_servers import FastApiBaseline, OrtServe, wait_ready

sys.path.insert(0, str(ROOT / "scripts"))
import make_pipeline_models as pipelines  # noqa: E402

ENSEMBLE = "text_pipeline"
SENTENCES = ["The movie was great", "boring plot, awful acting", "I loved the music but the ending was sad",
             "not good", "the best film", "worst story ever", "funny and sad", "ok",
             "the actors were fine but the plot was too long and really boring"]
STEP_TIMEOUT_S = 30


def text_body(text):
    return json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": [text]}]}).encode()


def outputs_of(raw):
    return {o["name"]: o for o in json.loads(raw)["outputs"]}


class Client:
    """One keep-alive connection; post() returns the parsed outputs or raises."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=STEP_TIMEOUT_S)

    def post(self, model, body):
        self.conn.request("POST", f"/v2/models/{model}/infer", body, {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        raw = r.read()
        if r.status != 200:
            raise RuntimeError(f"{model}: HTTP {r.status}: {raw[:200]!r}")
        return outputs_of(raw)


def run_separate(client, text):
    tokens = client.post("text_tokenizer", text_body(text))
    body = json.dumps({"inputs": [
        {"name": n, "datatype": "INT64", "shape": tokens[n]["shape"], "data": tokens[n]["data"]}
        for n in ("input_ids", "attention_mask")]}).encode()
    logits = client.post("text_classifier", body)["logits"]
    body = json.dumps({"inputs": [{"name": "logits", "datatype": "FP32", "shape": logits["shape"],
                                   "data": logits["data"]}]}).encode()
    return client.post("text_postprocess", body)


def run_single(client, text):
    return client.post(ENSEMBLE, text_body(text))


def answer(outputs):
    return outputs["LABEL"]["data"][0], float(outputs["SCORE"]["data"][0])


def check_agreement(legs):
    """Every leg's label and score for each sample sentence must match the first leg's."""
    first_name, (first_port, first_run) = next(iter(legs.items()))
    for text in SENTENCES:
        want = answer(first_run(Client(first_port), text))
        for name, (port, run) in legs.items():
            got = answer(run(Client(port), text))
            if got[0] != want[0] or abs(got[1] - want[1]) > 1e-5:
                raise RuntimeError(f"'{text}': {name} answers {got}, {first_name} answers {want}")


def measure(port, run, concurrency, duration_s, warmup_s):
    """Closed loop; returns throughput (pipelines/s), p50/p90/p99 (ms) and errors after warm-up."""
    start = time.monotonic()
    measure_from, stop_at = start + warmup_s, start + warmup_s + duration_s
    latencies, errors, lock = [], [0], threading.Lock()

    def worker(seed):
        client, i, mine, failed = Client(port), seed, [], 0
        while True:
            t0 = time.monotonic()
            if t0 >= stop_at:
                break
            try:
                run(client, SENTENCES[i % len(SENTENCES)])
                t1 = time.monotonic()
                if t0 >= measure_from:
                    mine.append(t1 - t0)
            except Exception:  # noqa: BLE001  (counted; a fresh connection for the next one)
                failed += 1
                client = Client(port)
            i += 1
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=warmup_s + duration_s + STEP_TIMEOUT_S * 4)
    latencies.sort()
    pct = lambda q: round(1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2) if latencies else None
    return {"throughput": round(len(latencies) / duration_s, 1), "p50_ms": pct(0.50), "p90_ms": pct(0.90),
            "p99_ms": pct(0.99), "count": len(latencies), "errors": errors[0]}


def start_servers(args, repo, wanted):
    servers, legs = [], {}
    if {"separate", "ensemble"} & wanted:
        ort = OrtServe(args.ortserve_bin, repo, args.thread_budget, 0, None, log_name="pipeline_ortserve.log",
                       env_extra={"LD_PRELOAD": str(pipelines.libpython_path())})
        ort.start()
        servers.append(ort)
        has_ensemble = (repo / ENSEMBLE / "config.pbtxt").is_file()
        models = list(pipelines.TEXT_MODELS) + ([ENSEMBLE] if "ensemble" in wanted and has_ensemble else [])
        ok, ready = wait_ready(ort.base, ort.proc, models, 120)
        if not ok or not set(pipelines.TEXT_MODELS) <= set(ready):
            raise RuntimeError(f"ortserve did not get the text models ready; see {LOGS / 'pipeline_ortserve.log'}")
        if "separate" in wanted:
            legs["separate"] = (ort.port, run_separate)
        if "ensemble" in wanted:
            if ENSEMBLE in ready:
                legs["ensemble"] = (ort.port, run_single)
            else:
                note(f"ensemble leg skipped: ortserve does not serve '{ENSEMBLE}' "
                     f"({'not READY, see the server log' if has_ensemble else 'no ensemble config written'})")
    if "fastapi" in wanted:
        api = FastApiBaseline(repo, args.thread_budget, 1, None, app="baseline_fastapi_pipeline:app",
                              log_name="fastapi_pipeline.log")
        api.start()
        servers.append(api)
        ok, ready = wait_ready(api.base, api.proc, [ENSEMBLE], 120)
        if not ok or ENSEMBLE not in ready:
            raise RuntimeError(f"the FastAPI pipeline baseline did not start; see {LOGS / 'fastapi_pipeline.log'}")
        legs["fastapi"] = (api.port, run_single)
    return servers, legs


def median_points(raw):
    """One point per (leg, concurrency): the medians over its rounds (errors and counts summed)."""
    groups = {}
    for p in raw:
        groups.setdefault((p["leg"], p["concurrency"]), []).append(p)
    points = []
    for (leg, concurrency), runs in groups.items():
        mid = lambda key: statistics.median(r[key] for r in runs if r[key] is not None) if any(
            r[key] is not None for r in runs) else None
        points.append({"leg": leg, "concurrency": concurrency, "rounds": len(runs),
                       **{k: mid(k) for k in ("throughput", "p50_ms", "p90_ms", "p99_ms")},
                       "count": sum(r["count"] for r in runs), "errors": sum(r["errors"] for r in runs)})
    return sorted(points, key=lambda p: p["concurrency"])


def paired_ratios(raw, leg, baseline):
    """Per concurrency: leg/baseline throughput of each round (measured back to back), median and spread."""
    by_round = {(p["leg"], p["concurrency"], p["round"]): p["throughput"] for p in raw}
    rows = []
    for concurrency in sorted({p["concurrency"] for p in raw}):
        ratios = [by_round[(leg, concurrency, r)] / by_round[(baseline, concurrency, r)]
                  for (name, c, r) in by_round if name == leg and c == concurrency
                  and by_round.get((baseline, concurrency, r))]
        if ratios:
            rows.append({"concurrency": concurrency, "median": round(statistics.median(ratios), 3),
                         "min": round(min(ratios), 3), "max": round(max(ratios), 3), "rounds": len(ratios)})
    return rows


def headline(points, concurrency):
    """The line RESULTS.md quotes (bench_report.OTHER_BENCHES): each leg at the highest concurrency."""
    legs = [f"{p['leg']} {p['throughput']}/s (p99 {p['p99_ms']} ms)" for p in points if p["concurrency"] == concurrency]
    return f"Text pipeline at concurrency {concurrency}: " + ", ".join(legs) + "."


def write_report(args, raw, machine, load_before, load_after):
    RESULTS.mkdir(parents=True, exist_ok=True)
    points, pairs = median_points(raw), paired_ratios(raw, "ensemble", "fastapi")
    data = {"commit": git_head(), "machine": machine, "args": vars(args), "points": points, "rounds": raw,
            "ensemble_vs_fastapi": pairs, "notes": NOTES, "loadavg_before": load_before, "loadavg_after": load_after}
    (RESULTS / "pipeline.json").write_text(json.dumps(data, indent=2, default=str))
    lines = ["# Text pipeline: separate models vs ensemble vs FastAPI with Python pre/post", "",
             f"Commit {data['commit']}, {machine['cpu']}, {machine['cores']} cores, "
             f"thread budget {args.thread_budget}; {args.duration} s per point after {args.warmup} s warm-up, "
             f"{args.rounds} round(s), the legs' order flipping each round (medians below); "
             f"closed loop, Python client on the same cores. Load average before {load_before}, "
             f"after {load_after} (other work on this machine counts in these figures).", "",
             "| leg | concurrency | pipelines/s | p50 ms | p90 ms | p99 ms | errors |", "|---|---|---|---|---|---|---|"]
    for p in points:
        lines.append(f"| {p['leg']} | {p['concurrency']} | {p['throughput']} | {p['p50_ms']} | {p['p90_ms']} | "
                     f"{p['p99_ms']} | {p['errors']} |")
    if pairs:
        lines += ["", "Ensemble / FastAPI throughput, each round's pair measured back to back:", "",
                  "| concurrency | median | spread | rounds |", "|---|---|---|---|"]
        lines += [f"| {r['concurrency']} | {r['median']} | {r['min']}-{r['max']} | {r['rounds']} |" for r in pairs]
    lines += ["", headline(points, max(p["concurrency"] for p in points))] if points else []
    lines += ["", "Notes:"] + [f"- {n}" for n in NOTES or ["none"]]
    lines += ["", f"Command: `.venv/bin/python bench/pipeline_bench.py {' '.join(sys.argv[1:])}`".rstrip()]
    (RESULTS / "RESULTS-pipeline.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--duration", type=float, default=4.0, help="seconds measured per point")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds before measuring, per point")
    ap.add_argument("--thread-budget", type=int, default=os.cpu_count() or 1,
                    help="ortserve --thread-budget; FastAPI workers (one intra-op thread each)")
    ap.add_argument("--legs", default="separate,ensemble,fastapi")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure every point this many times, the legs' order flipping each round; "
                         "the table shows medians, and the ensemble/FastAPI ratio of each round's pair")
    args = ap.parse_args()
    LOGS.mkdir(parents=True, exist_ok=True)
    repo = pipelines.write_text_pipeline(WORK / "pipeline" / "text_pipeline", pipelines.extensions_library())
    wanted = set(args.legs.split(","))
    machine, load_before = machine_info(), [round(x, 2) for x in os.getloadavg()]
    servers, raw = [], []
    try:
        servers, legs = start_servers(args, repo, wanted)
        check_agreement(legs)
        log(f"answers agree across {', '.join(legs)} for {len(SENTENCES)} sentences")
        for round_no in range(1, args.rounds + 1):
            order = list(legs.items()) if round_no % 2 else list(reversed(legs.items()))
            for concurrency in [int(c) for c in args.concurrency.split(",")]:
                for name, (port, run) in order:
                    point = {"leg": name, "concurrency": concurrency, "round": round_no,
                             **measure(port, run, concurrency, args.duration, args.warmup)}
                    log(f"round {round_no} {name} c={concurrency}: {point['throughput']}/s "
                        f"p99 {point['p99_ms']} ms")
                    raw.append(point)
    finally:
        for s in servers:
            s.stop()
        Procs.stop_all()
    write_report(args, raw, machine, load_before, [round(x, 2) for x in os.getloadavg()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
