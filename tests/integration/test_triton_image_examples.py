"""The flows of Triton's image examples (image_client.py over HTTP and gRPC,
grpc_image_client.py over the raw gRPC stub, unary and streaming), replayed
with tritonclient against the image classifier of
tests/models/make_classification_models.py, so that CI covers them without
the example files (test_triton_example_clients.py runs the files themselves
when TRITON_CLIENT_EXAMPLES names their folder). Each step checks what the
example checks, and the answers are compared with onnxruntime's
probabilities classified in Python."""
from __future__ import annotations

import struct

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.model_config_pb2 as mc
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg

from classification_helpers import LABELS, expected_classes, write_images
from grpc_helpers import GRPC_TIMEOUT_S
from harness import HTTP_TIMEOUT_S, model_file

MODEL = "image_classifier"
CLASSES = 3
BATCH = 2


def check_model(inputs, outputs, config_inputs, max_batch_size, input_format):
    """image_client.py's parse_model: one FP32 vector output, one CHW input
    laid out as the config's format says; returns (input, output, c, h, w)."""
    assert len(inputs) == 1 and len(outputs) == 1 and len(config_inputs) == 1
    assert outputs[0]["datatype"] == "FP32"
    dims = outputs[0]["shape"][1:] if max_batch_size > 0 else outputs[0]["shape"]
    assert sum(1 for d in dims if d > 1) <= 1, "expecting model output to be a vector"
    assert len(inputs[0]["shape"]) == 3 + (1 if max_batch_size > 0 else 0)
    assert input_format == mc.ModelInput.FORMAT_NCHW
    c, h, w = inputs[0]["shape"][1:]
    return inputs[0]["name"], outputs[0]["name"], c, h, w


def preprocess(path, c, h, w):
    """image_client.py's preprocess with INCEPTION scaling, to CHW."""
    from PIL import Image
    img = Image.open(path).convert("RGB" if c == 3 else "L")
    resized = np.array(img.resize((w, h), Image.BILINEAR))
    scaled = resized.astype(np.float32) / 127.5 - 1
    return np.transpose(scaled, (2, 0, 1))


def batches(pixels):
    """The clients' batching: BATCH images at a time, cycling from the first
    until the last image has been sent."""
    count = -(-len(pixels) // BATCH) * BATCH
    sent = [pixels[i % len(pixels)] for i in range(count)]
    return [np.stack(sent[i:i + BATCH]) for i in range(0, count, BATCH)]


def split_classes(result_row):
    """How the examples read one entry: "value:index:label"."""
    return ["".join(chr(x) for x in entry).split(":") for entry in result_row]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return write_images(tmp_path_factory.mktemp("image_examples"))


def expected(reference, repo, batch):
    probs = reference.run(model_file(repo, MODEL), {"input": batch})["probabilities"]
    return expected_classes(probs, CLASSES, True, LABELS)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_image_client_flow(classification_server, classification_repo, reference, images, protocol):
    if protocol == "http":
        client = httpclient.InferenceServerClient(classification_server.url, network_timeout=HTTP_TIMEOUT_S)
        metadata, config = client.get_model_metadata(MODEL), client.get_model_config(MODEL)
        # Over HTTP the format is the enum's name, which the example maps back.
        input_format = dict(mc.ModelInput.Format.items())[config["input"][0]["format"]]
        inputs, outputs, config_inputs = metadata["inputs"], metadata["outputs"], config["input"]
        max_batch_size, api = config["max_batch_size"], httpclient
    else:
        client = grpcclient.InferenceServerClient(classification_server.grpc_url)
        metadata, config = client.get_model_metadata(MODEL), client.get_model_config(MODEL).config
        input_format = config.input[0].format
        as_dicts = lambda ts: [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in ts]
        inputs, outputs, config_inputs = as_dicts(metadata.inputs), as_dicts(metadata.outputs), config.input
        max_batch_size, api = config.max_batch_size, grpcclient
    with client:
        input_name, output_name, c, h, w = check_model(inputs, outputs, config_inputs, max_batch_size, input_format)
        for batch in batches([preprocess(p, c, h, w) for p in images]):
            inp = api.InferInput(input_name, list(batch.shape), "FP32")
            inp.set_data_from_numpy(batch)
            result = client.infer(MODEL, [inp], outputs=[api.InferRequestedOutput(output_name, class_count=CLASSES)])
            got = result.as_numpy(output_name)
            assert len(got) == BATCH
            assert got.tolist() == expected(reference, classification_repo, batch).tolist()
            for row in got:
                for value, index, label in split_classes(row):
                    assert LABELS[int(index)] == label and float(value) >= 0


def grpc_image_request(input_name, output_name, batch):
    """grpc_image_client.py's request: raw_input_contents and the
    classification parameter set by hand."""
    request = pb.ModelInferRequest(model_name=MODEL, model_version="")
    output = request.outputs.add(name=output_name)
    output.parameters["classification"].int64_param = CLASSES
    request.inputs.add(name=input_name, datatype="FP32", shape=list(batch.shape))
    request.raw_input_contents.append(batch.tobytes())
    return request


def deserialize_bytes_tensor(encoded):
    """grpc_image_client.py's reading of raw_output_contents."""
    strings, offset = [], 0
    while offset < len(encoded):
        (length,) = struct.unpack_from("<I", encoded, offset)
        offset += 4
        strings.append(encoded[offset:offset + length])
        offset += length
    return np.array(strings, dtype=np.object_)


@pytest.mark.parametrize("streaming", [False, True], ids=["unary", "stream"])
def test_grpc_image_client_flow(classification_server, classification_repo, reference, images, streaming):
    with grpc.insecure_channel(classification_server.grpc_url) as channel:
        stub = pbg.GRPCInferenceServiceStub(channel)
        metadata = stub.ModelMetadata(pb.ModelMetadataRequest(name=MODEL, version=""), timeout=GRPC_TIMEOUT_S)
        config = stub.ModelConfig(pb.ModelConfigRequest(name=MODEL, version=""), timeout=GRPC_TIMEOUT_S).config
        as_dicts = lambda ts: [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in ts]
        input_name, output_name, c, h, w = check_model(as_dicts(metadata.inputs), as_dicts(metadata.outputs),
                                                       config.input, config.max_batch_size, config.input[0].format)
        sent = batches([preprocess(p, c, h, w) for p in images])
        requests = [grpc_image_request(input_name, output_name, b) for b in sent]
        if streaming:
            answers = list(stub.ModelStreamInfer(iter(requests), timeout=GRPC_TIMEOUT_S))
            assert all(a.error_message == "" for a in answers), [a.error_message for a in answers]
            responses = [a.infer_response for a in answers]
        else:
            responses = [stub.ModelInfer(r, timeout=GRPC_TIMEOUT_S) for r in requests]
    assert len(responses) == len(sent)
    for batch, response in zip(sent, responses):
        assert len(response.outputs) == 1 and len(response.raw_output_contents) == 1
        assert response.outputs[0].datatype == "BYTES"
        contents = np.reshape(deserialize_bytes_tensor(response.raw_output_contents[0]),
                              list(response.outputs[0].shape))
        assert contents.shape == (BATCH, CLASSES)
        assert contents.tolist() == expected(reference, classification_repo, batch).tolist()
