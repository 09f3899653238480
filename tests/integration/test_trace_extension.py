"""Triton's trace extension (GET/POST /v2[/models/<m>]/trace/setting, gRPC
TraceSetting) through tritonclient, driving the OTLP tracing at run time:
trace_rate and trace_count decide which requests are traced, OFF stops it, a
model's setting overrides the global one and clearing it falls back, and the
spans the test's collector receives follow.

Absence is checked without waiting on time: after the requests under test a
sentinel request with a sampled traceparent (always traced while the level is
not OFF) is sent and awaited; spans leave in the order requests are
answered, so once the sentinel's span is in, every earlier one is too."""
from __future__ import annotations

import secrets

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from harness import make_test_models, start_server
from test_tracing import KIND_SERVER, attributes, new_traceparent, request_span_with_id

pytestmark = pytest.mark.timeout(300)

MODEL, OTHER = "add_sub_fp32", "identity_fp32"
CLEAR = {"trace_level": None, "trace_rate": None, "trace_count": None, "log_frequency": None}


@pytest.fixture(scope="module")
def tsrv(tmp_path_factory, collector, log_dir):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("trace_ext_models"), [MODEL, OTHER])
    srv = start_server(repo, log_dir, "trace_extension", extra_args=(
        "--trace-otlp-endpoint", collector.endpoint, "--trace-sample-rate", "1"))
    try:
        srv.wait_models_ready([MODEL, OTHER])
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def http(tsrv):
    with httpclient.InferenceServerClient(tsrv.url, network_timeout=60) as c:
        yield c
        for model in (MODEL, OTHER):
            c.update_trace_settings(model_name=model, settings=CLEAR)
        c.update_trace_settings(settings=CLEAR)


@pytest.fixture
def grpc(tsrv):
    with grpcclient.InferenceServerClient(tsrv.grpc_url) as c:
        yield c


def initial(collector) -> dict:
    return {"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "trace_count": "-1",
            "trace_mode": "opentelemetry", "url": collector.endpoint}


def infer(client, model: str, request_id: str, headers=None):
    module = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    x = np.ones((1, 16) if model == MODEL else (1, 4), np.float32)
    inputs = []
    for name in ("INPUT0", "INPUT1") if model == MODEL else ("INPUT0",):
        inp = module.InferInput(name, list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        inputs.append(inp)
    client.infer(model, inputs, request_id=request_id, headers=headers)


def traced_after_sentinel(client, collector, prefix: str, model: str = OTHER) -> set[str]:
    """The request ids starting with `prefix` that were traced, once a
    sentinel sent after them (sampled traceparent) has been exported."""
    header, _, _ = new_traceparent()
    sentinel = f"sentinel-{secrets.token_hex(4)}"
    infer(client, model, sentinel, headers={"traceparent": header})
    collector.wait_for(f"the sentinel {sentinel}", request_span_with_id(sentinel))
    return {attributes(s).get("ortserve.request_id", "") for s in collector.spans()
            if s["kind"] == KIND_SERVER and attributes(s).get("ortserve.request_id", "").startswith(prefix)}


def test_settings_as_triton_reports_them_in_opentelemetry_mode(http, grpc, collector):
    assert http.get_trace_settings() == initial(collector)
    assert http.get_trace_settings(model_name=MODEL) == initial(collector)
    settings = grpc.get_trace_settings(model_name=MODEL, as_json=True)["settings"]
    assert {k: v["value"] for k, v in settings.items()} == \
        {k: v if isinstance(v, list) else [v] for k, v in initial(collector).items()}


def test_trace_rate_traces_one_of_every_n_requests(http, grpc, collector):
    assert http.update_trace_settings(settings={"trace_rate": "3"})["trace_rate"] == "3"
    for i in range(9):  # HTTP and gRPC requests count alike
        infer(http if i % 2 else grpc, MODEL, f"rate-{i}")
    assert traced_after_sentinel(http, collector, "rate-") == {"rate-2", "rate-5", "rate-8"}


def test_trace_count_stops_after_n_traces(http, collector):
    settings = http.update_trace_settings(settings={"trace_count": "2"})
    assert settings["trace_count"] == "2"
    for i in range(5):
        infer(http, MODEL, f"count-{i}")
    assert http.get_trace_settings()["trace_count"] == "0"
    # The count stops the rate only: the sentinel's traceparent is still traced.
    assert traced_after_sentinel(http, collector, "count-") == {"count-0", "count-1"}


def test_off_for_one_model_and_clearing_falls_back_to_global(http, grpc, collector):
    model_settings = grpc.update_trace_settings(model_name=MODEL, settings={"trace_level": ["OFF"]},
                                                as_json=True)["settings"]
    assert model_settings["trace_level"]["value"] == ["OFF"]
    assert http.get_trace_settings()["trace_level"] == ["TIMESTAMPS"]  # the global one is untouched
    header, _, _ = new_traceparent()
    infer(http, MODEL, "off-http", headers={"traceparent": header})  # OFF: not even a traceparent
    infer(grpc, MODEL, "off-grpc")
    infer(http, OTHER, "off-other")  # follows the global setting
    assert traced_after_sentinel(http, collector, "off-") == {"off-other"}

    cleared = http.update_trace_settings(model_name=MODEL, settings={"trace_level": None})
    assert cleared == initial(collector)
    infer(grpc, MODEL, "on-again")
    assert traced_after_sentinel(http, collector, "on-again") == {"on-again"}


def test_global_off_stops_every_trace(http, collector):
    http.update_trace_settings(settings={"trace_level": ["OFF"]})
    header, _, _ = new_traceparent()
    infer(http, MODEL, "global-off-0")
    infer(http, OTHER, "global-off-1", headers={"traceparent": header})
    http.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"]})
    assert traced_after_sentinel(http, collector, "global-off-") == set()


def test_model_fields_follow_the_global_ones_they_do_not_set(http, grpc, collector):
    # Triton's L0_trace clear-settings sequence, in OpenTelemetry mode.
    http.update_trace_settings(model_name=MODEL, settings={"trace_rate": "12", "log_frequency": "34"})
    http.update_trace_settings(settings={"trace_rate": "56", "trace_count": "78", "trace_level": ["OFF"]})
    off = {**initial(collector), "trace_level": ["OFF"]}
    assert http.get_trace_settings(model_name=MODEL) == {**off, "trace_rate": "12", "trace_count": "78"}
    assert http.update_trace_settings(settings={"trace_rate": None, "trace_count": None}) == off
    assert http.get_trace_settings(model_name=MODEL) == {**off, "trace_rate": "12"}
    assert http.update_trace_settings(model_name=MODEL, settings={"trace_rate": None, "trace_level": None}) == off
    assert http.get_trace_settings() == off
    assert http.get_trace_settings(model_name=OTHER) == off
    # The model still has log_frequency of its own; clearing it removes the setting.
    http.update_trace_settings(model_name=MODEL, settings={"log_frequency": None})
    http.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "2"})
    assert http.get_trace_settings(model_name=MODEL)["trace_rate"] == "2"


@pytest.mark.parametrize("settings,status,words", [
    ({"trace_file": "trace.json"}, "501", "trace file location can not be updated through network protocol"),
    ({"trace_rate": "abc"}, "400", "Unable to parse 'trace_rate', got: abc"),
    ({"trace_rate": "-1"}, "400", "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ]"),
    ({"trace_count": "-5"}, "400", "Unable to parse 'trace_count'. Expecting value >= -1"),
    ({"trace_level": ["OFF", "TIMESTAMPS"]}, "400", "Expect only one trace level 'OFF' is specified"),
    ({"trace_level": ["SPANS"]}, "400", "unknown trace level 'SPANS'"),
    ({"trace_mode": "triton"}, "400", "unknown trace setting 'trace_mode'"),
])
def test_bad_settings_are_refused_and_change_nothing(http, grpc, collector, settings, status, words):
    with pytest.raises(InferenceServerException) as e:
        http.update_trace_settings(settings={"trace_rate": "7", **settings})
    assert (e.value.status(), words in e.value.message()) == (status, True), e.value
    with pytest.raises(InferenceServerException) as e:
        grpc.update_trace_settings(settings={"trace_rate": "7", **settings})
    assert words in e.value.message()
    assert e.value.status() == ("StatusCode.UNIMPLEMENTED" if status == "501" else "StatusCode.INVALID_ARGUMENT")
    assert http.get_trace_settings() == initial(collector)


def test_unknown_model_and_extra_grpc_values(http, grpc):
    for client in (http, grpc):
        with pytest.raises(InferenceServerException) as e:
            client.get_trace_settings(model_name="does-not-exist")
        assert "Request for unknown model : does-not-exist" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        grpc.update_trace_settings(settings={"trace_rate": ["1", "2"]})
    assert "expect only 1 value for 'trace_rate'" in e.value.message()


def test_without_a_collector_tracing_stays_off(launch, tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "models", [MODEL])
    srv = launch(repo, extra_args=("--http-restricted-api=trace:admin-key=secret",))
    srv.wait_models_ready([MODEL])
    with httpclient.InferenceServerClient(srv.url) as http:
        with pytest.raises(InferenceServerException) as e:
            http.get_trace_settings(model_name=MODEL)
        assert e.value.status() == "401"
        auth = {"admin-key": "secret"}
        settings = http.get_trace_settings(headers=auth)
        assert settings == {"trace_level": ["OFF"], "trace_rate": "100", "trace_count": "-1",
                            "trace_mode": "opentelemetry"}
        with pytest.raises(InferenceServerException) as e:
            http.update_trace_settings(model_name=MODEL, settings={"trace_level": ["TIMESTAMPS"]}, headers=auth)
        assert e.value.status() == "400" and "--trace-otlp-endpoint" in e.value.message()
        assert http.update_trace_settings(settings={"trace_rate": "5"}, headers=auth)["trace_rate"] == "5"
    with grpcclient.InferenceServerClient(srv.grpc_url) as grpc:  # gRPC is not restricted here
        assert grpc.get_trace_settings(as_json=True)["settings"]["trace_rate"]["value"] == ["5"]
