#!/usr/bin/env bash
# GPU check for an NVIDIA machine with CUDA 13 + cuDNN 9 (TensorRT 10 optional):
#   1. fetch the GPU provider libraries (make gpu-deps)
#   2. build the GPU flavour (ONNXRUNTIME_ROOT=third_party/onnxruntime-gpu) in build-gpu-check
#   3. run the GPU unit tests (strict CUDA instances, IOBinding, CUDA graphs,
#      numerical check) and tests/integration/test_gpu.py
#   4. write a short report to $OUT/gpu-report.txt (or ./gpu-report.txt)
# Budget: well under 10 minutes (each step has its own timeout).
# Usage: scripts/gpu-check.sh   (JOBS=N to change build parallelism)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REPORT="${OUT:-$ROOT}/gpu-report.txt"
BUILD=build-gpu-check
JOBS=${JOBS:-$(nproc)}
export ONNXRUNTIME_ROOT="$ROOT/third_party/onnxruntime-gpu"
mkdir -p "$(dirname "$REPORT")"
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS log="${OUT:-$ROOT}/gpu-check-$name.log"
  timeout "$limit" "$@" > "$log" 2>&1
  local rc=$?
  say "[$name] rc=$rc in $((SECONDS - start))s (log: $log)"
  [ $rc -ne 0 ] && tail -n 25 "$log" | sed 's/^/    /' | tee -a "$REPORT" >/dev/null
  return $rc
}

say "ortserve GPU check $(date -u +%FT%TZ)"
say "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4 | tr '\n' ';')"
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcufft.so.12 libcudnn.so.9 libnvinfer.so.10 libnvonnxparser.so.10; do
  where=$( (ldconfig -p 2>/dev/null | grep -m1 " $lib " | sed 's/.*=> //') || true)
  if [ -z "$where" ]; then
    for d in ${LD_LIBRARY_PATH//:/ }; do [ -e "$d/$lib" ] && where="$d/$lib" && break; done
  fi
  say "  $lib: ${where:-NOT FOUND}"
done

ok=1
step deps 240 scripts/setup.sh apt ort python gpu || ok=0
if [ $ok -eq 1 ]; then
  step configure 60 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release || ok=0
fi
if [ $ok -eq 1 ]; then
  step build 360 cmake --build "$BUILD" -j "$JOBS" --target ortserve runtime_gpu_options_test \
    runtime_gpu_numerics_test config_gpu_config_test runtime_ort_model_instance_test || ok=0
fi
if [ $ok -eq 1 ]; then
  for t in runtime_gpu_options_test runtime_gpu_numerics_test config_gpu_config_test; do
    step "$t" 120 "$BUILD/$t" --gtest_brief=0 || ok=0
    grep -E "^\[  (SKIPPED|FAILED) \]|Skipped|no usable CUDA" "${OUT:-$ROOT}/gpu-check-$t.log" | head -5 | sed 's/^/    /' | tee -a "$REPORT" >/dev/null
  done
  if grep -q "no usable CUDA" "${OUT:-$ROOT}/gpu-check-runtime_gpu_options_test.log"; then
    say "[cuda] the GPU unit tests skipped: CUDA is not usable with this build (see the reason above)"; ok=0
  fi
  step integration 240 env ORTSERVE_BIN="$BUILD/ortserve" .venv/bin/pytest tests/integration/test_gpu.py -v -rs || ok=0
  if grep -q "SKIPPED" "${OUT:-$ROOT}/gpu-check-integration.log"; then say "[integration] tests skipped"; ok=0; fi
  grep -E "PASSED|FAILED|SKIPPED|ERROR" "${OUT:-$ROOT}/gpu-check-integration.log" | head -20 | sed 's/^/    /' | tee -a "$REPORT" >/dev/null
fi
say "RESULT: $([ $ok -eq 1 ] && echo PASS || echo FAIL)"
[ $ok -eq 1 ]
