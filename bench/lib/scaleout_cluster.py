"""Local scale-out parts for bench/scaleout.py and tests/integration/test_scaleout.py:
ortserve replicas, an HAProxy in front of them (Debian's haproxy) that health-checks
each on /v2/health/ready, and an open-loop load generator that records every request.

Everything listens on and sends to 127.0.0.1 only.

HAProxy gets two frontends on the same replicas, differing only in which failures it
retries on another replica (`retry-on`, with `option redispatch`):
  safe:   conn-failure, empty-response, 503 -- a refused connection, a connection
          closed without an answer, or ortserve's own 503 while it shuts down. Safe for
          stateless models: the request either never ran or its answer was lost with
          a replica that is gone.
  strict: conn-failure, 503 only, and a new server connection per request
          (option http-server-close) -- a request a replica took is never sent twice,
          so a replica that dies fails exactly the requests it held. (With pooled
          server connections, a request sent on a dead replica's idle connection
          after the kill fails too: HAProxy then closes the client connection without
          an answer, as a server would, for the client to retry.)
"""
from __future__ import annotations

import http.client
import json
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_procs import free_ports  # noqa: E402  (bench's helpers)


def http_get_status(port: int, path: str, timeout_s: float = 2.0, host: str = "127.0.0.1") -> int | None:
    try:
        conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
        conn.request("GET", path)
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError:
        return None


class ServerProcess:
    """One ortserve process run with command(), its output appended to log_path,
    ready when /v2/health/ready on address:http_port answers 200; start() again
    after it exited restarts it with the same command. Also the base of
    tests/integration/replicas_cluster.Replica."""

    def __init__(self, name: str, log_path: pathlib.Path, address: str, ports: tuple[int, int, int], *,
                 ready_timeout_s: float = 120, stop_timeout_s: float = 30):
        self.name, self.address = name, address
        self.log_path = pathlib.Path(log_path)
        self.http_port, self.grpc_port, self.metrics_port = ports
        self.ready_timeout_s, self.stop_timeout_s = ready_timeout_s, stop_timeout_s
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def base(self) -> str:
        return f"http://{self.address}:{self.http_port}"

    def start(self) -> "ServerProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        self.starts += 1
        return self

    def wait_ready(self, timeout_s: float | None = None) -> None:
        timeout_s = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log_path}:\n"
                                   f"{self.log_tail()}")
            if http_get_status(self.http_port, "/v2/health/ready", host=self.address) == 200:
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready after {timeout_s}s; see {self.log_path}:\n{self.log_tail()}")

    def log_tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout_s: float = 60) -> int:
        return self.proc.wait(timeout=timeout_s)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after stop_timeout_s; the exit status (None: never started)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None


class Replica(ServerProcess):
    """A replica on 127.0.0.1 with ports of its own, for the HAProxy below."""

    def __init__(self, binary: str, repo: pathlib.Path, log_dir: pathlib.Path, name: str, *,
                 thread_budget: int, exit_timeout_secs: int = 10, drain_delay_secs: int = 1,
                 extra_args: tuple = ()):
        super().__init__(name, pathlib.Path(log_dir) / f"{name}.log", "127.0.0.1", tuple(free_ports(3)))
        self.binary, self.repo = binary, repo
        self.thread_budget = thread_budget
        self.exit_timeout_secs = exit_timeout_secs
        # > HAProxy's health-check interval (100 ms, fall 1): HAProxy marks the
        # replica down before it refuses anything.
        self.drain_delay_secs = drain_delay_secs
        self.extra_args = tuple(extra_args)

    def command(self) -> list[str]:
        return [self.binary, "--model-repository", str(self.repo),
                "--http-address", "127.0.0.1", "--http-port", str(self.http_port),
                "--grpc-address", "127.0.0.1", "--grpc-port", str(self.grpc_port),
                "--metrics-address", "127.0.0.1", "--metrics-port", str(self.metrics_port),
                "--thread-budget", str(self.thread_budget),
                "--exit-timeout-secs", str(self.exit_timeout_secs),
                "--drain-delay-secs", str(self.drain_delay_secs), *self.extra_args]


HAPROXY_CONFIG = """\
global
    maxconn 4096
    stats socket {stats_socket} mode 600 level admin
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    # A slow answer on a busy machine is not a failed check; a refused
    # connection or a not-ready 400 is, at once (fall 1).
    timeout check 2s
    retries 3
    option redispatch 1
backend replicas_safe
    balance roundrobin
    retry-on conn-failure empty-response 503
    option httpchk GET /v2/health/ready
    http-check expect status 200
    default-server check inter {check_ms} fall 1 rise 1
{servers}
backend replicas_strict
    balance roundrobin
    retry-on conn-failure 503
    # A new server connection per request: a request sent to a replica that
    # just died meets a refused connect (retried), never a dead pooled one.
    option http-server-close
    option httpchk GET /v2/health/ready
    http-check expect status 200
    default-server check inter {check_ms} fall 1 rise 1
{servers}
frontend safe
    bind 127.0.0.1:{safe_port}
    default_backend replicas_safe
frontend strict
    bind 127.0.0.1:{strict_port}
    default_backend replicas_strict
"""


class HAProxy:
    """Debian's haproxy in front of the replicas (foreground, -db)."""

    def __init__(self, replicas: list[Replica], work_dir: pathlib.Path, check_ms: int = 100):
        self.work_dir = pathlib.Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.safe_port, self.strict_port = free_ports(2)
        self.stats_socket = self.work_dir / "haproxy.sock"
        servers = "\n".join(f"    server {r.name} 127.0.0.1:{r.http_port}" for r in replicas)
        self.config_path = self.work_dir / "haproxy.cfg"
        self.config_path.write_text(HAPROXY_CONFIG.format(
            stats_socket=self.stats_socket, check_ms=check_ms, servers=servers,
            safe_port=self.safe_port, strict_port=self.strict_port))
        self.log_path = self.work_dir / "haproxy.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "HAProxy":
        log = open(self.log_path, "ab")
        binary = haproxy_binary()
        if binary is None:
            raise RuntimeError("haproxy is not installed (scripts/setup.sh deploy)")
        self.proc = subprocess.Popen([binary, "-db", "-f", str(self.config_path)], stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        return self

    def command(self, line: str) -> str:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(self.stats_socket))
            s.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def stats(self) -> list[dict]:
        """`show stat` rows as dicts (pxname, svname, status, wretr, wredis, ...)."""
        text = self.command("show stat").lstrip("# ")
        lines = [line for line in text.splitlines() if line]
        header = lines[0].split(",")
        return [dict(zip(header, line.split(","))) for line in lines[1:]]

    def server_status(self, backend: str = "replicas_safe") -> dict:
        return {row["svname"]: row["status"] for row in self.stats()
                if row["pxname"] == backend and row["svname"] not in ("FRONTEND", "BACKEND")}

    def retries(self) -> dict:
        """Retries and redispatches per backend so far."""
        return {row["pxname"]: {"retries": int(row["wretr"] or 0), "redispatches": int(row["wredis"] or 0)}
                for row in self.stats() if row["svname"] == "BACKEND"}

    def wait_all_up(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                states = [self.server_status(b) for b in ("replicas_safe", "replicas_strict")]
                if all(s and all(v == "UP" for v in s.values()) for s in states):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"HAProxy did not see every replica UP; see {self.log_path}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@dataclass
class Outcome:
    scheduled: float  # monotonic seconds
    started: float
    ended: float
    status: int | None  # HTTP status; None: no answer
    error: str = ""      # the exception, or the start of a non-200 answer's body

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class OpenLoopLoad:
    """Requests at a constant rate, each sent at its scheduled time whatever the ones
    before it do (open loop), over keep-alive connections from `workers` threads."""
    port: int
    path: str
    body: bytes
    rate: float
    workers: int = 32
    outcomes: list = field(default_factory=list)

    def __post_init__(self):
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._next = 0
        self._t0 = 0.0
        self._threads: list[threading.Thread] = []

    def start(self) -> "OpenLoopLoad":
        self._t0 = time.monotonic()
        self._threads = [threading.Thread(target=self._worker, daemon=True) for _ in range(self.workers)]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)
        return sorted(self.outcomes, key=lambda o: o.scheduled)

    def _take_slot(self) -> float:
        with self._lock:
            i = self._next
            self._next += 1
        return self._t0 + i / self.rate

    def _worker(self) -> None:
        conn = None
        headers = {"Content-Type": "application/json"}
        while not self._stop.is_set():
            at = self._take_slot()
            delay = at - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            started = time.monotonic()
            status, error = None, ""
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                conn.request("POST", self.path, body=self.body, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                status = resp.status
                if status != 200:
                    error = body[:160].decode(errors="replace")
                # After an error answer HAProxy may close the connection; a
                # fresh one avoids sending the next request into that close.
                if status != 200 or resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                error = f"{type(e).__name__}: {e}"
                if conn is not None:
                    conn.close()
                conn = None
            with self._lock:
                self.outcomes.append(Outcome(at, started, time.monotonic(), status, error))


def summarize(outcomes: list[Outcome]) -> dict:
    failed = [o for o in outcomes if not o.ok]
    lat = sorted(o.ended - o.scheduled for o in outcomes if o.ok)

    def pct(q):
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2) if lat else None
    by_kind: dict = {}
    for o in failed:
        kind = f"{o.status} {o.error.strip()[:60]}" if o.status is not None else o.error.split(":")[0]
        by_kind[kind] = by_kind.get(kind, 0) + 1
    return {"requests": len(outcomes), "ok": len(outcomes) - len(failed), "failed": len(failed),
            "failed_by_kind": by_kind, "latency_ms_p50": pct(0.5), "latency_ms_p99": pct(0.99)}


MODEL = "scaleout"
MODEL_CONFIG = """
name: "scaleout"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
"""


def build_repository(repo: pathlib.Path) -> pathlib.Path:
    """One model, `scaleout`: the test repository's `slow` graph cut to 2 layers
    (x[-1,16] -> 2 x (256x256 MatMul, Tanh) per row, ~67 MFLOP: a few ms on a core),
    dynamically batched up to 8, threads from the replica's --thread-budget."""
    root = pathlib.Path(__file__).resolve().parents[2]
    for sub in ("tests/models", "scripts"):
        if str(root / sub) not in sys.path:
            sys.path.insert(0, str(root / sub))
    import make_demo_models as demo
    import make_test_models
    demo.write_model(repo, MODEL, make_test_models.build_slow(depth=2), MODEL_CONFIG)
    return repo


def infer_body(rows: int = 1) -> bytes:
    """A KServe v2 JSON request for the `scaleout` model (x: FP32 [rows, 16])."""
    data = [((i * 7) % 13) / 13.0 for i in range(rows * 16)]
    return json.dumps({"inputs": [{"name": "x", "shape": [rows, 16], "datatype": "FP32",
                                   "data": data}]}).encode()


def haproxy_binary() -> str | None:
    """Debian's haproxy (in /usr/sbin, which a user's PATH may lack)."""
    return shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
