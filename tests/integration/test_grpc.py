"""The gRPC front end (KServe v2 / Triton GRPCInferenceService): inference
through tritonclient.grpc (sync, async, streaming) and through a raw stub for
the typed `contents` path, metadata/config/stats/index/readiness, the
grpc.health.v1 check, malformed requests, overload, compression, HTTP+gRPC
requests batching together, perf_analyzer -i grpc and shutdown with an open
stream. Every output is compared with onnxruntime on the same file."""
from __future__ import annotations

import concurrent.futures
import queue
import re
import signal
import struct
import subprocess
import threading

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg
from tritonclient.utils import InferenceServerException

from harness import (DEMO_REPO, grpc_inputs, HTTP_TIMEOUT_S, SHUTDOWN_TIMEOUT_S, assert_matches,
                     bf16_bits_to_fp32, check_add_sub_fp32, fp32_to_bf16_bits, infer_inputs,
                     make_test_models, model_file, perf_analyzer_command, requested_outputs,
                     sample_array)

pytestmark = pytest.mark.timeout(120)

GRPC_TIMEOUT_S = HTTP_TIMEOUT_S  # bound on any single call (turns a hang into a failure)


# ------------------------------------------------------------------ helpers

def grpc_outputs(names) -> list:
    return [grpcclient.InferRequestedOutput(n) for n in names]


def grpc_check_add_sub_fp32(srv, repo, reference) -> None:
    """One correct gRPC inference on add_sub_fp32 (compared with onnxruntime)."""
    a = np.arange(32, dtype=np.float32).reshape(2, 16)
    b = np.full((2, 16), 0.5, np.float32)
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        result = c.infer("add_sub_fp32", grpc_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}),
                         client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    assert_matches(result.as_numpy("OUTPUT1"), ref["OUTPUT1"], exact=True)


@pytest.fixture
def grpc_still_serves(server, test_repo, reference):
    """After the test: the main server is alive and answers over gRPC and HTTP."""
    yield server
    assert server.alive(), f"ortserve died; log tail:\n{server.log_tail()}"
    grpc_check_add_sub_fp32(server, test_repo, reference)
    check_add_sub_fp32(server, test_repo, reference)


@pytest.fixture
def stub(server):
    with grpc.insecure_channel(server.grpc_url) as channel:
        yield pbg.GRPCInferenceServiceStub(channel)


def raw_request(model: str, *inputs: pb.ModelInferRequest.InferInputTensor, version: str = "",
                raw: list[bytes] | None = None, outputs=(), request_id: str = "") -> pb.ModelInferRequest:
    req = pb.ModelInferRequest(model_name=model, model_version=version, id=request_id)
    req.inputs.extend(inputs)
    if raw is not None:
        req.raw_input_contents.extend(raw)
    for name in outputs:
        req.outputs.add().name = name
    return req


def raw_tensor(name: str, datatype: str, shape) -> pb.ModelInferRequest.InferInputTensor:
    t = pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype)
    t.shape.extend(shape)
    return t


def add_sub_raw(*, shape0=(1, 16), datatype0="FP32", size0=None, names=("INPUT0", "INPUT1"),
                extra_raw=()) -> pb.ModelInferRequest:
    """add_sub_fp32 over raw_input_contents; the keywords break one thing."""
    tensors, raw = [], []
    for i, name in enumerate(names):
        shape = shape0 if i == 0 else (1, 16)
        tensors.append(raw_tensor(name, datatype0 if i == 0 else "FP32", shape))
        n = int(np.prod(shape)) if all(d >= 0 for d in shape) else 0
        raw.append(bytes(size0 if (i == 0 and size0 is not None) else 4 * n))
    return raw_request("add_sub_fp32", *tensors, raw=raw + list(extra_raw))


def expect_rpc_error(call, request, code: grpc.StatusCode, *substrings: str,
                     pattern: str | None = None) -> str:
    """The call fails with `code` and a message naming the problem."""
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=GRPC_TIMEOUT_S)
    err = info.value
    assert err.code() == code, f"expected {code}, got {err.code()}: {err.details()!r}"
    msg = err.details() or ""
    for s in substrings:
        assert s.lower() in msg.lower(), f"error message {msg!r} does not mention {s!r}"
    if pattern:
        assert re.search(pattern, msg, re.IGNORECASE), f"error message {msg!r} !~ /{pattern}/"
    return msg


def decode_output(response: pb.ModelInferResponse, name: str) -> np.ndarray:
    """An output from raw_output_contents or from typed contents."""
    from tritonclient.grpc import InferResult
    for index, out in enumerate(response.outputs):
        if out.name != name:
            continue
        if index < len(response.raw_output_contents):
            return InferResult(response).as_numpy(name)
        field, np_dtype = TYPED_FIELDS[out.datatype]
        values = list(getattr(out.contents, field))
        return np.array(values, dtype=np_dtype).reshape(list(out.shape))
    raise AssertionError(f"no output {name!r} in {[o.name for o in response.outputs]}")


# KServe datatype -> (InferTensorContents field, numpy dtype). FP16 and BF16
# have no typed field (raw_input_contents only).
TYPED_FIELDS = {
    "BOOL": ("bool_contents", np.bool_),
    "INT8": ("int_contents", np.int8),
    "INT16": ("int_contents", np.int16),
    "INT32": ("int_contents", np.int32),
    "INT64": ("int64_contents", np.int64),
    "UINT8": ("uint_contents", np.uint8),
    "UINT16": ("uint_contents", np.uint16),
    "UINT32": ("uint_contents", np.uint32),
    "UINT64": ("uint64_contents", np.uint64),
    "FP32": ("fp32_contents", np.float32),
    "FP64": ("fp64_contents", np.float64),
    "BYTES": ("bytes_contents", np.object_),
}


# ------------------------------------------------------------------ sync inference: demo models

def test_mlp_classifier(demo_grpc_client, reference):
    x = sample_array("FP32", (5, 16), seed=111) / 100
    result = demo_grpc_client.infer("mlp_classifier", grpc_inputs({"features": ("FP32", x)}),
                                    outputs=grpc_outputs(["probabilities", "label"]),
                                    client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(DEMO_REPO, "mlp_classifier"), {"features": x})
    assert_matches(result.as_numpy("probabilities"), ref["probabilities"])
    assert_matches(result.as_numpy("label"), ref["label"])


def test_mlp_classifier_default_outputs(demo_grpc_client, reference):
    x = sample_array("FP32", (1, 16), seed=112) / 100
    result = demo_grpc_client.infer("mlp_classifier", grpc_inputs({"features": ("FP32", x)}),
                                    client_timeout=GRPC_TIMEOUT_S)
    names = {o.name for o in result.get_response().outputs}
    assert names == {"probabilities", "label"}
    ref = reference.run(model_file(DEMO_REPO, "mlp_classifier"), {"features": x})
    assert_matches(result.as_numpy("probabilities"), ref["probabilities"])
    assert_matches(result.as_numpy("label"), ref["label"])


def test_image_normalize_non_batchable(demo_grpc_client, reference):
    image = np.abs(sample_array("FP32", (3, 8, 8), seed=113))
    result = demo_grpc_client.infer("image_normalize", grpc_inputs({"image": ("FP32", image)}),
                                    client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(DEMO_REPO, "image_normalize"), {"image": image})
    assert_matches(result.as_numpy("normalized"), ref["normalized"])


def test_greeting_bytes(demo_grpc_client, reference):
    names = np.array([[b"ada", "ünï".encode()], [b"", b"grace hopper"]], dtype=np.object_)
    result = demo_grpc_client.infer("greeting", grpc_inputs({"name": ("BYTES", names)}),
                                    client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(DEMO_REPO, "greeting"), {"name": names})
    assert_matches(result.as_numpy("greeting"), ref["greeting"])


def test_linear_autoconfig(demo_grpc_client, reference):
    x = sample_array("FP32", (3, 8), seed=114)
    result = demo_grpc_client.infer("linear_autoconfig", grpc_inputs({"x": ("FP32", x)}),
                                    client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(DEMO_REPO, "linear_autoconfig"), {"x": x})
    assert_matches(result.as_numpy("y"), ref["y"])


# ------------------------------------------------------------------ datatypes (raw_input_contents)

@pytest.mark.parametrize("datatype", list(make_test_models.DATATYPES))
def test_identity_round_trip_raw(grpc_client, test_repo, reference, datatype):
    model = f"identity_{datatype.lower()}"
    x = sample_array(datatype, (3, 7), seed=121)
    result = grpc_client.infer(model, grpc_inputs({"INPUT0": (datatype, x)}),
                               outputs=grpc_outputs(["OUTPUT0"]), client_timeout=GRPC_TIMEOUT_S)
    out = result.as_numpy("OUTPUT0")
    response = result.get_response()
    assert response.outputs[0].datatype == datatype
    assert list(response.outputs[0].shape) == [3, 7]
    path = model_file(test_repo, model)
    if datatype == "BF16":  # tritonclient sends/returns BF16 as truncated fp32
        ref_bits = reference.run_bf16(path, {"INPUT0": fp32_to_bf16_bits(x)})["OUTPUT0"]
        assert_matches(out, bf16_bits_to_fp32(ref_bits), exact=True)
        return
    ref = reference.run(path, {"INPUT0": x})["OUTPUT0"]
    assert_matches(out, ref, exact=True)


@pytest.mark.parametrize("datatype", make_test_models.ADD_SUB_DATATYPES)
def test_add_sub(grpc_client, test_repo, reference, datatype):
    model = f"add_sub_{datatype.lower()}"
    a = sample_array(datatype, (4, 16), seed=131)
    b = sample_array(datatype, (4, 16), seed=132)
    if datatype.startswith("INT"):
        a, b = a // 4, b // 4
    result = grpc_client.infer(model, grpc_inputs({"INPUT0": (datatype, a), "INPUT1": (datatype, b)}),
                               client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(test_repo, model), {"INPUT0": a, "INPUT1": b})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    assert_matches(result.as_numpy("OUTPUT1"), ref["OUTPUT1"], exact=True)


def test_identity_empty_tensor(grpc_client):
    x = np.zeros((2, 0), np.float32)
    result = grpc_client.infer("identity_fp32", grpc_inputs({"INPUT0": ("FP32", x)}),
                               client_timeout=GRPC_TIMEOUT_S)
    assert result.as_numpy("OUTPUT0").shape == (2, 0)


def test_reshape_in_config(grpc_client, test_repo, reference):
    x = sample_array("FP32", (3, 16), seed=133)
    result = grpc_client.infer("reshape_transpose", grpc_inputs({"INPUT0": ("FP32", x)}),
                               client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(test_repo, "reshape_transpose"), {"INPUT0": x.reshape(3, 4, 4)})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"].reshape(3, 16), exact=True)


@pytest.mark.parametrize("version,expected_add", [("2", 2), ("3", 3), ("", 3)],
                         ids=["v2", "v3", "latest"])
def test_versioned_model(grpc_client, test_repo, reference, version, expected_add):
    x = sample_array("FP32", (2, 4), seed=134)
    result = grpc_client.infer("versioned_add", grpc_inputs({"INPUT0": ("FP32", x)}),
                               model_version=version, client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(test_repo, "versioned_add", expected_add), {"INPUT0": x})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    assert result.get_response().model_version == str(expected_add)


# ------------------------------------------------------------------ typed contents (raw stub)

@pytest.mark.parametrize("datatype", list(TYPED_FIELDS))
def test_identity_typed_contents(stub, test_repo, reference, datatype):
    model = f"identity_{datatype.lower()}"
    x = sample_array(datatype, (2, 5), seed=141)
    field, _ = TYPED_FIELDS[datatype]
    tensor = raw_tensor("INPUT0", datatype, x.shape)
    getattr(tensor.contents, field).extend(x.ravel().tolist())
    response = stub.ModelInfer(raw_request(model, tensor, request_id=f"typed-{datatype}"),
                               timeout=GRPC_TIMEOUT_S)
    assert response.id == f"typed-{datatype}"
    assert response.outputs[0].datatype == datatype
    ref = reference.run(model_file(test_repo, model), {"INPUT0": x})["OUTPUT0"]
    assert_matches(decode_output(response, "OUTPUT0"), ref, exact=True)


def test_add_sub_typed_contents_fp32(stub, test_repo, reference):
    a = sample_array("FP32", (3, 16), seed=142)
    b = sample_array("FP32", (3, 16), seed=143)
    t0, t1 = raw_tensor("INPUT0", "FP32", a.shape), raw_tensor("INPUT1", "FP32", b.shape)
    t0.contents.fp32_contents.extend(a.ravel().tolist())
    t1.contents.fp32_contents.extend(b.ravel().tolist())
    response = stub.ModelInfer(raw_request("add_sub_fp32", t0, t1, outputs=["OUTPUT1"]),
                               timeout=GRPC_TIMEOUT_S)
    assert [o.name for o in response.outputs] == ["OUTPUT1"]
    ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    assert_matches(decode_output(response, "OUTPUT1"), ref["OUTPUT1"], exact=True)


def test_typed_contents_demo_mlp_int64_label(demo_server, reference):
    x = sample_array("FP32", (2, 16), seed=144) / 100
    tensor = raw_tensor("features", "FP32", x.shape)
    tensor.contents.fp32_contents.extend(x.ravel().tolist())
    with grpc.insecure_channel(demo_server.grpc_url) as channel:
        response = pbg.GRPCInferenceServiceStub(channel).ModelInfer(
            raw_request("mlp_classifier", tensor), timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(DEMO_REPO, "mlp_classifier"), {"features": x})
    assert_matches(decode_output(response, "probabilities"), ref["probabilities"])
    assert_matches(decode_output(response, "label"), ref["label"])


# ------------------------------------------------------------------ request features

def test_request_id_echoed(grpc_client):
    x = sample_array("INT32", (1, 3))
    result = grpc_client.infer("identity_int32", grpc_inputs({"INPUT0": ("INT32", x)}),
                               request_id="req-42/ünï", client_timeout=GRPC_TIMEOUT_S)
    assert result.get_response().id == "req-42/ünï"


@pytest.mark.parametrize("wanted", [["OUTPUT0"], ["OUTPUT1"], ["OUTPUT1", "OUTPUT0"]])
def test_requested_output_subset(grpc_client, test_repo, reference, wanted):
    a = sample_array("FP32", (2, 16), seed=151)
    b = sample_array("FP32", (2, 16), seed=152)
    result = grpc_client.infer("add_sub_fp32", grpc_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}),
                               outputs=grpc_outputs(wanted), client_timeout=GRPC_TIMEOUT_S)
    assert sorted(o.name for o in result.get_response().outputs) == sorted(wanted)
    ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    for name in wanted:
        assert_matches(result.as_numpy(name), ref[name], exact=True)


@pytest.mark.parametrize("algo", ["gzip", "deflate"])
def test_compressed_calls(grpc_client, test_repo, reference, algo):
    a = sample_array("FP32", (8, 16), seed=161)
    b = sample_array("FP32", (8, 16), seed=162)
    result = grpc_client.infer("add_sub_fp32", grpc_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}),
                               compression_algorithm=algo, client_timeout=GRPC_TIMEOUT_S)
    ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    assert_matches(result.as_numpy("OUTPUT1"), ref["OUTPUT1"], exact=True)
    names = np.array([[b"zip" * 50, b"deflate me"]], dtype=np.object_)
    result = grpc_client.infer("identity_bytes", grpc_inputs({"INPUT0": ("BYTES", names)}),
                               compression_algorithm=algo, client_timeout=GRPC_TIMEOUT_S)
    assert_matches(result.as_numpy("OUTPUT0"), names)


@pytest.mark.parametrize("algo", ["gzip", "deflate"])
def test_compressed_stream(grpc_client, test_repo, reference, algo):
    results: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: results.put((result, error)),
                             compression_algorithm=algo)
    try:
        arrays = [sample_array("FP32", (1, 16), seed=165 + i) for i in range(3)]
        for i, a in enumerate(arrays):
            grpc_client.async_stream_infer("add_sub_fp32", grpc_inputs(
                {"INPUT0": ("FP32", a), "INPUT1": ("FP32", a)}), request_id=str(i))
        got = {}
        for _ in arrays:
            result, error = results.get(timeout=GRPC_TIMEOUT_S)
            assert error is None, error
            got[result.get_response().id] = result
    finally:
        grpc_client.stop_stream()
    for i, a in enumerate(arrays):
        ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": a})
        assert_matches(got[str(i)].as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)


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
    assert error.status() == "StatusCode.INVALID_ARGUMENT", (error.status(), error.message())
    assert "no_such_model" in error.message()


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


# ------------------------------------------------------------------ metadata, config, stats, index

def test_server_live_ready(grpc_client):
    assert grpc_client.is_server_live()
    assert grpc_client.is_server_ready()  # --strict-readiness=false


def test_server_metadata(grpc_client):
    meta = grpc_client.get_server_metadata()
    assert meta.name and meta.version
    missing = {"binary_tensor_data", "model_configuration", "statistics"} - set(meta.extensions)
    assert not missing, (missing, list(meta.extensions))


def test_model_metadata(demo_grpc_client):
    meta = demo_grpc_client.get_model_metadata("mlp_classifier", as_json=True)
    assert meta["name"] == "mlp_classifier"
    assert "1" in meta["versions"]
    assert meta["platform"] == "onnxruntime_onnx"
    assert [(i["name"], i["datatype"], [int(d) for d in i["shape"]]) for i in meta["inputs"]] == \
        [("features", "FP32", [-1, 16])]
    outputs = {o["name"]: (o["datatype"], [int(d) for d in o["shape"]]) for o in meta["outputs"]}
    assert outputs == {"probabilities": ("FP32", [-1, 4]), "label": ("INT64", [-1, 1])}
    meta = demo_grpc_client.get_model_metadata("image_normalize", model_version="1", as_json=True)
    assert [int(d) for d in meta["inputs"][0]["shape"]] == [3, 8, 8]
    meta = demo_grpc_client.get_model_metadata("greeting", as_json=True)
    assert meta["inputs"][0]["datatype"] == "BYTES"


def test_model_metadata_unknown_model(grpc_client):
    with pytest.raises(InferenceServerException) as info:
        grpc_client.get_model_metadata("does_not_exist")
    assert "does_not_exist" in info.value.message()


def test_model_config(demo_grpc_client):
    config = demo_grpc_client.get_model_config("mlp_classifier", as_json=True)["config"]
    assert config["name"] == "mlp_classifier"
    assert int(config["max_batch_size"]) == 32
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in config["input"]] == \
        [("features", "TYPE_FP32", [16])]
    assert {o["name"]: o["data_type"] for o in config["output"]} == \
        {"probabilities": "TYPE_FP32", "label": "TYPE_INT64"}
    assert [int(s) for s in config["dynamic_batching"]["preferred_batch_size"]] == [8, 16, 32]
    config = demo_grpc_client.get_model_config("image_normalize", as_json=True)["config"]
    assert int(config.get("max_batch_size", 0)) == 0
    assert [int(d) for d in config["input"][0]["dims"]] == [3, 8, 8]
    config = demo_grpc_client.get_model_config("linear_autoconfig", as_json=True)["config"]
    assert int(config["max_batch_size"]) > 0  # auto-completed


def test_model_ready(grpc_client, demo_grpc_client):
    for model in ("mlp_classifier", "image_normalize", "linear_autoconfig", "greeting"):
        assert demo_grpc_client.is_model_ready(model), model
        assert demo_grpc_client.is_model_ready(model, "1"), model
    assert grpc_client.is_model_ready("versioned_add", "3")
    assert not grpc_client.is_model_ready("versioned_add", "1")
    assert not grpc_client.is_model_ready("corrupt_model")
    assert not grpc_client.is_model_ready("does_not_exist")


def test_repository_index(grpc_client):
    index = grpc_client.get_model_repository_index(as_json=True)
    models = {}
    for m in index["models"]:
        models.setdefault(m["name"], []).append(m)
    assert set(make_test_models.MODELS_THAT_SERVE) <= set(models), set(models)
    for name in make_test_models.MODELS_THAT_SERVE:
        assert any(m.get("state") == "READY" for m in models[name]), models[name]
    for name in make_test_models.MODELS_THAT_FAIL:
        assert name in models, name
        assert all(m.get("state") != "READY" for m in models[name]), models[name]
        assert any(m.get("reason") for m in models[name]), models[name]


def test_statistics_counts_increase(grpc_client, server):
    model = "add_sub_int32"
    def counts():
        s = grpc_client.get_inference_statistics(model, as_json=True)["model_stats"][0]
        assert s["name"] == model
        return (int(s.get("inference_count", 0)), int(s.get("execution_count", 0)),
                int(s["inference_stats"].get("success", {}).get("count", 0)))
    before = counts()
    a = np.arange(48, dtype=np.int32).reshape(3, 16)
    for _ in range(2):
        grpc_client.infer(model, grpc_inputs({"INPUT0": ("INT32", a), "INPUT1": ("INT32", a)}),
                          client_timeout=GRPC_TIMEOUT_S)
    after = counts()
    assert after[0] - before[0] == 6  # batch 3, twice
    assert 1 <= after[1] - before[1] <= 2
    assert after[2] - before[2] == 2
    # the same numbers over HTTP
    http = server.model_stats(model)
    assert int(http["inference_count"]) == after[0]


def test_statistics_all_models(demo_grpc_client):
    stats = demo_grpc_client.get_inference_statistics(as_json=True)
    names = {s["name"] for s in stats["model_stats"]}
    assert {"mlp_classifier", "image_normalize", "linear_autoconfig", "greeting"} <= names


# ------------------------------------------------------------------ grpc.health.v1

def _health_check(url: str, service: str = "") -> tuple[int, bytes]:
    """grpc.health.v1.Health/Check by hand: HealthCheckRequest{service=1};
    HealthCheckResponse{status=1 varint}, SERVING == 1."""
    request = b"" if not service else b"\x0a" + bytes([len(service)]) + service.encode()
    with grpc.insecure_channel(url) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b, response_deserializer=lambda b: b)
        response = check(request, timeout=GRPC_TIMEOUT_S)
    assert len(response) >= 2 and response[0] == 0x08, response
    return response[1], response


@pytest.mark.parametrize("service", ["", "inference.GRPCInferenceService"])
def test_health_check_serving(server, service):
    status, raw = _health_check(server.grpc_url, service)
    assert status == 1, raw  # SERVING


def test_health_check_unknown_service(server):
    with pytest.raises(grpc.RpcError) as info:
        _health_check(server.grpc_url, "no.such.Service")
    assert info.value.code() == grpc.StatusCode.NOT_FOUND, info.value


# ------------------------------------------------------------------ malformed requests
# The gRPC twins of test_bad_requests.py: INVALID_ARGUMENT, message names the problem.

BAD = grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.usefixtures("grpc_still_serves")
class TestBadRequests:
    def test_well_formed_raw_request_succeeds(self, stub):
        a = np.arange(16, dtype=np.float32)
        req = add_sub_raw()
        req.raw_input_contents[0] = a.tobytes()
        response = stub.ModelInfer(req, timeout=GRPC_TIMEOUT_S)
        assert_matches(decode_output(response, "OUTPUT0"), a.reshape(1, 16), exact=True)

    def test_unknown_model(self, stub):
        req = add_sub_raw()
        req.model_name = "no_such_model"
        expect_rpc_error(stub.ModelInfer, req, BAD, "no_such_model")

    def test_unknown_version(self, stub):
        req = add_sub_raw()
        req.model_version = "99"
        expect_rpc_error(stub.ModelInfer, req, BAD, "add_sub_fp32", "99")

    def test_non_numeric_version(self, stub):
        req = add_sub_raw()
        req.model_version = "abc"
        expect_rpc_error(stub.ModelInfer, req, BAD, pattern=r"abc|version")

    def test_version_outside_policy(self, stub):
        req = raw_request("versioned_add", raw_tensor("INPUT0", "FP32", [1, 4]), version="1",
                          raw=[bytes(16)])
        expect_rpc_error(stub.ModelInfer, req, BAD, "versioned_add")

    def test_unparseable_message(self, server):
        """Bytes that are not a ModelInferRequest: an error, not a crash."""
        with grpc.insecure_channel(server.grpc_url) as channel:
            call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                       request_serializer=lambda b: b, response_deserializer=lambda b: b)
            with pytest.raises(grpc.RpcError) as info:
                call(b"\xff\xff\xff garbage", timeout=GRPC_TIMEOUT_S)
        assert info.value.code() in (grpc.StatusCode.INTERNAL, BAD), info.value

    # -------- input set
    def test_missing_input(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(names=("INPUT0",)), BAD, "INPUT1")

    def test_unknown_input(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(names=("INPUT0", "INPUT1", "BOGUS")), BAD, "BOGUS")

    def test_duplicate_input_names(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(names=("INPUT0", "INPUT0", "INPUT1")), BAD,
                         "INPUT0", pattern=r"duplicat|more than once|twice|repeat")

    def test_unknown_requested_output(self, stub):
        req = add_sub_raw()
        req.outputs.add().name = "NOPE_OUT"
        expect_rpc_error(stub.ModelInfer, req, BAD, "NOPE_OUT")

    def test_no_inputs_at_all(self, stub):
        expect_rpc_error(stub.ModelInfer, raw_request("add_sub_fp32"), BAD, pattern=r"INPUT0|INPUT1|input")

    # -------- types and data
    def test_wrong_datatype(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(datatype0="INT32"), BAD, "INPUT0", "INT32", "FP32")

    def test_unknown_datatype_name(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(datatype0="FLOAT99"), BAD, "FLOAT99")

    def test_wrong_typed_contents_field(self, stub):
        """bytes where numbers are expected (the twin of a JSON string for FP32)."""
        t0, t1 = raw_tensor("INPUT0", "FP32", [1, 16]), raw_tensor("INPUT1", "FP32", [1, 16])
        t0.contents.bytes_contents.extend([b"x"] * 16)
        t1.contents.fp32_contents.extend([0.0] * 16)
        expect_rpc_error(stub.ModelInfer, raw_request("add_sub_fp32", t0, t1), BAD, "INPUT0")

    def test_fp16_has_no_typed_contents(self, stub):
        t = raw_tensor("INPUT0", "FP16", [1, 4])
        t.contents.fp32_contents.extend([1.0, 2.0, 3.0, 4.0])
        expect_rpc_error(stub.ModelInfer, raw_request("identity_fp16", t), BAD, "INPUT0")

    def test_typed_contents_count_not_matching_shape(self, stub):
        t0, t1 = raw_tensor("INPUT0", "FP32", [1, 16]), raw_tensor("INPUT1", "FP32", [1, 16])
        t0.contents.fp32_contents.extend([0.0] * 15)
        t1.contents.fp32_contents.extend([0.0] * 16)
        expect_rpc_error(stub.ModelInfer, raw_request("add_sub_fp32", t0, t1), BAD, "INPUT0")

    def test_typed_contents_mixed_with_raw(self, stub):
        req = add_sub_raw()
        req.inputs[0].contents.fp32_contents.extend([0.0] * 16)
        expect_rpc_error(stub.ModelInfer, req, BAD, "INPUT0")

    def test_input_without_any_data(self, stub):
        t0, t1 = raw_tensor("INPUT0", "FP32", [1, 16]), raw_tensor("INPUT1", "FP32", [1, 16])
        t1.contents.fp32_contents.extend([0.0] * 16)
        expect_rpc_error(stub.ModelInfer, raw_request("add_sub_fp32", t0, t1), BAD, "INPUT0")

    # -------- shapes
    def test_wrong_rank(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(shape0=(1, 4, 4)), BAD, "INPUT0",
                         pattern=r"shape|rank|dim")

    def test_wrong_fixed_dim(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(shape0=(2, 8)), BAD, "INPUT0", pattern=r"shape|dim")

    def test_negative_dim(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(shape0=(1, -16), size0=64), BAD, "INPUT0",
                         pattern=r"shape|dim|negative")

    def test_batch_above_max_batch_size(self, stub):
        req = raw_request("add_sub_fp32", raw_tensor("INPUT0", "FP32", [9, 16]),
                          raw_tensor("INPUT1", "FP32", [9, 16]), raw=[bytes(9 * 64)] * 2)
        expect_rpc_error(stub.ModelInfer, req, BAD, "batch", "8")

    @pytest.mark.parametrize("model,shape", [
        ("identity_fp32", [1, 2 ** 62]),
        ("identity_3d_fp32", [2 ** 22, 2 ** 21, 2 ** 21]),
        ("identity_3d_fp32", [2 ** 31, 2 ** 31, 2 ** 31]),
    ], ids=["bytes-2^64", "elements-2^64", "elements-2^93"])
    def test_shape_byte_size_overflows_64_bits(self, stub, model, shape):
        req = raw_request(model, raw_tensor("INPUT0", "FP32", shape), raw=[b""])
        expect_rpc_error(stub.ModelInfer, req, BAD, "INPUT0")

    def test_shape_exceeding_input_limit(self, stub):
        req = raw_request("identity_fp32", raw_tensor("INPUT0", "FP32", [1, 2 ** 33]), raw=[bytes(64)])
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(req, timeout=GRPC_TIMEOUT_S)
        assert info.value.code() in (BAD, grpc.StatusCode.RESOURCE_EXHAUSTED), info.value
        assert re.search(r"INPUT0|size|limit|large", info.value.details() or "", re.I), info.value

    # -------- raw_input_contents
    def test_raw_size_not_matching_shape(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(size0=60), BAD, "INPUT0")

    def test_raw_size_larger_than_shape(self, stub):
        expect_rpc_error(stub.ModelInfer, add_sub_raw(size0=68), BAD, "INPUT0")

    def test_more_raw_contents_than_inputs(self, stub):
        """Twin of trailing bytes after the last binary input."""
        expect_rpc_error(stub.ModelInfer, add_sub_raw(extra_raw=[b"extra"]), BAD,
                         pattern=r"raw_input_contents|input")

    def test_fewer_raw_contents_than_inputs(self, stub):
        req = add_sub_raw()
        del req.raw_input_contents[1]
        expect_rpc_error(stub.ModelInfer, req, BAD, pattern=r"INPUT1|raw_input_contents")

    def test_bytes_length_prefix_past_the_end(self, stub):
        payload = struct.pack("<I", 1000) + b"0123456789"
        req = raw_request("identity_bytes", raw_tensor("INPUT0", "BYTES", [1, 1]), raw=[payload])
        expect_rpc_error(stub.ModelInfer, req, BAD, "INPUT0")

    def test_bytes_truncated_length_prefix(self, stub):
        req = raw_request("identity_bytes", raw_tensor("INPUT0", "BYTES", [1, 1]), raw=[b"\x01\x00"])
        expect_rpc_error(stub.ModelInfer, req, BAD, "INPUT0")

    def test_bytes_element_count_not_matching_shape(self, stub):
        payload = struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b"
        req = raw_request("identity_bytes", raw_tensor("INPUT0", "BYTES", [1, 3]), raw=[payload])
        expect_rpc_error(stub.ModelInfer, req, BAD, "INPUT0")

    def test_bytes_typed_count_not_matching_shape(self, stub):
        t = raw_tensor("INPUT0", "BYTES", [1, 3])
        t.contents.bytes_contents.extend([b"a", b"b"])
        expect_rpc_error(stub.ModelInfer, raw_request("identity_bytes", t), BAD, "INPUT0")

    def test_tritonclient_surfaces_invalid_argument(self, grpc_client):
        """The same through tritonclient: InferenceServerException with the code."""
        with pytest.raises(InferenceServerException) as info:
            grpc_client.infer("add_sub_fp32", grpc_inputs({"INPUT0": ("FP32", np.zeros((1, 16), np.float32))}),
                              client_timeout=GRPC_TIMEOUT_S)
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert "INPUT1" in info.value.message()


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


def test_typed_int8_out_of_range_rejected(stub, grpc_still_serves):
    t = raw_tensor("INPUT0", "INT8", [1, 3])
    t.contents.int_contents.extend([1, 300, -1000])
    expect_rpc_error(stub.ModelInfer, raw_request("identity_int8", t), BAD, "INPUT0")


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
