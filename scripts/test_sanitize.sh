#!/usr/bin/env bash
# `make test-sanitize`: every test under AddressSanitizer (+ LeakSanitizer) and
# UndefinedBehaviorSanitizer, then a short libFuzzer smoke.
#   1. builds the project in build-asan/ with GCC, -O1 -g1 (line tables: what
#      a report's stack needs; half the compile time of -O2 -g),
#      -fsanitize=address,undefined and -fno-sanitize-recover=undefined (a UBSan
#      finding aborts the process, so it fails the test instead of scrolling by);
#   2. scripts/run_tests.sh build-asan: ctest (unit tests, fuzz corpus replays),
#      then pytest against build-asan/ortserve; a sanitizer report in a server's
#      log fails the test that owned that server (tests/integration/harness.py);
#      the tests marked `scale` are left out (ORTSERVE_SKIP_SCALE=1);
#   3. tests/fuzz/run_fuzz.sh, FUZZ_SECONDS (default 10) per target (clang,
#      build-fuzz/, its own ASAN/UBSAN options).
# Knobs: SANITIZE_BUILD_DIR (build-asan), FUZZ_SECONDS (10), JOBS (nproc),
# ORTSERVE_TEST_TIMEOUT_SCALE (3: the harness's startup/shutdown/request bounds).
# Exit status 1 if the build, any test or the fuzz smoke failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${SANITIZE_BUILD_DIR:-build-asan}
JOBS=${JOBS:-$(nproc)}
t0=$SECONDS

echo "[sanitize] building $BUILD (ASan+UBSan)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DORTSERVE_SANITIZE=address,undefined \
  -DCMAKE_CXX_FLAGS="-fno-sanitize-recover=undefined" >/dev/null || exit 1
cmake --build "$BUILD" -j "$JOBS" || exit 1
t_build=$((SECONDS - t0))

# These reach the test binaries and every server the harness starts.
# detect_leaks=1: a leak fails the test binary / server too (exit code 1).
# No LSan suppressions: the only leaks seen are in ONNX Runtime's own
# telemetry (ORT 1.29's posix build bundles the 1DS SDK + SQLite: a 14-byte
# sqlite3 malloc at Ort::Env creation and 152-byte objects on its worker
# thread, no frame of ours; ORT is stripped, so only a whole-library
# `leak:libonnxruntime.so` suppression could name them, which would also
# hide any OrtValue/session we leaked). ORT_DISABLE_TELEMETRY=1 switches
# that subsystem off at its source instead, and leaves LSan blind to nothing.
export ORT_DISABLE_TELEMETRY=1
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export ORTSERVE_TEST_TIMEOUT_SCALE=${ORTSERVE_TEST_TIMEOUT_SCALE:-3}
export ORTSERVE_SKIP_SCALE=1
t1=$SECONDS
echo "[sanitize] unit + integration tests against $BUILD"
scripts/run_tests.sh "$BUILD"
tests_rc=$?
t_tests=$((SECONDS - t1))
unset ASAN_OPTIONS UBSAN_OPTIONS ORT_DISABLE_TELEMETRY

t2=$SECONDS
echo "[sanitize] fuzz smoke, ${FUZZ_SECONDS:-10}s per target"
FUZZ_SECONDS=${FUZZ_SECONDS:-10} JOBS=$JOBS tests/fuzz/run_fuzz.sh
fuzz_rc=$?
t_fuzz=$((SECONDS - t2))

echo
echo "[sanitize] build ${t_build}s, tests ${t_tests}s (rc $tests_rc), fuzz ${t_fuzz}s (rc $fuzz_rc), total $((SECONDS - t0))s"
if [ "$tests_rc" -ne 0 ] || [ "$fuzz_rc" -ne 0 ]; then exit 1; fi
