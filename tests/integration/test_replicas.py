"""Routing by model name across replicas (issue 35; the Helm chart's
routing.mode=model-hash, docs/deploy.md "Routing by model name"): ortserve
replicas that load models on their first request, behind Debian's haproxy
running the chart's configuration (replicas_cluster.py). Requests name models
over HTTP and gRPC; outputs are checked against onnxruntime; where each model
is loaded comes from each replica's repository index and
ortserve_model_loads_total. Nothing here asserts on timing."""
from __future__ import annotations

import random
import re
import signal
import subprocess
import threading

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient

from deploy_helpers import flag_values, haproxy, named, one, ortserve_workload, render_chart
from harness import HTTP_TIMEOUT_S, SHUTDOWN_TIMEOUT_S, Reference
from replicas_cluster import local_router_config, model_hash_cluster
from test_memory_budget import version_cost
from test_model_control import write_addk

X = np.arange(4, dtype=np.float32).reshape(1, 4)


def write_models(repo, count: int, width: int) -> list[str]:
    """`count` add-constant models m<i> (OUTPUT0 = INPUT0 + i)."""
    names = [f"m{i:0{width}d}" for i in range(count)]
    for i, name in enumerate(names):
        write_addk(repo, name, {1: float(i)})
    return names


class Checker:
    """Sends one request for a model over HTTP or gRPC through the router and compares
    the answer with onnxruntime on the served file; returns an error string or ''."""

    def __init__(self, router, repo):
        self.router, self.repo = router, repo
        self.reference = Reference()
        self.lock = threading.Lock()
        self.local = threading.local()

    def expected(self, name: str) -> np.ndarray:
        with self.lock:
            return self.reference.run(self.repo / name / "1" / "model.onnx", {"INPUT0": X})["OUTPUT0"]

    def http(self, name: str) -> np.ndarray:
        if not hasattr(self.local, "session"):
            self.local.session = requests.Session()
        body = {"inputs": [{"name": "INPUT0", "shape": list(X.shape), "datatype": "FP32",
                            "data": X.ravel().tolist()}]}
        r = self.local.session.post(f"{self.router.base}/v2/models/{name}/infer", json=body,
                                    timeout=HTTP_TIMEOUT_S)
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
        out = r.json()["outputs"][0]
        return np.array(out["data"], np.float32).reshape(out["shape"])

    def grpc(self, name: str) -> np.ndarray:
        if not hasattr(self.local, "grpc"):
            self.local.grpc = grpcclient.InferenceServerClient(self.router.grpc_url)
        inp = grpcclient.InferInput("INPUT0", list(X.shape), "FP32")
        inp.set_data_from_numpy(X)
        return self.local.grpc.infer(name, [inp], client_timeout=HTTP_TIMEOUT_S).as_numpy("OUTPUT0")

    def check(self, name: str, protocol: str) -> str:
        try:
            got = self.http(name) if protocol == "http" else self.grpc(name)
            np.testing.assert_allclose(got, self.expected(name), rtol=1e-6)
            return ""
        except Exception as e:  # noqa: BLE001  (every failure is reported by the test)
            return f"{protocol} {name}: {type(e).__name__}: {str(e)[:200]}"


def holders(replicas, names) -> dict[str, list[int]]:
    """Per model, the replicas where it is loaded (READY in their repository index)."""
    loaded = {r.index: r.loaded_models() for r in replicas}
    return {n: [i for i, models in loaded.items() if n in models] for n in names}


def write_wide(repo, name: str) -> None:
    """An add-constant model taking any number of rows (no batching): requests as large
    as wanted."""
    d = write_addk(repo, name, {1: 7.0})
    config = (d / "config.pbtxt").read_text()
    (d / "config.pbtxt").write_text(config.replace("max_batch_size: 8", "max_batch_size: 0")
                                    .replace("dims: [ 4 ]", "dims: [ -1, 4 ]"))


def grpc_wide(router, repo, name: str, rows: int) -> None:
    x = np.ones((rows, 4), np.float32)
    inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    got = grpcclient.InferenceServerClient(router.grpc_url).infer(name, [inp]).as_numpy("OUTPUT0")
    want = Reference().run(repo / name / "1" / "model.onnx", {"INPUT0": x})["OUTPUT0"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.scale  # three replicas
def test_each_model_stays_on_one_replica_and_a_broken_one_takes_no_replica_out(tmp_path):
    """Sequential requests (no load to bound): HTTP and gRPC requests for a model land
    on one replica, the one its name hashes to (gRPC messages larger than HAProxy's
    buffer too); the models spread over the replicas. A model whose load fails answers
    its error and every replica stays ready and in the ring (the chart runs the
    replicas with --strict-readiness=false)."""
    repo = tmp_path / "models"
    names = write_models(repo, 12, 2)
    write_wide(repo, "wide")
    write_addk(repo, "broken")
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"not an onnx model")
    with model_hash_cluster(repo, tmp_path) as (router, replicas):
        checker = Checker(router, repo)
        errors = [checker.check(name, protocol) for _ in range(2) for name in names
                  for protocol in ("http", "grpc")]
        assert not any(errors), [e for e in errors if e]
        for _ in range(3):
            grpc_wide(router, repo, "wide", 8192)  # 128 KiB: more than HAProxy's 16 KiB buffer
        names.append("wide")
        where = holders(replicas, names)
        assert all(len(h) == 1 for h in where.values()), where
        assert len({h[0] for h in where.values()}) > 1, f"every model on one replica: {where}"
        assert sum(r.on_demand_loads() for r in replicas) == len(names)

        r = requests.post(f"{router.base}/v2/models/broken/infer", timeout=HTTP_TIMEOUT_S,
                          json={"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                            "data": [0, 1, 2, 3]}]})
        assert r.status_code == 400 and "failed to load 'broken'" in r.text, r.text
        for replica in replicas:
            assert requests.get(f"{replica.base}/v2/health/ready", timeout=5).status_code == 200
        assert requests.get(f"{router.base}/v2/health/ready", timeout=5).status_code == 200
        assert not any(checker.check(name, "http") for name in names)
        assert holders(replicas, names) == where


def test_chart_model_hash_mode_renders_a_router_for_a_statefulset(tmp_path):
    """routing.mode=model-hash: the Service sends clients to the HAProxy Deployment,
    whose configuration (valid for Debian's haproxy) names every StatefulSet replica
    up to the autoscaler's maximum through the headless Service; the replicas load on
    demand, are ready without any model, and get --model-memory-budget only when set."""
    docs = render_chart(set_values=("routing.mode=model-hash", "autoscaling.enabled=true",
                                    "autoscaling.maxReplicas=5"))
    workload = ortserve_workload(docs)
    assert workload["kind"] == "StatefulSet"
    headless = named(docs, "Service", workload["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["selector"] == workload["spec"]["selector"]["matchLabels"]
    router = named(docs, "Deployment", "ortserve-router")
    router_labels = router["spec"]["template"]["metadata"]["labels"]
    assert named(docs, "Service", "ortserve")["spec"]["selector"] == router_labels
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        selector = named(docs, kind, "ortserve")["spec"]
        selector = selector.get("selector") or selector["podSelector"]
        assert not set(selector["matchLabels"].items()) <= set(router_labels.items()), kind
    assert one(docs, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["kind"] == "StatefulSet"

    args = flag_values(next(c for c in workload["spec"]["template"]["spec"]["containers"]
                            if c["name"] == "ortserve")["args"])
    assert args["--model-load-on-demand"] == ["true"] and args["--strict-readiness"] == ["false"]
    assert "--model-memory-budget" not in args
    config = named(docs, "ConfigMap", "ortserve-router")["data"]["haproxy.cfg"]
    servers = re.findall(r"server r(\d+) ortserve-(\d+)\.ortserve-replicas\.default\.svc\.cluster\.local:(\d+)",
                         config)
    assert sorted({(a, b) for a, b, _ in servers}) == [(str(i), str(i)) for i in range(5)]
    check = subprocess.run([haproxy(), "-c", "-f", str(local_router_config(docs, 5, tmp_path))],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    budget = render_chart(set_values=("routing.mode=model-hash", "routing.modelMemoryBudget=2G"))
    container = ortserve_workload(budget)["spec"]["template"]["spec"]["containers"][0]
    assert "--model-memory-budget=2G" in container["args"]
    default = ortserve_workload(render_chart(set_values=("routing.modelMemoryBudget=2G",)))
    assert default["kind"] == "Deployment"
    assert not any("--model-memory-budget" in a or "on-demand" in a
                   for a in default["spec"]["template"]["spec"]["containers"][0]["args"])


class Load:
    """`threads` clients working through a shared list of (model, protocol) requests."""

    def __init__(self, checker, work: list[tuple[str, str]], threads: int = 4):
        self.checker, self.work = checker, list(work)
        self.done, self.errors = 0, []
        self.lock = threading.Lock()
        self.progress = threading.Condition(self.lock)
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def start(self) -> "Load":
        for t in self.threads:
            t.start()
        return self

    def _run(self) -> None:
        while True:
            with self.lock:
                if not self.work:
                    return
                name, protocol = self.work.pop()
            error = self.checker.check(name, protocol)
            with self.progress:
                self.done += 1
                if error:
                    self.errors.append(error)
                self.progress.notify_all()

    def wait_done(self, count: int) -> None:
        with self.progress:
            assert self.progress.wait_for(lambda: self.done >= count or not any(
                t.is_alive() for t in self.threads), timeout=HTTP_TIMEOUT_S * 5)

    def join(self) -> list[str]:
        for t in self.threads:
            t.join(timeout=HTTP_TIMEOUT_S * 5)
        assert not any(t.is_alive() for t in self.threads), "the load did not finish"
        return self.errors


def shuffled_work(names, rounds: int, seed: int) -> list[tuple[str, str]]:
    work = [(name, ("http", "grpc")[(i + r) % 2]) for r in range(rounds) for i, name in enumerate(names)]
    random.Random(seed).shuffle(work)
    return work


def stop_mid_run(checker, victim, work, threads: int = 4) -> list[str]:
    """Runs `work` from `threads` clients and sends SIGTERM to `victim` a quarter of
    the way through; the failed requests."""
    load = Load(checker, work, threads).start()
    load.wait_done(len(work) // 4)
    victim.proc.send_signal(signal.SIGTERM)
    assert victim.proc.wait(timeout=SHUTDOWN_TIMEOUT_S) == 0, victim.log_tail()
    return load.join()


def resident_on_at_most_two(replicas, names, fits: int) -> dict[str, list[int]]:
    """Per model, the replicas where it is resident now; asserts that none is resident
    on more than two, that no replica holds more than `fits` models or more accounted
    memory than its budget allows, and that each replica's loads less its evictions are
    what it holds."""
    where = holders(replicas, names)
    assert all(len(h) <= 2 for h in where.values()), {n: h for n, h in where.items() if len(h) > 2}
    for r in replicas:
        held = sum(r.index in h for h in where.values())
        assert held <= fits, (r.index, held)
        assert r.on_demand_loads() - r.evictions() == held, (r.index, r.on_demand_loads(), r.evictions(), held)
    return where


@pytest.mark.scale
@pytest.mark.timeout(900)
def test_300_models_over_three_replicas_each_fitting_a_third_and_two_stopping_mid_run(tmp_path):
    """300 models, each replica's --model-memory-budget (the chart's
    routing.modelMemoryBudget) fitting 100 of them; requests over all of them from 4
    threads (HTTP and gRPC): every request answered correctly, models evicted and
    reloaded as the budgets require; each model resident on at most two replicas (two
    only where bounded load handed it on). Then SIGTERM to a replica in the middle of a
    second run, with the drain delay that stands in for the chart's preStop pause: no
    request lost, and the models only that replica held load again on the others. Then
    SIGTERM to another one without a drain delay, refusing new requests before the
    router's health check notices, under HTTP requests from one client: HAProxy's
    retries and redispatches lose none. (One client: with bounded load, HAProxy 2.6
    sends a redispatched request back to the refusing replica when every other one is
    at its bound, and so can spend its retries there; under load the preStop pause is
    what keeps a stop lossless. A gRPC refusal is an UNAVAILABLE status inside an HTTP
    200 answer, which HAProxy cannot retry: for gRPC the pause is needed in any case.)"""
    repo = tmp_path / "models"
    names = write_models(repo, 300, 3)
    fits = 100
    budget = -(-fits * max(version_cost(repo / n) for n in names) // 1024) * 1024  # whole KiB for the chart
    # replica 0 refuses at once on SIGTERM; 1 and 2 drain for 1 s first
    with model_hash_cluster(repo, tmp_path, drain_delay_secs=(0, 1, 1),
                            memory_budget=f"{budget // 1024}K") as (router, replicas):
        checker = Checker(router, repo)
        errors = Load(checker, shuffled_work(names, 2, seed=1)).start().join()
        assert not errors, f"{len(errors)} failed: {errors[:10]}"
        where = resident_on_at_most_two(replicas, names, fits)
        assert all(r.resident_bytes() <= budget for r in replicas)
        assert all(any(r.index in h for h in where.values()) for r in replicas), "a replica got no model"
        print(f"\nresident per replica: {[sum(r.index in h for h in where.values()) for r in replicas]}, "
              f"on two replicas: {sum(len(h) == 2 for h in where.values())}, "
              f"evictions: {[r.evictions() for r in replicas]}")

        victim = max(replicas[1:], key=lambda r: sum(h == [r.index] for h in where.values()))
        survivors = [r for r in replicas if r is not victim]
        only_victim = [n for n, h in where.items() if h == [victim.index]]
        loads_before = {n: sum(r.on_demand_loads_of(n) for r in survivors) for n in only_victim}
        work = shuffled_work(names, 2, seed=2)
        errors = stop_mid_run(checker, victim, work)
        assert not errors, f"{len(errors)} of {len(work)} failed: {errors[:10]}"
        # Every model once more, now that the victim is gone.
        errors = Load(checker, shuffled_work(names, 1, seed=3)).start().join()
        assert not errors, f"{len(errors)} failed after the stop: {errors[:10]}"
        after = resident_on_at_most_two(survivors, names, fits)
        moved = [n for n in only_victim if sum(r.on_demand_loads_of(n) for r in survivors) > loads_before[n]]
        assert moved == only_victim, set(only_victim) - set(moved)
        print(f"{len(only_victim)} models moved from replica {victim.index}; resident per replica "
              f"after: {[sum(r.index in h for h in after.values()) for r in survivors]}; haproxy {router.retries()}")

        work = [(name, "http") for name, _ in shuffled_work(names, 1, seed=4)]
        errors = stop_mid_run(checker, replicas[0], work, threads=1)
        assert not errors, f"{len(errors)} of {len(work)} failed: {errors[:10]}"
        errors = Load(checker, shuffled_work(names, 1, seed=5)).start().join()
        assert not errors, f"{len(errors)} failed on the last replica: {errors[:10]}"
        last = survivors[1]
        resident_on_at_most_two([last], names, fits)
        assert last.resident_bytes() <= budget and last.evictions() > 0
        print(f"replica 0 stopped without a drain delay; haproxy {router.retries()}")
