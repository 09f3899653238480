"""Triton's own example clients, run as they are, against Triton's example
repository served by ortserve (the equivalent one scripts/make_triton_examples.py
writes and, when TRITON_EXAMPLES_DIR names one, a copy of Triton's own files),
and its image clients against the image classifier of
tests/models/make_classification_models.py. Their files come from triton-inference-server/
client (src/python/examples), which no package holds: point
TRITON_CLIENT_EXAMPLES at that folder of a checkout to run them. Without it
the tests skip; test_triton_examples.py, test_triton_sequence_examples.py and
test_triton_image_examples.py replay the same clients' flows and checks, so
CI covers them either way.

Each client must exit 0. Those that need what the example repository lacks
(simple_identity and repeat_int32 are Python-backend models, densenet_onnx is
downloaded by Triton's own setup, the model-control clients count Triton's
eight example models), need a GPU (the cudashm clients), or check the
server's name ("triton"; ortserve names itself, a documented difference) are
not listed."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

from classification_helpers import LABELS, class_strings, write_images
from harness import model_file

CLIENTS = os.environ.get("TRITON_CLIENT_EXAMPLES", "")

# (client file, protocol of its --url)
RUN_AS_THEY_ARE = [
    ("simple_http_sequence_sync_infer_client.py", "http"),
    ("simple_grpc_sequence_sync_infer_client.py", "grpc"),
    ("simple_grpc_sequence_stream_infer_client.py", "grpc"),
    ("simple_grpc_aio_sequence_stream_infer_client.py", "grpc"),
    ("simple_http_infer_client.py", "http"),
    ("simple_http_async_infer_client.py", "http"),
    ("simple_http_aio_infer_client.py", "http"),
    ("simple_grpc_infer_client.py", "grpc"),
    ("simple_grpc_async_infer_client.py", "grpc"),
    ("simple_grpc_aio_infer_client.py", "grpc"),
    ("simple_http_shm_client.py", "http"),
    ("simple_grpc_shm_client.py", "grpc"),
    ("simple_http_shm_string_client.py", "http"),
    ("simple_grpc_shm_string_client.py", "grpc"),
    ("grpc_explicit_byte_content_client.py", "grpc"),
    ("grpc_explicit_int8_content_client.py", "grpc"),
    ("grpc_explicit_int_content_client.py", "grpc"),
    ("simple_grpc_custom_args_client.py", "grpc"),
    ("simple_grpc_keepalive_client.py", "grpc"),
    ("reuse_infer_objects_client.py", "http"),
]


NO_CLIENTS = "TRITON_CLIENT_EXAMPLES is not set (Triton's client examples folder)"

# (image client file, its arguments besides -m, -c, -s, -b, -u and the images)
IMAGE_CLIENTS = [
    ("image_client.py", ["-i", "http"]),
    ("image_client.py", ["-i", "http", "-a"]),
    ("image_client.py", ["-i", "grpc"]),
    ("image_client.py", ["-i", "grpc", "-a"]),
    ("image_client.py", ["-i", "grpc", "--streaming"]),
    ("grpc_image_client.py", []),
    ("grpc_image_client.py", ["-a"]),
    ("grpc_image_client.py", ["--streaming"]),
]
IMAGE_MODEL = "image_classifier"
PRINTED_CLASS = re.compile(r"^    (\S+) \((\d+)\) = (.+)$", re.MULTILINE)


@pytest.mark.skipif(not CLIENTS, reason=NO_CLIENTS)
@pytest.mark.parametrize("client, protocol", RUN_AS_THEY_ARE)
def test_example_client_passes_unmodified(examples_server, client, protocol):
    path = pathlib.Path(CLIENTS) / client
    if not path.is_file():
        pytest.skip(f"{path} is not there")
    url = examples_server.url if protocol == "http" else examples_server.grpc_url
    done = subprocess.run([sys.executable, str(path), "-u", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{client} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def expected_printed_classes(client_path, images, batch, count, reference, repo):
    """What the client prints for `images` sent `batch` at a time: its own
    preprocess (loaded from its file), onnxruntime's probabilities, and
    Triton's classification strings, as (value, index, label) lines."""
    from PIL import Image
    spec = importlib.util.spec_from_file_location(client_path.stem, client_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    nchw = module.mc.ModelInput.FORMAT_NCHW
    extra = ("http",) if client_path.name == "image_client.py" else ()
    pixels = [module.preprocess(Image.open(p), nchw, "FP32", 3, 32, 32, "INCEPTION", *extra) for p in images]
    # The clients send batches of `batch`, cycling from the first image until the last has been sent.
    sent = [pixels[i % len(pixels)] for i in range(-(-len(pixels) // batch) * batch)]
    lines = []
    for x in sent:
        probs = reference.run(model_file(repo, IMAGE_MODEL), {"input": x[None].astype("float32")})["probabilities"]
        for s in class_strings(probs[0], count, LABELS):
            value, index, label = s.decode().split(":")
            lines.append((value, index, label))
    return sorted(lines)


@pytest.mark.skipif(not CLIENTS, reason=NO_CLIENTS)
@pytest.mark.parametrize("client, args", IMAGE_CLIENTS, ids=[f"{c}{' '.join(a)}" for c, a in IMAGE_CLIENTS])
def test_image_client_passes_unmodified(classification_server, classification_repo, reference, tmp_path,
                                        client, args):
    path = pathlib.Path(CLIENTS) / client
    if not path.is_file():
        pytest.skip(f"{path} is not there")
    images = write_images(tmp_path / "images")
    grpc = client == "grpc_image_client.py" or "grpc" in args
    url = classification_server.grpc_url if grpc else classification_server.url
    command = [sys.executable, str(path), "-m", IMAGE_MODEL, "-c", "3", "-s", "INCEPTION", "-b", "2",
               *args, "-u", url, str(tmp_path / "images")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{client} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert done.stdout.rstrip().endswith("PASS"), done.stdout[-2000:]
    printed = sorted(PRINTED_CLASS.findall(done.stdout))
    assert printed == expected_printed_classes(path, images, 2, 3, reference, classification_repo), done.stdout
