"""Request and connection limits (issue 5), each set low by its flag:
connections, header bytes, chunks of a chunked body, JSON depth, tensor
elements (HTTP and gRPC), and the read timeout that cuts off a client who
trickles its request (slow loris). Every refusal names its flag; the server
keeps serving correctly afterwards."""
from __future__ import annotations

import json
import socket
import subprocess
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from harness import (assert_error, grpc_inputs, http_request_bytes, infer_inputs, make_test_models, metric,
                     model_file, ortserve_binary, raw_exchange, read_response, start_server)

pytestmark = pytest.mark.timeout(120)

MODEL = "identity_fp32"  # INPUT0 FP32 [-1, -1] (batch dim first) -> OUTPUT0
MAX_CONNECTIONS = 4
MAX_HEADER = 2048
MAX_CHUNKS = 8
MAX_DEPTH = 8
MAX_ELEMENTS = 1000
READ_TIMEOUT_S = 2


@pytest.fixture(scope="module")
def limited(tmp_path_factory, log_dir, reference):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("limit_models"), [MODEL])
    srv = start_server(repo, log_dir, "limits", extra_args=(
        "--http-max-connections", str(MAX_CONNECTIONS),
        "--http-max-header-size", str(MAX_HEADER),
        "--http-max-body-chunks", str(MAX_CHUNKS),
        "--http-max-json-depth", str(MAX_DEPTH),
        "--max-tensor-elements", str(MAX_ELEMENTS),
        "--http-read-timeout-secs", str(READ_TIMEOUT_S),
        "--http-idle-timeout-secs", "60"))
    try:
        srv.wait_models_ready([MODEL])
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def srv(limited, reference):
    """The limited server; afterwards it must still answer correctly."""
    wait_for_connections_below(limited, 1)
    yield limited
    assert limited.alive(), limited.log_tail()
    wait_for_connections_below(limited, MAX_CONNECTIONS)
    check_identity(limited, reference, 16)


def wait_for_connections_below(srv, n: int, timeout_s: float = 30) -> None:
    """Closed sockets leave the server's count once it has read their EOF."""
    deadline = time.monotonic() + timeout_s
    while metric(srv, "ortserve_open_connections", protocol="http") >= n:
        assert time.monotonic() < deadline, f"HTTP connections stayed at {n} or more"
        time.sleep(0.05)


def check_identity(srv, reference, n: int) -> None:
    x = np.linspace(-1, 1, n, dtype=np.float32).reshape(1, n)
    with httpclient.InferenceServerClient(srv.url, network_timeout=60) as c:
        out = c.infer(MODEL, infer_inputs({"INPUT0": ("FP32", x)})).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(out, reference.run(model_file(srv.repo, MODEL), {"INPUT0": x})["OUTPUT0"])


def identity_json(values, nested: bool = True) -> bytes:
    data = [list(values)] if nested else list(values)
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, len(values)], "datatype": "FP32",
                                   "data": data}]}).encode()


def connect_and_get(port: int) -> socket.socket:
    """A keep-alive connection the server has accepted and answered once."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    resp = read_response(s, 30)
    assert resp is not None and resp.status == 200, resp
    return s


# ---------------------------------------------------------------- connections

def test_connection_over_the_limit_is_answered_503_and_a_freed_slot_serves(srv):
    rejected_before = metric(srv, "ortserve_connections_rejected_total", protocol="http")
    held = [connect_and_get(srv.http_port) for _ in range(MAX_CONNECTIONS)]
    try:
        resp = raw_exchange(srv.http_port, http_request_bytes("GET", "/v2/health/live"))
        assert resp is not None and resp.status == 503, resp
        assert "--http-max-connections" in resp.json()["error"], resp
        assert metric(srv, "ortserve_connections_rejected_total", protocol="http") == rejected_before + 1
        # The held connections are still served.
        held[0].sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(held[0], 30).status == 200
    finally:
        held.pop().close()
    wait_for_connections_below(srv, MAX_CONNECTIONS)
    resp = raw_exchange(srv.http_port, http_request_bytes("GET", "/v2/health/live"))
    assert resp is not None and resp.status == 200, resp
    for s in held:
        s.close()


# ---------------------------------------------------------------- headers

def test_headers_within_the_limit_are_served(srv):
    resp = raw_exchange(srv.http_port, http_request_bytes("GET", "/v2/health/live",
                                                          headers={"X-Pad": "a" * (MAX_HEADER // 2)}))
    assert resp is not None and resp.status == 200, resp


def test_headers_over_the_limit_431_naming_the_flag(srv):
    resp = raw_exchange(srv.http_port, http_request_bytes("GET", "/v2/health/live",
                                                          headers={"X-Pad": "a" * (MAX_HEADER + 10)}))
    assert resp is not None and resp.status == 431, resp
    assert "--http-max-header-size" in resp.json()["error"]


# ---------------------------------------------------------------- chunked bodies

def chunked_request(body: bytes, chunks: int) -> bytes:
    size = -(-len(body) // chunks)
    pieces = [body[i:i + size] for i in range(0, len(body), size)]
    assert len(pieces) == chunks
    head = (f"POST /v2/models/{MODEL}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    return head + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def test_chunked_body_within_the_chunk_limit_is_served(srv, reference):
    x = np.arange(8, dtype=np.float32) / 4
    resp = raw_exchange(srv.http_port, chunked_request(identity_json(x.tolist()), MAX_CHUNKS))
    assert resp is not None and resp.status == 200, resp
    got = np.array(resp.json()["outputs"][0]["data"], dtype=np.float32).reshape(1, 8)
    ref = reference.run(model_file(srv.repo, MODEL), {"INPUT0": x.reshape(1, 8)})["OUTPUT0"]
    np.testing.assert_array_equal(got, ref)


def test_chunked_body_over_the_chunk_limit_400_naming_the_flag(srv):
    body = identity_json([1.0] * 8)
    resp = raw_exchange(srv.http_port, chunked_request(body, MAX_CHUNKS + 1))
    assert resp is not None and resp.status == 400, resp
    assert f"Chunked request body exceeds maximum of {MAX_CHUNKS} non-empty chunks" in resp.json()["error"]
    assert "--http-max-body-chunks" in resp.json()["error"]


# ---------------------------------------------------------------- JSON depth

def test_json_at_the_depth_limit_is_served(srv, reference):
    # An unknown member is ignored, but it counts towards the depth.
    body = json.loads(identity_json([0.5, 1.5]))
    body["extra"] = {"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}  # 8 levels
    resp = srv.infer_raw(MODEL, body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["outputs"][0]["data"] == [0.5, 1.5]


def test_json_deeper_than_the_limit_400_naming_the_flag(srv):
    body = json.loads(identity_json([0.5, 1.5]))
    body["extra"] = {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": 1}}}}}}}}  # 9 levels
    assert_error(srv.infer_raw(MODEL, body), 400, "--http-max-json-depth", str(MAX_DEPTH))


# ---------------------------------------------------------------- tensor elements

def test_tensor_at_the_element_limit_is_served_http_and_grpc(srv, reference):
    x = np.linspace(0, 1, MAX_ELEMENTS, dtype=np.float32).reshape(1, MAX_ELEMENTS)
    ref = reference.run(model_file(srv.repo, MODEL), {"INPUT0": x})["OUTPUT0"]
    with httpclient.InferenceServerClient(srv.url, network_timeout=60) as c:
        np.testing.assert_array_equal(c.infer(MODEL, infer_inputs({"INPUT0": ("FP32", x)})).as_numpy("OUTPUT0"), ref)
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        np.testing.assert_array_equal(c.infer(MODEL, grpc_inputs({"INPUT0": ("FP32", x)})).as_numpy("OUTPUT0"), ref)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_tensor_over_the_element_limit_400_over_http(srv, binary):
    x = np.zeros((1, MAX_ELEMENTS + 1), np.float32)
    with httpclient.InferenceServerClient(srv.url, network_timeout=60) as c:
        with pytest.raises(InferenceServerException) as info:
            c.infer(MODEL, infer_inputs({"INPUT0": ("FP32", x)}, binary=binary))
    err = info.value
    assert err.status() == "400", err
    for part in ("INPUT0", str(MAX_ELEMENTS + 1), "--max-tensor-elements"):
        assert part in err.message(), err.message()


def test_tensor_over_the_element_limit_resource_exhausted_over_grpc(srv):
    x = np.zeros((1, MAX_ELEMENTS + 1), np.float32)
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        with pytest.raises(InferenceServerException) as info:
            c.infer(MODEL, grpc_inputs({"INPUT0": ("FP32", x)}))
    err = info.value
    assert err.status() == "StatusCode.RESOURCE_EXHAUSTED", err
    assert "INPUT0" in err.message() and "--max-tensor-elements" in err.message(), err.message()


# ---------------------------------------------------------------- read timeout

def test_a_trickled_request_is_cut_off_by_the_read_timeout(srv):
    """One byte every 0.2 s never completes the headers; the connection is
    closed once the read timeout (2 s) passes, although the idle timeout is
    60 s and bytes keep coming. Meanwhile others are served."""
    request = (f"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Pad: {'a' * 1000}\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    closed = False
    deadline = time.monotonic() + 40  # generous bound, far below the 60 s idle timeout
    try:
        for i, byte in enumerate(request):
            if time.monotonic() > deadline:
                break
            try:
                s.send(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if i == 3:
                resp = raw_exchange(srv.http_port, http_request_bytes("GET", "/v2/health/live"))
                assert resp is not None and resp.status == 200
            time.sleep(0.2)
        if not closed:
            s.settimeout(5)
            try:
                closed = s.recv(1) == b""
            except (ConnectionResetError, socket.timeout):
                closed = True
    finally:
        s.close()
    assert closed, "the server kept a trickling connection open for 40 s"


def test_the_read_timeout_starts_at_the_first_byte(srv):
    """A keep-alive connection may idle longer than the read timeout before
    its next request."""
    s = connect_and_get(srv.http_port)
    try:
        time.sleep(READ_TIMEOUT_S + 1.5)
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = read_response(s, 30)
        assert resp is not None and resp.status == 200, resp
    finally:
        s.close()


# ---------------------------------------------------------------- flags

@pytest.mark.parametrize("flag,value", [
    ("--http-max-json-depth", "5000"),
    ("--http-max-connections", "0"),
    ("--http-max-header-size", "100"),
    ("--http-max-body-chunks", "0"),
    ("--max-tensor-elements", "0"),
    ("--http-read-timeout-secs", "0"),
])
def test_limit_flag_out_of_range_is_refused_at_startup(tmp_path, flag, value):
    proc = subprocess.run([str(ortserve_binary()), "--model-repository", str(tmp_path), flag, value],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert flag in proc.stdout + proc.stderr, proc.stdout + proc.stderr
