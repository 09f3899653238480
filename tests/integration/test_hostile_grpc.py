"""Hostile gRPC clients must not exhaust the server's memory (docs/limits.md,
"gRPC"):

  - each connection announces a bounded number of concurrent streams;
  - calls that announce large messages and never finish them cannot grow the
    server past --grpc-max-buffered-bytes (gRPC's resource quota);
  - a ModelInfer call without the restricted protocol's credentials is
    refused from its metadata, before its message arrives;
  - a ModelStreamInfer client that does not read its answers meets
    back-pressure: the stream stops reading requests, and reads them all once
    the client reads again;
  - out of descriptors (EMFILE), the gRPC port pauses accepting, logs a line
    per interval, and serves again once connections close (gRPC's own
    acceptor stopped for good);
  - at --grpc-max-connections open connections, one more is closed at once:
    idle connections cannot take every descriptor (a host name as
    --grpc-address included); a connection that sends nothing is closed;
  - the same on a TLS port (--grpc-use-ssl), which gRPC accepts itself: the
    limit through its socket mutator, the silence through its handshake
    deadline.

The clients speak raw HTTP/2 (hostile_grpc_clients.py): grpcio only sends
whole messages. Memory is the server's RSS (VmHWM, the peak, where the kernel
lets it be reset), with generous margins: never timing."""
from __future__ import annotations

import contextlib
import ssl
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from harness import Server, make_test_models, metric, start_server
from hostile_clients import (MODEL, close_all, cpu_ns, nofile_command, open_connections, reset_peak_rss,
                             sanitizer_runtime, status_kib)
from hostile_grpc_clients import EXPAND, UnfinishedCalls, UnreadStream, advertised_max_streams, expand_request

pytestmark = pytest.mark.timeout(120)

MiB = 1 << 20
# The attack: one connection, 100 calls announcing 60 MiB each.
CALLS = 100
CLAIMED = 60 * MiB
QUOTA = 128 * MiB
# The quota is soft: gRPC reclaims after the fact, and RSS also holds the
# allocator's slack (and a sanitizer's quarantine). Measured peaks: +383 MiB
# at this quota, flat once reached; without one, 1 GiB within 5 s.
GROWTH_BOUND = QUOTA + 640 * MiB
ATTACK_S = 10
KEY, SECRET = "infer-key", "s3cret"
# Requests on a stream whose answers (1 MiB each) are never read.
UNREAD_REQUESTS = 3000
UNREAD_BOUND = 400 * MiB
# Descriptors of the server whose soft and hard limits are both this low.
NOFILE = 64
MAX_CONNECTIONS = 8
# What a gRPC client sends first: the HTTP/2 preface and an empty SETTINGS frame.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("hostile_grpc_models"), [MODEL, EXPAND])


@pytest.fixture(scope="module")
def srv(repo, log_dir):
    server = start_server(repo, log_dir, "hostile_grpc", extra_args=("--grpc-max-buffered-bytes", str(QUOTA)))
    try:
        server.wait_models_ready([MODEL, EXPAND])
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def restricted(repo, log_dir):
    server = start_server(repo, log_dir, "hostile_grpc_restricted", extra_args=(
        f"--grpc-restricted-protocol=inference:{KEY}={SECRET}", "--grpc-max-concurrent-streams", "16"))
    try:
        server.wait_models_ready([MODEL])
        yield server
    finally:
        server.stop()


def rss_bytes(pid: int) -> int:
    return status_kib(pid, "VmRSS") << 10


def peak_bytes(pid: int) -> int:
    return status_kib(pid, "VmHWM") << 10


def infer_ok(srv, metadata: dict | None = None, client_args: dict | None = None) -> None:
    client = grpcclient.InferenceServerClient(**(client_args or {"url": srv.grpc_url}))
    data = np.arange(16, dtype=np.float32).reshape(1, 16)
    inp = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_data_from_numpy(data)
    result = client.infer(MODEL, [inp], headers=metadata, client_timeout=30)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)
    client.close()


def infer_ok_once_released(srv, within_s: float = 60) -> None:
    """The quota's memory returns once the attacker's connections are gone;
    until the server has torn them down (slow under a sanitizer), new calls
    are refused with RESOURCE_EXHAUSTED, never anything else."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return infer_ok(srv)
        except InferenceServerException as error:
            if error.status() != "StatusCode.RESOURCE_EXHAUSTED" or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def grpc_serves(srv, bound_s: float, client_args: dict | None = None) -> bool:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            infer_ok(srv, client_args=client_args)
            return True
        except Exception:  # noqa: BLE001 - not yet: the port is still out of descriptors/connections
            time.sleep(0.5)
    return False


def closed_by_server(sock) -> bool:
    """Whether the server closes `sock` before its timeout (what it sends
    first is read and dropped)."""
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_connections_announce_their_stream_limit(srv, restricted):
    # gRPC's default announces none (any number of calls per connection).
    assert advertised_max_streams(srv.grpc_port) == 128
    assert advertised_max_streams(restricted.grpc_port) == 16


def test_unfinished_messages_stay_within_the_memory_quota(srv):
    pid = srv.proc.pid
    before = rss_bytes(pid)
    peak_measured = reset_peak_rss(pid)
    fail_at = before + GROWTH_BOUND + 256 * MiB  # stop a growth without bound early
    with UnfinishedCalls(srv.grpc_port, CALLS, CLAIMED) as attack:
        attack.run(ATTACK_S, stop=lambda: rss_bytes(pid) > fail_at)
        growth = (peak_bytes(pid) if peak_measured else rss_bytes(pid)) - before
        sent = attack.bytes_sent
    # Without a quota the server buffers what flow control lets through.
    assert sent > GROWTH_BOUND, f"the attack sent only {sent >> 20} MiB"
    assert growth < GROWTH_BOUND, f"RSS grew by {growth >> 20} MiB ({sent >> 20} MiB sent)"
    assert srv.alive()
    infer_ok_once_released(srv)


def test_restricted_inference_is_refused_before_its_message(restricted):
    with UnfinishedCalls(restricted.grpc_port, 1, CLAIMED, reopen=False) as call:
        call.run(10, stop=lambda: call.statuses)
        # grpc-status 16: UNAUTHENTICATED, with most of the message unsent:
        # the server answered from the metadata, not once the message was in.
        assert dict(call.statuses) == {16: 1}, (call.statuses, call.resets, call.sent)
        assert call.sent_when_answered[0] < 8 * MiB, call.sent_when_answered
    infer_ok(restricted, {f"triton-grpc-protocol-{KEY}": SECRET})


def inferences(srv, model: str) -> int:
    return int(srv.model_stats(model)["inference_count"])


def test_unread_stream_answers_stop_the_stream_reading(srv):
    pid = srv.proc.pid
    messages = [expand_request(i) for i in range(UNREAD_REQUESTS)]
    runs_before = inferences(srv, EXPAND)
    before = rss_bytes(pid)
    peak_measured = reset_peak_rss(pid)
    with UnreadStream(srv.grpc_port, messages) as stream:
        # Until every request is sent (the transport takes them even when the
        # stream stops reading) or the server has grown far too much; then a
        # while for what it read to be answered and held.
        stream.run(5, stop=lambda: stream.all_sent or rss_bytes(pid) - before > 4 * UNREAD_BOUND)
        stream.run(1)
        growth = (peak_bytes(pid) if peak_measured else rss_bytes(pid)) - before
        ran = inferences(srv, EXPAND) - runs_before
        assert growth < UNREAD_BOUND, f"RSS grew by {growth >> 20} MiB, {ran} requests run"
        # The stream holds 64 answers at most, and one or two in the window.
        assert ran < UNREAD_REQUESTS // 10, f"{ran} requests run while no answer was read"
        # A client that reads again gets every answer, in full.
        stream.start_reading()
        stream.run(60, stop=lambda: stream.answer_bytes >= UNREAD_REQUESTS * MiB)
        assert stream.all_sent and stream.answer_bytes >= UNREAD_REQUESTS * MiB, (stream.offset,
                                                                                  stream.answer_bytes)
    assert srv.alive()


class DescriptorLimitedServer(Server):
    def command(self) -> list[str]:
        return nofile_command(super().command(), NOFILE)


@contextlib.contextmanager
def descriptor_limited(repo, log_path, extra_args=()):
    """A READY server with NOFILE descriptors; skips the test under a
    sanitizer that misfires out of descriptors."""
    srv = DescriptorLimitedServer(repo, log_path, extra_args=extra_args).start()
    try:
        srv.wait_live()
        srv.wait_models_ready([MODEL])
        if sanitizer_runtime(srv.proc.pid):
            pytest.skip("out of descriptors, UBSan's vptr check reports false 'invalid vptr' "
                        "(it probes memory through a pipe); the plain build runs this test")
        yield srv
    finally:
        srv.stop()


def test_out_of_descriptors_the_grpc_port_pauses_and_serves_again(repo, log_dir):
    with descriptor_limited(repo, log_dir / "hostile_grpc_emfile.log") as srv:
        before = cpu_ns(srv.proc.pid)
        socks = open_connections(srv.grpc_port, 3 * NOFILE)
        try:
            time.sleep(3)  # a stretch for a spinning loop to show; nothing is timed
            episode_cpu_s = (cpu_ns(srv.proc.pid) - before) / 1e9
            failure_lines = srv.log_text().count("grpc: accept failed")
        finally:
            close_all(socks)
        assert 1 <= failure_lines <= 5, srv.log_tail(5)
        assert episode_cpu_s < 0.5, episode_cpu_s
        # Accept pauses reach 1 s; this bound only turns a hang into a failure.
        assert grpc_serves(srv, 30), srv.log_tail(5)


def test_a_tls_port_gRPC_gives_up_on_makes_the_server_not_live(repo, log_dir, certs):
    # gRPC 1.51's own acceptor, which TLS ports keep, stops for good after an
    # EMFILE; the server says so in its liveness, so a supervisor restarts it.
    tls = ("--grpc-use-ssl=true", f"--grpc-server-cert={certs['server_cert']}",
           f"--grpc-server-key={certs['server_key']}")
    with descriptor_limited(repo, log_dir / "hostile_grpc_tls_emfile.log", tls) as srv:
        assert srv.get("/v2/health/live").status_code == 200
        socks = open_connections(srv.grpc_port, 3 * NOFILE)
        try:
            deadline = time.monotonic() + 30
            while "grpc: Failed accept4" not in srv.log_text() and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            close_all(socks)
        assert "grpc: Failed accept4" in srv.log_text(), srv.log_tail(5)
        live = srv.get("/v2/health/live")
        assert live.status_code == 503, live.text
        assert "TLS port" in live.json()["error"] and "restart the server" in live.json()["error"], live.text
        assert srv.get("/v2/health/ready").status_code == 400
        assert srv.alive()


def test_connections_past_the_limit_are_closed_until_one_closes(repo, log_dir):
    # A host name is accepted by ortserve too (gRPC's acceptor has no limit).
    srv = start_server(repo, log_dir, "hostile_grpc_connections",
                       extra_args=("--grpc-max-connections", str(MAX_CONNECTIONS), "--grpc-address", "localhost"))
    try:
        srv.wait_models_ready([MODEL])
        socks = open_connections(srv.grpc_port, MAX_CONNECTIONS)
        try:
            for sock in socks:  # idle HTTP/2 connections: gRPC keeps them
                sock.sendall(HTTP2_PREFACE)
            # The backlog is served in order: the idle connections first.
            with pytest.raises(InferenceServerException) as refused:
                infer_ok(srv)
            assert refused.value.status() == "StatusCode.UNAVAILABLE", refused.value
            assert metric(srv, "ortserve_connections_rejected_total", protocol="grpc") >= 1
            assert metric(srv, "ortserve_open_connections", protocol="grpc") == MAX_CONNECTIONS
            socks.pop().close()
            # gRPC closes its end when it reads the end of the stream; the
            # bound only turns a hang into a failure.
            assert grpc_serves(srv, 30), srv.log_tail(5)
        finally:
            close_all(socks)
        assert grpc_serves(srv, 30), srv.log_tail(5)
        assert "the limit (--grpc-max-connections)" in srv.log_text()
    finally:
        srv.stop()


def assert_silent_connection_closed(port, what):
    """One connection to `port` that sends nothing is closed by the server."""
    (sock,) = open_connections(port, 1)
    try:
        sock.settimeout(60)  # the server's deadline is 10 s; this only ends a hang
        assert closed_by_server(sock), f"the server kept a silent {what} open"
    finally:
        close_all([sock])


def test_a_connection_that_sends_nothing_is_closed(srv):
    # gRPC sets no deadline on a connection it is handed (its own acceptor's is
    # 120 s): without one of ortserve's, it stayed open for good.
    assert_silent_connection_closed(srv.grpc_port, "connection")
    infer_ok(srv)


@pytest.fixture(scope="module")
def tls_srv(repo, log_dir, certs):
    server = start_server(repo, log_dir, "hostile_grpc_tls", extra_args=(
        "--grpc-use-ssl=true", f"--grpc-server-cert={certs['server_cert']}",
        f"--grpc-server-key={certs['server_key']}", "--grpc-max-connections", str(MAX_CONNECTIONS)))
    try:
        server.wait_models_ready([MODEL])
        yield server
    finally:
        server.stop()


def tls_client_args(srv, certs) -> dict:
    return {"url": f"localhost:{srv.grpc_port}", "ssl": True, "root_certificates": str(certs["ca"])}


def open_tls_connections(port: int, count: int, ca) -> list:
    """`count` TLS connections with their handshake done (gRPC has accepted
    each), idle after the HTTP/2 preface."""
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["h2"])
    socks = []
    try:
        for sock in open_connections(port, count):
            socks.append(context.wrap_socket(sock, server_hostname="localhost"))
            socks[-1].sendall(HTTP2_PREFACE)
    except BaseException:
        close_all(socks)
        raise
    return socks


def wait_until_no_grpc_connection(srv, within_s: float = 30) -> None:
    """A client's closed channel stays counted until gRPC has closed its end
    (slow under a sanitizer); each scrape prunes the closed ones."""
    deadline = time.monotonic() + within_s
    while metric(srv, "ortserve_open_connections", protocol="grpc") != 0:
        assert time.monotonic() < deadline, "the server still counts a closed gRPC connection"
        time.sleep(0.05)


def test_tls_connections_past_the_limit_are_closed_until_one_closes(tls_srv, certs):
    # gRPC's own acceptor had no limit: the 9th TLS client was served too.
    client_args = tls_client_args(tls_srv, certs)
    infer_ok(tls_srv, client_args=client_args)
    wait_until_no_grpc_connection(tls_srv)  # the check's own connection no longer holds a slot
    socks = open_tls_connections(tls_srv.grpc_port, MAX_CONNECTIONS, certs["ca"])
    try:
        with pytest.raises(InferenceServerException) as refused:
            infer_ok(tls_srv, client_args=client_args)
        assert refused.value.status() == "StatusCode.UNAVAILABLE", refused.value
        assert metric(tls_srv, "ortserve_connections_rejected_total", protocol="grpc") >= 1
        assert metric(tls_srv, "ortserve_open_connections", protocol="grpc") == MAX_CONNECTIONS
        socks.pop().close()
        # gRPC closes its end when it reads the end of the stream; the bound
        # only turns a hang into a failure.
        assert grpc_serves(tls_srv, 30, client_args), tls_srv.log_tail(5)
    finally:
        close_all(socks)
    assert "the limit (--grpc-max-connections)" in tls_srv.log_text()
    assert tls_srv.alive()


def test_a_tls_connection_that_sends_nothing_is_closed(tls_srv, certs):
    # gRPC's own handshake deadline is 120 s unless set; ortserve sets 10 s.
    client_args = tls_client_args(tls_srv, certs)
    assert grpc_serves(tls_srv, 30, client_args), tls_srv.log_tail(5)  # a slot is free
    refused = metric(tls_srv, "ortserve_connections_rejected_total", protocol="grpc")
    assert_silent_connection_closed(tls_srv.grpc_port, "TLS connection")
    # Closed by the deadline, not refused over the limit.
    assert metric(tls_srv, "ortserve_connections_rejected_total", protocol="grpc") == refused
    infer_ok(tls_srv, client_args=client_args)
