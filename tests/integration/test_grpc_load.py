"""The gRPC front end under load: overload of a small queue (UNAVAILABLE),
HTTP and gRPC requests batched together, perf_analyzer -i grpc in its sync,
async and streaming modes."""
from __future__ import annotations

import concurrent.futures
import re
import subprocess
import threading

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from grpc_helpers import GRPC_TIMEOUT_S, grpc_outputs
from harness import (grpc_inputs, assert_matches, infer_inputs, model_file, perf_analyzer_command,
                     requested_outputs, sample_array)

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------ overload

OVERLOAD_CALLERS = 24
OVERLOAD_ROUNDS = 3


@pytest.mark.timeout(240)
def test_overload_small_queue_unavailable(server, test_repo, reference, grpc_still_serves):
    model = "slow_queue2"  # max_batch_size 1, max_queue_size 2, ~100 ms per request
    path = model_file(test_repo, model)
    rejected = succeeded = 0
    for round_ in range(OVERLOAD_ROUNDS):
        inputs = [sample_array("FP32", (1, 16), seed=5000 + 100 * round_ + i)
                  for i in range(OVERLOAD_CALLERS)]
        barrier = threading.Barrier(OVERLOAD_CALLERS, timeout=60)

        def call(x):
            with grpcclient.InferenceServerClient(server.grpc_url) as c:
                barrier.wait()
                try:
                    return c.infer(model, grpc_inputs({"x": ("FP32", x)}),
                                   client_timeout=GRPC_TIMEOUT_S * 2), None
                except InferenceServerException as e:
                    return None, e

        with concurrent.futures.ThreadPoolExecutor(OVERLOAD_CALLERS) as pool:
            outcomes = list(pool.map(call, inputs))
        for x, (result, error) in zip(inputs, outcomes):
            if error is not None:
                assert error.status() == "StatusCode.UNAVAILABLE", (error.status(), error.message())
                assert re.search(r"queue", error.message(), re.IGNORECASE), error.message()
                rejected += 1
            else:
                assert_matches(result.as_numpy("y"), reference.run(path, {"x": x})["y"])
                succeeded += 1
        if rejected:
            break
    assert rejected > 0, "no gRPC request was rejected although 24 arrived at a queue of 2"
    assert succeeded > 0


# ------------------------------------------------------------------ HTTP + gRPC batch together

BATCH_CALLERS_PER_PROTOCOL = 16


@pytest.mark.timeout(180)
def test_http_and_grpc_requests_batch_together(server, test_repo, reference):
    model = "mlp_batching"  # max_queue_delay 50 ms
    n = BATCH_CALLERS_PER_PROTOCOL
    before = server.model_stats(model)
    inputs = [sample_array("FP32", (1, 16), seed=6000 + i) / 100 for i in range(2 * n)]
    barrier = threading.Barrier(2 * n, timeout=60)

    def http_call(i):
        with httpclient.InferenceServerClient(server.url, network_timeout=60) as c:
            barrier.wait()
            r = c.infer(model, infer_inputs({"features": ("FP32", inputs[i])}),
                        outputs=requested_outputs(["probabilities", "label"]), request_id=f"http-{i}")
            return r.get_response()["id"], r.as_numpy("probabilities"), r.as_numpy("label")

    def grpc_call(i):
        with grpcclient.InferenceServerClient(server.grpc_url) as c:
            barrier.wait()
            r = c.infer(model, grpc_inputs({"features": ("FP32", inputs[i])}),
                        outputs=grpc_outputs(["probabilities", "label"]), request_id=f"grpc-{i}",
                        client_timeout=GRPC_TIMEOUT_S)
            return r.get_response().id, r.as_numpy("probabilities"), r.as_numpy("label")

    with concurrent.futures.ThreadPoolExecutor(2 * n) as pool:
        futures = [pool.submit(http_call if i % 2 == 0 else grpc_call, i) for i in range(2 * n)]
        results = [f.result(timeout=120) for f in futures]

    path = model_file(test_repo, model)
    for i, (rid, probs, label) in enumerate(results):
        assert rid == f"{'http' if i % 2 == 0 else 'grpc'}-{i}"
        ref = reference.run(path, {"features": inputs[i]})
        assert_matches(probs, ref["probabilities"])
        assert_matches(label, ref["label"])

    after = server.model_stats(model)
    inferences = int(after["inference_count"]) - int(before["inference_count"])
    executions = int(after["execution_count"]) - int(before["execution_count"])
    assert inferences == 2 * n
    assert 1 <= executions < inferences, (executions, inferences)


# ------------------------------------------------------------------ perf_analyzer -i grpc

PERF_MODES = {"sync": [], "async": ["--async"], "streaming": ["--async", "--streaming"]}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", list(PERF_MODES))
def test_perf_analyzer_grpc(demo_server, mode):
    binary, env = perf_analyzer_command()
    before = int(demo_server.model_stats("mlp_classifier")["inference_count"])
    cmd = [str(binary), "-i", "grpc", "-u", demo_server.grpc_url, "-m", "mlp_classifier",
           "--concurrency-range", "4", "-p", "2000", "--max-trials", "6",
           "--stability-percentage", "100", *PERF_MODES[mode]]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=200)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert re.search(r"Throughput: [0-9.]+ infer/sec", output), output
    assert "Client:" in output, output
    # perf_analyzer 2.51 prints the server-side section in all three modes
    # (streaming included), from the statistics RPC before and after.
    assert "Server:" in output, output
    m = re.search(r"Inference count: (\d+)", output)
    assert m and int(m.group(1)) > 0, output
    after = int(demo_server.model_stats("mlp_classifier")["inference_count"])
    assert after - before > 4
