"""Malformed inference requests: each is rejected with the right status and a
message naming the problem, and the server keeps serving afterwards."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from harness import assert_error, binary_infer_body, error_message

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("server_still_serves")]

MODEL = "add_sub_fp32"  # INPUT0, INPUT1: FP32 [16], max_batch_size 8


def tensor(name="INPUT0", shape=(1, 16), datatype="FP32", data=None, **extra):
    n = int(np.prod(shape)) if all(d >= 0 for d in shape) else 0
    t = {"name": name, "shape": list(shape), "datatype": datatype,
         "data": list(range(n)) if data is None else data}
    t.update(extra)
    return t


def body(*tensors, **extra):
    b = {"inputs": list(tensors) if tensors else [tensor("INPUT0"), tensor("INPUT1")]}
    b.update(extra)
    return b


def test_well_formed_request_succeeds(server):
    """The baseline the other cases break one thing of."""
    r = server.infer_raw(MODEL, body())
    assert r.status_code == 200, r.text
    outputs = {o["name"]: o for o in r.json()["outputs"]}
    assert outputs["OUTPUT0"]["data"] == [2.0 * i for i in range(16)]
    assert outputs["OUTPUT1"]["data"] == [0.0] * 16


# ---------------------------------------------------------------- model / version

def test_unknown_model(server):
    """Triton's status and words (its example clients match the beginning)."""
    r = server.infer_raw("no_such_model", body())
    assert_error(r, 404)
    assert error_message(r) == "Request for unknown model: 'no_such_model' is not found"


def test_unknown_version(server):
    r = server.infer_raw(MODEL, body(), version="99")
    assert_error(r, 404)
    assert error_message(r) == f"Request for unknown model: '{MODEL}' version 99 is not found"


def test_non_numeric_version(server):
    assert_error(server.infer_raw(MODEL, body(), version="abc"), (400, 404), pattern=r"abc|version")


# ---------------------------------------------------------------- JSON framing

def test_malformed_json(server):
    assert_error(server.infer_raw(MODEL, b'{"inputs": [{"name": "INPUT0",'), 400, pattern=r"json|pars")


def test_empty_body(server):
    assert_error(server.infer_raw(MODEL, b""), 400, pattern=r"json|empty|body")


def test_json_not_an_object(server):
    assert_error(server.infer_raw(MODEL, b"[1, 2, 3]"), 400, pattern=r"json|object|inputs")


def test_deeply_nested_json(server):
    deep = b'{"inputs": ' + b"[" * 10000 + b"]" * 10000 + b"}"
    r = server.infer_raw(MODEL, deep)
    assert_error(r, 400, "--http-max-json-depth")
    assert error_message(r).startswith("JSON nesting depth exceeds maximum allowed limit (128)")


def _nested(depth: int, value: str):
    for _ in range(depth):
        value = f"[{value}]"
    return json.loads(value)


@pytest.mark.parametrize("model,datatype,value,depth,served", [
    ("identity_bytes", "BYTES", '"hello"', 120, False), ("identity_bytes", "BYTES", '"hello"', 50, True),
    ("identity_int64", "INT64", "123", 120, False), ("identity_int64", "INT64", "123", 50, True),
    ("identity_int64", "INT64", "123", 99, True), ("identity_int64", "INT64", "123", 100, False),
])
def test_data_nesting_at_tritons_limit(server, model, datatype, value, depth, served):
    """Triton's L0_http test_json_recursion_depth_limit: 'data' arrays nested
    `depth` deep around one element, shape [1, 1]."""
    r = server.infer_raw(model, {"inputs": [{"name": "INPUT0", "datatype": datatype, "shape": [1, 1],
                                             "data": _nested(depth, value)}]})
    if served:
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["data"] == [json.loads(value)]
    else:
        assert_error(r, 400, "JSON nesting depth exceeds maximum allowed limit (100)", "'INPUT0'")


# ---------------------------------------------------------------- input set

def test_missing_input(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0"))), 400, "INPUT1")


def test_unknown_input(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0"), tensor("INPUT1"), tensor("BOGUS"))),
                 400, "BOGUS")


def test_duplicate_input_names(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0"), tensor("INPUT0"), tensor("INPUT1"))),
                 400, "INPUT0", pattern=r"duplicat|more than once|twice|repeat")


def test_unknown_requested_output(server):
    assert_error(server.infer_raw(MODEL, body(outputs=[{"name": "NOPE_OUT"}])), 400, "NOPE_OUT")


# ---------------------------------------------------------------- types and data

def test_wrong_datatype(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0", datatype="INT32"), tensor("INPUT1"))),
                 400, "INPUT0", "INT32", "FP32")


def test_unknown_datatype_name(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0", datatype="FLOAT99"), tensor("INPUT1"))),
                 400, "FLOAT99")


def test_string_where_number_expected(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0", data=["x"] * 16), tensor("INPUT1"))),
                 400, "INPUT0")


def test_fp16_as_json_rejected(server):
    b = body(tensor("INPUT0", shape=(1, 4), datatype="FP16", data=[1.0, 2.0, 3.0, 4.0]))
    assert_error(server.infer_raw("identity_fp16", b), 400, "FP16")


def test_element_count_not_matching_data(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0", data=list(range(15))), tensor("INPUT1"))),
                 400, "INPUT0")


# ---------------------------------------------------------------- shapes

def test_wrong_rank(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0", shape=(1, 4, 4)), tensor("INPUT1"))),
                 400, "INPUT0", pattern=r"shape|rank|dim")


def test_wrong_fixed_dim(server):
    assert_error(server.infer_raw(MODEL, body(tensor("INPUT0", shape=(2, 8)), tensor("INPUT1"))),
                 400, "INPUT0", pattern=r"shape|dim")


def test_negative_dim(server):
    b = body(tensor("INPUT0", shape=(1, -16), data=list(range(16))), tensor("INPUT1"))
    assert_error(server.infer_raw(MODEL, b), 400, "INPUT0", pattern=r"shape|dim|negative")


def test_batch_above_max_batch_size(server):
    b = body(tensor("INPUT0", shape=(9, 16)), tensor("INPUT1", shape=(9, 16)))
    assert_error(server.infer_raw(MODEL, b), 400, "batch", "8")


@pytest.mark.parametrize("model,shape", [
    ("identity_fp32", [1, 2 ** 62]),                   # byte size 2^64: overflows
    ("identity_3d_fp32", [2 ** 22, 2 ** 21, 2 ** 21]),  # element count 2^64: overflows
    ("identity_3d_fp32", [2 ** 31, 2 ** 31, 2 ** 31]),
], ids=["bytes-2^64", "elements-2^64", "elements-2^93"])
def test_shape_byte_size_overflows_64_bits(server, model, shape):
    b = {"inputs": [{"name": "INPUT0", "shape": shape, "datatype": "FP32", "data": []}]}
    assert_error(server.infer_raw(model, b), 400, "INPUT0")


def test_dim_not_representable_in_int64(server):
    b = {"inputs": [{"name": "INPUT0", "shape": [1, 2 ** 64], "datatype": "FP32", "data": []}]}
    assert_error(server.infer_raw("identity_fp32", b), 400, pattern=r"INPUT0|shape")


def test_shape_exceeding_input_limit(server):
    """Fits in 64 bits (32 GiB) but far over any input limit: rejected up
    front (not allocated), as a bad request."""
    header = {"inputs": [{"name": "INPUT0", "shape": [1, 2 ** 33], "datatype": "FP32",
                          "parameters": {"binary_data_size": 64}}]}
    data, headers = binary_infer_body(header, bytes(64))
    assert_error(server.infer_raw("identity_fp32", data, headers), 400,
                 pattern=r"INPUT0|size|limit|large")


# ---------------------------------------------------------------- binary extension

def _binary_add_sub(size0: int = 64, payload0: bytes | None = None):
    header = {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": size0}},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 64}}]}
    return header, (bytes(size0) if payload0 is None else payload0), bytes(64)


def test_binary_request_succeeds(server):
    header, p0, p1 = _binary_add_sub()
    data, headers = binary_infer_body(header, p0, p1)
    r = server.infer_raw(MODEL, data, headers)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("value", ["abc", "-5", "12x", "99999999999999999999999"],
                         ids=["alpha", "negative", "suffix", "overflow"])
def test_inference_header_length_not_a_valid_number(server, value):
    header, p0, p1 = _binary_add_sub()
    data, headers = binary_infer_body(header, p0, p1)
    headers["Inference-Header-Content-Length"] = value
    assert_error(server.infer_raw(MODEL, data, headers), 400, "Inference-Header-Content-Length")


def test_inference_header_length_past_the_body(server):
    header, p0, p1 = _binary_add_sub()
    data, headers = binary_infer_body(header, p0, p1)
    headers["Inference-Header-Content-Length"] = str(len(data) + 100)
    assert_error(server.infer_raw(MODEL, data, headers), 400, "Inference-Header-Content-Length")


def test_binary_data_size_past_the_body(server):
    header = {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 64}}]}
    data, headers = binary_infer_body(header, bytes(64), bytes(32))  # INPUT1 is short
    assert_error(server.infer_raw(MODEL, data, headers), 400, "INPUT1")


def test_binary_data_size_not_matching_shape(server):
    header, p0, p1 = _binary_add_sub(size0=60)
    data, headers = binary_infer_body(header, p0, p1)
    assert_error(server.infer_raw(MODEL, data, headers), 400, "INPUT0")


def test_binary_trailing_bytes_after_last_input(server):
    header, p0, p1 = _binary_add_sub()
    data, headers = binary_infer_body(header, p0, p1, b"extra")
    assert_error(server.infer_raw(MODEL, data, headers), 400)


def test_bytes_length_prefix_past_the_end(server):
    payload = struct.pack("<I", 1000) + b"0123456789"
    header = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "BYTES",
                          "parameters": {"binary_data_size": len(payload)}}]}
    data, headers = binary_infer_body(header, payload)
    assert_error(server.infer_raw("identity_bytes", data, headers), 400, "INPUT0")


def test_bytes_element_count_not_matching_shape(server):
    payload = struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b"  # two strings
    header = {"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "BYTES",
                          "parameters": {"binary_data_size": len(payload)}}]}
    data, headers = binary_infer_body(header, payload)
    assert_error(server.infer_raw("identity_bytes", data, headers), 400, "INPUT0")


def test_binary_data_size_without_header_length(server):
    """binary_data_size given but the body is plain JSON (no header length)."""
    header, p0, p1 = _binary_add_sub()
    data = json.dumps(header).encode()
    assert_error(server.infer_raw(MODEL, data, {"Content-Type": "application/json"}), 400,
                 pattern=r"INPUT0|binary|Inference-Header-Content-Length")
