"""Live model management: --model-control-mode none|poll|explicit, Triton's
repository API (HTTP POST /v2/repository/models/<m>/load|unload, gRPC
RepositoryModelLoad/Unload) through tritonclient, polling, failed reloads that
keep the old version serving, and the version_weights canary split.

The test model "addk" adds a constant k to its input; each version/reload
writes a different k so the answer tells which load is serving. Waits are
bounded polls, never timing assertions.
"""
from __future__ import annotations

import shutil
import time
import urllib.parse

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from harness import assert_error, make_test_models

WAIT_S = 60  # bound on a poll-mode change becoming visible

ADDK_CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
{extra}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
"""


def write_addk(repo, name="addk", versions=None, extra=""):
    """<repo>/<name> with versions {version: k}; returns the model dir."""
    versions = versions or {1: 1.0}
    d = repo / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.pbtxt").write_text(ADDK_CONFIG.format(name=name, extra=extra))
    for v, k in versions.items():
        set_version(d, v, k)
    return d


def set_version(model_dir, version, k):
    (model_dir / str(version)).mkdir(exist_ok=True)
    data = make_test_models.build_add_constant(float(k)).SerializeToString()
    tmp = model_dir / str(version) / "model.onnx.tmp"
    tmp.write_bytes(data)
    tmp.replace(model_dir / str(version) / "model.onnx")  # never a half-written model


def infer_k(client, name="addk", version=""):
    """The k the serving load adds (input ones); `client` of either protocol."""
    module = grpcclient if isinstance(client, grpcclient.InferenceServerClient) else httpclient
    inp = module.InferInput("INPUT0", [1, 4], "FP32")
    inp.set_data_from_numpy(np.ones((1, 4), np.float32))
    out = client.infer(name, [inp], model_version=version).as_numpy("OUTPUT0")
    return float(out[0, 0]) - 1.0


def wait_for(predicate, what, server):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert server.alive(), f"server exited while waiting for {what}:\n{server.log_tail()}"
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - not there yet
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out after {WAIT_S}s waiting for {what}; log tail:\n{server.log_tail()}")


def index_entry(server, name):
    return [e for e in server.repository_index() if e["name"] == name]


@pytest.fixture
def explicit_server(launch, tmp_path):
    repo = tmp_path / "repo"
    write_addk(repo, "addk", {1: 1.0})
    write_addk(repo, "other", {1: 5.0})
    # Load/unload without a model-repository key must be allowed explicitly
    # (test_access.py covers the default refusal and the keyed form).
    srv = launch(repo, extra_args=("--model-control-mode=explicit", "--load-model", "other",
                                   "--allow-unauthenticated-model-control=true"))
    srv.wait_models_ready(["other"])
    return srv, repo


def test_explicit_mode_http_load_reload_unload(explicit_server):
    srv, repo = explicit_server
    client = httpclient.InferenceServerClient(srv.url)
    assert not client.is_model_ready("addk"), "explicit mode loads only --load-model models"
    entry = index_entry(srv, "addk")
    assert entry and entry[0].get("state") == "UNAVAILABLE" and entry[0].get("reason") == "not loaded", entry

    client.load_model("addk")
    assert client.is_model_ready("addk")
    assert infer_k(client) == 1.0

    # Changed model file: the new load is warmed beside the old, then swapped in.
    set_version(repo / "addk", 1, 3.0)
    client.load_model("addk")
    assert infer_k(client) == 3.0

    # A broken reload never replaces the working load.
    (repo / "addk" / "1" / "model.onnx").write_bytes(b"not an onnx model at all")
    with pytest.raises(InferenceServerException) as failed:
        client.load_model("addk")
    assert "addk" in str(failed.value)
    assert client.is_model_ready("addk")
    assert infer_k(client) == 3.0
    entry = [e for e in index_entry(srv, "addk") if e.get("version") == "1"]
    assert entry and entry[0]["state"] == "READY" and "keeps serving" in entry[0]["reason"], entry
    assert "failed to reload" in srv.log_text()

    # Unload: the model stops serving, others are untouched.
    r = srv.post("/v2/repository/models/addk/unload", json={"parameters": {"unload_dependents": False}})
    assert r.status_code == 200, r.text
    assert not client.is_model_ready("addk")
    with pytest.raises(InferenceServerException):
        infer_k(client)
    assert infer_k(client, "other") == 5.0
    entry = index_entry(srv, "addk")
    assert entry and entry[0]["state"] == "UNAVAILABLE" and entry[0]["reason"] == "unloaded", entry

    assert_error(srv.post("/v2/repository/models/no_such_model/load", data=b""), 400, "no_such_model")
    assert_error(srv.get("/v2/repository/models/addk/load"), 405)


def test_explicit_mode_grpc_load_unload(explicit_server):
    srv, repo = explicit_server
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    with pytest.raises(InferenceServerException) as never_loaded:  # as Triton: not loaded, not known
        client.is_model_ready("addk")
    assert never_loaded.value.message() == "Request for unknown model: 'addk' is not found"
    client.load_model("addk")
    assert client.is_model_ready("addk")
    assert infer_k(httpclient.InferenceServerClient(srv.url)) == 1.0
    client.unload_model("addk")
    assert not client.is_model_ready("addk")
    with pytest.raises(InferenceServerException) as missing:
        client.load_model("no_such_model")
    assert "no_such_model" in str(missing.value)
    assert client.is_model_ready("other")


@pytest.mark.parametrize("name", ["%2E%2E", "..%2F..%2Fetc", "%2Fetc", ".hidden", "a%5Cb"])
def test_load_of_a_path_instead_of_a_model_name_is_refused(explicit_server, tmp_path, name):
    """The repository API takes a model name, a directory of the repository;
    nothing a client sends can point it at another path."""
    srv, repo = explicit_server
    # A real model outside the repository that `..`-style names would reach.
    write_addk(tmp_path / "outside", "etc", {1: 9.0})
    for action in ("load", "unload"):
        r = srv.post(f"/v2/repository/models/{name}/{action}", data=b"")
        assert_error(r, 400, f"'{urllib.parse.unquote(name)}' is not a model name")
    with pytest.raises(InferenceServerException) as refused:
        grpcclient.InferenceServerClient(srv.grpc_url).load_model(urllib.parse.unquote(name))
    assert "not a model name" in str(refused.value), refused.value
    assert [e["name"] for e in srv.repository_index() if e.get("state") == "READY"] == ["other"]


def test_none_mode_rejects_load_and_unload(launch, tmp_path):
    repo = tmp_path / "repo"
    write_addk(repo)
    srv = launch(repo)
    srv.wait_models_ready(["addk"])
    assert_error(srv.post("/v2/repository/models/addk/load"), 400, "explicit model load / unload is not allowed",
                 "explicit")
    assert_error(srv.post("/v2/repository/models/addk/unload"), 400, "not allowed")
    with pytest.raises(InferenceServerException) as refused:
        grpcclient.InferenceServerClient(srv.grpc_url).unload_model("addk")
    assert "UNAVAILABLE" in str(refused.value.status()) and "not allowed" in refused.value.message()
    assert infer_k(httpclient.InferenceServerClient(srv.url)) == 1.0, "a refused unload changes nothing"


def test_poll_mode_adds_changes_and_removes_models(launch, tmp_path):
    repo = tmp_path / "repo"
    write_addk(repo, "base", {1: 2.0})
    srv = launch(repo, extra_args=("--model-control-mode=poll", "--repository-poll-secs", "1"))
    srv.wait_models_ready(["base"])
    client = httpclient.InferenceServerClient(srv.url)
    assert not client.is_model_ready("addk")

    # Added: built outside the repository, then moved in whole.
    staging = tmp_path / "staging"
    write_addk(staging, "addk", {1: 1.0})
    shutil.move(str(staging / "addk"), str(repo / "addk"))
    wait_for(lambda: client.is_model_ready("addk"), "the added model READY", srv)
    assert infer_k(client) == 1.0

    # A new version (latest policy): it takes over from version 1.
    set_version(repo / "addk", 2, 7.0)
    wait_for(lambda: infer_k(client) == 7.0, "version 2 serving", srv)
    wait_for(lambda: not client.is_model_ready("addk", "1"), "version 1 unloaded", srv)

    # Changed in place, then broken: the last good load keeps serving.
    set_version(repo / "addk", 2, 9.0)
    wait_for(lambda: infer_k(client) == 9.0, "the changed version 2 serving", srv)
    (repo / "addk" / "2" / "model.onnx").write_bytes(b"garbage")
    wait_for(lambda: any("keeps serving" in e.get("reason", "") for e in index_entry(srv, "addk")),
             "the failed reload in the index", srv)
    assert infer_k(client) == 9.0

    # Removed: unknown.
    shutil.rmtree(repo / "addk")
    wait_for(lambda: not index_entry(srv, "addk"), "the removed model gone from the index", srv)
    assert not client.is_model_ready("addk")
    assert infer_k(client, "base") == 2.0
    assert_error(srv.post("/v2/repository/models/base/load"), 400, "polling is enabled")


def test_canary_weights_split_unversioned_requests(launch, tmp_path):
    repo = tmp_path / "repo"
    write_addk(repo, "canary", {1: 1.0, 2: 2.0},
               extra='version_policy { all { } }\n'
                     'parameters { key: "version_weights" value { string_value: "1:3,2:1" } }')
    srv = launch(repo)
    srv.wait_models_ready(["canary"])
    client = httpclient.InferenceServerClient(srv.url)
    answers = [infer_k(client, "canary") for _ in range(8)]
    # Smooth weighted round-robin: exactly 3:1 over every 4 requests.
    assert answers.count(1.0) == 6 and answers.count(2.0) == 2, answers
    assert infer_k(client, "canary", "2") == 2.0, "a named version is never redirected"
    stats = {s["version"]: s["inference_stats"]["success"]["count"]
             for s in srv.get("/v2/models/canary/stats").json()["model_stats"]}
    assert stats == {"1": 6, "2": 3}, stats


def assert_version_not_ready(srv, version, name="addk"):
    """`version` of `name` answers not-ready as Triton does on each protocol
    (gRPC ModelReady OK with ready false, HTTP 400) and has no statistics
    (Triton's "requested model version is not available"); infer, metadata
    and config keep GetModel's words."""
    http = httpclient.InferenceServerClient(srv.url)
    grpc = grpcclient.InferenceServerClient(srv.grpc_url)
    not_available = f"requested model version is not available for model '{name}'"
    assert grpc.is_model_ready(name, version) is False
    assert not http.is_model_ready(name, version)
    assert_error(srv.get(f"/v2/models/{name}/versions/{version}/ready"), 400, f"'{name}' version {version}")
    assert_error(srv.get(f"/v2/models/{name}/versions/{version}/stats"), 400, not_available)
    with pytest.raises(InferenceServerException) as stats:
        grpc.get_inference_statistics(name, version)
    assert stats.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert stats.value.message().startswith(not_available), stats.value.message()
    for call in (lambda c: c.get_model_metadata(name, version), lambda c: c.get_model_config(name, version),
                 lambda c: infer_k(c, name, version)):
        for client in (http, grpc):
            with pytest.raises(InferenceServerException) as refused:
                call(client)
            assert f"Request for unknown model: '{name}' version {version} is not" in refused.value.message()


@pytest.mark.parametrize("mode", ["none", "poll", "explicit"])
def test_versions_outside_the_policy_are_not_ready(launch, tmp_path, mode):
    """Versions 1, 2, 3 on disk, version_policy specific [1, 3] (Triton's
    L0_server_status): 2, and 9 (not on disk), are not ready on both
    protocols in every mode; an unknown model name stays an error; a version
    a poll removes, or an unload, is not ready the same way."""
    repo = tmp_path / "repo"
    write_addk(repo, "addk", {1: 1.0, 2: 2.0, 3: 3.0}, extra="version_policy { specific { versions: [ 1, 3 ] } }")
    if mode == "poll":  # L0_server_status: versions 2 and 3 of a model under `all` removed
        write_addk(repo, "addall", {1: 1.0, 2: 2.0, 3: 3.0}, extra="version_policy { all { } }")
    args = {"none": (), "poll": ("--model-control-mode=poll", "--repository-poll-secs", "1"),
            "explicit": ("--model-control-mode=explicit", "--load-model", "addk",
                         "--allow-unauthenticated-model-control=true")}[mode]
    srv = launch(repo, extra_args=args)
    srv.wait_models_ready(["addk"] + (["addall"] if mode == "poll" else []))
    grpc = grpcclient.InferenceServerClient(srv.grpc_url)
    assert grpc.is_model_ready("addk", "1") and grpc.is_model_ready("addk", "3")
    assert srv.get("/v2/models/addk/versions/3/ready").status_code == 200
    for version in ("2", "9"):
        assert_version_not_ready(srv, version)
    with pytest.raises(InferenceServerException) as unknown:
        grpc.is_model_ready("no_such_model", "2")
    assert unknown.value.message() == "Request for unknown model: 'no_such_model' is not found"
    assert_error(srv.get("/v2/models/no_such_model/versions/2/ready"), 404,
                 "Request for unknown model: 'no_such_model' is not found")
    if mode == "poll":
        assert grpc.is_model_ready("addall", "3")
        for version in ("2", "3"):
            shutil.rmtree(repo / "addall" / version)
        wait_for(lambda: not grpc.is_model_ready("addall", "3"), "versions 2 and 3 gone", srv)
        for version in ("2", "3"):
            assert_version_not_ready(srv, version, "addall")
        assert grpc.is_model_ready("addall", "1")
    if mode == "explicit":
        grpc.unload_model("addk")
        for version in ("1", "3"):
            assert_version_not_ready(srv, version)
