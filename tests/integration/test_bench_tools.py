"""The benchmark's in-process limit, ortserve_inprocess_limit (bench/inprocess_limit.cpp):
it runs a model on the server's own runtime, reports the ONNX Runtime the
server reports, and refuses bad arguments with a message naming them."""
from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest
import requests

from harness import DEMO_REPO, ortserve_binary

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def limit_binary():
    path = ortserve_binary().parent / "ortserve_inprocess_limit"
    if not path.exists():
        pytest.skip(f"{path} not built")
    return path


def run_limit(binary, *args):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_runs_the_model_at_each_batch_size(limit_binary, demo_server, tmp_path):
    features = tmp_path / "features.bin"
    features.write_bytes(np.linspace(-1, 1, 16, dtype=np.float32).tobytes())
    done = run_limit(limit_binary, "--model-path", DEMO_REPO / "mlp_classifier" / "1" / "model.onnx",
                     "--threads", 1, "--batch-sizes", "4,1", "--duration", 0.2, "--warmup", 0.05,
                     "--input", f"features:FP32:1x16:{features}")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["engine"] == "ortserve-runtime" and result["threads"] == 1
    assert [r["batch_size"] for r in result["results"]] == [1, 4]
    for r in result["results"]:
        assert r["runs"] > 0 and r["inferences_per_s"] > 0
        lat = r["run_latency_us"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"]
    # The same ONNX Runtime as the server under test.
    text = requests.get(f"http://127.0.0.1:{demo_server.metrics_port}/metrics", timeout=10).text
    server_ort = re.search(r'ortserve_build_info\{[^}]*onnxruntime_version="([^"]+)"', text).group(1)
    assert result["onnxruntime"] == server_ort


@pytest.mark.parametrize("args, message", [
    (("--threads", 1), "--model-path and at least one --input are required"),
    (("--model-path", "m.onnx", "--input", "x:FP32:1x16"), "--input must be NAME:DTYPE:DIMS:FILE"),
    (("--model-path", "m.onnx", "--input", "x:FP99:1x16:f.bin"), "unknown data type FP99"),
    (("--model-path", "m.onnx", "--bogus", "1"), "unknown flag --bogus"),
    (("--model-path",), "--model-path needs a value"),
])
def test_bad_arguments_are_named(limit_binary, args, message):
    done = run_limit(limit_binary, *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_bad_model_and_input_file_are_named(limit_binary, tmp_path):
    features = tmp_path / "features.bin"
    features.write_bytes(bytes(64))
    done = run_limit(limit_binary, "--model-path", tmp_path / "missing.onnx", "--input",
                     f"features:FP32:1x16:{features}")
    assert done.returncode == 2 and "missing.onnx" in done.stderr
    done = run_limit(limit_binary, "--model-path", DEMO_REPO / "mlp_classifier" / "1" / "model.onnx",
                     "--input", f"features:FP32:1x16:{tmp_path / 'absent.bin'}")
    assert done.returncode == 2 and "cannot read" in done.stderr and "absent.bin" in done.stderr
