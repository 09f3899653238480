"""Routing by model name on localhost, as the Helm chart deploys it
(routing.mode=model-hash): ortserve replicas started with the chart's own
container arguments, behind Debian's haproxy running the chart's own
configuration (deploy/helm/ortserve/files/haproxy-model-hash.cfg, rendered by
helm). Used by test_replicas.py. A replica's process (start, wait until ready,
stop) is bench/lib/scaleout_cluster.ServerProcess.

Only addresses change from the chart: replica <i> (StatefulSet pod
<release>-<i>) listens on 127.0.0.<i+2> with the chart's ports, and the router
binds 127.0.0.1 with the same ports (Linux routes all of 127/8 to loopback).
"""
from __future__ import annotations

import contextlib
import pathlib
import re
import subprocess
import sys
import time

import requests

from deploy_helpers import haproxy, helm, ortserve_workload, render_chart
from harness import HTTP_TIMEOUT_S, REPO_ROOT, SHUTDOWN_TIMEOUT_S, STARTUP_TIMEOUT_S, free_ports, ortserve_binary

sys.path.insert(0, str(REPO_ROOT / "bench" / "lib"))
from scaleout_cluster import ServerProcess  # noqa: E402  (bench's replica process, shared)

RELEASE = "ortserve"  # helm template's release name in deploy_helpers.render_chart


def replica_address(index: int) -> str:
    return f"127.0.0.{index + 2}"


def model_hash_values(replicas: int, ports: tuple[int, int, int], check_ms: int = 100) -> tuple:
    http, grpc, metrics = ports
    return ("routing.mode=model-hash", f"replicaCount={replicas}", f"ports.http={http}",
            f"ports.grpc={grpc}", f"ports.metrics={metrics}",
            f"routing.haproxy.checkIntervalMs={check_ms}", "server.exitTimeoutSecs=10",
            "threadBudget=1")


def local_router_config(docs: list[dict], replicas: int, work_dir: pathlib.Path) -> pathlib.Path:
    """The chart's ConfigMap written to work_dir: haproxy.cfg with its binds on
    127.0.0.1, its files loaded from work_dir, and each replica's DNS name
    (<release>-<i>.<headless service>...) replaced by its loopback address."""
    files = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    for name, text in files.items():
        (work_dir / name).write_text(text)
    config = re.sub(r"(?m)^(\s*bind ):", r"\g<1>127.0.0.1:", files["haproxy.cfg"])
    config = re.sub(r"(?m)^(\s*lua-load ).*/", rf"\g<1>{work_dir}/", config)
    names = re.findall(rf"server r(\d+) ({RELEASE}-\d+\.[^:\s]+):", config)
    assert len({i for i, _ in names}) == replicas, names
    for i, name in set(names):
        config = config.replace(f"{name}:", f"{replica_address(int(i))}:")
    path = work_dir / "haproxy.cfg"
    path.write_text(config)
    return path


def replica_args(docs: list[dict], repo: pathlib.Path, cache_dir: pathlib.Path) -> list[str]:
    """The StatefulSet's ortserve arguments, the repository and cache paths local."""
    workload = ortserve_workload(docs)
    assert workload["kind"] == "StatefulSet"
    container = next(c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == "ortserve")
    replace = {"--model-repository": str(repo), "--model-cache-dir": str(cache_dir)}
    return [f"{name}={replace.get(name, value)}" for name, value in (a.split("=", 1) for a in container["args"])]


class Replica(ServerProcess):
    def __init__(self, index: int, args: list[str], ports: tuple[int, int, int], log_dir: pathlib.Path,
                 drain_delay_secs: int):
        super().__init__(f"replica {index}", log_dir / f"replica-{index}.log", replica_address(index), ports,
                         ready_timeout_s=STARTUP_TIMEOUT_S, stop_timeout_s=SHUTDOWN_TIMEOUT_S)
        self.index = index
        # --drain-delay-secs stands in for the pod's preStop pause: not ready
        # at once on SIGTERM, still serving while the router's check notices.
        # 0: refusing at once, so that the router's retries must cover it.
        self._command = [str(ortserve_binary()), *args, f"--http-address={self.address}",
                         f"--grpc-address={self.address}", f"--metrics-address={self.address}",
                         f"--drain-delay-secs={drain_delay_secs}"]

    def command(self) -> list[str]:
        return self._command

    def loaded_models(self) -> set[str]:
        index = requests.post(f"{self.base}/v2/repository/index", json={}, timeout=HTTP_TIMEOUT_S).json()
        return {e["name"] for e in index if e.get("state") == "READY"}

    def metrics(self) -> str:
        return requests.get(f"http://{self.address}:{self.metrics_port}/metrics", timeout=HTTP_TIMEOUT_S).text

    def on_demand_loads(self) -> int:
        m = re.search(r'^ortserve_model_loads_total\{[^}]*reason="on_demand"[^}]*\} (\S+)$', self.metrics(), re.M)
        assert m, "no ortserve_model_loads_total{reason=\"on_demand\"}"
        return int(float(m.group(1)))

    def evictions(self) -> int:
        m = re.search(r"^ortserve_model_evictions_total (\S+)$", self.metrics(), re.M)
        assert m, "no ortserve_model_evictions_total"
        return int(float(m.group(1)))

    def resident_bytes(self) -> float:
        """The sum of ortserve_model_memory_bytes: what its loaded versions hold."""
        return sum(float(v) for v in re.findall(r"^ortserve_model_memory_bytes\{[^}]*\} (\S+)$", self.metrics(), re.M))

    def on_demand_loads_of(self, name: str) -> int:
        """How often it loaded `name` for a request (its log lines)."""
        return self.log_path.read_text(errors="replace").count(f"model '{name}': loading on its first request")


class Router:
    """Debian's haproxy with the chart's configuration, in the foreground."""

    def __init__(self, config_path: pathlib.Path, ports: tuple[int, int, int], work_dir: pathlib.Path):
        self.http_port, self.grpc_port, self.metrics_port = ports
        self.config_path = config_path
        self.log_path = work_dir / "haproxy.log"
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self) -> "Router":
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([haproxy(), "-db", "-f", str(self.config_path)], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def servers_up(self) -> dict[str, int]:
        """Per backend, how many servers its health checks see UP (HAProxy's own
        Prometheus exporter on the metrics port)."""
        text = requests.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=HTTP_TIMEOUT_S).text
        up: dict[str, int] = {}
        for backend, state, value in re.findall(
                r'^haproxy_server_status\{proxy="([^"]+)",server="[^"]+",state="([^"]+)"\} (\S+)$', text, re.M):
            up.setdefault(backend, 0)
            up[backend] += int(state == "UP" and float(value) == 1)
        return up

    def retries(self) -> dict[str, int]:
        """Retries and redispatches over all backends so far."""
        text = requests.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=HTTP_TIMEOUT_S).text
        return {kind: int(sum(float(v) for v in re.findall(
                    rf'^haproxy_backend_{kind}_warnings_total\{{[^}}]*\}} (\S+)$', text, re.M)))
                for kind in ("retry", "redispatch")}

    def wait_up(self, count: int) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_path.read_text()[-3000:]
            with contextlib.suppress(requests.RequestException):
                up = self.servers_up()
                if up and all(n == count for n in up.values()):
                    return
            time.sleep(0.05)
        raise AssertionError(f"haproxy does not see {count} replicas up: {self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@contextlib.contextmanager
def model_hash_cluster(repo: pathlib.Path, work_dir: pathlib.Path, replicas: int = 3,
                       drain_delay_secs: tuple = (), memory_budget: str | None = None):
    """`replicas` ortserve processes behind the chart's HAProxy, with
    --drain-delay-secs drain_delay_secs[i] (default 1) and, when set, the chart's
    routing.modelMemoryBudget (--model-memory-budget); yields (router, [Replica])."""
    haproxy()
    helm()
    ports = tuple(free_ports(3))
    values = model_hash_values(replicas, ports)
    if memory_budget is not None:
        values += (f"routing.modelMemoryBudget={memory_budget}",)
    docs = render_chart(set_values=values)
    args = replica_args(docs, repo, work_dir / "cache")
    started: list = []
    router = None
    try:
        for i in range(replicas):
            delay = drain_delay_secs[i] if i < len(drain_delay_secs) else 1
            started.append(Replica(i, args, ports, work_dir, delay).start())
        for r in started:
            r.wait_ready()
        router = Router(local_router_config(docs, replicas, work_dir), ports, work_dir).start()
        router.wait_up(replicas)
        yield router, started
    finally:
        if router:
            router.stop()
        for r in started:
            r.stop()
