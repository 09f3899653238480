"""Child processes of the benchmark: servers and load tools, each in its own session so that its
whole group can be killed (on exit, error and Ctrl-C too), time-bounded runs, the CPU a finished
load tool used, and the CPU of a running process tree."""
import os
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

from bench_common import ROOT, record_cmd

CLK_TCK = os.sysconf("SC_CLK_TCK")


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


def free_ports(count):
    """`count` distinct free loopback ports (each held until all are bound)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port():
    return free_ports(1)[0]


def with_cpus(cmd, cpus):
    return (["taskset", "-c", cpus] + cmd) if cpus else cmd


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


def log_tail(path, n=15):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
