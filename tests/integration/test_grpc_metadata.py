"""The gRPC front end's control plane: server and model liveness/readiness,
metadata, config, statistics, the repository index and the grpc.health.v1
check."""
from __future__ import annotations

import grpc
import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from grpc_helpers import GRPC_TIMEOUT_S
from harness import grpc_inputs, make_test_models

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------ metadata, config, stats, index

def test_server_live_ready(grpc_client):
    assert grpc_client.is_server_live()
    assert grpc_client.is_server_ready()  # --strict-readiness=false


def test_server_metadata(grpc_client):
    meta = grpc_client.get_server_metadata()
    assert meta.name and meta.version
    missing = {"binary_tensor_data", "model_configuration", "statistics"} - set(meta.extensions)
    assert not missing, (missing, list(meta.extensions))


def test_model_metadata(demo_grpc_client):
    meta = demo_grpc_client.get_model_metadata("mlp_classifier", as_json=True)
    assert meta["name"] == "mlp_classifier"
    assert "1" in meta["versions"]
    assert meta["platform"] == "onnxruntime_onnx"
    assert [(i["name"], i["datatype"], [int(d) for d in i["shape"]]) for i in meta["inputs"]] == \
        [("features", "FP32", [-1, 16])]
    outputs = {o["name"]: (o["datatype"], [int(d) for d in o["shape"]]) for o in meta["outputs"]}
    assert outputs == {"probabilities": ("FP32", [-1, 4]), "label": ("INT64", [-1, 1])}
    meta = demo_grpc_client.get_model_metadata("image_normalize", model_version="1", as_json=True)
    assert [int(d) for d in meta["inputs"][0]["shape"]] == [3, 8, 8]
    meta = demo_grpc_client.get_model_metadata("greeting", as_json=True)
    assert meta["inputs"][0]["datatype"] == "BYTES"


def test_model_metadata_unknown_model(grpc_client):
    with pytest.raises(InferenceServerException) as info:
        grpc_client.get_model_metadata("does_not_exist")
    assert info.value.status() == "StatusCode.NOT_FOUND"
    assert info.value.message() == "Request for unknown model: 'does_not_exist' is not found"


def test_model_config(demo_grpc_client):
    config = demo_grpc_client.get_model_config("mlp_classifier", as_json=True)["config"]
    assert config["name"] == "mlp_classifier"
    assert int(config["max_batch_size"]) == 32
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in config["input"]] == \
        [("features", "TYPE_FP32", [16])]
    assert {o["name"]: o["data_type"] for o in config["output"]} == \
        {"probabilities": "TYPE_FP32", "label": "TYPE_INT64"}
    assert [int(s) for s in config["dynamic_batching"]["preferred_batch_size"]] == [8, 16, 32]
    config = demo_grpc_client.get_model_config("image_normalize", as_json=True)["config"]
    assert int(config.get("max_batch_size", 0)) == 0
    assert [int(d) for d in config["input"][0]["dims"]] == [3, 8, 8]
    config = demo_grpc_client.get_model_config("linear_autoconfig", as_json=True)["config"]
    assert int(config["max_batch_size"]) > 0  # auto-completed


def test_model_ready(grpc_client, demo_grpc_client):
    for model in ("mlp_classifier", "image_normalize", "linear_autoconfig", "greeting"):
        assert demo_grpc_client.is_model_ready(model), model
        assert demo_grpc_client.is_model_ready(model, "1"), model
    assert grpc_client.is_model_ready("versioned_add", "3")
    assert not grpc_client.is_model_ready("corrupt_model")
    # As Triton (L0_server_status): any version of a model it knows answers
    # ready or not -- version 1 is outside the policy, 7 is not on disk; a
    # model name it does not know is an error.
    assert not grpc_client.is_model_ready("versioned_add", "1")
    assert not grpc_client.is_model_ready("versioned_add", "7")
    for model, version in (("does_not_exist", ""), ("does_not_exist", "1")):
        with pytest.raises(InferenceServerException) as info:
            grpc_client.is_model_ready(model, version)
        assert info.value.status() == "StatusCode.NOT_FOUND"
        assert info.value.message() == "Request for unknown model: 'does_not_exist' is not found"


def test_repository_index(grpc_client):
    index = grpc_client.get_model_repository_index(as_json=True)
    models = {}
    for m in index["models"]:
        models.setdefault(m["name"], []).append(m)
    assert set(make_test_models.MODELS_THAT_SERVE) <= set(models), set(models)
    for name in make_test_models.MODELS_THAT_SERVE:
        assert any(m.get("state") == "READY" for m in models[name]), models[name]
    for name in make_test_models.MODELS_THAT_FAIL:
        assert name in models, name
        assert all(m.get("state") != "READY" for m in models[name]), models[name]
        assert any(m.get("reason") for m in models[name]), models[name]


def test_statistics_counts_increase(grpc_client, server):
    model = "add_sub_int32"
    def counts():
        s = grpc_client.get_inference_statistics(model, as_json=True)["model_stats"][0]
        assert s["name"] == model
        return (int(s.get("inference_count", 0)), int(s.get("execution_count", 0)),
                int(s["inference_stats"].get("success", {}).get("count", 0)))
    before = counts()
    a = np.arange(48, dtype=np.int32).reshape(3, 16)
    for _ in range(2):
        grpc_client.infer(model, grpc_inputs({"INPUT0": ("INT32", a), "INPUT1": ("INT32", a)}),
                          client_timeout=GRPC_TIMEOUT_S)
    after = counts()
    assert after[0] - before[0] == 6  # batch 3, twice
    assert 1 <= after[1] - before[1] <= 2
    assert after[2] - before[2] == 2
    # the same numbers over HTTP
    http = server.model_stats(model)
    assert int(http["inference_count"]) == after[0]


def test_statistics_all_models(demo_grpc_client):
    stats = demo_grpc_client.get_inference_statistics(as_json=True)
    names = {s["name"] for s in stats["model_stats"]}
    assert {"mlp_classifier", "image_normalize", "linear_autoconfig", "greeting"} <= names


# ------------------------------------------------------------------ grpc.health.v1

def _health_check(url: str, service: str = "") -> tuple[int, bytes]:
    """grpc.health.v1.Health/Check by hand: HealthCheckRequest{service=1};
    HealthCheckResponse{status=1 varint}, SERVING == 1."""
    request = b"" if not service else b"\x0a" + bytes([len(service)]) + service.encode()
    with grpc.insecure_channel(url) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b, response_deserializer=lambda b: b)
        response = check(request, timeout=GRPC_TIMEOUT_S)
    assert len(response) >= 2 and response[0] == 0x08, response
    return response[1], response


@pytest.mark.parametrize("service", ["", "inference.GRPCInferenceService"])
def test_health_check_serving(server, service):
    status, raw = _health_check(server.grpc_url, service)
    assert status == 1, raw  # SERVING


def test_health_check_unknown_service(server):
    with pytest.raises(grpc.RpcError) as info:
        _health_check(server.grpc_url, "no.such.Service")
    assert info.value.code() == grpc.StatusCode.NOT_FOUND, info.value
