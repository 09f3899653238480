"""Triton's command-line flags that deployments pass (tritonserver's
src/command_line_parser.cc): a Triton command line starts ortserve; the
flags with a meaning here act (auto-complete off, the max_batch_size that
auto-complete gives), the others are accepted with a log line, and a
malformed --backend-config stops the start with Triton's words."""
from __future__ import annotations

import pathlib
import subprocess

import pytest
from onnx import TensorProto, helper, save

from harness import ortserve_binary
from sequence_helpers import wait_loaded

CONFIG_COMPLETE = """name: "complete"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def identity(path: pathlib.Path) -> None:
    """x [N,4] -> y [N,4]: batchable, so auto-complete may give it a max_batch_size."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    path.parent.mkdir(parents=True, exist_ok=True)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


@pytest.fixture
def repo(tmp_path) -> pathlib.Path:
    """'auto' has no config.pbtxt; 'complete' has one that lists everything."""
    identity(tmp_path / "auto" / "1" / "model.onnx")
    identity(tmp_path / "complete" / "1" / "model.onnx")
    (tmp_path / "complete" / "config.pbtxt").write_text(CONFIG_COMPLETE)
    return tmp_path


def config(srv, model: str) -> dict:
    return srv.get(f"/v2/models/{model}/config").json()


def test_flags_without_meaning_here_are_accepted_and_logged(repo, launch):
    srv = launch(repo, extra_args=(
        "--backend-directory", "/opt/tritonserver/backends", "--repoagent-directory", "/opt/tritonserver/repoagents",
        "--model-load-thread-count", "2", "--allow-client-shm", "true",
        "--backend-config=tensorrt,coalesce-request-input=true",
        "--backend-config=onnxruntime,enable-global-threadpool=1"))
    wait_loaded(srv, ["auto", "complete"])
    log = srv.log_path.read_text()
    for flag in ("--backend-directory", "--repoagent-directory", "--model-load-thread-count"):
        assert f"{flag}: accepted without effect" in log, flag
    assert "client system shared memory enabled (--allow-client-shm=true)" in log
    assert "--backend-config=tensorrt,coalesce-request-input=true: ignored" in log
    assert "--backend-config=onnxruntime,enable-global-threadpool=1: accepted without effect" in log
    assert config(srv, "auto")["max_batch_size"] == 4  # Triton's default-max-batch-size


@pytest.mark.parametrize("flag, max_batch_size, dynamic_batching", [
    ("--backend-config=default-max-batch-size=8", 8, True),
    ("--backend-config=onnxruntime,default-max-batch-size=1", 1, False),
    ("--backend-config=default-max-batch-size=0", 0, False),
])
def test_default_max_batch_size_is_what_auto_complete_gives(repo, launch, flag, max_batch_size, dynamic_batching):
    """As Triton's onnxruntime backend: a batchable model gets the default, and
    dynamic batching only when the default is above 1."""
    srv = launch(repo, extra_args=(flag,))
    wait_loaded(srv, ["auto", "complete"])
    got = config(srv, "auto")
    assert got["max_batch_size"] == max_batch_size
    assert ("dynamic_batching" in got) == dynamic_batching, got
    assert config(srv, "complete")["max_batch_size"] == 4  # a config's own value stands


@pytest.mark.parametrize("flags", [("--disable-auto-complete-config",), ("--strict-model-config=true",)])
def test_auto_complete_off_needs_a_complete_config(repo, launch, flags):
    srv = launch(repo, extra_args=flags)
    wait_loaded(srv, ["complete"])
    index = {e["name"]: e for e in srv.repository_index()}
    assert index["auto"]["state"] == "UNAVAILABLE"
    assert "auto-complete is disabled (--disable-auto-complete-config)" in index["auto"]["reason"]
    assert config(srv, "complete")["max_batch_size"] == 4
    log = srv.log_path.read_text()
    deprecated = "'--strict-model-config' has been deprecated! Please use '--disable-auto-complete-config'"
    assert (deprecated in log) == flags[0].startswith("--strict-model-config")


def test_a_config_that_leaves_inputs_out_fails_with_auto_complete_off(tmp_path, launch):
    identity(tmp_path / "partial" / "1" / "model.onnx")
    (tmp_path / "partial" / "config.pbtxt").write_text('name: "partial"\nplatform: "onnxruntime_onnx"\n')
    srv = launch(tmp_path, extra_args=("--disable-auto-complete-config",))
    # The models load before the port opens (main.cpp): live means loaded.
    entry = next(e for e in srv.repository_index() if e["name"] == "partial")
    assert entry["state"] == "UNAVAILABLE"
    assert "'x' is missing from the config" in entry["reason"]


def test_exit_on_error_stops_the_start_when_a_model_fails_to_load(tmp_path):
    """--exit-on-error=true: Triton's default, exit 1 after the load; the
    model's own load error is logged first."""
    identity(tmp_path / "good" / "1" / "model.onnx")
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "1" / "model.onnx").write_bytes(b"not an onnx model")
    proc = subprocess.run([str(ortserve_binary()), "--model-repository", str(tmp_path), "--http-port", "0",
                           "--grpc-port", "0", "--metrics-port", "0", "--exit-on-error=true"],
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-2000:]
    assert "failed to load all models" in out
    assert "broken" in out


def test_without_exit_on_error_the_other_models_are_served(tmp_path, launch):
    identity(tmp_path / "good" / "1" / "model.onnx")
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "1" / "model.onnx").write_bytes(b"not an onnx model")
    srv = launch(tmp_path)
    states = {e["name"]: e["state"] for e in srv.repository_index()}
    assert states == {"good": "READY", "broken": "UNAVAILABLE"}


@pytest.mark.parametrize("arg, message", [
    ("--backend-config=,default-max-batch-size=4", "No backend specified. --backend-config option format is"),
    ("--backend-config=onnxruntime,default-max-batch-size", "--backend-config option format is"),
    ("--backend-config=default-max-batch-size=-1", "default-max-batch-size must be a non-negative integer"),
])
def test_a_malformed_backend_config_stops_the_start(repo, arg, message):
    proc = subprocess.run([str(ortserve_binary()), "--model-repository", str(repo), "--http-port", "0",
                           "--grpc-port", "0", "--metrics-port", "0", arg],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr


def test_help_lists_the_triton_flags():
    out = subprocess.run([str(ortserve_binary()), "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "Triton compatibility" in out
    for flag in ("--disable-auto-complete-config", "--strict-model-config", "--backend-config",
                 "--allow-client-shm", "--model-load-thread-count", "--exit-on-error", "--backend-directory", "--repoagent-directory"):
        assert flag in out, flag
