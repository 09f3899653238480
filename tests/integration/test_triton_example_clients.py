"""Triton's own example clients, run as they are, against Triton's example
repository served by ortserve. Their files come from triton-inference-server/
client (src/python/examples), which no package holds: point
TRITON_CLIENT_EXAMPLES at that folder of a checkout to run them. Without it
the tests skip; test_triton_examples.py and test_triton_sequence_examples.py
replay the same clients' flows and checks, so CI covers them either way.

Each client must exit 0. Those that need what the example repository lacks
(simple_identity) or that check the server's name ("triton"; ortserve names
itself, a documented difference) are not listed."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

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
]


@pytest.mark.skipif(not CLIENTS, reason="TRITON_CLIENT_EXAMPLES is not set (Triton's client examples folder)")
@pytest.mark.parametrize("client, protocol", RUN_AS_THEY_ARE)
def test_example_client_passes_unmodified(examples_server, client, protocol):
    path = pathlib.Path(CLIENTS) / client
    if not path.is_file():
        pytest.skip(f"{path} is not there")
    url = examples_server.url if protocol == "http" else examples_server.grpc_url
    done = subprocess.run([sys.executable, str(path), "-u", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{client} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
