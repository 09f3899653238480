"""--access-log=true: one JSON line on stdout per answered inference request,
over HTTP, gRPC ModelInfer ("grpc") and for every response of a gRPC
ModelStreamInfer stream ("grpc-stream"), each with the request's id, model,
version, status, batch size and sizes in and out."""
from __future__ import annotations

import json
import time

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg

from harness import HTTP_TIMEOUT_S, make_test_models, start_server

pytestmark = pytest.mark.timeout(120)

MODEL = "add_sub_fp32"  # INPUT0, INPUT1: FP32 [16], max_batch_size 8
INVALID_ARGUMENT = 3    # gRPC status code


@pytest.fixture(scope="module")
def logged_server(tmp_path_factory, log_dir):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("access_log_models"), [MODEL])
    srv = start_server(repo, log_dir, "access_log", extra_args=("--access-log=true",))
    try:
        srv.wait_models_ready([MODEL])
        yield srv
    finally:
        srv.stop()


def add_sub_request(request_id: str, names=("INPUT0", "INPUT1")) -> pb.ModelInferRequest:
    req = pb.ModelInferRequest(model_name=MODEL, id=request_id)
    for name in names:
        tensor = req.inputs.add(name=name, datatype="FP32")
        tensor.shape.extend([1, 16])
        req.raw_input_contents.append(np.arange(16, dtype=np.float32).tobytes())
    return req


def access_records(server, ids, timeout_s: float = HTTP_TIMEOUT_S) -> dict:
    """{request_id: record} of the access-log lines for `ids`, waiting (bounded)
    until each has been written."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = {}
        for line in server.log_text().splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if record.get("request_id") in ids:
                assert record["request_id"] not in records, f"logged twice: {line}"
                records[record["request_id"]] = record
        if set(records) == set(ids) or time.monotonic() > deadline:
            assert set(records) == set(ids), (sorted(records), server.log_tail())
            return records
        time.sleep(0.05)


def test_each_stream_response_is_logged_like_a_unary_call(logged_server):
    requests = [add_sub_request("stream-ok-0"), add_sub_request("stream-bad", names=("INPUT0",)),
                add_sub_request("stream-ok-1")]
    with grpc.insecure_channel(logged_server.grpc_url) as channel:
        stub = pbg.GRPCInferenceServiceStub(channel)
        responses = list(stub.ModelStreamInfer(iter(requests), timeout=HTTP_TIMEOUT_S))
        unary = add_sub_request("unary-ok")
        unary_response = stub.ModelInfer(unary, timeout=HTTP_TIMEOUT_S)
    by_id = {r.infer_response.id: r for r in responses}
    assert set(by_id) == {r.id for r in requests}
    assert "INPUT1" in by_id["stream-bad"].error_message

    records = access_records(logged_server, {"stream-ok-0", "stream-bad", "stream-ok-1", "unary-ok"})
    for request in requests:
        record = records[request.id]
        assert record["protocol"] == "grpc-stream", record
        assert record["model"] == MODEL, record
        assert record["bytes_in"] == request.ByteSize(), record
        assert record["bytes_out"] == by_id[request.id].ByteSize(), record
    for rid in ("stream-ok-0", "stream-ok-1"):
        assert records[rid]["status"] == 0, records[rid]
        assert records[rid]["version"] == "1", records[rid]
        assert records[rid]["batch_size"] == 1, records[rid]
    assert records["stream-bad"]["status"] == INVALID_ARGUMENT, records["stream-bad"]
    assert records["stream-bad"]["batch_size"] == 0, records["stream-bad"]

    record = records["unary-ok"]
    assert record["protocol"] == "grpc", record
    assert record["status"] == 0 and record["batch_size"] == 1 and record["version"] == "1", record
    assert record["bytes_in"] == unary.ByteSize() and record["bytes_out"] == unary_response.ByteSize(), record


def test_http_requests_are_logged(logged_server):
    body = {"id": "http-ok", "inputs": [
        {"name": n, "datatype": "FP32", "shape": [1, 16], "data": list(range(16))} for n in ("INPUT0", "INPUT1")]}
    r = logged_server.infer_raw(MODEL, body, headers={"Accept-Encoding": "identity"})
    assert r.status_code == 200, r.text
    record = access_records(logged_server, {"http-ok"})["http-ok"]
    assert record["protocol"] == "http" and record["status"] == 200, record
    assert record["model"] == MODEL and record["version"] == "1" and record["batch_size"] == 1, record
    assert record["bytes_out"] == len(r.content), record
