"""HTTP and gRPC answer the metadata and statistics endpoints alike: the same
server metadata (extensions included), the same model metadata (versions,
platform, tensors), the same model config, the same statistics (models,
counters, batch sizes) and the same errors. Both front ends render one
description the server builds once (src/server/common/); these tests compare
the two answers field by field, on a server of their own so that no other
test's requests move the counters between the two reads."""
from __future__ import annotations

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format
from tritonclient.utils import InferenceServerException

from harness import make_test_models, start_server

pytestmark = pytest.mark.timeout(180)

SERVING = ["add_sub_fp32", "identity_bytes", "identity_3d_fp32", "versioned_add", "autocomplete_linear",
           "backend_only"]
FAILING = "corrupt_model"
# An unknown model, a version the policy does not serve, a model that failed to load.
ERROR_CASES = [("does_not_exist", ""), ("versioned_add", "1"), (FAILING, "")]


def _write_backend_only(repo) -> None:
    """add_sub_fp32 whose config names only `backend: "onnxruntime"` (no
    platform): Triton reports platform onnxruntime_onnx for it."""
    config = make_test_models.add_sub_config("backend_only", "FP32").replace(
        'platform: "onnxruntime_onnx"', 'backend: "onnxruntime"')
    assert "platform" not in config
    make_test_models.demo.write_model(repo, "backend_only", make_test_models.build_add_sub("FP32"), config)


@pytest.fixture(scope="module")
def parity_server(tmp_path_factory, log_dir):
    repo = make_test_models.build_test_repository(
        tmp_path_factory.mktemp("parity_models"), [m for m in SERVING if m != "backend_only"] + [FAILING])
    _write_backend_only(repo)
    srv = start_server(repo, log_dir, "parity")
    try:
        srv.wait_models_ready(SERVING)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def clients(parity_server):
    with httpclient.InferenceServerClient(parity_server.url, network_timeout=60) as http, \
            grpcclient.InferenceServerClient(parity_server.grpc_url) as grpc_client:
        yield http, grpc_client


def _same(http_value, grpc_value, path="$"):
    """Equal JSON, except that protobuf's JSON writes 64-bit integers as
    strings where HTTP writes numbers."""
    if isinstance(http_value, dict):
        assert isinstance(grpc_value, dict), (path, http_value, grpc_value)
        assert set(http_value) == set(grpc_value), (path, sorted(http_value), sorted(grpc_value))
        for key in http_value:
            _same(http_value[key], grpc_value[key], f"{path}.{key}")
    elif isinstance(http_value, list):
        assert isinstance(grpc_value, list) and len(http_value) == len(grpc_value), (path, http_value, grpc_value)
        for i, (h, g) in enumerate(zip(http_value, grpc_value)):
            _same(h, g, f"{path}[{i}]")
    elif isinstance(http_value, bool) or not isinstance(http_value, int):
        assert http_value == grpc_value, (path, http_value, grpc_value)
    else:
        assert http_value == (int(grpc_value) if isinstance(grpc_value, str) else grpc_value), \
            (path, http_value, grpc_value)


def _without_defaults(value):
    """JSON without the zero / empty values that protobuf's JSON leaves out."""
    if isinstance(value, dict):
        kept = {k: _without_defaults(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (0, "", [], {}, False)}
    if isinstance(value, list):
        return [_without_defaults(v) for v in value]
    return value


def _grpc_json(message, **options) -> dict:
    """The message as tritonclient's as_json gives it (proto field names)."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True, **options)


def _http_error(parity_server, path: str) -> tuple[int, str]:
    r = parity_server.get(path)
    assert r.status_code != 200, r.text
    return r.status_code, r.json()["error"]


def _grpc_error(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value.status(), info.value.message()


def _infer_some(http, grpc_client):
    """Requests over both protocols, of two batch sizes, so that statistics
    have counters and batch entries to compare."""
    for batch in (1, 3):
        a = np.arange(16 * batch, dtype=np.float32).reshape(batch, 16)
        http_inputs = [httpclient.InferInput(n, [batch, 16], "FP32") for n in ("INPUT0", "INPUT1")]
        grpc_inputs = [grpcclient.InferInput(n, [batch, 16], "FP32") for n in ("INPUT0", "INPUT1")]
        for inp in http_inputs + grpc_inputs:
            inp.set_data_from_numpy(a)
        http.infer("add_sub_fp32", http_inputs)
        grpc_client.infer("add_sub_fp32", grpc_inputs)
        http.infer("backend_only", http_inputs)
    x = np.ones((2, 4), np.float32)
    for version in ("2", "3"):
        inp = grpcclient.InferInput("INPUT0", [2, 4], "FP32")
        inp.set_data_from_numpy(x)
        grpc_client.infer("versioned_add", [inp], model_version=version)
    # A failed request counts too (inference_stats.fail).
    with pytest.raises(InferenceServerException):
        http.infer("add_sub_fp32", http_inputs[:1])


# ---------------------------------------------------------------- server metadata

def test_server_metadata_agrees(parity_server, clients):
    http, grpc_client = clients
    http_meta = parity_server.get("/v2").json()
    grpc_meta = _grpc_json(grpc_client.get_server_metadata())
    _same(http_meta, grpc_meta)
    assert http_meta["name"] == "ortserve"
    # Only what is implemented, in Triton's order.
    assert http_meta["extensions"] == ["classification", "sequence", "model_repository", "schedule_policy",
                                       "model_configuration", "system_shared_memory",
                                       "binary_tensor_data", "parameters", "statistics", "trace", "logging"]


# ---------------------------------------------------------------- model metadata

@pytest.mark.parametrize("model,version", [(m, "") for m in SERVING] + [("versioned_add", "2"),
                                                                         ("versioned_add", "3")])
def test_model_metadata_agrees(parity_server, clients, model, version):
    _, grpc_client = clients
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "")
    r = parity_server.get(path)
    assert r.status_code == 200, r.text
    http_meta = r.json()
    grpc_meta = _grpc_json(grpc_client.get_model_metadata(model, version))
    _same(http_meta, grpc_meta)


def test_model_metadata_versions_and_platform(parity_server, clients):
    """The answers Triton gives: every ready version, or the one asked for;
    platform onnxruntime_onnx for a config that names only the backend."""
    _, grpc_client = clients
    for get in (lambda m, v="": parity_server.get(f"/v2/models/{m}" + (f"/versions/{v}" if v else "")).json(),
                lambda m, v="": _grpc_json(grpc_client.get_model_metadata(m, v))):
        assert sorted(get("versioned_add")["versions"]) == ["2", "3"]  # latest { num_versions: 2 }
        assert get("versioned_add", "2")["versions"] == ["2"]
        assert get("backend_only")["platform"] == "onnxruntime_onnx"
        assert get("autocomplete_linear")["platform"] == "onnxruntime_onnx"


@pytest.mark.parametrize("model,version", ERROR_CASES)
def test_model_metadata_errors_agree(parity_server, clients, model, version):
    _, grpc_client = clients
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "")
    status, http_message = _http_error(parity_server, path)
    code, grpc_message = _grpc_error(lambda: grpc_client.get_model_metadata(model, version))
    assert http_message == grpc_message
    assert http_message.startswith(f"Request for unknown model: '{model}' ")
    assert (status, code) in ((404, "StatusCode.NOT_FOUND"), (503, "StatusCode.UNAVAILABLE"))


# ---------------------------------------------------------------- model config

@pytest.mark.parametrize("model", SERVING)
def test_model_config_agrees(parity_server, clients, model):
    _, grpc_client = clients
    r = parity_server.get(f"/v2/models/{model}/config")
    assert r.status_code == 200, r.text
    # HTTP prints default values, as Triton does.
    grpc_config = _grpc_json(grpc_client.get_model_config(model).config, including_default_value_fields=True)
    _same(r.json(), grpc_config)


# ---------------------------------------------------------------- statistics

def _stats_paths():
    yield "", ""
    for model in SERVING:
        yield model, ""
    yield "versioned_add", "2"
    yield "versioned_add", "3"


def test_statistics_agree(parity_server, clients):
    http, grpc_client = clients
    _infer_some(http, grpc_client)
    for model, version in _stats_paths():
        path = "/v2/models" + (f"/{model}" if model else "") + (f"/versions/{version}" if version else "") + "/stats"
        r = parity_server.get(path)
        assert r.status_code == 200, (path, r.text)
        grpc_stats = _grpc_json(grpc_client.get_inference_statistics(model, version))
        _same(_without_defaults(r.json()), _without_defaults(grpc_stats), path)
    # What was compared is not empty: the requests above are counted.
    add_sub = parity_server.get("/v2/models/add_sub_fp32/stats").json()["model_stats"][0]
    assert add_sub["inference_count"] == 8  # batches 1 and 3, over HTTP and gRPC
    assert sorted(b["batch_size"] for b in add_sub["batch_stats"]) == [1, 3]
    assert add_sub["inference_stats"]["fail"]["count"] == 1


@pytest.mark.parametrize("model,version", ERROR_CASES)
def test_statistics_errors_agree(parity_server, clients, model, version):
    _, grpc_client = clients
    path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/stats"
    status, http_message = _http_error(parity_server, path)
    code, grpc_message = _grpc_error(lambda: grpc_client.get_inference_statistics(model, version))
    assert http_message == grpc_message
    if version:  # a version of a model it knows: Triton's words, then GetModel's
        assert http_message.startswith(f"requested model version is not available for model '{model}' "
                                       f"(Request for unknown model: '{model}' version {version} is not found")
        assert (status, code) == (400, "StatusCode.INVALID_ARGUMENT")
        return
    assert http_message.startswith(f"Request for unknown model: '{model}' ")
    assert (status, code) in ((404, "StatusCode.NOT_FOUND"), (503, "StatusCode.UNAVAILABLE"))


# ---------------------------------------------------------------- config, infer and ready errors

def _versioned(model: str, version: str) -> str:
    return f"/v2/models/{model}" + (f"/versions/{version}" if version else "")


@pytest.mark.parametrize("model,version", ERROR_CASES)
def test_model_config_errors_agree(parity_server, clients, model, version):
    _, grpc_client = clients
    status, http_message = _http_error(parity_server, _versioned(model, version) + "/config")
    code, grpc_message = _grpc_error(lambda: grpc_client.get_model_config(model, version))
    assert http_message == grpc_message
    assert http_message.startswith(f"Request for unknown model: '{model}' ")
    assert (status, code) in ((404, "StatusCode.NOT_FOUND"), (503, "StatusCode.UNAVAILABLE"))


@pytest.mark.parametrize("model,version", ERROR_CASES)
def test_infer_errors_agree(parity_server, clients, model, version):
    _, grpc_client = clients
    x = np.zeros((1, 4), np.float32)
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": x.ravel().tolist()}]}
    r = parity_server.infer_raw(model, body, version=version or None)
    inp = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(x)
    code, grpc_message = _grpc_error(lambda: grpc_client.infer(model, [inp], model_version=version))
    assert r.json()["error"] == grpc_message
    assert grpc_message.startswith(f"Request for unknown model: '{model}' ")
    assert (r.status_code, code) in ((404, "StatusCode.NOT_FOUND"), (503, "StatusCode.UNAVAILABLE"))


@pytest.mark.parametrize("model,version", [("does_not_exist", ""), ("does_not_exist", "1")])
def test_model_ready_of_an_unknown_model_is_an_error_on_both(parity_server, clients, model, version):
    _, grpc_client = clients
    status, http_message = _http_error(parity_server, _versioned(model, version) + "/ready")
    code, grpc_message = _grpc_error(lambda: grpc_client.is_model_ready(model, version))
    assert http_message == grpc_message
    assert http_message.startswith(f"Request for unknown model: '{model}' ")
    assert (status, code) == (404, "StatusCode.NOT_FOUND")


def test_model_ready_of_a_version_outside_the_policy_is_not_ready_on_both(parity_server, clients):
    """As Triton's L0_server_status: gRPC answers ready false (OK), HTTP 400."""
    http, grpc_client = clients
    status, http_message = _http_error(parity_server, "/v2/models/versioned_add/versions/1/ready")
    assert status == 400
    assert http_message == "Request for unknown model: 'versioned_add' version 1 is not found"
    assert not http.is_model_ready("versioned_add", "1")
    assert grpc_client.is_model_ready("versioned_add", "1") is False


def test_model_ready_of_a_failed_model_is_not_ready_on_both(parity_server, clients):
    http, grpc_client = clients
    status, http_message = _http_error(parity_server, f"/v2/models/{FAILING}/ready")
    assert status == 400
    assert http_message.startswith(f"Request for unknown model: '{FAILING}' has no available versions: ")
    assert not http.is_model_ready(FAILING)
    assert not grpc_client.is_model_ready(FAILING)
