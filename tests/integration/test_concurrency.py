"""Concurrent callers get their own answers; dynamic batching happens;
perf_analyzer runs against the server unmodified."""
from __future__ import annotations

import concurrent.futures
import subprocess
import threading

import pytest
import tritonclient.http as httpclient

from harness import (assert_matches, infer_inputs, model_file, perf_analyzer_command,
                     requested_outputs, sample_array)

CALLERS = 48


def _stat(stats: dict, key: str) -> int:
    return int(stats[key])


@pytest.mark.timeout(180)
def test_concurrent_callers_get_their_own_answers_and_are_batched(server, test_repo, reference):
    model = "mlp_batching"  # max_queue_delay 50 ms, used by no other test
    before = server.model_stats(model)
    inputs = [sample_array("FP32", (1, 16), seed=1000 + i) / 100 for i in range(CALLERS)]
    barrier = threading.Barrier(CALLERS, timeout=60)

    def call(i: int):
        with httpclient.InferenceServerClient(server.url, network_timeout=60) as c:
            barrier.wait()
            r = c.infer(model, infer_inputs({"features": ("FP32", inputs[i])}),
                        outputs=requested_outputs(["probabilities", "label"]), request_id=str(i))
            return r.get_response()["id"], r.as_numpy("probabilities"), r.as_numpy("label")

    with concurrent.futures.ThreadPoolExecutor(CALLERS) as pool:
        results = list(pool.map(call, range(CALLERS)))

    path = model_file(test_repo, model)
    for i, (rid, probs, label) in enumerate(results):
        assert rid == str(i)
        ref = reference.run(path, {"features": inputs[i]})
        assert_matches(probs, ref["probabilities"])
        assert_matches(label, ref["label"])

    after = server.model_stats(model)
    inferences = _stat(after, "inference_count") - _stat(before, "inference_count")
    executions = _stat(after, "execution_count") - _stat(before, "execution_count")
    assert inferences == CALLERS
    assert 1 <= executions < inferences, (executions, inferences)
    assert any(int(b["batch_size"]) > 1 for b in after["batch_stats"]), after["batch_stats"]


@pytest.mark.timeout(180)
def test_concurrent_batches_of_different_sizes(server, test_repo, reference):
    """Requests that already carry a batch are stacked and split back in order."""
    model = "mlp_batching"
    sizes = [1, 2, 3, 5, 8, 1, 4, 7]
    inputs = [sample_array("FP32", (n, 16), seed=2000 + i) / 100 for i, n in enumerate(sizes)]

    def call(i: int):
        with httpclient.InferenceServerClient(server.url, network_timeout=60) as c:
            return c.infer(model, infer_inputs({"features": ("FP32", inputs[i])})
                           ).as_numpy("probabilities")

    with concurrent.futures.ThreadPoolExecutor(len(sizes)) as pool:
        results = list(pool.map(call, range(len(sizes))))
    for x, probs in zip(inputs, results):
        ref = reference.run(model_file(test_repo, model), {"features": x})
        assert_matches(probs, ref["probabilities"])


@pytest.mark.timeout(240)
def test_perf_analyzer_http(demo_server):
    binary, env = perf_analyzer_command()
    cmd = [str(binary), "-i", "http", "-u", demo_server.url, "-m", "mlp_classifier",
           "--concurrency-range", "8", "-p", "2000", "--max-trials", "6",
           "--stability-percentage", "100"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=200)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Server:" in output, output
    assert "Inference count" in output, output
    # the model was exercised for real
    stats = demo_server.model_stats("mlp_classifier")
    assert int(stats["inference_count"]) > 8


@pytest.mark.timeout(180)
def test_adaptive_window_does_not_wait_when_nobody_else_can_join(server, test_repo, reference):
    """mlp_adaptive has a 60 s max_queue_delay and the adaptive window.
    One closed-loop client, then 8: each batch runs once the clients the server
    answered are back, never after the window -- a fixed window would make
    every request here outlive the clients' 20 s timeout."""
    model = "mlp_adaptive"
    path = model_file(test_repo, model)

    def loop(client_index: int, rounds: int):
        with httpclient.InferenceServerClient(server.url, network_timeout=20) as c:
            for k in range(rounds):
                x = sample_array("FP32", (1, 16), seed=3000 + 100 * client_index + k) / 100
                r = c.infer(model, infer_inputs({"features": ("FP32", x)}),
                            outputs=requested_outputs(["probabilities"]))
                assert_matches(r.as_numpy("probabilities"),
                               reference.run(path, {"features": x})["probabilities"])

    loop(0, 5)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for f in [pool.submit(loop, i, 5) for i in range(1, 9)]:
            f.result()
    stats = server.model_stats(model)
    assert _stat(stats, "inference_count") == 45
