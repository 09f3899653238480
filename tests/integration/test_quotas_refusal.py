"""Quota refusals before decoding (issue 37, docs/limits.md): the quota is
checked before an infer request's body is decoded, so a client over its
quota gets 429 (HTTP) / RESOURCE_EXHAUSTED (gRPC) whatever its body holds,
even a large one that is not valid JSON, and the keep-alive connection
answers the next request on it correctly. A request that passes the check
has taken its token, even if its body then fails decoding."""
from __future__ import annotations

import http.client
import json

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from harness import make_test_models, start_server

pytestmark = pytest.mark.timeout(60)

MODEL = "identity_fp32"  # INPUT0 FP32 [-1, -1] -> OUTPUT0
HEADER = "X-Client-Id"
CONFIG = {
    "default": {"rate": 100, "burst": 100},
    # One token, then none for 1000 s: the first request passes, every later one is over the rate.
    "clients": {"spent": {"rate": 0.001, "burst": 1}, "spent-grpc": {"rate": 0.001, "burst": 1},
                "spent-stream": {"rate": 0.001, "burst": 1}},
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
