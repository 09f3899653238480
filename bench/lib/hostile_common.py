"""What the hostile-client scenarios (bench/hostile_*.py) share: one ortserve
process per measurement, the percentile they report, and
results/RESULTS-hostile.md, where each scenario replaces its own section.
The scenarios put tests/integration/ (hostile_clients.py, the attacks the
tests share) and tests/models/ (make_test_models.py) on sys.path before
importing this."""
from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import requests

import make_test_models
from bench_common import ROOT, git_head
from hostile_clients import MODEL, nofile_command

REPORT = ROOT / "bench" / "results" / "RESULTS-hostile.md"
# The report's head, for a report that does not exist yet.
HEADER = """# Hostile clients

What clients that attack the server cost it and its other clients, measured by
`make bench-hostile` (`ORTSERVE_BEFORE=<build>` for a build to compare with).
Each `bench/hostile_*.py` writes its own section below; the limits are in
[docs/limits.md](../../docs/limits.md). Measurements, not tests: nothing here
asserts.
"""

class Server:
    def __init__(self, binary: str, repo: Path, log_path: Path, nofile: int | None = None,
                 extra_args: tuple[str, ...] = (), ready_model: str = MODEL):
        import socket
        socks = [socket.socket() for _ in range(3)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        self.http_port, self.grpc_port, self.metrics_port = (s.getsockname()[1] for s in socks)
        for s in socks:
            s.close()
        command = [binary, "--model-repository", str(repo), "--http-port", str(self.http_port),
                   "--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
                   "--http-thread-count", "1", "--thread-budget", "2", *extra_args]
        if nofile:
            command = nofile_command(command, nofile)
        self.log_path = log_path
        self.proc = subprocess.Popen(command, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.http_port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.base}/v2/models/{ready_model}/ready", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{binary} did not get ready; see {log_path}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def infer_url(self, model: str = MODEL) -> str:
        return f"{self.base}/v2/models/{model}/infer"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def write_section(lines: list[str], report: Path, section: str) -> None:
    """Replaces `section` of `report` with `lines`, keeping the other sections."""
    text = report.read_text() if report.exists() else HEADER
    start = text.find(section)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    else:
        end = text.find("\n## ", start + len(section))
        text = text[:start] + "\n".join(lines) + "\n" + (text[end + 1:] if end >= 0 else "")
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)


def run_id() -> str:
    """What the report's first line starts with: commit, date, load average."""
    return f"Commit {git_head()}, {time.strftime('%Y-%m-%d')}, load average {os.getloadavg()[0]:.1f} at the start"


def measure_and_report(name: str, builds: list[tuple[str, str]], models: list[str], measure, headline, table,
                       lines: list[str], report: Path, section: str) -> None:
    """Measures each (label, binary) of `builds` with measure(binary, repo,
    work) on a fresh repository of `models`, then writes `lines` (the section's
    head), headline(results) and table(label, binary, result) of each build
    into `section` of `report`, and prints them."""
    with tempfile.TemporaryDirectory(prefix=f"{name}_") as tmp:
        work = Path(tmp)
        repo = make_test_models.build_test_repository(work / "repo", models)
        results = {}
        for label, binary in builds:
            print(f"[{name}] measuring {label}: {binary}", flush=True)
            results[label] = measure(binary, repo, work)
    lines = lines + [headline(results), ""]
    for (label, binary), m in zip(builds, results.values()):
        lines += table(label, binary, m)
    write_section(lines, report, section)
    print("\n".join(lines))
