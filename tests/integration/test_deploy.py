"""Deployment (issue 25): the offline chart/KServe checks, the chart agreeing with the
server's flags, the image's runtime tree serving from an isolated root, the thread
budget under a CPU quota, keys from files, KServe's single-model directory, and
readiness on SIGTERM."""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import requests

from deploy_helpers import (CHART, KUBE_VERSION, deploy_python, flag_values, helm, named, one,
                            ortserve_workload, render_chart)
from harness import (HTTP_TIMEOUT_S, REPO_ROOT, SHUTDOWN_TIMEOUT_S, STARTUP_TIMEOUT_S,
                     assert_matches, free_ports, make_test_models, metric, model_file,
                     ortserve_binary, sample_array)

CI_VALUES = REPO_ROOT / "deploy" / "helm" / "ci"
KSERVE_RUNTIME = REPO_ROOT / "deploy" / "kserve" / "clusterservingruntime.yaml"


def _json_infer(x: np.ndarray, name: str = "x") -> bytes:
    return json.dumps({"inputs": [{"name": name, "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()


def _help_flags() -> set[str]:
    binary = ortserve_binary()
    if not binary.exists():
        pytest.skip(f"ortserve binary not found at {binary}")
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"(--[a-z0-9-]+)", out))


def _wait_http(port: int, path: str, proc: subprocess.Popen, log: pathlib.Path,
               timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ortserve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"http://127.0.0.1:{port}{path}", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"{path} not 200 after {timeout_s}s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


# ------------------------------------------------------------ offline checks

@pytest.mark.timeout(300)
def test_offline_deploy_checks_pass(tmp_path):
    """helm lint/template over deploy/helm/ci/*.yaml, every manifest validated against
    the Kubernetes API schemas and the custom resources' schemas, checkov without a
    failed check, refused values refused (scripts/check_deploy.py)."""
    python = deploy_python()
    helm()
    out = subprocess.run([python, str(REPO_ROOT / "scripts" / "check_deploy.py"), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=280,
                         env={**os.environ, "DEPLOY_TOOLS": str(pathlib.Path(helm()).parents[1])})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAIL" not in out.stdout
    # Every values file was rendered and checked, and checkov ran.
    for values in CI_VALUES.glob("*.yaml"):
        assert f"ok   helm template -f {values.name}" in out.stdout, out.stdout
    assert re.search(r"ok   checkov: [1-9][0-9]* passed, 0 failed", out.stdout), out.stdout


@pytest.mark.parametrize("values", sorted(p.name for p in CI_VALUES.glob("*.yaml")))
def test_chart_flags_ports_and_grace_agree_with_the_server(values):
    """Every flag the chart passes exists in `ortserve --help`; the container, Service
    and probe ports are the ports the flags open; the probes use the health paths;
    the grace period outlasts the preStop pause plus --exit-timeout-secs."""
    docs = render_chart(CI_VALUES / values)
    pod = ortserve_workload(docs)["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "ortserve")
    flags = flag_values(container["args"])
    assert set(flags) <= _help_flags(), set(flags) - _help_flags()

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": int(flags["--http-port"][0]), "grpc": int(flags["--grpc-port"][0]),
                     "metrics": int(flags["--metrics-port"][0])}
    service = named(docs, "Service", "ortserve")
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {n: n for n in ports}
    grpc_port = next(p for p in service["spec"]["ports"] if p["name"] == "grpc")
    assert grpc_port["appProtocol"] in ("kubernetes.io/h2c", "grpc")

    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["startupProbe"]["httpGet"]["path"] == "/v2/health/live"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] == "http"
        scheme = container[probe]["httpGet"]["scheme"]
        assert scheme == ("HTTPS" if flags.get("--http-use-ssl") == ["true"] else "HTTP")

    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    exit_timeout = int(flags["--exit-timeout-secs"][0])
    # + the server's 2 s write grace after the drain, before the kubelet's SIGKILL
    assert pod["terminationGracePeriodSeconds"] > pre_stop + exit_timeout + 2
    # The thread budget is the CPU limit (or request), rounded down.
    resources = container["resources"]
    cpu = (resources.get("limits") or {}).get("cpu") or (resources.get("requests") or {}).get("cpu")
    millis = int(cpu[:-1]) if str(cpu).endswith("m") else int(float(cpu) * 1000)
    assert flags["--thread-budget"] == [str(max(1, millis // 1000))]
    # Secrets travel as mounted files, never as values on the command line.
    for a in container["args"]:
        assert not re.search(r"--(http|grpc)-restricted-(api|protocol)=", a), a
    assert not container.get("env"), "no secret material in the environment"


def test_chart_refuses_values_that_break_probes_or_draining():
    for refused in sorted((CI_VALUES / "refused").glob("*.yaml")):
        out = subprocess.run([helm(), "template", "ortserve", str(CHART), "--kube-version", KUBE_VERSION,
                              "-f", str(refused)], capture_output=True, text=True)
        assert out.returncode != 0, f"{refused.name} rendered"


def test_chart_args_serve_and_answer_the_probes(tmp_path):
    """The default values' container args, started as they are (ports and the
    repository path aside), serve, and the probes' paths answer 200."""
    container = one(render_chart(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32"])
    http_port, grpc_port, metrics_port = free_ports(3)
    replace = {"--model-repository": str(repo), "--http-port": str(http_port), "--grpc-port": str(grpc_port),
               "--metrics-port": str(metrics_port), "--model-cache-dir": str(tmp_path / "cache")}
    args = [f"{name}={replace.get(name, value)}" for name, value in
            (a.split("=", 1) for a in container["args"])]
    log = tmp_path / "ortserve.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(ortserve_binary()), *args], stdout=f, stderr=subprocess.STDOUT)
    try:
        _wait_http(http_port, container["startupProbe"]["httpGet"]["path"], proc, log)
        for probe in ("livenessProbe", "readinessProbe"):
            r = requests.get(f"http://127.0.0.1:{http_port}{container[probe]['httpGet']['path']}", timeout=5)
            assert r.status_code == 200, probe
        r = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
        assert r.status_code == 200 and "ortserve_pending_requests" in r.text
    finally:
        assert _stop(proc) == 0, log.read_text()[-3000:]


def test_kserve_runtime_flags_and_ports_agree_with_the_server():
    import yaml
    runtime = yaml.safe_load(KSERVE_RUNTIME.read_text())
    spec = runtime["spec"]
    assert {"name": "onnx"}.items() <= spec["supportedModelFormats"][0].items()
    assert set(spec["protocolVersions"]) == {"v2", "grpc-v2"}
    container = spec["containers"][0]
    flags = flag_values(container["args"])
    assert set(flags) <= _help_flags()
    assert flags["--model-repository"] == ["/mnt/models"]
    assert flags["--single-model-name"] == ["{{.Name}}"]
    http_port = int(flags["--http-port"][0])
    assert container["ports"][0]["containerPort"] == http_port
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": http_port}
    assert container["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": http_port}
    # KServe's pods keep Kubernetes' default grace period of 30 s: the drain
    # delay, the exit timeout and the 2 s write grace must fit in it.
    assert int(flags["--drain-delay-secs"][0]) + int(flags["--exit-timeout-secs"][0]) + 2 < 30


# ------------------------------------------------------------ the image's tree

def _isolation_prefix() -> list[str] | None:
    """unshare (a private mount namespace, plus a user namespace when not root)."""
    if not shutil.which("unshare"):
        return None
    if os.geteuid() == 0:
        return ["unshare", "--mount", "--propagation", "private"]
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return ["unshare", "--user", "--map-root-user", "--mount"] if probe.returncode == 0 else None


@pytest.mark.timeout(180)
def test_runtime_tree_serves_a_model_from_an_isolated_root(tmp_path, reference):
    """deploy/assemble_runtime_tree.sh builds what the Dockerfile's runtime stage holds;
    ortserve runs from it as the image would: chroot into the tree (nothing of the
    build machine's file system visible), as uid 65532 when root, /proc /sys /dev
    mounted as a container runtime does, the repository mounted read-only at /models."""
    prefix = _isolation_prefix()
    if prefix is None:
        pytest.skip("neither root nor unprivileged user namespaces: no isolated root here")
    tree = tmp_path / "rootfs"
    out = subprocess.run([str(REPO_ROOT / "deploy" / "assemble_runtime_tree.sh"), str(ortserve_binary()),
                          str(tree)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    files = {str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file()}
    assert "usr/local/bin/ortserve" in files and "etc/ssl/certs/ca-certificates.crt" in files
    assert any(f.startswith("opt/onnxruntime/lib/libonnxruntime.so") for f in files)
    assert not any(f.startswith(("bin/", "usr/bin/", "sbin/")) for f in files), "no shell or tools"

    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32", "slow"])
    http_port, grpc_port, metrics_port = free_ports(3)
    user = ["--userspec=65532:65532"] if os.geteuid() == 0 else []
    script = (f"mount --rbind /proc {tree}/proc && mount --rbind /sys {tree}/sys && "
              f"mount --rbind /dev {tree}/dev && mount --bind {repo} {tree}/models && "
              f"mount -o remount,bind,ro {tree}/models && "
              f"exec env -i LD_LIBRARY_PATH=/opt/onnxruntime/lib {shutil.which('chroot')} {' '.join(user)} {tree} "
              # the image's ENTRYPOINT and CMD, then the ports this test chose
              f"/usr/local/bin/ortserve --model-repository=/models --http-port {http_port} --grpc-port {grpc_port} "
              f"--metrics-port {metrics_port} --exit-timeout-secs 5")
    log = tmp_path / "ortserve.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([*prefix, "sh", "-c", script], stdout=f, stderr=subprocess.STDOUT)
    try:
        _wait_http(http_port, "/v2/health/ready", proc, log)
        x = sample_array("FP32", (2, 16), seed=25)
        r = requests.post(f"http://127.0.0.1:{http_port}/v2/models/slow/infer", data=_json_infer(x),
                          timeout=HTTP_TIMEOUT_S)
        assert r.status_code == 200, r.text
        out = r.json()["outputs"][0]
        got = np.array(out["data"], np.float32).reshape(out["shape"])
        assert_matches(got, reference.run(model_file(repo, "slow"), {"x": x})["y"])
    finally:
        rc = _stop(proc)
    assert rc == 0, log.read_text()[-3000:]


# ------------------------------------------------------------ server behaviour

def _make_cpu_quota_cgroup(name: str) -> tuple[pathlib.Path, str] | None:
    """A child cgroup limited to 1 CPU (100000 us per 100000 us): cgroup v2 cpu.max
    where the cpu controller is on the unified hierarchy, else cgroup v1's cpu
    controller. None where this process may not create one."""
    v2 = pathlib.Path("/sys/fs/cgroup")
    if "cpu" in (v2 / "cgroup.controllers").read_text().split() if (v2 / "cgroup.controllers").exists() else False:
        with contextlib.suppress(OSError):
            (v2 / "cgroup.subtree_control").write_text("+cpu")
            d = v2 / name
            d.mkdir(exist_ok=True)
            (d / "cpu.max").write_text("100000 100000")
            return d, "cgroup v2 cpu.max"
    v1 = pathlib.Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").exists():
        with contextlib.suppress(OSError):
            d = v1 / name
            d.mkdir(exist_ok=True)
            (d / "cpu.cfs_period_us").write_text("100000")
            (d / "cpu.cfs_quota_us").write_text("100000")
            return d, "cgroup v1 cpu.cfs_quota_us"
    return None


def test_thread_budget_follows_a_cgroup_cpu_quota_of_one(tmp_path):
    """Started in a cgroup with a CPU quota of 1, ortserve plans for 1 CPU and says why."""
    made = _make_cpu_quota_cgroup(f"ortserve-test-{os.getpid()}")
    if made is None:
        pytest.skip("cannot create a CPU-limited cgroup here (needs root and a writable cgroup fs); "
                    "the detection is unit-tested on written files (app_cpu_budget_test)")
    cgroup, kind = made
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32"])
    http_port, grpc_port, metrics_port = free_ports(3)
    log = tmp_path / "ortserve.log"

    def enter_cgroup():
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    try:
        with open(log, "wb") as f:
            proc = subprocess.Popen([str(ortserve_binary()), "--model-repository", str(repo),
                                     "--http-port", str(http_port), "--grpc-port", str(grpc_port),
                                     "--metrics-port", str(metrics_port)],
                                    stdout=f, stderr=subprocess.STDOUT, preexec_fn=enter_cgroup)
        try:
            _wait_http(http_port, "/v2/health/ready", proc, log)
        finally:
            assert _stop(proc) == 0
        text = log.read_text()
        assert re.search(rf"thread budget: 1 CPUs \(from {kind}", text), text[:2000]
        assert "for a budget of 1 core(s)" in text, text[:2000]
    finally:
        with contextlib.suppress(OSError):
            cgroup.rmdir()


def test_restricted_api_key_from_a_file_is_enforced_and_not_in_the_process_list(launch, tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text("file-s3cret\n")
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32"])
    srv = launch(repo, extra_args=("--http-restricted-api-file", f"inference:x-api-key={key_file}"))
    srv.wait_models_ready(["add_sub_fp32"])
    body = {"inputs": [{"name": n, "shape": [1, 16], "datatype": "FP32", "data": list(range(16))}
                       for n in ("INPUT0", "INPUT1")]}
    assert srv.infer_raw("add_sub_fp32", body).status_code == 401
    assert srv.infer_raw("add_sub_fp32", body, headers={"x-api-key": "wrong"}).status_code == 403
    assert srv.infer_raw("add_sub_fp32", body, headers={"x-api-key": "file-s3cret"}).status_code == 200
    cmdline = pathlib.Path(f"/proc/{srv.proc.pid}/cmdline").read_bytes()
    assert b"file-s3cret" not in cmdline and str(key_file).encode() in cmdline


def test_missing_key_file_stops_the_server_naming_it(tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32"])
    out = subprocess.run([str(ortserve_binary()), "--model-repository", str(repo), "--http-port", "0",
                          "--grpc-port", "0", "--metrics-port", "0",
                          "--http-restricted-api-file", f"inference:k={tmp_path}/absent"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert f"cannot read the key file '{tmp_path}/absent'" in out.stdout + out.stderr


def test_single_model_directory_is_served_under_the_given_name(launch, tmp_path, reference):
    """KServe's /mnt/models holding one model's files: model.onnx at the top.
    The server links it as a repository in its temp directory, and removes
    the links when it exits."""
    built = make_test_models.build_test_repository(tmp_path / "built", ["slow"])
    mnt = tmp_path / "mnt_models"
    mnt.mkdir()
    shutil.copy(model_file(built, "slow"), mnt / "model.onnx")
    temp = tmp_path / "temp"
    temp.mkdir()
    srv = launch(mnt, extra_args=("--single-model-name", "my-isvc"), env={"TMPDIR": str(temp)})
    srv.wait_models_ready(["my-isvc"])
    links = temp / f"ortserve-single-model-{srv.proc.pid}"
    assert (links / "my-isvc" / "1" / "model.onnx").is_symlink()
    x = sample_array("FP32", (1, 16), seed=7)
    r = srv.infer_raw("my-isvc", _json_infer(x), headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert_matches(np.array(out["data"], np.float32).reshape(out["shape"]),
                   reference.run(mnt / "model.onnx", {"x": x})["y"])
    assert srv.stop() == 0
    assert not links.exists()
    assert (mnt / "model.onnx").is_file()  # the links went, not what they pointed to


def test_triton_repository_ignores_the_single_model_name(launch, tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32"])
    srv = launch(repo, extra_args=("--single-model-name", "my-isvc"))
    srv.wait_models_ready(["add_sub_fp32"])
    assert srv.get("/v2/models/my-isvc").status_code == 404


@pytest.mark.timeout(120)
def test_readiness_turns_false_at_once_on_sigterm_while_requests_drain(launch, tmp_path):
    """On SIGTERM the server is not ready at once (a keep-alive connection opened
    before asks), while the requests it holds still complete with 200."""
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["slow"])
    srv = launch(repo, exit_timeout_secs=60)
    srv.wait_models_ready(["slow"])
    probe = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=30)
    probe.request("GET", "/v2/health/ready")
    first = probe.getresponse()
    first.read()
    assert first.status == 200

    results: list = []
    x = sample_array("FP32", (1, 16), seed=3)

    def call():
        try:
            r = requests.post(f"{srv.base}/v2/models/slow/infer", data=_json_infer(x), timeout=120)
            results.append((r.status_code, r.text))
        except requests.RequestException as e:
            results.append((None, repr(e)))
    callers = [threading.Thread(target=call) for _ in range(3)]
    for t in callers:
        t.start()
    # SIGTERM once a batch runs (it takes ~1 s).
    deadline = time.monotonic() + 60
    while metric(srv, "ortserve_busy_instances", model="slow", version="1") < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    srv.proc.send_signal(signal.SIGTERM)
    ready = 200
    deadline = time.monotonic() + 30
    while ready == 200 and time.monotonic() < deadline:
        probe.request("GET", "/v2/health/ready")
        resp = probe.getresponse()
        resp.read()
        ready = resp.status
    served_before_unready = sum(1 for status, _ in results if status == 200)
    for t in callers:
        t.join(timeout=120)
    assert ready != 200, "still ready after SIGTERM"
    served = [r for r in results if r[0] == 200]
    # A request still on its way when SIGTERM came is refused: 503 at
    # admission, or the port is closed (refused, or reset while its connection
    # waited in the closed listener's backlog); every admitted one is computed.
    refused = [r for r in results if (r[0] == 503 and "not accepting inference requests" in r[1])
               or (r[0] is None and ("Connection refused" in r[1] or "Connection reset by peer" in r[1]))]
    assert len(served) + len(refused) == 3, results
    assert srv.log_text().count("for model 'slow' admitted") == len(served), (srv.log_text(), results)
    assert len(served) > served_before_unready, "no request was still draining when readiness turned false"
    assert srv.proc.wait(timeout=SHUTDOWN_TIMEOUT_S) == 0


def test_drain_delay_serves_while_not_ready_then_exits_zero(launch, tmp_path):
    """--drain-delay-secs: after SIGTERM, not ready at once, yet a request sent then
    is still served (a load balancer that has not polled yet loses nothing)."""
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32"])
    srv = launch(repo, extra_args=("--drain-delay-secs", "5"))
    srv.wait_models_ready(["add_sub_fp32"])
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=30)
    body = json.dumps({"inputs": [{"name": n, "shape": [1, 16], "datatype": "FP32", "data": list(range(16))}
                                  for n in ("INPUT0", "INPUT1")]})
    srv.proc.send_signal(signal.SIGTERM)
    status = 200
    deadline = time.monotonic() + 30
    while status == 200 and time.monotonic() < deadline:
        conn.request("GET", "/v2/health/ready")
        resp = conn.getresponse()
        resp.read()
        status = resp.status
    assert status == 400
    conn.request("POST", "/v2/models/add_sub_fp32/infer", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    assert srv.proc.wait(timeout=SHUTDOWN_TIMEOUT_S) == 0
    assert "--drain-delay-secs" in srv.log_text()
