#!/usr/bin/env python3
"""ortserve benchmark orchestrator: ortserve vs FastAPI+onnxruntime vs in-process ORT.

    .venv/bin/python bench/run_bench.py            # full sweep and 5 paired rounds (about 35 min on 2 cores)
    .venv/bin/python bench/run_bench.py --quick    # smoke run, a few seconds per point
    .venv/bin/python bench/run_bench.py --models tiny,mlp --concurrency 1,8,32

Run bench/make_bench_models.py first (`make bench` does both). Every server is
started here on free 127.0.0.1 ports, waited for with bounded waits, driven by
time-bounded loads, and killed at the end, on error and on Ctrl-C too.

Contenders, same models, same machine, one run:
  ortserve   (perf_analyzer, binary tensors, -i http)   and JSON via wrk (same bytes)
             gRPC hook: perf_analyzer -i grpc, run only when the gRPC port answers
             binary tensors via wrk too: the lightest client, so on shared cores
             the figure is the server's (perf_analyzer's own CPU is recorded)
  fastapi    bench/baseline_fastapi.py, N workers x 1 intra-op thread = thread budget,
             driven by the same two loads
  inprocess  bench/inprocess_ort.py, back-to-back runs at batch 1 and at the batch
             sizes ortserve's batcher chose (from its statistics), on the server's
             own runtime (ortserve_inprocess_limit: same ORT, same session options)
  http_floor ortserve_http_floor (bench/http_floor.cpp), a no-op HTTP server that
             answers every request with the tiny model's reference response:
             the wrk JSON load on tiny only, the most any server could reach
             there with the load generator on the same machine

Then paired rounds (--target-rounds): each target's pair measured again back to
back, both servers up, order flipping per round; verdicts use the median round.

Outputs: bench/RESULTS.md (targets, headline table, details, every command),
bench/results/results.json (raw), bench/results/*.png (plots). Server logs go to
bench/work/logs/. Timing is reported, never asserted.
"""
import argparse
import atexit
import csv
import datetime as dt
import io
import json
import os
import platform
import re
import resource
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
WORK = BENCH / "work"
RESULTS = BENCH / "results"
LOGS = WORK / "logs"
VENV_PY = ROOT / ".venv" / "bin" / "python"
PERF_ANALYZER = ROOT / ".venv" / "bin" / "perf_analyzer"
CUDART_LIB = ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "nvidia" / "cuda_runtime" / "lib"
CLK_TCK = os.sysconf("SC_CLK_TCK")

ALL_MODELS = ["tiny", "mlp", "mlp_nobatch", "cnn", "ocr_cls"]
FULL_CONCURRENCY = [1, 2, 4, 8, 16, 32, 64]
QUICK_CONCURRENCY = [1, 4, 32]

COMMANDS: list = []   # every load/server/tool command line, for RESULTS.md
NOTES: list = []      # skips and errors, for RESULTS.md


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def note(msg):
    log(msg)
    if msg not in NOTES:  # said once in the report however often it happens
        NOTES.append(msg)


def record_cmd(cmd, env_extra=None):
    prefix = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in (env_extra or {}).items())
    line = (prefix + " " if prefix else "") + " ".join(shlex.quote(str(c)) for c in cmd)
    line = line.replace(str(ROOT) + "/", "")
    if line not in COMMANDS:
        COMMANDS.append(line)


# --------------------------------------------------------------------------
# processes: every child in its own session, so its whole group can be killed

class Procs:
    live: dict = {}

    @classmethod
    def start(cls, cmd, log_path, env_extra=None):
        env = dict(os.environ, **(env_extra or {}))
        record_cmd(cmd, env_extra)
        f = open(log_path, "wb")
        p = subprocess.Popen([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True, cwd=ROOT)
        cls.live[p.pid] = p
        return p

    @classmethod
    def stop(cls, p, grace_s=10.0):
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=grace_s)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        # The group may outlive its leader (uvicorn workers): make sure it is gone.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        cls.live.pop(p.pid, None)

    @classmethod
    def stop_all(cls):
        for p in list(cls.live.values()):
            cls.stop(p, grace_s=3.0)


def run_load(cmd, timeout_s, env_extra=None):
    """run_bounded for a load generator, plus the CPU it used (% of one core over its whole run,
    warm-up included): on shared cores that CPU is taken from the server under test."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    rc, out = run_bounded(cmd, timeout_s, env_extra)
    r1, t1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return rc, out, round(100.0 * cpu / max(t1 - t0, 1e-6), 1)


def run_bounded(cmd, timeout_s, env_extra=None, record=True):
    """Runs a load tool with a hard time bound. Returns (rc, stdout+stderr text)."""
    env = dict(os.environ, **(env_extra or {}))
    if record:
        record_cmd(cmd, env_extra)
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=env, start_new_session=True, cwd=ROOT)
    Procs.live[p.pid] = p
    try:
        out, _ = p.communicate(timeout=timeout_s)
        return p.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        Procs.stop(p, grace_s=1.0)
        out = p.stdout.read() if p.stdout else b""
        return 124, out.decode(errors="replace") + f"\n[killed after {timeout_s:.0f} s]"
    finally:
        Procs.live.pop(p.pid, None)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_cpus(cmd, cpus):
    return (["taskset", "-c", cpus] + cmd) if cpus else cmd


# --------------------------------------------------------------------------
# CPU accounting over a process tree (/proc/<pid>/stat utime+stime)

def _children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree_cpu_seconds(root_pid):
    kids, total, todo = _children_map(), 0, [root_pid]
    while todo:
        pid = todo.pop()
        try:
            f = Path(f"/proc/{pid}/stat").read_text()
            fields = f[f.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
        todo += kids.get(pid, [])
    return total / CLK_TCK


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


def get_stats(base, model):
    """Triton statistics for one model: counts and per-batch-size executions."""
    try:
        _, body = http_get(f"{base}/v2/models/{model}/stats", timeout=2.0)
        ms = json.loads(body)["model_stats"][0]
    except Exception:  # stats are a bonus; a server without them still gets measured
        return None
    inf = ms.get("inference_stats", {})
    g = lambda k: (int(inf.get(k, {}).get("count", 0)), int(inf.get(k, {}).get("ns", 0)))
    batches = {}
    for b in ms.get("batch_stats", []) or []:
        ci = b.get("compute_infer", {})
        batches[int(b["batch_size"])] = (int(ci.get("count", 0)), int(ci.get("ns", 0)))
    return {"inference_count": int(ms.get("inference_count", 0)),
            "execution_count": int(ms.get("execution_count", 0)),
            "success": g("success"), "queue": g("queue"), "compute_infer": g("compute_infer"),
            "batches": batches}


def scrape_metrics(metrics_port, model, histograms):
    """One model's series from ortserve's /metrics: {"outcomes": {outcome: n},
    histogram name: {"buckets": {le: n}, "sum": x, "count": n}} for each of `histograms`."""
    _, body = http_get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5.0)
    out = {"outcomes": {}}
    for line in body.decode().splitlines():
        if f'model="{model}"' not in line:
            continue
        name, _, rest = line.partition("{")
        labels, _, value = rest.rpartition("}")
        value = float(value)
        if name == "ortserve_requests_total":
            m = re.search(r'outcome="([a-z_]+)"', labels)
            if m:
                out["outcomes"][m.group(1)] = out["outcomes"].get(m.group(1), 0) + int(value)
            continue
        for h in histograms:
            if name.startswith(h):
                d = out.setdefault(h, {"buckets": {}, "sum": 0.0, "count": 0})
                if name == h + "_bucket":
                    le = re.search(r'le="([^"]+)"', labels).group(1)
                    d["buckets"][le] = int(value)
                elif name == h + "_sum":
                    d["sum"] = value
                elif name == h + "_count":
                    d["count"] = int(value)
    return out


def histogram_delta(m0, m1, name):
    """Count, mean and bucket-bound quantiles of a histogram over an interval
    (a quantile is the upper bound of the bucket it falls in)."""
    h0, h1 = m0.get(name, {"buckets": {}, "sum": 0, "count": 0}), m1.get(name)
    if not h1:
        return None
    n = h1["count"] - h0["count"]
    if n <= 0:
        return {"count": 0}
    cum = sorted(((float(le), c - h0["buckets"].get(le, 0)) for le, c in h1["buckets"].items()))
    p50_le, _ = bucket_quantile(cum, n, 0.5)
    p99_le, p99_est = bucket_quantile(cum, n, 0.99)
    return {"count": n, "mean": (h1["sum"] - h0["sum"]) / n, "p50_le": p50_le, "p99_le": p99_le,
            "p99_est": p99_est}


def bucket_quantile(cum, n, x):
    """The upper bound of the bucket quantile x falls in, and the quantile estimated as Prometheus'
    histogram_quantile does: linear within that bucket (None in the +Inf bucket). cum: sorted
    (upper bound, cumulative count) of n observations."""
    lower, below = 0.0, 0
    for le, c in cum:
        if c >= x * n:
            if le == float("inf"):
                return le, None
            return le, lower + (le - lower) * ((x * n - below) / (c - below) if c > below else 1.0)
        lower, below = le, c
    return None, None


REQUEST_DURATION = "ortserve_request_duration_seconds"


def server_metrics(server, model):
    """ortserve's request-duration histogram for one load point, or None
    (no metrics port: not ortserve; a failed scrape costs only this figure)."""
    if not getattr(server, "metrics_port", None):
        return None
    try:
        return scrape_metrics(server.metrics_port, model, (REQUEST_DURATION,))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def stats_delta(s0, s1):
    if not s0 or not s1:
        return None
    batches = {}
    for bs, (c, ns) in s1["batches"].items():
        c0, ns0 = s0["batches"].get(bs, (0, 0))
        if c - c0 > 0:
            batches[bs] = {"executions": c - c0, "compute_infer_us": round((ns - ns0) / 1e3 / (c - c0), 1)}
    d = lambda k: (s1[k][0] - s0[k][0], s1[k][1] - s0[k][1])
    execs = s1["execution_count"] - s0["execution_count"]
    infs = s1["inference_count"] - s0["inference_count"]
    q, ci = d("queue"), d("compute_infer")
    return {"inferences": infs, "executions": execs,
            "avg_batch": round(infs / execs, 2) if execs else None,
            "avg_queue_us": round(q[1] / 1e3 / q[0], 1) if q[0] else None,
            # Triton's compute_infer adds the batch's duration once per
            # request in it: ns / count is the duration of one execution.
            "avg_compute_infer_us_per_execution": round(ci[1] / 1e3 / ci[0], 1) if ci[0] else None,
            "batch_sizes": dict(sorted(batches.items()))}


# --------------------------------------------------------------------------
# Load generators

def pa_available():
    if not PERF_ANALYZER.exists():
        return False
    rc, _ = run_bounded([PERF_ANALYZER, "--version"], 20, pa_env(), record=False)
    return rc == 0


def pa_env():
    return {"LD_LIBRARY_PATH": ":".join(p for p in [os.environ.get("LD_LIBRARY_PATH", ""), str(CUDART_LIB)] if p)}


def run_perf_analyzer(url, model, spec, mode, value, window_ms, protocol="http", cpus=None, json_tensors=False):
    """One perf_analyzer point. mode: 'concurrency' or 'rate'. Returns a dict or None."""
    csv_path = WORK / "pa_last.csv"
    if csv_path.exists():
        csv_path.unlink()
    cmd = [PERF_ANALYZER, "-m", model, "-x", "1", "-u", url, "-i", protocol,
           "-p", str(window_ms), "-r", "3", "-s", "1000",   # 3 windows, always accepted: bounded time
           "--input-data", spec["request_pa"], "-f", csv_path]
    if mode == "concurrency":
        # Async with 2 client threads: in sync mode perf_analyzer runs one
        # busy-polling thread per in-flight request, and 32 of them on a
        # 2-core machine starve the server under test (seen here: runs that
        # never finished). Still a closed loop of `value` requests in flight.
        cmd += ["--concurrency-range", f"{value}:{value}", "--async", "--max-threads", "2"]
    else:
        cmd += ["--request-rate-range", f"{value:.1f}:{value:.1f}", "--request-distribution", "poisson",
                "--max-threads", "64"]
    if json_tensors:
        cmd += ["--input-tensor-format", "json", "--output-tensor-format", "json"]
    timeout = 3 * window_ms / 1000 * 3 + 60
    rc, out, client_cpu = run_load(with_cpus(cmd, cpus), timeout, pa_env())
    if rc != 0 or not csv_path.exists():
        tail = " | ".join(out.strip().splitlines()[-3:])
        note(f"perf_analyzer {protocol} {model} {mode}={value} failed (rc {rc}): {tail}")
        return None
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    if not rows:
        return None
    r = rows[0]
    f = lambda k: float(r[k]) if r.get(k) not in (None, "") else None
    return {"throughput": f("Inferences/Second"),
            "p50_us": f("p50 latency"), "p90_us": f("p90 latency"),
            "p95_us": f("p95 latency"), "p99_us": f("p99 latency"),
            "offered_rate": value if mode == "rate" else None, "client_cpu_pct": client_cpu}


def run_wrk(url, body_file, conns, duration_s, threads, cpus=None, header_bytes=None):
    """One wrk point posting body_file; header_bytes: the body is a binary-tensor request whose JSON
    header is that long."""
    threads = max(1, min(threads, conns))
    cmd = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{duration_s}s", "--timeout", "10s",
           "-s", BENCH / "wrk_post.lua", url]
    env = {"WRK_BODY_FILE": str(body_file)}
    if header_bytes is not None:
        env["WRK_INFERENCE_HEADER_LENGTH"] = str(header_bytes)
    rc, out, client_cpu = run_load(with_cpus(cmd, cpus), duration_s + 40, env)
    line = next((l for l in out.splitlines() if l.startswith("WRK_JSON ")), None)
    if rc != 0 or line is None:
        note(f"wrk {url} c={conns} failed (rc {rc}): {' | '.join(out.strip().splitlines()[-3:])}")
        return None
    w = json.loads(line[len("WRK_JSON "):])
    errors = sum(w["errors"].values())
    ok = w["requests"] - w["errors"]["status"]
    lat = w["latency_us"]
    res = {"throughput": ok / (w["duration_us"] / 1e6), "requests": w["requests"], "errors": w["errors"],
           "p50_us": lat["p50"], "p90_us": lat["p90"], "p95_us": lat["p95"], "p99_us": lat["p99"],
           "p75_us": lat["p75"], "p999_us": lat["p999"], "mean_us": lat["mean"], "client_cpu_pct": client_cpu}
    if errors:
        note(f"wrk {url} c={conns}: errors {w['errors']} of {w['requests']} requests")
    return res


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

    def __init__(self, binary, repo, budget, http_threads, cpus, log_name="ortserve.log"):
        super().__init__()
        self.binary, self.repo, self.budget, self.http_threads, self.cpus = binary, repo, budget, http_threads, cpus
        self.log_name = log_name
        self.metrics_port = None

    def start(self):
        _rc, help_text = run_bounded([self.binary, "--help"], 20, record=False)
        self.port = free_port()
        cmd = [self.binary, "--model-repository", self.repo, "--http-port", str(self.port)]
        if "--grpc-port" in help_text:
            self.grpc_port = free_port()
            cmd += ["--grpc-port", str(self.grpc_port)]
        if "--metrics-port" in help_text:  # never the default 8002: another server may hold it
            self.metrics_port = free_port()
            cmd += ["--metrics-port", str(self.metrics_port)]
        if "--thread-budget" in help_text:
            cmd += ["--thread-budget", str(self.budget)]
        if self.http_threads and "--http-thread-count" in help_text:
            cmd += ["--http-thread-count", str(self.http_threads)]
        if "--log-verbose" in help_text:
            cmd += ["--log-verbose", "0"]
        self.proc = Procs.start(with_cpus(cmd, self.cpus), LOGS / self.log_name)

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

    def __init__(self, repo, workers, intra_threads, cpus):
        super().__init__()
        self.repo, self.workers, self.intra_threads, self.cpus = repo, workers, intra_threads, cpus

    def start(self):
        self.port = free_port()
        cmd = [VENV_PY, BENCH / "baseline_fastapi.py", "--model-repository", self.repo,
               "--port", str(self.port), "--workers", str(self.workers),
               "--intra-op-threads", str(self.intra_threads)]
        self.proc = Procs.start(with_cpus(cmd, self.cpus), LOGS / "fastapi.log")


class HttpFloor(Server):
    name = "http_floor"

    def __init__(self, binary, body_file, cpus):
        super().__init__()
        self.binary, self.body_file, self.cpus = binary, body_file, cpus

    def start(self):
        self.port = free_port()
        cmd = [self.binary, "--port", str(self.port), "--body", self.body_file]
        self.proc = Procs.start(with_cpus(cmd, self.cpus), LOGS / "http_floor.log")


def log_tail(path, n=15):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


# --------------------------------------------------------------------------
# Measurement

def measure(server, model, fn):
    """Runs fn() as one load point, with server CPU% and statistics deltas around it."""
    s0, m0 = get_stats(server.base, model), server_metrics(server, model)
    c0, t0 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    res = fn()
    c1, t1 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    s1, m1 = get_stats(server.base, model), server_metrics(server, model)
    if res is None:
        return None
    res["server_cpu_pct"] = round(100.0 * (c1 - c0) / (t1 - t0), 1)
    res["server_stats"] = stats_delta(s0, s1)
    # The server-side p99 (arrival to response ready) is at most the upper
    # edge of the bucket it falls in.
    d = histogram_delta(m0, m1, REQUEST_DURATION) if m0 and m1 else None
    p99_le, p99_est = (d or {}).get("p99_le"), (d or {}).get("p99_est")
    res["server_p99_upper_us"] = p99_le * 1e6 if p99_le not in (None, float("inf")) else None
    res["server_p99_est_us"] = p99_est * 1e6 if p99_est is not None else None
    return res


def log_point(r):
    st = r.get("server_stats") or {}
    log(f"   {r['throughput']:.0f} inf/s  p50 {r['p50_us']:.0f} us  p99 {r['p99_us']:.0f} us  "
        f"server cpu {r['server_cpu_pct']}%" + (f"  avg batch {st['avg_batch']}" if st.get("avg_batch") else ""))


def closed_loop_point(server, model, spec, load, conc, args):
    """One measured point: `conc` requests in flight from `load` (pa_http, pa_grpc, wrk_json or
    wrk_bin)."""
    if load in ("wrk_json", "wrk_bin"):
        body, header = ((spec["request_bin"], spec["request_bin_header_bytes"]) if load == "wrk_bin"
                        else (spec["request_json"], None))
        fn = lambda: run_wrk(f"{server.base}/v2/models/{model}/infer", body, conc,
                             args.duration, args.client_threads, args.client_cpus, header)
    else:
        url = f"127.0.0.1:{server.grpc_port if load == 'pa_grpc' else server.port}"
        fn = lambda: run_perf_analyzer(url, model, spec, "concurrency", conc, args.pa_window_ms,
                                       "grpc" if load == "pa_grpc" else "http", args.client_cpus)
    r = measure(server, model, fn)
    if r:
        r["concurrency"] = conc
    return r


def idle_cpu(server, seconds):
    time.sleep(1.0)
    c0, t0 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    time.sleep(seconds)
    c1, t1 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    return round(100.0 * (c1 - c0) / (t1 - t0), 2)


def concurrency_sweep(server, model, spec, load, points, args):
    """One closed-loop point per --concurrency value, appended to points["concurrency"]."""
    for c in args.concurrency:
        log(f"{server.name}/{model} {load} c={c}")
        r = closed_loop_point(server, model, spec, load, c, args)
        if r:
            points["concurrency"].append(r)
            log_point(r)


def bench_tool(args, name):
    """A benchmark tool `make build` puts next to the server under test."""
    return Path(args.ortserve_bin).parent / name


def bench_server(server, models, manifest, refs, args, out):
    """Starts one server, runs every load point on every model, stops it."""
    log(f"starting {server.name}")
    server.start()
    try:
        ok, ready = wait_ready(server.base, server.proc, models, args.ready_timeout)
        if not ok:
            note(f"{server.name}: not ready within {args.ready_timeout} s or exited "
                 f"(rc {server.proc.poll()}); skipped. Log tail:\n{log_tail(LOGS / (server.name + '.log'))}")
            return
        for m in models:
            if m not in ready:
                note(f"{server.name}: model {m} not ready; skipped")
        res = out.setdefault(server.name, {"models": {}})
        res["idle_cpu_pct_after_start"] = idle_cpu(server, args.idle_seconds)
        log(f"{server.name}: idle CPU after start {res['idle_cpu_pct_after_start']}% of one core")
        loads = [("pa_http", "perf_analyzer HTTP binary")] if args.pa else []
        if args.wrk:
            loads.append(("wrk_json", "wrk JSON"))
        grpc = isinstance(server, OrtServe) and args.pa and server.grpc_ready()
        if isinstance(server, OrtServe):
            if args.wrk:
                loads.append(("wrk_bin", "wrk HTTP binary"))
            if grpc:
                loads.append(("pa_grpc", "perf_analyzer gRPC"))
            else:
                note(f"ortserve: gRPC front end not answering on port {server.grpc_port} — gRPC load skipped "
                     "(hook: OrtServe.grpc_ready / pa_grpc)")
        for m in ready:
            if isinstance(server, FastApiBaseline) and m == "mlp_nobatch":
                continue  # identical to mlp without a batcher
            spec = manifest[m]
            err = check_outputs(server.base, m, spec, refs[m])
            if err:
                note(f"{server.name}/{m}: {err}; model skipped")
                continue
            mres = res["models"].setdefault(m, {})
            for key, _label in loads:
                if key == "wrk_bin" and "request_bin" not in spec:
                    note(f"{server.name}/{m}: no binary request in the manifest (rerun make_bench_models.py); "
                         "wrk binary load skipped")
                    continue
                points = mres.setdefault(key, {"concurrency": [], "rate": []})
                concurrency_sweep(server, m, spec, key, points, args)
                if key == "pa_http" and args.rate_fractions and points["concurrency"]:
                    peak = max(p["throughput"] for p in points["concurrency"])
                    url = f"127.0.0.1:{server.port}"
                    for frac in args.rate_fractions:
                        rate = max(1.0, peak * frac)
                        log(f"{server.name}/{m} {key} rate={rate:.0f}/s ({frac:.0%} of peak)")
                        r = measure(server, m, lambda: run_perf_analyzer(url, m, spec, "rate", rate,
                                                                         args.pa_window_ms, "http", args.client_cpus))
                        if r:
                            r["fraction_of_peak"] = frac
                            points["rate"].append(r)
                            log_point(r)
        res["idle_cpu_pct_after_load"] = idle_cpu(server, args.idle_seconds)
        log(f"{server.name}: idle CPU after load {res['idle_cpu_pct_after_load']}% of one core")
    finally:
        server.stop()
        log(f"stopped {server.name}")


def floor_response(model, spec, ref):
    """The KServe v2 JSON answer to `model`'s request: the reference outputs, each float written as
    the shortest text of its float32 value (as ortserve writes it), so the floor sends the bytes a
    server would."""
    import numpy as np
    types = {o["name"]: o["datatype"] for o in spec["outputs"]}
    outs = [f'{{"name":"{name}","datatype":"{types[name]}","shape":{json.dumps(list(v.shape))},'
            f'"data":[{",".join(str(np.float32(x)) for x in v.ravel())}]}}' for name, v in ref.items()]
    return f'{{"model_name":"{model}","model_version":"1","outputs":[{",".join(outs)}]}}'


def bench_floor(manifest, refs, args, out):
    """The transport's floor on the tiny model's wrk JSON load, at every concurrency:
    ortserve_http_floor answering each request with the reference response and doing nothing else.
    No server answering the same requests with the same bytes beats it on this machine."""
    if "tiny" not in args.models or not args.wrk:
        return
    binary = bench_tool(args, "ortserve_http_floor")
    if not binary.exists():
        note(f"{binary} not built (make build): the tiny model's transport floor is not measured")
        return
    spec = manifest["tiny"]
    body = WORK / "http_floor_tiny.json"
    body.write_text(floor_response("tiny", spec, refs["tiny"]))
    server = HttpFloor(binary, body, args.server_cpus)
    log("starting http_floor")
    server.start()
    try:
        ok, _ = wait_ready(server.base, server.proc, [], args.ready_timeout)
        err = check_outputs(server.base, "tiny", spec, refs["tiny"]) if ok else "not ready"
        if err:
            note(f"http_floor: {err}; skipped. Log tail:\n{log_tail(LOGS / 'http_floor.log')}")
            return
        points = (out.setdefault("http_floor", {"models": {}})["models"].setdefault("tiny", {})
                  .setdefault("wrk_json", {"concurrency": [], "rate": []}))
        concurrency_sweep(server, "tiny", spec, "wrk_json", points, args)
    finally:
        server.stop()
        log("stopped http_floor")


def paired_rounds(args, manifest, refs, out):
    """The target points again, args.target_rounds times, each pair measured back to back in
    alternating order with both servers up (idle when not measured): on two shared cores the
    machine's load drifts between the sweep's phases, and a ratio of two points taken minutes apart
    carries that drift. Pairs: tiny wrk JSON @32 ortserve/FastAPI; cnn @4 ortserve under each of
    CNN_LOADS and in-process at the batch sizes the sweep saw (one group: one in-process run serves
    both clients' ratios); mlp/mlp_nobatch @32 per load."""
    servers = {}
    if "ortserve" in args.contenders and Path(args.ortserve_bin).exists():
        servers["ortserve"] = OrtServe(Path(args.ortserve_bin), manifest_repo(manifest), args.thread_budget,
                                       args.http_thread_count, args.server_cpus, log_name="ortserve-rounds.log")
    if "fastapi" in args.contenders:
        servers["fastapi"] = FastApiBaseline(manifest_repo(manifest), args.fastapi_workers,
                                             max(1, args.thread_budget // args.fastapi_workers), args.server_cpus)
    if "ortserve" not in servers:
        return
    models = [m for m in ("tiny", "cnn", "mlp", "mlp_nobatch") if m in args.models]
    log(f"paired rounds: {args.target_rounds} x {models}")
    try:
        for name, server in servers.items():
            server.start()
        ready = {}
        for name, server in servers.items():
            ok, ready[name] = wait_ready(server.base, server.proc, models, args.ready_timeout)
            bad = [m for m in ready[name] if check_outputs(server.base, m, manifest[m], refs[m])]
            ready[name] = [m for m in ready[name] if m not in bad] if ok else []
        o, f = servers["ortserve"], servers.get("fastapi")
        grpc = args.pa and o.grpc_ready()  # the gRPC load is perf_analyzer's

        def usable(load, m):
            if load.startswith("wrk"):
                return args.wrk and (load != "wrk_bin" or "request_bin" in manifest[m])
            return args.pa and (load != "pa_grpc" or grpc)

        cnn_sizes = sorted({1} | set(chosen_batch_sizes(out, "cnn")))

        def back_to_back(rnd, label, *entries):
            """Runs a group's measurements (name, fn) back to back, the order reversed every round."""
            got = {name: fn() for name, fn in (entries if rnd % 2 == 0 else reversed(entries))}
            if None in got.values():
                note(f"paired round {rnd + 1}: {label} incomplete; round skipped for it")
                return None
            log(f"   round {rnd + 1} {label}: " + ", ".join(
                f"{k} {v['throughput'] if 'throughput' in v else v['results'][0]['inferences_per_s']:.0f} inf/s"
                for k, v in got.items()))
            return got

        def pt(srv, m, load, c):
            return lambda: closed_loop_point(srv, m, manifest[m], load, c, args)

        for rnd in range(args.target_rounds):
            rd = {"mlp": {}}
            if f and "tiny" in ready["ortserve"] and "tiny" in ready.get("fastapi", []) and args.wrk:
                rd["tiny"] = back_to_back(rnd, "tiny wrk_json @32", ("ortserve", pt(o, "tiny", "wrk_json", 32)),
                                          ("fastapi", pt(f, "tiny", "wrk_json", 32)))
            cnn_loads = [x for x in CNN_LOADS if usable(x, "cnn")] if "cnn" in ready["ortserve"] else []
            if cnn_loads and "inprocess" in args.contenders:
                path = RESULTS / "inprocess_cnn_rounds.json"
                dur = min(args.inprocess_duration, args.duration)
                rd["cnn"] = back_to_back(rnd, f"cnn {'/'.join(cnn_loads)} @4",
                                         *[(x, pt(o, "cnn", x, 4)) for x in cnn_loads],
                                         ("inprocess", lambda: run_inprocess("cnn", cnn_sizes, dur, path, args)))
            if "mlp" in ready["ortserve"] and "mlp_nobatch" in ready["ortserve"]:
                for load in [x for x in MLP_LOADS if usable(x, "mlp")]:
                    rd["mlp"][load] = back_to_back(rnd, f"mlp {load} @32", ("on", pt(o, "mlp", load, 32)),
                                                   ("off", pt(o, "mlp_nobatch", load, 32)))
            rd["mlp"] = {k: v for k, v in rd["mlp"].items() if v}
            out.setdefault("rounds", []).append({k: v for k, v in rd.items() if v})
    finally:
        for server in servers.values():
            server.stop()


def chosen_batch_sizes(out, model):
    """Batch sizes ortserve's batcher ran for a model (>= 5% of executions at any point of any load)."""
    sizes = set()
    loads = out.get("ortserve", {}).get("models", {}).get(model, {}).values()
    for p in (p for load in loads if isinstance(load, dict) for p in load.get("concurrency", [])):
        st = p.get("server_stats") or {}
        total = sum(b["executions"] for b in st.get("batch_sizes", {}).values())
        for bs, b in st.get("batch_sizes", {}).items():
            if total and b["executions"] / total >= 0.05:
                sizes.add(int(bs))
    return sorted(sizes)


def bench_inprocess(models, manifest, args, out):
    res = out.setdefault("inprocess", {"models": {}})
    for m in models:
        sizes = sorted({1} | set(chosen_batch_sizes(out, m)))
        if manifest[m]["max_batch_size"] == 0:
            sizes = [1]
        log(f"inprocess/{m}: batch sizes {sizes}")
        r = run_inprocess(m, sizes, args.inprocess_duration, RESULTS / f"inprocess_{m}.json", args)
        if r:
            res["models"][m] = r


def run_inprocess(model, sizes, duration, path, args):
    """Back-to-back ORT in one process at each batch size; its JSON, or None (noted)."""
    cmd = [VENV_PY, BENCH / "inprocess_ort.py", "--model", model, "--threads", str(args.thread_budget),
           "--batch-sizes", ",".join(map(str, sizes)), "--duration", str(duration), "--json", path]
    # The C++ engine built next to the server under test (same ORT, same
    # session options); inprocess_ort.py falls back to Python without it.
    limit_bin = bench_tool(args, "ortserve_inprocess_limit")
    if limit_bin.exists():
        cmd += ["--engine", "ortserve", "--limit-bin", limit_bin]
    else:
        note(f"{limit_bin} not built: the in-process limit uses the onnxruntime Python wheel")
    rc, text = run_bounded(with_cpus(cmd, args.server_cpus), len(sizes) * (duration + 30) + 60)
    if rc != 0:
        note(f"inprocess/{model} failed (rc {rc}): {text.strip()[-300:]}")
        return None
    r = json.loads(Path(path).read_text())
    for x in r["results"]:
        log(f"   batch {x['batch_size']}: {x['inferences_per_s']:.0f} inf/s, run p50 {x['run_latency_us']['p50']} us")
    return r


# --------------------------------------------------------------------------
# Targets, report, plots

def point(out, contender, model, load, conc):
    pts = out.get(contender, {}).get("models", {}).get(model, {}).get(load, {}).get("concurrency", [])
    return next((p for p in pts if p["concurrency"] == conc), None)


def limit_at_mix(inproc, mix):
    """Inferences/s of back-to-back ORT (an in-process run's JSON) at the server's batch-size mix
    {batch size: executions}."""
    if not inproc:
        return None
    per = {x["batch_size"]: x for x in inproc["results"]}
    num = den = 0.0
    for bs, n in mix.items():
        if bs in per:
            num += n * bs
            den += n * bs / per[bs]["inferences_per_s"]
    return num / den if den else None


# Target rows: (target, measured, ratio, goal, detail); GOALS says when a ratio meets its goal.
GOALS = {">= 10x": lambda r: r >= 10, "< 1x": lambda r: r < 1, ">= 0.95x": lambda r: r >= 0.95,
         ">= 2x": lambda r: r >= 2, "<= 1x": lambda r: r <= 1}
TINY_TARGET = "tiny JSON @32: ortserve / FastAPI throughput"
CNN_TARGET = "cnn @4: ortserve / in-process ORT"
# The lightest client first: on two shared cores a client's own CPU is taken from the server.
CNN_LOADS = ("wrk_bin", "pa_http")
MLP_LOADS = ("pa_http", "pa_grpc", "wrk_json", "wrk_bin")


def tiny_rows(o, f, floor):
    """ortserve vs FastAPI, tiny model, wrk JSON @32: >= 10x throughput, lower p99. `floor`: the
    no-op server's sweep point on the same load (None when not measured), for scale."""
    return [(TINY_TARGET, f"{o['throughput']:.0f} vs {f['throughput']:.0f} inf/s",
             o["throughput"] / f["throughput"], ">= 10x",
             f"server CPU ortserve {o['server_cpu_pct']:.0f}%, FastAPI {f['server_cpu_pct']:.0f}%"
             + (f"; no-op HTTP server on this load (sweep): {floor['throughput']:.0f} inf/s = "
                f"{floor['throughput'] / f['throughput']:.1f}x this FastAPI figure" if floor else "")),
            ("tiny JSON @32: ortserve p99 < FastAPI p99", f"{o['p99_us']:.0f} vs {f['p99_us']:.0f} us",
             o["p99_us"] / f["p99_us"], "< 1x", "")]


def cnn_rows(load, o, inproc):
    """ortserve cnn @4 under `load` vs back-to-back ORT at the batch sizes the batcher ran (its mix of
    executions)."""
    mix = {int(k): v["executions"] for k, v in ((o.get("server_stats") or {}).get("batch_sizes") or {}).items()} or {1: 1}
    lim, lim1 = limit_at_mix(inproc, mix), limit_at_mix(inproc, {1: 1})
    if not lim:
        return []
    return [(f"cnn @4 ({load}): ortserve / in-process ORT", f"{o['throughput']:.1f} vs {lim:.1f} inf/s",
             o["throughput"] / lim, ">= 0.95x",
             "; ".join(x for x in (f"batch mix {mix}",
                                   f"in-process batch-1 limit {lim1:.1f} inf/s" if lim1 else "",
                                   client_cpu_str(o)) if x))]


def client_cpu_str(r):
    return f"client CPU {r['client_cpu_pct']:.0f}% of one core" if r.get("client_cpu_pct") is not None else ""


def mlp_rows(load, on, off, manifest, ceiling):
    """mlp @32, batching on vs off: >= 2x throughput; p99 <= max_queue_delay + 2x the batch compute."""
    rows = [(f"mlp @32 ({load}): batching on / off throughput",
             f"{on['throughput']:.0f} vs {off['throughput']:.0f} inf/s", on["throughput"] / off["throughput"],
             ">= 2x", "; ".join(x for x in (f"the same client on tiny @32: {ceiling['throughput']:.0f} inf/s"
                                            if ceiling else "", client_cpu_str(on)) if x))]
    comp = (on.get("server_stats") or {}).get("avg_compute_infer_us_per_execution")
    if comp is not None:
        bound = manifest["mlp"]["max_queue_delay_us"] + 2 * comp
        rows.append((f"mlp @32 ({load}): p99 <= max_queue_delay + 2x batch compute",
                     f"p99 {on['p99_us']:.0f} us, bound {bound:.0f} us", on["p99_us"] / bound, "<= 1x",
                     f"avg batch {on['server_stats']['avg_batch']}, compute {comp} us/batch"
                     + (f"; server-side p99 (arrival to response ready) <= {on['server_p99_upper_us']:.0f} us"
                        if on.get("server_p99_upper_us") else "")
                     + (f", about {on['server_p99_est_us']:.0f} us interpolated in that bucket"
                        if on.get("server_p99_est_us") else "")))
    return rows


def sweep_rows(out, manifest):
    """The target rows from the sweep's points (each contender measured in its own phase)."""
    rows = []
    o, f = point(out, "ortserve", "tiny", "wrk_json", 32), point(out, "fastapi", "tiny", "wrk_json", 32)
    if o and f:
        rows += tiny_rows(o, f, point(out, "http_floor", "tiny", "wrk_json", 32))
    for load in CNN_LOADS:
        o = point(out, "ortserve", "cnn", load, 4)
        if o:
            rows += cnn_rows(load, o, out.get("inprocess", {}).get("models", {}).get("cnn"))
    for load in MLP_LOADS:
        on, off = point(out, "ortserve", "mlp", load, 32), point(out, "ortserve", "mlp_nobatch", load, 32)
        if on and off:
            rows += mlp_rows(load, on, off, manifest, point(out, "ortserve", "tiny", load, 32))
    return rows


def rounds_rows(out, manifest):
    """The target rows of each paired round (see paired_rounds), one list per round; a client's
    ceiling for the mlp rows is the sweep's tiny @32 point."""
    per_round = []
    for rd in out.get("rounds") or []:
        rows = []
        if rd.get("tiny"):
            rows += tiny_rows(rd["tiny"]["ortserve"], rd["tiny"]["fastapi"],
                              point(out, "http_floor", "tiny", "wrk_json", 32))
        for load in CNN_LOADS if rd.get("cnn") else ():
            # Runs before the wrk binary load kept perf_analyzer's point under "ortserve".
            o = rd["cnn"].get(load) or (rd["cnn"].get("ortserve") if load == "pa_http" else None)
            if o:
                rows += cnn_rows(load, o, rd["cnn"]["inprocess"])
        for load, pair in rd.get("mlp", {}).items():
            rows += mlp_rows(load, pair["on"], pair["off"], manifest, point(out, "ortserve", "tiny", load, 32))
        per_round.append(rows)
    return per_round


def median_rows(per_round):
    """Per target, the round with the median ratio (the lower middle one for an even count), its
    figures labelled with the spread of the ratio over the rounds."""
    by_target = {}
    # The complete rounds first: their order is the targets' order.
    for rows in sorted(per_round, key=len, reverse=True):
        for row in rows:
            by_target.setdefault(row[0], []).append(row)
    out = []
    for name, rows in by_target.items():
        rows = sorted(rows, key=lambda r: r[2])
        mid = rows[(len(rows) - 1) // 2]
        spread = (f"median of {len(rows)} rounds (ratio {fmt_ratio(rows[0][2], mid[3])} to "
                  f"{fmt_ratio(rows[-1][2], mid[3])})" if len(rows) > 1
                  else "1 round")
        out.append((name, f"{mid[1]}, {spread}", mid[2], mid[3], mid[4]))
    return out


def compute_targets(out, manifest):
    """Verdicts on the paired rounds when the run has them (the sweep's figure in the detail), else on
    the sweep's points; then the idle cost."""
    sweep = sweep_rows(out, manifest)
    rounds = out.get("rounds") or []
    rows = median_rows(rounds_rows(out, manifest)) if rounds else sweep
    if rounds:
        at_sweep = {r[0]: r for r in sweep}
        def with_sweep_point(r):
            s = at_sweep[r[0]]
            return r[:4] + ("; ".join(x for x in (r[4], f"sweep point: {s[1]} = {fmt_ratio(s[2], r[3])}") if x),)
        rows = [with_sweep_point(r) if r[0] in at_sweep else r for r in rows]
    t = [{"target": name, "measured": measured, "ratio": ratio, "goal": goal,
          "verdict": "PASS" if GOALS[goal](ratio) else "MISS", "detail": detail}
         for name, measured, ratio, goal, detail in rows]
    for name, goal in ((TINY_TARGET, ">= 10x"), (CNN_TARGET, ">= 0.95x"),
                       ("mlp @32: batching on / off throughput", ">= 2x")):
        if not any(x["target"].startswith(name.split(":")[0]) for x in t):
            t.append({"target": name, "measured": "missing data", "ratio": None, "goal": goal,
                      "verdict": "N/A", "detail": ""})

    # idle cost: < 2% of one core with no traffic for 10 s.
    for key in ("idle_cpu_pct_after_start", "idle_cpu_pct_after_load"):
        v = out.get("ortserve", {}).get(key)
        t.append({"target": f"ortserve idle CPU ({key.replace('idle_cpu_pct_', '').replace('_', ' ')})",
                  "measured": "missing data" if v is None else f"{v}% of one core", "ratio": v, "goal": "< 2%",
                  "verdict": "N/A" if v is None else ("PASS" if v < 2 else "MISS"), "detail": ""})
    return t


CONTENDER_LINES = [  # (contender, load, label, style, colour)
    ("ortserve", "pa_http", "ortserve HTTP binary (perf_analyzer)", "-o", "tab:blue"),
    ("ortserve", "pa_grpc", "ortserve gRPC (perf_analyzer)", "-v", "tab:purple"),
    ("ortserve", "wrk_json", "ortserve HTTP JSON (wrk)", "-s", "tab:green"),
    ("ortserve", "wrk_bin", "ortserve HTTP binary (wrk)", "-D", "tab:cyan"),
    ("fastapi", "pa_http", "FastAPI HTTP binary (perf_analyzer)", "--o", "tab:orange"),
    ("fastapi", "wrk_json", "FastAPI HTTP JSON (wrk)", "--s", "tab:red"),
    ("http_floor", "wrk_json", "http_floor HTTP JSON (wrk), a no-op server", ":^", "tab:gray"),
]


def plot(out, models):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []
    for m in models:
        series = []
        for cont, load, label, style, colour in CONTENDER_LINES:
            pts = out.get(cont, {}).get("models", {}).get(m, {}).get(load, {})
            if pts and pts.get("concurrency"):
                series.append((label, style, colour, pts))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        for label, style, colour, pts in series:
            c = pts["concurrency"]
            ax.plot([p["concurrency"] for p in c], [p["throughput"] for p in c], style, color=colour, label=label)
        ip = out.get("inprocess", {}).get("models", {}).get(m)
        if ip:
            for x in ip["results"]:
                ax.axhline(x["inferences_per_s"], ls=":", lw=1, color="gray")
                ax.annotate(f"in-process ORT, batch {x['batch_size']}", (1, x["inferences_per_s"]),
                            fontsize=7, color="gray", va="bottom")
        ax.set_xscale("log", base=2)
        concs = sorted({p["concurrency"] for _l, _s, _c, pts in series for p in pts["concurrency"]})
        ax.set_xticks(concs, [str(c) for c in concs])
        ax.set_yscale("log")
        ax.set_xlabel("concurrency (outstanding requests / connections)")
        ax.set_ylabel("inferences / s")
        ax.set_title(f"{m}: throughput vs concurrency")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        p1 = RESULTS / f"{m}_throughput_vs_concurrency.png"
        fig.savefig(p1, dpi=110)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        for label, style, colour, pts in series:
            c = sorted(pts["concurrency"], key=lambda p: p["throughput"])
            ax.plot([p["throughput"] for p in c], [p["p99_us"] / 1e3 for p in c], style, color=colour,
                    label=label + ", closed loop")
            r = sorted(pts.get("rate", []), key=lambda p: p["throughput"])
            if r:
                ax.plot([p["throughput"] for p in r], [p["p99_us"] / 1e3 for p in r], ":x", color=colour,
                        label=label + ", Poisson request rate")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("inferences / s")
        ax.set_ylabel("p99 latency (ms)")
        ax.set_title(f"{m}: p99 latency vs throughput")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        p2 = RESULTS / f"{m}_p99_vs_throughput.png"
        fig.savefig(p2, dpi=110)
        plt.close(fig)
        files += [p1, p2]
    return files


def fmt(v, nd=0):
    if v is None:
        return "–"
    return f"{v:,.{nd}f}"


def fmt_ratio(ratio, goal):
    """A ratio measured against a goal, as every table and detail prints it: two decimals, more where
    two would print the goal's own figure (0.9495 against >= 0.95x reads 0.9495, not 0.95 next to a
    MISS)."""
    bound = float(re.search(r"[0-9.]+", goal).group())
    nd = 2
    while nd < 6 and ratio != bound and round(ratio, nd) == bound:
        nd += 1
    return fmt(ratio, nd)


def batches_str(st):
    if not st or not st.get("batch_sizes"):
        return "–"
    bs = st["batch_sizes"]
    total = sum(b["executions"] for b in bs.values())
    top = sorted(bs.items(), key=lambda kv: -kv[1]["executions"])[:3]
    return ", ".join(f"{k}:{100 * v['executions'] / total:.0f}%" for k, v in top) + f" (avg {st['avg_batch']})"


def machine_info():
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "loadavg_at_start": os.getloadavg()}


def git_head():
    """The commit measured, read from .git without running git."""
    try:
        head = (ROOT / ".git" / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            p = ROOT / ".git" / ref
            if p.exists():
                return p.read_text().strip()[:12]
            for line in (ROOT / ".git" / "packed-refs").read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0][:12]
        return head[:12]
    except OSError:
        return "unknown"


def write_report(out, targets, plots, args, started, finished):
    L = []
    mi = out["meta"]["machine"]
    L += ["# ortserve benchmark results", "",
          f"Generated by `bench/run_bench.py{' --quick' if args.quick else ''}` "
          f"({', '.join(args.argv) if args.argv else 'default arguments'}) on {started} "
          f"(finished {finished}), commit `{out['meta']['commit']}`.", "",
          f"Machine: {mi['cpu']}, {mi['cores']} cores, Linux {mi['kernel']}, load average at start "
          f"{', '.join(f'{x:.2f}' for x in mi['loadavg_at_start'])}. Thread budget {args.thread_budget} "
          f"(ortserve `--thread-budget`, FastAPI {args.fastapi_workers} workers x "
          f"{max(1, args.thread_budget // args.fastapi_workers)} intra-op threads, in-process ORT "
          f"{args.thread_budget} intra-op threads). Server CPUs: {args.server_cpus or 'unpinned'}, "
          f"load generator CPUs: {args.client_cpus or 'unpinned'}.", ""]
    if args.quick:
        L += ["> **Quick smoke run**: a few seconds per point, concurrency subset. Numbers are indicative only; "
              "the load generators share the cores with the servers.", ""]
    L += ["Load generators run on the same machine as the servers: on few cores they compete for CPU, which "
          "caps every contender alike. Server CPU% is the server's process tree (utime+stime from /proc) over "
          "the load run, 100% = one core; client CPU% is the load generator's over its whole run (warm-up "
          "included). In-process ORT has no client: against it, the lightest client (wrk; perf_analyzer "
          "uses several times its CPU per request) leaves the server the cores the limit gets, and each "
          "client has its own row.", ""]

    rounds = out.get("rounds") or []
    L += ["## Targets", ""]
    if rounds:
        L += [f"Verdicts rest on {len(rounds)} paired rounds run after the sweep: each pair (ortserve and "
              "FastAPI on tiny, ortserve under each client and in-process ORT on cnn, batching on and off on mlp) measured back "
              "to back with both servers up, the order flipping every round; the row shows the round with the "
              "median ratio and the spread. The sweep's own point for the same pair is in the detail.", ""]
    L += ["| target | measured | ratio | goal | verdict | detail |", "|---|---|---|---|---|---|"]
    for t in targets:
        L.append(f"| {t['target']} | {t['measured']} | {fmt_ratio(t['ratio'], t['goal']) if t['ratio'] is not None else '–'} "
                 f"| {t['goal']} | **{t['verdict']}** | {t['detail']} |")
    L.append("")
    if rounds:
        per_round = rounds_rows(out, out["meta"]["manifest"])
        names = list(dict.fromkeys(row[0] for rows in per_round for row in rows))
        L += ["Ratio per paired round:", "",
              "| target | " + " | ".join(f"round {i + 1}" for i in range(len(per_round))) + " |",
              "|---|" + "---|" * len(per_round)]
        for name in names:
            cells = [next((fmt_ratio(r[2], r[3]) for r in rows if r[0] == name), "–") for rows in per_round]
            L.append(f"| {name} | " + " | ".join(cells) + " |")
        L.append("")

    # Headline: for each model, each contender/load at the highest common concurrency and at 1.
    # Hand-written findings (profiles, causes of misses) survive re-runs: they
    # live in bench/FINDINGS.md and are copied in here.
    findings = Path(__file__).with_name("FINDINGS.md")
    if findings.exists():
        L += [findings.read_text().rstrip(), ""]
    L += ["## Headline", "",
          "Throughput in inferences/s, latency in microseconds, at concurrency 1 and at the highest "
          "concurrency measured.", "",
          "| model | contender | load | conc | inf/s | p50 | p99 | server CPU% |", "|---|---|---|---|---|---|---|---|"]
    cmax = max(args.concurrency)
    for m in args.models:
        for cont, load, label, _s, _c in CONTENDER_LINES:
            for c in sorted({1, cmax}):
                p = point(out, cont, m, load, c)
                if p:
                    L.append(f"| {m} | {cont} | {label.split(' ', 1)[1]} | {c} | {fmt(p['throughput'])} | "
                             f"{fmt(p['p50_us'])} | {fmt(p['p99_us'])} | {fmt(p['server_cpu_pct'], 1)} |")
        ip = out.get("inprocess", {}).get("models", {}).get(m)
        if ip:
            for x in ip["results"]:
                L.append(f"| {m} | in-process ORT | back-to-back, batch {x['batch_size']} | – | "
                         f"{fmt(x['inferences_per_s'])} | {fmt(x['run_latency_us']['p50'])} | "
                         f"{fmt(x['run_latency_us']['p99'])} | – |")
    L.append("")
    engines = {f"{r.get('engine', 'python')} (ONNX Runtime {r.get('onnxruntime', '?')})"
               for r in out.get("inprocess", {}).get("models", {}).values()}
    if engines:
        L += [f"In-process engine: {', '.join(sorted(engines))}. `ortserve-runtime` is "
              "`ortserve_inprocess_limit`, a C++ loop on the server's own runtime layer (same ONNX Runtime, "
              "same session options as a server instance); `python` is the onnxruntime wheel, whose per-call "
              "overhead is a large part of a microsecond-scale run such as `tiny`'s.", ""]

    L += ["## Idle cost", "", "| contender | idle CPU after start (% of one core) | idle CPU after load |", "|---|---|---|"]
    for cont in ("ortserve", "fastapi"):
        if cont in out:
            L.append(f"| {cont} | {fmt(out[cont].get('idle_cpu_pct_after_start'), 2)} | "
                     f"{fmt(out[cont].get('idle_cpu_pct_after_load'), 2)} |")
    L += ["", f"Each figure: {args.idle_seconds} s with no traffic.", ""]

    L += ["## Details", ""]
    for m in args.models:
        L += [f"### {m}", ""]
        spec = out["meta"]["manifest"].get(m, {})
        if spec:
            L += [f"max_batch_size {spec['max_batch_size']}, dynamic batching "
                  f"{'on, max_queue_delay ' + str(spec['max_queue_delay_us']) + ' us' if spec['dynamic_batching'] else 'off'}, "
                  f"JSON request {spec['request_bytes']} bytes.", ""]
        L += ["| contender | load | conc | inf/s | p50 | p90 | p95 | p99 | CPU% | client CPU% | batch sizes (share) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
        for cont, load, label, _s, _c in CONTENDER_LINES:
            pts = out.get(cont, {}).get("models", {}).get(m, {}).get(load, {})
            for p in pts.get("concurrency", []):
                L.append(f"| {cont} | {label.split(' ', 1)[1]} | {p['concurrency']} | {fmt(p['throughput'])} | "
                         f"{fmt(p['p50_us'])} | {fmt(p['p90_us'])} | {fmt(p['p95_us'])} | {fmt(p['p99_us'])} | "
                         f"{fmt(p['server_cpu_pct'], 1)} | {fmt(p.get('client_cpu_pct'), 1)} | "
                         f"{batches_str(p.get('server_stats'))} |")
            for p in pts.get("rate", []):
                L.append(f"| {cont} | Poisson {p['offered_rate']:.0f}/s ({p['fraction_of_peak']:.0%} of peak) | – | "
                         f"{fmt(p['throughput'])} | {fmt(p['p50_us'])} | {fmt(p['p90_us'])} | {fmt(p['p95_us'])} | "
                         f"{fmt(p['p99_us'])} | {fmt(p['server_cpu_pct'], 1)} | {fmt(p.get('client_cpu_pct'), 1)} | "
                         f"{batches_str(p.get('server_stats'))} |")
        L.append("")
        for f in plots:
            if f.name.startswith(m + "_"):
                L.append(f"![{f.stem}](results/{f.name})")
        L.append("")

    if NOTES:
        L += ["## Skipped or failed", ""] + [f"- {n}".replace("\n", "\n  ") for n in NOTES] + [""]
    L += ["## Commands", "", "Every command this run used (paths relative to the repository root; "
          "ports were free ports picked at run time):", "", "```"] + COMMANDS + ["```", ""]
    Path(args.results_md).write_text("\n".join(L))


# --------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: concurrency 1,4,32, ~2-3 s per point")
    ap.add_argument("--models", default=",".join(ALL_MODELS), help="comma separated subset")
    ap.add_argument("--concurrency", help="comma separated (default 1,2,4,8,16,32,64; quick 1,4,32)")
    ap.add_argument("--duration", type=float, help="seconds per load point (default 10, quick 2)")
    ap.add_argument("--rate-fractions", help="request-rate sweep as fractions of each contender's peak "
                    "(default 0.25,0.5,0.75,0.9; quick 0.5; 'none' to skip)")
    ap.add_argument("--contenders", default="ortserve,fastapi,inprocess,http_floor")
    ap.add_argument("--no-pa", dest="pa", action="store_false", help="skip perf_analyzer loads")
    ap.add_argument("--no-wrk", dest="wrk", action="store_false", help="skip wrk JSON loads")
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--thread-budget", type=int, default=os.cpu_count() or 1,
                    help="cores given to each contender (default: all)")
    ap.add_argument("--fastapi-workers", type=int, help="default: the thread budget (1 intra-op thread each)")
    ap.add_argument("--http-thread-count", type=int, default=0, help="ortserve --http-thread-count (0: its default)")
    ap.add_argument("--client-threads", type=int, default=1 if (os.cpu_count() or 1) <= 4 else 2,
                    help="wrk threads")
    ap.add_argument("--server-cpus", help="taskset CPU list for servers and in-process runs (e.g. 0-3)")
    ap.add_argument("--client-cpus", help="taskset CPU list for load generators (e.g. 4-5)")
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    ap.add_argument("--inprocess-duration", type=float, help="seconds per batch size (default 10, quick 2)")
    ap.add_argument("--target-rounds", type=int,
                    help="after the sweep, measure each target's pair this many more times, back to back in "
                    "alternating order; verdicts use the median round (default 5, quick 1; 0: the sweep's points)")
    ap.add_argument("--manifest", default=str(WORK / "manifest.json"))
    ap.add_argument("--results-md", default=str(BENCH / "RESULTS.md"))
    ap.add_argument("--report-only", action="store_true",
                    help="measure nothing: rewrite RESULTS.md and the plots from bench/results/results.json "
                    "(after editing FINDINGS.md), with the arguments of the run that made it")
    args = ap.parse_args(argv)
    args.argv = argv
    args.models = [m for m in args.models.split(",") if m]
    args.contenders = [c for c in args.contenders.split(",") if c]
    args.concurrency = ([int(x) for x in args.concurrency.split(",")] if args.concurrency
                        else (QUICK_CONCURRENCY if args.quick else FULL_CONCURRENCY))
    args.duration = args.duration or (2.0 if args.quick else 10.0)
    args.duration = max(1, int(round(args.duration)))
    args.pa_window_ms = max(500, int(args.duration * 1000 / 3))  # 3 windows ~ one wrk run
    rf = args.rate_fractions or ("0.5" if args.quick else "0.25,0.5,0.75,0.9")
    args.rate_fractions = [] if rf == "none" else [float(x) for x in rf.split(",")]
    args.inprocess_duration = args.inprocess_duration or (2.0 if args.quick else 10.0)
    args.fastapi_workers = args.fastapi_workers or args.thread_budget
    if args.target_rounds is None:
        args.target_rounds = 1 if args.quick else 5
    return args


def finish(out, manifest, args):
    """Targets, results.json, plots and RESULTS.md from a run's measurements."""
    targets = compute_targets(out, manifest)
    out["targets"] = targets
    out["notes"] = NOTES
    out["commands"] = COMMANDS
    (RESULTS / "results.json").write_text(json.dumps(out, indent=1, default=str))
    try:
        plots = plot(out, args.models)
    except Exception as e:  # a plotting problem must not lose the numbers
        note(f"plotting failed: {e}")
        plots = []
    write_report(out, targets, plots, args, out["meta"]["started"], out["meta"]["finished"])
    log(f"wrote {args.results_md}, {RESULTS / 'results.json'} and {len(plots)} plots")
    for t in targets:
        log(f"target: {t['target']}: {t['measured']} -> {t['verdict']}")


def rewrite_report(results_md):
    """--report-only: the report of the run saved in results.json, with that run's arguments."""
    out = json.loads((RESULTS / "results.json").read_text())
    args = parse_args(out["meta"]["argv"])
    args.results_md = results_md
    NOTES[:] = out.get("notes", [])
    COMMANDS[:] = out.get("commands", [])
    finish(out, out["meta"]["manifest"], args)
    return 0


def main(argv):
    args = parse_args(argv)
    if args.report_only:
        return rewrite_report(args.results_md)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, f: (Procs.stop_all(), sys.exit(128 + s)))
    atexit.register(Procs.stop_all)
    RESULTS.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)

    mpath = Path(args.manifest)
    if not mpath.exists():
        log(f"{mpath} missing: run `.venv/bin/python bench/make_bench_models.py` first (make bench does)")
        return 2
    manifest = json.loads(mpath.read_text())
    missing = [m for m in args.models if m not in manifest]
    if missing:
        note(f"models not in the manifest, skipped: {missing}")
    args.models = [m for m in args.models if m in manifest]

    started = dt.datetime.now().isoformat(timespec="seconds")
    out = {"meta": {"started": started, "argv": argv, "machine": machine_info(), "commit": git_head(),
                    "args": {k: v for k, v in vars(args).items() if k != "argv"},
                    "manifest": {m: manifest[m] for m in args.models}}}
    log(f"models {args.models}, concurrency {args.concurrency}, {args.duration} s per point, "
        f"thread budget {args.thread_budget}")

    if args.pa and not pa_available():
        note(f"perf_analyzer not runnable at {PERF_ANALYZER}; perf_analyzer loads skipped")
        args.pa = False
    if args.wrk and subprocess.run(["which", "wrk"], capture_output=True).returncode != 0:
        note("wrk not installed (apt-get install wrk); JSON loads skipped")
        args.wrk = False

    refs = {m: reference_outputs(manifest[m]) for m in args.models}
    try:
        if "ortserve" in args.contenders:
            binary = Path(args.ortserve_bin)
            if binary.exists() and os.access(binary, os.X_OK):
                bench_server(OrtServe(binary, manifest_repo(manifest), args.thread_budget,
                                      args.http_thread_count, args.server_cpus),
                             args.models, manifest, refs, args, out)
            else:
                note(f"ortserve binary {binary} not found (run `make build`); ortserve skipped")
        if "fastapi" in args.contenders:
            workers = args.fastapi_workers
            bench_server(FastApiBaseline(manifest_repo(manifest), workers, max(1, args.thread_budget // workers),
                                         args.server_cpus), args.models, manifest, refs, args, out)
        if "http_floor" in args.contenders:
            bench_floor(manifest, refs, args, out)
        if "inprocess" in args.contenders:
            bench_inprocess(args.models, manifest, args, out)
        if args.target_rounds:
            paired_rounds(args, manifest, refs, out)
    finally:
        Procs.stop_all()
        out["meta"]["finished"] = dt.datetime.now().isoformat(timespec="seconds")
        finish(out, manifest, args)
    return 0


def manifest_repo(manifest):
    return Path(next(iter(manifest.values()))["model_path"]).parents[2]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
