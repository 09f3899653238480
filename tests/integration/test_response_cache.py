"""Triton's response cache: `--cache-config local,size=BYTES` on the server,
`response_cache { enable: true }` per model.

A hit answers byte for byte what the model computed (checked against
onnxruntime, over HTTP JSON, HTTP binary and gRPC) and runs nothing; the key
is the model version, every input and the requested outputs; the cache stays
within its bytes by evicting the least recently used answer; errors are never
cached; a reloaded or unloaded version's answers are dropped; hits and
misses show in Triton's statistics fields and in /metrics.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from harness import (Reference, assert_matches, grpc_inputs, infer_inputs, make_test_models,
                     metric, model_file, ortserve_binary, requested_outputs, start_server)
from test_model_control import infer_k, set_version, write_addk

CACHE = "response_cache { enable: true }"
CACHE_BYTES = 1 << 20


def cached_add_sub(repo, name="cached_add_sub"):
    """add_sub_fp32's graph (OUTPUT0 = a + b, OUTPUT1 = a - b) with the cache on."""
    config = make_test_models.add_sub_config(name, "FP32") + CACHE + "\n"
    make_test_models.demo.write_model(repo, name, make_test_models.build_add_sub("FP32"), config)


@pytest.fixture(scope="module")
def cache_repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("cache_models")
    cached_add_sub(repo)
    make_test_models.build_test_repository(repo, ["add_sub_fp32", "gather_fault"])
    gather = repo / "gather_fault" / "config.pbtxt"
    gather.write_text(gather.read_text() + CACHE + "\n")
    return repo


@pytest.fixture(scope="module")
def cache_server(cache_repo, log_dir):
    srv = start_server(cache_repo, log_dir, "response_cache",
                       extra_args=("--cache-config", f"local,size={CACHE_BYTES}"))
    try:
        srv.wait_models_ready(["cached_add_sub", "add_sub_fp32", "gather_fault"])
        yield srv
    finally:
        srv.stop()


def stats(srv, model):
    s = srv.model_stats(model)
    infer = s["inference_stats"]
    return {"hit": infer["cache_hit"]["count"], "miss": infer["cache_miss"]["count"],
            "success": infer["success"]["count"], "inferences": s["inference_count"],
            "executions": s["execution_count"]}


def pair(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((2, 16)).astype(np.float32), rng.standard_normal((2, 16)).astype(np.float32)


def http_infer(srv, a, b, outputs=None, binary=True):
    with httpclient.InferenceServerClient(srv.url) as c:
        result = c.infer("cached_add_sub", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}, binary),
                         outputs=requested_outputs(outputs, binary) if outputs else None)
        return result


def test_a_hit_is_byte_equal_to_the_computed_answer_and_runs_nothing(cache_server, cache_repo):
    a, b = pair(1)
    ref = Reference().run(model_file(cache_repo, "cached_add_sub"), {"INPUT0": a, "INPUT1": b})
    before = stats(cache_server, "cached_add_sub")

    computed = http_infer(cache_server, a, b)
    after_miss = stats(cache_server, "cached_add_sub")
    assert after_miss["miss"] == before["miss"] + 1 and after_miss["hit"] == before["hit"]
    assert after_miss["executions"] == before["executions"] + 1

    answers = [http_infer(cache_server, a, b), http_infer(cache_server, a, b, binary=False)]
    with grpcclient.InferenceServerClient(cache_server.grpc_url) as g:
        answers.append(g.infer("cached_add_sub", grpc_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)})))
    after_hits = stats(cache_server, "cached_add_sub")
    assert after_hits["hit"] == after_miss["hit"] + 3
    assert after_hits["miss"] == after_miss["miss"]
    # As Triton counts a hit: a success, neither an inference nor an execution.
    assert after_hits["success"] == after_miss["success"] + 3
    assert after_hits["executions"] == after_miss["executions"]
    assert after_hits["inferences"] == after_miss["inferences"]

    for name in ("OUTPUT0", "OUTPUT1"):
        assert_matches(computed.as_numpy(name), ref[name])
        for answer in answers:
            assert answer.as_numpy(name).tobytes() == computed.as_numpy(name).tobytes(), name


def test_other_inputs_or_outputs_are_other_keys(cache_server, cache_repo):
    a, b = pair(2)
    ref = Reference().run(model_file(cache_repo, "cached_add_sub"), {"INPUT0": a, "INPUT1": b})
    http_infer(cache_server, a, b)
    before = stats(cache_server, "cached_add_sub")

    only_sub = http_infer(cache_server, a, b, outputs=["OUTPUT1"])
    assert only_sub.as_numpy("OUTPUT0") is None, "an answer with both outputs was served for one"
    assert_matches(only_sub.as_numpy("OUTPUT1"), ref["OUTPUT1"])
    swapped = http_infer(cache_server, b, a)  # same bytes, other input names
    assert_matches(swapped.as_numpy("OUTPUT1"), -ref["OUTPUT1"])
    one_more = b.copy()
    one_more[0, 0] += 1.0
    changed = http_infer(cache_server, a, one_more)
    assert changed.as_numpy("OUTPUT0")[0, 0] == pytest.approx(ref["OUTPUT0"][0, 0] + 1.0)

    after = stats(cache_server, "cached_add_sub")
    assert after["miss"] == before["miss"] + 3 and after["hit"] == before["hit"]


def test_a_model_without_response_cache_is_not_cached(cache_server):
    a, b = pair(3)
    with httpclient.InferenceServerClient(cache_server.url) as c:
        for _ in range(2):
            c.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}))
    s = stats(cache_server, "add_sub_fp32")
    assert s["hit"] == 0 and s["miss"] == 0 and s["executions"] >= 2


def test_errors_are_never_cached(cache_server):
    bad = np.array([100], dtype=np.int64)  # outside the table: ORT fails the run
    with httpclient.InferenceServerClient(cache_server.url) as c:
        for _ in range(2):
            inp = httpclient.InferInput("INDEX", [1], "INT64")
            inp.set_data_from_numpy(bad)
            with pytest.raises(InferenceServerException):
                c.infer("gather_fault", [inp])
        good = httpclient.InferInput("INDEX", [1], "INT64")
        good.set_data_from_numpy(np.array([3], dtype=np.int64))
        assert c.infer("gather_fault", [good]).as_numpy("VALUE")[0] == 30.0
    s = stats(cache_server, "gather_fault")
    assert s["hit"] == 0 and s["miss"] == 1, s  # only the answer that succeeded went into the cache


def test_hits_and_misses_in_metrics(cache_server):
    s = stats(cache_server, "cached_add_sub")
    assert metric(cache_server, "ortserve_response_cache_lookups_total", model="cached_add_sub",
                  result="hit") == s["hit"]
    assert metric(cache_server, "ortserve_response_cache_lookups_total", model="cached_add_sub",
                  result="miss") == s["miss"]
    assert metric(cache_server, "ortserve_response_cache_capacity_bytes") == CACHE_BYTES
    used = metric(cache_server, "ortserve_response_cache_used_bytes")
    assert 0 < used <= CACHE_BYTES
    assert metric(cache_server, "ortserve_response_cache_entries") >= 1


def test_the_cache_stays_within_its_bytes_least_recently_used_out(launch, tmp_path):
    """Answers of 2x16 floats twice: each entry is well over 256 bytes, so a
    4 KiB cache holds a handful and must evict to take ten."""
    cached_add_sub(tmp_path)
    srv = launch(tmp_path, extra_args=("--cache-config=local,size=4096",))
    srv.wait_models_ready(["cached_add_sub"])
    for seed in range(10):
        http_infer(srv, *pair(100 + seed))
    assert metric(srv, "ortserve_response_cache_evictions_total") > 0
    assert metric(srv, "ortserve_response_cache_used_bytes") <= 4096
    entries = metric(srv, "ortserve_response_cache_entries")
    assert 1 <= entries < 10

    before = stats(srv, "cached_add_sub")
    http_infer(srv, *pair(109))  # the newest answer is still there
    http_infer(srv, *pair(100))  # the oldest was evicted
    after = stats(srv, "cached_add_sub")
    assert after["hit"] == before["hit"] + 1 and after["miss"] == before["miss"] + 1


def test_a_reloaded_or_unloaded_version_drops_its_answers(launch, tmp_path):
    write_addk(tmp_path, "addk", {1: 1.0}, extra=CACHE)
    srv = launch(tmp_path, extra_args=("--model-control-mode=explicit", "--load-model", "addk",
                                       "--allow-unauthenticated-model-control=true", "--cache-config",
                                       "local,size=65536"))
    srv.wait_models_ready(["addk"])
    client = httpclient.InferenceServerClient(srv.url)
    assert infer_k(client) == 1.0
    assert infer_k(client) == 1.0
    assert stats(srv, "addk")["hit"] == 1

    set_version(tmp_path / "addk", 1, 3.0)  # replaced: the old answers must not be served
    client.load_model("addk")
    assert infer_k(client) == 3.0
    assert stats(srv, "addk")["miss"] == 1 and stats(srv, "addk")["hit"] == 0
    assert metric(srv, "ortserve_response_cache_entries") == 1

    client.unload_model("addk")
    assert metric(srv, "ortserve_response_cache_entries") == 0
    assert metric(srv, "ortserve_response_cache_used_bytes") == 0


def test_without_a_server_cache_the_model_serves_and_the_log_says_so(launch, tmp_path):
    cached_add_sub(tmp_path)
    srv = launch(tmp_path)
    srv.wait_models_ready(["cached_add_sub"])
    http_infer(srv, *pair(4))
    http_infer(srv, *pair(4))
    assert stats(srv, "cached_add_sub")["hit"] == 0
    assert "response_cache is enabled but the server has no cache (--cache-config" in srv.log_text()


def test_a_sequence_model_with_response_cache_is_refused_in_tritons_words(triton_examples, launch, tmp_path):
    # Copied file by file: a copy of Triton's files may be read-only.
    source, model = triton_examples / "simple_sequence", tmp_path / "simple_sequence"
    (model / "1").mkdir(parents=True)
    shutil.copyfile(source / "1" / "model.onnx", model / "1" / "model.onnx")
    (model / "config.pbtxt").write_text((source / "config.pbtxt").read_text() + "\n" + CACHE + "\n")
    srv = launch(tmp_path, extra_args=("--cache-config=local,size=65536",))
    entry = next(e for e in srv.repository_index() if e["name"] == "simple_sequence")
    assert entry["state"] == "UNAVAILABLE"
    assert ("Response Cache does not currently support model simple_sequence with sequence batching scheduler. "
            "Please disable the response cache.") in entry["reason"]


def test_the_deprecated_byte_size_flag_still_works(launch, tmp_path):
    cached_add_sub(tmp_path)
    srv = launch(tmp_path, extra_args=("--response-cache-byte-size", "65536"))
    srv.wait_models_ready(["cached_add_sub"])
    http_infer(srv, *pair(5))
    http_infer(srv, *pair(5))
    assert stats(srv, "cached_add_sub")["hit"] == 1
    assert "'--response-cache-byte-size' has been deprecated!" in srv.log_text()


@pytest.mark.parametrize("args, message", [
    (("--cache-config", "redis,host=localhost"), "ortserve has only the 'local' cache"),
    (("--cache-config", "local,bytes=10"), "the local cache's only setting is size"),
    (("--cache-config", "local,size=lots"), "size must be a non-negative integer"),
    (("--cache-config", "size=10"), "No cache specified. --cache-config option format is"),
    (("--cache-config", "local,size=10", "--response-cache-byte-size", "10"),
     "Incompatible flags --response-cache-byte-size and --cache-config both provided"),
])
def test_a_bad_cache_flag_stops_the_start(tmp_path, args, message):
    proc = subprocess.run([str(ortserve_binary()), "--model-repository", str(tmp_path), "--http-port", "0",
                           "--grpc-port", "0", "--metrics-port", "0", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
