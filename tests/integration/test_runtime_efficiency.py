"""Runtime efficiency at scale: one process-wide ORT thread pool, pre-packed weights
shared by a model's instances, and the optimized-model cache (--model-cache-dir).

Threads are read from /proc/<pid>/task/*/comm (the names come from the server:
ort-pool-N for the shared pool, ort-<model> for a model's own pools); memory from
/proc/<pid>/status. Outputs are compared with onnxruntime in Python. No timing
assertions; the memory bound is the issue's 1.3x (measured ratios in bench/RESULTS.md).
"""
from __future__ import annotations

import collections
import concurrent.futures
import pathlib
import re
import time

import numpy as np
import onnx
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, helper, numpy_helper

from harness import Reference, metric, start_server

CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {dims} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {out_dims} ] }} ]
instance_group [ {{ count: {instances}, kind: KIND_CPU }} ]
{extra}
"""


def save_model(repo: pathlib.Path, name: str, model, dims, out_dims, instances=1, extra="") -> pathlib.Path:
    d = repo / name
    (d / "1").mkdir(parents=True, exist_ok=True)
    model.ir_version = 8
    onnx.save(model, str(d / "1" / "model.onnx"))
    (d / "config.pbtxt").write_text(CONFIG.format(name=name, dims=", ".join(map(str, dims)),
                                                  out_dims=", ".join(map(str, out_dims)),
                                                  instances=instances, extra=extra))
    return d / "1" / "model.onnx"


def gemm_stack(width: int, layers: int, seed: int):
    """[-1, width] -> layers x (Gemm width x width, Relu)."""
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "INPUT0"
    for i in range(layers):
        w = (rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(width, np.float32), f"b{i}")]
        out = "OUTPUT0" if i == layers - 1 else f"h{i}"
        nodes += [helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}"]),
                  helper.make_node("Relu", [f"g{i}"], [out])]
        prev = out
    graph = helper.make_graph(nodes, "gemm_stack",
                              [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [-1, width])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [-1, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_net(seed: int):
    """[-1,3,16,16] -> Conv 8 -> Relu -> Conv 8 -> GlobalAveragePool -> [-1,8,1,1]: level
    "all" rewrites it (NCHWc on x86), so the cache holds a graph ORT changed."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3), dtype=np.float32), "k0"),
             numpy_helper.from_array(rng.standard_normal(8, dtype=np.float32), "c0"),
             numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3), dtype=np.float32), "k1"),
             numpy_helper.from_array(rng.standard_normal(8, dtype=np.float32), "c1")]
    nodes = [helper.make_node("Conv", ["INPUT0", "k0", "c0"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "k1", "c1"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["b"], ["OUTPUT0"])]
    graph = helper.make_graph(nodes, "conv_net",
                              [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [-1, 3, 16, 16])],
                              [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [-1, 8, 1, 1])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def threads_by_name(pid: int) -> collections.Counter:
    names = collections.Counter()
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            names[(task / "comm").read_text().strip()] += 1
        except OSError:  # a thread that just ended
            pass
    return names


def planned_ort_threads(log: str) -> int:
    found = re.findall(r"thread plan: total: (\d+) ORT thread\(s\) exist", log)
    assert found, "no thread plan total line in the log"
    return int(found[-1])


def vm_rss_kib(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def infer(srv, name: str, x: np.ndarray) -> np.ndarray:
    client = httpclient.InferenceServerClient(srv.url)
    inp = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return client.infer(name, [inp]).as_numpy("OUTPUT0")


def test_fifty_models_share_one_ort_pool(tmp_path, log_dir):
    repo = tmp_path / "repo"
    paths = [save_model(repo, f"tiny{i:02d}", gemm_stack(8, 1, i), [8], [8]) for i in range(50)]
    # Asks for pools of its own: 1 instance x 3 intra-op threads = 2 ORT threads (the caller is the 3rd).
    save_model(repo, "own", gemm_stack(8, 1, 99), [8], [8],
               extra='parameters { key: "intra_op_thread_count" value: { string_value: "3" } }')
    srv = start_server(repo, log_dir, "fifty_models", extra_args=("--thread-budget", "3"))
    try:
        srv.wait_models_ready([f"tiny{i:02d}" for i in range(50)] + ["own"])
        threads = threads_by_name(srv.proc.pid)
        pool = sum(n for name, n in threads.items() if name.startswith("ort-pool-"))
        own = threads.get("ort-own", 0)
        assert pool == 2, threads  # budget 3: 2 pool threads + the calling run thread
        assert own == 2, threads
        assert pool + own == planned_ort_threads(srv.log_text())
        assert sum(n for name, n in threads.items() if name.startswith("ort-")) == pool + own, threads
        x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
        for i in (0, 49):
            expected = Reference().run(paths[i], {"INPUT0": x})["OUTPUT0"]
            np.testing.assert_allclose(infer(srv, f"tiny{i:02d}", x), expected, rtol=1e-5, atol=1e-6)
    finally:
        srv.stop()


def test_per_session_pools_on_request(tmp_path, log_dir):
    repo = tmp_path / "repo"
    for i in range(3):
        save_model(repo, f"tiny{i}", gemm_stack(8, 1, i), [8], [8])
    srv = start_server(repo, log_dir, "per_session_pools",
                       extra_args=("--thread-budget", "3", "--ort-thread-pool", "per-session"))
    try:
        srv.wait_models_ready([f"tiny{i}" for i in range(3)])
        threads = threads_by_name(srv.proc.pid)
        assert not any(name.startswith("ort-pool-") for name in threads), threads
        ort = sum(n for name, n in threads.items() if name.startswith("ort-"))
        assert ort == 3 * 2 == planned_ort_threads(srv.log_text()), threads
    finally:
        srv.stop()


def test_bad_thread_pool_parameter_fails_the_model_only(tmp_path, log_dir):
    repo = tmp_path / "repo"
    save_model(repo, "good", gemm_stack(8, 1, 1), [8], [8])
    save_model(repo, "bad", gemm_stack(8, 1, 2), [8], [8],
               extra='parameters { key: "ort_thread_pool" value: { string_value: "mine" } }')
    srv = start_server(repo, log_dir, "bad_pool_parameter")
    try:
        srv.wait_models_ready(["good"])
        index = {m["name"]: m for m in srv.repository_index()}
        assert index["bad"]["state"] == "UNAVAILABLE"
        assert "ort_thread_pool" in index["bad"]["reason"] and "'mine'" in index["bad"]["reason"]
    finally:
        srv.stop()


def rss_after_requests_kib(repo, model_path, log_dir, name) -> int:
    """VmRSS after 16 requests from 8 threads (so that every instance runs), each output
    checked against onnxruntime."""
    srv = start_server(repo, log_dir, name, extra_args=("--thread-budget", "2"))
    try:
        srv.wait_models_ready(["weights"])
        rng = np.random.default_rng(11)
        inputs = [rng.standard_normal((1 + i % 8, 1024), dtype=np.float32) for i in range(16)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            outputs = list(pool.map(lambda x: infer(srv, "weights", x), inputs))
        reference = Reference()
        for x, got in zip(inputs, outputs):
            want = reference.run(model_path, {"INPUT0": x})["OUTPUT0"]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        time.sleep(1.0)  # let the allocator settle after the requests; not a timing assertion
        return vm_rss_kib(srv.proc.pid)
    finally:
        srv.stop()


def test_instances_share_weights(tmp_path, log_dir):
    """About 40 MB of Gemm weights: after requests on every instance, 4 instances hold
    at most 1.3x one instance's memory (one more copy of the weights would already be about 1.4x)."""
    model = gemm_stack(1024, 10, 7)
    rss = {}
    for n in (1, 4):
        path = save_model(tmp_path / f"repo{n}", "weights", model, [1024], [1024], instances=n)
        rss[n] = rss_after_requests_kib(tmp_path / f"repo{n}", path, log_dir, f"weights_{n}")
    assert rss[4] <= 1.3 * rss[1], rss


def test_optimized_model_cache_hit_after_restart(tmp_path, log_dir):
    repo = tmp_path / "repo"
    path = save_model(repo, "conv", conv_net(3), [3, 16, 16], [8, 1, 1], instances=2)
    cache = tmp_path / "cache"
    args = ("--model-cache-dir", str(cache))
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    expected = Reference().run(path, {"INPUT0": x})["OUTPUT0"]

    srv = start_server(repo, log_dir, "cache_first", extra_args=args)
    try:
        srv.wait_models_ready(["conv"])
        assert metric(srv, "ortserve_model_load_cache", model="conv", outcome="miss") == 1
        np.testing.assert_allclose(infer(srv, "conv", x), expected, rtol=1e-5, atol=1e-5)
    finally:
        srv.stop()
    entries = sorted((cache / "optimized").glob("conv-*.onnx"))
    assert len(entries) == 1 and entries[0].stat().st_size > 0
    assert entries[0].with_suffix(".sha256").is_file()

    srv = start_server(repo, log_dir, "cache_hit", extra_args=args)
    try:
        srv.wait_models_ready(["conv"])
        assert metric(srv, "ortserve_model_load_cache", model="conv", outcome="hit") == 1
        assert re.search(r"model 'conv' version 1 READY in \d+ ms .*optimized-model cache hit", srv.log_text())
        np.testing.assert_allclose(infer(srv, "conv", x), expected, rtol=1e-5, atol=1e-5)
    finally:
        srv.stop()


@pytest.mark.parametrize("damage", ["bytes", "checksum_matches"])
def test_corrupt_cache_entry_is_rebuilt(tmp_path, log_dir, damage):
    import hashlib
    repo = tmp_path / "repo"
    path = save_model(repo, "conv", conv_net(4), [3, 16, 16], [8, 1, 1])
    cache = tmp_path / "cache"
    args = ("--model-cache-dir", str(cache))
    srv = start_server(repo, log_dir, f"cache_build_{damage}", extra_args=args)
    try:
        srv.wait_models_ready(["conv"])
    finally:
        srv.stop()
    entry = next((cache / "optimized").glob("conv-*.onnx"))
    entry.write_bytes(b"not an onnx model")
    if damage == "checksum_matches":  # only ORT itself can tell
        entry.with_suffix(".sha256").write_text(hashlib.sha256(b"not an onnx model").hexdigest() + "\n")

    srv = start_server(repo, log_dir, f"cache_rebuild_{damage}", extra_args=args)
    try:
        srv.wait_models_ready(["conv"])
        assert "optimized-model cache: ignoring" in srv.log_text()
        assert metric(srv, "ortserve_model_load_cache", model="conv", outcome="miss") == 1
        x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
        expected = Reference().run(path, {"INPUT0": x})["OUTPUT0"]
        np.testing.assert_allclose(infer(srv, "conv", x), expected, rtol=1e-5, atol=1e-5)
    finally:
        srv.stop()
    assert entry.read_bytes() != b"not an onnx model"  # rebuilt
