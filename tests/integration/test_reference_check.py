"""Reference check at load (reference_* parameters, issue 34): an INT8 version
made by onnxruntime's own quantize_dynamic from an FP32 MLP classifier is
compared, before it becomes READY, with the FP32 file of its version folder.
At a sane tolerance it serves (its answers checked against onnxruntime); at a
tolerance tighter than quantization allows it stays UNAVAILABLE with the
figures in its reason, visible in the repository index, GET config and
readiness. Every bad reference_* parameter names itself. The same INT8 file
also serves as its own model with reference_model "model:<name>" naming the
FP32 file served as another model of the repository.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import tritonclient.http as httpclient

from harness import Reference
from onnx import TensorProto, helper

from quantization_helpers import CLASSES, FEATURES, demo, quantize_mlp
from test_rollout import params

CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ {features} ] }} ]
output [ {{ name: "logits" data_type: TYPE_FP32 dims: [ {classes} ] }} ]
model_warmup [ {{ name: "random" batch_size: 16 count: 1
  inputs {{ key: "x" value {{ data_type: TYPE_FP32 dims: [ {features} ] random_data: true }} }} }} ]
{params}
"""


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """(fp32 path, int8 path): the INT8 file is quantize_dynamic's output."""
    return quantize_mlp(tmp_path_factory.mktemp("quant"))


def write_model(repo, name, model_file, extra="", classes=CLASSES):
    d = repo / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(CONFIG.format(name=name, features=FEATURES, classes=classes, params=extra))
    (d / "1" / "model.onnx").write_bytes(model_file.read_bytes())
    return d


def write_int8_model(repo, name, quantized, extra, samples=None):
    fp32, int8 = quantized
    d = write_model(repo, name, int8, extra)
    (d / "1" / "model_fp32.onnx").write_bytes(fp32.read_bytes())
    if samples is not None:
        (d / "ref").mkdir()
        np.save(d / "ref" / "x.npy", samples)


def index_entry(srv, name):
    entry = [e for e in srv.repository_index() if e["name"] == name]
    assert len(entry) == 1, entry
    return entry[0]


def test_int8_version_passes_at_a_sane_tolerance_and_fails_when_too_tight(launch, tmp_path, quantized):
    rng = np.random.default_rng(3)
    samples = rng.random((64, FEATURES), dtype=np.float32)
    ref = Reference()
    fp32_out = ref.run(quantized[0], {"x": samples})["logits"]
    int8_out = ref.run(quantized[1], {"x": samples})["logits"]
    diff = float(np.abs(int8_out - fp32_out).max())
    assert diff > 1e-4, diff  # quantization changed the math: a tight tolerance must fail

    repo = tmp_path / "repo"
    write_int8_model(repo, "int8_ok", quantized,
                     params(reference_model="model_fp32.onnx", reference_tolerance=str(max(0.5, 4 * diff)),
                            reference_min_agreement="0.8"))
    write_int8_model(repo, "int8_tight", quantized,
                     params(reference_model="model_fp32.onnx", reference_tolerance="1e-7"))
    write_int8_model(repo, "int8_samples", quantized,
                     params(reference_model="model_fp32.onnx", reference_samples="ref", reference_tolerance="1e-7",
                            reference_min_agreement="0.5"), samples=samples)
    srv = launch(repo)
    srv.wait_models_ready(["int8_ok"])

    # Passed: READY, and it answers as onnxruntime runs the INT8 file.
    client = httpclient.InferenceServerClient(srv.url)
    x = rng.random((4, FEATURES), dtype=np.float32)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    got = client.infer("int8_ok", [inp]).as_numpy("logits")
    np.testing.assert_allclose(got, ref.run(quantized[1], {"x": x})["logits"], rtol=1e-5, atol=1e-5)
    assert "reference check against 'model_fp32.onnx' on 1 sample(s) passed" in srv.log_text()

    # Too tight: UNAVAILABLE, the figures in its reason, everywhere the state shows.
    entry = index_entry(srv, "int8_tight")
    assert entry["state"] == "UNAVAILABLE", entry
    reason = entry["reason"]
    assert "output 'logits': max abs diff" in reason and "top-1 agreement" in reason, reason
    assert "reference_tolerance 1e-07" in reason, reason
    assert srv.get("/v2/models/int8_tight/ready").status_code != 200
    config = srv.get("/v2/models/int8_tight/config")
    assert config.status_code != 200 and "max abs diff" in config.text, config.text

    # On the reference_samples folder the figures are those onnxruntime gives.
    reason = index_entry(srv, "int8_samples")["reason"]
    m = re.search(r"max abs diff ([0-9.e+-]+), top-1 agreement ([0-9.e+-]+) \((\d+)/(\d+)\)", reason)
    assert m, reason
    assert float(m.group(1)) == pytest.approx(diff, rel=0.05), (reason, diff)
    agreeing = int((int8_out.argmax(1) == fp32_out.argmax(1)).sum())
    assert abs(int(m.group(3)) - agreeing) <= 1 and int(m.group(4)) == 64, (reason, agreeing)
    assert "reference check against 'model_fp32.onnx' on 1 sample(s) failed" in reason, reason


BAD = {
    "bad_negative": (dict(reference_model="model_fp32.onnx", reference_tolerance="-1"), "reference_tolerance"),
    "bad_nan": (dict(reference_model="model_fp32.onnx", reference_tolerance="x"), "reference_tolerance"),
    "bad_agreement": (dict(reference_model="model_fp32.onnx", reference_min_agreement="1.5"),
                      "reference_min_agreement"),
    "bad_escape": (dict(reference_model="../model_fp32.onnx", reference_tolerance="1"), "reference_model"),
    "bad_missing": (dict(reference_model="missing.onnx", reference_tolerance="1"), "reference_model"),
    "bad_no_threshold": (dict(reference_model="model_fp32.onnx"), "reference_tolerance"),
    "bad_no_model": (dict(reference_tolerance="1"), "reference_model"),
    "bad_samples": (dict(reference_model="model_fp32.onnx", reference_tolerance="1", reference_samples="nowhere"),
                    "reference_samples"),
}


def test_every_bad_reference_parameter_names_itself(launch, tmp_path, quantized):
    repo = tmp_path / "repo"
    for name, (extra, _) in BAD.items():
        write_int8_model(repo, name, quantized, params(**extra))
    ensemble = repo / "bad_ensemble"
    (ensemble / "1").mkdir(parents=True)
    (ensemble / "config.pbtxt").write_text(f"""
name: "bad_ensemble"
platform: "ensemble"
max_batch_size: 16
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]
output [ {{ name: "logits" data_type: TYPE_FP32 dims: [ {CLASSES} ] }} ]
ensemble_scheduling {{ step [ {{ model_name: "bad_nan" model_version: -1
  input_map {{ key: "x" value: "x" }} output_map {{ key: "logits" value: "logits" }} }} ] }}
""" + params(reference_model="model_fp32.onnx", reference_tolerance="1"))
    srv = launch(repo)
    assert "ensemble" in index_entry(srv, "bad_ensemble")["reason"]
    for name, (_, named) in BAD.items():
        entry = index_entry(srv, name)
        assert entry["state"] == "UNAVAILABLE" and named in entry["reason"], entry


def write_identity_model(repo, name):
    """x -> logits unchanged: the inputs of the MLP, but FEATURES logits, not CLASSES."""
    model = demo.make_model([helper.make_node("Identity", ["x"], ["logits"])],
                            [("x", TensorProto.FLOAT, ["batch", FEATURES])],
                            [("logits", TensorProto.FLOAT, ["batch", FEATURES])], [], name="identity")
    path = repo.parent / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    write_model(repo, name, path, classes=FEATURES)


def test_int8_model_checked_against_the_fp32_model_served_beside_it(launch, tmp_path, quantized):
    """reference_model "model:<name>": "ref_fp32" sorts after the INT8 models, so
    it passing shows the referenced model loads first."""
    fp32, int8 = quantized
    rng = np.random.default_rng(5)
    x = rng.random((16, FEATURES), dtype=np.float32)
    ref = Reference()
    diff = float(np.abs(ref.run(int8, {"x": x})["logits"] - ref.run(fp32, {"x": x})["logits"]).max())
    assert diff > 1e-4, diff
    repo = tmp_path / "repo"
    write_model(repo, "ref_fp32", fp32)
    write_identity_model(repo, "other_shape")
    models = {
        "int8_ok": params(reference_model="model:ref_fp32", reference_tolerance=str(max(0.5, 8 * diff)),
                          reference_min_agreement="0.5"),
        "int8_tight": params(reference_model="model:ref_fp32/1", reference_tolerance="1e-7"),
        "int8_missing": params(reference_model="model:nowhere", reference_tolerance="1"),
        "int8_other_version": params(reference_model="model:ref_fp32/2", reference_tolerance="1"),
        "int8_incompatible": params(reference_model="model:other_shape", reference_tolerance="1"),
        "cycle_a": params(reference_model="model:cycle_b", reference_tolerance="1"),
        "cycle_b": params(reference_model="model:cycle_a", reference_tolerance="1"),
    }
    for name, extra in models.items():
        write_model(repo, name, int8, extra)
    srv = launch(repo)
    srv.wait_models_ready(["int8_ok", "ref_fp32"])

    client = httpclient.InferenceServerClient(srv.url)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    np.testing.assert_allclose(client.infer("int8_ok", [inp]).as_numpy("logits"), ref.run(int8, {"x": x})["logits"],
                               rtol=1e-5, atol=1e-5)
    assert "reference check against model 'ref_fp32' on 1 sample(s) passed" in srv.log_text()

    reason = index_entry(srv, "int8_tight")["reason"]
    assert "reference check against model 'ref_fp32' version 1 on 1 sample(s) failed" in reason, reason
    assert re.search(r"output 'logits': max abs diff [0-9.e+-]+, top-1 agreement", reason), reason
    assert "reference_tolerance 1e-07" in reason, reason
    expected = {
        "int8_missing": "parameter 'reference_model': model 'nowhere' is not READY",
        "int8_other_version": "parameter 'reference_model': model 'ref_fp32' version 2 is not READY",
        "int8_incompatible": "model 'other_shape' does not match this model: output 'logits' has dims [32], "
                             "this model's [10]",
        "cycle_a": "circular reference between models: cycle_a -> cycle_b -> cycle_a",
        "cycle_b": "circular reference between models: cycle_b -> cycle_a -> cycle_b",
    }
    for name, why in expected.items():
        entry = index_entry(srv, name)
        assert entry["state"] == "UNAVAILABLE" and why in entry["reason"], entry
    # The check ran on a private session: the reference served no request.
    stats = srv.model_stats("ref_fp32")
    assert stats["inference_count"] == 0 and stats["execution_count"] == 0, stats


def test_explicit_mode_needs_the_referenced_model_loaded_first(launch, tmp_path, quantized):
    fp32, int8 = quantized
    repo = tmp_path / "repo"
    write_model(repo, "ref_fp32", fp32)
    write_model(repo, "int8", int8, params(reference_model="model:ref_fp32", reference_tolerance="0.5"))
    srv = launch(repo, extra_args=("--model-control-mode=explicit", "--load-model", "int8",
                                   "--allow-unauthenticated-model-control=true"))
    entry = index_entry(srv, "int8")
    assert entry["state"] == "UNAVAILABLE" and "model 'ref_fp32' is not READY" in entry["reason"], entry
    assert srv.post("/v2/repository/models/ref_fp32/load").status_code == 200
    assert srv.post("/v2/repository/models/int8/load").status_code == 200
    assert index_entry(srv, "int8")["state"] == "READY"


def test_on_demand_load_loads_the_referenced_model_first(launch, tmp_path, quantized):
    fp32, int8 = quantized
    repo = tmp_path / "repo"
    write_model(repo, "ref_fp32", fp32)
    write_model(repo, "int8", int8, params(reference_model="model:ref_fp32", reference_tolerance="0.5"))
    srv = launch(repo, extra_args=("--model-load-on-demand=true",))
    x = np.random.default_rng(9).random((2, FEATURES), dtype=np.float32)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    got = httpclient.InferenceServerClient(srv.url).infer("int8", [inp]).as_numpy("logits")
    np.testing.assert_allclose(got, Reference().run(int8, {"x": x})["logits"], rtol=1e-5, atol=1e-5)
    assert index_entry(srv, "ref_fp32")["state"] == "READY"
    assert "model 'int8': loading its reference model 'ref_fp32'" in srv.log_text()


def test_poll_mode_retries_a_model_once_its_reference_arrives(launch, tmp_path, quantized):
    fp32, int8 = quantized
    repo, staging = tmp_path / "repo", tmp_path / "staging"
    write_model(staging, "ref_fp32", fp32)
    write_model(repo, "int8", int8, params(reference_model="model:ref_fp32", reference_tolerance="0.5"))
    srv = launch(repo, extra_args=("--model-control-mode=poll", "--repository-poll-secs", "1"))
    entry = index_entry(srv, "int8")
    assert entry["state"] == "UNAVAILABLE" and "model 'ref_fp32' is not READY" in entry["reason"], entry
    (staging / "ref_fp32").rename(repo / "ref_fp32")  # moved in whole
    srv.wait_models_ready(["ref_fp32", "int8"], timeout_s=60)
