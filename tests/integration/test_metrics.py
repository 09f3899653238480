"""The Prometheus endpoint (--metrics-port, GET /metrics): the exposition
parses (strict line grammar and prometheus_client's parser), and the per model
counters and histograms move by exactly the requests sent, by outcome.

One server of its own (a small repository) so that no other test's traffic
moves the counters; every check compares a scrape before with one after."""
from __future__ import annotations

import concurrent.futures
import json
import math
import re
import socket
import threading
import time
from pathlib import Path

import pytest
import requests
import tritonclient.grpc as grpcclient
from prometheus_client.parser import text_string_to_metric_families

from harness import (HTTP_TIMEOUT_S, check_add_sub_fp32, make_test_models, ortserve_binary, sample_array,
                     start_server)

pytestmark = pytest.mark.timeout(240)

MODELS = ["add_sub_fp32", "slow_queue2", "bad_input_name"]
SERVING = ["add_sub_fp32", "slow_queue2"]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HISTOGRAMS = ["ortserve_request_duration_seconds", "ortserve_queue_duration_seconds",
              "ortserve_compute_input_duration_seconds", "ortserve_compute_infer_duration_seconds",
              "ortserve_compute_output_duration_seconds"]
OUTCOMES = ["success", "invalid_input", "rejected", "timeout", "cancelled", "internal"]

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
HELP_RE = re.compile(rf"# HELP ({_NAME}) .*")
TYPE_RE = re.compile(rf"# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)")
SAMPLE_RE = re.compile(rf"({_NAME})(\{{{_LABEL}(?:,{_LABEL})*\}})? "
                       r"([+-]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|Inf)|NaN)")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@pytest.fixture(scope="module")
def msrv(tmp_path_factory, log_dir):
    repo = make_test_models.build_test_repository(tmp_path_factory.mktemp("metrics_models"), MODELS)
    srv = start_server(repo, log_dir, "metrics")
    try:
        srv.wait_models_ready(SERVING)
        srv.test_repo = repo
        yield srv
    finally:
        srv.stop()


def metrics_url(srv) -> str:
    return f"http://127.0.0.1:{srv.metrics_port}/metrics"


def scrape_text(srv) -> str:
    r = requests.get(metrics_url(srv), timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"] == CONTENT_TYPE
    return r.text


def parse_strict(text: str) -> dict:
    """Checks every line against the text format 0.0.4 and returns
    {(name, frozenset(labels)): value}."""
    assert text.endswith("\n")
    samples, families, current = {}, {}, None
    for number, line in enumerate(text.split("\n")[:-1], 1):
        if m := HELP_RE.fullmatch(line):
            assert m[1] not in families, f"line {number}: family {m[1]} declared twice"
            current = m[1]
            families[current] = None
        elif m := TYPE_RE.fullmatch(line):
            assert m[1] == current, f"line {number}: TYPE without HELP: {line}"
            families[current] = m[2]
        elif m := SAMPLE_RE.fullmatch(line):
            name = m[1]
            allowed = ({current + s for s in ("_bucket", "_sum", "_count")}
                       if families[current] == "histogram" else {current})
            assert name in allowed, f"line {number}: {name} outside family {current}"
            labels = frozenset(LABEL_RE.findall(m[2] or ""))
            assert (name, labels) not in samples, f"line {number}: duplicate sample {line}"
            samples[(name, labels)] = float(m[3])
        else:
            pytest.fail(f"line {number} is not in the Prometheus text format: {line!r}")
    return samples


def scrape(srv) -> dict:
    return parse_strict(scrape_text(srv))


def value(samples: dict, name: str, **labels) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"no sample {name}{labels}"
    return samples[key]


def model_labels(model: str) -> dict:
    return {"model": model, "version": "1"}


def outcome_counts(samples: dict, model: str) -> dict:
    return {o: value(samples, "ortserve_requests_total", outcome=o, **model_labels(model)) for o in OUTCOMES}


def histogram(samples: dict, name: str, **labels) -> tuple[list, float, float]:
    """[(le, cumulative)] sorted by le, _count, _sum."""
    buckets = []
    for (sample, sample_labels), v in samples.items():
        d = dict(sample_labels)
        if sample == name + "_bucket" and {k: d.get(k) for k in labels} == labels:
            buckets.append((float(d["le"]), v))
    buckets.sort()
    return buckets, value(samples, name + "_count", **labels), value(samples, name + "_sum", **labels)


def add_sub_body(rows: int, seed: int, cols: int = 16) -> dict:
    a = sample_array("FP32", (rows, cols), seed=seed)
    b = sample_array("FP32", (rows, cols), seed=seed + 1)
    return {"inputs": [{"name": n, "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}
                       for n, x in (("INPUT0", a), ("INPUT1", b))]}


# ---------------------------------------------------------------------------


def test_exposition_parses_with_prometheus_client(msrv, reference):
    check_add_sub_fp32(msrv, msrv.test_repo, reference)  # some traffic first
    text = scrape_text(msrv)
    parse_strict(text)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # prometheus_client strips _total from counter family names.
    for name, kind in [("ortserve_requests", "counter"), ("ortserve_inferences", "counter"),
                       ("ortserve_executions", "counter"), ("ortserve_pending_requests", "gauge"),
                       ("ortserve_busy_instances", "gauge"), ("ortserve_model_state", "gauge"),
                       ("ortserve_model_load_duration_seconds", "gauge"), ("ortserve_batch_size", "histogram"),
                       ("ortserve_open_connections", "gauge"), ("ortserve_active_calls", "gauge"),
                       ("ortserve_build_info", "gauge"), ("process_cpu_seconds", "counter"),
                       ("process_resident_memory_bytes", "gauge"), ("process_threads", "gauge"),
                       ("process_start_time_seconds", "gauge"),
                       *[(h, "histogram") for h in HISTOGRAMS]]:
        assert name in families, f"{name} missing; families: {sorted(families)}"
        assert families[name].type == kind, (name, families[name].type)
        assert families[name].documentation, name
    build = families["ortserve_build_info"].samples[0]
    assert build.value == 1
    assert build.labels["onnxruntime_version"] and build.labels["version"]
    assert "CPUExecutionProvider" in build.labels["execution_providers"]
    # The allocator label names the malloc really mapped into the server:
    # jemalloc unless the build chose "system" (or a sanitizer's own).
    maps = Path(f"/proc/{msrv.proc.pid}/maps").read_text()
    expected = ("asan" if "libasan" in maps else "tsan" if "libtsan" in maps
                else "jemalloc" if "libjemalloc" in maps else "glibc")  # no LD_PRELOAD here
    assert build.labels["allocator"].split()[0] == expected, (build.labels["allocator"], expected)
    cache = ortserve_binary().resolve().parent / "CMakeCache.txt"
    config = cache.read_text() if cache.exists() else ""
    if re.search(r"^ORTSERVE_ALLOCATOR:STRING=jemalloc$", config, re.M) \
            and not re.search(r"^ORTSERVE_SANITIZE:STRING=.+$", config, re.M):
        assert expected == "jemalloc", f"built with ORTSERVE_ALLOCATOR=jemalloc but running on {expected}"
    threads = families["process_threads"].samples[0].value
    assert threads >= 4  # http, grpc, metrics and scheduler threads at least
    assert families["process_resident_memory_bytes"].samples[0].value > 0
    assert families["process_start_time_seconds"].samples[0].value <= time.time()


def test_metrics_path_method_and_head(msrv):
    base = f"http://127.0.0.1:{msrv.metrics_port}"
    assert requests.get(base + "/", timeout=HTTP_TIMEOUT_S).status_code == 404
    assert requests.get(base + "/v2/health/live", timeout=HTTP_TIMEOUT_S).status_code == 404
    r = requests.post(base + "/metrics", data=b"", timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 405 and "GET" in r.headers.get("Allow", "")
    head = requests.head(base + "/metrics", timeout=HTTP_TIMEOUT_S)
    assert head.status_code == 200 and head.headers["Content-Type"] == CONTENT_TYPE
    # The inference port does not serve metrics.
    assert msrv.get("/metrics").status_code == 404


def test_model_state_and_load_duration(msrv):
    s = scrape(msrv)
    for model in SERVING:
        assert value(s, "ortserve_model_state", state="READY", **model_labels(model)) == 1
        assert value(s, "ortserve_model_state", state="UNAVAILABLE", **model_labels(model)) == 0
        assert value(s, "ortserve_model_load_duration_seconds", **model_labels(model)) > 0
    # A model that failed to load is reported too (it has no per-request series).
    assert value(s, "ortserve_model_state", state="UNAVAILABLE", **model_labels("bad_input_name")) == 1
    assert value(s, "ortserve_model_state", state="READY", **model_labels("bad_input_name")) == 0
    assert ("ortserve_requests_total",
            frozenset({**model_labels("bad_input_name"), "outcome": "success"}.items())) not in s


def test_counters_and_histograms_move_by_exactly_the_requests(msrv):
    model = "add_sub_fp32"
    labels = model_labels(model)
    http_requests, grpc_requests, rows = 7, 3, 2
    before = scrape(msrv)
    for i in range(http_requests):
        r = msrv.infer_raw(model, add_sub_body(rows, seed=100 + 2 * i))
        assert r.status_code == 200, r.text[:300]
    with grpcclient.InferenceServerClient(msrv.grpc_url) as c:
        for i in range(grpc_requests):
            a = sample_array("FP32", (rows, 16), seed=200 + i)
            inputs = []
            for name in ("INPUT0", "INPUT1"):
                inp = grpcclient.InferInput(name, [rows, 16], "FP32")
                inp.set_data_from_numpy(a)
                inputs.append(inp)
            c.infer(model, inputs)
    after = scrape(msrv)
    sent = http_requests + grpc_requests

    delta = {o: outcome_counts(after, model)[o] - outcome_counts(before, model)[o] for o in OUTCOMES}
    assert delta == {**{o: 0 for o in OUTCOMES}, "success": sent}
    assert (value(after, "ortserve_inferences_total", **labels)
            - value(before, "ortserve_inferences_total", **labels)) == sent * rows
    executions = (value(after, "ortserve_executions_total", **labels)
                  - value(before, "ortserve_executions_total", **labels))
    assert 1 <= executions <= sent  # requests sent one at a time may still share a batch

    for name in HISTOGRAMS:
        b_buckets, b_count, b_sum = histogram(before, name, **labels)
        a_buckets, a_count, a_sum = histogram(after, name, **labels)
        assert a_count - b_count == sent, name
        assert a_sum >= b_sum, name
        check_buckets(a_buckets, a_count, name)
    _, b_count, b_sum = histogram(before, "ortserve_batch_size", **labels)
    a_buckets, a_count, a_sum = histogram(after, "ortserve_batch_size", **labels)
    assert a_count - b_count == executions
    assert a_sum - b_sum == sent * rows  # every row ran in exactly one execution
    check_buckets(a_buckets, a_count, "ortserve_batch_size")
    # Nothing waits in the queue or runs once every answer is back.
    assert value(after, "ortserve_pending_requests", **labels) == 0
    assert value(after, "ortserve_busy_instances", **labels) == 0


def check_buckets(buckets: list, count: float, name: str) -> None:
    les = [le for le, _ in buckets]
    assert les[-1] == math.inf, name
    assert les == sorted(set(les)), name
    cumulative = [v for _, v in buckets]
    assert all(x <= y for x, y in zip(cumulative, cumulative[1:])), (name, cumulative)
    assert cumulative[-1] == count, name
    if name != "ortserve_batch_size":
        assert les[0] == pytest.approx(50e-6) and les[-2] == 10, (name, les)


def test_invalid_input_is_counted(msrv):
    model = "add_sub_fp32"
    before = outcome_counts(scrape(msrv), model)
    # Decodes fine (15 values for shape [1, 15]) but the model wants [-1, 16].
    r = msrv.infer_raw(model, add_sub_body(1, seed=7, cols=15))
    assert r.status_code == 400, r.text[:300]
    after = outcome_counts(scrape(msrv), model)
    assert {o: after[o] - before[o] for o in OUTCOMES} == {**{o: 0 for o in OUTCOMES}, "invalid_input": 1}


def test_queue_full_rejections_are_counted(msrv):
    model = "slow_queue2"  # one instance, max_queue_size 2, ~100 ms per request
    callers = 16
    before = scrape(msrv)
    barrier = threading.Barrier(callers, timeout=60)

    def call(i):
        x = sample_array("FP32", (1, 16), seed=5000 + i)
        body = {"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": x.ravel().tolist()}]}
        barrier.wait()
        return msrv.infer_raw(model, json.dumps(body).encode(), timeout=HTTP_TIMEOUT_S * 2).status_code

    with concurrent.futures.ThreadPoolExecutor(callers) as pool:
        codes = list(pool.map(call, range(callers)))
    assert set(codes) <= {200, 503}, codes
    after = scrape(msrv)
    delta = {o: outcome_counts(after, model)[o] - outcome_counts(before, model)[o] for o in OUTCOMES}
    assert delta["success"] == codes.count(200)
    assert delta["rejected"] == codes.count(503)
    assert delta["rejected"] > 0, "16 simultaneous requests on a queue of 2 saw no rejection"
    assert sum(delta.values()) == callers
    _, b_count, _ = histogram(before, "ortserve_request_duration_seconds", **model_labels(model))
    _, a_count, _ = histogram(after, "ortserve_request_duration_seconds", **model_labels(model))
    assert a_count - b_count == codes.count(200)  # successful requests only


def test_open_connections_gauge_follows_clients(msrv):
    def gauge():
        return value(scrape(msrv), "ortserve_open_connections", protocol="http")

    def wait_for(predicate, what):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if predicate(gauge()):
                return
            time.sleep(0.05)
        pytest.fail(f"timed out waiting for the http connection gauge: {what} (now {gauge()})")

    base = gauge()
    socks = [socket.create_connection(("127.0.0.1", msrv.http_port)) for _ in range(3)]
    try:
        wait_for(lambda g: g >= base + 3, f">= {base + 3}")
    finally:
        for s in socks:
            s.close()
    wait_for(lambda g: g <= base, f"<= {base}")
    assert value(scrape(msrv), "ortserve_active_calls", protocol="grpc") == 0


def test_allow_metrics_false_closes_the_port(launch, tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "models", ["add_sub_fp32"])
    srv = launch(repo, extra_args=("--allow-metrics=false",))
    srv.wait_models_ready(["add_sub_fp32"])
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=5)


def test_metrics_address_flag(launch, tmp_path):
    # The harness passes --metrics-port (a free port) to every server.
    repo = make_test_models.build_test_repository(tmp_path / "models", ["add_sub_fp32"])
    srv = launch(repo, extra_args=("--metrics-address", "127.0.0.1"))
    srv.wait_models_ready(["add_sub_fp32"])
    assert re.search(rf"metrics endpoint listening on 127\.0\.0\.1:{srv.metrics_port}", srv.log_text())
    r = requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 200
    assert 'ortserve_model_state{model="add_sub_fp32",version="1",state="READY"} 1' in r.text
