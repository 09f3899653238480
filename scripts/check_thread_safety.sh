#!/usr/bin/env bash
# `make thread-safety`: compiles the layers whose locks are annotated
# (core/Mutex.h: ORTSERVE_GUARDED_BY, ORTSERVE_REQUIRES, ...) with clang's
# thread-safety analysis as errors, in build-tsa/. GCC ignores the
# annotations; this is the build that checks them. Part of CI (.ci/run).
# Needs clang (scripts/setup.sh fuzz installs clang-14).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TSA_BUILD_DIR:-build-tsa}
JOBS=${JOBS:-$(nproc)}
CXX_BIN=${TSA_CXX:-}
if [ -z "$CXX_BIN" ]; then
  for c in clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null; then CXX_BIN=$c; break; fi
  done
fi
if [ -z "$CXX_BIN" ]; then
  echo "[thread-safety] no clang++ found (scripts/setup.sh fuzz installs clang-14)" >&2
  exit 2
fi
# Debug: the analysis needs no optimiser, and -O0 compiles fastest.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DORTSERVE_BUILD_TESTS=OFF -DORTSERVE_ALLOCATOR=system -DORTSERVE_THREAD_SAFETY_ANALYSIS=ON >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target ortserve_scheduler ortserve_config ortserve_serving ortserve_pipeline ortserve_repository
echo "[thread-safety] no findings"
