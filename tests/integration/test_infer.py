"""Inference through tritonclient.http, every output compared with onnxruntime."""
from __future__ import annotations

import gzip
import json
import zlib

import numpy as np
import pytest
import tritonclient.http as httpclient

from harness import (DEMO_REPO, assert_matches, bf16_bits_to_fp32, fp32_to_bf16_bits,
                     infer_inputs, make_test_models, model_file, requested_outputs,
                     sample_array)

pytestmark = pytest.mark.timeout(120)

JSON_INCAPABLE = {"FP16", "BF16"}  # binary only (as Triton)


# ------------------------------------------------------------------ demo models

@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_mlp_classifier(demo_client, reference, binary):
    x = sample_array("FP32", (5, 16), seed=11) / 100
    result = demo_client.infer("mlp_classifier", infer_inputs({"features": ("FP32", x)}, binary),
                               outputs=requested_outputs(["probabilities", "label"], binary))
    ref = reference.run(model_file(DEMO_REPO, "mlp_classifier"), {"features": x})
    assert_matches(result.as_numpy("probabilities"), ref["probabilities"])
    assert_matches(result.as_numpy("label"), ref["label"])


def test_mlp_classifier_default_outputs(demo_client, reference):
    """No "outputs" in the request: every output is returned."""
    x = sample_array("FP32", (1, 16), seed=12) / 100
    result = demo_client.infer("mlp_classifier", infer_inputs({"features": ("FP32", x)}))
    ref = reference.run(model_file(DEMO_REPO, "mlp_classifier"), {"features": x})
    assert {o["name"] for o in result.get_response()["outputs"]} == {"probabilities", "label"}
    assert_matches(result.as_numpy("label"), ref["label"])


def test_image_normalize_non_batchable(demo_client, reference):
    image = np.abs(sample_array("FP32", (3, 8, 8), seed=13))
    result = demo_client.infer("image_normalize", infer_inputs({"image": ("FP32", image)}))
    ref = reference.run(model_file(DEMO_REPO, "image_normalize"), {"image": image})
    assert_matches(result.as_numpy("normalized"), ref["normalized"])


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_greeting_bytes(demo_client, reference, binary):
    names = np.array([[b"ada", "ünï".encode()], [b"", b"grace hopper"]], dtype=np.object_)
    result = demo_client.infer("greeting", infer_inputs({"name": ("BYTES", names)}, binary),
                               outputs=requested_outputs(["greeting"], binary))
    ref = reference.run(model_file(DEMO_REPO, "greeting"), {"name": names})
    assert_matches(result.as_numpy("greeting"), ref["greeting"])


def test_demo_autocomplete_serves(demo_server, demo_client, reference):
    config = demo_client.get_model_config("linear_autoconfig")
    assert int(config["max_batch_size"]) > 0
    assert [int(d) for d in config["input"][0]["dims"]] == [8]
    assert [int(d) for d in config["output"][0]["dims"]] == [2]
    x = sample_array("FP32", (3, 8), seed=14)
    result = demo_client.infer("linear_autoconfig", infer_inputs({"x": ("FP32", x)}))
    ref = reference.run(model_file(DEMO_REPO, "linear_autoconfig"), {"x": x})
    assert_matches(result.as_numpy("y"), ref["y"])


# ------------------------------------------------------------------ datatypes

DATATYPE_CASES = [(dt, b) for dt in make_test_models.DATATYPES for b in (True, False)
                  if b or dt not in JSON_INCAPABLE]


@pytest.mark.parametrize("datatype,binary", DATATYPE_CASES,
                         ids=[f"{dt}-{'binary' if b else 'json'}" for dt, b in DATATYPE_CASES])
def test_identity_round_trip(client, test_repo, reference, datatype, binary):
    model = f"identity_{datatype.lower()}"
    x = sample_array(datatype, (3, 7), seed=21)
    result = client.infer(model, infer_inputs({"INPUT0": (datatype, x)}, binary),
                          outputs=requested_outputs(["OUTPUT0"], binary))
    out = result.as_numpy("OUTPUT0")
    path = model_file(test_repo, model)
    if datatype == "BF16":
        ref_bits = reference.run_bf16(path, {"INPUT0": fp32_to_bf16_bits(x)})["OUTPUT0"]
        assert_matches(out, bf16_bits_to_fp32(ref_bits), exact=True)
        return
    ref = reference.run(path, {"INPUT0": x})["OUTPUT0"]
    assert_matches(out, ref, exact=True)  # identity: bit-exact, JSON included
    assert result.get_output("OUTPUT0")["datatype"] == datatype


@pytest.mark.parametrize("datatype", make_test_models.ADD_SUB_DATATYPES)
def test_add_sub(client, test_repo, reference, datatype):
    model = f"add_sub_{datatype.lower()}"
    a = sample_array(datatype, (4, 16), seed=31)
    b = sample_array(datatype, (4, 16), seed=32)
    if datatype.startswith("INT"):  # keep sums inside the type's range
        a, b = a // 4, b // 4
    result = client.infer(model, infer_inputs({"INPUT0": (datatype, a), "INPUT1": (datatype, b)}),
                          outputs=requested_outputs(["OUTPUT0", "OUTPUT1"]))
    ref = reference.run(model_file(test_repo, model), {"INPUT0": a, "INPUT1": b})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    assert_matches(result.as_numpy("OUTPUT1"), ref["OUTPUT1"], exact=True)


def test_identity_empty_tensor(client):
    x = np.zeros((2, 0), np.float32)
    result = client.infer("identity_fp32", infer_inputs({"INPUT0": ("FP32", x)}))
    assert result.as_numpy("OUTPUT0").shape == (2, 0)


def test_non_batchable_3d_identity(client, test_repo, reference):
    x = sample_array("FP32", (2, 3, 5), seed=33)
    result = client.infer("identity_3d_fp32", infer_inputs({"INPUT0": ("FP32", x)}))
    ref = reference.run(model_file(test_repo, "identity_3d_fp32"), {"INPUT0": x})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)


# ------------------------------------------------------------------ request features

@pytest.mark.parametrize("wanted", [["OUTPUT0"], ["OUTPUT1"]])
def test_requested_output_subset(client, test_repo, reference, wanted):
    a = sample_array("FP32", (2, 16), seed=41)
    b = sample_array("FP32", (2, 16), seed=42)
    result = client.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}),
                          outputs=requested_outputs(wanted))
    assert [o["name"] for o in result.get_response()["outputs"]] == wanted
    ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    assert_matches(result.as_numpy(wanted[0]), ref[wanted[0]], exact=True)


def test_mixed_binary_and_json_outputs(client, test_repo, reference):
    a = sample_array("FP32", (1, 16), seed=43)
    b = sample_array("FP32", (1, 16), seed=44)
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=True),
               httpclient.InferRequestedOutput("OUTPUT1", binary_data=False)]
    result = client.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}),
                          outputs=outputs)
    ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    assert "data" in result.get_output("OUTPUT1")
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    assert_matches(result.as_numpy("OUTPUT1"), ref["OUTPUT1"], exact=True)


def test_request_id_echoed(client):
    x = sample_array("INT32", (1, 3))
    result = client.infer("identity_int32", infer_inputs({"INPUT0": ("INT32", x)}),
                          request_id="req-42/ünï")
    assert result.get_response()["id"] == "req-42/ünï"


def test_async_infer(client, test_repo, reference):
    arrays = [sample_array("FP32", (1, 16), seed=50 + i) for i in range(8)]
    handles = [client.async_infer("add_sub_fp32", infer_inputs(
        {"INPUT0": ("FP32", a), "INPUT1": ("FP32", a)}), request_id=str(i))
        for i, a in enumerate(arrays)]
    for i, (a, h) in enumerate(zip(arrays, handles)):
        result = h.get_result(timeout=60)
        assert result.get_response()["id"] == str(i)
        ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": a})
        assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)


@pytest.mark.parametrize("request_algo", [None, "gzip", "deflate"])
@pytest.mark.parametrize("response_algo", [None, "gzip", "deflate"])
def test_compression(client, test_repo, reference, request_algo, response_algo):
    a = sample_array("FP32", (8, 16), seed=61)
    b = sample_array("FP32", (8, 16), seed=62)
    result = client.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}),
                          request_compression_algorithm=request_algo,
                          response_compression_algorithm=response_algo)
    ref = reference.run(model_file(test_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    assert_matches(result.as_numpy("OUTPUT1"), ref["OUTPUT1"], exact=True)


@pytest.mark.parametrize("algo", ["gzip", "deflate"])
def test_response_is_compressed_on_the_wire(server, algo):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 64], "datatype": "INT32",
                        "data": list(range(64))}]}
    r = server.infer_raw("identity_int32", body, headers={"Accept-Encoding": algo},
                         stream=True)
    assert r.status_code == 200
    assert r.headers.get("Content-Encoding") == algo
    raw = r.raw.read(decode_content=False)
    text = gzip.decompress(raw) if algo == "gzip" else zlib.decompress(raw)
    assert json.loads(text)["outputs"][0]["data"] == list(range(64))


def test_request_compression_raw_gzip_json(server):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "INT64",
                        "data": [1, -2, 9007199254740993]}]}
    r = server.infer_raw("identity_int64", gzip.compress(json.dumps(body).encode()),
                         headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert out["datatype"] == "INT64" and out["shape"] == [1, 3]
    assert out["data"] == [1, -2, 9007199254740993]


# ------------------------------------------------------------------ repository features

def test_reshape_in_config(client, test_repo, reference):
    x = sample_array("FP32", (3, 16), seed=71)
    result = client.infer("reshape_transpose", infer_inputs({"INPUT0": ("FP32", x)}))
    out = result.as_numpy("OUTPUT0")
    assert out.shape == (3, 16)
    ref = reference.run(model_file(test_repo, "reshape_transpose"), {"INPUT0": x.reshape(3, 4, 4)})
    assert_matches(out, ref["OUTPUT0"].reshape(3, 16), exact=True)


def test_reshape_metadata_shows_client_dims(server):
    meta = server.get("/v2/models/reshape_transpose").json()
    assert meta["inputs"][0]["shape"] == [-1, 16]
    assert meta["outputs"][0]["shape"] == [-1, 16]


@pytest.mark.parametrize("version,expected_add", [("2", 2.0), ("3", 3.0), ("", 3.0)],
                         ids=["v2", "v3", "latest"])
def test_version_policy_serves_latest_two(client, test_repo, reference, version, expected_add):
    x = sample_array("FP32", (2, 4), seed=81)
    result = client.infer("versioned_add", infer_inputs({"INPUT0": ("FP32", x)}), model_version=version)
    ref = reference.run(model_file(test_repo, "versioned_add", int(expected_add)), {"INPUT0": x})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)
    np.testing.assert_allclose(result.as_numpy("OUTPUT0"), x + expected_add)


def test_version_outside_policy_is_not_served(server):
    assert server.get("/v2/models/versioned_add/versions/1/ready").status_code == 400  # as Triton
    assert server.get("/v2/models/versioned_add/versions/2/ready").status_code == 200
    assert server.get("/v2/models/versioned_add/versions/3/ready").status_code == 200
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [0, 0, 0, 0]}]}
    r = server.infer_raw("versioned_add", body, version="1")
    assert r.status_code == 404, r.text
    assert r.json()["error"] == "Request for unknown model: 'versioned_add' version 1 is not found"
    versions = set(server.get("/v2/models/versioned_add").json()["versions"])
    assert versions == {"2", "3"}


def test_autocomplete_model_serves(client, test_repo, reference):
    config = client.get_model_config("autocomplete_linear")
    assert config["name"] == "autocomplete_linear"
    assert int(config["max_batch_size"]) > 0
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in config["input"]] == \
        [("x", "TYPE_FP32", [8])]
    assert [(o["name"], o["data_type"], [int(d) for d in o["dims"]]) for o in config["output"]] == \
        [("y", "TYPE_FP32", [2])]
    x = sample_array("FP32", (2, 8), seed=91)
    result = client.infer("autocomplete_linear", infer_inputs({"x": ("FP32", x)}))
    ref = reference.run(model_file(test_repo, "autocomplete_linear"), {"x": x})
    assert_matches(result.as_numpy("y"), ref["y"])
