"""Faults inside a run: a request whose run fails inside ONNX Runtime gets a
500 naming the failure; requests in other runs -- before, after and at the
same time -- are answered correctly, and the server keeps serving."""
from __future__ import annotations

import concurrent.futures
import json

import pytest

from harness import HTTP_TIMEOUT_S, error_message, make_test_models, metric

MODEL = "gather_fault"  # VALUE = 10 * INDEX for INDEX in -8..7 (negative: from the end)


def _body(index: int) -> bytes:
    return json.dumps({"inputs": [{"name": "INDEX", "shape": [1], "datatype": "INT64",
                                   "data": [index]}]}).encode()


def _expected(index: int) -> float:
    return float(10 * (index % 8))


@pytest.mark.timeout(180)
def test_a_failing_run_fails_only_its_own_request(launch, tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "repo", [MODEL])
    srv = launch(repo)
    srv.wait_models_ready([MODEL])
    labels = {"model": MODEL, "version": "1"}
    good = [3, 5, -1, 0, 7, 2, 6, 1]
    bad = 100  # outside the table: ORT's Gather refuses it at run time

    def call(index: int):
        return index, srv.infer_raw(MODEL, _body(index), timeout=HTTP_TIMEOUT_S)

    with concurrent.futures.ThreadPoolExecutor(len(good) + 1) as pool:
        answers = list(pool.map(call, good[:4] + [bad] + good[4:]))
    for index, resp in answers:
        if index == bad:
            assert resp.status_code == 500, (resp.status_code, resp.text[:300])
            assert "gather_fault" in error_message(resp) and "indices" in error_message(resp).lower(), \
                resp.text[:300]
        else:
            assert resp.status_code == 200, (index, resp.status_code, resp.text[:300])
            assert resp.json()["outputs"][0]["data"] == [_expected(index)]
    assert metric(srv, "ortserve_requests_total", outcome="internal", **labels) == 1
    assert metric(srv, "ortserve_requests_total", outcome="success", **labels) == len(good)
    # The instance serves on.
    _, after = call(4)
    assert after.status_code == 200 and after.json()["outputs"][0]["data"] == [40.0]
