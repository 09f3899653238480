"""ONNX Runtime session config entries from the model config (parameters
"session.<ort key>") and for every model (--backend-config=onnxruntime,
session.<ort key>=V), passed to Ort::SessionOptions::AddConfigEntry
(docs/model-config.md, "ONNX Runtime session keys").

The entry whose effect is seen here is ORT's session.optimized_model_filepath:
the server's session writes the optimized graph there, and onnxruntime in
Python computes the same outputs from that file as from the original. Values
ORT refuses fail that model's load with ORT's message, whether ORT refuses
them in AddConfigEntry or when the session is created; a key ORT does not
know is accepted, as ORT accepts it."""
from __future__ import annotations

import pathlib
import shutil

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from harness import assert_matches, infer_inputs, make_test_models, model_file, start_server

pytestmark = pytest.mark.timeout(180)

BASE = "add_sub_fp32"


def add_model(repo: pathlib.Path, name: str, params: dict[str, str]) -> None:
    shutil.copytree(repo / BASE, repo / name)
    config = (repo / BASE / "config.pbtxt").read_text().replace(f'name: "{BASE}"', f'name: "{name}"')
    for key, value in params.items():
        config += f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n'
    (repo / name / "config.pbtxt").write_text(config)


def states(srv) -> dict:
    return {m["name"]: m for m in srv.repository_index()}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("session_config_models"), [BASE])


def test_model_entries_reach_the_session(repo, tmp_path, log_dir):
    saved = tmp_path / "saved" / "optimized.onnx"
    saved.parent.mkdir()
    add_model(repo, "saves_optimized", {"session.session.optimized_model_filepath": str(saved)})
    add_model(repo, "refused_at_add", {"session.session.graph_optimization_level": "fastest"})
    add_model(repo, "refused_at_create", {"session.session.max_shape_override": "garbage"})
    add_model(repo, "unknown_key", {"session.session.no_such_key": "1"})
    srv = start_server(repo, log_dir, "session_config")
    try:
        srv.wait_models_ready(["saves_optimized", "unknown_key"])
        assert saved.is_file(), "ORT did not write session.optimized_model_filepath"
        a = np.arange(16, dtype=np.float32).reshape(1, 16)
        b = np.full((1, 16), 0.5, dtype=np.float32)
        with httpclient.InferenceServerClient(srv.url) as client:
            served = client.infer("saves_optimized", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}))
        for path in (saved, model_file(repo, "saves_optimized")):
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            expected = dict(zip(["OUTPUT0", "OUTPUT1"], session.run(["OUTPUT0", "OUTPUT1"],
                                                                    {"INPUT0": a, "INPUT1": b})))
            for name, value in expected.items():
                assert_matches(served.as_numpy(name), value)

        index = states(srv)
        refused = index["refused_at_add"]
        assert refused["state"] == "UNAVAILABLE", refused
        assert "session.graph_optimization_level" in refused["reason"], refused
        assert "must be one of disable_all/enable_basic/enable_extended/enable_layout/enable_all" in \
            refused["reason"], refused
        created = index["refused_at_create"]
        assert created["state"] == "UNAVAILABLE", created
        assert "max_shape_override: missing ':' in entry 'garbage'" in created["reason"], created
        assert index[BASE]["state"] == "READY", index[BASE]
    finally:
        srv.stop()
        for name in ("saves_optimized", "refused_at_add", "refused_at_create", "unknown_key"):
            shutil.rmtree(repo / name, ignore_errors=True)


def test_server_entries_apply_to_every_model_and_a_model_replaces_them(repo, log_dir):
    add_model(repo, "overrides", {"session.session.graph_optimization_level": "enable_basic"})
    srv = start_server(repo, log_dir, "session_config_server",
                       extra_args=("--backend-config=onnxruntime,session.session.graph_optimization_level=fastest",))
    try:
        srv.wait_models_ready(["overrides"])
        plain = states(srv)[BASE]
        assert plain["state"] == "UNAVAILABLE", plain
        assert "must be one of disable_all/enable_basic" in plain["reason"], plain
    finally:
        srv.stop()
        shutil.rmtree(repo / "overrides", ignore_errors=True)
