"""Triton ensembles (`platform: "ensemble"`): a four-step graph with a
fan-out and a fan-in, written out of order in its config, served over HTTP
and gRPC and compared with onnxruntime running the steps one after another;
every load-time graph error (named step or tensor) with the server serving
the other models; a step failing at request time with the step named;
readiness following the composing models; statistics and metrics of the
ensemble and of each composing model."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper

from harness import HTTP_TIMEOUT_S, REPO_ROOT, assert_matches

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import make_demo_models as demo  # noqa: E402

pytestmark = pytest.mark.timeout(300)

FP32 = TensorProto.FLOAT
VEC = ["batch", 4]


def _write(repo: pathlib.Path, name: str, config: str, model=None) -> None:
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config)
    if model is not None:
        (repo / name / "1" / "model.onnx").write_bytes(model.SerializeToString())


def _io(kind: str, name: str, dtype: str, dims) -> str:
    return f'{kind} {{ name: "{name}" data_type: {dtype} dims: [ {", ".join(map(str, dims))} ] }}\n'


def _onnx_config(name: str, mbs: int, inputs, outputs) -> str:
    text = f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: {mbs}\n'
    text += "".join(_io("input", n, t, d) for n, t, d in inputs)
    return text + "".join(_io("output", n, t, d) for n, t, d in outputs)


def _step(model: str, inputs: dict, outputs: dict) -> str:
    ins = " ".join(f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    outs = " ".join(f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: -1 {ins} {outs} }}'


def _ensemble(name: str, mbs: int, inputs, outputs, steps) -> str:
    text = f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {mbs}\n'
    text += "".join(_io("input", n, t, d) for n, t, d in inputs)
    text += "".join(_io("output", n, t, d) for n, t, d in outputs)
    return text + "ensemble_scheduling { step [ " + ", ".join(steps) + " ] }\n"


F4 = ("TYPE_FP32", [4])


def build_composing(repo: pathlib.Path) -> None:
    """The composing models: add, times two, negate (batching, [4]); a
    non-batching negate and a Reshape whose target shape is an input; an
    INT32 identity and a [3] identity for the type and shape mismatches."""
    add = demo.make_model([helper.make_node("Add", ["A", "B"], ["C"])],
                          [("A", FP32, VEC), ("B", FP32, VEC)], [("C", FP32, VEC)], name="ens_add")
    _write(repo, "ens_add", _onnx_config("ens_add", 8, [("A", *F4), ("B", *F4)], [("C", *F4)]), add)
    two = helper.make_tensor("two", FP32, [], [2.0])
    mul2 = demo.make_model([helper.make_node("Mul", ["X", "two"], ["Y"])], [("X", FP32, VEC)],
                           [("Y", FP32, VEC)], initializers=[two], name="ens_mul2")
    _write(repo, "ens_mul2", _onnx_config("ens_mul2", 8, [("X", *F4)], [("Y", *F4)]), mul2)
    neg = demo.make_model([helper.make_node("Neg", ["X"], ["Y"])], [("X", FP32, VEC)], [("Y", FP32, VEC)],
                          name="ens_neg")
    _write(repo, "ens_neg", _onnx_config("ens_neg", 8, [("X", *F4)], [("Y", *F4)]), neg)
    neg_nb = demo.make_model([helper.make_node("Neg", ["X"], ["Y"])], [("X", FP32, [4])], [("Y", FP32, [4])],
                             name="ens_neg_nb")
    _write(repo, "ens_neg_nb", _onnx_config("ens_neg_nb", 0, [("X", *F4)], [("Y", *F4)]), neg_nb)
    # Reshape to S + [4, 1]: the default warm-up's zeros give [4, 1].
    offset = helper.make_tensor("offset", TensorProto.INT64, [2], [4, 1])
    reshape = demo.make_model([helper.make_node("Add", ["S", "offset"], ["target"]),
                               helper.make_node("Reshape", ["X", "target"], ["Y"])],
                              [("X", FP32, [4]), ("S", TensorProto.INT64, [2])], [("Y", FP32, ["r", "c"])],
                              initializers=[offset], name="ens_reshape")
    _write(repo, "ens_reshape", _onnx_config("ens_reshape", 0, [("X", *F4), ("S", "TYPE_INT64", [2])],
                                             [("Y", "TYPE_FP32", [-1, -1])]), reshape)
    ident_int = demo.make_model([helper.make_node("Identity", ["X"], ["Y"])], [("X", TensorProto.INT32, VEC)],
                                [("Y", TensorProto.INT32, VEC)], name="ens_int")
    _write(repo, "ens_int", _onnx_config("ens_int", 8, [("X", "TYPE_INT32", [4])], [("Y", "TYPE_INT32", [4])]),
           ident_int)
    ident3 = demo.make_model([helper.make_node("Identity", ["X"], ["Y"])], [("X", FP32, ["batch", 3])],
                             [("Y", FP32, ["batch", 3])], name="ens_three")
    _write(repo, "ens_three", _onnx_config("ens_three", 8, [("X", "TYPE_FP32", [3])], [("Y", "TYPE_FP32", [3])]),
           ident3)


# The diamond, its steps listed out of order: step 3 runs first, steps 1
# and 2 both consume its output (fan-out), step 0 joins them (fan-in).
DIAMOND_STEPS = [
    _step("ens_add", {"A": "doubled", "B": "negated"}, {"C": "OUT"}),
    _step("ens_mul2", {"X": "sum"}, {"Y": "doubled"}),
    _step("ens_neg", {"X": "sum"}, {"Y": "negated"}),
    _step("ens_add", {"A": "IN0", "B": "IN1"}, {"C": "sum"}),
]
DIAMOND_IO = ([("IN0", *F4), ("IN1", *F4)], [("OUT", *F4), ("negated", *F4)])

# The failing ensemble: a non-batching negate, then a Reshape to SHAPE + [4, 1].
FAIL_STEPS = [
    _step("ens_neg_nb", {"X": "IN"}, {"Y": "neg"}),
    _step("ens_reshape", {"X": "neg", "S": "SHAPE"}, {"Y": "OUT"}),
]
FAIL_IO = ([("IN", *F4), ("SHAPE", "TYPE_INT64", [2])], [("OUT", "TYPE_FP32", [-1, -1])])

# Each bad ensemble: its config and what its load error must say.
ONE_IN = [("IN0", *F4)]
ONE_OUT = [("OUT", *F4)]
BAD = {
    "bad_unknown_model": (_ensemble("bad_unknown_model", 8, ONE_IN, ONE_OUT,
                                    [_step("no_such_model", {"X": "IN0"}, {"Y": "OUT"})]),
                          ["depends on 'no_such_model' which has no loaded version"]),
    "bad_unconnected": (_ensemble("bad_unconnected", 8, ONE_IN, ONE_OUT,
                                  [_step("ens_add", {"A": "IN0", "B": "ghost"}, {"C": "OUT"})]),
                        ["output 'OUT' for ensemble 'bad_unconnected' is not written", "'ghost'"]),
    "bad_twice_produced": (_ensemble("bad_twice_produced", 8, ONE_IN, ONE_OUT,
                                     [_step("ens_neg", {"X": "IN0"}, {"Y": "OUT"}),
                                      _step("ens_mul2", {"X": "IN0"}, {"Y": "OUT"})]),
                           ["ensemble tensor 'OUT' can appear in an output map only once", "step 1",
                            "step 0 (model 'ens_neg')"]),
    "bad_input_unused": (_ensemble("bad_input_unused", 8, [("IN0", *F4), ("EXTRA", *F4)], ONE_OUT,
                                   [_step("ens_neg", {"X": "IN0"}, {"Y": "OUT"})]),
                         ["ensemble input 'EXTRA'", "is not used"]),
    "bad_output_unproduced": (_ensemble("bad_output_unproduced", 8, ONE_IN, [("OUT", *F4), ("NOPE", *F4)],
                                        [_step("ens_neg", {"X": "IN0"}, {"Y": "OUT"})]),
                              ["ensemble output 'NOPE'", "is not used"]),
    "bad_cycle": (_ensemble("bad_cycle", 8, ONE_IN, ONE_OUT,
                            [_step("ens_add", {"A": "IN0", "B": "t1"}, {"C": "t0"}),
                             _step("ens_mul2", {"X": "t0"}, {"Y": "t1"}),
                             _step("ens_neg", {"X": "t0"}, {"Y": "OUT"})]),
                  ["has a cycle", "step 0 (model 'ens_add') -> step 1 (model 'ens_mul2') -> step 0"]),
    "bad_dtype": (_ensemble("bad_dtype", 8, ONE_IN, [("OUT", "TYPE_INT32", [4])],
                            [_step("ens_int", {"X": "IN0"}, {"Y": "OUT"})]),
                  ["step 0 (model 'ens_int')", "ensemble tensor IN0", "inconsistent data type",
                   "TYPE_FP32", "TYPE_INT32"]),
    "bad_shape": (_ensemble("bad_shape", 8, ONE_IN, [("OUT", "TYPE_FP32", [3])],
                            [_step("ens_three", {"X": "IN0"}, {"Y": "OUT"})]),
                  ["step 0 (model 'ens_three')", "ensemble tensor IN0", "inconsistent shape", "[-1,4]",
                   "[-1,3]"]),
    # Two ensembles whose steps run each other: Triton's words for each.
    "bad_loop_a": (_ensemble("bad_loop_a", 8, ONE_IN, ONE_OUT, [_step("bad_loop_b", {"IN0": "IN0"}, {"OUT": "OUT"})]),
                   ["circular dependency between ensembles: bad_loop_a -> ... -> bad_loop_b -> bad_loop_a"]),
    "bad_loop_b": (_ensemble("bad_loop_b", 8, ONE_IN, ONE_OUT, [_step("bad_loop_a", {"IN0": "IN0"}, {"OUT": "OUT"})]),
                   ["circular dependency between ensembles: bad_loop_b -> ... -> bad_loop_a -> bad_loop_b"]),
    "bad_unmapped_input": (_ensemble("bad_unmapped_input", 8, ONE_IN, ONE_OUT,
                                     [_step("ens_add", {"A": "IN0"}, {"C": "OUT"})]),
                           ["step 0 (model 'ens_add')", "input B in model ens_add is not mapped to any "
                                                        "ensemble tensors"]),
}


@pytest.fixture(scope="module")
def ensemble_repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("ensemble_models")
    build_composing(repo)
    _write(repo, "ens_diamond", _ensemble("ens_diamond", 8, *DIAMOND_IO, DIAMOND_STEPS))
    _write(repo, "ens_fail", _ensemble("ens_fail", 0, *FAIL_IO, FAIL_STEPS))
    # An ensemble of an ensemble: loads after it, whatever the directory order.
    _write(repo, "aa_nested", _ensemble("aa_nested", 4, *DIAMOND_IO[:1], [("OUT", *F4), ("NEG", *F4)],
                                        [_step("ens_diamond", {"IN0": "IN0", "IN1": "IN1"},
                                               {"OUT": "OUT", "negated": "NEG"})]))
    for name, (config, _) in BAD.items():
        _write(repo, name, config)
    return repo


@pytest.fixture(scope="module")
def srv(ensemble_repo, log_dir):
    from harness import start_server
    server = start_server(ensemble_repo, log_dir, "ensemble")
    try:
        server.wait_models_ready(["ens_add", "ens_diamond", "ens_fail", "aa_nested"])
        yield server
    finally:
        server.stop()


def reference_diamond(repo, reference, in0, in1):
    """onnxruntime, the steps one after another."""
    def run(model, feeds):
        return reference.run(repo / model / "1" / "model.onnx", feeds)
    total = run("ens_add", {"A": in0, "B": in1})["C"]
    doubled = run("ens_mul2", {"X": total})["Y"]
    negated = run("ens_neg", {"X": total})["Y"]
    return run("ens_add", {"A": doubled, "B": negated})["C"], negated


def diamond_inputs(seed: int, rows: int = 3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, 4)).astype(np.float32), rng.standard_normal((rows, 4)).astype(np.float32))


def test_diamond_over_http_matches_the_steps_run_in_turn(srv, ensemble_repo, reference):
    client = httpclient.InferenceServerClient(srv.url)
    for seed in range(3):
        in0, in1 = diamond_inputs(seed)
        inputs = [httpclient.InferInput("IN0", list(in0.shape), "FP32"),
                  httpclient.InferInput("IN1", list(in1.shape), "FP32")]
        inputs[0].set_data_from_numpy(in0, binary_data=True)
        inputs[1].set_data_from_numpy(in1, binary_data=(seed % 2 == 0))
        result = client.infer("ens_diamond", inputs)
        out, negated = reference_diamond(ensemble_repo, reference, in0, in1)
        assert_matches(result.as_numpy("OUT"), out)
        assert_matches(result.as_numpy("negated"), negated)
        assert result.get_response()["model_name"] == "ens_diamond"


def test_an_ensemble_of_an_ensemble(srv, ensemble_repo, reference):
    client = httpclient.InferenceServerClient(srv.url)
    in0, in1 = diamond_inputs(5, rows=4)
    inputs = [httpclient.InferInput("IN0", [4, 4], "FP32"), httpclient.InferInput("IN1", [4, 4], "FP32")]
    inputs[0].set_data_from_numpy(in0)
    inputs[1].set_data_from_numpy(in1)
    result = client.infer("aa_nested", inputs)
    out, negated = reference_diamond(ensemble_repo, reference, in0, in1)
    assert_matches(result.as_numpy("OUT"), out)
    assert_matches(result.as_numpy("NEG"), negated)


def test_diamond_over_grpc_with_one_requested_output(srv, ensemble_repo, reference):
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    in0, in1 = diamond_inputs(7, rows=1)
    inputs = [grpcclient.InferInput("IN0", [1, 4], "FP32"), grpcclient.InferInput("IN1", [1, 4], "FP32")]
    inputs[0].set_data_from_numpy(in0)
    inputs[1].set_data_from_numpy(in1)
    result = client.infer("ens_diamond", inputs, outputs=[grpcclient.InferRequestedOutput("negated")])
    out, negated = reference_diamond(ensemble_repo, reference, in0, in1)
    assert_matches(result.as_numpy("negated"), negated)
    assert result.as_numpy("OUT") is None


def test_metadata_and_config_come_from_the_ensemble_config(srv):
    meta = requests.get(f"{srv.base}/v2/models/ens_diamond", timeout=HTTP_TIMEOUT_S).json()
    assert meta["platform"] == "ensemble"
    assert [i["name"] for i in meta["inputs"]] == ["IN0", "IN1"]
    assert [o["name"] for o in meta["outputs"]] == ["OUT", "negated"]
    assert meta["inputs"][0]["shape"] == [-1, 4]
    config = grpcclient.InferenceServerClient(srv.grpc_url).get_model_config("ens_diamond", as_json=True)["config"]
    assert config["platform"] == "ensemble"
    assert config.get("max_batch_size") == 8
    assert len(config["ensemble_scheduling"]["step"]) == 4
    assert "instance_group" not in config


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_graph_fails_its_load_naming_the_step_or_tensor(srv, name):
    entries = {e["name"]: e for e in srv.repository_index()}
    entry = entries[name]
    assert entry["state"] == "UNAVAILABLE", entry
    for text in BAD[name][1]:
        assert text in entry["reason"], (text, entry["reason"])
    # The server keeps serving the others.
    assert srv.get("/v2/models/ens_diamond/ready").status_code == 200
    assert srv.get(f"/v2/models/{name}/ready").status_code != 200


def fail_inputs(shape):
    x = np.arange(4, dtype=np.float32)
    inputs = [httpclient.InferInput("IN", [4], "FP32"), httpclient.InferInput("SHAPE", [2], "INT64")]
    inputs[0].set_data_from_numpy(x)
    inputs[1].set_data_from_numpy(np.array(shape, dtype=np.int64))
    return x, inputs


def test_a_failing_step_is_named_and_the_next_request_is_fine(srv):
    client = httpclient.InferenceServerClient(srv.url)
    _, inputs = fail_inputs([-1, 0])  # [3, 1]: 4 values do not fit
    with pytest.raises(Exception) as failure:
        client.infer("ens_fail", inputs)
    assert "in ensemble 'ens_fail', step 1 (model 'ens_reshape'): " in str(failure.value)
    x, inputs = fail_inputs([-2, 1])  # [2, 2]
    result = client.infer("ens_fail", inputs)
    assert_matches(result.as_numpy("OUT"), (-x).reshape(2, 2))
    # gRPC says the same.
    g = grpcclient.InferenceServerClient(srv.grpc_url)
    ginputs = [grpcclient.InferInput("IN", [4], "FP32"), grpcclient.InferInput("SHAPE", [2], "INT64")]
    ginputs[0].set_data_from_numpy(x)
    ginputs[1].set_data_from_numpy(np.array([1, 0], dtype=np.int64))  # [5, 1]
    with pytest.raises(Exception) as failure:
        g.infer("ens_fail", ginputs)
    assert "in ensemble 'ens_fail', step 1 (model 'ens_reshape'): " in str(failure.value)


def _success(stats: dict) -> int:
    return int(stats["inference_stats"]["success"]["count"])


def test_statistics_of_the_ensemble_and_its_composing_models(srv):
    before = {m: _success(srv.model_stats(m)) for m in ("ens_diamond", "ens_add", "ens_mul2", "ens_neg")}
    client = httpclient.InferenceServerClient(srv.url)
    requests_sent = 4
    for seed in range(requests_sent):
        in0, in1 = diamond_inputs(100 + seed, rows=2)
        inputs = [httpclient.InferInput("IN0", [2, 4], "FP32"), httpclient.InferInput("IN1", [2, 4], "FP32")]
        inputs[0].set_data_from_numpy(in0)
        inputs[1].set_data_from_numpy(in1)
        client.infer("ens_diamond", inputs)
    after = {m: _success(srv.model_stats(m)) for m in before}
    assert after["ens_diamond"] - before["ens_diamond"] == requests_sent
    assert after["ens_add"] - before["ens_add"] == 2 * requests_sent  # two steps per request
    assert after["ens_mul2"] - before["ens_mul2"] == requests_sent
    assert after["ens_neg"] - before["ens_neg"] == requests_sent
    grpc_stats = grpcclient.InferenceServerClient(srv.grpc_url).get_inference_statistics("ens_diamond",
                                                                                          as_json=True)
    entry = grpc_stats["model_stats"][0]
    assert int(entry["inference_stats"]["success"]["count"]) >= requests_sent
    assert int(entry["inference_count"]) >= 2 * requests_sent
    metrics = requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=HTTP_TIMEOUT_S).text
    for model in ("ens_diamond", "ens_add"):
        assert any(line.startswith("ortserve_requests_total{") and f'model="{model}"' in line
                   and 'outcome="success"' in line for line in metrics.splitlines()), model


def test_explicit_load_brings_composing_models_and_readiness_follows_them(ensemble_repo, launch):
    server = launch(ensemble_repo, extra_args=("--model-control-mode", "explicit", "--load-model", "ens_diamond",
                                                   "--allow-unauthenticated-model-control=true"))
    server.wait_models_ready(["ens_diamond", "ens_add", "ens_mul2", "ens_neg"])
    client = httpclient.InferenceServerClient(server.url)
    assert client.is_model_ready("ens_diamond")
    client.unload_model("ens_neg")
    assert not client.is_model_ready("ens_diamond")
    entry = {e["name"]: e for e in server.repository_index()}["ens_diamond"]
    assert entry["state"] == "UNAVAILABLE"
    assert "depends on 'ens_neg' which has no loaded version" in entry["reason"]
    in0, in1 = diamond_inputs(9, rows=1)
    inputs = [httpclient.InferInput("IN0", [1, 4], "FP32"), httpclient.InferInput("IN1", [1, 4], "FP32")]
    inputs[0].set_data_from_numpy(in0)
    inputs[1].set_data_from_numpy(in1)
    with pytest.raises(Exception) as refused:
        client.infer("ens_diamond", inputs)
    assert "ens_neg" in str(refused.value)
    # Loading it back makes the ensemble ready again.
    client.load_model("ens_neg")
    assert client.is_model_ready("ens_diamond")
    assert client.infer("ens_diamond", inputs).as_numpy("OUT").shape == (1, 4)
    # An ensemble whose composing model is missing fails its explicit load.
    with pytest.raises(Exception) as failed:
        client.load_model("bad_unknown_model")
    assert "no_such_model" in str(failed.value)


def test_an_expired_request_launches_no_further_step(srv):
    """A 1 us timeout is spent before the first step ends: the request fails
    as timed out, the step named, and the steps after it never reach their
    models."""
    later_steps = ("ens_mul2", "ens_neg")
    before = {m: int(srv.model_stats(m)["inference_stats"]["success"]["count"]) +
              int(srv.model_stats(m)["inference_stats"]["fail"]["count"]) for m in later_steps}
    client = httpclient.InferenceServerClient(srv.url)
    in0, in1 = diamond_inputs(11, rows=1)
    inputs = [httpclient.InferInput("IN0", [1, 4], "FP32"), httpclient.InferInput("IN1", [1, 4], "FP32")]
    inputs[0].set_data_from_numpy(in0)
    inputs[1].set_data_from_numpy(in1)
    with pytest.raises(Exception) as expired:
        client.infer("ens_diamond", inputs, timeout=1)
    message = str(expired.value)
    assert "in ensemble 'ens_diamond', step " in message, message
    assert "timeout expired" in message.lower(), message
    after = {m: int(srv.model_stats(m)["inference_stats"]["success"]["count"]) +
             int(srv.model_stats(m)["inference_stats"]["fail"]["count"]) for m in later_steps}
    assert after == before
    # The next request, without a timeout, is fine.
    assert client.infer("ens_diamond", inputs).as_numpy("OUT").shape == (1, 4)


# ---- Triton's own QA ensemble (qa/L0_simple_ensemble, ensemble_add_sub):
# six steps over two versions of Triton's `simple` (add/sub, INT32 [16]);
# OUTPUT0 comes from version 2 (model_version -1) alone, OUTPUT1 from
# version 1, each through an add and a sub of its own.
ADD_SUB_STEPS = [
    ("-1", {"INPUT0": "INPUT0", "INPUT1": "INPUT0"}, {"OUTPUT0": "double_input0"}),
    ("1", {"INPUT0": "INPUT1", "INPUT1": "INPUT1"}, {"OUTPUT0": "double_input1"}),
    ("-1", {"INPUT0": "double_input0", "INPUT1": "INPUT0"}, {"OUTPUT1": "input0_val"}),
    ("1", {"INPUT0": "double_input1", "INPUT1": "INPUT1"}, {"OUTPUT1": "input1_val"}),
    ("-1", {"INPUT0": "input0_val", "INPUT1": "INPUT1"}, {"OUTPUT0": "OUTPUT0"}),
    ("1", {"INPUT0": "INPUT0", "INPUT1": "input1_val"}, {"OUTPUT1": "OUTPUT1"}),
]


@pytest.fixture(scope="module")
def add_sub_server(triton_examples, tmp_path_factory, log_dir):
    """`simple` of Triton's example repository (each copy: conftest's
    triton_examples) as versions 1 and 2, and the ensemble over them."""
    from harness import start_server
    simple = triton_examples / "simple"
    repo = tmp_path_factory.mktemp("triton_ensemble")
    config = (simple / "config.pbtxt").read_text() + "\nversion_policy: { all {} }\n"
    for version in ("1", "2"):
        (repo / "simple" / version).mkdir(parents=True)
        (repo / "simple" / version / "model.onnx").write_bytes((simple / "1" / "model.onnx").read_bytes())
    (repo / "simple" / "config.pbtxt").write_text(config)
    steps = [_step("simple", ins, outs).replace("model_version: -1", f"model_version: {v}")
             for v, ins, outs in ADD_SUB_STEPS]
    i16 = ("TYPE_INT32", [16])
    _write(repo, "ensemble_add_sub", _ensemble("ensemble_add_sub", 8, [("INPUT0", *i16), ("INPUT1", *i16)],
                                               [("OUTPUT0", *i16), ("OUTPUT1", *i16)], steps))
    server = start_server(repo, log_dir, "triton_ensemble")
    try:
        server.wait_models_ready(["simple", "ensemble_add_sub"])
        yield server, repo
    finally:
        server.stop()


def _version_count(server, version: str) -> int:
    r = server.get(f"/v2/models/simple/versions/{version}/stats")
    assert r.status_code == 200, r.text
    return int(r.json()["model_stats"][0]["inference_count"])


def _add_sub_reference(repo, reference, in0, in1):
    def simple(a, b):
        return reference.run(repo / "simple" / "1" / "model.onnx", {"INPUT0": a, "INPUT1": b})
    double0 = simple(in0, in0)["OUTPUT0"]
    double1 = simple(in1, in1)["OUTPUT0"]
    val0 = simple(double0, in0)["OUTPUT1"]
    val1 = simple(double1, in1)["OUTPUT1"]
    return simple(val0, in1)["OUTPUT0"], simple(in0, val1)["OUTPUT1"]


@pytest.mark.parametrize("rows", [1, 8])
def test_tritons_add_sub_ensemble_over_two_versions(add_sub_server, reference, rows):
    server, repo = add_sub_server
    before = (_version_count(server, "1"), _version_count(server, "2"))
    client = httpclient.InferenceServerClient(server.url)
    rng = np.random.default_rng(rows)
    in0 = rng.integers(-100, 100, (rows, 16), dtype=np.int32)
    in1 = rng.integers(-100, 100, (rows, 16), dtype=np.int32)
    inputs = [httpclient.InferInput("INPUT0", [rows, 16], "INT32"), httpclient.InferInput("INPUT1", [rows, 16], "INT32")]
    inputs[0].set_data_from_numpy(in0)
    inputs[1].set_data_from_numpy(in1)
    result = client.infer("ensemble_add_sub", inputs)
    out0, out1 = _add_sub_reference(repo, reference, in0, in1)
    assert_matches(result.as_numpy("OUTPUT0"), out0, exact=True)
    assert_matches(result.as_numpy("OUTPUT1"), out1, exact=True)
    np.testing.assert_array_equal(out0, in0 + in1)
    np.testing.assert_array_equal(out1, in0 - in1)
    after = (_version_count(server, "1"), _version_count(server, "2"))
    # Three steps on each version, `rows` inferences each (as Triton's test expects: equal counts).
    assert after[0] - before[0] == after[1] - before[1] == 3 * rows


def test_one_requested_output_runs_only_the_steps_it_needs(add_sub_server):
    server, _ = add_sub_server
    before = (_version_count(server, "1"), _version_count(server, "2"))
    client = grpcclient.InferenceServerClient(server.grpc_url)
    in0 = np.arange(16, dtype=np.int32).reshape(1, 16)
    in1 = np.ones((1, 16), dtype=np.int32)
    inputs = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"), grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(in0)
    inputs[1].set_data_from_numpy(in1)
    result = client.infer("ensemble_add_sub", inputs, outputs=[grpcclient.InferRequestedOutput("OUTPUT0")])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), in0 + in1)
    assert result.as_numpy("OUTPUT1") is None
    after = (_version_count(server, "1"), _version_count(server, "2"))
    assert after[0] == before[0]  # version 1 only feeds OUTPUT1
    assert after[1] - before[1] == 3


def test_poll_mode_loads_an_ensemble_once_its_missing_model_arrives(tmp_path, launch):
    repo = tmp_path / "repo"
    staging = tmp_path / "staging"
    build_composing(staging)
    repo.mkdir()
    for name in ("ens_add", "ens_mul2"):  # ens_neg arrives later
        (staging / name).rename(repo / name)
    _write(repo, "ens_diamond", _ensemble("ens_diamond", 8, *DIAMOND_IO, DIAMOND_STEPS))
    server = launch(repo, extra_args=("--model-control-mode=poll", "--repository-poll-secs", "1"))
    server.wait_models_ready(["ens_add", "ens_mul2"])
    entry = {e["name"]: e for e in server.repository_index()}["ens_diamond"]
    assert entry["state"] == "UNAVAILABLE"
    assert "depends on 'ens_neg' which has no loaded version" in entry["reason"]
    (staging / "ens_neg").rename(repo / "ens_neg")  # moved in whole
    server.wait_models_ready(["ens_neg", "ens_diamond"], timeout_s=60)
    client = httpclient.InferenceServerClient(server.url)
    in0, in1 = diamond_inputs(21, rows=1)
    inputs = [httpclient.InferInput("IN0", [1, 4], "FP32"), httpclient.InferInput("IN1", [1, 4], "FP32")]
    inputs[0].set_data_from_numpy(in0)
    inputs[1].set_data_from_numpy(in1)
    np.testing.assert_allclose(client.infer("ens_diamond", inputs).as_numpy("OUT"), in0 + in1, rtol=1e-6)
