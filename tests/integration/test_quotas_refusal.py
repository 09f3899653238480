"""Quota refusals before decoding (issue 37, docs/limits.md): the quota is
checked before an infer request's body is decoded, so a client over its
quota gets 429 (HTTP) / RESOURCE_EXHAUSTED (gRPC) whatever its body holds,
even a large one that is not valid JSON, and the keep-alive connection
answers the next request on it correctly. A request that passes the check
has taken its token, even if its body then fails decoding. A connection
whose request was refused is not read again for a short pause, so a client
that ignores Retry-After cannot have refusals written as fast as it sends."""
from __future__ import annotations

import http.client
import json
import socket
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from harness import http_request_bytes, make_test_models, start_server

pytestmark = pytest.mark.timeout(60)

MODEL = "identity_fp32"  # INPUT0 FP32 [-1, -1] -> OUTPUT0
HEADER = "X-Client-Id"
CONFIG = {
    "default": {"rate": 100, "burst": 100},
    # One token, then none for 1000 s: the first request passes, every later one is over the rate.
    "clients": {"spent": {"rate": 0.001, "burst": 1}, "spent-grpc": {"rate": 0.001, "burst": 1},
                "spent-stream": {"rate": 0.001, "burst": 1}, "spent-paced": {"rate": 0.001, "burst": 1},
                "spent-grpc-paced": {"rate": 0.001, "burst": 1}},
}
DATA = [1.5, -2.0, 3.25, 4.0]
BODY = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": DATA}]}).encode()
LARGE_BAD_BODY = b"{" + b"x" * (2 << 20)  # 2 MiB, not JSON


@pytest.fixture(scope="module")
def srv(tmp_path_factory, log_dir):
    work = tmp_path_factory.mktemp("quota_refusal")
    quotas = work / "quotas.json"
    quotas.write_text(json.dumps(CONFIG))
    repo = make_test_models.build_test_repository(work / "repo", [MODEL])
    server = start_server(repo, log_dir, "quota_refusal", extra_args=(
        "--client-quota-config", str(quotas), "--client-id-header", HEADER))
    try:
        server.wait_models_ready([MODEL])
        yield server
    finally:
        server.stop()


def post(conn: http.client.HTTPConnection, body: bytes, client: str) -> tuple[http.client.HTTPResponse, bytes]:
    conn.request("POST", f"/v2/models/{MODEL}/infer", body=body,
                 headers={HEADER: client, "Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp, resp.read()


def test_http_refused_before_its_large_invalid_body_is_decoded_and_the_connection_goes_on(srv):
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=30)
    try:
        resp, body = post(conn, BODY, "spent")  # its one token
        assert resp.status == 200, body
        sock = conn.sock
        resp, body = post(conn, LARGE_BAD_BODY, "spent")
        # Before the change the body was decoded first: 400 for the JSON.
        assert resp.status == 429, body
        assert int(resp.headers["Retry-After"]) >= 1, resp.headers
        assert "requests/s" in json.loads(body)["error"], body
        assert not resp.will_close, resp.headers
        # The same connection (http.client reconnects silently otherwise)
        # answers the next request, another client's, correctly.
        resp, body = post(conn, BODY, "calm")
        assert conn.sock is sock
        assert resp.status == 200, body
        assert json.loads(body)["outputs"][0]["data"] == DATA
    finally:
        conn.close()


def read_responses(sock: socket.socket, count: int) -> list[int]:
    """The status codes of the next `count` responses on `sock` (each with a Content-Length body)."""
    statuses, data = [], b""
    while len(statuses) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            head = data[:head_end].decode()
            length = int(next(line.split(":")[1] for line in head.split("\r\n")
                              if line.lower().startswith("content-length:")))
            if len(data) >= head_end + 4 + length:
                statuses.append(int(head.split(" ")[1]))
                data = data[head_end + 4 + length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {len(statuses)} responses"
        data += chunk
    return statuses


def test_http_refusals_on_one_connection_are_paced(srv):
    """Ten requests pipelined on one connection by a client out of tokens: each
    refusal pauses the connection (at least 10 ms, docs/limits.md), so the ten
    answers take at least nine pauses, where without the pause they all came
    in a few milliseconds. A lower bound set by the server's timer: a slow
    machine only makes it longer."""
    request = http_request_bytes("POST", f"/v2/models/{MODEL}/infer", BODY,
                                 {HEADER: "spent-paced", "Content-Type": "application/json", "Connection": "keep-alive"})
    with socket.create_connection(("127.0.0.1", srv.http_port), timeout=30) as sock:
        sock.sendall(request)
        assert read_responses(sock, 1) == [200]  # its one token
        start = time.monotonic()
        sock.sendall(request * 10)
        assert read_responses(sock, 10) == [429] * 10
        elapsed = time.monotonic() - start
    assert elapsed >= 9 * 0.010, f"10 refusals in {elapsed * 1000:.1f} ms: the connection was not paused"


def test_grpc_refusals_are_paced(srv):
    """The same over gRPC: each refused ModelInfer call is answered after the
    pause, so ten calls one after another take at least ten pauses."""
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    inp = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(np.array([DATA], dtype=np.float32))
    headers = {HEADER.lower(): "spent-grpc-paced"}
    try:
        client.infer(MODEL, [inp], headers=headers)  # its one token
        start = time.monotonic()
        for _ in range(10):
            with pytest.raises(InferenceServerException) as refused:
                client.infer(MODEL, [inp], headers=headers)
            assert refused.value.status() == "StatusCode.RESOURCE_EXHAUSTED", refused.value
        elapsed = time.monotonic() - start
    finally:
        client.close()
    assert elapsed >= 10 * 0.010, f"10 refusals in {elapsed * 1000:.1f} ms: the calls were not paused"


def invalid_request() -> service_pb2.ModelInferRequest:
    """Two raw contents for one input: the decoder's INVALID_ARGUMENT, were it decoded."""
    bad = service_pb2.ModelInferRequest(model_name=MODEL)
    bad.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    raw = np.array(DATA, dtype=np.float32).tobytes()
    bad.raw_input_contents.extend([raw, raw])
    return bad


def test_grpc_stream_refuses_before_decoding_and_an_invalid_request_took_its_token(srv):
    with grpc.insecure_channel(srv.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        answers = list(stub.ModelStreamInfer(iter([invalid_request(), invalid_request()]),
                                             metadata=((HEADER.lower(), "spent-stream"),), timeout=30))
    # The first takes the one token and fails decoding; the second is refused
    # for the quota, not decoded.
    assert [bool(a.error_message) for a in answers] == [True, True], answers
    assert "raw_input_contents" in answers[0].error_message, answers[0].error_message
    assert "requests/s" in answers[1].error_message, answers[1].error_message


def test_grpc_refused_before_its_invalid_request_is_decoded(srv):
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    inp = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(np.array([DATA], dtype=np.float32))
    try:
        client.infer(MODEL, [inp], headers={HEADER.lower(): "spent-grpc"})  # its one token
    finally:
        client.close()
    bad = invalid_request()
    with grpc.insecure_channel(srv.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.ModelInfer(bad, metadata=((HEADER.lower(), "spent-grpc"),), timeout=30)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value.details()
        assert "requests/s" in refused.value.details()
        # Another client's invalid request is still decoded and refused for what is wrong.
        with pytest.raises(grpc.RpcError) as invalid:
            stub.ModelInfer(bad, metadata=((HEADER.lower(), "calm"),), timeout=30)
        assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT, invalid.value.details()
        assert "raw_input_contents" in invalid.value.details()
