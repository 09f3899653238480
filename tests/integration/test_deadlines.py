"""Deadlines that reach into the run: a request whose timeout passes while its
batch runs has that run stopped (ORT RunOptions terminate) and is answered
with a timeout error; the instance then serves the next request.

very_slow takes a second or more per run on one thread, so a 200 ms timeout
always passes mid-run: the request started at once on an idle instance, and
without the watchdog it would succeed. Outcomes are asserted, never timing.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from harness import (HTTP_TIMEOUT_S, assert_matches, error_message, make_test_models, metric,
                     model_file, sample_array)

pytestmark = pytest.mark.timeout(300)

MODEL = "very_slow"


@pytest.fixture(scope="module")
def deadline_repo(tmp_path_factory):
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("deadline_models"), [MODEL])


def body(x: np.ndarray, **parameters) -> bytes:
    b = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
    if parameters:
        b["parameters"] = parameters
    return json.dumps(b).encode()




def test_run_past_its_deadline_is_terminated_and_the_instance_serves_on(launch, deadline_repo, reference):
    srv = launch(deadline_repo)
    srv.wait_models_ready([MODEL])
    timeouts_before = metric(srv, "ortserve_requests_total", model=MODEL, outcome="timeout")
    terminated_before = metric(srv, "ortserve_terminated_executions_total", model=MODEL)

    x = sample_array("FP32", (1, 16), seed=5100)
    resp = srv.infer_raw(MODEL, body(x, timeout=200_000), timeout=HTTP_TIMEOUT_S)  # 200 ms
    assert resp.status_code in (400, 429, 503, 504), (resp.status_code, resp.text[:300])
    msg = error_message(resp)
    assert re.search(r"timeout expired", msg, re.IGNORECASE), msg
    assert "terminated" in msg, msg

    # The instance is free again: a request without a timeout completes, correctly.
    y = sample_array("FP32", (1, 16), seed=5101)
    ok = srv.infer_raw(MODEL, body(y), timeout=HTTP_TIMEOUT_S)
    assert ok.status_code == 200, ok.text[:300]
    out = ok.json()["outputs"][0]
    got = np.array(out["data"], np.float32).reshape(out["shape"])
    assert_matches(got, reference.run(model_file(deadline_repo, MODEL), {"x": y})["y"])

    assert metric(srv, "ortserve_requests_total", model=MODEL, outcome="timeout") == timeouts_before + 1
    assert metric(srv, "ortserve_terminated_executions_total", model=MODEL) == terminated_before + 1
    assert metric(srv, "ortserve_requests_total", model=MODEL, outcome="success") >= 1


def test_generous_timeout_is_not_terminated(launch, deadline_repo, reference):
    srv = launch(deadline_repo)
    srv.wait_models_ready([MODEL])
    x = sample_array("FP32", (1, 16), seed=5200)
    resp = srv.infer_raw(MODEL, body(x, timeout=120_000_000), timeout=HTTP_TIMEOUT_S)  # 120 s
    assert resp.status_code == 200, resp.text[:300]
    assert metric(srv, "ortserve_terminated_executions_total", model=MODEL) == 0
