#!/usr/bin/env bash
# The GPU bundle's entry point (docs/gpu.md, "The portable GPU bundle"): run
# from the unpacked bundle on a GPU host that has the NVIDIA driver, Python 3
# with numpy, and the CUDA 13 / cuDNN 9 libraries (pip wheels such as
# nvidia-cuda-runtime, nvidia-cublas, nvidia-cudnn-cu13, nvidia-cufft,
# nvidia-curand, or a system install). Needs no network and installs nothing.
#   1. cuda-env.sh: puts the CUDA libraries on LD_LIBRARY_PATH (every
#      site-packages/nvidia/*/lib that python3 sees; ORTSERVE_CUDA_LIB_DIRS=dir:dir
#      first), and the driver's libcuda.so.1 folder when the loader does not know it;
#   2. preflight: ldd of the bundle's programs and of the CUDA provider, and
#      the libraries the provider opens itself (cuDNN, cuFFT, NVRTC): any
#      missing one is named in the report;
#   3. checks/gpu_checks.py: the on-GPU checks (its docstring lists them):
#      a step that would end after 240 s is skipped, `timeout 300` ends a hang;
#   4. writes gpu-report.md (+ gpu-report.json, every figure) and
#      gpu-logs.tar.gz (server logs) to --out (default: $OUT, else this folder).
# Usage: ./run-gpu-checks.sh [--out DIR] [--scale 1.0] [--preflight-only] [--rehearse]
#   --rehearse: on a machine without a GPU (make gpu-bundle-check): KIND_CPU
#   instances, short windows; --preflight-only: steps 1-2, exit 1 if a library is missing.
set -uo pipefail
BUNDLE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${OUT:-$BUNDLE}
SCALE=1.0
PREFLIGHT_ONLY=0
REHEARSE=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUTDIR=$2; shift 2 ;;
    --scale) SCALE=$2; shift 2 ;;
    --preflight-only) PREFLIGHT_ONLY=1; shift ;;
    --rehearse) REHEARSE=(--rehearse); shift ;;
    *) echo "run-gpu-checks.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
PYTHON=${PYTHON:-python3}
WORK=${ORTSERVE_GPU_WORK:-$(mktemp -d /tmp/ortserve-gpu-checks.XXXXXX)}
mkdir -p "$OUTDIR" "$WORK"
PREFLIGHT="$WORK/preflight.txt"
: > "$PREFLIGHT"
note() { echo "$*" | tee -a "$PREFLIGHT"; }

# 1. The CUDA libraries.
. "$BUNDLE/cuda-env.sh"
note "python: $(command -v "$PYTHON") ($("$PYTHON" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1))"
note "CUDA library folders from python's nvidia wheels: ${CUDA_WHEEL_LIB_DIRS//$'\n'/ }"
note "CUDA wheels: $("$PYTHON" -c 'import importlib.metadata as m; print(" ".join(sorted(d.metadata["Name"] + "==" + d.version for d in m.distributions() if (d.metadata["Name"] or "").lower().startswith(("nvidia-", "cuda-")))))' 2>&1)"
note "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

# 2. Preflight.
missing=0
for f in bin/ortserve bin/ortserve_gpu_baseline bin/ortserve_http_load bin/runtime_gpu_options_test \
         lib/libonnxruntime_providers_cuda.so; do
  bad=$(ldd "$BUNDLE/$f" 2>&1 | grep -E "not found|version .* not found" || true)
  if [ -n "$bad" ]; then note "MISSING for $f: $(echo "$bad" | tr -s ' \t\n' ' ')"; missing=1; fi
done
for lib in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcufft.so.12 \
           libcudnn.so.9 libcudnn_graph.so.9 libcudnn_ops.so.9 libcudnn_cnn.so.9 libcudnn_engines_precompiled.so.9 \
           libcudnn_engines_runtime_compiled.so.9 libcudnn_heuristic.so.9 libnvrtc.so.13; do
  where=$(found_by_loader "$lib")
  note "  $lib: ${where:-NOT FOUND}"
  [ -z "$where" ] && missing=1
done
if [ $PREFLIGHT_ONLY -eq 1 ]; then
  [ $missing -eq 0 ] && note "preflight: every library found" || note "preflight: libraries missing (above)"
  exit $missing
fi

# 3. The checks (they stop themselves at --deadline-s; timeout only catches a hang).
echo "[run-gpu-checks] checks/gpu_checks.py, report $OUTDIR/gpu-report.md, work $WORK"
ORTSERVE_GPU_PREFLIGHT="$PREFLIGHT" timeout 300 "$PYTHON" "$BUNDLE/checks/gpu_checks.py" --bundle "$BUNDLE" \
  --report "$OUTDIR/gpu-report.md" --work "$WORK" --scale "$SCALE" "${REHEARSE[@]}"
rc=$?

# 4. The logs, at most 10 MB of each file.
( cd "$WORK" && find logs -type f -size +10M -exec truncate -s 10M {} + ; \
  tar -czf "$OUTDIR/gpu-logs.tar.gz" preflight.txt logs ) || echo "[run-gpu-checks] could not pack the logs" >&2
echo "[run-gpu-checks] rc=$rc; report: $OUTDIR/gpu-report.md, logs: $OUTDIR/gpu-logs.tar.gz"
exit $rc
