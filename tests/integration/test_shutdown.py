"""SIGTERM under load: every accepted request gets an answer -- its result, or
503 / UNAVAILABLE saying the server shuts down once --exit-timeout-secs is
over -- and the process exits 0."""
from __future__ import annotations

import concurrent.futures
import json
import queue
import re
import signal
import subprocess
import time

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient

import make_test_models
from harness import SHUTDOWN_TIMEOUT_S, assert_matches, grpc_inputs, model_file, sample_array

HTTP_CALLERS = 24
GRPC_CALLS = 4
ROWS = 4  # the slow model's max_batch_size: one request per batch, ~4 x 100 ms each


def _body(x: np.ndarray) -> bytes:
    return json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()


@pytest.mark.timeout(240)
def test_sigterm_under_load_answers_every_request_then_exits_zero(launch, tmp_path, reference):
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["slow"])
    # ~10 s of queued work for one instance against a 1 s exit timeout: the
    # server must answer the rest with 503 rather than compute or drop it.
    srv = launch(repo, exit_timeout_secs=1)
    srv.wait_models_ready(["slow"])
    path = model_file(repo, "slow")
    xs = [sample_array("FP32", (ROWS, 16), seed=9000 + i) for i in range(HTTP_CALLERS + GRPC_CALLS)]

    def http_call(i: int):
        try:
            return requests.post(f"{srv.base}/v2/models/slow/infer", data=_body(xs[i]),
                                 headers={"Content-Type": "application/json"}, timeout=120)
        except requests.RequestException as e:  # a lost request: reported below
            return e

    grpc_results: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    with concurrent.futures.ThreadPoolExecutor(HTTP_CALLERS) as pool:
        futures = [pool.submit(http_call, i) for i in range(HTTP_CALLERS)]
        for k in range(GRPC_CALLS):
            i = HTTP_CALLERS + k
            client.async_infer("slow", grpc_inputs({"x": ("FP32", xs[i])}), request_id=str(i),
                               callback=lambda result, error, i=i: grpc_results.put((i, result, error)))
        # Signal once the model is busy and requests wait in its queue.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stats = srv.model_stats("slow")
            if int(stats["execution_count"]) >= 1:
                break
            time.sleep(0.05)
        srv.proc.send_signal(signal.SIGTERM)
        try:
            rc = srv.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"ortserve did not exit after SIGTERM; log tail:\n{srv.log_tail()}")
        assert rc == 0, f"exit code {rc}; log tail:\n{srv.log_tail()}"
        answers = [f.result() for f in futures]

    computed = refused = 0
    for i, resp in enumerate(answers):
        assert isinstance(resp, requests.Response), f"request {i} lost: {resp!r}"
        if resp.status_code == 200:
            out = resp.json()["outputs"][0]
            got = np.array(out["data"], np.float32).reshape(out["shape"])
            assert_matches(got, reference.run(path, {"x": xs[i]})["y"])
            computed += 1
        else:
            assert resp.status_code == 503, (resp.status_code, resp.text[:300])
            assert re.search(r"shutting down|shut down", resp.json()["error"]), resp.text[:300]
            refused += 1
    for _ in range(GRPC_CALLS):
        i, result, error = grpc_results.get(timeout=60)
        if error is None:
            assert_matches(result.as_numpy("y"), reference.run(path, {"x": xs[i]})["y"])
            computed += 1
        else:
            assert error.status() == "StatusCode.UNAVAILABLE", (error.status(), error.message())
            refused += 1
    client.close()
    # One instance computes ~4 rows per 100 ms: far less than all of it fits
    # in the 1 s exit timeout, and the server was computing when signalled.
    assert computed >= 1
    assert refused >= 1
    assert "exit timeout reached" in srv.log_tail(), srv.log_tail()
