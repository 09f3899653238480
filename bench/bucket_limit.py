#!/usr/bin/env python3
"""The most shape buckets can gain, measured in process: onnxruntime runs the
length mix of bench/bucket_bench.py on the same BERT-shaped encoder once as
batch-1 runs at each request's own length (what identical-shape batching
mostly does) and once as full batches of B requests padded to their bucket
(what buckets do at best: every batch full, no server around it).

    .venv/bin/python bench/bucket_limit.py [--models 128x2,64x2,256x4]
        [--buckets 16,32,64,128] [--batches 4,8,16] [--threads 1,2] [--rounds 3]

Prints, per model (hidden x layers) and intra-op thread count, the time per
request of each way and the ratio batch-1 / bucketed: the ceiling of the
throughput gain from buckets on this machine, since the server adds its own
per-request work to both. Rounds alternate the two ways; the median is
printed. Writes bench/results/RESULTS-bucket-limit.md. Nothing is asserted.
"""
import argparse
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

import benchlib  # noqa: F401  (bench/lib/ on sys.path)
from bench_common import RESULTS, ROOT, git_head, machine_info
from bucket_models import mix_lengths
from inprocess_ort import make_session

sys.path.insert(0, str(ROOT / "tests" / "models"))
import make_text_models as text  # noqa: E402


def session(hidden: int, layers: int, threads: int) -> ort.InferenceSession:
    """The encoder with an ortserve CPU instance's session options (inprocess_ort.make_session)."""
    return make_session(text.build_text_encoder(hidden=hidden, layers=layers).SerializeToString(), threads)


def run(s: ort.InferenceSession, length: int, rows: int) -> None:
    ones = np.ones((rows, length), np.int64)
    s.run(None, {"input_ids": ones, "attention_mask": ones})


def batch_one_us(s, lengths) -> float:
    t = time.perf_counter()
    for n in lengths:
        run(s, n, 1)
    return (time.perf_counter() - t) / len(lengths) * 1e6


def bucketed_us(s, lengths, buckets, batch) -> float:
    by_bucket = {}
    for n in lengths:
        by_bucket.setdefault(next(b for b in buckets if b >= n), []).append(n)
    t = time.perf_counter()
    for bucket, members in by_bucket.items():
        for i in range(0, len(members), batch):
            run(s, bucket, len(members[i:i + batch]))
    return (time.perf_counter() - t) / len(lengths) * 1e6


def measure(args, hidden, layers, threads, lengths) -> dict:
    s = session(hidden, layers, threads)
    for n in lengths[:32]:
        run(s, n, 1)
    plain, padded = [], {b: [] for b in args.batches}
    for _ in range(args.rounds):
        plain.append(batch_one_us(s, lengths))
        for b in args.batches:
            padded[b].append(bucketed_us(s, lengths, args.buckets, b))
    return {"batch1": statistics.median(plain), **{b: statistics.median(v) for b, v in padded.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="128x2,64x2,256x4", help="hidden x layers, comma separated")
    ap.add_argument("--buckets", default="16,32,64,128")
    ap.add_argument("--batches", default="4,8,16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--requests", type=int, default=256, help="the mix's length, as in bucket_bench.py")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    args.buckets = [int(b) for b in args.buckets.split(",")]
    args.batches = [int(b) for b in args.batches.split(",")]
    lengths = mix_lengths(args.requests, np.random.default_rng(3))
    rows = []
    for spec in args.models.split(","):
        hidden, layers = (int(x) for x in spec.split("x"))
        for threads in (int(t) for t in args.threads.split(",")):
            r = measure(args, hidden, layers, threads, lengths)
            cells = " | ".join(f"{r[b]:.0f} ({r['batch1'] / r[b]:.2f}x)" for b in args.batches)
            rows.append(f"| {hidden} x {layers} | {threads} | {r['batch1']:.0f} | {cells} |")
            print(rows[-1], flush=True)
    info = machine_info()
    header = " | ".join(f"batches of {b}, padded" for b in args.batches)
    out = RESULTS / "RESULTS-bucket-limit.md"
    out.write_text("\n".join([
        "# The most shape buckets can gain on this machine (in-process onnxruntime)", "",
        f"Commit {git_head()}, {time.strftime('%Y-%m-%d %H:%M')}, machine {info}.", "",
        f"`.venv/bin/python bench/bucket_limit.py --models {args.models} --buckets "
        f"{','.join(map(str, args.buckets))} --batches {','.join(map(str, args.batches))} --threads {args.threads} "
        f"--rounds {args.rounds}`", "",
        f"The length mix of bench/bucket_bench.py ({len(lengths)} requests, lengths {min(lengths)}-{max(lengths)}, "
        f"median {int(np.median(lengths))}), on its BERT-shaped encoder (both outputs fetched), microseconds per "
        "request, median of the rounds; in brackets batch-1 / bucketed, the ceiling of the throughput gain "
        "from buckets (every batch full, no server).", "",
        f"| hidden x layers | intra-op threads | batch 1, own length | {header} |",
        "|---|---|---|" + "---|" * len(args.batches), *rows, ""]))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
