"""The gRPC front end's limits and lifetimes: shutdown with an open stream,
--grpc-max-message-size, client-cancelled calls, and the "timeout" request
parameter."""
from __future__ import annotations

import concurrent.futures
import queue
import re
import signal
import subprocess
import threading

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2_grpc as pbg
from tritonclient.utils import InferenceServerException

from grpc_helpers import GRPC_TIMEOUT_S, decode_output, grpc_check_add_sub_fp32, raw_request, raw_tensor
from harness import (grpc_inputs, SHUTDOWN_TIMEOUT_S, assert_matches, make_test_models, model_file,
                     sample_array)

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------ graceful shutdown

@pytest.mark.timeout(120)
def test_sigterm_with_open_stream_exits_zero(launch, tmp_path, reference):
    """SIGTERM while a gRPC stream is open (requests on it in flight): the
    server exits 0, every answer that arrives is correct, and the stream is
    ended by the server (an error reaches the callback) instead of hanging."""
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32", "slow"])
    srv = launch(repo)
    srv.wait_models_ready(["add_sub_fp32", "slow"])
    results: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        a = sample_array("FP32", (1, 16), seed=7000)
        client.async_stream_infer("add_sub_fp32", grpc_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", a)}),
                                  request_id="before-term")
        result, error = results.get(timeout=GRPC_TIMEOUT_S)
        assert error is None, error
        ref = reference.run(model_file(repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": a})
        assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
        slow_inputs = {f"slow-{i}": sample_array("FP32", (1, 16), seed=7100 + i) for i in range(3)}
        for rid, x in slow_inputs.items():
            client.async_stream_infer("slow", grpc_inputs({"x": ("FP32", x)}), request_id=rid)
        # the stream is open (no stop_stream) when the signal arrives
        srv.proc.send_signal(signal.SIGTERM)
        try:
            rc = srv.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"ortserve did not exit within {SHUTDOWN_TIMEOUT_S}s of SIGTERM "
                                 f"with a gRPC stream open; log tail:\n{srv.log_tail()}")
        assert rc == 0, f"exit code {rc}; log tail:\n{srv.log_tail()}"
        # Whatever arrived is correct, or (for a request the server read
        # after the signal) an in-stream rejection saying it shuts down; the
        # stream itself then ends with a gRPC status.
        rejected = []
        while True:
            result, error = results.get(timeout=GRPC_TIMEOUT_S)
            if error is None:
                rid = result.get_response().id
                ref = reference.run(model_file(repo, "slow"), {"x": slow_inputs.pop(rid)})
                assert_matches(result.as_numpy("y"), ref["y"])
            elif error.status() is None:  # ModelStreamInferResponse.error_message
                assert re.search(r"shut", error.message(), re.I), error.message()
                rejected.append(error.message())
            else:
                stream_error = error
                break
        assert len(rejected) <= 3, rejected
        assert stream_error.status() in ("StatusCode.UNAVAILABLE", "StatusCode.CANCELLED"), \
            (stream_error.status(), stream_error.message())
    finally:
        client.stop_stream(cancel_requests=True)
        client.close()


# ------------------------------------------------------------------ limits, cancellation, parameters

@pytest.mark.timeout(120)
def test_message_over_grpc_max_message_size(launch, tmp_path, reference):
    limit = 1 << 20
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["identity_uint8", "add_sub_fp32"])
    srv = launch(repo, extra_args=("--grpc-max-message-size", str(limit)))
    srv.wait_models_ready(["identity_uint8", "add_sub_fp32"])
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        big = np.zeros((1, 2 * limit), np.uint8)
        with pytest.raises(InferenceServerException) as info:
            c.infer("identity_uint8", grpc_inputs({"INPUT0": ("UINT8", big)}), client_timeout=GRPC_TIMEOUT_S)
        assert info.value.status() == "StatusCode.RESOURCE_EXHAUSTED", \
            (info.value.status(), info.value.message())
        small = sample_array("UINT8", (1, limit // 2), seed=8000)
        result = c.infer("identity_uint8", grpc_inputs({"INPUT0": ("UINT8", small)}),
                         client_timeout=GRPC_TIMEOUT_S)
        assert_matches(result.as_numpy("OUTPUT0"), small, exact=True)
    grpc_check_add_sub_fp32(srv, repo, reference)


@pytest.mark.timeout(180)
def test_client_cancelled_calls_leave_server_healthy(grpc_client, test_repo, reference, grpc_still_serves):
    """Calls whose client deadline passes while queued/running on the slow
    model (unary and streamed), then a correct answer from the same model."""
    results: queue.Queue = queue.Queue()
    x = sample_array("FP32", (1, 16), seed=8100)
    for _ in range(12):
        grpc_client.async_infer("slow", grpc_inputs({"x": ("FP32", x)}), client_timeout=0.01,
                                callback=lambda result, error: results.put(error))
    errors = [results.get(timeout=GRPC_TIMEOUT_S) for _ in range(12)]
    assert any(e is not None and e.status() == "StatusCode.DEADLINE_EXCEEDED" for e in errors), \
        [e and (e.status(), e.message()) for e in errors]
    grpc_client.start_stream(callback=lambda result, error: None)
    for _ in range(8):
        grpc_client.async_stream_infer("slow", grpc_inputs({"x": ("FP32", x)}))
    grpc_client.stop_stream(cancel_requests=True)
    result = grpc_client.infer("slow", grpc_inputs({"x": ("FP32", x)}), client_timeout=GRPC_TIMEOUT_S)
    assert_matches(result.as_numpy("y"), reference.run(model_file(test_repo, "slow"), {"x": x})["y"])


def _slow_request(x: np.ndarray, **params) -> pb.ModelInferRequest:
    t = raw_tensor("x", "FP32", x.shape)
    req = raw_request("slow", t, raw=[np.ascontiguousarray(x, np.float32).tobytes()])
    for k, v in params.items():
        req.parameters[k].int64_param = v
    return req


def test_generous_timeout_parameter_succeeds(stub, test_repo, reference):
    x = sample_array("FP32", (1, 16), seed=8200)
    response = stub.ModelInfer(_slow_request(x, timeout=60_000_000), timeout=GRPC_TIMEOUT_S)
    assert_matches(decode_output(response, "y"), reference.run(model_file(test_repo, "slow"), {"x": x})["y"])


@pytest.mark.timeout(240)
def test_timeout_parameter_while_busy(server, stub, test_repo, reference, grpc_still_serves):
    """Twin of the HTTP test: a 1 us "timeout" request parameter on the busy
    slow model is rejected with a message about the timeout."""
    path = model_file(test_repo, "slow")
    busy = [sample_array("FP32", (1, 16), seed=8300 + i) for i in range(6)]
    barrier = threading.Barrier(len(busy), timeout=60)

    def busy_call(x):
        with grpc.insecure_channel(server.grpc_url) as channel:
            barrier.wait()
            return pbg.GRPCInferenceServiceStub(channel).ModelInfer(_slow_request(x), timeout=GRPC_TIMEOUT_S * 2)

    timed_out = []
    with concurrent.futures.ThreadPoolExecutor(len(busy)) as pool:
        futures = [pool.submit(busy_call, x) for x in busy]
        for attempt in range(5):
            x = sample_array("FP32", (1, 16), seed=8400 + attempt)
            try:
                response = stub.ModelInfer(_slow_request(x, timeout=1), timeout=GRPC_TIMEOUT_S)
            except grpc.RpcError as e:
                assert e.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE,
                                    grpc.StatusCode.INVALID_ARGUMENT), (e.code(), e.details())
                assert re.search(r"time|deadline|expired", e.details() or "", re.I), e.details()
                timed_out.append((e.code(), e.details()))
                continue
            assert_matches(decode_output(response, "y"), reference.run(path, {"x": x})["y"])
        busy_responses = [f.result(timeout=GRPC_TIMEOUT_S * 3) for f in futures]
    assert timed_out, "no request with a 1 us timeout was rejected while the model was busy"
    for x, response in zip(busy, busy_responses):
        assert_matches(decode_output(response, "y"), reference.run(path, {"x": x})["y"])
