"""--log-format=json (docs/logging.md): every line the server writes (its log
and, with --access-log, the access log) is one JSON object with time (RFC 3339,
microseconds), level, thread and message; the lines written for a request, while it is
handled (front end and batch worker) and at its answer, carry its model,
version and id, and, when it is traced, the trace and span id of its
request span as the collector receives it. Bytes that are no UTF-8 arrive as
U+FFFD; the parser below reads the log strictly."""
from __future__ import annotations

import json
import re

import grpc
import pytest
import requests
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pbg

from harness import HTTP_TIMEOUT_S, http_request_bytes, make_test_models, raw_exchange, start_server
from test_tracing import add_sub_body, new_traceparent, request_span_with_id

pytestmark = pytest.mark.timeout(180)

MODEL = "add_sub_fp32"
RFC3339_MICROS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture(scope="module")
def json_srv(tmp_path_factory, log_dir, collector):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("json_log_models"), [MODEL])
    srv = start_server(repo, log_dir, "json_logs", extra_args=(
        "--log-format=json", "--access-log=true", f"--trace-otlp-endpoint={collector.endpoint}",
        "--trace-sample-rate=1"))
    try:
        srv.wait_models_ready([MODEL])
        yield srv
    finally:
        srv.stop()


def log_records(srv) -> list[dict]:
    """Every line of the server's output, each parsed as one JSON object."""
    text = srv.log_path.read_bytes().decode("utf-8")  # strict: a byte that is no UTF-8 raises
    records = []
    for line in text.splitlines():
        record = json.loads(line)
        assert isinstance(record, dict), line
        assert RFC3339_MICROS.match(record["time"]), line
        assert record["level"] in {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}, line
        assert isinstance(record["thread"], int) and isinstance(record["message"], str), line
        records.append(record)
    return records


def grpc_infer(srv, request_id: str, traceparent: str):
    req = pb.ModelInferRequest(model_name=MODEL, id=request_id)
    for name in ("INPUT0", "INPUT1"):
        tensor = req.inputs.add(name=name, datatype="FP32")
        tensor.shape.extend([1, 16])
        tensor.contents.fp32_contents.extend([1.0] * 16)
    with grpc.insecure_channel(srv.grpc_url) as channel:
        pbg.GRPCInferenceServiceStub(channel).ModelInfer(req, timeout=HTTP_TIMEOUT_S,
                                                         metadata=(("traceparent", traceparent),))


def test_every_line_is_json_and_request_lines_carry_the_exported_trace(json_srv, collector):
    http_tp, http_trace, _ = new_traceparent()
    r = requests.post(f"{json_srv.base}/v2/models/{MODEL}/infer", data=add_sub_body("json-http"),
                      headers={"traceparent": http_tp}, timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 200, r.text
    grpc_tp, grpc_trace, _ = new_traceparent()
    grpc_infer(json_srv, "json-grpc", grpc_tp)
    raw_exchange(json_srv.http_port, http_request_bytes("POST", "/v2/models/x%ff/infer", add_sub_body("json-bad")))

    for request_id, trace_id in (("json-http", http_trace), ("json-grpc", grpc_trace)):
        span = collector.wait_for(f"the request span of {request_id}", request_span_with_id(request_id))
        assert span["traceId"] == trace_id
        mine = [rec for rec in log_records(json_srv) if rec.get("request_id") == request_id]
        # The access log line and the verbose "answered" line (the harness runs --log-verbose 1).
        assert {rec["message"] for rec in mine} >= {"access"}, mine
        assert any("inference request answered" in rec["message"] for rec in mine), mine
        # Lines written while the request is handled, not only at its answer:
        # the front end's (admitted) and the batch worker's (executing).
        assert any("admitted" in rec["message"] for rec in mine), mine
        assert any("executing 1 request(s)" in rec["message"] for rec in mine), mine
        for rec in mine:
            assert rec["model"] == MODEL and rec["version"] == "1", rec
            assert rec["trace_id"] == span["traceId"] and rec["span_id"] == span["spanId"], (rec, span)

    records = log_records(json_srv)
    # The unknown model's request failed before its body was read: no id, the
    # name from the path, its byte 0xff as U+FFFD.
    bad = [rec for rec in records if rec.get("model", "").startswith("x")]
    assert bad and all(rec["model"] == "x\ufffd" and rec["request_id"] == "" for rec in bad), bad
    startup = [rec for rec in records if "model" not in rec]
    assert any(rec["level"] == "INFO" and "listening on" in rec["message"] for rec in startup), startup[-5:]


def test_untraced_lines_carry_no_trace_ids(tmp_path_factory, log_dir):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("json_untraced"), [MODEL])
    # A deprecated flag: Triton's command-line warning becomes a JSON line too
    # (every line of the output is parsed), its message Triton's words.
    srv = start_server(repo, log_dir, "json_logs_untraced",
                       extra_args=("--log-format=json", "--strict-model-config=false"))
    try:
        srv.wait_models_ready([MODEL])
        warning = ("Warning: '--strict-model-config' has been deprecated! "
                   "Please use '--disable-auto-complete-config' instead.")
        assert [rec["level"] for rec in log_records(srv) if rec["message"] == warning] == ["WARNING"]
        r = requests.post(f"{srv.base}/v2/models/{MODEL}/infer", data=add_sub_body("plain-1"),
                          timeout=HTTP_TIMEOUT_S)
        assert r.status_code == 200, r.text
        mine = [rec for rec in log_records(srv) if rec.get("request_id") == "plain-1"]
        assert mine and all("trace_id" not in rec and rec["model"] == MODEL for rec in mine), mine
    finally:
        srv.stop()


def test_log_format_json_can_be_switched_on_at_run_time(tmp_path_factory, log_dir):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("json_switch"), [MODEL])
    srv = start_server(repo, log_dir, "json_logs_switch")
    try:
        r = requests.post(f"{srv.base}/v2/logging", json={"log_format": "json"}, timeout=HTTP_TIMEOUT_S)
        assert r.status_code == 200 and r.json()["log_format"] == "json", r.text
        r = requests.post(f"{srv.base}/v2/logging", json={"log_format": "yaml"}, timeout=HTTP_TIMEOUT_S)
        assert r.status_code == 400 and "invalid argument for log_format, got: yaml" in r.json()["error"], r.text
        requests.post(f"{srv.base}/v2/models/{MODEL}/infer", data=add_sub_body("switched"), timeout=HTTP_TIMEOUT_S)
        text = srv.log_path.read_text()
        last = [line for line in text.splitlines() if '"switched"' in line]
        assert last and json.loads(last[-1])["request_id"] == "switched", text[-2000:]
    finally:
        srv.stop()
