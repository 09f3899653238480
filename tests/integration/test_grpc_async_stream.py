"""The gRPC front end: async_infer with callbacks and the bidirectional
ModelStreamInfer stream (many requests matched by id, an error in the middle,
several models on one stream). Every output is compared with onnxruntime on
the same file."""
from __future__ import annotations

import queue

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from grpc_helpers import GRPC_TIMEOUT_S, add_sub_raw
from harness import DEMO_REPO, grpc_inputs, assert_matches, model_file, sample_array

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------ async_infer (callbacks)

def test_async_infer_callbacks(grpc_client, test_repo, reference):
    arrays = [sample_array("FP32", (1 + i % 3, 16), seed=170 + i) for i in range(12)]
    results: queue.Queue = queue.Queue()
    for i, a in enumerate(arrays):
        grpc_client.async_infer("add_sub_fp32", grpc_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", -a)}),
                                callback=lambda result, error, i=i: results.put((i, result, error)),
                                request_id=f"async-{i}", client_timeout=GRPC_TIMEOUT_S)
    seen = set()
    for _ in arrays:
        i, result, error = results.get(timeout=GRPC_TIMEOUT_S)
        assert error is None, error
        assert result.get_response().id == f"async-{i}"
        ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": arrays[i], "INPUT1": -arrays[i]})
        assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
        assert_matches(result.as_numpy("OUTPUT1"), ref["OUTPUT1"], exact=True)
        seen.add(i)
    assert seen == set(range(len(arrays)))


def test_async_infer_error_reaches_callback(grpc_client, server_still_serves):
    results: queue.Queue = queue.Queue()
    grpc_client.async_infer("no_such_model", grpc_inputs({"INPUT0": ("FP32", np.zeros((1, 4), np.float32))}),
                            callback=lambda result, error: results.put((result, error)),
                            client_timeout=GRPC_TIMEOUT_S)
    result, error = results.get(timeout=GRPC_TIMEOUT_S)
    assert result is None
    assert isinstance(error, InferenceServerException)
    assert error.status() == "StatusCode.NOT_FOUND", (error.status(), error.message())
    assert error.message() == "Request for unknown model: 'no_such_model' is not found"


def test_async_infer_demo_models(demo_grpc_client, reference):
    x = sample_array("FP32", (4, 16), seed=181) / 100
    image = np.abs(sample_array("FP32", (3, 8, 8), seed=182))
    names = np.array([[b"ada", b"linus"]], dtype=np.object_)
    calls = {"mlp_classifier": {"features": ("FP32", x)},
             "image_normalize": {"image": ("FP32", image)},
             "greeting": {"name": ("BYTES", names)}}
    results: queue.Queue = queue.Queue()
    for model, tensors in calls.items():
        demo_grpc_client.async_infer(model, grpc_inputs(tensors), request_id=model,
                                     callback=lambda result, error: results.put((result, error)),
                                     client_timeout=GRPC_TIMEOUT_S)
    for _ in calls:
        result, error = results.get(timeout=GRPC_TIMEOUT_S)
        assert error is None, error
        model = result.get_response().id
        assert result.get_response().model_name == model
        ref = reference.run(model_file(DEMO_REPO, model), {k: v for k, (_, v) in calls[model].items()})
        for name, expected in ref.items():
            assert_matches(result.as_numpy(name), expected)


# ------------------------------------------------------------------ streaming

def _collect(results: queue.Queue, count: int) -> list:
    return [results.get(timeout=GRPC_TIMEOUT_S) for _ in range(count)]


def test_stream_many_requests_matched_by_id(grpc_client, test_repo, reference):
    arrays = [sample_array("FP32", (1 + i % 4, 16), seed=190 + i) for i in range(16)]
    results: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for i, a in enumerate(arrays):
            grpc_client.async_stream_infer("add_sub_fp32", grpc_inputs(
                {"INPUT0": ("FP32", a), "INPUT1": ("FP32", a * 2)}), request_id=f"stream-{i}")
        collected = _collect(results, len(arrays))
    finally:
        grpc_client.stop_stream()
    by_id = {}
    for result, error in collected:
        assert error is None, error
        by_id[result.get_response().id] = result
    assert set(by_id) == {f"stream-{i}" for i in range(len(arrays))}
    for i, a in enumerate(arrays):
        ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": a * 2})
        assert_matches(by_id[f"stream-{i}"].as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
        assert_matches(by_id[f"stream-{i}"].as_numpy("OUTPUT1"), ref["OUTPUT1"], exact=True)


def test_stream_bad_request_in_the_middle(grpc_client, test_repo, reference, grpc_still_serves):
    """The bad request yields an error on the stream; the others succeed and
    the stream stays usable after the error."""
    arrays = [sample_array("FP32", (1, 16), seed=200 + i) for i in range(7)]
    bad = 3
    results: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for i, a in enumerate(arrays):
            tensors = {"INPUT0": ("FP32", a), "INPUT1": ("FP32", a)}
            if i == bad:
                del tensors["INPUT1"]  # missing input
            grpc_client.async_stream_infer("add_sub_fp32", grpc_inputs(tensors), request_id=f"s{i}")
        collected = _collect(results, len(arrays))
        # the stream still works after the error
        grpc_client.async_stream_infer("add_sub_fp32", grpc_inputs(
            {"INPUT0": ("FP32", arrays[0]), "INPUT1": ("FP32", arrays[0])}), request_id="after")
        after, after_error = results.get(timeout=GRPC_TIMEOUT_S)
    finally:
        grpc_client.stop_stream()
    errors = [e for r, e in collected if e is not None]
    ok = {r.get_response().id: r for r, e in collected if e is None}
    assert len(errors) == 1, [str(e) for e in errors]
    assert "INPUT1" in errors[0].message(), errors[0].message()
    assert set(ok) == {f"s{i}" for i in range(len(arrays)) if i != bad}
    for i, a in enumerate(arrays):
        if i == bad:
            continue
        ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": a})
        assert_matches(ok[f"s{i}"].as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    assert after_error is None, after_error
    assert after.get_response().id == "after"


def test_stream_error_response_carries_request_id(stub):
    """Raw ModelStreamInfer: the error response names the failed request's id
    (tritonclient hides it; Triton sets it)."""
    def requests():
        good = add_sub_raw()
        good.id = "good"
        bad = add_sub_raw(names=("INPUT0",))
        bad.id = "bad"
        yield good
        yield bad
    responses = list(stub.ModelStreamInfer(requests(), timeout=GRPC_TIMEOUT_S))
    assert len(responses) == 2, responses
    by_id = {r.infer_response.id: r for r in responses}
    assert set(by_id) == {"good", "bad"}
    assert by_id["good"].error_message == ""
    assert "INPUT1" in by_id["bad"].error_message


def test_stream_demo_models_mixed(demo_grpc_client, reference):
    """One stream carrying requests for several demo models."""
    calls = []
    for i in range(4):
        calls.append(("mlp_classifier", {"features": ("FP32", sample_array("FP32", (1 + i, 16), seed=210 + i) / 100)}))
        calls.append(("greeting", {"name": ("BYTES", np.array([[f"n{i}".encode(), b"x"]], dtype=np.object_))}))
    calls.append(("image_normalize", {"image": ("FP32", np.abs(sample_array("FP32", (3, 8, 8), seed=219)))}))
    results: queue.Queue = queue.Queue()
    demo_grpc_client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        for i, (model, tensors) in enumerate(calls):
            demo_grpc_client.async_stream_infer(model, grpc_inputs(tensors), request_id=str(i))
        collected = _collect(results, len(calls))
    finally:
        demo_grpc_client.stop_stream()
    for result, error in collected:
        assert error is None, error
        i = int(result.get_response().id)
        model, tensors = calls[i]
        assert result.get_response().model_name == model
        ref = reference.run(model_file(DEMO_REPO, model), {k: v for k, (_, v) in tensors.items()})
        for name, expected in ref.items():
            assert_matches(result.as_numpy(name), expected)
