"""Health, server/model metadata, model config, per-model readiness, stats."""
from __future__ import annotations

import numpy as np
import pytest

from harness import infer_inputs

pytestmark = pytest.mark.timeout(180)

REQUIRED_EXTENSIONS = {"binary_tensor_data", "model_configuration", "model_repository",
                       "sequence", "statistics"}


def test_health_live(server):
    assert server.get("/v2/health/live").status_code == 200


def test_health_ready_when_not_strict(server):
    # The main repository has models that fail to load; not strict -> ready.
    assert server.get("/v2/health/ready").status_code == 200


def test_client_health(client):
    assert client.is_server_live()
    assert client.is_server_ready()


def test_server_metadata(server):
    r = server.get("/v2")
    assert r.status_code == 200
    meta = r.json()
    assert isinstance(meta["name"], str) and meta["name"]
    assert isinstance(meta["version"], str) and meta["version"]
    assert isinstance(meta["extensions"], list)
    missing = REQUIRED_EXTENSIONS - set(meta["extensions"])
    assert not missing, f"extensions lacks {missing}: {meta['extensions']}"


def test_model_metadata_batchable(demo_server):
    r = demo_server.get("/v2/models/mlp_classifier")
    assert r.status_code == 200
    meta = r.json()
    assert meta["name"] == "mlp_classifier"
    assert "1" in meta["versions"]
    assert meta["platform"] == "onnxruntime_onnx"
    assert meta["inputs"] == [{"name": "features", "datatype": "FP32", "shape": [-1, 16]}]
    outputs = {o["name"]: o for o in meta["outputs"]}
    assert outputs["probabilities"]["datatype"] == "FP32"
    assert outputs["probabilities"]["shape"] == [-1, 4]
    assert outputs["label"]["datatype"] == "INT64"
    assert outputs["label"]["shape"] == [-1, 1]


def test_model_metadata_versioned_path(demo_server):
    r = demo_server.get("/v2/models/image_normalize/versions/1")
    assert r.status_code == 200
    meta = r.json()
    assert meta["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [3, 8, 8]}]
    assert meta["outputs"] == [{"name": "normalized", "datatype": "FP32", "shape": [3, 8, 8]}]


def test_model_metadata_bytes(demo_server):
    meta = demo_server.get("/v2/models/greeting").json()
    assert meta["inputs"] == [{"name": "name", "datatype": "BYTES", "shape": [-1, -1]}]


def test_model_config_json(demo_server):
    r = demo_server.get("/v2/models/mlp_classifier/config")
    assert r.status_code == 200
    config = r.json()
    assert config["name"] == "mlp_classifier"
    assert int(config["max_batch_size"]) == 32
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in config["input"]] == \
        [("features", "TYPE_FP32", [16])]
    assert {o["name"]: o["data_type"] for o in config["output"]} == \
        {"probabilities": "TYPE_FP32", "label": "TYPE_INT64"}
    batching = config["dynamic_batching"]
    assert [int(s) for s in batching["preferred_batch_size"]] == [8, 16, 32]
    assert int(batching["max_queue_delay_microseconds"]) == 500


def test_model_config_non_batchable(demo_server):
    config = demo_server.get("/v2/models/image_normalize/config").json()
    assert int(config.get("max_batch_size", 0)) == 0
    assert [int(d) for d in config["input"][0]["dims"]] == [3, 8, 8]


def test_model_config_via_client(demo_client):
    config = demo_client.get_model_config("mlp_classifier")
    assert int(config["max_batch_size"]) == 32


@pytest.mark.parametrize("model", ["mlp_classifier", "image_normalize", "linear_autoconfig",
                                   "greeting"])
def test_model_ready(demo_server, demo_client, model):
    assert demo_server.get(f"/v2/models/{model}/ready").status_code == 200
    assert demo_server.get(f"/v2/models/{model}/versions/1/ready").status_code == 200
    assert demo_client.is_model_ready(model)


def test_unknown_model_not_ready(server, client):
    r = server.get("/v2/models/does_not_exist/ready")
    assert r.status_code == 404
    assert r.json()["error"] == "Request for unknown model: 'does_not_exist' is not found"
    assert not client.is_model_ready("does_not_exist")


def test_failed_model_not_ready(server):
    r = server.get("/v2/models/corrupt_model/ready")
    assert r.status_code == 400
    assert r.json()["error"].startswith("Request for unknown model: 'corrupt_model' has no available versions: ")


def test_stats_json_shape(demo_server, demo_client):
    x = np.ones((2, 16), np.float32)
    demo_client.infer("image_normalize", infer_inputs(
        {"image": ("FP32", np.zeros((3, 8, 8), np.float32))}))
    demo_client.infer("mlp_classifier", infer_inputs({"features": ("FP32", x)}))
    stats = demo_server.model_stats("mlp_classifier")
    assert stats["name"] == "mlp_classifier"
    assert stats["version"] == "1"
    assert int(stats["inference_count"]) >= 2
    assert 1 <= int(stats["execution_count"]) <= int(stats["inference_count"])
    inference = stats["inference_stats"]
    for key in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output"):
        assert set(inference[key]) >= {"count", "ns"}, key
    assert int(inference["success"]["count"]) >= 1
    assert isinstance(stats["batch_stats"], list)
    for batch in stats["batch_stats"]:
        assert int(batch["batch_size"]) >= 1
        assert set(batch) >= {"batch_size", "compute_input", "compute_infer", "compute_output"}


def test_stats_all_models(demo_server):
    r = demo_server.get("/v2/models/stats")
    assert r.status_code == 200
    names = {s["name"] for s in r.json()["model_stats"]}
    assert {"mlp_classifier", "image_normalize", "linear_autoconfig", "greeting"} <= names


def test_stats_via_client(demo_client):
    stats = demo_client.get_inference_statistics("mlp_classifier")
    assert stats["model_stats"][0]["name"] == "mlp_classifier"
