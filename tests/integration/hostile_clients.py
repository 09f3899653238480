"""What hostile HTTP clients send, and how a server's cost is read, for
test_hostile_http.py and bench/hostile_http.py alike (no pytest here).

Costs are read from /proc: CPU from each thread's schedstat (nanoseconds on
a CPU, so that a few hundred small requests are measurable; stat's clock
ticks are 10 ms), memory from status (VmRSS, and VmHWM after a reset of the
peak through clear_refs)."""
from __future__ import annotations

import contextlib
import functools
import gzip
import json
import pathlib
import socket

# identity_fp32 of tests/models/make_test_models.py: INPUT0 FP32 [-1, -1]
# (batch first) -> OUTPUT0.
MODEL = "identity_fp32"
# A shape that claims 64 MiB of FP32 (the default --http-max-input-size and
# within --max-tensor-elements) with one value of data: 157 bytes of JSON.
CLAIMED_ELEMENTS = 1 << 24


def nofile_command(command: list[str], nofile: int) -> list[str]:
    """`command` run with soft and hard RLIMIT_NOFILE at `nofile` (prlimit
    execs it, so the pid is the server's)."""
    return ["prlimit", f"--nofile={nofile}:{nofile}", "--", *command]


def _threads(pid: int):
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that just ended
            yield (task / "comm").read_text().strip(), int((task / "schedstat").read_text().split()[0])


def cpu_ns(pid: int, thread_prefix: str = "") -> int:
    """CPU time so far of the process's live threads whose name starts with
    `thread_prefix` (all of them by default), in nanoseconds."""
    return sum(ns for name, ns in _threads(pid) if name.startswith(thread_prefix))


def status_kib(pid: int, field: str) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def sanitizer_runtime(pid: int) -> str | None:
    """The sanitizer runtime the process `pid` runs with ("asan", "tsan"), or None.
    Under one, RSS says little (ASan keeps freed memory in quarantine by design),
    and UBSan's vptr check probes memory through a pipe, so a process that is out
    of descriptors gets false "invalid vptr" reports."""
    maps = pathlib.Path(f"/proc/{pid}/maps").read_text()
    return next((name for name in ("asan", "tsan") if f"lib{name}" in maps), None)


def reset_peak_rss(pid: int) -> bool:
    """VmHWM starts again from VmRSS; False where the kernel does not allow it."""
    try:
        pathlib.Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def valid_body(elements: int = 16) -> bytes:
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, elements],
                                   "data": [float(i) for i in range(elements)]}]}).encode()


def claimed_shape_body(elements: int = CLAIMED_ELEMENTS) -> bytes:
    """A shape of `elements` with a single value of data."""
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, elements],
                                   "data": [1.0]}]}).encode()


@functools.lru_cache(maxsize=4)
def gzip_bomb(inflated_bytes: int = 80 << 20) -> bytes:
    """Zeros that inflate to `inflated_bytes` (80 MiB: an 80 KB body)."""
    return gzip.compress(b"\0" * inflated_bytes, 9)


def accept_queue(port: int) -> int:
    """Connections waiting to be accepted on the IPv4 listener of `port`
    (/proc/net/tcp shows a listener's accept queue as its rx_queue)."""
    for line in pathlib.Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if state == "0A" and int(local.split(":")[1], 16) == port:
            return int(queues.split(":")[1], 16)
    raise AssertionError(f"nothing listens on port {port}")


def open_connections(port: int, count: int, timeout_s: float = 10.0) -> list[socket.socket]:
    """`count` idle TCP connections; the kernel completes them (the listen
    backlog) whether or not the server accepts them."""
    socks = []
    try:
        for _ in range(count):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=timeout_s))
    except BaseException:
        close_all(socks)
        raise
    return socks


def close_all(socks: list[socket.socket]) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.close()
    socks.clear()
