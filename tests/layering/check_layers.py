#!/usr/bin/env python3
"""The layering rules of src/ (docs/architecture.md), checked on every build's
test run (ctest `layering`):

  - each layer includes only itself and the layers below it:
      core -> runtime -> scheduler -> repository -> server/* -> app;
  - core/ needs nothing but the C++ standard library (and libc/POSIX);
  - the scheduler sees the runtime only through runtime/ModelInstance.h, so
    it knows nothing of ONNX Runtime;
  - the front ends (server/) see the repository only through its public
    headers, and never ONNX Runtime or the scheduler;
  - no header includes, directly or not, a header that includes it back.

Prints every violation with file:line; exit status 1 if there is any."""
import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

# The project's own headers each layer may include (by path prefix).
ALLOWED = {
    "core": ("core/",),
    "runtime": ("core/", "runtime/"),
    "scheduler": ("core/", "runtime/ModelInstance.h", "scheduler/"),
    "repository": ("core/", "runtime/", "scheduler/", "repository/", "model_config.pb.h"),
    "server": ("core/", "server/", "repository/Model.h", "repository/ModelRepository.h",
               "repository/ConfigTypes.h", "model_config.pb.h", "grpc_service.pb.h",
               "grpc_service.grpc.pb.h"),
    "app": ("",),
}
# Third-party headers core/ must not need.
NOT_IN_CORE = ("fmt/", "spdlog/", "boost/", "grpc", "google/", "simdjson", "onnxruntime", "openssl/",
               "zlib", "CLI/", "rapidjson/")
ORT = ("onnxruntime",)


def layer_of(path: Path) -> str:
    return path.relative_to(SRC).parts[0]


def includes(path: Path):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield number, m.group(1), m.group(2)


def check_file(path: Path, problems: list) -> None:
    layer = layer_of(path)
    where = path.relative_to(SRC.parent)
    for number, kind, name in includes(path):
        if kind == "<":
            if layer == "core" and name.startswith(NOT_IN_CORE):
                problems.append(f"{where}:{number}: core/ includes <{name}> (core needs the standard library only)")
            if layer in ("scheduler", "server") and name.startswith(ORT):
                problems.append(f"{where}:{number}: {layer}/ includes ONNX Runtime <{name}>")
            continue
        if not any(name.startswith(prefix) for prefix in ALLOWED[layer]):
            problems.append(f"{where}:{number}: {layer}/ includes \"{name}\", outside what it may see")


def find_cycles(problems: list) -> None:
    headers = {p.relative_to(SRC).as_posix(): p for p in SRC.rglob("*.h")}
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


def main() -> int:
    problems = []
    for path in sorted(SRC.rglob("*")):
        if path.suffix in (".h", ".cpp"):
            check_file(path, problems)
    find_cycles(problems)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s)")
        return 1
    print("layering: every include goes downwards; no include cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
