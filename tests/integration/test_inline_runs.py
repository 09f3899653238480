"""Inline runs (docs/model-config.md, "Inline runs"): a cheap model's lone HTTP
request runs on the I/O thread that received it, without waking the model's
worker; with a second client connection on the I/O thread, over gRPC, and for
a model that opts out (inline_run_max_us "0"), each request still goes to the
worker.

What is observed is the worker thread's sleeps: /proc/<pid>/task/<tid>/status
counts its voluntary context switches, one each time it waits for a request
that is then handed to it. Sequential requests are each answered before the
next is sent, so a worker that computes them sleeps once per request. Outputs
are compared with onnxruntime; nothing asserts on timing.
"""
from __future__ import annotations

import http.client
import json
import pathlib
import socket
import threading

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from harness import Reference
from test_runtime_efficiency import gemm_stack, save_model

REQUESTS = 200
# A wide bound, so that a loaded or sanitized host still counts these runs as cheap.
CHEAP = 'parameters { key: "inline_run_max_us" value { string_value: "5000" } }'
OFF = 'parameters { key: "inline_run_max_us" value { string_value: "0" } }'
BATCHING = "dynamic_batching { }"


def worker_sleeps(pid: int, model: str) -> int:
    """Voluntary context switches of the model's worker thread, run-<model>."""
    name = f"run-{model}"[:15]
    found = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().strip() == name:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    found.append(int(line.split()[1]))
    assert len(found) == 1, f"expected one {name} thread, found {len(found)}"
    return found[0]


def send(client, module, model: str, model_path, reference: Reference, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.standard_normal((1, 16), dtype=np.float32)
        inp = module.InferInput("INPUT0", [1, 16], "FP32")
        inp.set_data_from_numpy(x)
        got = client.infer(model, [inp]).as_numpy("OUTPUT0")
        want = reference.run(model_path, {"INPUT0": x})["OUTPUT0"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_cheap_model_runs_lone_http_requests_without_waking_its_worker(tmp_path, launch):
    model = gemm_stack(16, 1, seed=3)
    cheap = save_model(tmp_path, "cheap", model, [16], [16], extra=f"{BATCHING}\n{CHEAP}")
    off = save_model(tmp_path, "cheap_off", model, [16], [16], extra=f"{BATCHING}\n{OFF}")
    # One I/O thread, whatever the host's default: the second connection below must share it.
    srv = launch(tmp_path, extra_args=("--http-thread-count", "1"))
    srv.wait_models_ready(["cheap", "cheap_off"])
    pid = srv.proc.pid
    reference = Reference()
    http = httpclient.InferenceServerClient(srv.url)
    grpc = grpcclient.InferenceServerClient(srv.grpc_url)
    # The first runs are the worker's: inline runs need a measured run time.
    for name, path in (("cheap", cheap), ("cheap_off", off)):
        send(http, httpclient, name, path, reference, 5, seed=1)

    sleeps = {name: worker_sleeps(pid, name) for name in ("cheap", "cheap_off")}
    send(http, httpclient, "cheap", cheap, reference, REQUESTS, seed=2)
    send(http, httpclient, "cheap_off", off, reference, REQUESTS, seed=2)
    woken = {name: worker_sleeps(pid, name) - sleeps[name] for name in sleeps}
    assert woken["cheap"] <= REQUESTS // 10, woken
    assert woken["cheap_off"] >= REQUESTS // 2, woken

    # A second client connection on the I/O thread (idle here) turns them off:
    # with several clients the worker's overlap is worth more than the wake-up.
    with socket.create_connection(("127.0.0.1", srv.http_port)) as other:
        other.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert other.recv(4096).startswith(b"HTTP/1.1 200"), "the second connection was not served"
        before = worker_sleeps(pid, "cheap")
        send(http, httpclient, "cheap", cheap, reference, 50, seed=5)
        assert worker_sleeps(pid, "cheap") - before >= 25

    # gRPC's threads do not run models inline: the worker computes each request.
    before = worker_sleeps(pid, "cheap")
    send(grpc, grpcclient, "cheap", cheap, reference, 50, seed=4)
    assert worker_sleeps(pid, "cheap") - before >= 25

    # Inline or not, every request is one execution in the statistics.
    for name, sent in (("cheap", 5 + REQUESTS + 50 + 50), ("cheap_off", 5 + REQUESTS)):
        stats = srv.model_stats(name)
        assert stats["inference_count"] == sent, stats
        assert stats["execution_count"] == sent, stats
        assert stats["inference_stats"]["success"]["count"] == sent, stats


def post_all(port: int, model: str, inputs: np.ndarray, outputs: list) -> None:
    """One keep-alive connection: each row of `inputs` as a JSON request, its answer appended."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for row in inputs:
            body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                           "data": row.tolist()}]})
            conn.request("POST", f"/v2/models/{model}/infer", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            text = response.read()
            assert response.status == 200, text
            outputs.append(json.loads(text)["outputs"][0]["data"])
    finally:
        conn.close()


def test_two_io_threads_each_running_inline_answer_every_request_right(tmp_path, launch):
    """Two HTTP I/O threads with one client connection each: both may run the cheap model inline.
    While one thread's inline run answers, the model's worker may already run the request the other
    thread queued meanwhile; each answer must come from its own run (answers read from the
    instance's shared run record crashed the server under this load)."""
    model = gemm_stack(16, 1, seed=3)
    cheap = save_model(tmp_path, "cheap", model, [16], [16], extra=f"{BATCHING}\n{CHEAP}")
    srv = launch(tmp_path, extra_args=("--http-thread-count", "2"))
    srv.wait_models_ready(["cheap"])
    rng = np.random.default_rng(11)
    inputs = [rng.standard_normal((1500, 16), dtype=np.float32) for _ in range(2)]
    outputs = [[], []]
    clients = [threading.Thread(target=post_all, args=(srv.http_port, "cheap", inputs[i], outputs[i]))
               for i in range(2)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    reference = Reference()
    for i in range(2):
        assert len(outputs[i]) == len(inputs[i]), f"client {i} got {len(outputs[i])} answers"
        want = reference.run(cheap, {"INPUT0": inputs[i]})["OUTPUT0"]
        np.testing.assert_allclose(np.array(outputs[i], np.float32), want, rtol=1e-5, atol=1e-6)
    assert srv.model_stats("cheap")["inference_stats"]["success"]["count"] == 3000
