#!/usr/bin/env python3
"""Overload and soak: ortserve at 3x its sustainable request rate (issue 5).

    .venv/bin/python bench/soak.py --ortserve-bin build/ortserve            # 180 s at 3x
    .venv/bin/python bench/soak.py --duration 20 --capacity-seconds 8        # smoke run
    make soak SOAK_ARGS="--duration 600"

What it does, on one freshly started ortserve (free 127.0.0.1 ports):
  model     `cnn_soak`: the bench CNN (make_bench_models.make_cnn, same weights
            as `cnn`), written with its own config into bench/work/soak/repo:
            max_batch_size 8, dynamic batching, priority_levels 2 (1 = high),
            default_priority_level 2, a bounded max_queue_size per level
            (priority_queue_policy) and in default_queue_policy.
  step 1    capacity: a closed loop of --capacity-concurrency clients for
            --capacity-seconds; sustainable rate = answered requests / s.
  step 2    overload: open-loop Poisson arrivals at --multiplier x capacity for
            --duration s, --high-share of them with `parameters: {"priority": 1}`,
            the rest with priority 2. Arrivals never wait for the server: each
            arrival takes an idle keep-alive HTTP/1.1 connection from a pool, or
            opens a new one. Latency is measured from the scheduled arrival, so
            a late generator shows up as latency, never hides it.
  checks    every 200 is compared with onnxruntime in Python (8 distinct inputs,
            binary tensors in, JSON out); every 503 must name its limit
            (max_queue_size); afterwards the server must still be ready, answer
            one JSON inference correctly, and its /metrics outcome counters must
            equal the client's counts over the overload phase.
  sampled   per second: server RSS (/proc/<pid>/status VmRSS), threads, open
            fds, server CPU, generator CPU, and the whole machine's CPU (so
            other load on a shared machine is visible).

Outputs: bench/results/soak.json (raw per-second windows and samples),
bench/results/soak.png, bench/SOAK.md (`--from-json bench/results/soak.json`
rewrites the last two from the first without measuring). Timing is measured,
never asserted.
Exit status 1 when the server crashed or stopped being ready, an answer was
neither 200 nor a 503 naming its limit (connection errors, timeouts, other
statuses), an output was wrong, or the metrics disagree with the client.
"""
import argparse
import asyncio
import collections
import datetime as dt
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_bench_models as mbm  # noqa: E402  (bench/ is not a package)
from bench_common import BENCH, COMMANDS, LOGS, RESULTS, ROOT, WORK, git_head, machine_info  # noqa: E402
from bench_measure import histogram_delta, scrape_metrics  # noqa: E402
from bench_procs import Procs, log_tail, tree_cpu_seconds  # noqa: E402
from bench_servers import OrtServe, http_get, http_post, wait_ready  # noqa: E402

SOAK_WORK = WORK / "soak"
MODEL = "cnn_soak"
INPUT, OUTPUT = "INPUT0", "OUTPUT0"
INPUT_DIMS = [3, 64, 64]
N_INPUTS = 8          # distinct request tensors, each with its reference output
HIGH, LOW = 1, 2      # Triton priority levels: 1 is served first
LIMIT_RE = re.compile(r"max_queue_size \d+")


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------
# Model repository

def write_repo(args):
    """The soak model in a repository of its own (so the thread plan is all
    its own). Returns (repo path, config text, model path)."""
    repo = SOAK_WORK / "repo"
    d = repo / MODEL / "1"
    d.mkdir(parents=True, exist_ok=True)
    model = mbm.make_cnn(np.random.default_rng(2))  # the seed make_bench_models uses for `cnn`
    model.graph.name = MODEL
    path = d / "model.onnx"
    data = model.SerializeToString()
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)
    cfg = f"""name: "{MODEL}"
platform: "onnxruntime_onnx"
max_batch_size: {args.max_batch}
input [ {{ name: "{INPUT}" data_type: TYPE_FP32 dims: [ {", ".join(map(str, INPUT_DIMS))} ] }} ]
output [ {{ name: "{OUTPUT}" data_type: TYPE_FP32 dims: [ 10 ] }} ]
instance_group [ {{ count: 1, kind: KIND_CPU }} ]
dynamic_batching {{
  max_queue_delay_microseconds: {args.queue_delay_us}
  priority_levels: 2
  default_priority_level: {LOW}
  default_queue_policy {{ max_queue_size: {args.queue_low} }}
  priority_queue_policy {{ key: {HIGH} value {{ max_queue_size: {args.queue_high} }} }}
  priority_queue_policy {{ key: {LOW} value {{ max_queue_size: {args.queue_low} }} }}
}}
"""
    (repo / MODEL / "config.pbtxt").write_text(cfg)
    return repo, cfg, path


def make_inputs_and_refs(model_path):
    import onnxruntime as ort
    rng = np.random.default_rng(5)
    xs = rng.uniform(-1.0, 1.0, size=(N_INPUTS, *INPUT_DIMS)).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
    refs = [sess.run([OUTPUT], {INPUT: xs[i:i + 1]})[0].reshape(-1) for i in range(N_INPUTS)]
    return xs, refs


def build_request(x, priority, port):
    """One complete HTTP/1.1 request: KServe v2 JSON header + binary tensor
    (Triton's binary tensor extension), JSON output."""
    raw = x.astype("<f4").tobytes()
    header = json.dumps({
        "inputs": [{"name": INPUT, "shape": [1] + INPUT_DIMS, "datatype": "FP32",
                    "parameters": {"binary_data_size": len(raw)}}],
        "outputs": [{"name": OUTPUT, "parameters": {"binary_data": False}}],
        "parameters": {"priority": priority}}, separators=(",", ":")).encode()
    body = header + raw
    head = (f"POST /v2/models/{MODEL}/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(header)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head + body


# --------------------------------------------------------------------------
# Sampling the server and the machine once a second (its own thread, so a busy
# event loop cannot skew it)

def _proc_status(pid):
    rss = threads = None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    except OSError:
        pass
    return rss, threads


def _machine_jiffies():
    f = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]  # idle + iowait
    return sum(f[:8]) - idle, sum(f[:8])


def thread_times(pid):
    """Per thread name of the server: [threads, CPU s, run-queue wait s]
    (/proc/<pid>/task/*/schedstat: time on a CPU, time runnable but waiting
    for one). Wait time shows which threads were starved of CPU."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            run_ns, wait_ns, _slices = map(int, Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split())
        except (OSError, ValueError):
            continue
        name = re.sub(r"[-_ ]?\d+$", "", name) or name  # one row per pool ("http-io-0", "http-io-1")
        row = out.setdefault(name, [0, 0.0, 0.0])
        row[0] += 1
        row[1] += run_ns / 1e9
        row[2] += wait_ns / 1e9
    return out


def thread_delta(t0, t1):
    return {k: {"threads": v[0], "cpu_s": round(v[1] - t0.get(k, [0, 0, 0])[1], 2),
                "runqueue_wait_s": round(v[2] - t0.get(k, [0, 0, 0])[2], 2)}
            for k, v in sorted(t1.items(), key=lambda kv: -kv[1][1])}


class Sampler(threading.Thread):
    def __init__(self, pid, interval=1.0):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.samples = []
        self.stop_evt = threading.Event()

    def sample(self):
        rss, threads = _proc_status(self.pid)
        try:
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            fds = None
        busy, total = _machine_jiffies()
        t = os.times()
        self.samples.append({"t": time.monotonic(), "rss_kb": rss, "threads": threads, "fds": fds,
                             "server_cpu_s": tree_cpu_seconds(self.pid),
                             "gen_cpu_s": t.user + t.system,
                             "machine_busy_j": busy, "machine_total_j": total})

    def run(self):
        nxt = time.monotonic()
        while not self.stop_evt.is_set():
            self.sample()
            nxt += self.interval
            self.stop_evt.wait(max(0.0, nxt - time.monotonic()))

    def stop(self):
        self.stop_evt.set()
        self.join(timeout=5)


# --------------------------------------------------------------------------
# The load generator: asyncio streams, persistent HTTP/1.1 connections

class Rec:
    """Per-request outcomes. code: HTTP status, or -1 connection error,
    -2 client timeout, -3 wrong output, -4 503 without the limit named.
    Times in seconds from the scheduled arrival: lag (the generator started
    it), wlag (its last byte was written: includes waiting for a connection
    and for the server to read), lat (the answer's last byte was read)."""
    __slots__ = ("t_sched", "prio", "code", "lat", "lag", "wlag")

    def __init__(self, t_sched, prio, code, lat, lag, wlag):
        self.t_sched, self.prio, self.code, self.lat, self.lag, self.wlag = t_sched, prio, code, lat, lag, wlag


class Generator:
    def __init__(self, port, requests, refs, timeout_s, max_connections):
        self.port, self.requests, self.refs, self.timeout_s = port, requests, refs, timeout_s
        self.max_connections = max_connections
        self.idle = collections.deque()
        self.waiters = collections.deque()  # futures of arrivals waiting for a connection (at the cap)
        self.open_now = 0        # connections open (idle and busy)
        self.max_open = 0
        self.opened = 0          # connections opened (pool and on demand)
        self.opened_on_demand = 0
        self.conn_waits = 0      # arrivals that found max_connections busy and waited
        self.stale_dropped = 0   # idle connections the server had closed
        self.recs = []
        self.messages = collections.Counter()   # 503 and error messages
        self.in_flight = 0
        self.max_in_flight = 0

    async def _open(self):
        self.open_now += 1
        self.max_open = max(self.max_open, self.open_now)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", self.port)
        except BaseException:
            self._closed()
            raise
        self.opened += 1
        return r, w

    def _release(self, conn):
        """A connection whose exchange is over and that stays open."""
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(conn)
                return
        self.idle.append(conn)

    def _closed(self):
        self.open_now -= 1
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # room for one more: the waiter opens it
                return

    async def fill_pool(self, n):
        for _ in range(n):
            self.idle.append(await self._open())

    async def _conn(self):
        while self.idle:
            r, w = self.idle.popleft()   # FIFO: every pooled connection stays in use
            if r.at_eof() or w.is_closing():
                self.stale_dropped += 1
                w.close()
                self._closed()
                continue
            return r, w
        if self.open_now >= self.max_connections:
            self.conn_waits += 1
            fut = asyncio.get_running_loop().create_future()
            self.waiters.append(fut)
            try:
                conn = await fut
            except asyncio.CancelledError:
                # Timed out while waiting; a connection handed over meanwhile goes to the next one.
                if fut.done() and not fut.cancelled():
                    if fut.result() is not None:
                        self._release(fut.result())
                    else:
                        self.open_now += 1  # the room it was given
                        self._closed()
                raise
            if conn is not None:
                return conn
        self.opened_on_demand += 1
        return await self._open()

    async def close_pool(self):
        while self.idle:
            _r, w = self.idle.popleft()
            w.close()
            self._closed()

    async def _exchange(self, msg, times):
        r, w = await self._conn()
        try:
            w.write(msg)
            await w.drain()
            times.append(time.monotonic())
            head = await r.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            low = head.lower()
            i = low.find(b"content-length:")
            if i < 0:
                raise ConnectionError("response without Content-Length")
            n = int(low[i + 15:low.index(b"\r\n", i)])
            body = await r.readexactly(n)
        except BaseException:
            w.close()
            self._closed()
            raise
        if b"connection: close" in low:
            w.close()
            self._closed()
        else:
            self._release((r, w))
        return status, body

    async def one(self, t_sched, prio, idx, t_base):
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        t_send = time.monotonic()
        times = []
        try:
            status, body = await asyncio.wait_for(self._exchange(self.requests[prio][idx], times), self.timeout_s)
            code = status
            if status == 200:
                try:
                    out = json.loads(body)["outputs"][0]
                    got = np.asarray(out["data"], np.float32)
                    if out["name"] != OUTPUT or not np.allclose(got, self.refs[idx], rtol=1e-3, atol=1e-4):
                        code = -3
                        self.messages[f"wrong output for input {idx}"] += 1
                except (ValueError, KeyError, IndexError, TypeError) as e:
                    code = -3
                    self.messages[f"unparsable 200 body: {e}"] += 1
            else:
                try:
                    msg = json.loads(body).get("error", "")
                except ValueError:
                    msg = body[:200].decode(errors="replace")
                self.messages[f"{status}: {msg}"] += 1
                if status == 503 and not LIMIT_RE.search(msg):
                    code = -4
        except asyncio.TimeoutError:
            code = -2
            self.messages[f"client timeout after {self.timeout_s} s"] += 1
        except (OSError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            code = -1
            self.messages[f"connection error: {type(e).__name__}: {e}"] += 1
        except Exception as e:  # anything else is an error too, never a lost record
            code = -1
            self.messages[f"client error: {type(e).__name__}: {e}"] += 1
        t_done = time.monotonic()
        self.in_flight -= 1
        self.recs.append(Rec(t_sched - t_base, prio, code, t_done - t_sched, t_send - t_sched,
                             (times[0] if times else t_done) - t_sched))

    async def closed_loop(self, concurrency, seconds, high_share, rng):
        """`concurrency` clients, each sending its next request when the last is answered."""
        t_base = time.monotonic()
        end = t_base + seconds

        async def client(k):
            i = k
            while time.monotonic() < end:
                prio = HIGH if rng.random() < high_share else LOW
                await self.one(time.monotonic(), prio, i % N_INPUTS, t_base)
                i += 1
        await asyncio.gather(*(client(k) for k in range(concurrency)))
        return t_base

    async def open_loop(self, rate, seconds, high_share, rng):
        """Poisson arrivals at `rate` per second for `seconds`; never waits for answers."""
        tasks = set()
        t_base = time.monotonic() + 0.2
        t_next = t_base + rng.exponential(1.0 / rate)
        end = t_base + seconds
        k = 0
        while t_next < end:
            now = time.monotonic()
            while t_next <= now and t_next < end:
                prio = HIGH if rng.random() < high_share else LOW
                task = asyncio.create_task(self.one(t_next, prio, k % N_INPUTS, t_base))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                k += 1
                t_next += rng.exponential(1.0 / rate)
            await asyncio.sleep(max(0.0, min(t_next, end) - time.monotonic()))
        t_last_arrival = time.monotonic()
        if tasks:
            await asyncio.wait(tasks, timeout=self.timeout_s + 10)
        return t_base, k, t_last_arrival


# --------------------------------------------------------------------------
# Server-side checks

HISTOGRAMS = ("ortserve_request_duration_seconds", "ortserve_queue_duration_seconds", "ortserve_batch_size")


def check_json_inference(base, xs, refs):
    body = json.dumps({"inputs": [{"name": INPUT, "shape": [1] + INPUT_DIMS, "datatype": "FP32",
                                   "data": xs[0].reshape(-1).tolist()}]}).encode()
    try:
        status, resp = http_post(f"{base}/v2/models/{MODEL}/infer", body, timeout=30.0)
        o = json.loads(resp)["outputs"][0]
        got = np.asarray(o["data"], np.float32).reshape(-1)
        if status != 200 or not np.allclose(got, refs[0], rtol=1e-3, atol=1e-4):
            return False, f"status {status}, max abs diff {np.abs(got - refs[0]).max():.3g}"
        return True, f"matches onnxruntime (max abs diff {np.abs(got - refs[0]).max():.2g})"
    except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
        return False, f"infer failed: {e}"


def is_ready(base):
    try:
        return (http_get(base + "/v2/health/ready", timeout=5.0)[0] == 200
                and http_get(f"{base}/v2/models/{MODEL}/ready", timeout=5.0)[0] == 200)
    except (urllib.error.URLError, OSError):
        return False


# --------------------------------------------------------------------------
# Aggregation

def pct(a, q):
    return float(np.percentile(a, q)) if len(a) else None


def ms(v):
    return None if v is None else round(v * 1e3, 2)


def summarize(recs, seconds):
    lat = lambda p=None: np.array([r.lat for r in recs if r.code == 200 and (p is None or r.prio == p)])
    by = lambda p=None: [r for r in recs if p is None or r.prio == p]
    out = {}
    for key, p in (("all", None), ("high", HIGH), ("low", LOW)):
        rs, la = by(p), lat(p)
        n = len(rs)
        acc = sum(1 for r in rs if r.code == 200)
        rej = sum(1 for r in rs if r.code == 503)
        out[key] = {"sent": n, "accepted": acc, "rejected": rej, "errors": n - acc - rej,
                    "offered_per_s": round(n / seconds, 1), "accepted_per_s": round(acc / seconds, 1),
                    "rejected_pct": round(100.0 * rej / n, 2) if n else None,
                    "p50_ms": ms(pct(la, 50)), "p90_ms": ms(pct(la, 90)), "p99_ms": ms(pct(la, 99)),
                    "p999_ms": ms(pct(la, 99.9)), "max_ms": ms(float(la.max()) if len(la) else None)}
    lags = np.array([r.lag for r in recs])
    out["send_lag_ms"] = {"p50": ms(pct(lags, 50)), "p99": ms(pct(lags, 99)),
                          "max": ms(float(lags.max()) if len(lags) else None)}
    wl = np.array([r.wlag for r in recs])
    out["written_lag_ms"] = {"p50": ms(pct(wl, 50)), "p99": ms(pct(wl, 99)),
                             "max": ms(float(wl.max()) if len(wl) else None)}
    out["error_codes"] = dict(collections.Counter(r.code for r in recs if r.code not in (200, 503)))
    return out


def windows(recs, seconds):
    """Per 1 s window of scheduled arrival time."""
    buckets = [[] for _ in range(int(np.ceil(seconds)))]
    for r in recs:
        i = int(r.t_sched)
        if 0 <= i < len(buckets):
            buckets[i].append(r)
    rows = []
    for i, b in enumerate(buckets):
        row = {"t": i, "offered": len(b), "accepted": 0, "rejected": 0, "errors": 0}
        for key, p in (("all", None), ("high", HIGH), ("low", LOW)):
            la = np.array([r.lat for r in b if r.code == 200 and (p is None or r.prio == p)])
            sfx = "" if key == "all" else "_" + key
            row["p50_ms" + sfx] = ms(pct(la, 50))
            row["p99_ms" + sfx] = ms(pct(la, 99))
            if p is not None:
                pb = [r for r in b if r.prio == p]
                row["offered" + sfx] = len(pb)
                row["rejected" + sfx] = sum(1 for r in pb if r.code == 503)
        for r in b:
            if r.code == 200:
                row["accepted"] += 1
            elif r.code == 503:
                row["rejected"] += 1
            else:
                row["errors"] += 1
        row["lag_p99_ms"] = ms(pct(np.array([r.lag for r in b]), 99))
        row["written_lag_p99_ms"] = ms(pct(np.array([r.wlag for r in b]), 99))
        rows.append(row)
    return rows


def sample_rows(samples, t0):
    """Samples -> per-second rows relative to t0 (start of the overload phase)."""
    rows = []
    for a, b in zip(samples, samples[1:]):
        dt_s = b["t"] - a["t"]
        if dt_s <= 0:
            continue
        dj = b["machine_total_j"] - a["machine_total_j"]
        ncpu = os.cpu_count() or 1
        rows.append({"t": round(b["t"] - t0, 2), "rss_mib": round(b["rss_kb"] / 1024, 2) if b["rss_kb"] else None,
                     "threads": b["threads"], "fds": b["fds"],
                     "server_cpu_pct": round(100 * (b["server_cpu_s"] - a["server_cpu_s"]) / dt_s, 1),
                     "gen_cpu_pct": round(100 * (b["gen_cpu_s"] - a["gen_cpu_s"]) / dt_s, 1),
                     "machine_cpu_pct": round(100 * ncpu * (b["machine_busy_j"] - a["machine_busy_j"]) / dj, 1)
                     if dj > 0 else None})
    return rows


def rss_slope(rows, t_from, t_to):
    pts = [(r["t"], r["rss_mib"]) for r in rows if t_from <= r["t"] <= t_to and r["rss_mib"] is not None]
    if len(pts) < 3:
        return None
    t, v = np.array(pts).T
    return float(np.polyfit(t / 60.0, v, 1)[0])  # MiB per minute


# --------------------------------------------------------------------------
# Plot and report

def plot(out, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    w, s = out["overload"]["windows"], out["samples"]
    fig, axes = plt.subplots(4, 1, figsize=(10, 12), sharex=True)
    t = [r["t"] + 0.5 for r in w]
    ax = axes[0]
    ax.plot(t, [r["offered"] for r in w], label="offered")
    ax.plot(t, [r["accepted"] for r in w], label="accepted (200)")
    ax.plot(t, [r["rejected"] for r in w], label="rejected (503)")
    ax.axhline(out["capacity"]["rate_per_s"], color="grey", ls="--", lw=1, label="capacity (closed loop)")
    ax.set_ylabel("requests / s")
    ax.set_title(f"ortserve overload at {out['overload']['target_rate_per_s']:.0f} req/s "
                 f"({out['args']['multiplier']:g}x capacity), model {MODEL}")
    ax.legend(fontsize=8, loc="center right")
    ax = axes[1]
    for key, lab in (("", "all"), ("_high", "high (priority 1)"), ("_low", "low (priority 2)")):
        if key:
            ax.plot(t, [100 * r["rejected" + key] / r["offered" + key] if r["offered" + key] else None
                        for r in w], label=lab)
        else:
            ax.plot(t, [100 * r["rejected"] / r["offered"] if r["offered"] else None for r in w], label=lab)
    ax.set_ylabel("rejected (%)")
    ax.set_ylim(-2, 102)
    ax.legend(fontsize=8)
    ax = axes[2]
    for key, lab in (("", "all accepted"), ("_high", "high (priority 1)"), ("_low", "low (priority 2)")):
        ax.plot(t, [r["p99_ms" + key] for r in w], label=lab)
    ax.set_ylabel("p99 latency of accepted (ms)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax = axes[3]
    ts = [r["t"] for r in s]
    ax.plot(ts, [r["rss_mib"] for r in s], color="tab:purple", label="server RSS")
    ax.set_ylabel("server RSS (MiB)")
    hi = max((r["rss_mib"] for r in s if r["rss_mib"] is not None), default=0)
    ax.set_ylim(0, hi * 1.15 + 1)
    ax.axvspan(min(ts), 0, color="grey", alpha=0.12, label="start-up + capacity phase")
    ax.axvspan(out["overload"]["seconds"], max(ts), color="green", alpha=0.08, label="after the load")
    ax2 = ax.twinx()
    ax2.plot(ts, [r["server_cpu_pct"] for r in s], color="tab:orange", lw=0.8, alpha=0.7, label="server CPU %")
    ax2.plot(ts, [r["machine_cpu_pct"] for r in s], color="tab:grey", lw=0.8, alpha=0.7, label="machine CPU %")
    ax2.set_ylabel("CPU % (100 = one core)")
    ax2.set_ylim(0, 100 * (os.cpu_count() or 1) * 1.1)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower right")
    ax.set_xlabel("seconds since the start of the overload")
    for a in axes:
        a.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def f(v, nd=1):
    return "–" if v is None else f"{v:,.{nd}f}"


def server_side_row(ss):
    rd, qd, bs = ss.get("ortserve_request_duration_seconds"), ss.get("ortserve_queue_duration_seconds"), \
        ss.get("ortserve_batch_size")
    if not rd or not rd.get("count"):
        return "| server side (its histograms) | – |"
    le = lambda v: "–" if v is None else ("> 10 s" if v == float("inf") else f"≤ {v * 1e3:,.0f} ms")
    return (f"| server side, accepted requests (ortserve's histograms) | arrival to response mean "
            f"{rd['mean'] * 1e3:,.1f} ms, p99 {le(rd['p99_le'])}; queue mean {qd['mean'] * 1e3:,.1f} ms; "
            f"{bs['count']:,} executions, mean batch {bs['mean']:.2f} |")


def write_md(out, path, png_rel):
    a, cap, ov, mem = out["args"], out["capacity"], out["overload"], out["memory"]
    s, chk = ov["summary"], out["checks"]
    L = ["# Overload and soak: ortserve at 3x its sustainable rate", "",
         f"Generated by `bench/soak.py` on {out['meta']['started']} (finished {out['meta']['finished']}), "
         f"commit `{out['meta']['commit']}` (plus the working tree), verdict **{out['verdict']}**.", "",
         "```", out["meta"]["command"], "```", "",
         f"Server: `{out['args']['ortserve_bin']}`, CMake build type {out['meta'].get('build_type') or 'unknown'}"
         + ("" if out["meta"].get("build_type") in (None, "Release", "RelWithDebInfo")
            else " (**not an optimised build: these figures say little about a Release build**)") + ".", "",
         f"Machine: {out['meta']['machine']['cpu']}, {out['meta']['machine']['cores']} cores, shared: the load "
         "generator (one Python process, asyncio) runs on the same cores as the server. "
         f"`uptime` before: `{out['meta']['uptime_before']}`; after: `{out['meta']['uptime_after']}`. "
         f"During the overload the whole machine was busy {f(out['machine_cpu_pct_overload'])}% "
         f"(100% = one core) of which the server {f(ov['server_cpu_pct'])}% and the generator "
         f"{f(ov['generator_cpu_pct'])}%; the rest ({f(out['other_cpu_pct_overload'])}%) is other work on "
         "the machine.", "",
         f"Model `{MODEL}`: the bench CNN (`cnn`: a Conv+Relu stack on [3,64,64], about 3.5 ms per "
         f"inference on 2 threads in-process, see RESULTS.md), max_batch_size {a['max_batch']}, dynamic batching with "
         f"max_queue_delay {a['queue_delay_us']} us, `priority_levels: 2`, `default_priority_level: 2`, "
         f"`priority_queue_policy` max_queue_size {a['queue_high']} (level 1, high) and {a['queue_low']} "
         f"(level 2, low), `default_queue_policy` max_queue_size {a['queue_low']}; thread budget "
         f"{a['thread_budget']}. Requests: binary tensor in (Triton extension, 49 KB), JSON out, "
         f"`parameters: {{\"priority\": 1}}` for {a['high_share']:.0%} of them, 2 for the rest.", "",
         "## Headline", "",
         "| figure | value |", "|---|---|",
         f"| capacity (closed loop, {a['capacity_concurrency']} clients, {a['capacity_seconds']:g} s) | "
         f"**{f(cap['rate_per_s'])} req/s** (p50 {f(cap['p50_ms'])} ms, p99 {f(cap['p99_ms'])} ms, "
         f"server CPU {f(cap['server_cpu_pct'])}%) |",
         f"| offered (open loop, Poisson, {a['multiplier']:g}x capacity, {f(ov['seconds'], 0)} s) | target "
         f"{f(ov['target_rate_per_s'])} req/s, achieved **{f(ov['achieved_rate_per_s'])} req/s** "
         f"({ov['sent']:,} requests; send lag p50 {f(s['send_lag_ms']['p50'], 2)} ms, p99 "
         f"{f(s['send_lag_ms']['p99'], 2)} ms, max {f(s['send_lag_ms']['max'], 1)} ms; last byte written p99 "
         f"{f(s['written_lag_ms']['p99'], 2)} ms after the scheduled arrival) |",
         f"| accepted (200, outputs checked) | **{f(s['all']['accepted_per_s'])} req/s** "
         f"({f(100 * s['all']['accepted_per_s'] / cap['rate_per_s'] if cap['rate_per_s'] else None, 0)}% of "
         f"capacity); high {f(s['high']['accepted_per_s'])}/s, low {f(s['low']['accepted_per_s'])}/s |",
         f"| rejected (503 at once, limit named) | **{f(s['all']['rejected_pct'])}%** of all; high "
         f"{f(s['high']['rejected_pct'])}%, low {f(s['low']['rejected_pct'])}% |",
         f"| 503 answer time | p50 {f(ov['rejected_latency_ms']['p50'], 2)} ms, p99 "
         f"{f(ov['rejected_latency_ms']['p99'], 2)} ms |",
         f"| p99 of accepted: all / high / low | **{f(s['all']['p99_ms'])} / {f(s['high']['p99_ms'])} / "
         f"{f(s['low']['p99_ms'])} ms** (p50 {f(s['all']['p50_ms'])} / {f(s['high']['p50_ms'])} / "
         f"{f(s['low']['p50_ms'])} ms; max {f(s['all']['max_ms'])} ms) |",
         server_side_row(out.get("server_side") or {}),
         f"| server RSS: ready / overload start / end / max / after {a['idle_seconds']:g} s idle | "
         f"{f(mem['ready_mib'])} / {f(mem['overload_start_mib'])} / {f(mem['overload_end_mib'])} / "
         f"{f(mem['max_mib'])} / {f(mem['after_idle_mib'])} MiB |",
         f"| RSS slope after {f(mem['warmup_s'], 0)} s warm-up (least squares) | **{f(mem['slope_mib_per_min'], 3)} "
         f"MiB/min** |",
         f"| server threads / open fds (start → end) | {mem['threads_start']} → {mem['threads_end']} / "
         f"{mem['fds_start']} → {mem['fds_end']} |",
         f"| errors (not 200, not 503 naming its limit; connection errors, timeouts, wrong outputs) | "
         f"**{ov['errors']}** |",
         f"| crashes | **{0 if chk['server_alive'] else 1}** (still ready after the load: "
         f"{'yes' if chk['ready_after'] else 'NO'}; exit status {chk['exit_status']}, 0 = clean stop on SIGTERM) |",
         f"| inference after the load (JSON, vs onnxruntime) | {chk['inference_after']} |",
         f"| /metrics vs client (overload phase) | success {(chk['metrics'] or {}).get('success')} vs "
         f"{s['all']['accepted']} answered 200, rejected {(chk['metrics'] or {}).get('rejected')} vs "
         f"{s['all']['rejected']} answered 503: **{'consistent' if chk['metrics_consistent'] else 'MISMATCH'}** |",
         "", "503 messages (each names its limit):", ""]
    for m, n in sorted(ov["messages"].items(), key=lambda kv: -kv[1]):
        L.append(f"- {n:,} x `{m}`")
    th = out.get("server_threads") or {}
    if th:
        L += ["", "Server threads over the overload phase (until its last answer), from "
              "/proc/<pid>/task/*/schedstat: time on a CPU, and time runnable but waiting for a CPU:", "",
              "| thread (pool) | threads | CPU s | run-queue wait s |", "|---|---|---|---|"]
        L += [f"| `{k}` | {v['threads']} | {f(v['cpu_s'], 2)} | {f(v['runqueue_wait_s'], 2)} |"
              for k, v in th.items() if v["cpu_s"] >= 0.01 or v["runqueue_wait_s"] >= 0.01]
    L += ["", f"![soak]({png_rel})", "", "## Reading", ""] + [f"- {x}" for x in out["reading"]] + [""]
    L += ["## Over time", "", "Spans of 30 s of scheduled arrival time; p99 of the accepted requests that "
          "arrived in the span, from the scheduled arrival to the last byte of the answer; RSS at the span's end.", "",
          "| seconds | offered/s | accepted/s | rejected % (high / low) | p99 high ms | p99 low ms | "
          "RSS MiB | server CPU % | machine CPU % |", "|---|---|---|---|---|---|---|---|---|"]
    for row in out["over_time"]:
        L.append(f"| {row['from']}-{row['to']} | {f(row['offered_per_s'])} | {f(row['accepted_per_s'])} | "
                 f"{f(row['rejected_pct'])} ({f(row['rejected_pct_high'])} / {f(row['rejected_pct_low'])}) | "
                 f"{f(row['p99_ms_high'])} | {f(row['p99_ms_low'])} | {f(row['rss_mib'])} | "
                 f"{f(row['server_cpu_pct'])} | {f(row['machine_cpu_pct'])} |")
    L += ["", "## How it is measured", "",
          "- Capacity: a closed loop (each client sends its next request when the last is answered) with the same "
          "request mix, through the same generator, so the generator's own CPU is part of what the server "
          "competes with in both phases.",
          "- Overload: Poisson arrivals scheduled in advance; each arrival takes an idle persistent HTTP/1.1 "
          f"connection (pool of {a['connections']}, FIFO) or opens a new one "
          f"({ov['connections_opened_on_demand']} opened during the load, at most {ov['max_connections_open']} "
          f"open at once, cap {a['max_connections']}, {ov['arrivals_that_waited_for_a_connection']} arrivals "
          f"waited for one; {ov['stale_connections_dropped']} dropped because the server had closed them; at most "
          f"{ov['max_in_flight']} requests in flight). "
          "Latency runs from the scheduled arrival, so if the generator fell behind, its lag is counted as "
          "latency (no coordinated omission).",
          "- Every 200 is compared with onnxruntime in Python (8 distinct inputs). A 503 must name "
          "`max_queue_size N`. Anything else is an error.",
          "- Per second (own thread): server VmRSS, threads and fds from /proc/<pid>, server CPU (utime+stime), "
          "the generator's CPU, the machine's CPU from /proc/stat.",
          "- Raw data: `bench/results/soak.json` (per-second windows, samples, messages, metrics).", ""]
    Path(path).write_text("\n".join(L))


def reading(out):
    cap, ov, mem, s = out["capacity"], out["overload"], out["memory"], out["overload"]["summary"]
    R = []
    ratio = ov["achieved_rate_per_s"] / ov["target_rate_per_s"] if ov["target_rate_per_s"] else 0
    lag99 = s["send_lag_ms"]["p99"] or 0
    if ratio > 0.97 and lag99 < 20:
        kept = "The generator kept up"
    elif ratio > 0.97:
        kept = ("The generator kept the rate but was late at times (it shares the cores with the server and "
                "whatever else runs; its lag counts as latency in every figure here, it is not hidden)")
    else:
        kept = "The generator did NOT keep up (the offered rate is lower than the target)"
    R.append(f"{kept}: {ov['achieved_rate_per_s']:.0f} of {ov['target_rate_per_s']:.0f} req/s sent, send lag "
             f"p50 {f(s['send_lag_ms']['p50'], 2)} ms, p99 {f(lag99)} ms, using {ov['generator_cpu_pct']:.0f}% of "
             "a core.")
    cores = out["meta"]["machine"]["cores"] or 1
    if cap["server_cpu_pct"] is not None and cap["server_cpu_pct"] < 80 * cores:
        R.append(f"Capacity is that of this machine at that moment: during the closed loop the server got "
                 f"{cap['server_cpu_pct']:.0f}% CPU of the {100 * cores}% its {cores} cores offer; the generator "
                 "and other work on the machine had the rest. On free cores it would be higher, and so would 3x.")
    share = s["all"]["accepted_per_s"] / cap["rate_per_s"]
    why = ("" if share >= 0.95 else
           f"; reading, parsing and refusing the other {s['all']['rejected_pct']:.0f}% of the requests costs "
           "server CPU too, and the generator's 3x traffic shares the cores")
    R.append(f"At {ov['achieved_rate_per_s'] / cap['rate_per_s']:.1f}x the measured capacity the server "
             f"answered {s['all']['accepted_per_s']:.0f} req/s with 200, {100 * share:.0f}% of its closed-loop "
             f"capacity{why}. It refused the excess at once: a 503 arrived p50 "
             f"{f(ov['rejected_latency_ms']['p50'])} ms, p99 {f(ov['rejected_latency_ms']['p99'])} ms after the "
             "request's scheduled arrival.")
    hp, lp = s["high"], s["low"]
    little_ms = 1e3 * out["args"]["queue_low"] / lp["accepted_per_s"] if lp["accepted_per_s"] else None
    never = "never" if hp["rejected"] == 0 else f"{f(hp['rejected_pct'])}% of the time"
    honoured = ((hp["rejected_pct"] or 0) <= (lp["rejected_pct"] or 0)
                and (hp["p99_ms"] or 0) <= (lp["p99_ms"] or float("inf")))
    R.append(f"Priorities {'are honoured' if honoured else 'are NOT honoured'}: high-priority requests ({out['args']['high_share']:.0%} of arrivals, "
             f"{hp['offered_per_s']:.0f}/s) were {never} rejected and had p99 {f(hp['p99_ms'])} ms; "
             f"low-priority ones absorbed the overload "
             f"({f(lp['rejected_pct'])}% rejected). Their latency is what their queue bound allows: a full queue "
             f"of {out['args']['queue_low']} drained at {f(lp['accepted_per_s'])} req/s (what the high level leaves) "
             f"holds a request about {f(little_ms, 0)} ms (Little's law); measured p50 {f(lp['p50_ms'], 0)} ms, "
             f"p99 {f(lp['p99_ms'], 0)} ms.")
    slope = mem["slope_mib_per_min"]
    flat = ("no slope (too few samples)" if slope is None else
            f"{slope:+.3f} MiB/min ({'flat' if abs(slope) < 1.0 else 'NOT flat'}: {abs(slope) * 60:.1f} MiB per "
            "hour at that rate)")
    R.append(f"Memory: RSS went from {f(mem['overload_start_mib'])} to {f(mem['overload_end_mib'])} MiB over "
             f"the overload (max {f(mem['max_mib'])}); after the first {mem['warmup_s']:.0f} s its slope is "
             f"{flat}. Threads {mem['threads_start']} → "
             f"{mem['threads_end']}, open fds {mem['fds_start']} → {mem['fds_end']}"
             + (" (the generator opened connections when more requests were in flight than its pool held; "
                "each holds server buffers)" if (mem["fds_end"] or 0) > (mem["fds_start"] or 0) else "") + ".")
    after = [r["rss_mib"] for r in out["samples"]
             if mem["warmup_s"] <= r["t"] <= out["overload"]["seconds"] and r["rss_mib"] is not None]
    if after:
        R[-1] += (f" After the warm-up RSS stayed between {min(after):.1f} and {max(after):.1f} MiB "
                  f"(last {out['overload']['seconds'] - mem['warmup_s']:.0f} s of the overload).")
    io = (out.get("server_threads") or {}).get("http-io")
    if io and ov["sent"]:
        R.append(f"Where the server's CPU went: its HTTP I/O threads used {io['cpu_s']:.1f} s of CPU for "
                 f"{ov['sent']:,} requests ({1e3 * io['cpu_s'] / ov['sent']:.2f} ms each: reading 49 KB, "
                 f"parsing, answering) and spent {io['runqueue_wait_s']:.1f} s runnable but waiting for a CPU: "
                 "the compute threads (and any other work on the machine) keep the cores busy under overload, "
                 "and the front end competes with them on equal terms, which is what stretches a 503's p99.")
    chk = out["checks"]
    R.append(f"Errors: {ov['errors']} (connection errors, timeouts, statuses other than 200/503, wrong outputs, "
             f"503s without the limit); the server {'stayed up and ready' if chk['server_alive'] and chk['ready_after'] else 'did NOT survive'}, "
             f"{'answered' if chk['inference_ok'] else 'did NOT answer'} a JSON inference correctly afterwards "
             f"({chk['inference_after']}) and its /metrics "
             f"outcome counters {'equal' if chk['metrics_consistent'] else 'DIFFER FROM'} the client's counts.")
    return R


def spans(recs, seconds, step=30):
    """Latency and counts per `step` s of scheduled arrival time."""
    rows = []
    for a in np.arange(0, seconds, step):
        b = min(seconds, a + step)
        rs = [r for r in recs if a <= r.t_sched < b]
        n_s = b - a
        row = {"from": int(a), "to": int(round(b)), "offered_per_s": len(rs) / n_s,
               "accepted_per_s": sum(1 for r in rs if r.code == 200) / n_s}
        for key, pr in (("", None), ("_high", HIGH), ("_low", LOW)):
            sel = [r for r in rs if pr is None or r.prio == pr]
            row["rejected_pct" + key] = (100 * sum(1 for r in sel if r.code == 503) / len(sel)) if sel else None
            row["p99_ms" + key] = ms(pct(np.array([r.lat for r in sel if r.code == 200]), 99))
        rows.append(row)
    return rows


def over_time(span_rows, srows):
    """spans() plus the server's RSS at the end of each span and its mean CPU."""
    for row in span_rows:
        sr = [r for r in srows if row["from"] < r["t"] <= row["to"]]
        row["rss_mib"] = sr[-1]["rss_mib"] if sr else None
        row["server_cpu_pct"] = float(np.mean([r["server_cpu_pct"] for r in sr])) if sr else None
        mc = [r["machine_cpu_pct"] for r in sr if r["machine_cpu_pct"] is not None]
        row["machine_cpu_pct"] = float(np.mean(mc)) if mc else None
    return span_rows


# --------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ortserve-bin", default=str(ROOT / "build" / "ortserve"))
    ap.add_argument("--duration", type=float, default=180.0, help="seconds of overload (default 180)")
    ap.add_argument("--multiplier", type=float, default=3.0, help="offered rate / measured capacity")
    ap.add_argument("--rate", type=float, help="offered rate in req/s (overrides --multiplier)")
    ap.add_argument("--high-share", type=float, default=0.2, help="share of requests with priority 1")
    ap.add_argument("--capacity-seconds", type=float, default=20.0)
    ap.add_argument("--capacity-concurrency", type=int, default=16)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--queue-delay-us", type=int, default=0)
    ap.add_argument("--queue-high", type=int, default=16, help="max_queue_size of priority level 1")
    ap.add_argument("--queue-low", type=int, default=16, help="max_queue_size of priority level 2")
    ap.add_argument("--connections", type=int, default=256,
                    help="keep-alive connections opened up front (more than are ever in flight on a quiet "
                    "machine, so the server's connection count, and the memory it holds, is set at the start)")
    ap.add_argument("--max-connections", type=int, default=4096,
                    help="more are opened on demand up to this; then arrivals wait for one (counted, and "
                    "their latency still runs from the scheduled arrival)")
    ap.add_argument("--request-timeout", type=float, default=30.0, help="client timeout per request (an error)")
    ap.add_argument("--warmup-seconds", type=float, default=30.0,
                    help="start of the overload left out of the RSS slope (at most a quarter of it)")
    ap.add_argument("--idle-seconds", type=float, default=5.0, help="RSS sampled this long after the load")
    ap.add_argument("--thread-budget", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--http-thread-count", type=int, default=0)
    ap.add_argument("--server-cpus", help="taskset CPU list for the server")
    ap.add_argument("--client-cpus", help="CPU list for the generator (sched_setaffinity), e.g. 4-5")
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--from-json", help="only rewrite the report (SOAK.md, PNG, JSON) from this soak.json")
    ap.add_argument("--out-json", default=str(RESULTS / "soak.json"))
    ap.add_argument("--out-png", default=str(RESULTS / "soak.png"))
    ap.add_argument("--out-md", default=str(BENCH / "SOAK.md"))
    return ap.parse_args(argv)


def build_type(binary):
    """CMAKE_BUILD_TYPE of the build folder the binary sits in (None if unknown)."""
    try:
        for line in (Path(binary).resolve().parent / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return line.split("=", 1)[1] or None
    except OSError:
        pass
    return None


def cpu_list(spec):
    cpus = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


async def run_phases(args, server, gen, sampler, rng):
    out = {}
    await gen.fill_pool(min(args.connections, args.capacity_concurrency))
    log(f"capacity: closed loop, {args.capacity_concurrency} clients, {args.capacity_seconds:g} s")
    c0, t0 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    await gen.closed_loop(args.capacity_concurrency, args.capacity_seconds, args.high_share, rng)
    c1, t1 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    # Answers completed after the first seconds (connections and caches warm
    # up) and before the clients stopped sending.
    skip = min(2.0, args.capacity_seconds / 4)
    recs = [r for r in gen.recs if skip <= r.t_sched + r.lat <= args.capacity_seconds]
    secs = args.capacity_seconds - skip
    lat = np.array([r.lat for r in recs if r.code == 200])
    out["capacity"] = {"rate_per_s": round(sum(1 for r in recs if r.code == 200) / secs, 1),
                       "requests": len(gen.recs), "rejected": sum(1 for r in gen.recs if r.code == 503),
                       "errors": sum(1 for r in gen.recs if r.code not in (200, 503)),
                       "p50_ms": ms(pct(lat, 50)), "p99_ms": ms(pct(lat, 99)),
                       "server_cpu_pct": round(100 * (c1 - c0) / (t1 - t0), 1)}
    cap_errors = out["capacity"]["errors"]
    cap_messages = dict(gen.messages)
    log(f"capacity: {out['capacity']['rate_per_s']:.1f} req/s, p99 {out['capacity']['p99_ms']} ms, "
        f"server CPU {out['capacity']['server_cpu_pct']}%, {out['capacity']['rejected']} rejected, "
        f"{cap_errors} errors")
    if out["capacity"]["rate_per_s"] <= 0:
        raise RuntimeError("capacity measured as 0 req/s: the server answered nothing")

    rate = args.rate or args.multiplier * out["capacity"]["rate_per_s"]
    await gen.close_pool()   # a fresh pool: none left idle long enough to meet the server's idle timeout
    gen.recs, gen.messages, gen.opened_on_demand, gen.stale_dropped, gen.max_in_flight = \
        [], collections.Counter(), 0, 0, 0
    gen.conn_waits, gen.max_open = 0, gen.open_now
    await gen.fill_pool(args.connections)
    m0 = scrape_metrics(server.metrics_port, MODEL, HISTOGRAMS)
    log(f"overload: open loop, Poisson {rate:.1f} req/s for {args.duration:g} s, "
        f"{args.high_share:.0%} priority 1, {args.connections} pooled connections")
    c0 = tree_cpu_seconds(server.proc.pid)
    th0 = thread_times(server.proc.pid)
    g0 = sum(os.times()[:2])
    t_base, sent, t_last = await gen.open_loop(rate, args.duration, args.high_share, rng)
    t_end = time.monotonic()
    c1 = tree_cpu_seconds(server.proc.pid)
    th1 = thread_times(server.proc.pid)
    g1 = sum(os.times()[:2])
    try:
        m1 = scrape_metrics(server.metrics_port, MODEL, HISTOGRAMS)
    except (urllib.error.URLError, OSError) as e:  # the server is gone: the checks below say so
        log(f"/metrics unreachable after the load: {e}")
        m1 = None
    await gen.close_pool()
    done = len(gen.recs)
    first = min((r.t_sched + r.lag for r in gen.recs), default=0)
    last = max((r.t_sched + r.lag for r in gen.recs), default=0)
    summary = summarize(gen.recs, args.duration)
    rej_lat = np.array([r.lat for r in gen.recs if r.code == 503])
    out["overload"] = {
        "target_rate_per_s": round(rate, 1), "seconds": args.duration, "t_base": t_base,
        "sent": sent, "completed": done, "unfinished": sent - done,
        "achieved_rate_per_s": round(sent / max(1e-9, last - first) if sent > 1 else 0, 1),
        "server_cpu_pct": round(100 * (c1 - c0) / (t_end - t_base), 1),
        "generator_cpu_pct": round(100 * (g1 - g0) / (t_end - t_base), 1),
        "connections_opened_on_demand": gen.opened_on_demand, "stale_connections_dropped": gen.stale_dropped,
        "max_connections_open": gen.max_open, "arrivals_that_waited_for_a_connection": gen.conn_waits,
        "max_in_flight": gen.max_in_flight,
        "rejected_latency_ms": {"p50": ms(pct(rej_lat, 50)), "p99": ms(pct(rej_lat, 99))},
        "summary": summary, "windows": windows(gen.recs, args.duration), "spans": spans(gen.recs, args.duration),
        "messages": {k: v for k, v in gen.messages.items() if k.startswith("503:")},
        "error_messages": {k: v for k, v in gen.messages.items() if not k.startswith("503:")},
        "errors": (sent - done) + sum(v for k, v in summary["error_codes"].items()),
    }
    out["metrics_delta"] = out["server_side"] = None
    if m1:
        o0, o1 = m0["outcomes"], m1["outcomes"]
        out["metrics_delta"] = {k: o1.get(k, 0) - o0.get(k, 0) for k in sorted(set(o0) | set(o1))}
        out["server_side"] = {h: histogram_delta(m0, m1, h) for h in HISTOGRAMS}
    out["server_threads"] = thread_delta(th0, th1)
    out["capacity"]["messages"] = cap_messages
    log(f"overload: sent {sent} ({out['overload']['achieved_rate_per_s']} req/s), accepted "
        f"{summary['all']['accepted']}, rejected {summary['all']['rejected']} ({summary['all']['rejected_pct']}%), "
        f"errors {out['overload']['errors']}, p99 accepted high/low {summary['high']['p99_ms']}/"
        f"{summary['low']['p99_ms']} ms")
    return out, cap_errors


def main(argv):
    args = parse_args(argv)
    if args.from_json:  # re-render the report of an earlier run, measuring nothing
        out = json.loads(Path(args.from_json).read_text())
        return render(out, args)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: (Procs.stop_all(), sys.exit(128 + s)))
    import atexit
    atexit.register(Procs.stop_all)
    RESULTS.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    binary = Path(args.ortserve_bin)
    if not (binary.exists() and os.access(binary, os.X_OK)):
        log(f"ortserve binary {binary} not found (make build)")
        return 2
    if args.client_cpus:
        os.sched_setaffinity(0, cpu_list(args.client_cpus))
    import resource  # room for every connection, here and in the server (which inherits it)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.max_connections + 256
    if soft < want and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    try:
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        loop_name = "uvloop"
    except ImportError:
        loop_name = "asyncio"

    command = " ".join(shlex.quote(x) for x in [".venv/bin/python", "bench/soak.py"] + list(argv))
    meta = {"started": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine_info(),
            "commit": git_head(), "uptime_before": uptime(), "command": command, "event_loop": loop_name}
    meta["build_type"] = build_type(binary)
    log(f"machine: {meta['uptime_before']}; ortserve build type {meta['build_type'] or 'unknown'}")
    if meta["build_type"] not in (None, "Release", "RelWithDebInfo"):
        log(f"WARNING: {binary} is a {meta['build_type']} build; its figures say little about a Release build")
    repo, cfg, model_path = write_repo(args)
    xs, refs = make_inputs_and_refs(model_path)

    server = OrtServe(binary, repo, args.thread_budget, args.http_thread_count, args.server_cpus,
                         log_name="ortserve-soak.log")
    server.start()
    sampler = None
    failures = []
    out = {"meta": meta, "args": vars(args), "config_pbtxt": cfg}
    try:
        ok, ready = wait_ready(server.base, server.proc, [MODEL], args.ready_timeout)
        if not ok or MODEL not in ready or not server.metrics_port:
            log("ortserve did not become ready (or has no metrics port):\n" + log_tail(LOGS / "ortserve-soak.log"))
            return 1
        meta["server_command"] = COMMANDS[-1] if COMMANDS else ""
        sampler = Sampler(server.proc.pid)
        sampler.start()
        rng = np.random.default_rng(args.seed)
        gen = Generator(server.port, {p: [build_request(xs[i], p, server.port) for i in range(N_INPUTS)]
                                      for p in (HIGH, LOW)}, refs, args.request_timeout, args.max_connections)
        try:
            phases, cap_errors = asyncio.run(run_phases(args, server, gen, sampler, rng))
        except Exception as e:  # a load that could not even run: say why, with the server's log
            log(f"the load failed: {type(e).__name__}: {e}\n" + log_tail(LOGS / "ortserve-soak.log"))
            return 1
        out.update(phases)
        time.sleep(args.idle_seconds)
        alive = server.proc.poll() is None
        ready_after = alive and is_ready(server.base)
        inf_ok, inf_msg = check_json_inference(server.base, xs, refs) if alive else (False, "server gone")
        sampler.stop()
        md = out["metrics_delta"]
        s = out["overload"]["summary"]["all"]
        metrics_ok = md is not None and (md.get("success", 0) == s["accepted"] and md.get("rejected", 0) == s["rejected"]
                      and all(v == 0 for k, v in md.items() if k not in ("success", "rejected")))
        out["checks"] = {"server_alive": alive, "ready_after": ready_after, "inference_after": inf_msg,
                         "inference_ok": inf_ok, "metrics": md, "metrics_consistent": metrics_ok,
                         "capacity_phase_errors": cap_errors}
        if not alive:
            failures.append(f"the server died (exit status {server.proc.returncode})")
        if alive and not ready_after:
            failures.append("the server is not ready after the load")
        if not inf_ok:
            failures.append(f"inference after the load: {inf_msg}")
        if out["overload"]["errors"] or cap_errors:
            failures.append(f"{out['overload']['errors'] + cap_errors} errors: "
                            f"{out['overload']['error_messages'] or out['capacity']['messages']}")
        if not metrics_ok:
            failures.append(f"/metrics outcomes {md} differ from the client's {s['accepted']} accepted / "
                            f"{s['rejected']} rejected")
    finally:
        if sampler and sampler.is_alive():
            sampler.stop()
        proc = server.proc
        alive_at_stop = proc is not None and proc.poll() is None
        server.stop()
        rc = proc.returncode if proc else None
        Procs.stop_all()
    out.setdefault("checks", {})["exit_status"] = rc
    if alive_at_stop and rc not in (0, None):
        failures.append(f"ortserve exited with status {rc} on SIGTERM")

    meta["finished"] = dt.datetime.now().isoformat(timespec="seconds")
    meta["uptime_after"] = uptime()
    log(f"machine: {meta['uptime_after']}")
    t_base = out["overload"]["t_base"]
    srows = sample_rows(sampler.samples, t_base)
    out["samples"] = srows
    dur = args.duration
    warm = min(args.warmup_seconds, dur / 4)
    in_ov = [r for r in srows if 0 <= r["t"] <= dur]
    rs = [r for r in srows if r["rss_mib"] is not None] or [{"t": 0, "rss_mib": None}]  # none: the server is gone
    rss_at = lambda t: min(rs, key=lambda r: abs(r["t"] - t))["rss_mib"]
    out["memory"] = {"ready_mib": rs[0]["rss_mib"], "overload_start_mib": rss_at(0), "overload_end_mib": rss_at(dur),
                     "max_mib": max((r["rss_mib"] for r in rs if r["rss_mib"] is not None), default=None),
                     "after_idle_mib": rs[-1]["rss_mib"],
                     "warmup_s": warm, "slope_mib_per_min": rss_slope(srows, warm, dur),
                     "threads_start": in_ov[0]["threads"] if in_ov else None,
                     "threads_end": in_ov[-1]["threads"] if in_ov else None,
                     "fds_start": in_ov[0]["fds"] if in_ov else None, "fds_end": in_ov[-1]["fds"] if in_ov else None}
    mc = [r["machine_cpu_pct"] for r in in_ov if r["machine_cpu_pct"] is not None]
    out["machine_cpu_pct_overload"] = round(float(np.mean(mc)), 1) if mc else None
    out["other_cpu_pct_overload"] = (round(out["machine_cpu_pct_overload"] - out["overload"]["server_cpu_pct"]
                                           - out["overload"]["generator_cpu_pct"], 1) if mc else None)
    out["over_time"] = over_time(out["overload"].pop("spans"), srows)
    out["failures"] = failures
    out["verdict"] = "PASS" if not failures else "FAIL"
    return render(out, args)


def render(out, args):
    """soak.json, soak.png and SOAK.md from the measured data; the exit status."""
    out["reading"] = reading(out)
    failures = out["failures"]
    Path(args.out_json).write_text(json.dumps(out, indent=1, default=str))
    try:
        plot(out, args.out_png)
    except Exception as e:  # a plotting problem must not lose the numbers
        log(f"plotting failed: {e}")
    png_rel = os.path.relpath(args.out_png, Path(args.out_md).parent)
    write_md(out, args.out_md, png_rel)
    log(f"wrote {args.out_md}, {args.out_json}, {args.out_png}")
    for line in out["reading"]:
        log(line)
    for fl in failures:
        log("FAIL: " + fl)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
