"""Triton's stateful example models, served unchanged (the repository
scripts/make_triton_examples.py writes and, when TRITON_EXAMPLES_DIR names
one, a copy of Triton's own files), driven as Triton's example clients drive
them:
simple_http_sequence_sync_infer_client.py,
simple_grpc_sequence_sync_infer_client.py,
simple_grpc_sequence_stream_infer_client.py and
simple_grpc_aio_sequence_stream_infer_client.py (triton-inference-server/
client, src/python/examples).

Why the clients are not run as they are: their source is in no package a
fresh CI machine can install, and GitHub is not reachable from CI. The
tritonclient wheels on PyPI (2.51.0 pinned here, 2.73.0 the newest) hold the
library without src/python/examples; PyPI's only source distributions of it
are two placeholders (0.0.1.dev4 and dev5, a setup.py that fails on
purpose); the npm list has no package of them; the Go module proxy serves Go
modules, not another project's files. So each test below re-does its
client's flow step for step with tritonclient: the same models, sequence ids
(1000 and 1001, and a uuid4 string, or "1002" with -d), the same values
([0] + values, [100] + negated values, [20] + negated values), the same
flags (START on the first request, END on the last), the same request ids
("<sequence id>_<n>") matched on the stream by splitting the response id, and
then the client's own expected values and check (`client_check`, copied from
the clients' loop). The clients' -d flag adds a string sequence to
simple_string_dyna_sequence, which the example repository does not have (the
client would fail against Triton on it too); with -d only the two integer
sequences run, against simple_dyna_sequence.

Beyond the clients' check, every output is compared with onnxruntime on the
same file fed the control inputs the sequence batcher must set (START 1 on a
sequence's first request, END 1 on its last, READY 1, CORRID the sequence
id): these ONNX models are stateless functions of their controls
(simple_sequence: OUTPUT = (INPUT + START) * READY; simple_dyna_sequence:
OUTPUT = READY * (INPUT + START + END * CORRID)).
"""
from __future__ import annotations

import asyncio
import pathlib
import queue
import uuid
from functools import partial

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from grpc_helpers import GRPC_TIMEOUT_S
from harness import HTTP_TIMEOUT_S, Reference, model_file
from sequence_helpers import INVALID, SequenceClient, int32

pytestmark = pytest.mark.timeout(180)

SEQUENCE_MODELS = ["simple_sequence", "simple_dyna_sequence"]

# The clients' data (identical in the four of them).
VALUES = [11, 7, 5, 3, 2, 0, 1]
INT_SEQUENCE_ID0 = 1000  # + FLAGS.offset * 2, offset 0
INT_SEQUENCE_ID1 = 1001


class Flow:
    """The three sequences of a client run: model, sequence id and values."""

    def __init__(self, dyna: bool):
        self.dyna = dyna
        int_model = "simple_dyna_sequence" if dyna else "simple_sequence"
        string_id = "1002" if dyna else str(uuid.uuid4())
        self.sequences = [(int_model, INT_SEQUENCE_ID0, [0] + VALUES),
                          (int_model, INT_SEQUENCE_ID1, [100] + [-v for v in VALUES])]
        # -d: simple_string_dyna_sequence is not in the example repository.
        if not dyna:
            self.sequences.append(("simple_sequence", string_id, [20] + [-v for v in VALUES]))
        self.string_id = string_id


def client_check(flow: Flow, int_result0, int_result1, string_result0) -> None:
    """The clients' own loop over the results, with sys.exit(1) as a failure."""
    for i in range(len(int_result0)):
        int_seq0_expected = 1 if (i == 0) else VALUES[i - 1]
        int_seq1_expected = 101 if (i == 0) else VALUES[i - 1] * -1
        if flow.dyna:
            string_seq0_expected = None  # the string half of -d cannot run (module docstring)
        elif i == 0:
            string_seq0_expected = 21
        else:
            string_seq0_expected = VALUES[i - 1] * -1
        # "The dyna_sequence custom backend adds the correlation ID to the
        # last request in a sequence."
        if flow.dyna and (i != 0) and (VALUES[i - 1] == 1):
            int_seq0_expected += INT_SEQUENCE_ID0
            int_seq1_expected += INT_SEQUENCE_ID1
        got = (int_result0[i][0][0], int_result1[i][0][0],
               None if flow.dyna else string_result0[i][0][0])
        assert got == (int_seq0_expected, int_seq1_expected, string_seq0_expected), \
            f"[{i}] got {got}, the client expects " \
            f"{(int_seq0_expected, int_seq1_expected, string_seq0_expected)}"
    assert len(int_result0) == len(VALUES) + 1 == len(int_result1)
    if not flow.dyna:
        assert len(string_result0) == len(VALUES) + 1


def check_with_onnxruntime(reference: Reference, repo: pathlib.Path, model: str, sequence_id, values, results) -> None:
    """Each output equals onnxruntime on the model file with the controls the
    sequence batcher sets for request n of the sequence."""
    path = model_file(repo, model)
    for n, (value, result) in enumerate(zip(values, results)):
        feeds = {"INPUT": int32(value), "START": int32(1 if n == 0 else 0), "READY": int32(1)}
        if model == "simple_dyna_sequence":
            feeds["END"] = int32(1 if n == len(values) - 1 else 0)
            feeds["CORRID"] = np.array([[sequence_id]], dtype=np.uint64)
        expected = reference.run(path, feeds)["OUTPUT"]
        np.testing.assert_array_equal(result, expected, err_msg=f"{model} sequence {sequence_id} request {n}")


def check_flow(reference: Reference, repo: pathlib.Path, flow: Flow, results: list) -> None:
    client_check(flow, *results, *([[]] if flow.dyna else []))
    for (model, sequence_id, values), outputs in zip(flow.sequences, results):
        check_with_onnxruntime(reference, repo, model, sequence_id, values, outputs)


# ---------------------------------------------------------------- the models


@pytest.mark.parametrize("model", SEQUENCE_MODELS)
def test_sequence_example_models_are_ready(examples_server, model):
    entries = [e for e in examples_server.repository_index() if e["name"] == model]
    assert entries and all(e["state"] == "READY" for e in entries), entries
    assert examples_server.get(f"/v2/models/{model}/ready").status_code == 200
    config = examples_server.get(f"/v2/models/{model}/config").json()
    assert "sequence_batching" in config, config


# ---------------------------------------------------------------- the clients' flows


def sync_send(module, client, values, sequence_id, model_name, **kw) -> list:
    """The clients' sync_send: one request per value, START on the first and
    END on the last."""
    result_list = []
    count = 1
    for value in values:
        value_data = np.full(shape=[1, 1], fill_value=value, dtype=np.int32)
        inputs = [module.InferInput("INPUT", value_data.shape, "INT32")]
        inputs[0].set_data_from_numpy(value_data)
        outputs = [module.InferRequestedOutput("OUTPUT")]
        result = client.infer(model_name=model_name, inputs=inputs, outputs=outputs,
                              sequence_id=sequence_id, sequence_start=(count == 1),
                              sequence_end=(count == len(values)), **kw)
        result_list.append(result.as_numpy("OUTPUT"))
        count += 1
    return result_list


@pytest.mark.parametrize("dyna", [False, True], ids=["simple_sequence", "dyna"])
def test_simple_http_sequence_sync_infer_client(examples_server, reference, dyna):
    flow = Flow(dyna)
    client = httpclient.InferenceServerClient(url=examples_server.url, network_timeout=HTTP_TIMEOUT_S)
    try:
        results = [sync_send(httpclient, client, values, sid, model) for model, sid, values in flow.sequences]
    finally:
        client.close()
    check_flow(reference, examples_server.repo, flow, results)


@pytest.mark.parametrize("dyna", [False, True], ids=["simple_sequence", "dyna"])
def test_simple_grpc_sequence_sync_infer_client(examples_server, reference, dyna):
    flow = Flow(dyna)
    with grpcclient.InferenceServerClient(url=examples_server.grpc_url) as client:
        results = [sync_send(grpcclient, client, values, sid, model, client_timeout=GRPC_TIMEOUT_S)
                   for model, sid, values in flow.sequences]
    check_flow(reference, examples_server.repo, flow, results)


def stream_request(module, value, count, total, sequence_id, model_name) -> dict:
    """async_stream_send's / async_stream_yield's request for one value."""
    value_data = np.full(shape=[1, 1], fill_value=value, dtype=np.int32)
    inputs = [module.InferInput("INPUT", value_data.shape, "INT32")]
    inputs[0].set_data_from_numpy(value_data)
    return {"model_name": model_name, "inputs": inputs, "outputs": [module.InferRequestedOutput("OUTPUT")],
            "request_id": "{}_{}".format(sequence_id, count), "sequence_id": sequence_id,
            "sequence_start": (count == 1), "sequence_end": (count == total)}


def sort_by_sequence(flow: Flow, items) -> list:
    """The clients' receive loop: a response goes to the list of the sequence
    its id names (id.split("_")[0]), in arrival order."""
    lists = {sid: [] for _, sid, _ in flow.sequences}
    for item in items:
        assert not isinstance(item, InferenceServerException), item
        this_id = item.get_response().id.split("_")[0]
        key = next((sid for _, sid, _ in flow.sequences if str(sid) == this_id), None)
        assert key is not None, f"unexpected sequence id returned by the server: {this_id}"
        lists[key].append(item.as_numpy("OUTPUT"))
    return [lists[sid] for _, sid, _ in flow.sequences]


@pytest.mark.parametrize("dyna", [False, True], ids=["simple_sequence", "dyna"])
def test_simple_grpc_sequence_stream_infer_client(examples_server, reference, dyna):
    flow = Flow(dyna)
    completed: queue.Queue = queue.Queue()

    def callback(user_data, result, error):
        user_data.put(error if error else result)

    with grpcclient.InferenceServerClient(url=examples_server.grpc_url) as client:
        client.start_stream(callback=partial(callback, completed), stream_timeout=GRPC_TIMEOUT_S)
        for model, sid, values in flow.sequences:
            for count, value in enumerate(values, start=1):
                client.async_stream_infer(**stream_request(grpcclient, value, count, len(values), sid, model))
        total = sum(len(values) for _, _, values in flow.sequences)
        items = [completed.get(timeout=GRPC_TIMEOUT_S) for _ in range(total)]
        client.stop_stream()
    check_flow(reference, examples_server.repo, flow, sort_by_sequence(flow, items))


@pytest.mark.parametrize("dyna", [False, True], ids=["simple_sequence", "dyna"])
def test_simple_grpc_aio_sequence_stream_infer_client(examples_server, reference, dyna):
    flow = Flow(dyna)

    async def main() -> list:
        async with grpcaio.InferenceServerClient(url=examples_server.grpc_url) as client:
            async def async_request_iterator():
                for model, sid, values in flow.sequences:
                    for count, value in enumerate(values, start=1):
                        yield stream_request(grpcaio, value, count, len(values), sid, model)

            items = []
            # The client reads until the server ends the stream, after the
            # last answer to the requests the iterator gave.
            response_iterator = client.stream_infer(inputs_iterator=async_request_iterator(),
                                                    stream_timeout=GRPC_TIMEOUT_S)
            async for result, error in response_iterator:
                items.append(error if error else result)
            return items

    items = asyncio.run(asyncio.wait_for(main(), GRPC_TIMEOUT_S))
    assert len(items) == sum(len(values) for _, _, values in flow.sequences)
    check_flow(reference, examples_server.repo, flow, sort_by_sequence(flow, items))


# ---------------------------------------------------------------- CORRID's type


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_string_sequence_id_for_a_uint64_corrid_is_refused(examples_server, protocol):
    # Triton's words (InferenceRequest::ValidateCorrelationId): the control's
    # name, the request's id type and the config's.
    with SequenceClient(examples_server, protocol) as c:
        c.refused(INVALID, "sequence batching control 'CORRID' data-type is 'BYTES', but model "
                           "'simple_dyna_sequence' expects 'UINT64'",
                  model="simple_dyna_sequence", tensors={"INPUT": ("INT32", int32(1))},
                  sequence_id="corrid-as-string", start=True)
        # Still serving: a one-request sequence with a numeric id (START and
        # END together: INPUT + 1 + CORRID).
        out = c.infer("simple_dyna_sequence", {"INPUT": ("INT32", int32(5))}, sequence_id=77,
                      start=True, end=True).as_numpy("OUTPUT")
        np.testing.assert_array_equal(out, int32(5 + 1 + 77))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_responses_do_not_echo_the_sequence_parameters(examples_server, protocol):
    """As Triton: its front ends and core add no response parameter for a
    sequence (only a backend could, and the ONNX Runtime backend sets none);
    the clients match stream answers by request id instead."""
    with SequenceClient(examples_server, protocol) as c:
        result = c.infer("simple_sequence", {"INPUT": ("INT32", int32(3))}, sequence_id=4242,
                         start=True, end=True, request_id="echo-check")
        response = result.get_response()
        if protocol == "http":
            assert response["id"] == "echo-check"
            parameters = response.get("parameters", {})
        else:
            assert response.id == "echo-check"
            parameters = dict(response.parameters)
        assert not [k for k in parameters if k.startswith("sequence")], parameters
        np.testing.assert_array_equal(result.as_numpy("OUTPUT"), int32(3 + 1))
