#!/usr/bin/env python3
"""The layering rules of src/ (docs/architecture.md), checked on every build's
test run (ctest `layering`, and `layering_self_test`, which plants a wrong-way
include in a copy of src/ and expects it caught):

  - each layer includes only itself and the layers below it:
      core -> runtime -> scheduler -> config -> serving -> pipeline
           -> repository -> server/* -> app;
  - core/ needs nothing but the C++ standard library (and libc/POSIX);
  - the scheduler sees the runtime only through runtime/ModelInstance.h, so
    it knows nothing of ONNX Runtime;
  - config/, serving/ and pipeline/ know no ONNX Runtime session either: the
    runtime only through its plain value headers (ModelSignature.h,
    RuntimeOptions.h, ModelInstance.h) and its pure output comparison
    (NumericalComparison.h, which the shadow comparison shares);
  - the front ends (server/) see the model layers only through their public
    headers (repository/ModelRepository.h, serving/Model.h,
    config/ConfigTypes.h), and never ONNX Runtime or the scheduler;
  - no header includes, directly or not, a header that includes it back.

Prints every violation with file:line; exit status 1 if there is any.
  check_layers.py [--src DIR]   check DIR (default: the repository's src/)
  check_layers.py --self-test   plant a wrong-way include and a cycle in a copy
                                of src/; exit 0 only if both are reported"""
import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

# The project's own headers each layer may include (by path prefix).
# The runtime headers that carry values or pure functions of tensors only (no
# ORT session, no ORT header).
RUNTIME_VALUES = ("runtime/ModelSignature.h", "runtime/RuntimeOptions.h", "runtime/ModelInstance.h",
                  "runtime/NumericalComparison.h")
ALLOWED = {
    "core": ("core/",),
    "runtime": ("core/", "runtime/"),
    "scheduler": ("core/", "runtime/ModelInstance.h", "scheduler/"),
    "config": ("core/",) + RUNTIME_VALUES + ("scheduler/", "config/", "model_config.pb.h"),
    "serving": ("core/",) + RUNTIME_VALUES + ("scheduler/", "config/", "serving/", "model_config.pb.h"),
    "pipeline": ("core/",) + RUNTIME_VALUES + ("scheduler/", "config/", "serving/", "pipeline/",
                                               "model_config.pb.h"),
    "repository": ("core/", "runtime/", "scheduler/", "config/", "serving/", "pipeline/", "repository/",
                   "model_config.pb.h"),
    "server": ("core/", "server/", "repository/ModelRepository.h", "serving/Model.h", "config/ConfigTypes.h",
               "model_config.pb.h", "grpc_service.pb.h", "grpc_service.grpc.pb.h"),
    "app": ("",),
}
# Third-party headers core/ must not need.
NOT_IN_CORE = ("fmt/", "spdlog/", "boost/", "grpc", "google/", "simdjson", "onnxruntime", "openssl/",
               "zlib", "CLI/", "rapidjson/")
ORT = ("onnxruntime",)


def layer_of(path: Path, src: Path) -> str:
    return path.relative_to(src).parts[0]


def includes(path: Path):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield number, m.group(1), m.group(2)


def check_file(path: Path, src: Path, problems: list) -> None:
    layer = layer_of(path, src)
    if layer not in ALLOWED:
        problems.append(f"{path.relative_to(src.parent)}: folder src/{layer}/ is not a known layer")
        return
    where = path.relative_to(src.parent)
    for number, kind, name in includes(path):
        if kind == "<":
            if layer == "core" and name.startswith(NOT_IN_CORE):
                problems.append(f"{where}:{number}: core/ includes <{name}> (core needs the standard library only)")
            if layer in ("scheduler", "config", "serving", "pipeline", "server") and name.startswith(ORT):
                problems.append(f"{where}:{number}: {layer}/ includes ONNX Runtime <{name}>")
            continue
        if not any(name.startswith(prefix) for prefix in ALLOWED[layer]):
            problems.append(f"{where}:{number}: {layer}/ includes \"{name}\", outside what it may see")


def find_cycles(src: Path, problems: list) -> None:
    headers = {p.relative_to(src).as_posix(): p for p in src.rglob("*.h")}
    graph = {h: [n for _, k, n in includes(p) if k == '"' and n in headers] for h, p in headers.items()}
    state = {}  # 1: on the current path, 2: done
    stack = []

    def visit(h):
        state[h] = 1
        stack.append(h)
        for n in graph[h]:
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif n not in state:
                visit(n)
        stack.pop()
        state[h] = 2

    for h in sorted(graph):
        if h not in state:
            visit(h)


def check(src: Path) -> list:
    problems = []
    for path in sorted(src.rglob("*")):
        if path.suffix in (".h", ".cpp"):
            check_file(path, src, problems)
    find_cycles(src, problems)
    return problems


def self_test() -> int:
    """A wrong-way include (config/ reaching up into repository/) and a cycle
    planted in a copy of src/ must both be reported."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(SRC, src)
        if check(src):
            print("self-test: the unplanted copy already has problems")
            return 1
        planted = src / "config" / "ConfigTypes.h"
        planted.write_text(planted.read_text() + '\n#include "repository/ModelTable.h"\n')
        looped = src / "serving" / "Model.h"  # serving/ModelLookup.h includes it
        looped.write_text(looped.read_text() + '\n#include "serving/ModelLookup.h"\n')
        problems = check(src)
        wrong_way = any("config/ConfigTypes.h" in p and "repository/ModelTable.h" in p for p in problems)
        cycle = any(p.startswith("include cycle:") and "serving/ModelLookup.h" in p for p in problems)
        for p in problems:
            print("  planted and caught: " + p)
        if not (wrong_way and cycle):
            print(f"self-test: wrong-way include caught: {wrong_way}; cycle caught: {cycle}")
            return 1
    print("layering self-test: the planted wrong-way include and cycle were caught")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=SRC)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    problems = check(args.src.resolve())
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s)")
        return 1
    print("layering: every include goes downwards; no include cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
