"""Fixtures: generated test repository, server processes, clients, references.

Servers are real ortserve processes (ORTSERVE_BIN, default build/ortserve) on
free ports, logging to files under the pytest tmp dir (the path is printed in
every startup failure and available as server.log_path). Without a binary the
server-backed tests are skipped; the offline model checks still run.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

import grpc
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2_grpc as pbg

from grpc_helpers import grpc_check_add_sub_fp32
from harness import (DEMO_REPO, REPO_ROOT, SMALL_BODY_LIMIT, TRITON_EXAMPLE_MODELS, Reference,
                     check_add_sub_fp32, make_test_models, start_server, tritons_own_examples)

import make_classification_models  # noqa: E402  (tests/models, on the path through harness)

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import make_triton_examples  # noqa: E402



@pytest.fixture(scope="session")
def test_repo(tmp_path_factory):
    """The full test repository (tests/models/make_test_models.py)."""
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("test_models"))


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("server_logs")


@pytest.fixture(scope="session")
def server(test_repo, log_dir):
    """ortserve on the full test repository, --strict-readiness=false."""
    srv = start_server(test_repo, log_dir, "main", strict_readiness=False)
    try:
        srv.wait_models_ready(make_test_models.MODELS_THAT_SERVE)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def demo_server(log_dir):
    """ortserve on the committed demo repository models/."""
    srv = start_server(DEMO_REPO, log_dir, "demo", strict_readiness=True)
    try:
        srv.wait_models_ready(["mlp_classifier", "image_normalize", "linear_autoconfig", "greeting"])
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def small_limit_server(tmp_path_factory, log_dir):
    """ortserve with --http-max-input-size 1 MiB on a two-model repository."""
    repo = make_test_models.build_test_repository(
        tmp_path_factory.mktemp("small_limit_models"), ["identity_fp32", "add_sub_fp32"])
    srv = start_server(repo, log_dir, "small_limit",
                       extra_args=("--http-max-input-size", str(SMALL_BODY_LIMIT)))
    try:
        srv.wait_models_ready(["identity_fp32", "add_sub_fp32"])
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def launch(log_dir, request):
    """Factory for per-test servers; all are stopped at teardown."""
    started = []

    def _launch(repo, **kw):
        name = request.node.name.replace("/", "_").replace("[", "_").replace("]", "")
        srv = start_server(repo, log_dir, f"{name}_{len(started)}", **kw)
        started.append(srv)
        return srv

    yield _launch
    # Every server is stopped even if one's stop() fails (a sanitizer report);
    # the first failure is raised afterwards.
    errors = []
    for srv in started:
        try:
            srv.stop()
        except AssertionError as e:
            errors.append(e)
    if errors:
        raise errors[0]


@pytest.fixture(scope="session")
def generated_triton_examples(tmp_path_factory):
    """The repository scripts/make_triton_examples.py writes, equivalent to
    Triton's quick-start one; made once per session."""
    return make_triton_examples.build_triton_examples(tmp_path_factory.mktemp("triton_examples"))


@pytest.fixture(scope="session", params=["generated", "triton"])
def triton_examples(request):
    """Triton's example repository, each test once per copy: the generated one,
    then Triton's own files where TRITON_EXAMPLES_DIR names them (skipped,
    saying so, where it does not)."""
    if request.param == "generated":
        return request.getfixturevalue("generated_triton_examples")
    return tritons_own_examples()


@pytest.fixture(scope="session")
def examples_server(triton_examples, log_dir):
    """ortserve on Triton's example repository (`triton_examples`) as it is, all
    five models READY: the stateless ones of test_triton_examples.py and the
    sequence ones of test_triton_sequence_examples.py. Its folder is
    examples_server.repo."""
    # --allow-client-shm=true for the simple_*_shm_*_client.py examples.
    srv = start_server(triton_examples, log_dir, f"examples_server_{triton_examples.name}", strict_readiness=False,
                       extra_args=("--allow-client-shm=true",))
    try:
        srv.wait_models_ready(TRITON_EXAMPLE_MODELS)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def classification_repo(tmp_path_factory):
    """The classification repository (tests/models/make_classification_models.py)."""
    return make_classification_models.build_classification_repository(
        tmp_path_factory.mktemp("classification_models"))


@pytest.fixture(scope="session")
def classification_server(classification_repo, log_dir):
    """ortserve on the classification repository: the image classifiers of
    test_classification.py and of Triton's image examples."""
    srv = start_server(classification_repo, log_dir, "classification", strict_readiness=False)
    try:
        srv.wait_models_ready(make_classification_models.MODELS_THAT_SERVE)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def reference():
    return Reference()


@pytest.fixture
def client(server):
    with httpclient.InferenceServerClient(server.url, network_timeout=60) as c:
        yield c


@pytest.fixture
def demo_client(demo_server):
    with httpclient.InferenceServerClient(demo_server.url, network_timeout=60) as c:
        yield c


@pytest.fixture
def grpc_client(server):
    with grpcclient.InferenceServerClient(server.grpc_url) as c:
        yield c


@pytest.fixture
def demo_grpc_client(demo_server):
    with grpcclient.InferenceServerClient(demo_server.grpc_url) as c:
        yield c


@pytest.fixture
def server_still_serves(server, test_repo, reference):
    """After the test: the main server is alive, live, and answers correctly."""
    yield server
    assert server.alive(), f"ortserve died; log tail:\n{server.log_tail()}"
    assert server.get("/v2/health/live").status_code == 200
    check_add_sub_fp32(server, test_repo, reference)


@pytest.fixture
def grpc_still_serves(server, test_repo, reference):
    """After the test: the main server is alive and answers over gRPC and HTTP."""
    yield server
    assert server.alive(), f"ortserve died; log tail:\n{server.log_tail()}"
    grpc_check_add_sub_fp32(server, test_repo, reference)
    check_add_sub_fp32(server, test_repo, reference)


@pytest.fixture
def stub(server):
    """A raw GRPCInferenceService stub on the main server (test_grpc_*.py)."""
    with grpc.insecure_channel(server.grpc_url) as channel:
        yield pbg.GRPCInferenceServiceStub(channel)


@pytest.fixture(scope="module")
def collector():
    """An OTLP/HTTP trace collector (test_tracing.OtlpCollector) for one test module."""
    from test_tracing import OtlpCollector
    c = OtlpCollector()
    yield c
    c.stop()


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a
    client certificate, by the openssl CLI: {ca, server_cert, server_key,
    client_cert, client_key, dir} PEM paths."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is needed to generate test certificates")
    d = tmp_path_factory.mktemp("certs")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=ortserve test CA", cwd=d)
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for who in ("server", "client"):
        _openssl("req", *ec, "-keyout", f"{who}.key", "-out", f"{who}.csr",
                 "-subj", f"/CN=ortserve test {who}", cwd=d)
        _openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", f"{who}.ext", "-out", f"{who}.pem", cwd=d)
    return {"ca": d / "ca.pem", "server_cert": d / "server.pem", "server_key": d / "server.key",
            "client_cert": d / "client.pem", "client_key": d / "client.key", "dir": d}
