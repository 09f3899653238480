"""GPU serving end to end: KIND_GPU instances (CUDA provider), IOBinding on/off,
CUDA graphs on/off, several instances, numerical check, compared with
onnxruntime on CPU through tritonclient.

Skipped (with the reason) unless `nvidia-smi` works and the GPU provider
libraries sit next to the libonnxruntime.so the server was built against
(`make gpu-deps`, ONNXRUNTIME_ROOT=third_party/onnxruntime-gpu): on a GPU
machine with the project's dependencies (docs/gpu.md, "Checking on a GPU
machine"). The portable GPU bundle's checks (bench/gpu/gpu_checks.py) cover
the same ground on a GPU host that has none of them.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
import tritonclient.http as httpclient

from harness import REPO_ROOT, Reference, start_server


def _gpu_skip_reason() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi not found (no NVIDIA driver)"
    try:
        subprocess.run([smi, "-L"], check=True, capture_output=True, timeout=30)
    except (subprocess.SubprocessError, OSError) as e:
        return f"nvidia-smi does not work: {e}"
    root = pathlib.Path(os.environ.get("ONNXRUNTIME_ROOT", REPO_ROOT / "third_party" / "onnxruntime-gpu"))
    if not (root / "lib" / "libonnxruntime_providers_cuda.so").is_file():
        return f"no GPU providers in {root}/lib (run `make gpu-deps`)"
    return None


pytestmark = pytest.mark.skipif(_gpu_skip_reason() is not None, reason=str(_gpu_skip_reason()))

FEATURES, HIDDEN, CLASSES = 64, 256, 10


def _mlp(path: pathlib.Path) -> None:
    from onnx import TensorProto, helper, numpy_helper, save
    rng = np.random.default_rng(7)
    w1 = numpy_helper.from_array(rng.standard_normal((FEATURES, HIDDEN)).astype(np.float32) * 0.1, "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(HIDDEN).astype(np.float32) * 0.1, "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((HIDDEN, CLASSES)).astype(np.float32) * 0.1, "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", CLASSES])],
        initializer=[w1, b1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))


# name -> extra config (parameters use_tf32=0 so FP32 comparisons can be tight)
VARIANTS = {
    "gpu_plain": 'instance_group [ { kind: KIND_GPU count: 2 } ]\n'
                 'parameters { key: "io_binding" value { string_value: "0" } }',
    "gpu_iobinding": 'instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0 ] } ]',
    "gpu_graphs": 'instance_group [ { kind: KIND_GPU count: 1 } ]\n'
                  'parameters { key: "enable_cuda_graph" value { string_value: "1" } }\n'
                  'parameters { key: "cuda_graph_max_shapes" value { string_value: "2" } }',
    "gpu_checked": 'instance_group [ { kind: KIND_GPU count: 1 } ]\n'
                   'parameters { key: "numerical_check" value { string_value: "enforce" } }\n'
                   'parameters { key: "numerical_tolerance" value { string_value: "1e-4" } }',
}


@pytest.fixture(scope="module")
def gpu_repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("gpu_models")
    for name, extra in VARIANTS.items():
        (repo / name / "1").mkdir(parents=True)
        _mlp(repo / name / "1" / "model.onnx")
        (repo / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
            'dynamic_batching { max_queue_delay_microseconds: 500 }\n'
            'parameters { key: "use_tf32" value { string_value: "0" } }\n' + extra + "\n")
    return repo


@pytest.fixture(scope="module")
def gpu_server(gpu_repo, tmp_path_factory):
    srv = start_server(gpu_repo, tmp_path_factory.mktemp("gpu_logs"), "gpu", strict_readiness=True)
    try:
        srv.wait_models_ready(list(VARIANTS))
        yield srv
    finally:
        srv.stop()


def _infer(srv, model: str, x: np.ndarray) -> dict:
    client = httpclient.InferenceServerClient(srv.url)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    outs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in ("logits", "probs")]
    result = client.infer(model, [inp], outputs=outs)
    return {n: result.as_numpy(n) for n in ("logits", "probs")}


@pytest.mark.parametrize("model", list(VARIANTS))
def test_gpu_outputs_match_cpu_reference(gpu_server, gpu_repo, model):
    reference = Reference()
    rng = np.random.default_rng(1)
    # Batch sizes 1 and 4 twice (captured graphs replay), then 7 (beyond cuda_graph_max_shapes).
    for batch in (1, 4, 1, 4, 7, 1):
        x = rng.standard_normal((batch, FEATURES)).astype(np.float32)
        got = _infer(gpu_server, model, x)
        want = reference.run(gpu_repo / model / "1" / "model.onnx", {"x": x})
        for name in ("logits", "probs"):
            assert got[name].shape == want[name].shape, (model, name, batch)
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5,
                                       err_msg=f"{model} {name} batch {batch}")


def test_gpu_instances_really_run_on_cuda(gpu_server):
    log = gpu_server.log_text()
    for model in VARIANTS:
        assert f"{model}:1#0: instance ready: providers [CUDAExecutionProvider" in log, gpu_server.log_tail()
    assert "EXECUTION PROVIDER FALLBACK" not in log
    assert "gpu_checked:1#0: numerical check vs CPU FP32 passed" in log


def test_gpu_concurrent_requests_over_several_instances(gpu_server, gpu_repo):
    from concurrent.futures import ThreadPoolExecutor
    reference = Reference()
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((1 + i % 3, FEATURES)).astype(np.float32) for i in range(48)]
    for model in ("gpu_plain", "gpu_iobinding", "gpu_graphs"):
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda x, m=model: _infer(gpu_server, m, x), xs))
        for x, got in zip(xs, results):
            want = reference.run(gpu_repo / model / "1" / "model.onnx", {"x": x})
            np.testing.assert_allclose(got["probs"], want["probs"], rtol=1e-4, atol=1e-5, err_msg=model)
