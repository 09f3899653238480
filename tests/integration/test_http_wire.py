"""HTTP-level abuse, on raw sockets where the client library would get in the
way: body limits, gzip bombs, encodings, methods, paths, huge headers, a body
that never arrives. The server answers (or closes) and keeps serving."""
from __future__ import annotations

import gzip
import json
import re
import socket
import time

import numpy as np
import pytest
import requests

from harness import (SMALL_BODY_LIMIT, RawResponse, assert_error, binary_infer_body, check_add_sub_fp32,
                     http_request_bytes, raw_exchange, read_response)

pytestmark = pytest.mark.timeout(90)

INFER_PATH = "/v2/models/add_sub_fp32/infer"


@pytest.fixture
def limited(small_limit_server, reference):
    """The 1 MiB-limit server; afterwards it must still serve correctly."""
    yield small_limit_server
    assert small_limit_server.alive(), small_limit_server.log_tail()
    check_add_sub_fp32(small_limit_server, small_limit_server.repo, reference)


# ---------------------------------------------------------------- size limits

def test_body_just_under_limit_is_accepted(limited):
    n = (SMALL_BODY_LIMIT - 4096) // 4
    header = {"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32",
                          "parameters": {"binary_data_size": 4 * n}}],
              "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    x = np.arange(n, dtype=np.float32)
    data, headers = binary_infer_body(header, x.tobytes())
    assert len(data) < SMALL_BODY_LIMIT
    r = limited.infer_raw("identity_fp32", data, headers)
    assert r.status_code == 200, r.text[:500]
    json_len = int(r.headers["Inference-Header-Content-Length"])
    np.testing.assert_array_equal(np.frombuffer(r.content[json_len:], np.float32), x)


# A body over a limit is a 400 as in Triton, in the words its QA tests match.
def test_body_over_limit_400(limited):
    payload = b'{"inputs": [' + b" " * (2 * SMALL_BODY_LIMIT) + b"]}"
    resp = raw_exchange(limited.http_port, http_request_bytes(
        "POST", INFER_PATH, payload, {"Content-Type": "application/json"}))
    assert resp is not None and resp.status == 400, resp
    assert (f"request JSON size of {len(payload)} bytes exceeds the maximum allowed input size of "
            f"{SMALL_BODY_LIMIT} bytes") in resp.json()["error"]


def test_chunked_body_over_limit_400(limited):
    chunk = b" " * 65536
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(2 * SMALL_BODY_LIMIT // 65536))
    head = (f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            "Content-Type: application/json\r\nConnection: close\r\n\r\n").encode()
    resp = raw_exchange(limited.http_port, head + body + b"0\r\n\r\n")
    assert resp is not None and resp.status == 400, resp
    assert "exceeds the maximum allowed input size" in resp.json()["error"]


def test_gzip_bomb_400(limited):
    bomb = gzip.compress(b'{"inputs": [' + b" " * (64 * SMALL_BODY_LIMIT) + b"]}", 9)
    assert len(bomb) < SMALL_BODY_LIMIT // 4
    resp = raw_exchange(limited.http_port, http_request_bytes(
        "POST", INFER_PATH, bomb, {"Content-Encoding": "gzip", "Content-Type": "application/json"}))
    assert resp is not None and resp.status == 400, resp
    assert "exceeds the maximum allowed value" in resp.json()["error"]


def test_corrupt_gzip_body_400(server_still_serves):
    r = server_still_serves.post(INFER_PATH, data=b"\x1f\x8b\x08\x00garbage",
                                 headers={"Content-Encoding": "gzip"})
    assert_error(r, 400, pattern=r"gzip|compress|inflate|decod")


def test_unsupported_content_encoding_501(server_still_serves):
    body = json.dumps({"inputs": []}).encode()
    r = server_still_serves.post(INFER_PATH, data=body, headers={"Content-Encoding": "br"})
    assert_error(r, 501, "br")


# ---------------------------------------------------------------- routing

@pytest.mark.parametrize("method,path", [
    ("DELETE", "/v2/health/live"),
    ("GET", INFER_PATH),
    ("PUT", "/v2/models/add_sub_fp32"),
])
def test_wrong_method_405(server_still_serves, method, path):
    r = requests.request(method, server_still_serves.base + path, timeout=30)
    assert r.status_code == 405, (r.status_code, r.text[:300])


@pytest.mark.parametrize("path", ["/v3", "/v2/nope", "/v2/models/add_sub_fp32/infer/extra", "/"])
def test_unknown_path_404(server_still_serves, path):
    r = server_still_serves.get(path)
    assert r.status_code == 404, (r.status_code, r.text[:300])


# ---------------------------------------------------------------- connection abuse

def test_oversized_headers_4xx(server_still_serves):
    req = http_request_bytes("GET", "/v2/health/live", headers={"X-Big": "a" * (64 * 1024)})
    resp = raw_exchange(server_still_serves.http_port, req)
    assert resp is not None, "connection closed without a response"
    assert resp.status in (400, 431), resp


def test_many_headers_4xx(server_still_serves):
    headers = {f"X-H{i}": "v" * 100 for i in range(2000)}
    resp = raw_exchange(server_still_serves.http_port,
                        http_request_bytes("GET", "/v2/health/live", headers=headers))
    assert resp is not None and 400 <= resp.status < 500, resp


def test_garbage_request_line(server_still_serves):
    resp = raw_exchange(server_still_serves.http_port, b"\x00\x01\x02 NOT HTTP\r\n\r\n")
    assert resp is None or 400 <= resp.status < 500, resp


def test_keep_alive_serves_several_requests(server_still_serves):
    with socket.create_connection(("127.0.0.1", server_still_serves.http_port), timeout=30) as s:
        for _ in range(3):
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            resp = read_response(s, 30)
            assert resp is not None and resp.status == 200


@pytest.mark.timeout(150)
def test_body_that_never_arrives(server_still_serves, reference, test_repo):
    srv = server_still_serves
    idle = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    try:
        idle.sendall((f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: 100\r\n\r\n").encode())
        # Meanwhile other clients are served.
        for _ in range(3):
            assert srv.get("/v2/health/live").status_code == 200
            check_add_sub_fp32(srv, test_repo, reference)
        # Eventually the stalled connection is closed (with or without a 408).
        idle.settimeout(5)
        deadline = time.monotonic() + 90  # generous bound, not a timing assertion
        received = b""
        while time.monotonic() < deadline:
            try:
                chunk = idle.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        else:
            pytest.fail("stalled connection still open after 90 s")
        assert received == b"" or received.startswith(b"HTTP/1.1 4"), received[:200]
    finally:
        idle.close()


# ---------------------------------------------------------------- lingering close

LINGER_MAX_BYTES = 4 << 20  # LingeringClose::kMaxDrainBytes (src/server/http/LingeringClose.h)


def send_body_then_read(port: int, head: bytes, body_bytes: int) -> tuple[int, object]:
    """Sends `head`, then `body_bytes` bytes in 64 KiB pieces without reading,
    as a client that answers only after its request is out; returns how many
    were sent and the response (or the exception reading it raised)."""
    piece = b"x" * 65536
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        while sent < body_bytes:
            s.sendall(piece[:min(len(piece), body_bytes - sent)])
            sent += min(len(piece), body_bytes - sent)
        try:
            resp = read_response(s, 30)
            rest = s.recv(1)  # then the server's FIN: a clean end, no reset
            assert rest == b"", rest
            return sent, resp
        except OSError as e:
            return sent, e


@pytest.mark.parametrize("expected,head", [
    ("--http-max-input-size", f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              f"Content-Length: {3 * SMALL_BODY_LIMIT}\r\n\r\n".encode()),
    ("malformed HTTP request", f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {3 * SMALL_BODY_LIMIT}\r\n"
                               "Bad Header\r\n\r\n".encode()),
])
def test_an_early_error_reaches_a_client_still_sending_its_body(limited, expected, head):
    # The server answers right after the headers; the client goes on sending
    # 3 MiB (within the drain bound) before it reads. Without a lingering
    # close the server's close would reset the connection under the client.
    sent, resp = send_body_then_read(limited.http_port, head, 3 * SMALL_BODY_LIMIT)
    assert sent == 3 * SMALL_BODY_LIMIT
    assert isinstance(resp, RawResponse) and resp.status == 400, resp
    assert expected in resp.json()["error"]


def test_a_client_that_keeps_sending_is_cut_off_after_the_drain_bound(limited):
    head = (f"POST {INFER_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {1 << 40}\r\n\r\n").encode()
    piece = b"x" * 65536
    cap = 256 << 20  # far beyond the bound plus both sides' socket buffers
    sent = 0
    with socket.create_connection(("127.0.0.1", limited.http_port), timeout=30) as s:
        s.sendall(head)
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            while sent < cap:
                s.sendall(piece)
                sent += len(piece)
    assert sent < cap
    # By size, not time: the server says it stopped at the byte bound.
    cut = [line for line in limited.log_text().splitlines() if "lingering close: cut off" in line]
    assert cut and all(int(re.search(r"after (\d+) bytes", line)[1]) >= LINGER_MAX_BYTES for line in cut), cut
