"""Triton's classification extension over HTTP (JSON and binary outputs) and
gRPC: an output requested with "classification": N comes back as its top N
"value:index[:label]" strings per batch row, compared with the top N of
onnxruntime's output computed in Python (classification_helpers.py). Also:
labels from label_filename, N above the class count, bad N, outputs whose
datatype cannot be classified, a labels file that is missing, and the
config and metadata that show the extension."""
from __future__ import annotations

import json
import re

import grpc
import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg
from tritonclient.utils import InferenceServerException

from classification_helpers import LABELS, expected_classes, images
from grpc_helpers import BAD, GRPC_TIMEOUT_S, expect_rpc_error
from harness import HTTP_TIMEOUT_S, assert_error, binary_infer_body, model_file, sample_array

import make_classification_models as cm

LABELLED = "image_classifier"      # batching, labels.txt
PLAIN = "image_classifier_plain"   # no batching, no labels
OUT = "probabilities"


@pytest.fixture(scope="module")
def http(classification_server):
    with httpclient.InferenceServerClient(classification_server.url, network_timeout=HTTP_TIMEOUT_S) as c:
        yield c


@pytest.fixture(scope="module")
def grpc_client(classification_server):
    with grpcclient.InferenceServerClient(classification_server.grpc_url) as c:
        yield c


@pytest.fixture(scope="module")
def stub(classification_server):
    with grpc.insecure_channel(classification_server.grpc_url) as channel:
        yield pbg.GRPCInferenceServiceStub(channel)


def probabilities(reference, repo, model: str, x: np.ndarray) -> np.ndarray:
    return reference.run(model_file(repo, model), {"input": x})[OUT]


def http_classes(http, model, x, count, binary):
    inp = httpclient.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    result = http.infer(model, [inp], outputs=[httpclient.InferRequestedOutput(OUT, binary_data=binary,
                                                                                 class_count=count)])
    got = result.as_numpy(OUT)
    # tritonclient gives JSON strings as str and binary ones as bytes.
    return result.get_output(OUT), np.vectorize(lambda v: v.encode() if isinstance(v, str) else v, otypes=[object])(got)


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("batch,count", [(1, 1), (3, 3), (8, 10)])
def test_http_top_classes_with_labels_match_onnxruntime(http, classification_repo, reference, binary, batch, count):
    x = images(batch, seed=batch)
    meta, got = http_classes(http, LABELLED, x, count, binary)
    assert meta["datatype"] == "BYTES" and meta["shape"] == [batch, count], meta
    assert ("binary_data_size" in meta.get("parameters", {})) == binary, meta
    want = expected_classes(probabilities(reference, classification_repo, LABELLED, x), count, True, LABELS)
    assert got.tolist() == want.tolist()
    assert all(s.count(b":") == 2 for s in got.reshape(-1)), got


@pytest.mark.parametrize("batch,count", [(1, 2), (4, 5)])
def test_grpc_top_classes_with_labels_match_onnxruntime(grpc_client, classification_repo, reference, batch, count):
    x = images(batch, seed=10 + batch)
    inp = grpcclient.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = grpc_client.infer(LABELLED, [inp], outputs=[grpcclient.InferRequestedOutput(OUT, class_count=count)],
                               client_timeout=GRPC_TIMEOUT_S)
    out = result.get_output(OUT)
    assert out.datatype == "BYTES" and list(out.shape) == [batch, count]
    want = expected_classes(probabilities(reference, classification_repo, LABELLED, x), count, True, LABELS)
    assert result.as_numpy(OUT).tolist() == want.tolist()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_model_without_batching_or_labels_answers_value_and_index(http, grpc_client, classification_repo, reference,
                                                                  protocol):
    x = images(1, seed=21)[0]
    if protocol == "http":
        meta, got = http_classes(http, PLAIN, x, 4, binary=False)
        shape = meta["shape"]
    else:
        inp = grpcclient.InferInput("input", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = grpc_client.infer(PLAIN, [inp], outputs=[grpcclient.InferRequestedOutput(OUT, class_count=4)],
                                   client_timeout=GRPC_TIMEOUT_S)
        shape, got = list(result.get_output(OUT).shape), result.as_numpy(OUT)
    assert shape == [4]
    want = expected_classes(probabilities(reference, classification_repo, PLAIN, x), 4, False)
    assert got.tolist() == want.tolist()
    assert all(re.fullmatch(rb"\d+\.\d{6}:\d+", s) for s in got), got


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_count_above_the_classes_gives_every_class(http, grpc_client, classification_repo, reference, protocol):
    x = images(2, seed=31)
    if protocol == "http":
        meta, got = http_classes(http, LABELLED, x, 1000, binary=True)
        assert meta["shape"] == [2, cm.CLASSES]
    else:
        inp = grpcclient.InferInput("input", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        result = grpc_client.infer(LABELLED, [inp], outputs=[grpcclient.InferRequestedOutput(OUT, class_count=1000)],
                                   client_timeout=GRPC_TIMEOUT_S)
        assert list(result.get_output(OUT).shape) == [2, cm.CLASSES]
        got = result.as_numpy(OUT)
    want = expected_classes(probabilities(reference, classification_repo, LABELLED, x), 1000, True, LABELS)
    assert got.tolist() == want.tolist()


def test_http_json_body_as_triton_writes_it(classification_server, classification_repo, reference):
    """The wire form without tritonclient: strings in "data", and
    "classification": 0 asking for the tensor itself, as in Triton."""
    x = images(2, seed=41)
    body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape), "data": x.reshape(-1).tolist()}],
            "outputs": [{"name": OUT, "parameters": {"classification": 2}}]}
    answer = classification_server.infer_raw(LABELLED, body)
    assert answer.status_code == 200, answer.text
    (out,) = answer.json()["outputs"]
    assert (out["name"], out["datatype"], out["shape"]) == (OUT, "BYTES", [2, 2])
    probs = probabilities(reference, classification_repo, LABELLED, x)
    assert out["data"] == [s.decode() for s in expected_classes(probs, 2, True, LABELS).reshape(-1)]

    body["outputs"][0]["parameters"]["classification"] = 0
    answer = classification_server.infer_raw(LABELLED, body)
    assert answer.status_code == 200, answer.text
    (out,) = answer.json()["outputs"]
    assert (out["datatype"], out["shape"]) == ("FP32", [2, cm.CLASSES])
    np.testing.assert_allclose(np.array(out["data"], np.float32).reshape(2, -1), probs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model,datatype", [("identity_int32", "INT32"), ("identity_uint8", "UINT8")])
def test_integer_outputs_are_classified_as_integers(http, model, datatype):
    """Identity models: the classes are the input's own values; equal values
    keep the lower index first."""
    x = sample_array(datatype, (2, 7), seed=5)
    x[1, 2] = x[1, 5] = x[1].max()
    inp = httpclient.InferInput("INPUT0", list(x.shape), datatype)
    inp.set_data_from_numpy(x)
    result = http.infer(model, [inp], outputs=[httpclient.InferRequestedOutput("OUTPUT0", class_count=3)])
    assert result.as_numpy("OUTPUT0").tolist() == expected_classes(x, 3, True).tolist()


@pytest.mark.parametrize("model,datatype", [("identity_bool", "BOOL"), ("identity_fp16", "FP16"),
                                            ("identity_bytes", "BYTES")])
def test_outputs_that_cannot_be_classified_are_refused(classification_server, stub, model, datatype):
    x = sample_array(datatype, (1, 3), seed=1)
    payload = (b"".join(len(v).to_bytes(4, "little") + v for v in x.reshape(-1)) if datatype == "BYTES"
               else x.tobytes())
    head = {"inputs": [{"name": "INPUT0", "datatype": datatype, "shape": [1, 3],
                        "parameters": {"binary_data_size": len(payload)}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 1}}]}
    body, headers = binary_infer_body(head, payload)
    assert_error(classification_server.infer_raw(model, body, headers), 400, "output 'OUTPUT0'", model, datatype,
                 "cannot be classified")

    request = pb.ModelInferRequest(model_name=model)
    tensor = request.inputs.add(name="INPUT0", datatype=datatype, shape=[1, 3])
    if datatype == "BYTES":
        tensor.contents.bytes_contents.extend([bytes(v) for v in x.reshape(-1)])
    else:
        request.raw_input_contents.append(x.tobytes())
    request.outputs.add(name="OUTPUT0").parameters["classification"].int64_param = 1
    expect_rpc_error(stub.ModelInfer, request, BAD, "output 'OUTPUT0'", datatype, "cannot be classified")


@pytest.mark.parametrize("value,expected", [(-1, "negative number"), (2.5, "not an integer"), ("3", "a string"),
                                            (True, "a boolean")])
def test_http_bad_count_is_a_400_naming_the_output(classification_server, value, expected):
    x = images(1)
    body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape), "data": x.reshape(-1).tolist()}],
            "outputs": [{"name": OUT, "parameters": {"classification": value}}]}
    assert_error(classification_server.infer_raw(LABELLED, body), 400, f"output '{OUT}'", "classification", expected)


@pytest.mark.parametrize("setter,expected", [
    (lambda p: p.__setattr__("int64_param", 0), "invalid value for 'classification'"),
    (lambda p: p.__setattr__("int64_param", -4), "got -4"),
    (lambda p: p.__setattr__("string_param", "3"), "expected int64_param, got string_param"),
    (lambda p: p.__setattr__("double_param", 3.0), "got double_param"),
])
def test_grpc_bad_count_is_invalid_argument_naming_the_output(stub, setter, expected):
    x = images(1)
    request = pb.ModelInferRequest(model_name=LABELLED)
    request.inputs.add(name="input", datatype="FP32", shape=list(x.shape))
    request.raw_input_contents.append(x.tobytes())
    setter(request.outputs.add(name=OUT).parameters["classification"])
    expect_rpc_error(stub.ModelInfer, request, BAD, f"output '{OUT}'", expected)


def test_server_keeps_serving_after_refusals(http, classification_repo, reference):
    with pytest.raises(InferenceServerException):
        http_classes(http, LABELLED, images(1), -3, binary=True)
    x = images(2, seed=51)
    _, got = http_classes(http, LABELLED, x, 2, binary=True)
    assert got.tolist() == expected_classes(probabilities(reference, classification_repo, LABELLED, x), 2, True,
                                            LABELS).tolist()


def test_config_and_metadata_show_the_extension(classification_server, http, grpc_client):
    config = http.get_model_config(LABELLED)
    assert config["output"][0]["label_filename"] == "labels.txt"
    assert config["input"][0]["format"] == "FORMAT_NCHW"
    assert grpc_client.get_model_config(LABELLED).config.output[0].label_filename == "labels.txt"
    assert http.get_model_config(PLAIN)["output"][0]["label_filename"] == ""
    assert "classification" in http.get_server_metadata()["extensions"]
    assert "classification" in grpc_client.get_server_metadata().extensions
    # label_filename is acted on, so it is not logged among the ignored fields.
    assert not re.search(r"ignoring config fields.*label_filename", classification_server.log_text())


def test_missing_labels_file_fails_the_load_naming_it(tmp_path, launch):
    repo = cm.build_classification_repository(tmp_path / "repo", ["missing_labels", LABELLED])
    srv = launch(repo, strict_readiness=False)
    srv.wait_models_ready([LABELLED])
    index = {e["name"]: e for e in srv.repository_index()}
    entry = index["missing_labels"]
    assert entry["state"] == "UNAVAILABLE", entry
    assert "no_such_labels.txt" in entry.get("reason", "") and OUT in entry["reason"], entry
    assert srv.get("/v2/models/missing_labels/ready").status_code != 200
    assert srv.get(f"/v2/models/{LABELLED}/ready").status_code == 200


def test_requests_library_sees_the_same_strings_over_binary(classification_server):
    """A binary classification output is framed like any BYTES output:
    4-byte little-endian lengths, then the bytes."""
    x = images(1, seed=61)
    body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape), "data": x.reshape(-1).tolist()}],
            "outputs": [{"name": OUT, "parameters": {"classification": 3, "binary_data": True}}]}
    answer = requests.post(f"{classification_server.base}/v2/models/{LABELLED}/infer", json=body,
                           timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    head_len = int(answer.headers["Inference-Header-Content-Length"])
    head = json.loads(answer.content[:head_len])
    (out,) = head["outputs"]
    payload = answer.content[head_len:]
    assert out["parameters"]["binary_data_size"] == len(payload)
    strings, pos = [], 0
    while pos < len(payload):
        n = int.from_bytes(payload[pos:pos + 4], "little")
        strings.append(payload[pos + 4:pos + 4 + n].decode())
        pos += 4 + n
    assert len(strings) == 3 and all(re.fullmatch(r"\d\.\d{6}:\d+:[a-z]+", s) for s in strings), strings
