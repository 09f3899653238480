"""Misusing a sequence model, over HTTP and gRPC, with Triton's status codes
and the message parts Triton's clients and QA tests rely on
(qa/L0_sequence_batcher checks the start of these messages): no sequence id,
continuing a sequence that was never started or has ended, START for an id
already running, more live sequences than the model has slots, a sequence that
timed out. After each, the same model still serves a whole sequence.

The models are accumulators with implicit state, generated here: OUTPUT =
INPUT + ACC, ACC_OUT = OUTPUT, `state` ACC <- ACC_OUT starting at zero, so
every answer shows whether the server kept, reset or mixed up a sequence's
state:
  acc_direct  direct strategy, max_batch_size 2, one instance: 2 slots.
  acc_oldest  oldest strategy, max_candidate_sequences 3, max_batch_size 4.
  acc_idle    direct, max_batch_size 1 (one slot), max_sequence_idle 0.3 s
              (times ORTSERVE_TEST_TIMEOUT_SCALE).

Where Triton does not refuse: a START for an id whose sequence is running
ends that sequence and starts a new one with fresh state (Triton logs "the
previous sequence did not end before this sequence start. Previous sequence
will be terminated early"), so the test checks the fresh state. Where
ortserve differs from Triton: a START beyond the slots is refused at once
with UNAVAILABLE naming the limit; Triton would hold it in an unbounded
backlog until a slot frees (ortserve's queues are bounded: docs/design.md).

The wire-level checks of the correlation parameters themselves (types, a
flag without an id) run against the main test server: the front ends refuse
them before any model is looked at.
"""
from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest
from onnx import TensorProto, helper
from tritonclient.grpc import service_pb2 as pb
from tritonclient.utils import InferenceServerException

from grpc_helpers import BAD, GRPC_TIMEOUT_S, add_sub_raw, expect_rpc_error
from harness import TIMEOUT_SCALE, assert_error, make_test_models, start_server
from sequence_helpers import INVALID, PROTOCOLS, UNAVAILABLE, SequenceClient, int32, wait_loaded

pytestmark = pytest.mark.timeout(180)

demo = make_test_models.demo
# Short enough to wait out, long enough for a whole sequence between two
# requests on a loaded machine (and scaled with the sanitizer builds' bounds).
IDLE_US = int(300_000 * TIMEOUT_SCALE)
MODELS = {"acc_direct": 2, "acc_oldest": 3, "acc_idle": 1}  # name -> live sequences it can hold


def accumulator():
    return demo.make_model(
        [helper.make_node("Add", ["INPUT", "ACC"], ["OUTPUT"]),
         helper.make_node("Identity", ["OUTPUT"], ["ACC_OUT"])],
        [("INPUT", TensorProto.INT32, ["batch", 1]), ("ACC", TensorProto.INT32, ["batch", 1])],
        [("OUTPUT", TensorProto.INT32, ["batch", 1]), ("ACC_OUT", TensorProto.INT32, ["batch", 1])],
        name="accumulator")


def accumulator_config(name: str, max_batch_size: int, strategy: str, idle_us: int = 60_000_000) -> str:
    return f"""
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
sequence_batching {{
  max_sequence_idle_microseconds: {idle_us}
  {strategy}
  state [
    {{
      input_name: "ACC"
      output_name: "ACC_OUT"
      data_type: TYPE_INT32
      dims: [ 1 ]
      initial_state: {{ data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "zero" }}
    }}
  ]
}}
input [ {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


@pytest.fixture(scope="module")
def seq_server(tmp_path_factory, log_dir):
    repo = tmp_path_factory.mktemp("sequence_models")
    model = accumulator()
    demo.write_model(repo, "acc_direct", model, accumulator_config("acc_direct", 2, "direct { }"))
    demo.write_model(repo, "acc_oldest", model, accumulator_config(
        "acc_oldest", 4, "oldest { max_candidate_sequences: 3 max_queue_delay_microseconds: 1000 }"))
    demo.write_model(repo, "acc_idle", model, accumulator_config("acc_idle", 1, "direct { }", IDLE_US))
    srv = start_server(repo, log_dir, "sequence_misuse", strict_readiness=True)
    try:
        wait_loaded(srv, list(MODELS))
        yield srv
    finally:
        srv.stop()


@pytest.fixture(params=PROTOCOLS)
def client(request, seq_server):
    with SequenceClient(seq_server, request.param) as c:
        yield c


def step(c: SequenceClient, model: str, sequence_id, value: int, start=False, end=False) -> int:
    result = c.infer(model, {"INPUT": ("INT32", int32(value))}, sequence_id=sequence_id, start=start, end=end)
    out = result.as_numpy("OUTPUT")
    assert out.shape == (1, 1) and out.dtype == np.int32, (out.shape, out.dtype)
    return int(out[0, 0])


def run_sequence(c: SequenceClient, model: str, sequence_id, values) -> list[int]:
    """A whole sequence; returns the running sums the server answered."""
    return [step(c, model, sequence_id, v, start=(i == 0), end=(i == len(values) - 1))
            for i, v in enumerate(values)]


def still_serves(srv, c: SequenceClient, model: str, sequence_id) -> None:
    """The server is alive and `model` answers a whole sequence correctly."""
    assert srv.alive(), f"ortserve died; log tail:\n{srv.log_tail()}"
    assert run_sequence(c, model, sequence_id, [1, 2, 3, -10]) == [1, 3, 6, -4]


def end_quietly(c: SequenceClient, model: str, sequence_ids) -> None:
    """Ends sequences a failed assertion may have left live (they would hold
    slots the next test needs)."""
    for sid in sequence_ids:
        try:
            step(c, model, sid, 0, end=True)
        except Exception:  # noqa: BLE001 - already ended or never started
            pass


def start_refused_phrase(sequence_id, model: str) -> str:
    """Triton's refusal of a request whose sequence is unknown
    (SequenceBatchScheduler::Enqueue), which QA tests match the start of."""
    return (f"inference request for sequence {sequence_id} to model '{model}' must specify the START flag "
            f"on the first request of the sequence")


# ---------------------------------------------------------------- misuse


@pytest.mark.parametrize("model", ["acc_direct", "acc_oldest"])
def test_no_sequence_id(seq_server, client, model):
    client.refused(INVALID, f"inference request to model '{model}' must specify a non-zero or non-empty "
                            "correlation ID", model=model, tensors={"INPUT": ("INT32", int32(1))})
    still_serves(seq_server, client, model, 4_100_001)


@pytest.mark.parametrize("sequence_id", [7_000_001, "never-started"])
def test_continuing_a_sequence_never_started(seq_server, client, sequence_id):
    for end in (False, True):
        client.refused(INVALID, start_refused_phrase(sequence_id, "acc_direct"),
                       model="acc_direct", tensors={"INPUT": ("INT32", int32(1))},
                       sequence_id=sequence_id, end=end)
    still_serves(seq_server, client, "acc_direct", 7_000_002)


def test_continuing_a_sequence_that_ended(seq_server, client):
    sid = 7_100_001
    assert run_sequence(client, "acc_direct", sid, [4, 5]) == [4, 9]
    client.refused(INVALID, start_refused_phrase(sid, "acc_direct"),
                   model="acc_direct", tensors={"INPUT": ("INT32", int32(1))}, sequence_id=sid)
    # A START with the same id later begins a new sequence, from zero.
    assert run_sequence(client, "acc_direct", sid, [2, 2]) == [2, 4]
    still_serves(seq_server, client, "acc_direct", 7_100_002)


@pytest.mark.parametrize("model", ["acc_direct", "acc_oldest"])
def test_start_for_an_id_already_running_begins_again(seq_server, client, model):
    sid = 7_200_001
    others = [7_200_100 + i for i in range(MODELS[model] - 1)]
    try:
        assert step(client, model, sid, 5, start=True) == 5
        assert step(client, model, sid, 3) == 8
        # As Triton: the running sequence ends early, the new one starts from
        # the initial state (0), not from 8.
        assert step(client, model, sid, 10, start=True) == 10
        assert step(client, model, sid, 1) == 11
        # The new sequence holds one slot, not two: every other slot is free.
        for i, other in enumerate(others):
            assert step(client, model, other, i + 1, start=True) == i + 1
        assert step(client, model, sid, 1, end=True) == 12
    finally:
        end_quietly(client, model, [sid] + others)
    still_serves(seq_server, client, model, 7_200_002)


@pytest.mark.parametrize("model", ["acc_direct", "acc_oldest"])
def test_more_live_sequences_than_slots(seq_server, client, model):
    limit = MODELS[model]
    # Ids whose digits cannot pass for the limit in the message.
    live = [9_000_001 + i for i in range(limit)]
    extra = 9_000_101
    try:
        for i, sid in enumerate(live):
            assert step(client, model, sid, 10 * (i + 1), start=True) == 10 * (i + 1)
        message = client.refused(UNAVAILABLE, str(extra), model=model, tensors={"INPUT": ("INT32", int32(1))},
                                 sequence_id=extra, start=True)
        assert re.search(rf"\b{limit}\b", message), f"the refusal does not name the limit {limit}: {message!r}"
        # The refused START left nothing behind, and the live sequences kept
        # their state.
        client.refused(INVALID, start_refused_phrase(extra, model), model=model,
                       tensors={"INPUT": ("INT32", int32(1))}, sequence_id=extra)
        for i, sid in enumerate(live):
            assert step(client, model, sid, 1) == 10 * (i + 1) + 1
        # Ending one frees its slot for the refused sequence.
        assert step(client, model, live[0], 0, end=True) == 11
        assert step(client, model, extra, 7, start=True) == 7
        assert step(client, model, extra, 1, end=True) == 8
    finally:
        end_quietly(client, model, live + [extra])
    still_serves(seq_server, client, model, 9_000_201)


def test_sequence_that_timed_out(seq_server, client):
    """acc_idle holds one sequence and releases it after IDLE_US without a
    request. The test does not time the release: it waits (up to a bound)
    until a second sequence can start, which only a released slot allows."""
    idle, other = 6_000_001, 6_000_501
    assert step(client, "acc_idle", idle, 4, start=True) == 4
    deadline = time.monotonic() + 30 * TIMEOUT_SCALE
    while True:
        try:
            started = step(client, "acc_idle", other, 1, start=True)
            break
        except InferenceServerException as refusal:  # the slot is still held
            assert refusal.status() == UNAVAILABLE[client.protocol], refusal
            assert time.monotonic() < deadline, f"sequence {idle} still holds acc_idle's slot"
            time.sleep(0.05)
    assert started == 1
    try:
        message = client.refused(INVALID, str(idle), "START", model="acc_idle",
                                 tensors={"INPUT": ("INT32", int32(1))}, sequence_id=idle)
        assert f"sequence {idle}" in message, message
    finally:
        end_quietly(client, "acc_idle", [other])
    still_serves(seq_server, client, "acc_idle", 6_000_002)


# ---------------------------------------------------------------- the wire (main server)


@pytest.mark.parametrize("parameters,message", [
    ({"sequence_id": -1, "sequence_start": True},
     "Unable to parse 'sequence_id': expected an unsigned 64-bit integer or a string, got a negative number (-1)"),
    ({"sequence_id": 1.5}, "Unable to parse 'sequence_id'"),
    ({"sequence_id": True}, "Unable to parse 'sequence_id'"),
    ({"sequence_id": 3, "sequence_start": "yes"}, "Unable to parse 'sequence_start': expected true or false"),
    ({"sequence_id": 3, "sequence_end": 1}, "Unable to parse 'sequence_end': expected true or false"),
    ({"sequence_id": 0, "sequence_start": True},
     "parameter 'sequence_start' is true but 'sequence_id' is missing, 0 or empty"),
    ({"sequence_end": True}, "parameter 'sequence_end' is true but 'sequence_id' is missing, 0 or empty"),
    ({"sequence_id": "x" * 129}, "string correlation ID cannot be longer than 128 characters (got 129)"),
])
def test_http_malformed_sequence_parameters(server_still_serves, parameters, message):
    body = {"parameters": parameters,
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16}]}
    assert_error(server_still_serves.infer_raw("add_sub_fp32", json.dumps(body)), 400, message)


def test_http_duplicate_sequence_id(server_still_serves):
    # json.dumps cannot write a repeated key.
    body = ('{"parameters": {"sequence_id": 5, "sequence_id": "5"}, "inputs": [{"name": "INPUT0", '
            '"datatype": "FP32", "shape": [1, 16], "data": [' + ",".join(["0"] * 16) + "]}]}")
    assert_error(server_still_serves.infer_raw("add_sub_fp32", body), 400,
                 "parameter 'sequence_id' is given more than once")


def _grpc_with(**params) -> pb.ModelInferRequest:
    request = add_sub_raw()
    for name, (kind, value) in params.items():
        setattr(request.parameters[name], kind, value)
    return request


@pytest.mark.parametrize("params,message", [
    ({"sequence_id": ("int64_param", -2)}, "invalid value for 'sequence_id' parameter: -2 is negative"),
    ({"sequence_id": ("bool_param", True)},
     "invalid value type for 'sequence_id' parameter, expected int64_param, uint64_param or string_param, "
     "got bool_param"),
    ({"sequence_id": ("int64_param", 4), "sequence_start": ("int64_param", 1)},
     "invalid value type for 'sequence_start' parameter, expected bool_param, got int64_param"),
    ({"sequence_id": ("string_param", ""), "sequence_end": ("bool_param", True)},
     "parameter 'sequence_end' is true but 'sequence_id' is missing, 0 or empty"),
    ({"sequence_id": ("string_param", "y" * 129)}, "cannot be longer than 128 characters (got 129)"),
])
def test_grpc_malformed_sequence_parameters(stub, grpc_still_serves, params, message):
    expect_rpc_error(stub.ModelInfer, _grpc_with(**params), BAD, message)


def test_grpc_stream_malformed_sequence_parameter_does_not_end_the_stream(stub, grpc_still_serves):
    bad = _grpc_with(sequence_id=("double_param", 1.0))
    bad.id = "bad"
    good = add_sub_raw()
    good.id = "good"
    responses = list(stub.ModelStreamInfer(iter([bad, good]), timeout=GRPC_TIMEOUT_S))
    by_id = {r.infer_response.id: r for r in responses if r.infer_response.id}
    errors = [r.error_message for r in responses if r.error_message]
    assert len(responses) == 2, responses
    assert any("invalid value type for 'sequence_id' parameter" in e and "got double_param" in e
               for e in errors), errors
    assert "good" in by_id and not by_id["good"].error_message
