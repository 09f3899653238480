"""One ortserve process for the efficiency benches (thread_pool_ab.py, weights_memory.py,
many_models.py): start it on free ports, wait until its models are READY, read what
/proc says about it (resident memory, threads by name, CPU time), stop it."""
import collections
import os
import time
from pathlib import Path

import requests

from bench_procs import Procs, free_ports

CLK_TCK = os.sysconf("SC_CLK_TCK")


class Ortserve:
    def __init__(self, binary, repo, log_path, extra_args=()):
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        cmd = [binary, "--model-repository", repo, "--http-port", self.http_port, "--grpc-port",
               self.grpc_port, "--metrics-port", self.metrics_port, *extra_args]
        self.log_path = Path(log_path)
        self.started = time.monotonic()
        self.proc = Procs.start(cmd, self.log_path)
        self.pid = self.proc.pid

    @property
    def url(self):
        return f"127.0.0.1:{self.http_port}"

    def wait_ready(self, timeout_s=600):
        """Waits for /v2/health/ready (every model READY); returns the seconds since the
        process started."""
        t0 = self.started
        while time.monotonic() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ortserve exited; see {self.log_path}")
            try:
                if requests.get(f"http://{self.url}/v2/health/ready", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"ortserve not ready after {timeout_s} s; see {self.log_path}")

    def metric_sum(self, name):
        """The sum of every sample of `name` on /metrics (the endpoint starts last: retried)."""
        for _ in range(100):
            try:
                text = requests.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30).text
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"no metrics endpoint; see {self.log_path}")
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name + "{") or line.startswith(name + " "))

    def rss_kib(self):
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def threads_by_name(self):
        names = collections.Counter()
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                names[(task / "comm").read_text().strip()] += 1
            except OSError:
                pass
        return names

    def cpu_seconds(self):
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime

    def stop(self):
        Procs.stop(self.proc)


def loadavg():
    return Path("/proc/loadavg").read_text().split()[0]
