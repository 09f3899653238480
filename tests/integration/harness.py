"""Shared helpers for the ortserve integration tests: the server process,
free ports, raw HTTP, onnxruntime references and error assertions.

Tests never assert on timing; the waits below are generous bounds that only
turn a hang into a failure.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO_REPO = REPO_ROOT / "models"
sys.path.insert(0, str(REPO_ROOT / "tests" / "models"))
import make_test_models  # noqa: E402  (re-exported for the tests)

# ORTSERVE_TEST_TIMEOUT_SCALE (default 1) multiplies the bounds below, for
# slow builds of the server (ASan+UBSan in `make test-sanitize` runs it a few
# times slower); the defaults stay as they are for the normal build.
TIMEOUT_SCALE = max(1.0, float(os.environ.get("ORTSERVE_TEST_TIMEOUT_SCALE", "1") or 1))
STARTUP_TIMEOUT_S = 120 * TIMEOUT_SCALE   # bound on live + models READY after start
SHUTDOWN_TIMEOUT_S = 30 * TIMEOUT_SCALE   # bound on a graceful exit before SIGKILL
HTTP_TIMEOUT_S = 60 * TIMEOUT_SCALE       # bound on any single request in the tests
SMALL_BODY_LIMIT = 1 << 20  # --http-max-input-size of the body-limit server


# Triton's quick-start example repository: the project writes an equivalent one
# (scripts/make_triton_examples.py, the `triton_examples` fixture); a copy of
# Triton's own files, named by TRITON_EXAMPLES_DIR, is served as well when set.
TRITON_EXAMPLES_ENV = "TRITON_EXAMPLES_DIR"
TRITON_EXAMPLE_MODELS = ["simple", "simple_int8", "simple_string", "simple_sequence", "simple_dyna_sequence"]


def tritons_own_examples() -> pathlib.Path:
    """The folder TRITON_EXAMPLES_DIR names; skips the calling test, saying
    why, when it is not set or holds no Triton example repository."""
    folder = os.environ.get(TRITON_EXAMPLES_ENV, "")
    if not folder:
        pytest.skip(f"{TRITON_EXAMPLES_ENV} is not set (a copy of Triton's example repository)")
    path = pathlib.Path(folder).resolve()
    if not (path / "simple" / "config.pbtxt").is_file():
        pytest.skip(f"{TRITON_EXAMPLES_ENV}={folder} has no simple/config.pbtxt")
    return path


def ortserve_binary() -> pathlib.Path:
    return pathlib.Path(os.environ.get("ORTSERVE_BIN", REPO_ROOT / "build" / "ortserve"))


# A report of ASan / LSan / UBSan (or TSan) in a server's log. The server's
# stderr goes to that log, and most tests never look at its exit code, so
# Server.stop() scans for these and fails the test that owned the server.
SANITIZER_REPORT = re.compile(
    r"^==\d+==ERROR: \w*Sanitizer|^WARNING: ThreadSanitizer|^SUMMARY: \w*Sanitizer"
    r"|^\S+:\d+(?::\d+)?: runtime error: ", re.M)


# The last line main.cpp logs before it serves: the metrics endpoint's.
STARTUP_DONE = re.compile(r"Prometheus metrics endpoint (listening on|disabled)")


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (held together while choosing)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Server:
    """One ortserve process on free ports, logging to a file."""

    def __init__(self, repo: pathlib.Path, log_path: pathlib.Path, *,
                 strict_readiness: bool = False, extra_args: tuple[str, ...] = (),
                 https: dict | None = None, exit_timeout_secs: int = 5,
                 env: dict | None = None):
        # https: the server speaks HTTPS (--http-use-ssl); the dict holds the
        # `requests` TLS arguments (verify=<CA file>, cert=(cert, key)) that
        # get()/post() and the startup wait use.
        self.https = https
        self.repo = pathlib.Path(repo)
        self.log_path = pathlib.Path(log_path)
        self.strict_readiness = strict_readiness
        self.extra_args = tuple(extra_args)
        self.exit_timeout_secs = exit_timeout_secs
        # Variables added to this environment for the server (LD_PRELOAD, ...).
        self.env = dict(env or {})
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        self.proc: subprocess.Popen | None = None
        self._log_file = None
        self._sanitizer_checked = False

    # -- addresses
    @property
    def url(self) -> str:          # tritonclient style: host:port, no scheme
        return f"127.0.0.1:{self.http_port}"

    @property
    def base(self) -> str:         # requests style
        return f"{'https' if self.https is not None else 'http'}://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:     # tritonclient.grpc / grpcio style: host:port
        return f"127.0.0.1:{self.grpc_port}"

    def __repr__(self) -> str:
        return f"<ortserve {self.base} repo={self.repo} log={self.log_path}>"

    # -- lifecycle
    def command(self) -> list[str]:
        return [str(ortserve_binary()),
                "--model-repository", str(self.repo),
                "--http-port", str(self.http_port),
                "--grpc-port", str(self.grpc_port),
                "--metrics-port", str(self.metrics_port),
                f"--strict-readiness={'true' if self.strict_readiness else 'false'}",
                "--exit-timeout-secs", str(self.exit_timeout_secs),
                "--log-verbose", "1",
                *self.extra_args, *host_default_args(self.extra_args)]

    def start(self) -> "Server":
        binary = ortserve_binary()
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            pytest.skip(f"ortserve binary not found at {binary} (build it or set ORTSERVE_BIN)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=self._log_file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**os.environ, **self.env} if self.env else None)
        return self

    def wait_live(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        self._poll_until(lambda: self.get("/v2/health/live", timeout=2).status_code == 200,
                         timeout_s, "GET /v2/health/live == 200")
        # HTTP answers before gRPC and the metrics endpoint listen (main.cpp
        # starts them in that order, metrics last); a test that scrapes
        # /metrics right after its models are ready raced that gap (seen
        # under ASan, where startup is slower). Wait for the last startup line.
        self._poll_until(lambda: STARTUP_DONE.search(self.log_text()) is not None,
                         timeout_s, "the metrics endpoint listening (or disabled)")

    def wait_models_ready(self, names, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        for name in names:
            self._poll_until(
                lambda name=name: self.get(f"/v2/models/{name}/ready", timeout=2).status_code == 200,
                timeout_s, f"model {name} ready")

    def _poll_until(self, predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"ortserve exited with {self.proc.returncode} while waiting "
                                     f"for {what}; log tail:\n{self.log_tail()}")
            with contextlib.suppress(requests.RequestException):
                if predicate():
                    return
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; "
                             f"log tail:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        if self._log_file:
            self._log_file.close()
            self._log_file = None
        # Once per server (stop() may run twice: in a test and in teardown).
        if not self._sanitizer_checked:
            self._sanitizer_checked = True
            report = self.sanitizer_report()
            if report:
                raise AssertionError(f"sanitizer report in ortserve's log {self.log_path} "
                                     f"(exit code {self.proc.returncode}):\n{report}")
        return self.proc.returncode

    def sanitizer_report(self, max_lines: int = 120) -> str:
        """The first sanitizer report in the log (and what follows it), or ''."""
        text = self.log_text()
        m = SANITIZER_REPORT.search(text)
        if not m:
            return ""
        start = text.rfind("\n", 0, m.start()) + 1
        return "\n".join(text[start:].splitlines()[:max_lines])

    # -- log
    def log_text(self) -> str:
        if self._log_file:
            self._log_file.flush()
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    # -- HTTP shortcuts
    def get(self, path: str, **kw) -> requests.Response:
        kw.setdefault("timeout", HTTP_TIMEOUT_S)
        for k, v in (self.https or {}).items():
            kw.setdefault(k, v)
        return requests.get(self.base + path, **kw)

    def post(self, path: str, **kw) -> requests.Response:
        kw.setdefault("timeout", HTTP_TIMEOUT_S)
        for k, v in (self.https or {}).items():
            kw.setdefault(k, v)
        return requests.post(self.base + path, **kw)

    def infer_raw(self, model: str, body, headers=None, version: str | None = None,
                  **kw) -> requests.Response:
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        return self.post(path, data=body, headers=headers or {}, **kw)

    def repository_index(self) -> list[dict]:
        r = self.post("/v2/repository/index", json={})
        assert r.status_code == 200, r.text
        return r.json()

    def model_stats(self, model: str) -> dict:
        r = self.get(f"/v2/models/{model}/stats")
        assert r.status_code == 200, r.text
        stats = r.json()["model_stats"]
        assert len(stats) >= 1, stats
        return stats[0]


def host_default_args(test_args) -> list[str]:
    """ORTSERVE_TEST_SERVER_ARGS ("--flag value ..."): flags every server of the suite gets, such as
    the thread counts a larger host defaults to; a flag the test passes itself keeps the test's value."""
    words = shlex.split(os.environ.get("ORTSERVE_TEST_SERVER_ARGS", ""))
    given = {a.split("=", 1)[0] for a in test_args if a.startswith("--")}
    out, i = [], 0
    while i < len(words):
        flag = words[i]
        value = [words[i + 1]] if "=" not in flag and i + 1 < len(words) and not words[i + 1].startswith("--") else []
        if flag.split("=", 1)[0] not in given:
            out += [flag, *value]
        i += 1 + len(value)
    return out


def start_server(repo, log_dir: pathlib.Path, name: str, **kw) -> Server:
    """Starts a server and waits until it is live (failing with the log tail)."""
    server = Server(repo, pathlib.Path(log_dir) / f"{name}.log", **kw).start()
    try:
        server.wait_live()
    except BaseException:
        server.stop()
        raise
    return server


# --------------------------------------------------------------------------
# onnxruntime references

class Reference:
    """Runs the .onnx file the server serves, in-process, as the oracle."""

    def __init__(self):
        self._sessions = {}

    def session(self, model_path: pathlib.Path):
        import onnxruntime as ort
        key = str(model_path)
        if key not in self._sessions:
            self._sessions[key] = ort.InferenceSession(key, providers=["CPUExecutionProvider"])
        return self._sessions[key]

    def run(self, model_path: pathlib.Path, feeds: dict) -> dict:
        session = self.session(model_path)
        names = [o.name for o in session.get_outputs()]
        feeds = {k: _as_ort_strings(v) if v.dtype == np.object_ else v for k, v in feeds.items()}
        return dict(zip(names, session.run(names, feeds)))

    def run_bf16(self, model_path: pathlib.Path, feeds_bits: dict) -> dict:
        """feeds/results as uint16 bit patterns (numpy has no bfloat16)."""
        import onnxruntime as ort
        from onnx import TensorProto
        session = self.session(model_path)
        ort_feeds = {k: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.ascontiguousarray(v, np.uint16), TensorProto.BFLOAT16) for k, v in feeds_bits.items()}
        names = [o.name for o in session.get_outputs()]
        outs = session.run_with_ort_values(names, ort_feeds)
        return {name: _ortvalue_bits(value, value.shape()) for name, value in zip(names, outs)}


def _as_ort_strings(a: np.ndarray) -> np.ndarray:
    """onnxruntime's python API takes str elements, not bytes."""
    return np.vectorize(lambda v: v.decode("utf-8") if isinstance(v, bytes) else v,
                        otypes=[object])(a) if a.size else a


def _ortvalue_bits(value, shape) -> np.ndarray:
    """uint16 view of a BF16 OrtValue, via its data pointer."""
    import ctypes
    count = int(np.prod(shape)) if shape else 1
    buf = (ctypes.c_uint16 * count).from_address(value.data_ptr())
    return np.frombuffer(bytes(buf), np.uint16).reshape(shape).copy()


def perf_analyzer_command() -> tuple[pathlib.Path, dict]:
    """perf_analyzer from the venv and an environment that finds libcudart."""
    binary = pathlib.Path(sys.executable).parent / "perf_analyzer"
    if not binary.exists():
        binary = REPO_ROOT / ".venv" / "bin" / "perf_analyzer"
    import nvidia.cuda_runtime  # libcudart.so.12, needed even without a GPU
    cudart = pathlib.Path(list(nvidia.cuda_runtime.__path__)[0]) / "lib"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(cudart), env.get("LD_LIBRARY_PATH", "")) if p)
    return binary, env


def model_file(repo: pathlib.Path, model: str, version: int = 1) -> pathlib.Path:
    return pathlib.Path(repo) / model / str(version) / "model.onnx"


def fp32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """Truncating conversion, as tritonclient's serialize_bf16_tensor does."""
    return (np.ascontiguousarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_bits_to_fp32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


# --------------------------------------------------------------------------
# Sample inputs

def sample_array(datatype: str, shape, seed: int = 0) -> np.ndarray:
    """Deterministic, type-appropriate data covering each type's edge values."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if datatype == "BOOL":
        a = rng.integers(0, 2, n).astype(np.bool_)
    elif datatype == "BYTES":
        words = ["", "a", "hello", "ünïcödé", "x" * 40, "with space", "0", "\u4e2d\u6587"]
        a = np.array([words[i % len(words)].encode() + str(i).encode() for i in range(n)],
                     dtype=np.object_)
    elif datatype in ("FP16", "FP32", "FP64"):
        dt = {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64}[datatype]
        a = (rng.standard_normal(n) * 100).astype(dt)
    elif datatype == "BF16":  # values exactly representable in bfloat16
        a = (rng.integers(-128, 128, n) / 4).astype(np.float32)
    else:
        dt = np.dtype(datatype.lower())
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        a[: min(n, 2)] = [info.min, info.max][: min(n, 2)]
    return a.reshape(shape)


# --------------------------------------------------------------------------
# Error assertions and raw HTTP

def error_message(resp: requests.Response) -> str:
    """The KServe/Triton error body {"error": "..."}; asserts it is JSON."""
    try:
        body = resp.json()
    except ValueError:
        raise AssertionError(f"error response is not JSON: {resp.status_code} {resp.text[:500]!r}")
    assert isinstance(body, dict) and isinstance(body.get("error"), str), body
    return body["error"]


def assert_error(resp: requests.Response, statuses, *substrings: str, pattern: str | None = None):
    """Status in `statuses` and the error message names the problem:
    it contains every substring (case-insensitive) and matches `pattern`."""
    statuses = (statuses,) if isinstance(statuses, int) else tuple(statuses)
    assert resp.status_code in statuses, \
        f"expected HTTP {statuses}, got {resp.status_code}: {resp.text[:500]!r}"
    msg = error_message(resp)
    for s in substrings:
        assert s.lower() in msg.lower(), f"error message {msg!r} does not mention {s!r}"
    if pattern:
        assert re.search(pattern, msg, re.IGNORECASE), f"error message {msg!r} !~ /{pattern}/"
    return msg


class RawResponse:
    def __init__(self, status: int, headers: dict, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<RawResponse {self.status} {self.headers} {self.body[:300]!r}>"


def raw_exchange(port: int, request: bytes, timeout_s: float = HTTP_TIMEOUT_S) -> RawResponse | None:
    """Sends bytes on a fresh connection and reads one HTTP/1.1 response.

    The server may answer (e.g. 400 for a body over the limit) and close before the whole request is
    sent; send errors are tolerated. Returns None if the connection closed
    without any response bytes.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        try:
            view = memoryview(request)
            while view:
                sent = s.send(view[:65536])
                view = view[sent:]
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_response(s, timeout_s)


def read_response(s: socket.socket, timeout_s: float) -> RawResponse | None:
    s.settimeout(timeout_s)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    if b"\r\n\r\n" not in data:
        return None if not data else RawResponse(_status_of(data), {}, b"")
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = _status_of(data)
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length", "0") or 0)
    try:
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return RawResponse(status, headers, body)


def _status_of(data: bytes) -> int:
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    assert m, f"not an HTTP response: {data[:200]!r}"
    return int(m.group(1))


def http_request_bytes(method: str, path: str, body: bytes = b"", headers: dict | None = None) -> bytes:
    h = {"Host": "127.0.0.1", "Content-Length": str(len(body)), "Connection": "close"}
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return head.encode("latin-1") + b"\r\n" + body


def binary_infer_body(json_header: dict, *payloads: bytes) -> tuple[bytes, dict]:
    """A binary-tensor-extension body and its Inference-Header-Content-Length header."""
    head = json.dumps(json_header).encode()
    return head + b"".join(payloads), {"Inference-Header-Content-Length": str(len(head)),
                                       "Content-Type": "application/octet-stream"}


# --------------------------------------------------------------------------
# tritonclient shortcuts

def infer_inputs(tensors: dict, binary: bool = True) -> list:
    """{name: (datatype, array)} -> [tritonclient.http.InferInput]."""
    inputs = []
    for name, (datatype, array) in tensors.items():
        inp = httpclient.InferInput(name, list(array.shape), datatype)
        inp.set_data_from_numpy(array, binary_data=binary)
        inputs.append(inp)
    return inputs


def requested_outputs(names, binary: bool = True) -> list:
    return [httpclient.InferRequestedOutput(n, binary_data=binary) for n in names]


def metric(srv, name: str, **labels) -> float:
    """The value of the first sample of `name` on srv's /metrics whose labels
    include `labels`."""
    text = requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=HTTP_TIMEOUT_S).text
    for line in text.splitlines():
        if line.startswith(name + " "):  # a sample without labels
            got = {}
        elif line.startswith(name + "{"):
            got = dict(re.findall(r'(\w+)="([^"]*)"', line[len(name):line.index("}") + 1]))
        else:
            continue
        if all(got.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name}{labels} in /metrics")


def grpc_inputs(tensors: dict) -> list:
    """{name: (datatype, array)} -> [tritonclient.grpc.InferInput] (raw_input_contents)."""
    inputs = []
    for name, (datatype, array) in tensors.items():
        inp = grpcclient.InferInput(name, list(array.shape), datatype)
        inp.set_data_from_numpy(array)
        inputs.append(inp)
    return inputs


def assert_matches(actual: np.ndarray, expected: np.ndarray, exact: bool = False) -> None:
    """Same shape and dtype kind; exact for integers/strings/bools or when asked."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if exact or expected.dtype.kind not in "fc":
        if expected.dtype == np.object_:
            actual = np.vectorize(lambda v: v if isinstance(v, bytes) else str(v).encode(),
                                  otypes=[object])(actual)
            expected = np.vectorize(lambda v: v if isinstance(v, bytes) else str(v).encode(),
                                    otypes=[object])(expected)
            assert actual.tolist() == expected.tolist()
        else:
            np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def check_add_sub_fp32(srv, repo, reference) -> None:
    """One correct inference on add_sub_fp32 (compared with onnxruntime)."""
    a = np.arange(32, dtype=np.float32).reshape(2, 16)
    b = np.full((2, 16), 0.5, np.float32)
    with httpclient.InferenceServerClient(srv.url, network_timeout=60) as c:
        result = c.infer("add_sub_fp32", infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)}))
    ref = reference.run(model_file(repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), ref["OUTPUT0"])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), ref["OUTPUT1"])
