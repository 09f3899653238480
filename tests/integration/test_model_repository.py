"""Repository behaviour: failed models are UNAVAILABLE with reasons while the
others serve; --strict-readiness; auto-complete; unsupported config fields."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness import assert_matches, infer_inputs, make_test_models, model_file

pytestmark = pytest.mark.timeout(240)

# Failed model -> regex its reason must match (names the problem).
FAILURE_REASONS = {
    "corrupt_model": r"onnx|protobuf|pars|load|invalid|corrupt",
    "malformed_config": r"\b\d+:\d+\b",        # line:column of the syntax error
    "bad_input_name": r"NOPE",
    "no_version": r"version",
}


def index_by_name(server) -> dict[str, list[dict]]:
    entries: dict[str, list[dict]] = {}
    for e in server.repository_index():
        entries.setdefault(e["name"], []).append(e)
    return entries


def test_index_lists_every_model_directory(server, test_repo):
    index = index_by_name(server)
    on_disk = {p.name for p in test_repo.iterdir() if p.is_dir()}
    assert on_disk <= set(index), on_disk - set(index)


@pytest.mark.parametrize("model", make_test_models.MODELS_THAT_SERVE)
def test_serving_models_are_ready_in_index(server, model):
    states = {e.get("version"): e["state"] for e in index_by_name(server)[model]}
    assert "READY" in states.values(), states


@pytest.mark.parametrize("model", make_test_models.MODELS_THAT_FAIL)
def test_failed_model_unavailable_with_reason(server, model):
    entries = index_by_name(server)[model]
    assert all(e["state"] == "UNAVAILABLE" for e in entries), entries
    reasons = " | ".join(e.get("reason", "") for e in entries)
    assert re.search(FAILURE_REASONS[model], reasons, re.IGNORECASE), \
        f"{model}: reason {reasons!r} !~ /{FAILURE_REASONS[model]}/"
    assert server.get(f"/v2/models/{model}/ready").status_code != 200


@pytest.mark.parametrize("model", make_test_models.MODELS_THAT_FAIL)
def test_failed_model_reason_in_log(server, model):
    assert model in server.log_text()


def test_failed_model_infer_rejected(server):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]}
    r = server.infer_raw("corrupt_model", body)
    assert r.status_code in (400, 503), r.text
    assert "corrupt_model" in r.json()["error"]


def test_other_models_serve_despite_failures(client, test_repo, reference):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = client.infer("identity_fp32", infer_inputs({"INPUT0": ("FP32", x)}))
    ref = reference.run(model_file(test_repo, "identity_fp32"), {"INPUT0": x})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"], exact=True)


def test_unsupported_field_is_not_silently_ignored(server):
    """instance_group.rate_limiter is a real Triton field ortserve does not
    implement: it must either refuse the model naming the field, or serve it
    and say so."""
    entries = index_by_name(server)["unsupported_field"]
    if any(e["state"] == "READY" for e in entries):
        assert "instance_group.rate_limiter" in server.log_text()
    else:
        reasons = " ".join(e.get("reason", "") for e in entries)
        assert "instance_group.rate_limiter" in reasons, entries


@pytest.fixture(scope="module")
def strict_repo(tmp_path_factory):
    return make_test_models.build_test_repository(
        tmp_path_factory.mktemp("strict_models"), ["identity_fp32", "corrupt_model"])


def test_strict_readiness_true_not_ready_when_a_model_failed(launch, strict_repo):
    srv = launch(strict_repo, strict_readiness=True)
    srv.wait_models_ready(["identity_fp32"])
    assert srv.get("/v2/health/live").status_code == 200
    assert srv.get("/v2/health/ready").status_code != 200
    assert srv.get("/v2/models/identity_fp32/ready").status_code == 200


def test_strict_readiness_false_ready_when_a_model_failed(launch, strict_repo):
    srv = launch(strict_repo, strict_readiness=False)
    srv.wait_models_ready(["identity_fp32"])
    assert srv.get("/v2/health/ready").status_code == 200


def test_strict_readiness_true_ready_when_all_load(launch, tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "ok", ["identity_fp32"])
    srv = launch(repo, strict_readiness=True)
    srv.wait_models_ready(["identity_fp32"])
    assert srv.get("/v2/health/ready").status_code == 200


def test_graceful_shutdown_exit_code(launch, tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "ok", ["identity_fp32"])
    srv = launch(repo)
    srv.wait_models_ready(["identity_fp32"])
    assert srv.stop() == 0, srv.log_tail()
