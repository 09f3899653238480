"""The gRPC front end (KServe v2 / Triton GRPCInferenceService), unary
inference: the demo models and every datatype through tritonclient.grpc
(raw_input_contents), the typed `contents` path through a raw stub, request
ids, requested outputs and compression. Every output is compared with
onnxruntime on the same file."""
from __future__ import annotations

import queue

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2_grpc as pbg

from grpc_helpers import GRPC_TIMEOUT_S, TYPED_FIELDS, decode_output, grpc_outputs, raw_request, raw_tensor
from harness import (DEMO_REPO, grpc_inputs, assert_matches, bf16_bits_to_fp32, fp32_to_bf16_bits,
                     make_test_models, model_file, sample_array)

pytestmark = pytest.mark.timeout(120)


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
