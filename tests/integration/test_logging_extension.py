"""Triton's logging extension (GET/POST /v2/logging, gRPC LogSettings)
through tritonclient: the settings as Triton reports them, their effects on
the server's log while it runs (verbose lines, INFO and ERROR lines, the line
format), the refusals in Triton's words, the log file, and the restricted
'logging' API group."""
from __future__ import annotations

import re

import grpc as grpc_module
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from harness import Server, make_test_models, start_server

pytestmark = pytest.mark.timeout(120)

DEFAULT_LINE = re.compile(r"^[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+\] ")
ISO8601_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z [IWE] \d+\] ")
# The harness starts every server with --log-verbose 1.
INITIAL = {"log_file": "", "log_info": True, "log_warning": True, "log_error": True,
           "log_verbose_level": 1, "log_format": "default"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_test_models.build_test_repository(
        tmp_path_factory.mktemp("logging_models"), ["identity_fp32", "corrupt_model"])


@pytest.fixture(scope="module")
def srv(repo, log_dir):
    """Explicit model control, so that a test can make the server log INFO
    (load, unload) and ERROR (a model that fails to load) lines."""
    server = start_server(repo, log_dir, "logging_extension", extra_args=(
        "--model-control-mode=explicit", "--load-model=identity_fp32",
        "--allow-unauthenticated-model-control=true"))
    try:
        server.wait_models_ready(["identity_fp32"])
        yield server
    finally:
        server.stop()


@pytest.fixture
def http(srv):
    with httpclient.InferenceServerClient(srv.url) as c:
        yield c
        c.update_log_settings({k: v for k, v in INITIAL.items() if k != "log_file"})


@pytest.fixture
def grpc(srv):
    with grpcclient.InferenceServerClient(srv.grpc_url) as c:
        yield c


def lines_with(srv, text: str) -> list[str]:
    return [line for line in srv.log_text().splitlines() if text in line]


def test_http_and_grpc_report_the_settings(http, grpc):
    assert http.get_log_settings() == INITIAL
    settings = grpc.get_log_settings(as_json=True)["settings"]
    assert settings == {"log_file": {"string_param": ""}, "log_info": {"bool_param": True},
                        "log_warning": {"bool_param": True}, "log_error": {"bool_param": True},
                        "log_verbose_level": {"uint32_param": 1}, "log_format": {"string_param": "default"}}


def test_an_update_answers_every_setting_and_both_protocols_see_it(http, grpc):
    changed = http.update_log_settings({"log_warning": False, "log_verbose_level": 3})
    assert changed == {**INITIAL, "log_warning": False, "log_verbose_level": 3}
    settings = grpc.update_log_settings({"log_error": False}, as_json=True)["settings"]
    assert settings["log_warning"] == {"bool_param": False}
    assert settings["log_error"] == {"bool_param": False}
    assert settings["log_verbose_level"] == {"uint32_param": 3}
    assert http.get_log_settings()["log_error"] is False


def test_verbose_lines_follow_log_verbose_level(srv, http, grpc):
    # Level 2 logs one line per HTTP request; level 1 does not.
    http.update_log_settings({"log_verbose_level": 2})
    requests.get(f"{srv.base}/v2/health/live?marker=verbose-on", timeout=10)
    assert len(lines_with(srv, "GET /v2/health/live?marker=verbose-on")) == 1
    grpc.update_log_settings({"log_verbose_level": 1})
    requests.get(f"{srv.base}/v2/health/live?marker=verbose-off", timeout=10)
    assert lines_with(srv, "marker=verbose-off") == []


def test_info_and_error_lines_follow_their_switches(srv, http):
    http.update_log_settings({"log_info": False, "log_error": False})
    http.unload_model("identity_fp32")
    with pytest.raises(InferenceServerException):
        http.load_model("corrupt_model")
    assert lines_with(srv, "model 'identity_fp32' unloaded") == []
    assert lines_with(srv, "model 'corrupt_model'") == []

    http.update_log_settings({"log_info": True, "log_error": True})
    http.load_model("identity_fp32")
    http.unload_model("identity_fp32")
    with pytest.raises(InferenceServerException):
        http.load_model("corrupt_model")
    unloaded = lines_with(srv, "model 'identity_fp32' unloaded")
    failed = lines_with(srv, "model 'corrupt_model'")
    assert len(unloaded) == 1 and unloaded[0].startswith("I"), unloaded
    assert failed and all(line.startswith("E") for line in failed), failed
    http.load_model("identity_fp32")


def test_log_format_changes_the_next_lines(srv, http, grpc):
    http.update_log_settings({"log_verbose_level": 2, "log_format": "ISO8601"})
    requests.get(f"{srv.base}/v2/health/live?marker=iso", timeout=10)
    grpc.update_log_settings({"log_format": "default"})
    requests.get(f"{srv.base}/v2/health/live?marker=default", timeout=10)
    [iso] = lines_with(srv, "marker=iso")
    [default] = lines_with(srv, "marker=default")
    assert ISO8601_LINE.match(iso), iso
    assert DEFAULT_LINE.match(default), default


@pytest.mark.parametrize("settings,words", [
    ({"log_info": 1}, "expect boolean for 'log_info'"),
    ({"log_warning": "false"}, "expect boolean for 'log_warning'"),
    ({"log_verbose_level": -1}, "log_verbose_level"),
    ({"log_verbose_level": "1"}, "log_verbose_level"),
    ({"log_format": "xml"}, "invalid argument for log_format, got: xml"),
    ({"log_verbos_level": 2}, "unknown log setting 'log_verbos_level'"),
])
def test_http_bad_values_are_400_and_change_nothing(http, settings, words):
    with pytest.raises(InferenceServerException) as e:
        http.update_log_settings({"log_info": False, **settings})
    assert e.value.status() == "400", e.value
    assert words in e.value.message()
    assert http.get_log_settings() == INITIAL


def test_log_file_cannot_change_at_run_time(http, grpc):
    with pytest.raises(InferenceServerException) as e:
        http.update_log_settings({"log_file": "other.log"})
    assert "log file location can not be updated through network protocol" in e.value.message()
    assert e.value.status() == "501"
    with pytest.raises(InferenceServerException) as e:
        grpc.update_log_settings({"log_file": "other.log"})
    assert "log file location can not be updated through network protocol" in e.value.message()
    assert e.value.status() == "StatusCode.UNIMPLEMENTED"


@pytest.mark.parametrize("key,field,value", [
    ("log_info", "string_param", "yes"),
    ("log_verbose_level", "bool_param", True),
    ("log_format", "uint32_param", 1),
])
def test_grpc_wrong_types_are_invalid_argument(srv, http, key, field, value):
    # tritonclient types each setting itself; a raw stub sends the wrong one.
    request = service_pb2.LogSettingsRequest()
    setattr(request.settings[key], field, value)
    with grpc_module.insecure_channel(srv.grpc_url) as channel:
        with pytest.raises(grpc_module.RpcError) as e:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).LogSettings(request, timeout=10)
    assert e.value.code() == grpc_module.StatusCode.INVALID_ARGUMENT
    assert f"for '{key}'" in e.value.details()
    assert http.get_log_settings() == INITIAL


def test_log_file_flag_and_restricted_group(repo, tmp_path):
    # The server's standard output goes to the same file (empty: every line
    # is spdlog's, appended), so that the harness reads the log there.
    log_file = tmp_path / "server.log"
    server = Server(repo, log_file, extra_args=(
        f"--log-file={log_file}", "--log-format=ISO8601", "--log-warning=false",
        "--http-restricted-api=logging:admin-key=secret",
        "--grpc-restricted-protocol=logging:admin-key=secret")).start()
    try:
        server.wait_live()
        with httpclient.InferenceServerClient(server.url) as http, \
                grpcclient.InferenceServerClient(server.grpc_url) as grpc:
            with pytest.raises(InferenceServerException) as e:
                http.get_log_settings()
            assert e.value.status() == "401" and "admin-key" in e.value.message()
            with pytest.raises(InferenceServerException) as e:
                grpc.get_log_settings()
            assert e.value.status() == "StatusCode.UNAUTHENTICATED"
            settings = http.get_log_settings(headers={"admin-key": "secret"})
            assert settings == {**INITIAL, "log_file": str(log_file), "log_warning": False,
                                "log_format": "ISO8601"}
            grpc_settings = grpc.get_log_settings(
                headers={"triton-grpc-protocol-admin-key": "secret"}, as_json=True)["settings"]
            assert grpc_settings["log_file"] == {"string_param": str(log_file)}
            http.update_log_settings({"log_verbose_level": 2}, headers={"admin-key": "secret"})
            requests.get(f"{server.base}/v2/health/live?marker=in-file", timeout=10)
        lines = log_file.read_text().splitlines()
        assert any("ortserve " in line and ISO8601_LINE.match(line) for line in lines[:3]), lines[:3]
        marked = [line for line in lines if "marker=in-file" in line]
        assert len(marked) == 1 and ISO8601_LINE.match(marked[0]), marked
    finally:
        server.stop()
