"""Hostile gRPC clients on raw HTTP/2 (the h2 package), for
test_hostile_grpc.py and bench/hostile_grpc.py alike (no pytest here).

grpcio and tritonclient only send whole messages; an attacker announces a
large message in its 5-byte gRPC prefix and then sends it as slowly as it
likes, or never finishes it. UnfinishedCalls does that on one connection:
`calls` ModelInfer streams at once, each announcing `claimed_bytes` and sending
all of them but the last byte as fast as the server's flow control allows,
with no END_STREAM. A stream the server ends (a status, a reset) is opened
again, as an attacker would."""
from __future__ import annotations

import collections
import select
import socket
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import numpy as np
from tritonclient.grpc import service_pb2 as pb

MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
MODEL_STREAM_INFER = "/inference.GRPCInferenceService/ModelStreamInfer"
ZEROS = bytes(1 << 20)
# The test model whose one float in becomes 1 MiB out (tests/models): what an
# unread stream's answers are made of.
EXPAND = "expand_1mib"


def grpc_request_headers(port: int, path: str, metadata: dict | None = None) -> list[tuple[str, str]]:
    return [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"), ("te", "trailers"), *sorted((metadata or {}).items())]


def grpc_status_of(headers) -> int | None:
    for name, value in headers:
        if name == "grpc-status":
            return int(value)
    return None


class H2Client:
    """One non-blocking HTTP/2 connection to a gRPC port; subclasses say what
    to send (step) and what to do with the server's events (on_event)."""

    def __init__(self, port: int, window: int | None = None, reconnect: bool = False):
        self.port = port
        self.window = window
        # Whether run() opens a new connection when the server closes this one
        # (an attacker does: the server's defence must hold across connections).
        self.reconnect = reconnect
        self.bytes_sent = 0
        self.connections = 0
        self._connect()

    def _connect(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.sock.setblocking(False)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                           header_encoding="utf-8"))
        self.conn.initiate_connection()
        if self.window is not None:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.window})
        self.out = bytearray(self.conn.data_to_send())
        self.settings_seen = False
        self.closed = False
        self.server_max_streams: int | None = None
        self.connections += 1
        self.on_connect()

    def on_connect(self) -> None:
        """A (new) connection is open: forget the streams of the one before."""

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, duration_s: float, stop=lambda: False) -> None:
        """Goes on for `duration_s` or until stop() is true (checked about
        every 50 ms) or the server closes the connection (unless reconnect:
        then on a new one)."""
        deadline = time.monotonic() + duration_s
        next_check = 0.0
        while time.monotonic() < deadline:
            if self.closed:
                if not self.reconnect:
                    return
                self.close()
                self._connect()
            if time.monotonic() >= next_check:
                if stop():
                    return
                next_check = time.monotonic() + 0.05
            if self.settings_seen:
                self.step()
                self.out += self.conn.data_to_send()
            readable, writable, _ = select.select([self.sock], [self.sock] if self.out else [], [], 0.05)
            if readable:
                self._receive()
            if writable or self.out:
                self._flush()

    def step(self) -> None:
        pass

    def on_event(self, event) -> None:
        pass

    def _flush(self) -> None:
        if not self.out:
            return
        try:
            n = self.sock.send(self.out)
        except BlockingIOError:
            return
        except OSError:
            self.closed = True
            return
        self.bytes_sent += n
        del self.out[:n]

    def _receive(self) -> None:
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            # Frames after the server's GOAWAY (its streams still finishing)
            # are past h2's closed state: the connection is over for us.
            self.closed = True
            return
        for event in events:
            if isinstance(event, h2.events.RemoteSettingsChanged):
                self.settings_seen = True
                changed = event.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
                if changed is not None:
                    self.server_max_streams = changed.new_value
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.closed = True
            self.on_event(event)
        self.out += self.conn.data_to_send()


class UnfinishedCalls(H2Client):
    """HTTP/2 ModelInfer calls that never finish, on one connection at a time."""

    def __init__(self, port: int, calls: int, claimed_bytes: int, metadata: dict | None = None,
                 reopen: bool = True):
        self.calls = calls
        self.claimed_bytes = claimed_bytes
        # reopen: a stream the server ends is replaced, and so is a connection.
        self.reopen = reopen
        self.headers = grpc_request_headers(port, MODEL_INFER, metadata)
        self.statuses = collections.Counter()  # grpc-status the server answered with
        # Message bytes each answered stream had sent when its status came.
        self.sent_when_answered: list[int] = []
        self.resets = 0
        self.opened = 0
        super().__init__(port, reconnect=reopen)

    def on_connect(self) -> None:
        self.left: dict[int, int] = {}       # open stream -> message bytes still to send
        self.sent: dict[int, int] = {}       # stream -> message bytes sent (-5 before the prefix)

    def step(self) -> None:
        self._open_calls()
        self._send_data()

    def _open_calls(self) -> None:
        limit = self.calls
        if self.server_max_streams is not None:
            limit = min(limit, self.server_max_streams)
        while len(self.left) < limit and (self.reopen or self.opened < self.calls):
            sid = self.conn.get_next_available_stream_id()
            try:
                self.conn.send_headers(sid, self.headers)
            except h2.exceptions.TooManyStreamsError:
                return
            self.opened += 1
            # The 5-byte prefix, then all of the message but its last byte.
            self.left[sid] = 5 + self.claimed_bytes - 1
            self.sent[sid] = -5

    def _send_data(self) -> None:
        if len(self.out) > (4 << 20):
            return  # the socket is behind: let it drain first
        prefix = b"\0" + self.claimed_bytes.to_bytes(4, "big")
        for sid, left in list(self.left.items()):
            try:
                window = self.conn.local_flow_control_window(sid)
            except h2.exceptions.StreamClosedError:
                self.left.pop(sid, None)
                continue
            chunk = min(window, left, len(ZEROS))
            while chunk > 0:
                size = min(chunk, self.conn.max_outbound_frame_size)
                done = self.sent[sid]
                head = prefix[5 + done:5 + done + size] if done < 0 else b""
                data = head + ZEROS[:size - len(head)]
                self.conn.send_data(sid, data)
                chunk -= size
                left -= size
                self.sent[sid] += size
            self.left[sid] = left

    def on_event(self, event) -> None:
        if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
            status = grpc_status_of(event.headers)
            if status is not None:
                self.statuses[status] += 1
                self.sent_when_answered.append(max(0, self.sent.get(event.stream_id, 0)))
                self._forget(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            self.resets += 1
            self._forget(event.stream_id)

    def _forget(self, sid: int) -> None:
        if self.left.pop(sid, None) is not None:
            try:
                self.conn.reset_stream(sid)
            except h2.exceptions.ProtocolError:
                pass


class UnreadStream(H2Client):
    """One ModelStreamInfer stream that sends `messages` (serialized
    ModelInferRequests) and reads the answers' bytes off the socket without
    ever granting the server flow-control window for them (until
    start_reading()): a client that does not read its answers."""

    def __init__(self, port: int, messages: list[bytes], window: int = 65535):
        super().__init__(port, window=window)
        self.frames = bytearray().join(b"\0" + len(m).to_bytes(4, "big") + m for m in messages)
        self.offset = 0
        self.sid: int | None = None
        self.reading = False
        self.answer_bytes = 0
        self.ended = False
        self.status: int | None = None

    def start_reading(self) -> None:
        """From now on every answer byte is acknowledged, as a reading client does."""
        self.reading = True
        if self.answer_bytes:
            self.conn.increment_flow_control_window(self.answer_bytes)
            self.conn.increment_flow_control_window(self.answer_bytes, stream_id=self.sid)

    def step(self) -> None:
        if self.sid is None:
            self.sid = self.conn.get_next_available_stream_id()
            self.conn.send_headers(self.sid, grpc_request_headers(self.port, MODEL_STREAM_INFER))
        if self.offset >= len(self.frames) or self.ended or len(self.out) > (1 << 20):
            return
        try:
            window = self.conn.local_flow_control_window(self.sid)
        except h2.exceptions.StreamClosedError:
            self.ended = True
            return
        chunk = min(window, len(self.frames) - self.offset, 1 << 20)
        while chunk > 0:
            frame = min(chunk, self.conn.max_outbound_frame_size)
            self.conn.send_data(self.sid, bytes(self.frames[self.offset:self.offset + frame]))
            self.offset += frame
            chunk -= frame

    @property
    def all_sent(self) -> bool:
        return self.offset >= len(self.frames)

    def on_event(self, event) -> None:
        if isinstance(event, h2.events.DataReceived) and event.stream_id == self.sid:
            self.answer_bytes += event.flow_controlled_length
            if self.reading:
                self.conn.acknowledge_received_data(event.flow_controlled_length, self.sid)
        elif isinstance(event, h2.events.TrailersReceived):
            self.status = grpc_status_of(event.headers)
            self.ended = True
        elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
            self.ended = True


def advertised_max_streams(port: int, timeout_s: float = 5.0) -> int | None:
    """The SETTINGS_MAX_CONCURRENT_STREAMS a gRPC server announces (None: no
    limit announced)."""
    with UnfinishedCalls(port, calls=0, claimed_bytes=0) as probe:
        probe.run(timeout_s, stop=lambda: probe.settings_seen)
        assert probe.settings_seen, "the server sent no SETTINGS"
        return probe.server_max_streams


def expand_request(i: int) -> bytes:
    """A serialized ModelInferRequest for EXPAND (input X = [i]), id str(i)."""
    request = pb.ModelInferRequest(model_name=EXPAND, id=str(i))
    tensor = request.inputs.add(name="X", datatype="FP32")
    tensor.shape.append(1)
    request.raw_input_contents.append(np.float32(i).tobytes())
    return request.SerializeToString()
