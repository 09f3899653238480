"""Overload (bounded queue -> 503 at once) and per-request timeouts, on the
slow model (~100 ms per request on one thread, one instance)."""
from __future__ import annotations

import concurrent.futures
import json
import re
import threading

import numpy as np
import pytest

from harness import HTTP_TIMEOUT_S, assert_matches, error_message, model_file, sample_array

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("server_still_serves")]

OVERLOAD_CALLERS = 24
ROUNDS = 3  # more rounds only if a round saw no rejection (a very fast machine)


def slow_body(x: np.ndarray, **parameters) -> bytes:
    b = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                     "data": x.ravel().tolist()}]}
    if parameters:
        b["parameters"] = parameters
    return json.dumps(b).encode()


def fire(server, model: str, inputs: list[np.ndarray], **parameters) -> list:
    """All requests at once (barrier); returns the requests.Response list."""
    barrier = threading.Barrier(len(inputs), timeout=60)

    def call(x):
        body = slow_body(x, **parameters)
        barrier.wait()
        return server.infer_raw(model, body, timeout=HTTP_TIMEOUT_S * 2)

    with concurrent.futures.ThreadPoolExecutor(len(inputs)) as pool:
        return list(pool.map(call, inputs))


def check_success(resp, x, test_repo, model, reference):
    out = resp.json()["outputs"][0]
    got = np.array(out["data"], np.float32).reshape(out["shape"])
    ref = reference.run(model_file(test_repo, model), {"x": x})["y"]
    assert_matches(got, ref)


def test_overload_small_queue_rejects_with_503(server, test_repo, reference):
    model = "slow_queue2"
    failures_before = int(server.model_stats(model)["inference_stats"]["fail"]["count"])
    rejected = succeeded = 0
    for round_ in range(ROUNDS):
        inputs = [sample_array("FP32", (1, 16), seed=3000 + 100 * round_ + i)
                  for i in range(OVERLOAD_CALLERS)]
        for x, resp in zip(inputs, fire(server, model, inputs)):
            assert resp.status_code in (200, 503), (resp.status_code, resp.text[:300])
            if resp.status_code == 503:
                msg = error_message(resp)
                assert re.search(r"queue", msg, re.IGNORECASE), msg
                rejected += 1
            else:
                check_success(resp, x, test_repo, model, reference)
                succeeded += 1
        if rejected:
            break
    assert rejected > 0, "no request was rejected although 24 arrived at a queue of 2"
    assert succeeded > 0
    failures_after = int(server.model_stats(model)["inference_stats"]["fail"]["count"])
    assert failures_after - failures_before == rejected


def test_request_timeout_while_busy(server, test_repo, reference):
    model = "slow"  # allow_timeout_override: true, timeout_action: REJECT
    busy_inputs = [sample_array("FP32", (1, 16), seed=4000 + i) for i in range(6)]
    timed_out = []
    busy_results: list = []

    def keep_busy():
        busy_results.extend(fire(server, model, busy_inputs))

    worker = threading.Thread(target=keep_busy)
    worker.start()
    try:
        for attempt in range(5):
            x = sample_array("FP32", (1, 16), seed=4100 + attempt)
            resp = server.infer_raw(model, slow_body(x, timeout=1))  # 1 microsecond
            if resp.status_code == 200:
                check_success(resp, x, test_repo, model, reference)
                continue
            assert resp.status_code in (400, 429, 503, 504), (resp.status_code, resp.text[:300])
            msg = error_message(resp)
            assert re.search(r"time|deadline|expired", msg, re.IGNORECASE), msg
            timed_out.append(msg)
    finally:
        worker.join(timeout=HTTP_TIMEOUT_S * 3)
    assert not worker.is_alive()
    assert timed_out, "no request with a 1 us timeout was rejected while the model was busy"
    for x, resp in zip(busy_inputs, busy_results):
        assert resp.status_code == 200, resp.text[:300]
        check_success(resp, x, test_repo, model, reference)


def test_generous_timeout_succeeds(server, test_repo, reference):
    x = sample_array("FP32", (1, 16), seed=4200)
    resp = server.infer_raw("slow", slow_body(x, timeout=60_000_000))  # 60 s
    assert resp.status_code == 200, resp.text[:300]
    check_success(resp, x, test_repo, "slow", reference)
