"""Helpers of the gRPC tests (test_grpc_*.py): a bound on every call, requested
outputs, one checked inference, raw ModelInferRequests built by hand for the
typed `contents` and malformed-request paths, the expected error of a call,
and decoding an output from raw or typed contents."""
from __future__ import annotations

import re

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2 as pb

from harness import HTTP_TIMEOUT_S, assert_matches, grpc_inputs, model_file

GRPC_TIMEOUT_S = HTTP_TIMEOUT_S  # bound on any single call (turns a hang into a failure)
BAD = grpc.StatusCode.INVALID_ARGUMENT


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
