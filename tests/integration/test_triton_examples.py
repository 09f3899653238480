"""Triton's example repository, served unchanged: the equivalent one
scripts/make_triton_examples.py writes and, when TRITON_EXAMPLES_DIR names
one, a copy of Triton's own files (the `triton_examples` fixture runs each
test on both).

Each test does what Triton's example client of the same name does
(simple_http_infer_client.py, simple_grpc_infer_client.py,
simple_http_string_infer_client.py, ...) and, beyond the client's own sum and
difference check, compares every output with onnxruntime on the same file.
The stateful models (simple_sequence, simple_dyna_sequence) and the sequence
clients are in test_triton_sequence_examples.py.
"""
from __future__ import annotations

import asyncio

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient
from tritonclient.utils import InferenceServerException

from harness import model_file

pytestmark = pytest.mark.timeout(180)


def _example_inputs(dtype):
    # As the example clients: INPUT0 = 0..15, INPUT1 = all ones, batch of 1.
    input0 = np.arange(16, dtype=np.int32).reshape(1, 16).astype(dtype)
    input1 = np.ones((1, 16), dtype=dtype)
    return input0, input1


def _infer(client_module, client, model, input0, input1, datatype):
    inputs = [client_module.InferInput("INPUT0", list(input0.shape), datatype),
              client_module.InferInput("INPUT1", list(input1.shape), datatype)]
    inputs[0].set_data_from_numpy(input0)
    inputs[1].set_data_from_numpy(input1)
    outputs = [client_module.InferRequestedOutput("OUTPUT0"),
               client_module.InferRequestedOutput("OUTPUT1")]
    result = client.infer(model, inputs, outputs=outputs)
    return result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model,dtype,datatype", [("simple", np.int32, "INT32"),
                                                  ("simple_int8", np.int8, "INT8")])
def test_simple_infer_client(examples_server, reference, protocol, model, dtype, datatype):
    module = httpclient if protocol == "http" else grpcclient
    url = examples_server.url if protocol == "http" else examples_server.grpc_url
    client = module.InferenceServerClient(url)
    input0, input1 = _example_inputs(dtype)
    out0, out1 = _infer(module, client, model, input0, input1, datatype)
    np.testing.assert_array_equal(out0, input0 + input1)
    np.testing.assert_array_equal(out1, input0 - input1)
    expected = reference.run(model_file(examples_server.repo, model), {"INPUT0": input0, "INPUT1": input1})
    np.testing.assert_array_equal(out0, expected["OUTPUT0"])
    np.testing.assert_array_equal(out1, expected["OUTPUT1"])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_simple_string_infer_client(examples_server, reference, protocol):
    module = httpclient if protocol == "http" else grpcclient
    url = examples_server.url if protocol == "http" else examples_server.grpc_url
    client = module.InferenceServerClient(url)
    numbers0, numbers1 = _example_inputs(np.int32)
    input0 = np.array([str(x).encode() for x in numbers0.ravel()], dtype=np.object_).reshape(1, 16)
    input1 = np.array([str(x).encode() for x in numbers1.ravel()], dtype=np.object_).reshape(1, 16)
    out0, out1 = _infer(module, client, "simple_string", input0, input1, "BYTES")
    np.testing.assert_array_equal(out0.astype(np.int32), numbers0 + numbers1)
    np.testing.assert_array_equal(out1.astype(np.int32), numbers0 - numbers1)
    expected = reference.run(model_file(examples_server.repo, "simple_string"), {"INPUT0": input0, "INPUT1": input1})
    assert [bytes(x) for x in out0.ravel()] == [x.encode() if isinstance(x, str) else bytes(x)
                                               for x in expected["OUTPUT0"].ravel()]


def test_simple_async_infer_client(examples_server):
    client = httpclient.InferenceServerClient(examples_server.url, concurrency=4)
    input0, input1 = _example_inputs(np.int32)
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
              httpclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(input0)
    inputs[1].set_data_from_numpy(input1)
    pending = [client.async_infer("simple", inputs, request_id=str(i)) for i in range(8)]
    for i, p in enumerate(pending):
        result = p.get_result()
        assert result.get_response()["id"] == str(i)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), input0 + input1)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_wrong_model_name_as_the_example_clients_check_it(examples_server, protocol):
    """simple_http_infer_client.py infers "wrong_model_name" and needs the
    message to start with "Request for unknown model";
    simple_{http,grpc}_health_metadata.py ask for its metadata and need those
    words in the message."""
    module = httpclient if protocol == "http" else grpcclient
    url = examples_server.url if protocol == "http" else examples_server.grpc_url
    client = module.InferenceServerClient(url)
    input0, input1 = _example_inputs(np.int32)
    with pytest.raises(InferenceServerException) as infer_error:
        _infer(module, client, "wrong_model_name", input0, input1, "INT32")
    assert infer_error.value.message().startswith("Request for unknown model"), infer_error.value.message()
    with pytest.raises(InferenceServerException) as metadata_error:
        client.get_model_metadata("wrong_model_name")
    assert "Request for unknown model" in metadata_error.value.message()


async def _aio_wrong_model_name(url: str) -> str:
    input0, input1 = _example_inputs(np.int32)
    async with aioclient.InferenceServerClient(url) as client:
        inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"), httpclient.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_data_from_numpy(input0, binary_data=False)
        inputs[1].set_data_from_numpy(input1, binary_data=True)
        outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=True),
                   httpclient.InferRequestedOutput("OUTPUT1", binary_data=False)]
        try:
            await client.infer("wrong_model_name", inputs, outputs=outputs, query_params={"test_1": 1, "test_2": 2})
        except InferenceServerException as ex:
            return ex.message()
    return ""


def test_wrong_model_name_with_the_aio_example_client(examples_server):
    """simple_http_aio_infer_client.py's check of the same error."""
    message = asyncio.run(_aio_wrong_model_name(examples_server.url))
    assert message.startswith("Request for unknown model"), message
