"""Triton's raw binary request (Inference-Header-Content-Length: 0): the body
is the one input's bytes, its datatype and shape come from the model config,
and every output comes back as binary data. Outputs are compared with
onnxruntime; requests the rule cannot serve get a 400 naming the problem."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import requests

from harness import make_test_models, model_file, start_server

pytestmark = pytest.mark.timeout(120)

MODELS = ["identity_fp32", "identity_int8", "identity_3d_fp32", "add_sub_fp32", "reshape_transpose",
          "identity_bytes"]


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory, log_dir):
    """The models above, plus identity_bytes1: BYTES with dims [1] (batching)."""
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("raw_models"), MODELS)
    make_test_models.demo.write_model(
        repo, "identity_bytes1", make_test_models.build_identity("BYTES", 2),
        make_test_models.identity_config("identity_bytes1", "BYTES", 8, [1]))
    srv = start_server(repo, log_dir, "raw_binary")
    try:
        srv.wait_models_ready(MODELS + ["identity_bytes1"])
        yield srv
    finally:
        srv.stop()


def raw_post(srv, model: str, body: bytes, **headers) -> requests.Response:
    return requests.post(f"{srv.base}/v2/models/{model}/infer", data=body, timeout=60,
                         headers={"Inference-Header-Content-Length": "0",
                                  "Content-Type": "application/octet-stream", **headers})


def outputs_of(resp: requests.Response) -> dict:
    """name -> (datatype, shape, bytes) of a binary infer response."""
    assert resp.status_code == 200, resp.text[:500]
    json_len = int(resp.headers["Inference-Header-Content-Length"])
    header = json.loads(resp.content[:json_len])
    out, offset = {}, json_len
    for o in header["outputs"]:
        size = o["parameters"]["binary_data_size"]
        out[o["name"]] = (o["datatype"], o["shape"], resp.content[offset:offset + size])
        offset += size
    assert offset == len(resp.content)
    return out


def test_variable_dimension_is_deduced_from_the_body(raw_server, reference):
    x = np.linspace(-3, 3, 10, dtype=np.float32)
    datatype, shape, data = outputs_of(raw_post(raw_server, "identity_fp32", x.tobytes()))["OUTPUT0"]
    assert (datatype, shape) == ("FP32", [1, 10])  # batch of 1, then the deduced dimension
    ref = reference.run(model_file(raw_server.repo, "identity_fp32"), {"INPUT0": x.reshape(1, 10)})
    np.testing.assert_array_equal(np.frombuffer(data, np.float32).reshape(shape), ref["OUTPUT0"])


def test_fixed_shape_with_config_reshape(raw_server, reference):
    x = np.arange(16, dtype=np.float32)
    datatype, shape, data = outputs_of(raw_post(raw_server, "reshape_transpose", x.tobytes()))["OUTPUT0"]
    assert (datatype, shape) == ("FP32", [1, 16])
    # The model sees the config's reshape [4, 4].
    ref = reference.run(model_file(raw_server.repo, "reshape_transpose"), {"INPUT0": x.reshape(1, 4, 4)})
    np.testing.assert_array_equal(np.frombuffer(data, np.float32), ref["OUTPUT0"].reshape(-1))


def test_one_byte_type_and_compressed_body(raw_server, reference):
    x = np.array([-128, -1, 0, 1, 127], dtype=np.int8)
    resp = raw_post(raw_server, "identity_int8", gzip.compress(x.tobytes()), **{"Content-Encoding": "gzip"})
    datatype, shape, data = outputs_of(resp)["OUTPUT0"]
    ref = reference.run(model_file(raw_server.repo, "identity_int8"), {"INPUT0": x.reshape(1, 5)})
    assert (datatype, shape) == ("INT8", [1, 5])
    np.testing.assert_array_equal(np.frombuffer(data, np.int8).reshape(shape), ref["OUTPUT0"])


def test_bytes_input_of_shape_one_is_the_whole_body(raw_server):
    text = "héllo, raw world".encode()
    datatype, shape, data = outputs_of(raw_post(raw_server, "identity_bytes1", text))["OUTPUT0"]
    assert (datatype, shape) == ("BYTES", [1, 1])
    assert data == len(text).to_bytes(4, "little") + text


@pytest.mark.parametrize("model,body,words", [
    ("add_sub_fp32", b"\0" * 64, ["Raw request must only have 1 input", "got 2 inputs", "'add_sub_fp32'"]),
    ("identity_3d_fp32", b"\0" * 16, ["can not be deduced", "more than one variable-sized dimension", "INPUT0"]),
    ("identity_fp32", b"\0" * 6, ["6 bytes", "INPUT0", "multiple of 4 bytes"]),
    ("reshape_transpose", b"\0" * 60, ["60 bytes", "INPUT0", "expected 64 bytes"]),
    ("identity_bytes", b"abc", ["BYTE datatype raw input 'INPUT0'", "input shape [1]"]),
])
def test_requests_the_rule_cannot_serve_get_400_naming_the_problem(raw_server, model, body, words):
    resp = raw_post(raw_server, model, body)
    assert resp.status_code == 400, (resp.status_code, resp.text[:300])
    message = resp.json()["error"]
    for w in words:
        assert w in message, (w, message)
    assert raw_server.alive()


def test_unknown_model_is_404(raw_server):
    resp = raw_post(raw_server, "no_such_model", b"\0" * 4)
    assert resp.status_code == 404, resp.text[:300]
    assert "Request for unknown model" in resp.json()["error"]
