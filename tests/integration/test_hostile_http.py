"""Hostile HTTP clients must not exhaust the server's descriptors, memory or
I/O thread (docs/limits.md):

  - out of descriptors (EMFILE), the accept loop pauses instead of spinning,
    logs a line per interval rather than per failure, and serves again once
    connections close;
  - idle connections to the metrics port stop at its own limit, so the
    inference port keeps the descriptors it needs;
  - a JSON shape that claims far more data than the body holds is refused
    before a buffer of the shape's size exists;
  - a gzip bomb is not inflated for a model that is not there, and for one
    that is, it is inflated (up to the limit) off the HTTP I/O thread;
  - error bodies are valid JSON and the log valid UTF-8 whatever bytes a
    request's path carries.

Costs are CPU nanoseconds (hostile_clients.cpu_ns) as ratios to valid
requests, with generous margins, and peak RSS: never timing."""
from __future__ import annotations

import json
import re
import time

import pytest
import requests

from harness import Server, assert_error, make_test_models, raw_exchange, http_request_bytes, start_server
from hostile_clients import (MODEL, accept_queue, claimed_shape_body, close_all, cpu_ns, gzip_bomb, nofile_command,
                             open_connections, reset_peak_rss, sanitizer_runtime, status_kib, valid_body)

pytestmark = pytest.mark.timeout(180)

# Descriptors of a server whose soft and hard limits are both this low: about
# 16 in use when idle (listeners, epoll, eventfds, the log), so a few dozen
# connections exhaust it.
NOFILE = 64
# Requests per cost measurement: enough nanoseconds to compare, seconds in all.
VALID_REQUESTS = 300
BAD_REQUESTS = 40
# Accept pauses reach 1 s: a new request waits that long at most once
# descriptors are free again; this only turns a hang into a failure.
RECOVERY_BOUND_S = 30


class DescriptorLimitedServer(Server):
    """A server started with RLIMIT_NOFILE soft = hard = `nofile`, so that it
    cannot raise its soft limit past it."""

    def __init__(self, *args, nofile: int, **kw):
        super().__init__(*args, **kw)
        self.nofile = nofile

    def command(self) -> list[str]:
        return nofile_command(super().command(), self.nofile)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("hostile_models"), [MODEL])


@pytest.fixture
def limited(repo, log_dir, request):
    """Starts descriptor-limited servers for one test; stops them after it."""
    started = []

    def _start(name: str, *extra_args: str) -> DescriptorLimitedServer:
        srv = DescriptorLimitedServer(repo, log_dir / f"{name}.log", nofile=NOFILE, extra_args=extra_args)
        started.append(srv.start())
        srv.wait_live()
        srv.wait_models_ready([MODEL])
        return srv

    yield _start
    for srv in started:
        srv.stop()


@pytest.fixture(scope="module")
def srv(repo, log_dir):
    """One I/O thread (so that its CPU is one thread's), access log on."""
    server = start_server(repo, log_dir, "hostile", extra_args=("--http-thread-count", "1", "--access-log=true"))
    try:
        server.wait_models_ready([MODEL])
        yield server
    finally:
        server.stop()


def infer_ok(srv, timeout_s: float = 10) -> bool:
    try:
        return srv.infer_raw(MODEL, valid_body(), timeout=timeout_s).status_code == 200
    except requests.RequestException:
        return False


def wait_for(predicate, bound_s: float) -> bool:
    """Whether `predicate` came true within the bound (polled, not timed)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except requests.RequestException:
            pass
        time.sleep(0.1)
    return False


def wait_until(predicate, bound_s: float, what: str) -> None:
    if not wait_for(predicate, bound_s):
        raise AssertionError(f"not within {bound_s} s: {what}")


def cpu_per_request(srv, send, count: int, thread_prefix: str = "") -> float:
    """Server CPU nanoseconds per request (of the threads named so) over
    `count` calls of send(session)."""
    pid = srv.proc.pid
    with requests.Session() as session:
        send(session)  # the connection is open before the measurement starts
        before = cpu_ns(pid, thread_prefix)
        for _ in range(count):
            send(session)
        return (cpu_ns(pid, thread_prefix) - before) / count


def post_valid(srv):
    def send(session):
        r = session.post(f"{srv.base}/v2/models/{MODEL}/infer", data=valid_body(), timeout=30)
        assert r.status_code == 200, r.text
    return send


def test_out_of_descriptors_accepting_pauses_logs_a_count_and_recovers(limited):
    srv = limited("emfile")
    pid = srv.proc.pid
    before = cpu_ns(pid)
    socks = open_connections(srv.http_port, 3 * NOFILE)
    try:
        # The episode: the server is out of descriptors for this long. A
        # generous stretch for a spinning loop to show; nothing is timed.
        time.sleep(3)
        episode_cpu_s = (cpu_ns(pid) - before) / 1e9
        failure_lines = len(re.findall(r"http: accept failed", srv.log_text()))
    finally:
        close_all(socks)
    # Spinning on accept takes a whole core (about 3 s here) and logs each
    # failure; pausing takes almost nothing and logs a line with a count.
    assert 1 <= failure_lines <= 5, f"{failure_lines} accept-failure lines; last: {srv.log_tail(1)}"
    assert episode_cpu_s < 0.5, episode_cpu_s
    assert "pausing accepts" in srv.log_text()
    wait_until(lambda: infer_ok(srv), RECOVERY_BOUND_S, "an infer request answered once the connections closed")
    log = srv.log_text()
    assert f"descriptor limit (RLIMIT_NOFILE): soft {NOFILE}, hard {NOFILE}" in log, log
    assert "the connection limits add up to" in log, log


def test_idle_metrics_connections_leave_the_inference_port_its_descriptors(limited):
    srv = limited("metrics_limit", "--metrics-max-connections", "8")
    socks = open_connections(srv.metrics_port, 3 * NOFILE)
    try:
        # Once the metrics port has taken what it keeps and refused the rest,
        # the inference port still accepts.
        drained = wait_for(lambda: accept_queue(srv.metrics_port) == 0, 10)
        assert infer_ok(srv), srv.log_tail()
        assert drained, accept_queue(srv.metrics_port)
        assert "--metrics-max-connections" in srv.log_text()
    finally:
        close_all(socks)
    wait_until(lambda: requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=5).ok, 30,
               "a scrape answered once the idle connections closed")
    assert "accept failed" not in srv.log_text(), srv.log_tail()


def test_claimed_shape_costs_what_its_body_does(srv):
    pid = srv.proc.pid

    def send_claim(session):
        r = session.post(f"{srv.base}/v2/models/{MODEL}/infer", data=claimed_shape_body(), timeout=30)
        assert_error(r, 400, f"data has 1 elements, shape [1,{1 << 24}] needs {1 << 24}")

    valid = cpu_per_request(srv, post_valid(srv), VALID_REQUESTS)
    rss_before = status_kib(pid, "VmRSS")
    peak_measured = reset_peak_rss(pid)
    claimed = cpu_per_request(srv, send_claim, BAD_REQUESTS)
    # A 157-byte body that makes the server zero-fill 64 MiB costs ~300x a
    # valid request; checked against the body first, less than one.
    assert claimed < 20 * valid, (claimed, valid)
    if peak_measured:
        assert status_kib(pid, "VmHWM") - rss_before < 32 << 10


def test_gzip_bomb_for_a_model_that_is_not_there_is_not_inflated(srv):
    bomb = gzip_bomb()

    def send_bomb(session):
        r = session.post(f"{srv.base}/v2/models/not_there/infer", data=bomb,
                         headers={"Content-Encoding": "gzip"}, timeout=30)
        assert_error(r, 404, "unknown model", "'not_there'")

    valid = cpu_per_request(srv, post_valid(srv), VALID_REQUESTS)
    bombs = cpu_per_request(srv, send_bomb, BAD_REQUESTS)
    # Inflating it (to the 64 MiB limit) costs hundreds of valid requests.
    assert bombs < 20 * valid, (bombs, valid)


def test_gzip_bomb_for_a_model_is_refused_at_the_limit_off_the_io_thread(srv):
    pid = srv.proc.pid
    bomb = gzip_bomb()

    def send_bomb(session):
        r = session.post(f"{srv.base}/v2/models/{MODEL}/infer", data=bomb,
                         headers={"Content-Encoding": "gzip"}, timeout=60)
        assert_error(r, 400, "exceeds the maximum allowed value of 67108864 bytes")

    valid_io = cpu_per_request(srv, post_valid(srv), VALID_REQUESTS, "http-io")
    rss_before = status_kib(pid, "VmRSS")
    bombs_io = cpu_per_request(srv, send_bomb, 5, "http-io")
    # Inflated on the I/O thread, each costs thousands of valid requests' I/O
    # time; there it reads the body and inflates a small first part only.
    assert bombs_io < 30 * valid_io, (bombs_io, valid_io)
    assert cpu_ns(pid, "http-inflate") > 0
    # What a bomb inflates is freed with its answer: nothing builds up (not
    # measurable under ASan, whose quarantine keeps freed memory).
    if not sanitizer_runtime(pid):
        assert status_kib(pid, "VmRSS") - rss_before < 160 << 10
    assert infer_ok(srv)


# Paths whose model name percent-decodes to bytes that are no UTF-8: an
# overlong '.', a lone 0xff, a truncated 3-byte sequence.
BAD_NAMES = ["%c0%ae", "x%ff", "a%e4%b8"]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("method,suffix", [("POST", "/infer"), ("GET", "/ready"), ("GET", ""), ("GET", "/config"),
                                           ("GET", "/stats"), ("POST", "/versions/1/infer")])
def test_error_bodies_are_json_whatever_bytes_the_path_carries(srv, name, method, suffix):
    body = valid_body() if method == "POST" else b""
    r = raw_exchange(srv.http_port, http_request_bytes(method, f"/v2/models/{name}{suffix}", body))
    assert r is not None and r.status in (400, 404), r
    message = json.loads(r.body)["error"]  # bytes: json.loads reads them as UTF-8, strictly
    assert "\ufffd" in message, message


def test_log_and_access_log_are_utf8(srv):
    for name in BAD_NAMES:
        raw_exchange(srv.http_port, http_request_bytes("POST", f"/v2/models/{name}/infer", valid_body()))
    assert infer_ok(srv)
    text = srv.log_path.read_bytes().decode("utf-8")  # strict: raises on a byte that is no UTF-8
    access = [json.loads(line) for line in text.splitlines() if line.startswith('{"time"')]
    assert any(a["model"].startswith("\ufffd") and a["status"] == 404 for a in access), access[-5:]
