"""The contenders as servers: ortserve, the FastAPI baseline, the no-op HTTP floor and nginx's
static answer, each started on free 127.0.0.1 ports and waited for with bounded waits; loopback
HTTP helpers; and the output check that keeps a contender answering wrongly from being measured."""
import json
import shutil
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench_common import BASELINES, LOGS, VENV_PY, WORK
from bench_procs import Procs, free_port, free_ports, run_bounded, with_cpus


# --------------------------------------------------------------------------
# HTTP helpers (loopback only)

def http_get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def http_post(url, body, timeout=30.0):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def wait_ready(base, proc, models, timeout_s):
    """Polls /v2/health/ready, then each model's ready route. Returns (ok, ready_models)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False, []
        try:
            if http_get(base + "/v2/health/ready", timeout=1.0)[0] == 200:
                break
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    else:
        return False, []
    ready = []
    for m in models:
        while time.monotonic() < deadline:
            try:
                if http_get(f"{base}/v2/models/{m}/ready", timeout=1.0)[0] == 200:
                    ready.append(m)
                    break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
    return True, ready


# --------------------------------------------------------------------------
# Output checks: a contender that answers wrongly is not measured

def reference_outputs(spec):
    import numpy as np
    import onnxruntime as ort
    body = json.loads(Path(spec["request_json"]).read_text())
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(spec["model_path"], so, providers=["CPUExecutionProvider"])
    feeds = {t["name"]: np.asarray(t["data"], np.float32).reshape(t["shape"]) for t in body["inputs"]}
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def check_outputs(base, model, spec, ref):
    import numpy as np
    try:
        status, body = http_post(f"{base}/v2/models/{model}/infer", Path(spec["request_json"]).read_bytes())
        resp = json.loads(body)
        for o in resp["outputs"]:
            got = np.asarray(o["data"], np.float32).reshape(o["shape"])
            if not np.allclose(got, ref[o["name"]], rtol=1e-3, atol=1e-4):
                return f"output {o['name']} differs from onnxruntime (max abs diff {np.abs(got - ref[o['name']]).max():.3g})"
        return None
    except Exception as e:
        return f"infer failed: {e}"


def floor_response(model, spec, ref):
    """The KServe v2 JSON answer to `model`'s request: the reference outputs, each float written as
    the shortest text of its float32 value (as ortserve writes it), so the floor sends the bytes a
    server would."""
    import numpy as np
    types = {o["name"]: o["datatype"] for o in spec["outputs"]}
    outs = [f'{{"name":"{name}","datatype":"{types[name]}","shape":{json.dumps(list(v.shape))},'
            f'"data":[{",".join(str(np.float32(x)) for x in v.ravel())}]}}' for name, v in ref.items()]
    return f'{{"model_name":"{model}","model_version":"1","outputs":[{",".join(outs)}]}}'


def tiny_static_body(spec, ref):
    """bench/work/static_tiny.json: the tiny model's reference response, the body the fixed-answer
    servers (the floor, nginx) send."""
    body = WORK / "static_tiny.json"
    body.write_text(floor_response("tiny", spec, ref))
    return body


# --------------------------------------------------------------------------
# Servers

class Server:
    name = ""

    def __init__(self):
        self.proc = None
        self.port = None
        self.grpc_port = None

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        Procs.stop(self.proc)
        self.proc = None


class OrtServe(Server):
    name = "ortserve"

    def __init__(self, binary, repo, budget, http_threads, cpus, log_name="ortserve.log", env_extra=None):
        super().__init__()
        self.binary, self.repo, self.budget, self.http_threads, self.cpus = binary, repo, budget, http_threads, cpus
        self.log_name = log_name
        self.env_extra = env_extra  # e.g. LD_PRELOAD of libpython for the onnxruntime-extensions op library
        self.metrics_port = None

    def start(self):
        _rc, help_text = run_bounded([self.binary, "--help"], 20, record=False)
        # Three distinct ports, taken together (one at a time, the kernel may
        # hand the same free port out twice).
        self.port, grpc_port, metrics_port = free_ports(3)
        cmd = [self.binary, "--model-repository", self.repo, "--http-port", str(self.port)]
        if "--grpc-port" in help_text:
            self.grpc_port = grpc_port
            cmd += ["--grpc-port", str(self.grpc_port)]
        if "--metrics-port" in help_text:  # never the default 8002: another server may hold it
            self.metrics_port = metrics_port
            cmd += ["--metrics-port", str(self.metrics_port)]
        if "--thread-budget" in help_text:
            cmd += ["--thread-budget", str(self.budget)]
        if self.http_threads and "--http-thread-count" in help_text:
            cmd += ["--http-thread-count", str(self.http_threads)]
        if "--log-verbose" in help_text:
            cmd += ["--log-verbose", "0"]
        self.proc = Procs.start(with_cpus(cmd, self.cpus), LOGS / self.log_name, self.env_extra)

    def grpc_ready(self):
        """The gRPC hook: True once ortserve's gRPC front end answers ServerReady."""
        if not self.grpc_port:
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=1.0):
                pass
            import tritonclient.grpc as grpcclient
            return bool(grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc_port}").is_server_ready(
                client_timeout=3.0))
        except Exception:
            return False


class FastApiBaseline(Server):
    name = "fastapi"

    def __init__(self, repo, workers, intra_threads, cpus, app=None, log_name="fastapi.log"):
        super().__init__()
        self.repo, self.workers, self.intra_threads, self.cpus = repo, workers, intra_threads, cpus
        self.app, self.log_name = app, log_name  # app: another bench/baselines/ app (baseline_fastapi.py --app)

    def start(self):
        self.port = free_port()
        cmd = [VENV_PY, BASELINES / "baseline_fastapi.py", "--model-repository", self.repo,
               "--port", str(self.port), "--workers", str(self.workers),
               "--intra-op-threads", str(self.intra_threads)] + (["--app", self.app] if self.app else [])
        self.proc = Procs.start(with_cpus(cmd, self.cpus), LOGS / self.log_name)


class HttpFloor(Server):
    name = "http_floor"

    def __init__(self, binary, body_file, cpus):
        super().__init__()
        self.binary, self.body_file, self.cpus = binary, body_file, cpus

    def start(self):
        self.port = free_port()
        cmd = [self.binary, "--port", str(self.port), "--body", self.body_file]
        self.proc = Procs.start(with_cpus(cmd, self.cpus), LOGS / "http_floor.log")


def start_checked(server, spec, ref, timeout_s):
    """Starts a server of the tiny model (ortserve or a fixed-answer one) and checks its answer to the
    tiny request against the reference; None when it answers so, else why not (the server stopped)."""
    server.start()
    ok, _ = wait_ready(server.base, server.proc, ["tiny"], timeout_s)
    err = check_outputs(server.base, "tiny", spec, ref) if ok else "not ready"
    if err:
        server.stop()
    return err


def nginx_binary():
    """nginx's program (Debian puts it in /usr/sbin, often off a user's PATH), or None."""
    found = shutil.which("nginx") or "/usr/sbin/nginx"
    return Path(found) if Path(found).exists() else None


class NginxStatic(Server):
    """nginx answering every request with one fixed body (`return 200`), in a prefix of its own
    under bench/work/: a production HTTP server doing the least a server can on the tiny
    model's load, with `workers` worker processes (the bench gives it the thread budget, as every
    contender), `reuseport` (the kernel spreads connections over the workers; without it one worker
    may take most of wrk's connections), no access log and keep-alive without a request limit
    (nginx's default closes a connection every 1,000 requests, which wrk would pay for and ortserve
    does not)."""
    name = "nginx"

    def __init__(self, binary, body_file, workers, cpus, prefix_name="nginx"):
        super().__init__()
        self.binary, self.body_file, self.workers, self.cpus = binary, body_file, workers, cpus
        self.prefix_name = prefix_name  # bench/work/<prefix_name>: one per nginx running at once

    def start(self):
        self.port = free_port()
        prefix = WORK / self.prefix_name
        prefix.mkdir(parents=True, exist_ok=True)
        conf = prefix / "nginx.conf"
        conf.write_text(nginx_conf(Path(self.body_file).read_text(), self.port, self.workers, prefix))
        cmd = [self.binary, "-p", prefix, "-c", conf, "-e", prefix / "error.log"]
        self.proc = Procs.start(with_cpus(cmd, self.cpus), LOGS / f"{self.prefix_name}.log")


def nginx_conf(body, port, workers, prefix):
    """The configuration of NginxStatic; `body` goes into a single-quoted nginx string, so it may
    not hold a quote, a backslash or a variable's `$`."""
    if any(c in body for c in "'\\$"):
        raise ValueError("nginx's static body may not contain ', \\ or $")
    temp = "\n".join(f"  {k}_temp_path {prefix / k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""daemon off;
worker_processes {workers};
pid {prefix / 'nginx.pid'};
error_log {prefix / 'error.log'} warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  client_body_buffer_size 1m;
{temp}
  server {{
    listen 127.0.0.1:{port} reuseport;
    location / {{ default_type application/json; return 200 '{body}'; }}
  }}
}}
"""
