"""Access control and TLS (issue 5): --http-restricted-api /
--grpc-restricted-protocol (Triton's syntax), explicit model control refused
without authentication by default, HTTPS with optional client certificates,
and gRPC TLS / mutual TLS. Certificates are generated per test session with
the openssl CLI (conftest.py's `certs`: a throwaway CA, a server certificate
for 127.0.0.1/localhost and a client certificate).
"""
from __future__ import annotations

import contextlib
import json
import shutil
import socket
import ssl
import subprocess
import time

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from harness import (Server, error_message, infer_inputs, make_test_models, metric,
                     model_file, start_server)

INFER_KEY, INFER_SECRET = "infer-key", "s3cret-Value:with=signs"
GRPC_KEY, GRPC_SECRET = "rpc-key", "g-secret"
# Triton's clients send a gRPC restriction's key with this prefix
# (Triton's src/grpc/grpc_server.h, kRestrictedProtocolHeaderTemplate).
GRPC_HEADER = "triton-grpc-protocol-" + GRPC_KEY
HTTP_REFUSAL = f"This API is restricted, expecting header '{INFER_KEY}'"
GRPC_REFUSAL = f"This protocol is restricted, expecting header '{GRPC_HEADER}'"
MODELS = ["add_sub_fp32"]


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("access_models"), MODELS)


@pytest.fixture(scope="module")
def restricted(repo, tmp_path_factory):
    """HTTP inference restricted by one key, gRPC inference+statistics by another."""
    srv = start_server(repo, tmp_path_factory.mktemp("access_logs"), "restricted", extra_args=(
        f"--http-restricted-api=inference:{INFER_KEY.upper()}={INFER_SECRET}",
        f"--grpc-restricted-protocol=inference,statistics:{GRPC_KEY}={GRPC_SECRET}"))
    try:
        srv.wait_models_ready(MODELS)
        yield srv
    finally:
        srv.stop()


def _inputs():
    a = np.arange(32, dtype=np.float32).reshape(2, 16)
    b = np.full((2, 16), 0.5, np.float32)
    return a, b


def _grpc_inputs(a, b):
    inputs = []
    for name, arr in (("INPUT0", a), ("INPUT1", b)):
        i = grpcclient.InferInput(name, list(arr.shape), "FP32")
        i.set_data_from_numpy(arr)
        inputs.append(i)
    return inputs


def _expect_grpc_error(fn, code: str):
    with pytest.raises(InferenceServerException) as e:
        fn()
    assert e.value.status() == f"StatusCode.{code}", (e.value.status(), e.value.message())
    return e.value.message()


# ---------------------------------------------------------------- restricted APIs

def test_http_restricted_inference(restricted, repo, reference):
    a, b = _inputs()
    body = {"inputs": [{"name": "INPUT0", "shape": [2, 16], "datatype": "FP32", "data": a.ravel().tolist()},
                       {"name": "INPUT1", "shape": [2, 16], "datatype": "FP32", "data": b.ravel().tolist()}]}
    missing = restricted.infer_raw("add_sub_fp32", body)
    assert missing.status_code == 401, missing.text
    wrong = restricted.infer_raw("add_sub_fp32", body, headers={INFER_KEY: INFER_SECRET + "x"})
    assert wrong.status_code == 403, wrong.text
    prefix = restricted.infer_raw("add_sub_fp32", body, headers={INFER_KEY: INFER_SECRET[:-1]})
    assert prefix.status_code == 403, prefix.text
    assert error_message(missing) == HTTP_REFUSAL + "; the request does not carry it"
    for r in (wrong, prefix):
        assert error_message(r) == HTTP_REFUSAL + "; the request carries it with another value"
    for r in (missing, wrong, prefix):
        assert INFER_SECRET not in r.text and INFER_SECRET[:-1] not in r.text
    # Header names are case-insensitive in HTTP; the value is exact.
    ok = restricted.infer_raw("add_sub_fp32", body, headers={"Infer-Key": INFER_SECRET})
    assert ok.status_code == 200, ok.text
    with httpclient.InferenceServerClient(restricted.url, network_timeout=60) as c:
        result = c.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}),
                         headers={INFER_KEY: INFER_SECRET})
        ref = reference.run(model_file(repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), ref["OUTPUT0"])
        with pytest.raises(InferenceServerException) as e:
            c.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}))
        # What Triton's L0_http/http_restricted_api_test.py matches.
        assert e.value.message().startswith("This API is restricted")
        # Every other group stays open on HTTP.
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("add_sub_fp32")
        assert c.get_server_metadata()["name"]
        assert c.get_model_metadata("add_sub_fp32")["name"] == "add_sub_fp32"
        assert c.get_model_config("add_sub_fp32")["name"] == "add_sub_fp32"
        assert c.get_inference_statistics("add_sub_fp32")["model_stats"]
        assert c.get_model_repository_index()
    # The metrics endpoint is never restricted.
    assert requests.get(f"http://127.0.0.1:{restricted.metrics_port}/metrics", timeout=60).status_code == 200


def test_grpc_restricted_inference_and_statistics(restricted, repo, reference):
    a, b = _inputs()
    with grpcclient.InferenceServerClient(restricted.grpc_url) as c:
        infer = lambda headers=None: c.infer("add_sub_fp32", _grpc_inputs(a, b), headers=headers)  # noqa: E731
        msg = _expect_grpc_error(infer, "UNAUTHENTICATED")
        assert msg == GRPC_REFUSAL + "; the request does not carry it"
        msg = _expect_grpc_error(lambda: infer({GRPC_HEADER: "nope"}), "PERMISSION_DENIED")
        assert msg == GRPC_REFUSAL + "; the request carries it with another value"
        assert GRPC_SECRET not in msg
        # As Triton: only the prefixed key opens it, the bare key does not.
        _expect_grpc_error(lambda: infer({GRPC_KEY: GRPC_SECRET}), "UNAUTHENTICATED")
        # The HTTP key does not open gRPC: each protocol has its own policy.
        _expect_grpc_error(lambda: infer({INFER_KEY: INFER_SECRET}), "UNAUTHENTICATED")
        result = infer({GRPC_HEADER: GRPC_SECRET})
        ref = reference.run(model_file(repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), ref["OUTPUT1"])
        _expect_grpc_error(lambda: c.get_inference_statistics("add_sub_fp32"), "UNAUTHENTICATED")
        assert c.get_inference_statistics("add_sub_fp32", headers={GRPC_HEADER: GRPC_SECRET}).model_stats
        # Open groups.
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("add_sub_fp32")
        assert c.get_model_metadata("add_sub_fp32").name == "add_sub_fp32"
        assert c.get_model_config("add_sub_fp32").config.name == "add_sub_fp32"
        assert c.get_model_repository_index().models


def test_grpc_restricted_stream_infer(restricted):
    a, b = _inputs()
    for headers, expect_ok in (({}, False), ({GRPC_KEY: GRPC_SECRET}, False), ({GRPC_HEADER: GRPC_SECRET}, True)):
        results = []
        with grpcclient.InferenceServerClient(restricted.grpc_url) as c:
            c.start_stream(callback=lambda result, error: results.append((result, error)), headers=headers)
            try:
                c.async_stream_infer("add_sub_fp32", _grpc_inputs(a, b))
            except InferenceServerException:
                # The server may refuse (and end) the stream before the
                # request is queued; the callback still gets the status.
                assert not expect_ok
            c.stop_stream()
        if expect_ok:
            assert len(results) == 1 and results[0][1] is None, results
            np.testing.assert_array_equal(results[0][0].as_numpy("OUTPUT0"), a + b)
        else:
            assert results and results[0][1] is not None, results
            assert "UNAUTHENTICATED" in str(results[0][1].status()), results[0][1]
            assert results[0][1].message().startswith(GRPC_REFUSAL), results[0][1]


def test_unknown_route_is_still_404_on_a_restricted_server(restricted):
    """A route that does not exist is still 404 (the check needs a known group)."""
    r = restricted.get("/v2/models/add_sub_fp32/nonsense")
    assert r.status_code == 404


# ---------------------------------------------------------------- model control

def test_explicit_model_control_refused_by_default(repo, launch):
    srv = launch(repo, extra_args=("--model-control-mode=explicit",))
    r = srv.post("/v2/repository/models/add_sub_fp32/load")
    assert r.status_code == 403, r.text
    assert "--allow-unauthenticated-model-control" in error_message(r)
    assert srv.post("/v2/repository/models/add_sub_fp32/unload").status_code == 403
    assert srv.repository_index()  # the index stays open
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        _expect_grpc_error(lambda: c.load_model("add_sub_fp32"), "PERMISSION_DENIED")
    assert srv.get("/v2/models/add_sub_fp32/ready").status_code == 404  # nothing was loaded


def test_explicit_model_control_with_repository_key(repo, launch):
    srv = launch(repo, extra_args=("--model-control-mode=explicit",
                                   "--http-restricted-api=model-repository:admin-key=adm",
                                   "--grpc-restricted-protocol=model-repository:admin-key=gadm"))
    assert srv.post("/v2/repository/models/add_sub_fp32/load").status_code == 401
    assert srv.post("/v2/repository/index").status_code == 401
    assert srv.post("/v2/repository/models/add_sub_fp32/load",
                    headers={"admin-key": "gadm"}).status_code == 403
    with httpclient.InferenceServerClient(srv.url, network_timeout=60) as c:
        c.load_model("add_sub_fp32", headers={"admin-key": "adm"})
        assert c.is_model_ready("add_sub_fp32")
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        _expect_grpc_error(lambda: c.unload_model("add_sub_fp32"), "UNAUTHENTICATED")
        _expect_grpc_error(lambda: c.unload_model("add_sub_fp32", headers={"admin-key": "gadm"}),
                           "UNAUTHENTICATED")
        c.unload_model("add_sub_fp32", headers={"triton-grpc-protocol-admin-key": "gadm"})
    srv._poll_until(lambda: srv.get("/v2/models/add_sub_fp32/ready").status_code == 400, 60, "unloaded")


def test_explicit_model_control_allowed_by_flag(repo, launch):
    srv = launch(repo, extra_args=("--model-control-mode=explicit", "--allow-unauthenticated-model-control=true"))
    r = srv.post("/v2/repository/models/add_sub_fp32/load")
    assert r.status_code == 200, r.text


# Triton's QA (L0_http, L0_grpc) starts the server with these flags and greps
# its log for exactly one line with Triton's words.
@pytest.mark.parametrize("flag,word", [("--http-restricted-api", "api"),
                                       ("--grpc-restricted-protocol", "protocol")])
@pytest.mark.parametrize("first,expected", [
    ("model-repository,health:k1=v1", "{word} 'health' can not be specified in multiple config groups"),
    ("model-reposit,health:k1=v1", "unknown restricted {word} 'model-reposit'"),
])
def test_bad_restriction_flags_exit_with_tritons_words(repo, tmp_path, flag, word, first, expected):
    srv = Server(repo, tmp_path / "bad_flag.log",
                 extra_args=(f"{flag}={first}", f"{flag}=metadata,health:k2=topsecret")).start()
    assert srv.proc.wait(timeout=60) != 0
    log = srv.log_text()
    srv.stop()
    expected = expected.format(word=word)
    assert sum(expected in line for line in log.splitlines()) == 1, log
    assert flag in log and "topsecret" not in log, log


# ---------------------------------------------------------------- TLS

def _tls_args(certs, http_mutual=False, grpc_mutual=False):
    args = ["--http-use-ssl=true", f"--http-server-cert={certs['server_cert']}",
            f"--http-server-key={certs['server_key']}",
            "--grpc-use-ssl=true", f"--grpc-server-cert={certs['server_cert']}",
            f"--grpc-server-key={certs['server_key']}"]
    if http_mutual:
        args.append(f"--http-root-cert={certs['ca']}")
    if grpc_mutual:
        args += ["--grpc-use-ssl-mutual=true", f"--grpc-root-cert={certs['ca']}"]
    return tuple(args)


def _https_server(repo, log_dir, name, certs, mutual):
    https = {"verify": str(certs["ca"])}
    if mutual:
        https["cert"] = (str(certs["client_cert"]), str(certs["client_key"]))
    srv = Server(repo, log_dir / f"{name}.log", https=https,
                 extra_args=_tls_args(certs, http_mutual=mutual, grpc_mutual=mutual)).start()
    try:
        srv.wait_live()
        srv.wait_models_ready(MODELS)
    except BaseException:
        srv.stop()
        raise
    return srv


@pytest.fixture(scope="module")
def tls_server(repo, certs, tmp_path_factory):
    srv = _https_server(repo, tmp_path_factory.mktemp("tls_logs"), "tls", certs, mutual=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def mtls_server(repo, certs, tmp_path_factory):
    srv = _https_server(repo, tmp_path_factory.mktemp("mtls_logs"), "mtls", certs, mutual=True)
    yield srv
    srv.stop()


def _context_factory(certs, client_cert=False):
    def factory():
        ctx = ssl.create_default_context(cafile=str(certs["ca"]))
        if client_cert:
            ctx.load_cert_chain(str(certs["client_cert"]), str(certs["client_key"]))
        return ctx
    return factory


def test_https_infer_with_tritonclient(tls_server, certs, repo, reference):
    a, b = _inputs()
    with httpclient.InferenceServerClient(tls_server.url, ssl=True, network_timeout=60,
                                          ssl_context_factory=_context_factory(certs)) as c:
        assert c.is_server_ready()
        result = c.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}))
    ref = reference.run(model_file(repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), ref["OUTPUT0"])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), ref["OUTPUT1"])


def test_https_with_curl_and_plain_http_refused(tls_server, certs):
    if shutil.which("curl") is None:
        pytest.skip("curl not installed")
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs["ca"]), "-o", "/dev/null", "-w", "%{http_code}",
                          f"https://127.0.0.1:{tls_server.http_port}/v2/models/add_sub_fp32/ready"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout == "200", (out.stdout, out.stderr)
    # Without the CA the server certificate is not trusted.
    out = subprocess.run(["curl", "-sS", "-o", "/dev/null",
                          f"https://127.0.0.1:{tls_server.http_port}/v2/health/live"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    # Plain HTTP to the HTTPS port gets no HTTP answer.
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://127.0.0.1:{tls_server.http_port}/v2/health/live", timeout=10)
    assert tls_server.get("/v2/health/live").status_code == 200  # still serving


def test_https_mutual_tls_requires_client_certificate(mtls_server, certs):
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(f"https://127.0.0.1:{mtls_server.http_port}/v2/health/live",
                     verify=str(certs["ca"]), timeout=10)
    assert mtls_server.get("/v2/health/live").status_code == 200  # with the client certificate
    a, b = _inputs()
    with httpclient.InferenceServerClient(mtls_server.url, ssl=True, network_timeout=60,
                                          ssl_context_factory=_context_factory(certs, True)) as c:
        result = c.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    if shutil.which("curl"):
        out = subprocess.run(["curl", "-sS", "--cacert", str(certs["ca"]), "--cert", str(certs["client_cert"]),
                              "--key", str(certs["client_key"]), "-o", "/dev/null", "-w", "%{http_code}",
                              f"https://127.0.0.1:{mtls_server.http_port}/v2/health/ready"],
                             capture_output=True, text=True, timeout=60)
        assert out.stdout == "200", (out.stdout, out.stderr)


def test_https_client_leaving_cancels_its_run(certs, launch, tmp_path):
    """An HTTPS client that closes its connection (close_notify, then FIN)
    while its request runs gets the request cancelled and the run stopped, as
    over plain HTTP. very_slow runs a second or more: without the cancel the
    run completes and counts as a success."""
    slow_repo = make_test_models.build_test_repository(tmp_path / "repo", ["very_slow"])
    srv = launch(slow_repo, https={"verify": str(certs["ca"])}, extra_args=_tls_args(certs))
    srv.wait_models_ready(["very_slow"])
    labels = {"model": "very_slow", "version": "1"}
    cancelled_before = metric(srv, "ortserve_requests_total", outcome="cancelled", **labels)
    x = np.zeros((1, 16), np.float32)
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    head = (f"POST /v2/models/very_slow/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    ctx = ssl.create_default_context(cafile=str(certs["ca"]))
    with socket.create_connection(("127.0.0.1", srv.http_port), timeout=60) as raw:
        tls = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        tls.sendall(head + body)
        # Leave once the run has started.
        _poll(lambda: metric(srv, "ortserve_busy_instances", **labels) >= 1, "the run to start")
        tls.settimeout(1)
        with contextlib.suppress(OSError):  # sends close_notify; the server does not answer it
            tls.unwrap()
    _poll(lambda: metric(srv, "ortserve_requests_total", outcome="cancelled", **labels) > cancelled_before,
          "the request to be counted as cancelled")
    assert metric(srv, "ortserve_requests_total", outcome="success", **labels) == 0
    assert srv.get("/v2/health/ready").status_code == 200


def _poll(predicate, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_grpc_tls(tls_server, certs):
    a, b = _inputs()
    url = f"localhost:{tls_server.grpc_port}"
    with grpcclient.InferenceServerClient(url, ssl=True, root_certificates=str(certs["ca"])) as c:
        assert c.is_server_live()
        result = c.infer("add_sub_fp32", _grpc_inputs(a, b))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    with grpcclient.InferenceServerClient(url) as c:  # plaintext client
        with pytest.raises(InferenceServerException):
            c.is_server_live(client_timeout=10)


def test_grpc_mutual_tls(mtls_server, certs):
    url = f"localhost:{mtls_server.grpc_port}"
    with grpcclient.InferenceServerClient(url, ssl=True, root_certificates=str(certs["ca"])) as c:
        with pytest.raises(InferenceServerException):
            c.is_server_live(client_timeout=10)
    with grpcclient.InferenceServerClient(url, ssl=True, root_certificates=str(certs["ca"]),
                                          private_key=str(certs["client_key"]),
                                          certificate_chain=str(certs["client_cert"])) as c:
        assert c.is_server_live()
        a, b = _inputs()
        np.testing.assert_array_equal(c.infer("add_sub_fp32", _grpc_inputs(a, b)).as_numpy("OUTPUT0"), a + b)


@pytest.mark.parametrize("which", ["http-server-cert", "http-server-key", "grpc-server-cert", "grpc-root-cert"])
def test_bad_certificate_files_stop_startup(repo, certs, tmp_path, which):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    args = dict(a.split("=", 1) for a in _tls_args(certs, grpc_mutual=True))
    args[f"--{which}"] = str(bad)
    srv = Server(repo, tmp_path / "bad_cert.log", extra_args=tuple(f"{k}={v}" for k, v in args.items())).start()
    assert srv.proc.wait(timeout=60) != 0
    log = srv.log_text()
    assert f"--{which}" in log and str(bad) in log, log
    srv.stop()
    missing = tmp_path / "missing.pem"
    args[f"--{which}"] = str(missing)
    srv = Server(repo, tmp_path / "missing_cert.log", extra_args=tuple(f"{k}={v}" for k, v in args.items())).start()
    assert srv.proc.wait(timeout=60) != 0
    assert str(missing) in srv.log_text()
    srv.stop()
