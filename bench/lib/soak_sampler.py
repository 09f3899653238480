"""Sampling the server and the machine once a second, in a thread of its own so that a busy event
loop cannot skew it: server RSS, threads, open fds and CPU, the generator's CPU, the machine's CPU;
per-thread CPU and run-queue wait of the server's pools; the samples as per-second rows and the
RSS slope."""
import os
import re
import threading
import time
from pathlib import Path

import numpy as np

from bench_procs import tree_cpu_seconds


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
