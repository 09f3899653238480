#!/usr/bin/env python3
"""Server CPU per gRPC ModelInfer call on a TLS port (--grpc-use-ssl), one
build against another: what --grpc-max-connections on a TLS port (the socket
mutator, TlsConnectionGate.h) costs per call (docs/decisions.md, "gRPC TLS
ports: a connection limit through gRPC's socket mutator").

    LD_LIBRARY_PATH=third_party/onnxruntime/lib .venv/bin/python bench/grpc_tls_cpu.py \\
        --before /tmp/ortserve-before [--binary build/ortserve] [--rounds 3] [--calls 3000]

Per round and build (the builds alternate, a fresh server each): one
tritonclient.grpc client over TLS, --warmup sequential identity_fp32 calls of
64 bytes, then --calls more; the server's utime+stime (/proc/<pid>/stat,
threads that ended included) over those calls, per call (the clock tick is
10 ms: 3.3 us at 3,000 calls). Prints each round, the medians, the median of
the rounds' ratios and the load average. A measurement: nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import benchlib  # noqa: F401,E402  (bench/lib/ on sys.path)
import make_test_models  # noqa: E402
from hostile_clients import MODEL  # noqa: E402
from hostile_common import Server  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def make_certs(d: Path) -> dict[str, Path]:
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench CA")
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=bench server")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "server.ext", "-out", "server.pem")
    return {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key"}


def us_per_call(binary: str, repo: Path, certs: dict[str, Path], log: Path, warmup: int, calls: int) -> float:
    server = Server(binary, repo, log, extra_args=("--grpc-use-ssl=true", f"--grpc-server-cert={certs['cert']}",
                                                   f"--grpc-server-key={certs['key']}"))
    try:
        client = grpcclient.InferenceServerClient(f"localhost:{server.grpc_port}", ssl=True,
                                                  root_certificates=str(certs["ca"]))
        inp = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
        inp.set_data_from_numpy(np.arange(16, dtype=np.float32).reshape(1, 16))
        for _ in range(warmup):
            client.infer(MODEL, [inp])
        before = cpu_s(server.pid)
        for _ in range(calls):
            client.infer(MODEL, [inp])
        used = cpu_s(server.pid) - before
        client.close()
        return used / calls * 1e6
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / "build" / "ortserve"))
    parser.add_argument("--before", required=True, help="the build to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    builds = [("before", args.before), ("after", args.binary)]
    results: dict[str, list[float]] = {label: [] for label, _ in builds}
    print(f"load average at the start: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="grpc_tls_cpu_") as tmp:
        work = Path(tmp)
        repo = make_test_models.build_test_repository(work / "repo", [MODEL])
        (work / "certs").mkdir()
        certs = make_certs(work / "certs")
        for r in range(args.rounds):
            for label, binary in builds:
                us = us_per_call(binary, repo, certs, work / f"{label}-{r}.log", args.warmup, args.calls)
                results[label].append(us)
                print(f"round {r + 1} {label}: {us:.1f} us/call (load {os.getloadavg()[0]:.1f})", flush=True)
    for label, _ in builds:
        print(f"{label}: rounds {', '.join(f'{v:.1f}' for v in results[label])} us; "
              f"median {statistics.median(results[label]):.1f} us/call")
    ratio = statistics.median(results["after"]) / statistics.median(results["before"])
    paired = statistics.median(a / b for a, b in zip(results["after"], results["before"]))
    print(f"after/before medians: {ratio:.3f}; median of the rounds' after/before: {paired:.3f}; "
          f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
