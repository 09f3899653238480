#!/usr/bin/env python3
"""Builds the portable GPU bundle (`make gpu-bundle`; docs/gpu.md, "The
portable GPU bundle"): ortserve for a GPU host that reaches no network.

    .venv/bin/python scripts/gpu_bundle.py [--build-dir build] [--out build/gpu-bundle] [--part-mib 48]

The bundle (unpacked: ortserve-gpu/) holds
  bin/       ortserve, ortserve_gpu_baseline, ortserve_http_load and
             runtime_gpu_options_test, linked by CMake's
             ortserve_gpu_bundle_programs target with $ORIGIN/../lib as their
             only library path (DT_RPATH);
  lib/       every shared library they load except the glibc family
             (GLIBC_FAMILY) and the CUDA / cuDNN / driver libraries the GPU
             host provides: the third-party ones as ldd finds them here, and
             ONNX Runtime with its CUDA provider (`make gpu-deps`; the
             TensorRT provider stays out: the GPU host has no TensorRT);
  checks/, models/, requests/, reference/, baseline/   bench/gpu/make_check_data.py's
             data and the on-GPU checks (bench/gpu/gpu_checks.py);
  run-gpu-checks.sh, cuda-env.sh (the CUDA libraries onto LD_LIBRARY_PATH),
  BUNDLE.json (commit, glibc needed, SHA-256 of every file), README.txt.
It is written to --out as two xz archives: lib/ (runtime.tar.xz, rebuilt
only when a library changes) and the rest (app.tar.xz), split into parts of
at most --part-mib MiB, grouped into transfer-N/ folders of at most that size
each (what one copy to the GPU host, or one call of the device tool, moves),
every folder with MANIFEST.json (SHA-256 of each part and archive) and
reassemble.py (scripts/gpu_bundle_reassemble.py), which checks and unpacks.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))
sys.path.insert(0, str(ROOT / "scripts"))
from gpu_bundle_reassemble import file_sha256 as sha256  # noqa: E402

BUNDLE_NAME = "ortserve-gpu"
PROGRAMS = ("ortserve", "ortserve_gpu_baseline", "ortserve_http_load", "runtime_gpu_options_test")
# Libraries of glibc itself: the host's must be used (a copy of libc would
# not match its loader). The bundle needs the glibc version BUNDLE.json names.
GLIBC_FAMILY = re.compile(r"^(linux-vdso|ld-linux|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|"
                          r"libanl|libnsl|libnss_[a-z]+|libBrokenLocale|libthread_db)[.-]")
ORT_PROVIDERS = ("libonnxruntime_providers_cuda.so", "libonnxruntime_providers_shared.so")
XZ_PRESET = "6"


def cmake_cache(build_dir: Path, key: str) -> str:
    for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split("=", 1)[1]
    raise SystemExit(f"{key} is not in {build_dir}/CMakeCache.txt: configure the build first")


def ldd(path: Path, library_dir: Path) -> dict:
    """soname -> resolved path (None: not found) of everything `path` loads,
    with `library_dir` (ONNX Runtime's) on the loader path: the bundled
    programs' own path, $ORIGIN/../lib, holds nothing yet."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True,
                         env={**os.environ, "LD_LIBRARY_PATH": str(library_dir)}).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (not found|(\S+) \(0x)", line)
        if m:
            found[m.group(1)] = None if m.group(2) == "not found" else m.group(3)
    return found


def collect_libraries(programs: list, ort_dir: Path, providers_dir: Path) -> dict:
    """file name in lib/ -> where it comes from."""
    libs = {}
    for program in programs:
        for soname, where in ldd(program, ort_dir).items():
            if GLIBC_FAMILY.match(soname):
                continue
            if where is None:
                raise SystemExit(f"{program.name} needs {soname}, which the loader does not find here")
            libs[soname] = Path(where)
    # ONNX Runtime's core and its providers from the GPU install (make gpu-deps),
    # after checking that its core is the library the programs were linked with.
    core = libs.get("libonnxruntime.so.1")
    gpu_core = providers_dir / "libonnxruntime.so"
    if core is None or not gpu_core.is_file() or sha256(core.resolve()) != sha256(gpu_core):
        raise SystemExit(f"the GPU providers in {providers_dir} sit beside another ONNX Runtime core than the one "
                         f"the programs load ({core}, from {ort_dir}): run `make gpu-deps`")
    libs["libonnxruntime.so.1"] = gpu_core
    for name in ORT_PROVIDERS:
        if not (providers_dir / name).is_file():
            raise SystemExit(f"{providers_dir / name} is missing: run `make gpu-deps`")
        libs[name] = providers_dir / name
    return libs


def glibc_needed(files: list) -> str:
    """The highest GLIBC_x.y symbol version the files need."""
    versions = set()
    for f in files:
        out = subprocess.run(["objdump", "-T", str(f)], capture_output=True, text=True).stdout
        versions |= set(re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", out))
    return max(versions, key=lambda v: tuple(int(x) for x in v.split("."))) if versions else "?"


def git_describe() -> str:
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + ("+changes" if dirty else "")


README = """ortserve GPU bundle ({commit})

  ./run-gpu-checks.sh            the on-GPU checks: gpu-report.md, gpu-logs.tar.gz
  . ./cuda-env.sh; bin/ortserve --model-repository DIR --http-port 8000
                                 serve (cuda-env.sh puts the CUDA 13 / cuDNN 9
                                 libraries on LD_LIBRARY_PATH)

Needs glibc >= {glibc} and, for GPU models, the NVIDIA driver and CUDA 13 /
cuDNN 9 libraries (docs/gpu.md of the ortserve repository, "The portable GPU bundle").
"""


def stage(args, build_dir: Path, stage_dir: Path) -> dict:
    """Writes the unpacked bundle into stage_dir/BUNDLE_NAME; returns BUNDLE.json."""
    import make_check_data
    root = stage_dir / BUNDLE_NAME
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    programs = [build_dir / "gpu-bundle-bin" / p for p in PROGRAMS]
    for p in programs:
        if not p.is_file():
            raise SystemExit(f"{p} is missing: cmake --build {build_dir} --target ortserve_gpu_bundle_programs")
        shutil.copy2(p, root / "bin" / p.name)
    ort_dir = Path(cmake_cache(build_dir, "ORT_LIBRARY")).parent
    for name, source in sorted(collect_libraries(programs, ort_dir, Path(args.providers)).items()):
        shutil.copyfile(source, root / "lib" / name)
    make_check_data.write_check_data(root)
    for name in ("gpu_checks.py", "gpu_check_tools.py"):
        shutil.copy2(ROOT / "bench" / "gpu" / name, root / "checks" / name)
    for name in ("run-gpu-checks.sh", "cuda-env.sh"):
        shutil.copy2(ROOT / "bench" / "gpu" / name, root / name)
    (root / "tests" / "data" / "runtime").mkdir(parents=True)
    shutil.copy2(ROOT / "tests" / "data" / "runtime" / "add_fp32.onnx", root / "tests" / "data" / "runtime")
    info = {"bundle": BUNDLE_NAME, "commit": git_describe(), "built": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "glibc_needed": glibc_needed(sorted((root / "bin").iterdir()) + sorted((root / "lib").iterdir())),
            "onnxruntime_providers": str(Path(args.providers).resolve())}
    (root / "README.txt").write_text(README.format(commit=info["commit"], glibc=info["glibc_needed"]))
    files = sorted(p for p in root.rglob("*") if p.is_file())
    info["files"] = {str(p.relative_to(root)): {"size": p.stat().st_size, "sha256": sha256(p)} for p in files}
    (root / "BUNDLE.json").write_text(json.dumps(info, indent=1))
    return info


def write_tar_xz(root: Path, members: list, out: Path) -> None:
    """A reproducible .tar.xz of `members` (paths under root.parent): sorted,
    no times or owners, so the same files give the same bytes."""
    with open(out, "wb") as sink:
        if shutil.which("xz"):
            xz = subprocess.Popen(["xz", f"-{XZ_PRESET}", "-T0", "-c"], stdin=subprocess.PIPE, stdout=sink)
            stream = xz.stdin
        else:
            import lzma
            xz, stream = None, lzma.open(sink, "wb", preset=int(XZ_PRESET))
        with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for path in members:
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(root.parent)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if info.isfile():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        stream.close()
        if xz is not None and xz.wait() != 0:
            raise SystemExit(f"xz failed writing {out}")


def tree(root: Path, top: str | None) -> list:
    """Every path under root (in sorted order), only under top/ or only outside lib/."""
    paths = sorted(root.rglob("*"))
    if top is not None:
        return [p for p in paths if p.relative_to(root).parts[0] == top]
    return [root] + [p for p in paths if p.relative_to(root).parts[0] != "lib"]


def split(archive: Path, part_bytes: int) -> list:
    data_size = archive.stat().st_size
    count = max(1, -(-data_size // part_bytes))
    parts = []
    with open(archive, "rb") as f:
        for i in range(count):
            part = archive.with_name(f"{archive.name}.part{i + 1}of{count}")
            part.write_bytes(f.read(part_bytes))
            parts.append(part)
    return parts


def archive(args, root: Path, out: Path, info: dict) -> dict:
    """runtime.tar.xz (lib/, reused while its libraries are the same) and app.tar.xz."""
    work = out / ".archives"
    work.mkdir(parents=True, exist_ok=True)
    lib_key = hashlib.sha256(json.dumps({k: v["sha256"] for k, v in info["files"].items() if k.startswith("lib/")},
                                        sort_keys=True).encode()).hexdigest()
    runtime = work / "runtime.tar.xz"
    key_file = work / "runtime.key"
    if not (runtime.is_file() and key_file.is_file() and key_file.read_text() == lib_key):
        print(f"[gpu-bundle] compressing lib/ (xz -{XZ_PRESET}; a few minutes, then reused until a library changes)",
              flush=True)
        write_tar_xz(root, tree(root, "lib"), runtime)
        key_file.write_text(lib_key)
    else:
        print("[gpu-bundle] lib/ unchanged: runtime.tar.xz reused", flush=True)
    app = work / "app.tar.xz"
    write_tar_xz(root, tree(root, None), app)
    return {"runtime.tar.xz": runtime, "app.tar.xz": app}


def write_transfers(archives: dict, out: Path, part_bytes: int, info: dict) -> dict:
    for old in out.glob("transfer-*"):
        shutil.rmtree(old)
    manifest = {"bundle": BUNDLE_NAME, "commit": info["commit"], "built": info["built"],
                "glibc_needed": info["glibc_needed"], "archives": {}, "parts": []}
    pieces = []
    for name, path in archives.items():
        manifest["archives"][name] = {"size": path.stat().st_size, "sha256": sha256(path)}
        for part in split(path, part_bytes):
            pieces.append((name, part))
    transfer, used = 1, 0
    for name, part in pieces:
        size = part.stat().st_size
        if used and used + size > part_bytes:
            transfer, used = transfer + 1, 0
        used += size
        dest = out / f"transfer-{transfer}"
        dest.mkdir(exist_ok=True)
        shutil.move(str(part), dest / part.name)
        manifest["parts"].append({"archive": name, "file": part.name, "transfer": transfer, "size": size,
                                  "sha256": sha256(dest / part.name)})
    manifest["transfers"] = transfer
    manifest["unpacked_bytes"] = sum(f["size"] for f in info["files"].values())
    text = json.dumps(manifest, indent=1)
    for t in range(1, transfer + 1):
        (out / f"transfer-{t}" / "MANIFEST.json").write_text(text)
        shutil.copy2(ROOT / "scripts" / "gpu_bundle_reassemble.py", out / f"transfer-{t}" / "reassemble.py")
    return manifest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--out", help="default: <build-dir>/gpu-bundle")
    ap.add_argument("--providers", default=str(ROOT / "third_party" / "onnxruntime-gpu" / "lib"),
                    help="the GPU install of ONNX Runtime (make gpu-deps)")
    ap.add_argument("--part-mib", type=float, default=48.0,
                    help="largest part and transfer (the device tool moves 64 MiB per call, the repository included)")
    args = ap.parse_args(argv)
    build_dir = Path(args.build_dir).resolve()
    out = Path(args.out).resolve() if args.out else build_dir / "gpu-bundle"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    info = stage(args, build_dir, out / ".stage")
    archives = archive(args, out / ".stage" / BUNDLE_NAME, out, info)
    manifest = write_transfers(archives, out, int(args.part_mib * (1 << 20)), info)
    mib = lambda n: f"{n / (1 << 20):.1f} MiB"
    sizes = " + ".join(f"{k} {mib(v['size'])}" for k, v in manifest["archives"].items())
    print(f"[gpu-bundle] {BUNDLE_NAME} of {info['commit']}: {mib(manifest['unpacked_bytes'])} unpacked, {sizes}, "
          f"{len(manifest['parts'])} parts in {manifest['transfers']} transfers "
          f"(at most {args.part_mib:g} MiB each), glibc >= {info['glibc_needed']}, {time.monotonic() - t0:.0f} s")
    for t in range(1, manifest["transfers"] + 1):
        files = [p for p in manifest["parts"] if p["transfer"] == t]
        print(f"  {out / f'transfer-{t}'}: {', '.join(p['file'] for p in files)} "
              f"({mib(sum(p['size'] for p in files))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
