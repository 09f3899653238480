"""Triton parity of what a model repository turns into (issue 22):

- auto-complete and normalisation give the config Triton's ONNX Runtime
  backend + core give for the same model, field by field, over gRPC and HTTP
  (expected configs as in Triton's qa/L0_model_config
  autofill_noplatform_success/onnx; instance groups as Triton's on a machine
  without a GPU, since ortserve resolves KIND_AUTO to CPU);
- config errors come before file errors, in the words Triton's tests grep for;
- the dynamic batcher forms Triton's batches: a configured
  max_queue_delay_microseconds is honoured, a request that cannot join
  releases the pending batch. Batch composition is read from the statistics
  endpoint (execution_count vs inference_count, batch_stats); nothing is
  asserted on timing. The window is far longer than any HTTP timeout of the
  harness, so a batch that were not released would fail the test as a hang.
"""
from __future__ import annotations

import concurrent.futures
import pathlib
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format, text_format
from onnx import TensorProto, helper, save
from tritonclient.grpc import model_config_pb2

from harness import HTTP_TIMEOUT_S, metric, start_server
from sequence_helpers import wait_loaded

OPSET = [helper.make_opsetid("", 13)]


def save_model(path: pathlib.Path, inputs, outputs, nodes) -> None:
    graph = helper.make_graph(nodes, path.parent.parent.name, inputs, outputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    save(helper.make_model(graph, opset_imports=OPSET), str(path))


def add_sub_int32_int8(path: pathlib.Path, batch) -> None:
    """Triton's qa add_sub model: INPUT0/1 INT32, OUTPUT0/1 INT8, [batch, 16]."""
    shape = [batch, 16] if batch is not None else [16]
    ins = [helper.make_tensor_value_info(n, TensorProto.INT32, shape) for n in ("INPUT0", "INPUT1")]
    outs = [helper.make_tensor_value_info(n, TensorProto.INT8, shape) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [helper.make_node("Add", ["INPUT0", "INPUT1"], ["sum"]),
             helper.make_node("Sub", ["INPUT0", "INPUT1"], ["diff"]),
             helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=TensorProto.INT8),
             helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=TensorProto.INT8)]
    save_model(path, ins, outs, nodes)


def identity(path: pathlib.Path, elem, shape) -> None:
    x = helper.make_tensor_value_info("x", elem, shape)
    y = helper.make_tensor_value_info("y", elem, shape)
    save_model(path, [x], [y], [helper.make_node("Identity", ["x"], ["y"])])


NORMALISED = """
default_model_filename: "model.onnx"
optimization { input_pinned_memory { enable: true } output_pinned_memory { enable: true } }
backend: "onnxruntime"
platform: "onnxruntime_onnx"
version_policy { latest { num_versions: 1 } }
"""

ADD_SUB_IO = """
input { name: "INPUT0" data_type: TYPE_INT32 dims: 16 }
input { name: "INPUT1" data_type: TYPE_INT32 dims: 16 }
output { name: "OUTPUT0" data_type: TYPE_INT8 dims: 16 }
output { name: "OUTPUT1" data_type: TYPE_INT8 dims: 16 }
"""

# model -> (how to build it, its config.pbtxt or None, the config Triton serves)
CASES = {
    # Triton's no_config: batchable, no config.pbtxt.
    "no_config": (lambda p: add_sub_int32_int8(p, "N"), None, f"""
        name: "no_config" max_batch_size: 4 {ADD_SUB_IO}
        instance_group {{ name: "no_config" count: 2 kind: KIND_CPU }}
        dynamic_batching {{ preferred_batch_size: 4 }} {NORMALISED}"""),
    # Triton's empty_config: an empty config.pbtxt is completed as no config.
    "empty_config": (lambda p: add_sub_int32_int8(p, "N"), "", f"""
        name: "empty_config" max_batch_size: 4 {ADD_SUB_IO}
        instance_group {{ name: "empty_config" count: 2 kind: KIND_CPU }}
        dynamic_batching {{ preferred_batch_size: 4 }} {NORMALISED}"""),
    # Triton's no_config_no_batch: no batch dim; an instance group without count.
    "no_config_no_batch": (lambda p: add_sub_int32_int8(p, None), "instance_group [ { kind: KIND_CPU } ]", f"""
        name: "no_config_no_batch" {ADD_SUB_IO}
        instance_group {{ name: "no_config_no_batch_0" count: 2 kind: KIND_CPU }} {NORMALISED}"""),
    # Triton's cpu_instance: a complete config is only normalised.
    "cpu_instance": (lambda p: identity_io(p, TensorProto.FLOAT16, ["N", "a", "b"], "INPUT0", "OUTPUT0"), """
        name: "cpu_instance" platform: "onnxruntime_onnx" max_batch_size: 8
        version_policy: { latest { num_versions: 1 }}
        input [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ -1,-1 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP16 dims: [ -1,-1 ] } ]
        instance_group { name: "cpu_instance" kind: KIND_CPU }""", f"""
        name: "cpu_instance" max_batch_size: 8
        input {{ name: "INPUT0" data_type: TYPE_FP16 dims: -1 dims: -1 }}
        output {{ name: "OUTPUT0" data_type: TYPE_FP16 dims: -1 dims: -1 }}
        instance_group {{ name: "cpu_instance" count: 2 kind: KIND_CPU }} {NORMALISED}"""),
    # A fixed first dim: not batchable, the whole shape stays in dims.
    "fixed_dim0": (lambda p: identity(p, TensorProto.FLOAT, [2, 3]), None, f"""
        name: "fixed_dim0"
        input {{ name: "x" data_type: TYPE_FP32 dims: [ 2, 3 ] }}
        output {{ name: "y" data_type: TYPE_FP32 dims: [ 2, 3 ] }}
        instance_group {{ name: "fixed_dim0" count: 2 kind: KIND_CPU }} {NORMALISED}"""),
    # Strings of shape [batch]: dims [1] with an empty reshape.
    "strings": (lambda p: identity(p, TensorProto.STRING, ["N"]), None, f"""
        name: "strings" max_batch_size: 4
        input {{ name: "x" data_type: TYPE_STRING dims: 1 reshape {{ }} }}
        output {{ name: "y" data_type: TYPE_STRING dims: 1 reshape {{ }} }}
        instance_group {{ name: "strings" count: 2 kind: KIND_CPU }}
        dynamic_batching {{ preferred_batch_size: 4 }} {NORMALISED}"""),
}


def identity_io(path: pathlib.Path, elem, shape, name_in: str, name_out: str) -> None:
    x = helper.make_tensor_value_info(name_in, elem, shape)
    y = helper.make_tensor_value_info(name_out, elem, shape)
    save_model(path, [x], [y], [helper.make_node("Identity", [name_in], [name_out])])


@pytest.fixture(scope="module")
def parity_server(tmp_path_factory, log_dir):
    repo = tmp_path_factory.mktemp("config_parity")
    for name, (build, config, _) in CASES.items():
        build(repo / name / "1" / "model.onnx")
        if config is not None:
            (repo / name / "config.pbtxt").write_text(config)
    srv = start_server(repo, log_dir, "triton_config_parity")
    try:
        wait_loaded(srv, list(CASES))
        yield srv
    finally:
        srv.stop()


@pytest.mark.parametrize("model", list(CASES))
def test_auto_complete_gives_tritons_config(parity_server, model):
    expected = text_format.Parse(CASES[model][2], model_config_pb2.ModelConfig())
    over_grpc = grpcclient.InferenceServerClient(parity_server.grpc_url).get_model_config(model).config
    assert over_grpc == expected, f"got:\n{over_grpc}\nexpected:\n{expected}"
    over_http = httpclient.InferenceServerClient(parity_server.url).get_model_config(model)
    for field in ("version_policy", "default_model_filename", "optimization", "runtime", "backend", "platform"):
        assert field in over_http, field
    assert json_format.ParseDict(over_http, model_config_pb2.ModelConfig()) == expected


# ---- config errors before file errors ------------------------------------------------

ERROR_CASES = {
    # Triton's noautofill_platform/negative_max_batch_size: no version directory.
    "negative_max_batch_size": ("""max_batch_size: -2
        input [ { name: "data" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 28, 28 ] } ]
        output [ { name: "prob" data_type: TYPE_FP32 dims: [ 10, 1, 1 ] } ]""",
                                "'max_batch_size' must be non-negative value for negative_max_batch_size"),
    "zerodims_input0": ("""max_batch_size: 1
        input [ { name: "input" data_type: TYPE_FP32 dims: [ 0 ] } ]
        output [ { name: "output" data_type: TYPE_FP32 dims: [ 4 ] } ]""",
                        "model input 'input' dimension must be integer >= 1, or -1 to indicate a variable-size "
                        "dimension for zerodims_input0"),
    "reshape_elementcount0": ("""max_batch_size: 1
        input [ { name: "input" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 5 ] } } ]
        output [ { name: "output" data_type: TYPE_FP32 dims: [ 4 ] } ]""",
                              "model input 'input' has different size for dims and reshape for reshape_elementcount0"),
    "default_priority_level0": ("""max_batch_size: 1
        input [ { name: "input" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "output" data_type: TYPE_FP32 dims: [ 4 ] } ]
        dynamic_batching { priority_levels: 3 default_priority_level: 0 }""",
                                "default priority level must be in range [1, 3] for default_priority_level0"),
    "with_batch_input": ("""max_batch_size: 4
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
        batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 } ]""",
                         "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 0 for with_batch_input"),
    # Triton's noautofill_platform/invalid_gpu and negative_gpu: an empty
    # version directory; Triton's words on a server without the CUDA provider.
    "invalid_gpu": ("""max_batch_size: 8
        input [ { name: "data" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 28, 28 ] } ]
        output [ { name: "prob" data_type: TYPE_FP32 dims: [ 10, 1, 1 ] } ]
        instance_group [ { kind: KIND_GPU gpus: [ 42 ] } ]""",
                    "instance group invalid_gpu_0 of model invalid_gpu specifies invalid or unsupported gpu id 42. "
                    "GPUs with at least the minimum required CUDA compute compatibility"),
    "negative_gpu": ("""max_batch_size: 1
        input [ { name: "data" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 28, 28 ] } ]
        output [ { name: "prob" data_type: TYPE_FP32 dims: [ 10, 1, 1 ] } ]
        instance_group [ { gpus: [ 0 ] } ]
        instance_group [ { kind: KIND_GPU gpus: [ -1 ] } ]""",
                     "instance group negative_gpu_1 of model negative_gpu specifies invalid or unsupported gpu id -1. "
                     "GPUs with at least the minimum required CUDA compute compatibility"),
    # Triton's reshape_nobatch_empty0/1: a scalar without batching and no
    # model file to declare it one.
    "reshape_nobatch_empty0": ("""max_batch_size: 0
        input [ { name: "input" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]
        output [ { name: "output" data_type: TYPE_FP32 dims: [ 1 ] } ]""",
                               "model input 'input' cannot have empty reshape for non-batching model as scalar "
                               "tensors are not supported for reshape_nobatch_empty0"),
    "reshape_nobatch_empty1": ("""max_batch_size: 0
        input [ { name: "input" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "output" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]""",
                               "model output 'output' cannot have empty reshape for non-batching model as scalar "
                               "tensors are not supported for reshape_nobatch_empty1"),
}


@pytest.mark.parametrize("flags", [(), ("--strict-model-config=true",)])
def test_config_errors_come_before_file_errors_in_tritons_words(tmp_path, log_dir, flags):
    for name, (config, _) in ERROR_CASES.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.pbtxt").write_text(f'name: "{name}"\nplatform: "onnxruntime_onnx"\n{config}\n')
    # with_batch_input has a model file, so its error is not about files either.
    (tmp_path / "invalid_gpu" / "1").mkdir()
    (tmp_path / "negative_gpu" / "1").mkdir()
    identity(tmp_path / "with_batch_input" / "1" / "model.onnx", TensorProto.FLOAT, ["N", 4])
    srv = start_server(tmp_path, log_dir, "config_errors_" + str(len(flags)), extra_args=flags)
    try:
        index = {e["name"]: e for e in srv.repository_index()}
        for name, (_, message) in ERROR_CASES.items():
            assert index[name]["state"] == "UNAVAILABLE", index[name]
            assert message in index[name]["reason"], (name, index[name]["reason"])
            assert message in srv.log_text(), name
    finally:
        srv.stop()


# ---- dynamic batching as Triton's --------------------------------------------------------

WINDOW_US = int(4 * HTTP_TIMEOUT_S * 1e6)  # beyond any wait of the harness


def batching_config(name: str, preferred: str) -> str:
    return f"""name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
dynamic_batching {{ {preferred} max_queue_delay_microseconds: {WINDOW_US} }}
"""


@pytest.fixture(scope="module")
def batching_server(tmp_path_factory, log_dir):
    repo = tmp_path_factory.mktemp("batching_parity")
    models = {"pair": "preferred_batch_size: [ 2 ]", "two_six": "preferred_batch_size: [ 2, 6 ]",
              "full_four": ""}
    for name, preferred in models.items():
        identity(repo / name / "1" / "model.onnx", TensorProto.FLOAT, ["N", "W"])
        config = batching_config(name, preferred)
        if name == "full_four":
            config = config.replace("max_batch_size: 8", "max_batch_size: 4")
        (repo / name / "config.pbtxt").write_text(config)
    srv = start_server(repo, log_dir, "batching_parity")
    try:
        wait_loaded(srv, list(models))
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def pool():
    with concurrent.futures.ThreadPoolExecutor(4) as threads:
        yield threads


def send(pool, url: str, model: str, rows: int, width: int, base: float):
    """Sends one request from a thread of its own (tritonclient's async_infer
    runs on gevent, which the waits below would not let send)."""
    x = (base + np.arange(rows * width, dtype=np.float32)).reshape(rows, width)

    def infer():
        with httpclient.InferenceServerClient(url) as client:
            inp = httpclient.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            return client.infer(model, [inp]).as_numpy("y")
    return pool.submit(infer), x


def wait_queued(srv, model: str, count: int) -> None:
    """Until `count` requests wait in the model's queue: orders the requests
    the tests send (a bound on a hang, not a check on timing)."""
    deadline = time.monotonic() + HTTP_TIMEOUT_S
    while metric(srv, "ortserve_pending_requests", model=model) != count:
        assert time.monotonic() < deadline, f"{model}: never {count} queued"
        time.sleep(0.01)


def expect_echo(pending) -> None:
    future, x = pending
    np.testing.assert_array_equal(future.result(timeout=HTTP_TIMEOUT_S), x)


def batch_sizes(srv, model: str) -> dict[int, int]:
    stats = srv.model_stats(model)
    return {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}


def test_partial_batch_waits_the_window_for_a_partner(batching_server, pool):
    """The fixed window by default: a lone request waits max_queue_delay for a
    partner (the adaptive window would run it at once, alone)."""
    a = send(pool, batching_server.url, "pair", 1, 4, 0)
    wait_queued(batching_server, "pair", 1)
    b = send(pool, batching_server.url, "pair", 1, 4, 100)
    expect_echo(a)
    expect_echo(b)
    stats = batching_server.model_stats("pair")
    assert (stats["execution_count"], stats["inference_count"]) == (1, 2)
    assert batch_sizes(batching_server, "pair") == {2: 1}


def test_full_batch_goes_at_once(batching_server, pool):
    expect_echo(send(pool, batching_server.url, "full_four", 4, 3, 0))
    stats = batching_server.model_stats("full_four")
    assert (stats["execution_count"], stats["inference_count"]) == (1, 4)


def test_different_shape_releases_the_pending_batch(batching_server, pool):
    """Triton's L0_batcher test_multi_batch_preferred_different_shape: 1 + 3
    rows of width 16 wait (4 is no preferred size) until a request of width 8
    arrives and releases them; with the next width-8 request it reaches
    preferred size 6 and goes too."""
    a = send(pool, batching_server.url, "two_six", 1, 16, 0)
    wait_queued(batching_server, "two_six", 1)
    b = send(pool, batching_server.url, "two_six", 3, 16, 100)
    wait_queued(batching_server, "two_six", 2)
    c = send(pool, batching_server.url, "two_six", 1, 8, 200)
    expect_echo(a)  # released by c
    expect_echo(b)
    wait_queued(batching_server, "two_six", 1)
    d = send(pool, batching_server.url, "two_six", 5, 8, 300)
    expect_echo(c)
    expect_echo(d)
    stats = batching_server.model_stats("two_six")
    assert (stats["execution_count"], stats["inference_count"]) == (2, 10)
    assert batch_sizes(batching_server, "two_six") == {4: 1, 6: 1}
