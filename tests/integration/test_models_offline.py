"""Checks on the demo and test repositories that need no server: every model
that must serve loads and runs in onnxruntime, its config.pbtxt parses as a
Triton ModelConfig and agrees with the ONNX file; every model that must fail,
fails for the intended reason. These keep the server tests honest."""
from __future__ import annotations

import pathlib
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from harness import (DEMO_REPO, REPO_ROOT, TRITON_EXAMPLE_MODELS, Reference, fp32_to_bf16_bits,
                     make_test_models, model_file, sample_array, tritons_own_examples)

pytestmark = [pytest.mark.offline, pytest.mark.timeout(120)]

ONNX_TO_KSERVE = {v[0]: k for k, v in make_test_models.DATATYPES.items()}


def parse_config(model_dir: pathlib.Path) -> model_config_pb2.ModelConfig:
    return text_format.Parse((model_dir / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())


def onnx_io(path: pathlib.Path):
    model = onnx.load(str(path))
    def describe(values):
        return {v.name: (ONNX_TO_KSERVE[v.type.tensor_type.elem_type],
                         [d.dim_value if d.HasField("dim_value") else -1
                          for d in v.type.tensor_type.shape.dim]) for v in values}
    return describe(model.graph.input), describe(model.graph.output)


def control_inputs(config: model_config_pb2.ModelConfig) -> list:
    """The sequence batcher's control inputs as the model sees them: one
    value per batch row, INT32 for the flags (int32_false_true), CORRID's
    own data type."""
    tensors = []
    for control_input in config.sequence_batching.control_input:
        control = control_input.control[0]
        data_type = control.data_type if control.data_type else model_config_pb2.TYPE_INT32
        tensors.append(model_config_pb2.ModelInput(name=control_input.name, data_type=data_type, dims=[1]))
    return tensors


def check_config_matches_onnx(model_dir: pathlib.Path, version: int = 1) -> None:
    config = parse_config(model_dir)
    assert config.name == model_dir.name
    inputs, outputs = onnx_io(model_file(model_dir.parent, model_dir.name, version))
    for entries, io in ((list(config.input) + control_inputs(config), inputs), (config.output, outputs)):
        assert {e.name for e in entries} == set(io), (model_dir.name, list(io))
        for e in entries:
            dtype, onnx_shape = io[e.name]
            assert model_config_pb2.DataType.Name(e.data_type) == \
                make_test_models.DATATYPES[dtype][1]
            model_dims = list(e.reshape.shape) if e.HasField("reshape") else list(e.dims)
            full = ([-1] if config.max_batch_size > 0 else []) + model_dims
            assert len(full) == len(onnx_shape), (e.name, full, onnx_shape)
            for c, o in zip(full, onnx_shape):
                assert o == -1 or c == o, (e.name, full, onnx_shape)


def sample_feeds(path: pathlib.Path, batch: int = 2, seed: int = 0) -> dict:
    """Deterministic inputs for every graph input; dynamic dims become `batch`."""
    inputs, _ = onnx_io(path)
    return {name: sample_array(dt, [batch if d < 0 else d for d in shape], seed)
            for name, (dt, shape) in inputs.items()}


def run_with_samples(path: pathlib.Path, batch: int = 2, seed: int = 0) -> dict:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outs = session.run(None, sample_feeds(path, batch, seed))
    return dict(zip([o.name for o in session.get_outputs()], outs))


@pytest.fixture(scope="module")
def offline_repo(tmp_path_factory):
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("offline_models"))


# ---------------------------------------------------------------- demo models

def test_demo_repository_is_reproducible(tmp_path):
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import make_demo_models
    make_demo_models.build_demo_repository(tmp_path)
    committed = sorted(p.relative_to(DEMO_REPO) for p in DEMO_REPO.rglob("*") if p.is_file())
    regenerated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert committed == regenerated
    for rel in committed:
        assert (DEMO_REPO / rel).read_bytes() == (tmp_path / rel).read_bytes(), rel
        assert (DEMO_REPO / rel).stat().st_size < 100 * 1024, rel


@pytest.mark.parametrize("model", ["mlp_classifier", "image_normalize", "greeting"])
def test_demo_config_matches_onnx(model):
    check_config_matches_onnx(DEMO_REPO / model)


def test_demo_mlp_classifier_outputs_are_probabilities():
    out = run_with_samples(model_file(DEMO_REPO, "mlp_classifier"), batch=5)
    np.testing.assert_allclose(out["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out["label"][:, 0], out["probabilities"].argmax(axis=1))


def test_demo_image_normalize_reference():
    image = sample_array("FP32", (3, 8, 8)) + 128
    session = ort.InferenceSession(str(model_file(DEMO_REPO, "image_normalize")))
    got = session.run(None, {"image": image.astype(np.float32)})[0]
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)
    np.testing.assert_allclose(got, (image / 255 - mean) / std, rtol=1e-5, atol=1e-5)


def test_demo_greeting_strings():
    session = ort.InferenceSession(str(model_file(DEMO_REPO, "greeting")))
    got = session.run(None, {"name": np.array([["ada"], ["ünï"]], dtype=object)})[0]
    assert got.tolist() == [["Hello, ada!"], ["Hello, ünï!"]]


def test_demo_linear_has_no_config_and_dynamic_batch():
    assert not (DEMO_REPO / "linear_autoconfig" / "config.pbtxt").exists()
    inputs, outputs = onnx_io(model_file(DEMO_REPO, "linear_autoconfig"))
    assert inputs == {"x": ("FP32", [-1, 8])} and outputs == {"y": ("FP32", [-1, 2])}


# ---------------------------------------------------------------- Triton's example repository

TRITON_EXAMPLES_COPY = REPO_ROOT / "tests" / "data" / "triton-examples"


def test_triton_examples_copy_is_reproducible(generated_triton_examples):
    """tests/data/triton-examples (the C++ unit tests' copy) is what
    scripts/make_triton_examples.py writes."""
    committed = sorted(p.relative_to(TRITON_EXAMPLES_COPY) for p in TRITON_EXAMPLES_COPY.rglob("*") if p.is_file())
    regenerated = sorted(p.relative_to(generated_triton_examples)
                         for p in generated_triton_examples.rglob("*") if p.is_file())
    assert committed == regenerated
    for rel in committed:
        assert (TRITON_EXAMPLES_COPY / rel).read_bytes() == (generated_triton_examples / rel).read_bytes(), rel


@pytest.mark.parametrize("model", TRITON_EXAMPLE_MODELS)
def test_triton_example_config_matches_onnx(triton_examples, model):
    check_config_matches_onnx(triton_examples / model)


def triton_example_feeds(model: str, rng: np.random.Generator, batch: int) -> dict:
    """Inputs over each type's whole range (sums that overflow included)."""
    def ints(dtype, shape):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if model in ("simple", "simple_int8"):
        dtype = np.int32 if model == "simple" else np.int8
        return {n: ints(dtype, (batch, 16)) for n in ("INPUT0", "INPUT1")}
    if model == "simple_string":
        return {n: ints(np.int32, (batch, 16)).astype(str).astype(np.object_) for n in ("INPUT0", "INPUT1")}
    flag = lambda: rng.integers(0, 2, (batch, 1), dtype=np.int32)
    feeds = {"INPUT": ints(np.int32, (batch, 1)), "START": flag(), "READY": flag()}
    if model == "simple_dyna_sequence":
        feeds.update(END=flag(), CORRID=ints(np.uint64, (batch, 1)))
    return feeds


@pytest.mark.parametrize("model", TRITON_EXAMPLE_MODELS)
def test_generated_triton_example_is_tritons_model(generated_triton_examples, model):
    """The generated model has Triton's config (field by field), Triton's
    tensors, and computes what Triton's file computes, on the same inputs."""
    tritons = tritons_own_examples()
    assert parse_config(generated_triton_examples / model) == parse_config(tritons / model)
    ours = ort.InferenceSession(str(model_file(generated_triton_examples, model)), providers=["CPUExecutionProvider"])
    theirs = ort.InferenceSession(str(model_file(tritons, model)), providers=["CPUExecutionProvider"])
    signature = lambda s: ([(t.name, t.type, t.shape) for t in s.get_inputs()],
                           [(t.name, t.type, t.shape) for t in s.get_outputs()])
    assert signature(ours) == signature(theirs)
    rng = np.random.default_rng(7)
    for batch in (1, 3, 8):
        feeds = triton_example_feeds(model, rng, batch)
        for got, expected in zip(ours.run(None, feeds), theirs.run(None, feeds)):
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected, err_msg=f"{model}, batch {batch}")


# ---------------------------------------------------------------- test models

@pytest.mark.parametrize("model", make_test_models.MODELS_THAT_SERVE + ["unsupported_field"])
def test_serving_models_load_and_run_in_onnxruntime(offline_repo, model):
    versions = sorted(int(p.name) for p in (offline_repo / model).iterdir() if p.name.isdigit())
    assert versions
    for v in versions:
        path = model_file(offline_repo, model, v)
        if model == "identity_bf16":
            bits = fp32_to_bf16_bits(sample_array("BF16", (2, 3)))
            out = Reference().run_bf16(path, {"INPUT0": bits})
            np.testing.assert_array_equal(out["OUTPUT0"], bits)
            continue
        outs = run_with_samples(path).values()
        for o in outs:
            if o.dtype.kind == "f":
                assert np.isfinite(o).all(), model
        if (offline_repo / model / "config.pbtxt").exists():
            check_config_matches_onnx(offline_repo / model, v)


def test_identity_models_cover_every_datatype(offline_repo):
    for dt in make_test_models.DATATYPES:
        inputs, _ = onnx_io(model_file(offline_repo, f"identity_{dt.lower()}"))
        assert inputs["INPUT0"][0] == dt


def test_versioned_add_versions_differ(offline_repo):
    x = np.zeros((1, 4), np.float32)
    for v in (1, 2, 3):
        session = ort.InferenceSession(str(model_file(offline_repo, "versioned_add", v)))
        np.testing.assert_array_equal(session.run(None, {"INPUT0": x})[0], x + v)
    assert parse_config(offline_repo / "versioned_add").version_policy.latest.num_versions == 2


def test_queue_configs(offline_repo):
    q2 = parse_config(offline_repo / "slow_queue2")
    assert q2.dynamic_batching.default_queue_policy.max_queue_size == 2
    assert q2.instance_group[0].count == 1
    slow = parse_config(offline_repo / "slow")
    assert slow.dynamic_batching.default_queue_policy.allow_timeout_override
    assert parse_config(offline_repo / "unsupported_field").instance_group[0].HasField("rate_limiter")
    batching = parse_config(offline_repo / "mlp_batching")
    assert batching.dynamic_batching.max_queue_delay_microseconds >= 20000


def test_corrupt_model_does_not_load(offline_repo):
    with pytest.raises(Exception):
        ort.InferenceSession(str(model_file(offline_repo, "corrupt_model")))
    parse_config(offline_repo / "corrupt_model")  # the config itself is fine


def test_malformed_config_reports_line_and_column(offline_repo):
    with pytest.raises(text_format.ParseError) as err:
        parse_config(offline_repo / "malformed_config")
    assert re.search(r"\d+:\d+", str(err.value))


def test_bad_input_name_config_disagrees_with_onnx(offline_repo):
    inputs, _ = onnx_io(model_file(offline_repo, "bad_input_name"))
    assert parse_config(offline_repo / "bad_input_name").input[0].name == "NOPE"
    assert "NOPE" not in inputs


def test_no_version_has_no_version_dir(offline_repo):
    assert not [p for p in (offline_repo / "no_version").iterdir() if p.is_dir()]
    parse_config(offline_repo / "no_version")
