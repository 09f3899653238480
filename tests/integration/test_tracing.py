"""Distributed tracing (--trace-otlp-endpoint, docs/tracing.md): W3C traceparent
on HTTP and gRPC, spans exported over OTLP/HTTP JSON to a small collector
written for this test, batches linked to their requests, and a server that
keeps serving (and counts the drops) when the collector is down.

Waits are bounded polls for spans to arrive; nothing asserts on timing."""
from __future__ import annotations

import concurrent.futures
import http.server
import json
import queue
import re
import secrets
import subprocess
import threading
import time

import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from harness import (HTTP_TIMEOUT_S, STARTUP_TIMEOUT_S, Server, assert_matches, free_ports, infer_inputs,
                     make_test_models, model_file, raw_exchange, sample_array, start_server)

pytestmark = pytest.mark.timeout(300)

SPAN_WAIT_S = 30  # bound on spans reaching the collector (the exporter sends every second)
KIND_INTERNAL, KIND_SERVER = 1, 2
HTTP_SPAN = "POST /v2/models/{model}/infer"
GRPC_SPAN = "inference.GRPCInferenceService/ModelInfer"
BATCH_MODEL = "mlp_trace_batch"  # max_batch_size 8, waits up to 2 s for a full batch (fixed window)
BATCH_CALLERS = 8


class OtlpCollector:
    """An OTLP/HTTP (JSON) trace receiver: keeps every ExportTraceServiceRequest."""

    def __init__(self):
        self.lock = threading.Lock()
        self.exports: list[dict] = []  # {"path", "content_type", "body"}
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the exporter expects

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with collector.lock:
                    collector.exports.append({"path": self.path,
                                              "content_type": self.headers.get("Content-Type"),
                                              "body": json.loads(body)})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"  # no path: /v1/traces

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[dict]:
        with self.lock:
            exports = list(self.exports)
        out = []
        for export in exports:
            for resource_spans in export["body"]["resourceSpans"]:
                for scope_spans in resource_spans["scopeSpans"]:
                    out.extend(scope_spans["spans"])
        return out

    def wait_for(self, what: str, find):
        """Polls until find(spans) returns something truthy; returns it."""
        deadline = time.monotonic() + SPAN_WAIT_S
        while True:
            found = find(self.spans())
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {SPAN_WAIT_S}s; spans so far: "
                                     f"{json.dumps(self.spans())[:3000]}")
            time.sleep(0.05)


def attributes(span: dict) -> dict:
    out = {}
    for a in span.get("attributes", []):
        v = a["value"]
        out[a["key"]] = int(v["intValue"]) if "intValue" in v else v.get("stringValue")
    return out


def new_traceparent(sampled: bool = True) -> tuple[str, str, str]:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{parent_id}-{'01' if sampled else '00'}", trace_id, parent_id


def trace_of(trace_id: str):
    """A finder for the request span of `trace_id` and its children, once
    the request, queue and compute spans and the batch span linking the
    request have all arrived: {"request", "queue", "compute", "batch"}."""
    def find(spans):
        mine = [s for s in spans if s["traceId"] == trace_id]
        request = [s for s in mine if s["kind"] == KIND_SERVER]
        if not request:
            return None
        rid = request[0]["spanId"]
        children = {s["name"]: s for s in mine if s.get("parentSpanId") == rid}
        batches = [s for s in spans if s["name"] == "batch"
                   and {"traceId": trace_id, "spanId": rid} in s.get("links", [])]
        if "queue" not in children or "compute" not in children or not batches:
            return None
        return {"request": request[0], "queue": children["queue"], "compute": children["compute"],
                "batch": batches[0], "all": mine}
    return find


def request_span_with_id(request_id: str):
    def find(spans):
        return next((s for s in spans if s["kind"] == KIND_SERVER
                     and attributes(s).get("ortserve.request_id") == request_id), None)
    return find


def scrape(srv) -> str:
    r = requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 200
    return r.text


def metric(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    assert m, f"no sample {name}{labels} in:\n{text[:2000]}"
    return float(m[1])


def add_sub_inputs(client_module, seed: int):
    a = sample_array("FP32", (2, 16), seed=seed)
    b = sample_array("FP32", (2, 16), seed=seed + 1)
    inputs = []
    for name, x in (("INPUT0", a), ("INPUT1", b)):
        inp = client_module.InferInput(name, list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        inputs.append(inp)
    return a, b, inputs


def check_add_sub(result, repo, reference, a, b):
    ref = reference.run(model_file(repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    assert_matches(result.as_numpy("OUTPUT0"), ref["OUTPUT0"])
    assert_matches(result.as_numpy("OUTPUT1"), ref["OUTPUT1"])


def check_well_formed(t: dict, trace_id: str, parent_id: str, model: str):
    request, queue, compute, batch = t["request"], t["queue"], t["compute"], t["batch"]
    assert request["parentSpanId"] == parent_id  # the caller's span is our parent
    assert request["kind"] == KIND_SERVER
    assert attributes(request)["ortserve.model"] == model
    assert attributes(request)["ortserve.model_version"] == "1"
    for child in (queue, compute):
        assert child["traceId"] == trace_id and child["parentSpanId"] == request["spanId"]
        assert child["kind"] == KIND_INTERNAL
        assert child["spanId"] not in (request["spanId"], parent_id)
    # The queue ends where the batch starts; both lie within the request.
    assert int(request["startTimeUnixNano"]) <= int(queue["startTimeUnixNano"])
    assert int(queue["endTimeUnixNano"]) == int(compute["startTimeUnixNano"])
    assert int(compute["endTimeUnixNano"]) <= int(request["endTimeUnixNano"])
    assert compute["links"] == [{"traceId": batch["traceId"], "spanId": batch["spanId"]}]
    assert batch["kind"] == KIND_INTERNAL and "parentSpanId" not in batch
    assert batch["traceId"] != trace_id  # a batch span has a trace of its own
    assert attributes(batch)["ortserve.model"] == model
    assert (batch["startTimeUnixNano"], batch["endTimeUnixNano"]) == \
        (compute["startTimeUnixNano"], compute["endTimeUnixNano"])


# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trace_repo(tmp_path_factory):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("trace_models"), ["add_sub_fp32"])
    demo = make_test_models.demo
    # Triton's fixed batching window (not the adaptive one), so that callers
    # arriving together wait for each other.
    demo.write_model(repo, BATCH_MODEL, demo.build_mlp_classifier(), demo.mlp_classifier_config(
        BATCH_MODEL, BATCH_CALLERS, "dynamic_batching { max_queue_delay_microseconds: 2000000 }\n"
        'parameters { key: "batch_window" value: { string_value: "fixed" } }'))
    return repo


@pytest.fixture(scope="module")
def tsrv(trace_repo, collector, log_dir):
    srv = start_server(trace_repo, log_dir, "tracing", extra_args=(
        "--trace-otlp-endpoint", collector.endpoint, "--trace-sample-rate", "1"))
    try:
        srv.wait_models_ready(["add_sub_fp32", BATCH_MODEL])
        yield srv
    finally:
        srv.stop()


def test_http_traceparent_continues_the_callers_trace(tsrv, collector, trace_repo, reference):
    header, trace_id, parent_id = new_traceparent()
    a, b, inputs = add_sub_inputs(httpclient, seed=10)
    with httpclient.InferenceServerClient(tsrv.url, network_timeout=60) as c:
        result = c.infer("add_sub_fp32", inputs, request_id="http-traced", headers={"traceparent": header})
    check_add_sub(result, trace_repo, reference, a, b)

    t = collector.wait_for(f"spans of trace {trace_id}", trace_of(trace_id))
    check_well_formed(t, trace_id, parent_id, "add_sub_fp32")
    request = t["request"]
    assert request["name"] == HTTP_SPAN
    assert attributes(request)["http.response.status_code"] == 200
    assert attributes(request)["ortserve.request_id"] == "http-traced"
    assert "code" not in request["status"]
    assert attributes(t["compute"])["ortserve.batch.size"] >= 2  # the request's own 2 rows at least
    # What the collector received: OTLP/HTTP JSON on the default path.
    with collector.lock:
        export = collector.exports[-1]
    assert export["path"] == "/v1/traces" and export["content_type"] == "application/json"
    resource = {a["key"]: a["value"]["stringValue"]
                for a in export["body"]["resourceSpans"][0]["resource"]["attributes"]}
    assert resource["service.name"] == "ortserve" and resource["service.version"]


def test_grpc_traceparent_continues_the_callers_trace(tsrv, collector, trace_repo, reference):
    header, trace_id, parent_id = new_traceparent()
    a, b, inputs = add_sub_inputs(grpcclient, seed=20)
    with grpcclient.InferenceServerClient(tsrv.grpc_url) as c:
        result = c.infer("add_sub_fp32", inputs, request_id="grpc-traced", headers={"traceparent": header})
    check_add_sub(result, trace_repo, reference, a, b)

    t = collector.wait_for(f"spans of trace {trace_id}", trace_of(trace_id))
    check_well_formed(t, trace_id, parent_id, "add_sub_fp32")
    assert t["request"]["name"] == GRPC_SPAN
    assert attributes(t["request"])["rpc.grpc.status_code"] == 0
    assert attributes(t["request"])["ortserve.request_id"] == "grpc-traced"


def test_grpc_stream_requests_continue_the_streams_trace(tsrv, collector, trace_repo, reference):
    """Each request on a ModelStreamInfer stream gets its own request span,
    under the traceparent the stream was opened with."""
    header, trace_id, parent_id = new_traceparent()
    answers: queue.Queue = queue.Queue()
    sent = {}
    with grpcclient.InferenceServerClient(tsrv.grpc_url) as c:
        c.start_stream(callback=lambda result, error: answers.put((result, error)),
                       headers={"traceparent": header})
        for k in range(2):
            a, b, inputs = add_sub_inputs(grpcclient, seed=30 + k)
            sent[f"stream-{k}"] = (a, b)
            c.async_stream_infer("add_sub_fp32", inputs, request_id=f"stream-{k}")
        for _ in sent:
            result, error = answers.get(timeout=HTTP_TIMEOUT_S)
            assert error is None, error
            a, b = sent[result.get_response().id]
            check_add_sub(result, trace_repo, reference, a, b)
        c.stop_stream()
    for request_id in sent:
        span = collector.wait_for(f"request span of {request_id}", request_span_with_id(request_id))
        assert span["traceId"] == trace_id
        assert span["parentSpanId"] == parent_id
        assert span["name"] == "inference.GRPCInferenceService/ModelStreamInfer"


def add_sub_body(request_id: str) -> bytes:
    return json.dumps({"id": request_id, "inputs": [
        {"name": n, "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16} for n in ("INPUT0", "INPUT1")]}
    ).encode()


def infer_with_traceparents(srv, request_id: str, traceparents: list[str]) -> dict:
    """One add_sub_fp32 request carrying these traceparent headers (any
    number, repeats included: raw HTTP); returns the response body."""
    body = add_sub_body(request_id)
    head = "".join(f"traceparent: {t}\r\n" for t in traceparents)
    raw = (f"POST /v2/models/add_sub_fp32/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{head}"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    response = raw_exchange(srv.http_port, raw)
    assert response is not None and response.status == 200, response
    return response.json()


def test_requests_without_a_valid_traceparent_start_a_new_trace(tsrv, collector):
    upper = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"  # uppercase hex: invalid
    valid, valid_trace, _ = new_traceparent()
    cases = {"no-header": [], "invalid-header": [upper],
             "two-headers": [valid, valid]}  # repeated: invalid as a whole (W3C)
    for request_id, traceparents in cases.items():
        answer = infer_with_traceparents(tsrv, request_id, traceparents)
        assert answer["outputs"][0]["data"] == [2.0] * 16  # 1 + 1: still served correctly
        span = collector.wait_for(f"request span of {request_id}", request_span_with_id(request_id))
        assert "parentSpanId" not in span  # a root span: the trace starts here
        assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and span["traceId"] != "0" * 32
        assert span["traceId"] not in (upper[3:35].lower(), valid_trace)


def test_unsampled_traceparent_is_not_traced(tsrv, collector):
    header, trace_id, _ = new_traceparent(sampled=False)
    _, _, inputs = add_sub_inputs(httpclient, seed=30)
    with httpclient.InferenceServerClient(tsrv.url, network_timeout=60) as c:
        c.infer("add_sub_fp32", inputs, headers={"traceparent": header})
        # A traced request sent afterwards: once its spans are in, the first
        # request's would be too (they are pushed earlier, and sent in order).
        marker, marker_trace, _ = new_traceparent()
        c.infer("add_sub_fp32", inputs, headers={"traceparent": marker})
    collector.wait_for("the marker request's spans", trace_of(marker_trace))
    assert not [s for s in collector.spans() if s["traceId"] == trace_id]


def test_a_failed_request_gets_a_request_span_with_its_status(tsrv, collector):
    header, trace_id, parent_id = new_traceparent()
    r = tsrv.infer_raw("add_sub_fp32", {"inputs": [{"name": "NOPE", "shape": [1, 16], "datatype": "FP32",
                                                     "data": [0.0] * 16}]},
                       headers={"traceparent": header})
    assert r.status_code == 400
    span = collector.wait_for("the failed request's span",
                              lambda spans: next((s for s in spans if s["traceId"] == trace_id), None))
    assert span["kind"] == KIND_SERVER and span["parentSpanId"] == parent_id
    assert attributes(span)["http.response.status_code"] == 400
    assert "code" not in span["status"]  # 4xx is the client's error, not the server's
    # It never ran: no queue, compute or batch span (they would have come with it).
    assert [s["name"] for s in collector.spans() if s["traceId"] == trace_id] == [HTTP_SPAN]


def test_requests_batched_together_share_one_batch_span(tsrv, collector, trace_repo, reference):
    headers = [new_traceparent() for _ in range(BATCH_CALLERS)]
    features = [sample_array("FP32", (1, 16), seed=100 + i) / 100 for i in range(BATCH_CALLERS)]
    barrier = threading.Barrier(BATCH_CALLERS, timeout=60)

    def call(i: int):
        header = {"traceparent": headers[i][0]}
        if i % 2 == 0:  # half over HTTP, half over gRPC: one batch either way
            with httpclient.InferenceServerClient(tsrv.url, network_timeout=60) as c:
                barrier.wait()
                r = c.infer(BATCH_MODEL, infer_inputs({"features": ("FP32", features[i])}), headers=header)
        else:
            with grpcclient.InferenceServerClient(tsrv.grpc_url) as c:
                inp = grpcclient.InferInput("features", [1, 16], "FP32")
                inp.set_data_from_numpy(features[i])
                barrier.wait()
                r = c.infer(BATCH_MODEL, [inp], headers=header)
        return r.as_numpy("probabilities"), r.as_numpy("label")

    with concurrent.futures.ThreadPoolExecutor(BATCH_CALLERS) as pool:
        results = list(pool.map(call, range(BATCH_CALLERS)))
    for i, (probabilities, label) in enumerate(results):
        ref = reference.run(model_file(trace_repo, BATCH_MODEL), {"features": features[i]})
        assert_matches(probabilities, ref["probabilities"])
        assert_matches(label, ref["label"])

    traces = [collector.wait_for(f"spans of trace {tid}", trace_of(tid)) for _, tid, _ in headers]
    for t, (_, trace_id, parent_id) in zip(traces, headers):
        check_well_formed(t, trace_id, parent_id, BATCH_MODEL)
    # Every request span is linked by exactly one batch span, which is emitted once.
    batches = {}
    for t in traces:
        batches.setdefault(t["batch"]["spanId"], t["batch"])
    all_spans = collector.spans()
    for span_id in batches:
        assert sum(1 for s in all_spans if s["spanId"] == span_id) == 1, "batch span sent twice"
    linked = [link["spanId"] for b in batches.values() for link in b["links"]]
    assert sorted(linked) == sorted(t["request"]["spanId"] for t in traces)
    # Batching put several of them into one execution (the model waits up
    # to 2 s for a full batch of 8: normally all of them share one).
    biggest = max(batches.values(), key=lambda b: len(b["links"]))
    assert len(biggest["links"]) > 1, batches
    assert attributes(biggest)["ortserve.batch.requests"] >= len(biggest["links"])
    assert attributes(biggest)["ortserve.batch.size"] == attributes(biggest)["ortserve.batch.requests"]


def test_metrics_count_exported_spans(tsrv, collector):
    text = scrape(tsrv)
    assert metric(text, "ortserve_trace_spans_exported_total") >= 4
    assert metric(text, "ortserve_trace_spans_dropped_total", '{reason="buffer_full"}') == 0
    assert metric(text, "ortserve_trace_spans_dropped_total", '{reason="export_failed"}') == 0
    assert metric(text, "ortserve_trace_export_failures_total") == 0
    assert "# TYPE ortserve_trace_spans_exported_total counter" in text


def test_a_dead_collector_costs_spans_not_requests(trace_repo, launch, reference):
    dead = f"http://127.0.0.1:{free_ports(1)[0]}/v1/traces"  # nothing listens there
    srv = launch(trace_repo, extra_args=("--trace-otlp-endpoint", dead, "--trace-sample-rate", "1",
                                         "--trace-buffer-spans", "2"))
    srv.wait_models_ready(["add_sub_fp32"])
    for i in range(3):
        a, b, inputs = add_sub_inputs(httpclient, seed=40 + i)
        with httpclient.InferenceServerClient(srv.url, network_timeout=60) as c:
            check_add_sub(c.infer("add_sub_fp32", inputs), trace_repo, reference, a, b)
        a, b, inputs = add_sub_inputs(grpcclient, seed=50 + i)
        with grpcclient.InferenceServerClient(srv.grpc_url) as c:
            check_add_sub(c.infer("add_sub_fp32", inputs), trace_repo, reference, a, b)
    # Each request brings 3 or 4 spans; a buffer of 2 takes at most 2 of them.
    text = scrape(srv)
    assert metric(text, "ortserve_trace_spans_dropped_total", '{reason="buffer_full"}') >= 6
    deadline = time.monotonic() + SPAN_WAIT_S
    while metric(text, "ortserve_trace_export_failures_total") < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
        text = scrape(srv)
    assert metric(text, "ortserve_trace_export_failures_total") >= 1
    assert metric(text, "ortserve_trace_spans_dropped_total", '{reason="export_failed"}') >= 1
    assert metric(text, "ortserve_trace_spans_exported_total") == 0
    assert srv.alive() and srv.get("/v2/health/live").status_code == 200
    assert "trace export failed" in srv.log_text()


def test_an_https_endpoint_is_refused_at_startup(trace_repo, log_dir):
    srv = Server(trace_repo, log_dir / "tracing_https.log",
                 extra_args=("--trace-otlp-endpoint", "https://collector.example:4318")).start()
    try:
        code = srv.proc.wait(timeout=STARTUP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        srv.stop()
        raise AssertionError("ortserve started with an https trace endpoint")
    srv.stop()
    assert code != 0
    assert "https is not supported" in srv.log_text()
