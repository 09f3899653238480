"""Triton's ragged batching (allow_ragged_batch, batch_input, batch_output).

Models built here with onnx.helper take a ragged input as one 1-D tensor of
the whole batch's elements, plus the batch inputs the server makes per batch.
Requests of different lengths are sent concurrently through tritonclient and
each answer is compared with onnxruntime running that request alone (the
batch inputs of a batch of one). That they ran as one batch is read from the
statistics endpoint: a preferred size of 4 under a window far longer than any
wait of the harness, so four requests go together or the test hangs and
fails. Bad configs are refused with Triton's texts while the rest serve.
"""
from __future__ import annotations

import concurrent.futures
import pathlib

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper, numpy_helper, save

from harness import HTTP_TIMEOUT_S, Reference, start_server
from sequence_helpers import wait_loaded

OPSET = [helper.make_opsetid("", 13)]
WINDOW_US = int(4 * HTTP_TIMEOUT_S * 1e6)  # beyond any wait of the harness
BATCHING = f"max_batch_size: 8\ndynamic_batching {{ preferred_batch_size: [ 4 ] " \
           f"max_queue_delay_microseconds: {WINDOW_US} }}\n"


def save_model(path: pathlib.Path, inputs, outputs, nodes, initializers=()) -> None:
    graph = helper.make_graph(nodes, path.parent.parent.name, inputs, outputs, initializer=list(initializers))
    path.parent.mkdir(parents=True, exist_ok=True)
    save(helper.make_model(graph, opset_imports=OPSET), str(path))


def const(name: str, values, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def segment_sum_model(path: pathlib.Path) -> None:
    """X [-1] FP32 (every request's elements), ENDS [-1] INT32 (each request's
    end offset: BATCH_ACCUMULATED_ELEMENT_COUNT), COUNTS [-1] FP32 (each
    request's element count: BATCH_ELEMENT_COUNT). SUM [-1, 1] is each
    request's sum, MEAN [-1, 1] its mean: cumulative sums read at the ends."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [-1])
    ends = helper.make_tensor_value_info("ENDS", TensorProto.INT32, [-1])
    counts = helper.make_tensor_value_info("COUNTS", TensorProto.FLOAT, [-1])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [-1, 1]) for n in ("SUM", "MEAN")]
    nodes = [
        helper.make_node("CumSum", ["X", "axis0"], ["cs"]),
        helper.make_node("Concat", ["zero_f", "cs"], ["cs0"], axis=0),
        helper.make_node("Cast", ["ENDS"], ["ends64"], to=TensorProto.INT64),
        helper.make_node("Concat", ["zero_i", "ends64"], ["bounds"], axis=0),
        helper.make_node("Slice", ["bounds", "one", "big"], ["hi_idx"]),
        helper.make_node("Slice", ["bounds", "zero_i", "minus_one"], ["lo_idx"]),
        helper.make_node("Gather", ["cs0", "hi_idx"], ["hi"]),
        helper.make_node("Gather", ["cs0", "lo_idx"], ["lo"]),
        helper.make_node("Sub", ["hi", "lo"], ["sums"]),
        helper.make_node("Unsqueeze", ["sums", "one"], ["SUM"]),
        helper.make_node("Div", ["sums", "COUNTS"], ["means"]),
        helper.make_node("Unsqueeze", ["means", "one"], ["MEAN"]),
    ]
    inits = [const("axis0", 0), const("zero_f", [0.0], np.float32), const("zero_i", [0]), const("one", [1]),
             const("big", [1 << 30]), const("minus_one", [-1])]
    save_model(path, [x, ends, counts], outs, nodes, inits)


def double_model(path: pathlib.Path) -> None:
    """Y = 2 X over the flat batch: a batch output scattered back per request."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [-1])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [-1])
    save_model(path, [x], [y], [helper.make_node("Add", ["X", "X"], ["Y"])])


def item_shape_model(path: pathlib.Path) -> None:
    """SHAPES [-1, 2] INT32 (BATCH_ITEM_SHAPE: each batch item's dims after
    dim 0) echoed as DIMS; TOTAL [-1] the ragged input's element count."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [-1])
    shapes = helper.make_tensor_value_info("SHAPES", TensorProto.INT32, [-1, 2])
    dims = helper.make_tensor_value_info("DIMS", TensorProto.INT32, [-1, 2])
    save_model(path, [x, shapes], [dims], [helper.make_node("Identity", ["SHAPES"], ["DIMS"])])


SEGMENT_CONFIG = """input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "MEAN" data_type: TYPE_FP32 dims: [ 1 ] } ]
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "ENDS" data_type: TYPE_INT32 source_input: "X" },
              { kind: BATCH_ELEMENT_COUNT target_name: "COUNTS" data_type: TYPE_FP32 source_input: "X" } ]
"""
DOUBLE_CONFIG = """input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "Y" source_input: "X" } ]
"""
# A configured warm-up is strict: the model loads only if its sample runs.
ITEM_SHAPE_CONFIG = """input [ { name: "X" data_type: TYPE_FP32 dims: [ -1, 2 ] allow_ragged_batch: true } ]
output [ { name: "DIMS" data_type: TYPE_INT32 dims: [ 2 ] } ]
batch_input [ { kind: BATCH_ITEM_SHAPE target_name: "SHAPES" data_type: TYPE_INT32 source_input: "X" } ]
model_warmup [ { name: "ragged" batch_size: 2
  inputs { key: "X" value { data_type: TYPE_FP32 dims: [ 3, 2 ] zero_data: true } } } ]
"""
# Triton's qa/L0_model_config/noautofill_platform/batch_* texts, and its ONNX
# Runtime backend's for a ragged input the model does not take as 1-D.
BAD_CONFIGS = {
    "less_source": ("""input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 } ]""",
                    "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 0 for less_source"),
    "unknown_source": ("""input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 source_input: "UNKNOWN_INPUT" } ]""",
                       "unknown source input name 'UNKNOWN_INPUT' for unknown_source"),
    "twice_target": ("""input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { target_name: [ "Y", "Y" ] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X" } ]""",
                     "target output name 'Y' can only be specified once for twice_target"),
    "unknown_target": ("""input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { target_name: "UNKNOWN_OUTPUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X" } ]""",
                       "unknown target output name 'UNKNOWN_OUTPUT' for unknown_target"),
    "output_less_source": ("""input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { target_name: "Y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE } ]""",
                           "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 0 "
                           "for output_less_source"),
    "ragged_not_flat": ("""input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]""",
                        "configuration expects model provides input with shape [-1]  for ragged input 'x', "
                        "model provides [-1,-1]"),
}


def write_config(repo: pathlib.Path, name: str, body: str) -> None:
    (repo / name).mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(f'name: "{name}"\nplatform: "onnxruntime_onnx"\n{BATCHING}{body}')


@pytest.fixture(scope="module")
def ragged(tmp_path_factory, log_dir):
    repo = tmp_path_factory.mktemp("ragged_repo")
    for name, build, config in (("segment_sum", segment_sum_model, SEGMENT_CONFIG),
                                ("double", double_model, DOUBLE_CONFIG),
                                ("item_shape", item_shape_model, ITEM_SHAPE_CONFIG)):
        build(repo / name / "1" / "model.onnx")
        write_config(repo, name, config)
    for name, (config, _) in BAD_CONFIGS.items():
        double_model(repo / name / "1" / "model.onnx")
        write_config(repo, name, config)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, -1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, -1])
    save_model(repo / "ragged_not_flat" / "1" / "model.onnx", [x], [y], [helper.make_node("Identity", ["x"], ["y"])])
    srv = start_server(repo, log_dir, "ragged")
    try:
        wait_loaded(srv, ["segment_sum", "double", "item_shape"])
        yield srv, repo
    finally:
        srv.stop()


def infer_concurrently(srv, model: str, arrays: list[np.ndarray], output: str) -> list[np.ndarray]:
    """One request per array, each from a thread of its own, all at once."""
    def infer(a):
        client = grpcclient.InferenceServerClient(srv.grpc_url)
        inp = grpcclient.InferInput("X", list(a.shape), "FP32")
        inp.set_data_from_numpy(a)
        return client.infer(model, [inp], outputs=[grpcclient.InferRequestedOutput(output)]).as_numpy(output)
    with concurrent.futures.ThreadPoolExecutor(len(arrays)) as pool:
        return list(pool.map(infer, arrays))


def one_batch_of(srv, model: str, rows: int) -> None:
    """The model ran once, for `rows` batch rows (inference_count counts rows)."""
    stats = srv.model_stats(model)
    assert (stats["execution_count"], stats["inference_count"]) == (1, rows), stats


def test_requests_of_different_lengths_run_as_one_batch(ragged):
    srv, repo = ragged
    lengths = [3, 7, 1, 5]
    arrays = [np.arange(1, n + 1, dtype=np.float32).reshape(1, n) * (i + 1) for i, n in enumerate(lengths)]
    sums = infer_concurrently(srv, "segment_sum", arrays, "SUM")
    one_batch_of(srv, "segment_sum", len(arrays))
    reference = Reference()
    for a, got in zip(arrays, sums):
        alone = reference.run(repo / "segment_sum" / "1" / "model.onnx",
                              {"X": a.reshape(-1), "ENDS": np.array([a.size], np.int32),
                               "COUNTS": np.array([a.size], np.float32)})
        np.testing.assert_array_equal(got, alone["SUM"])
        np.testing.assert_array_equal(got, [[a.sum()]])


def test_a_batch_output_is_scattered_in_each_request_shape(ragged):
    srv, repo = ragged
    arrays = [np.full((1, n), n, np.float32) for n in (2, 4, 1, 3)]  # Triton's L0_batch_input shapes
    outputs = infer_concurrently(srv, "double", arrays, "Y")
    one_batch_of(srv, "double", len(arrays))
    reference = Reference()
    for a, got in zip(arrays, outputs):
        alone = reference.run(repo / "double" / "1" / "model.onnx", {"X": a.reshape(-1)})["Y"]
        assert got.shape == a.shape
        np.testing.assert_array_equal(got.reshape(-1), alone)


def test_item_shapes_describe_each_batch_item(ragged):
    srv, repo = ragged
    # Batch sizes 1, 2, 1 (4 rows: the preferred size) of different lengths.
    arrays = [np.ones((1, 3, 2), np.float32), np.ones((2, 1, 2), np.float32), np.ones((1, 5, 2), np.float32)]
    dims = infer_concurrently(srv, "item_shape", arrays, "DIMS")
    one_batch_of(srv, "item_shape", sum(a.shape[0] for a in arrays))
    reference = Reference()
    for a, got in zip(arrays, dims):
        shapes = np.array([a.shape[1:]] * a.shape[0], np.int32)
        alone = reference.run(repo / "item_shape" / "1" / "model.onnx", {"X": a.reshape(-1), "SHAPES": shapes})
        np.testing.assert_array_equal(got, alone["DIMS"])
        np.testing.assert_array_equal(got, shapes)


def test_a_request_may_not_send_a_batch_input(ragged):
    srv, _ = ragged
    body = {"inputs": [{"name": "X", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]},
                       {"name": "ENDS", "shape": [1], "datatype": "INT32", "data": [2]}]}
    r = requests.post(f"{srv.base}/v2/models/segment_sum/infer", json=body, timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 400, r.text
    assert "a batch input, which the server makes for each batch it forms" in r.json()["error"]


def test_bad_configs_are_refused_in_tritons_words_and_the_rest_serve(ragged):
    srv, _ = ragged
    index = {e["name"]: e for e in srv.repository_index()}
    for name, (_, message) in BAD_CONFIGS.items():
        assert index[name]["state"] == "UNAVAILABLE", index[name]
        assert message in index[name]["reason"], (name, index[name]["reason"])
    arrays = [np.arange(n, dtype=np.float32).reshape(1, n) for n in (2, 4, 6, 8)]  # a preferred batch of 4
    means = infer_concurrently(srv, "segment_sum", arrays, "MEAN")
    for a, got in zip(arrays, means):
        np.testing.assert_array_equal(got, [[a.mean()]])
