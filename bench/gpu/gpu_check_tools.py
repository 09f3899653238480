"""What bench/gpu/gpu_checks.py drives the bundle with: an ortserve process,
a binary-tensor KServe client, the bundle's load generator and baseline, and
nvidia-smi readings. Python's standard library and numpy only: the GPU host
has no tritonclient, requests or perf_analyzer, and no network to fetch them.
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

DTYPES = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32, "BOOL": np.bool_}


def free_ports(count: int) -> list:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Server:
    """One ortserve process of the bundle serving `repo`, logging to `log`."""

    def __init__(self, bundle: Path, repo: Path, log: Path, env: dict):
        self.bundle, self.repo, self.log, self.env = bundle, repo, log, env
        self.port, grpc, metrics = free_ports(3)
        self.command = [str(bundle / "bin" / "ortserve"), "--model-repository", str(repo),
                        "--http-port", str(self.port), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
                        "--strict-readiness=true", "--exit-timeout-secs", "5", "--log-verbose", "1"]
        self.proc = None
        self._log_file = None

    def start(self) -> "Server":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log, "wb")
        self.proc = subprocess.Popen(self.command, stdout=self._log_file, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env)
        return self

    def request(self, method: str, path: str, body: bytes = b"", headers: dict | None = None,
                timeout: float = 60.0) -> tuple:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def wait_models(self, names: list, timeout_s: float) -> dict:
        """Waits until every model is READY or UNAVAILABLE; returns name ->
        (state, reason). Raises when the process exits or time runs out."""
        deadline = time.monotonic() + timeout_s
        states = {}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ortserve exited with {self.proc.returncode}; log tail:\n{self.log_tail()}")
            try:
                status, _, body = self.request("POST", "/v2/repository/index", b"{}", timeout=5)
                if status == 200:
                    states = {m["name"]: (m.get("state", ""), m.get("reason", "")) for m in json.loads(body)}
                    if all(states.get(n, ("",))[0] in ("READY", "UNAVAILABLE") for n in names):
                        return {n: states[n] for n in names}
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"models not settled after {timeout_s:.0f} s: {states}; log tail:\n{self.log_tail()}")

    def stats(self, model: str) -> dict:
        status, _, body = self.request("GET", f"/v2/models/{model}/stats")
        if status != 200:
            raise RuntimeError(f"stats of {model}: HTTP {status} {body[:200]!r}")
        return json.loads(body)["model_stats"][0]

    def infer(self, model: str, body: bytes, header_bytes: int) -> dict:
        """One binary-tensor request; returns the outputs by name."""
        status, headers, data = self.request(
            "POST", f"/v2/models/{model}/infer", body,
            {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(header_bytes)})
        if status != 200:
            raise RuntimeError(f"{model}: HTTP {status}: {data[:300]!r}")
        lower = {k.lower(): v for k, v in headers.items()}
        head_len = int(lower.get("inference-header-content-length", len(data)))
        head = json.loads(data[:head_len])
        outputs, offset = {}, head_len
        for o in head["outputs"]:
            dtype = DTYPES[o["datatype"]]
            size = o.get("parameters", {}).get("binary_data_size")
            if size is None:
                outputs[o["name"]] = np.asarray(o["data"], dtype).reshape(o["shape"])
                continue
            outputs[o["name"]] = np.frombuffer(data[offset:offset + size], dtype).reshape(o["shape"])
            offset += size
        return outputs

    def log_text(self) -> str:
        if self._log_file:
            self._log_file.flush()
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        if self._log_file:
            self._log_file.close()
            self._log_file = None


def run_json(command: list, timeout_s: float, env: dict | None = None, cwd: Path | None = None) -> dict:
    """Runs a bench program that prints one JSON object as its last line."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} exited with {done.returncode}: {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def load(bundle: Path, port: int, model: str, bodies: list, concurrency: int, duration_s: float,
         warmup_s: float, body_list: Path | None = None, allow_empty: bool = False) -> dict:
    """The bundle's closed-loop load generator against one model. An answer
    other than 200 fails; so does a window without answers, unless
    `allow_empty` (a CPU rehearsal's short windows on a busy machine)."""
    command = [str(bundle / "bin" / "ortserve_http_load"), "--url", f"http://127.0.0.1:{port}/v2/models/{model}/infer",
               "--concurrency", str(concurrency), "--duration", f"{duration_s:.3f}", "--warmup", f"{warmup_s:.3f}"]
    for b in bodies:
        command += ["--body", b]
    if body_list is not None:
        command += ["--body-list", str(body_list)]
    result = run_json(command, duration_s + warmup_s + 60)
    bad = {s: n for s, n in result["statuses"].items() if s != "200"}
    if bad:
        raise RuntimeError(f"{model} at concurrency {concurrency}: answers other than 200 {bad}: {result['failure']}")
    if result["requests"] == 0 and not allow_empty:
        raise RuntimeError(f"{model} at concurrency {concurrency}: no answer inside the window")
    return result


class GpuSampler:
    """nvidia-smi's GPU utilization and memory every 100 ms, in a thread;
    mean(t0, t1) averages the readings taken between two monotonic times."""

    def __init__(self, device: int = 0):
        self.samples = []  # (monotonic time, utilization %, memory used MiB)
        self.proc = None
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return
        self.proc = subprocess.Popen([smi, "-i", str(device), "--query-gpu=utilization.gpu,memory.used",
                                      "--format=csv,noheader,nounits", "-lms", "100"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                util, mem = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.monotonic(), util, mem))

    def mean(self, t0: float, t1: float) -> tuple:
        window = [(u, m) for t, u, m in list(self.samples) if t0 <= t <= t1]
        if not window:
            return None, None
        return sum(u for u, _ in window) / len(window), max(m for _, m in window)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def mib(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def process_gpu_memory_mib(pid: int) -> float | None:
    """The GPU memory nvidia-smi attributes to `pid` (None: no reading)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    done = subprocess.run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=30)
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid):
            return float(parts[1])
    return None


def server_gpu_memory_mib(pid: int, idle_mib: float | None) -> float | None:
    """The GPU memory of server `pid`: nvidia-smi's per-process reading, or,
    where it lists no processes (some virtual machines), the device's used
    memory over `idle_mib`, read before the server started."""
    own = process_gpu_memory_mib(pid)
    if own is not None:
        return own
    used = gpu_memory_used_mib()
    return None if used is None or idle_mib is None else used - idle_mib


def gpu_memory_used_mib() -> float | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    done = subprocess.run([smi, "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=30)
    try:
        return float(done.stdout.strip().splitlines()[0])
    except (ValueError, IndexError):
        return None


def environment_summary() -> list:
    """Lines naming the GPU, the driver and where the CUDA libraries load from."""
    lines = []
    smi = shutil.which("nvidia-smi")
    if smi:
        done = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total,compute_cap",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        lines.append(f"GPU: {done.stdout.strip() or done.stderr.strip()}")
    else:
        lines.append("GPU: nvidia-smi not found")
    lines.append(f"LD_LIBRARY_PATH: {os.environ.get('LD_LIBRARY_PATH', '')}")
    return lines
