#!/usr/bin/env python3
"""Shape buckets under interleaved lengths: how many executions 96 requests
of lengths 1-32 whose buckets take turns (8, 16, 32) cost, against the same
96 requests with one bucket (32), sent by 16 closed-loop clients (each waits
on its answer) over HTTP with tritonclient, as a new user would.

    .venv/bin/python bench/bucket_interleave.py [--ortserve-bin build/ortserve]
        [--window-us 20000] [--rounds 5] [--hidden 128] [--layers 2]

One server, two models of the same BERT-shaped encoder (tests/models/
make_text_models.py): text_interleaved (shape_buckets 8,16,32) and
text_one_bucket (shape_buckets 32), max_batch_size 32, one instance,
max_queue_delay --window-us, --thread-budget 2. Each round sends the 96
requests to each model in turn; the executions are read from the model's
statistics (execution_count) before and after. Prints each round (and the
wall time each model took for the 96) and the median ratio. With 16 clients waiting on their answers, each wave needs at
least one execution per bucket: the floor is about 3x the one-bucket run.
Nothing is asserted: this is a measurement (the integration test
tests/integration/test_shape_buckets.py asserts the bound, on a longer window).
"""
import argparse
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

import benchlib  # noqa: F401,E402  (bench/lib/ on sys.path)
from bench_common import LOGS, ROOT, WORK, git_head, log, machine_info  # noqa: E402
from bench_procs import Procs  # noqa: E402
from bench_servers import OrtServe, wait_ready  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "models"))
import make_text_models as text  # noqa: E402

BUCKETS = (8, 16, 32)
MODELS = {"text_one_bucket": BUCKETS[-1:], "text_interleaved": BUCKETS}
REQUESTS, CLIENTS, MAX_BATCH = 96, 16, 32


def write_repository(repo: Path, hidden: int, layers: int, window_us: int) -> None:
    model = text.build_text_encoder(hidden=hidden, layers=layers)
    batching = f"dynamic_batching {{ max_queue_delay_microseconds: {window_us} }}"
    for name, buckets in MODELS.items():
        config = text.text_encoder_config(name, hidden, MAX_BATCH, batching=batching,
                                          extra=text.bucket_parameters(buckets))
        text.demo.write_model(repo, name, model, config)


def stats(base: str, model: str) -> dict:
    with urllib.request.urlopen(f"{base}/v2/models/{model}/stats", timeout=10) as r:
        return json.load(r)["model_stats"][0]


def send_all(base_url: str, model: str, sent: list) -> None:
    """Each client thread keeps one connection (its own tritonclient)."""
    import threading

    import tritonclient.http as httpclient
    own = threading.local()

    def one(i: int) -> None:
        ids, mask = sent[i]
        if not hasattr(own, "client"):
            own.client = httpclient.InferenceServerClient(base_url)
        client = own.client
        inputs = [httpclient.InferInput("input_ids", list(ids.shape), "INT64"),
                  httpclient.InferInput("attention_mask", list(mask.shape), "INT64")]
        inputs[0].set_data_from_numpy(ids, binary_data=True)
        inputs[1].set_data_from_numpy(mask, binary_data=True)
        client.infer(model, inputs)

    text.closed_loop(one, len(sent), CLIENTS)


def executions(server, model: str, sent: list) -> tuple:
    """(executions, seconds) the requests took."""
    before = stats(server.base, model)
    start = time.perf_counter()
    send_all(f"127.0.0.1:{server.port}", model, sent)
    seconds = time.perf_counter() - start
    after = stats(server.base, model)
    if after["inference_count"] - before["inference_count"] != len(sent):
        raise RuntimeError(f"{model}: not every request was counted: {before} -> {after}")
    return after["execution_count"] - before["execution_count"], seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--window-us", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args(argv)
    repo = WORK / "bucket_interleave" / "repo"
    LOGS.mkdir(parents=True, exist_ok=True)
    write_repository(repo, args.hidden, args.layers, args.window_us)
    rng = np.random.default_rng(12)
    lengths = text.interleaved_lengths(REQUESTS, BUCKETS, rng)
    sent = [text.token_ids(n, rng) for n in lengths]
    server = OrtServe(args.ortserve_bin, repo, 2, None, None, log_name="bucket_interleave.log")
    rows = []
    server.start()
    try:
        ok, _ = wait_ready(server.base, server.proc, list(MODELS), 180)
        if not ok:
            raise RuntimeError(f"ortserve did not serve {list(MODELS)}: see {LOGS}")
        send_all(f"127.0.0.1:{server.port}", "text_interleaved", sent[:CLIENTS])  # warm the clients' path
        for r in range(args.rounds):
            one, one_s = executions(server, "text_one_bucket", sent)
            inter, inter_s = executions(server, "text_interleaved", sent)
            rows.append((one, inter, inter / one, one_s, inter_s))
            log(f"round {r + 1}: one bucket {one} executions in {one_s * 1000:.0f} ms, interleaved buckets "
                f"{inter} in {inter_s * 1000:.0f} ms: {inter / one:.2f}x the executions")
    finally:
        server.stop()
        Procs.stop_all()
    ratios = [r[2] for r in rows]
    print(f"commit {git_head()}, {time.strftime('%Y-%m-%d %H:%M')}, {machine_info()}")
    print(f"binary {args.ortserve_bin}, window {args.window_us} us, hidden {args.hidden} x {args.layers} layers")
    print(f"one bucket: executions {[r[0] for r in rows]}; interleaved: {[r[1] for r in rows]}; "
          f"ratio median {statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}); "
          f"wall ms per run, median: one bucket {statistics.median(r[3] for r in rows) * 1000:.0f}, "
          f"interleaved {statistics.median(r[4] for r in rows) * 1000:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
