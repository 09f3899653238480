#!/usr/bin/env python3
"""The GPU bundle's rehearsal on a machine without a GPU (`make
gpu-bundle-check`; docs/gpu.md, "The portable GPU bundle"): everything of
the bundle's trip to an air-gapped GPU host that can run here.

    .venv/bin/python scripts/gpu_bundle_check.py [--bundle build/gpu-bundle] [--keep DIR]

  1. parts      each transfer-N/ folder is checked on its own as it would
                arrive (reassemble.py --check), a damaged part is refused by
                name, then all are joined, verified and unpacked;
  2. clean env  the bundled ortserve, started with an empty environment but
                LD_LIBRARY_PATH=<bundle>/lib, serves a CPU model: its answer
                matches onnxruntime's, and every shared library it mapped is
                the bundle's or glibc's (/proc/PID/maps);
  3. CUDA libs  run-gpu-checks.sh --preflight-only finds the CUDA 13 / cuDNN 9
                libraries through python3's nvidia wheels (scripts/setup.sh
                gpu-wheels: the versions of the GPU host's PyTorch), as on the
                host: ldd of the CUDA provider lists nothing missing but the
                driver's libcuda.so.1, and nothing at all with the no-device
                driver stand-in (tests/gpu/libcuda_no_device_stub.c) added;
  4. no GPU     a KIND_GPU model fails to load with the reason that there is
                no CUDA device, not a missing library;
  5. rehearsal  run-gpu-checks.sh --rehearse: every on-GPU step on CPU
                instances, short windows: the report has no FAIL.
Prints one line per step and the total time; exits 1 if a step failed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".cache" / "gpu-wheels" / "site"
STUB_SOURCE = ROOT / "tests" / "gpu" / "libcuda_no_device_stub.c"
sys.path.insert(0, str(ROOT / "scripts"))
from gpu_bundle import GLIBC_FAMILY  # noqa: E402

NO_DEVICE = re.compile(r"no CUDA device is visible|no CUDA-capable device", re.I)
MISSING_LIBRARY = re.compile(r"cannot open shared object file|cannot load", re.I)


class Failed(Exception):
    pass


def run(command: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, **kw)


def check_parts(bundle_out: Path, tmp: Path) -> Path:
    transfers = sorted(bundle_out.glob("transfer-*"), key=lambda p: int(p.name.split("-")[1]))
    if not transfers:
        raise Failed(f"no transfer-N folders in {bundle_out}: run make gpu-bundle")
    stage = tmp / "stage"
    stage.mkdir()
    for t in transfers:  # as the GPU host receives them: one folder at a time, checked on arrival
        for f in t.iterdir():
            shutil.copy2(f, stage / f.name)
        done = run([sys.executable, str(stage / "reassemble.py"), "--parts", str(stage), "--check"])
        if done.returncode != 0:
            raise Failed(f"after {t.name}: {done.stdout}{done.stderr}")
    damaged = tmp / "damaged"
    shutil.copytree(stage, damaged)
    victim = sorted(damaged.glob("*.part*"))[-1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    done = run([sys.executable, str(damaged / "reassemble.py"), "--parts", str(damaged), "--check"])
    if done.returncode == 0 or f"damaged: {victim.name}" not in done.stdout:
        raise Failed(f"a damaged part passed: {done.stdout}")
    shutil.rmtree(damaged)
    done = run([sys.executable, str(stage / "reassemble.py"), "--parts", str(stage), "--dest", str(tmp / "host")])
    if done.returncode != 0:
        raise Failed(done.stdout + done.stderr)
    manifest = json.loads((stage / "MANIFEST.json").read_text())
    print(f"    {len(transfers)} transfers, {len(manifest['parts'])} parts, "
          + ", ".join(f"{n} {m['size'] / (1 << 20):.1f} MiB" for n, m in manifest["archives"].items())
          + f"; {manifest['unpacked_bytes'] / (1 << 20):.0f} MiB unpacked; a damaged part is refused by name")
    return tmp / "host" / manifest["bundle"]


def binary_request_inputs(body: bytes, header_bytes: int) -> dict:
    head = json.loads(body[:header_bytes])
    dtypes = {"FP32": np.float32, "INT64": np.int64}
    inputs, offset = {}, header_bytes
    for t in head["inputs"]:
        size = t["parameters"]["binary_data_size"]
        inputs[t["name"]] = np.frombuffer(body[offset:offset + size], dtypes[t["datatype"]]).reshape(t["shape"])
        offset += size
    return inputs


def server_tools(bundle: Path):
    sys.path.insert(0, str(bundle / "checks"))
    import gpu_check_tools
    return gpu_check_tools


def write_model(repo: Path, name: str, onnx_file: Path, kind: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.onnx").symlink_to(onnx_file)
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        f'instance_group [ {{ count: 1, kind: {kind} }} ]\n')


def check_clean_environment(bundle: Path, tmp: Path) -> None:
    tools = server_tools(bundle)
    repo = tmp / "repo-cpu"
    write_model(repo, "mlp", bundle / "models" / "mlp.onnx", "KIND_CPU")
    server = tools.Server(bundle, repo, tmp / "clean-env.log", {"LD_LIBRARY_PATH": str(bundle / "lib")}).start()
    try:
        states = server.wait_models(["mlp"], 60)
        if states["mlp"][0] != "READY":
            raise Failed(f"mlp: {states['mlp']}")
        plan = json.loads((bundle / "checks" / "plan.json").read_text())
        request = plan["requests"]["mlp_b4"]
        body = (bundle / request["body"]).read_bytes()
        got = server.infer("mlp", body, request["header_bytes"])
        session = ort.InferenceSession(str(bundle / "models" / "mlp.onnx"), providers=["CPUExecutionProvider"])
        want = session.run(None, binary_request_inputs(body, request["header_bytes"]))[0]
        np.testing.assert_allclose(got["OUTPUT0"], want, rtol=1e-5, atol=1e-6)
        mapped = set(re.findall(r"\s(/\S+\.so[.\d]*)$", Path(f"/proc/{server.proc.pid}/maps").read_text(), re.M))
        foreign = sorted(p for p in mapped
                         if not p.startswith(str(bundle / "lib") + "/") and not GLIBC_FAMILY.match(Path(p).name))
        if foreign:
            raise Failed(f"ortserve mapped libraries from outside the bundle: {foreign}")
        env = Path(f"/proc/{server.proc.pid}/environ").read_bytes().split(b"\0")
        print(f"    environment {[e.decode() for e in env if e]}; mlp batch 4 matches onnxruntime "
              f"{ort.__version__}; {len(mapped)} libraries mapped, all from the bundle's lib/ or glibc")
    finally:
        server.stop()


def build_stub(tmp: Path) -> Path:
    stub_dir = tmp / "driver-stub"
    stub_dir.mkdir()
    done = run(["cc", "-shared", "-fPIC", "-O2", "-Wl,-soname,libcuda.so.1", "-o", str(stub_dir / "libcuda.so.1"),
                str(STUB_SOURCE)])
    if done.returncode != 0:
        raise Failed(f"cannot build the driver stand-in: {done.stderr}")
    return stub_dir


def preflight(bundle: Path, tmp: Path, stub_dir: Path | None) -> tuple:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(WHEELS), "ORTSERVE_GPU_WORK": str(tmp / "preflight"),
           **({"ORTSERVE_CUDA_LIB_DIRS": str(stub_dir)} if stub_dir else {})}
    done = run([str(bundle / "run-gpu-checks.sh"), "--preflight-only"], env=env)
    text = done.stdout + done.stderr
    lib_path = re.search(r"^LD_LIBRARY_PATH=(.*)$", text, re.M).group(1)
    return done.returncode, text, lib_path


def check_cuda_libraries(bundle: Path, tmp: Path) -> str:
    if not (WHEELS / "nvidia").is_dir():
        raise Failed(f"no CUDA wheels in {WHEELS}: run `make gpu-wheels`")
    rc, text, _ = preflight(bundle, tmp, None)
    missing = sorted(set(re.findall(r"(\S+) => not found|(\S+): NOT FOUND", text)))
    missing = sorted({a or b for a, b in missing})
    if rc == 0 or missing != ["libcuda.so.1"]:
        raise Failed(f"without a driver, only libcuda.so.1 should be missing, not {missing}:\n{text}")
    stub_dir = build_stub(tmp)
    rc, text, lib_path = preflight(bundle, tmp, stub_dir)
    if rc != 0:
        raise Failed(f"with the driver stand-in, libraries are still missing:\n{text}")
    found = re.findall(r"^  (\S+): (/\S+)$", text, re.M)
    print(f"    without a driver: only libcuda.so.1 missing; with the stand-in: all {len(found)} CUDA/cuDNN "
          f"libraries found, e.g. {found[2][0]} in {Path(found[2][1]).parent}")
    return lib_path


def check_no_gpu(bundle: Path, tmp: Path, lib_path: str) -> None:
    tools = server_tools(bundle)
    repo = tmp / "repo-gpu"
    write_model(repo, "mlp_gpu", bundle / "models" / "mlp.onnx", "KIND_GPU")
    server = tools.Server(bundle, repo, tmp / "no-gpu.log", {"LD_LIBRARY_PATH": lib_path}).start()
    try:
        state, reason = server.wait_models(["mlp_gpu"], 60)["mlp_gpu"]
    finally:
        server.stop()
    if state != "UNAVAILABLE" or not NO_DEVICE.search(reason) or MISSING_LIBRARY.search(reason):
        raise Failed(f"mlp_gpu is {state}, reason {reason!r}; log:\n{server.log_tail()}")
    print(f"    mlp_gpu UNAVAILABLE: {reason}")


def check_rehearsal(bundle: Path, tmp: Path, stub_dir: Path) -> None:
    out = tmp / "rehearsal"
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(WHEELS), "ORTSERVE_GPU_WORK": str(tmp / "work"),
           "ORTSERVE_CUDA_LIB_DIRS": str(stub_dir)}
    done = run([str(bundle / "run-gpu-checks.sh"), "--rehearse", "--scale", "0.15", "--out", str(out)], env=env,
               timeout=400)
    report = (out / "gpu-report.md").read_text() if (out / "gpu-report.md").exists() else ""
    rows = [line for line in report.splitlines() if line.startswith("| ") and not line.startswith("| check")]
    summary = [line for line in rows if "| FAIL" in line or "| SKIPPED" in line]
    if done.returncode != 0 or summary or not (out / "gpu-logs.tar.gz").is_file():
        raise Failed(f"rc {done.returncode}; {summary}\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    print(f"    report {out / 'gpu-report.md'}: {len(rows)} rows, no FAIL or SKIPPED")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", default=str(ROOT / "build" / "gpu-bundle"), help="make gpu-bundle's output")
    ap.add_argument("--keep", help="work in this folder and keep it (default: a temporary folder, removed)")
    args = ap.parse_args(argv)
    started = time.monotonic()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gpu-bundle-check."))
    if args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    failed = []
    bundle = stub = lib_path = None
    steps = [("1. parts", lambda: check_parts(Path(args.bundle), tmp)),
             ("2. clean env", lambda: check_clean_environment(bundle, tmp)),
             ("3. CUDA libs", lambda: check_cuda_libraries(bundle, tmp)),
             ("4. no GPU", lambda: check_no_gpu(bundle, tmp, lib_path)),
             ("5. rehearsal", lambda: check_rehearsal(bundle, tmp, stub))]
    try:
        for name, step in steps:
            if bundle is None and name != "1. parts" or lib_path is None and name in ("4. no GPU", "5. rehearsal"):
                print(f"[gpu-bundle-check] {name}: SKIPPED (an earlier step failed)")
                failed.append(name)
                continue
            t0 = time.monotonic()
            try:
                result = step()
                if name == "1. parts":
                    bundle = result
                elif name == "3. CUDA libs":
                    lib_path, stub = result, tmp / "driver-stub"
                print(f"[gpu-bundle-check] {name}: ok ({time.monotonic() - t0:.1f} s)", flush=True)
            except Exception as e:  # noqa: BLE001  (each step's failure is reported; the rest still run)
                print(f"[gpu-bundle-check] {name}: FAILED ({time.monotonic() - t0:.1f} s)\n{e}", flush=True)
                failed.append(name)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"[gpu-bundle-check] {'FAILED: ' + ', '.join(failed) if failed else 'all steps ok'} "
          f"in {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
