"""What the sequence tests share (test_triton_sequence_examples.py,
test_sequence_misuse.py, test_sequence_vad.py): waiting for models to load
without waiting out a failed load, one tritonclient per protocol with a bound
on every call, and refusals checked by Triton's status codes."""
from __future__ import annotations

import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from grpc_helpers import GRPC_TIMEOUT_S
from harness import HTTP_TIMEOUT_S, STARTUP_TIMEOUT_S

PROTOCOLS = ["http", "grpc"]

# Triton's codes for the refusals of a sequence request, per protocol.
INVALID = {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}
UNAVAILABLE = {"http": "503", "grpc": "StatusCode.UNAVAILABLE"}


def wait_loaded(srv, names, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Every model in `names` READY. A model whose load has ended UNAVAILABLE
    fails at once with the reason the index gives, instead of after the
    whole timeout."""
    pending = set(names)
    deadline = time.monotonic() + timeout_s
    while pending:
        assert srv.alive(), f"ortserve exited; log tail:\n{srv.log_tail()}"
        index = srv.repository_index()
        for name in sorted(pending):
            entries = [e for e in index if e["name"] == name]
            if any(e.get("state") == "READY" for e in entries):
                pending.discard(name)
                continue
            failed = [e for e in entries if e.get("state") == "UNAVAILABLE" and e.get("reason")]
            if entries and len(failed) == len(entries):
                raise AssertionError(f"model {name} did not load: {[e['reason'] for e in failed]}; "
                                     f"log tail:\n{srv.log_tail()}")
        if pending and time.monotonic() > deadline:
            raise AssertionError(f"models {sorted(pending)} not READY after {timeout_s}s: "
                                 f"{[e for e in index if e['name'] in pending]}")
        if pending:
            time.sleep(0.1)


class SequenceClient:
    """tritonclient of one protocol ("http" or "grpc") on `srv`, every call
    bounded (a hang becomes a failure)."""

    def __init__(self, srv, protocol: str):
        self.protocol = protocol
        if protocol == "http":
            self.module = httpclient
            self.client = httpclient.InferenceServerClient(srv.url, network_timeout=HTTP_TIMEOUT_S,
                                                           connection_timeout=HTTP_TIMEOUT_S)
        else:
            self.module = grpcclient
            self.client = grpcclient.InferenceServerClient(srv.grpc_url)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "SequenceClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def infer(self, model: str, tensors: dict, sequence_id=0, start: bool = False, end: bool = False,
              outputs=None, request_id: str = ""):
        """tensors: {name: (datatype, array)}. Returns the InferResult."""
        inputs = []
        for name, (datatype, array) in tensors.items():
            inp = self.module.InferInput(name, list(array.shape), datatype)
            inp.set_data_from_numpy(array)
            inputs.append(inp)
        kw = dict(sequence_id=sequence_id, sequence_start=start, sequence_end=end, request_id=request_id)
        if outputs:
            kw["outputs"] = [self.module.InferRequestedOutput(n) for n in outputs]
        if self.protocol == "grpc":
            kw["client_timeout"] = GRPC_TIMEOUT_S
        return self.client.infer(model, inputs, **kw)

    def refused(self, codes: dict, *substrings: str, **infer_kw) -> str:
        """infer(**infer_kw) fails with codes[protocol] (INVALID or
        UNAVAILABLE) and a message containing every substring; returns it."""
        with pytest.raises(InferenceServerException) as info:
            self.infer(**infer_kw)
        status, message = info.value.status(), info.value.message() or ""
        assert status == codes[self.protocol], \
            f"{self.protocol}: expected {codes[self.protocol]}, got {status}: {message!r}"
        for s in substrings:
            assert s in message, f"{self.protocol} error {message!r} does not contain {s!r}"
        return message


def int32(value: int) -> np.ndarray:
    """One INT32 element, batch of one: [[value]]."""
    return np.array([[value]], dtype=np.int32)
