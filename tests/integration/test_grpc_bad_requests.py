"""The gRPC front end's malformed requests (the twins of test_bad_requests.py):
each fails with INVALID_ARGUMENT (or the status named) and a message naming
the problem, and the server still serves afterwards."""
from __future__ import annotations

import re
import struct

import grpc
import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from grpc_helpers import (BAD, GRPC_TIMEOUT_S, add_sub_raw, decode_output, expect_rpc_error, raw_request,
                          raw_tensor)
from harness import grpc_inputs, assert_matches

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------ malformed requests
# The gRPC twins of test_bad_requests.py: INVALID_ARGUMENT, message names the problem.


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
        expect_rpc_error(stub.ModelInfer, req, grpc.StatusCode.NOT_FOUND,
                         "Request for unknown model: 'no_such_model' is not found")

    def test_unknown_version(self, stub):
        req = add_sub_raw()
        req.model_version = "99"
        expect_rpc_error(stub.ModelInfer, req, grpc.StatusCode.NOT_FOUND,
                         "Request for unknown model: 'add_sub_fp32' version 99 is not found")

    def test_non_numeric_version(self, stub):
        req = add_sub_raw()
        req.model_version = "abc"
        expect_rpc_error(stub.ModelInfer, req, grpc.StatusCode.NOT_FOUND, pattern=r"abc|version")

    def test_version_outside_policy(self, stub):
        req = raw_request("versioned_add", raw_tensor("INPUT0", "FP32", [1, 4]), version="1",
                          raw=[bytes(16)])
        expect_rpc_error(stub.ModelInfer, req, grpc.StatusCode.NOT_FOUND,
                         "Request for unknown model: 'versioned_add' version 1 is not found")

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


def test_typed_int8_out_of_range_rejected(stub, grpc_still_serves):
    t = raw_tensor("INPUT0", "INT8", [1, 3])
    t.contents.int_contents.extend([1, 300, -1000])
    expect_rpc_error(stub.ModelInfer, raw_request("identity_int8", t), BAD, "INPUT0")
