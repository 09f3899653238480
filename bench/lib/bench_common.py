"""What every part of the benchmark shares: paths, the run's log, its notes (skips and errors) and
the command lines it ran (both for RESULTS.md), the machine and the commit measured, and where
the tools and the model repository are."""
import json
import os
import platform
import shlex
import subprocess
import time
from pathlib import Path


LIB = Path(__file__).resolve().parent          # bench/lib: these helpers, the wrk scripts
BENCH = LIB.parent                             # bench/: the scenarios, their reports
ROOT = BENCH.parent
BASELINES = BENCH / "baselines"                # the FastAPI + onnxruntime contenders
WORK = BENCH / "work"
RESULTS = BENCH / "results"
LOGS = WORK / "logs"
VENV_PY = ROOT / ".venv" / "bin" / "python"
PERF_ANALYZER = ROOT / ".venv" / "bin" / "perf_analyzer"
CUDART_LIB = ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "nvidia" / "cuda_runtime" / "lib"


COMMANDS: list = []   # every load/server/tool command line, for RESULTS.md
NOTES: list = []      # skips and errors, for RESULTS.md


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def note(msg):
    log(msg)
    if msg not in NOTES:  # said once in the report however often it happens
        NOTES.append(msg)


def results_json(obj) -> str:
    """`obj` as a committed results file keeps it: paths inside the checkout
    relative to its root, so that the file names no folder of the machine."""
    return json.dumps(obj, indent=1, default=str).replace(str(ROOT) + "/", "")


def record_cmd(cmd, env_extra=None):
    prefix = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in (env_extra or {}).items())
    line = (prefix + " " if prefix else "") + " ".join(shlex.quote(str(c)) for c in cmd)
    line = line.replace(str(ROOT) + "/", "")
    if line not in COMMANDS:
        COMMANDS.append(line)


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
    """The commit measured: `git rev-parse HEAD` (also right in a worktree),
    else read from .git where git is missing."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.strip()[:12]
    except OSError:
        pass
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


def bench_tool(args, name):
    """A benchmark tool `make build` puts next to the server under test."""
    return Path(args.ortserve_bin).parent / name


def manifest_repo(manifest):
    return Path(next(iter(manifest.values()))["model_path"]).parents[2]
