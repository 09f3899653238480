"""parameters { key: "fallback_model" }: a flooded primary (slow graph, queue
of 2, one instance) hands what it cannot take to its fast, compatible
fallback. Every request succeeds; those answered by the fallback say so in
the response parameters and carry the fallback model's outputs (checked
against onnxruntime), and /metrics counts them."""
from __future__ import annotations

import concurrent.futures
import json
import queue
import re
import threading

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient

from harness import HTTP_TIMEOUT_S, assert_matches, make_test_models, model_file, sample_array

pytestmark = pytest.mark.timeout(300)

PRIMARY = "fallback_primary"
FALLBACK = "fallback_small"
CALLERS = 24


@pytest.fixture(scope="module")
def fallback_repo(tmp_path_factory):
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("fallback_models"),
                                                  [PRIMARY, FALLBACK])


def metrics_text(srv) -> str:
    return requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=HTTP_TIMEOUT_S).text


def fallback_total(srv) -> float:
    total = 0.0
    for line in metrics_text(srv).splitlines():
        if line.startswith("ortserve_fallback_total{") and f'model="{PRIMARY}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def fire(srv, inputs):
    barrier = threading.Barrier(len(inputs), timeout=60)

    def call(x):
        b = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                    "data": x.ravel().tolist()}]}).encode()
        barrier.wait()
        return srv.infer_raw(PRIMARY, b, timeout=HTTP_TIMEOUT_S * 2)

    with concurrent.futures.ThreadPoolExecutor(len(inputs)) as pool:
        return list(pool.map(call, inputs))


def test_flooded_primary_falls_back_and_nothing_is_refused(launch, fallback_repo, reference):
    srv = launch(fallback_repo)
    srv.wait_models_ready([PRIMARY, FALLBACK])
    by_fallback = by_primary = 0
    for round_ in range(3):  # more rounds only if a round overflowed nothing (a very fast machine)
        inputs = [sample_array("FP32", (1, 16), seed=6000 + 100 * round_ + i) for i in range(CALLERS)]
        for x, resp in zip(inputs, fire(srv, inputs)):
            assert resp.status_code == 200, (resp.status_code, resp.text[:300])
            j = resp.json()
            got = np.array(j["outputs"][0]["data"], np.float32).reshape(j["outputs"][0]["shape"])
            if j.get("parameters", {}).get("ortserve_fallback_from") == PRIMARY:
                assert j["model_name"] == FALLBACK
                assert_matches(got, reference.run(model_file(fallback_repo, FALLBACK), {"x": x})["y"])
                by_fallback += 1
            else:
                assert j["model_name"] == PRIMARY
                assert "ortserve_fallback_from" not in j.get("parameters", {})
                assert_matches(got, reference.run(model_file(fallback_repo, PRIMARY), {"x": x})["y"])
                by_primary += 1
        if by_fallback:
            break
    assert by_fallback > 0, "24 simultaneous requests at a queue of 2 never overflowed to the fallback"
    assert by_primary > 0
    assert fallback_total(srv) == by_fallback
    text = metrics_text(srv)
    rejected = re.search(rf'ortserve_requests_total{{model="{PRIMARY}",version="1",outcome="rejected"}} (\S+)', text)
    assert rejected and float(rejected.group(1)) == 0, text[:2000]


def test_grpc_response_names_the_primary_in_its_parameters(launch, fallback_repo, reference):
    srv = launch(fallback_repo)
    srv.wait_models_ready([PRIMARY, FALLBACK])
    # Flood the primary over gRPC itself: CALLERS requests in flight at once
    # against a queue of 2, so some must overflow to the fallback.
    found = False
    with grpcclient.InferenceServerClient(srv.grpc_url) as client:
        for attempt in range(3):
            results = queue.Queue()
            xs = [sample_array("FP32", (1, 16), seed=6600 + CALLERS * attempt + i) for i in range(CALLERS)]
            for i, x in enumerate(xs):
                inp = grpcclient.InferInput("x", [1, 16], "FP32")
                inp.set_data_from_numpy(x)
                client.async_infer(PRIMARY, [inp], request_id=str(i),
                                   callback=lambda result, error: results.put((result, error)))
            for _ in range(CALLERS):
                result, error = results.get(timeout=HTTP_TIMEOUT_S * 3)
                assert error is None, error
                response = result.get_response()
                x = xs[int(response.id)]
                if "ortserve_fallback_from" in response.parameters:
                    assert response.parameters["ortserve_fallback_from"].string_param == PRIMARY
                    assert response.model_name == FALLBACK
                    assert_matches(result.as_numpy("y"),
                                   reference.run(model_file(fallback_repo, FALLBACK), {"x": x})["y"])
                    found = True
                else:
                    assert response.model_name == PRIMARY
                    assert_matches(result.as_numpy("y"),
                                   reference.run(model_file(fallback_repo, PRIMARY), {"x": x})["y"])
            if found:
                break
    assert found, "no gRPC request was served by the fallback while the primary was flooded"
