#!/usr/bin/env bash
# Installs everything ortserve needs to build, run and test, idempotently:
#   1. Debian packages (compiler, Boost.Beast, gRPC/protobuf, simdjson, ...)
#   2. ONNX Runtime 1.29.0 C/C++ SDK from a pinned npm package, integrity-checked,
#      unpacked into third_party/onnxruntime (git-ignored). ONNXRUNTIME_ROOT
#      pointing at another install skips this step.
#   3. A Python virtual environment (.venv) with the test and benchmark tools,
#      and the test models that come from registry packages (Silero VAD from
#      PyPI `silero-vad`, pinned and integrity-checked, into the git-ignored
#      .cache/models; scripts/silero_vad.py).
#   gpu (only when asked: `make gpu-deps`): the GPU provider libraries (CUDA 13,
#      TensorRT 10) from a pinned npm package, integrity-checked, installed with
#      the ONNX Runtime above into third_party/onnxruntime-gpu; build the GPU
#      flavour with ONNXRUNTIME_ROOT=third_party/onnxruntime-gpu (docs/gpu.md).
#   gpu-wheels (`make gpu-wheels`, run by `make gpu-bundle-check`): the CUDA 13 /
#      cuDNN 9 wheels of the GPU host (scripts/requirements-gpu-wheels.txt,
#      hash-checked, about 1.8 GB) into .cache/gpu-wheels/site, for resolving
#      the CUDA provider on a machine without a GPU; never needed to build.
#   bench (`make bench-deps`, run by `make bench`): nginx (Debian's nginx-light), the
#      tiny model's static-answer contender; the service the package starts is
#      stopped again, the bench runs its own nginx on a free port.
#   deploy (`make deploy-deps`, run by `make test`): the offline deployment
#      checks' tools: HAProxy (Debian), Helm built from the Go module proxy
#      (needs Go >= 1.24 on PATH or in /usr/local/go), and kubernetes-validate
#      + checkov in their own venv; all under $DEPLOY_TOOLS (default
#      .cache/deploy-tools). docs/deploy.md, "Checks".
# Usage: scripts/setup.sh [apt] [ort] [python] [gpu] [gpu-wheels] [fuzz] [bench] [deploy]   (no argument: apt ort python)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(apt ort python)

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  libboost1.81-dev zlib1g-dev libssl-dev
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libsimdjson-dev rapidjson-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libjemalloc-dev libb64-0d npm python3-venv wrk ccache
  # The onnxruntime-extensions wheel's op library needs libpython's symbols in
  # the server (LD_PRELOAD; docs/model-config.md, "Operator libraries").
  libpython3.11
)

ORT_NPM_PACKAGE="com.github.asus4.onnxruntime@0.4.9"
ORT_NPM_INTEGRITY="sha512-BkzxduSZ9IkeDP6Q8lz2TFU2ie7hSSvS7ZIfzMooExoq0CNzJnuuGaUJ7IsojBgqO4ouD1jXah8OYyJbCN29Fg=="
ORT_VERSION="1.29.0"
ORT_DIR="$ROOT/third_party/onnxruntime"
ORT_GPU_NPM_PACKAGE="com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9"
ORT_GPU_NPM_INTEGRITY="sha512-FopIhNE/Ng+v2X65wVc9clPCBCvhvA53Hxo2U0Kf5fGdVsC7iCA+mZ0KLWggcQAj7TIZ6pNidR4AC10g74Xo6w=="
ORT_GPU_DIR="$ROOT/third_party/onnxruntime-gpu"

log() { echo "[setup] $*"; }

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Only for `make fuzz` (libFuzzer + sanitizers); `make test` replays the corpora with GCC.
FUZZ_APT_PACKAGES=(clang-14 libclang-rt-14-dev)

install_apt() {
  local missing=()
  for p in "$@"; do
    # npm/python3-venv may be satisfied by non-Debian installs (nvm, pyenv).
    case $p in
      npm) command -v npm >/dev/null && continue ;;
      python3-venv) python3 -c 'import venv, ensurepip' 2>/dev/null && continue ;;
    esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "Debian packages: all present"; return; fi
  log "Debian packages missing: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

install_ort() {
  if [ -n "${ONNXRUNTIME_ROOT:-}" ]; then log "ONNX Runtime: using ONNXRUNTIME_ROOT=$ONNXRUNTIME_ROOT"; return; fi
  if [ -f "$ORT_DIR/.version" ] && [ "$(cat "$ORT_DIR/.version")" = "$ORT_NPM_PACKAGE" ]; then
    log "ONNX Runtime: $ORT_VERSION present in $ORT_DIR"; return
  fi
  local tmp; tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  log "ONNX Runtime: fetching $ORT_NPM_PACKAGE"
  (cd "$tmp" && npm pack --silent "$ORT_NPM_PACKAGE" >/dev/null)
  local tgz; tgz=$(ls "$tmp"/*.tgz)
  local got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$ORT_NPM_INTEGRITY" ]; then
    echo "[setup] ONNX Runtime tarball integrity mismatch: expected $ORT_NPM_INTEGRITY, got $got" >&2; exit 1
  fi
  tar -xzf "$tgz" -C "$tmp"
  local pkg="$tmp/package"
  local hdr="$pkg/Plugins/iOS~/onnxruntime.xcframework/ios-arm64_x86_64-simulator/onnxruntime.framework/Headers"
  rm -rf "$ORT_DIR"; mkdir -p "$ORT_DIR/include" "$ORT_DIR/lib"
  cp "$hdr"/*.h "$ORT_DIR/include/"
  cp -P "$pkg"/Plugins/Linux/x64/libonnxruntime*.so "$ORT_DIR/lib/"
  # The SDK ships libonnxruntime.so with SONAME libonnxruntime.so.1: provide that name too.
  (cd "$ORT_DIR/lib" && [ -e libonnxruntime.so.1 ] || ln -s libonnxruntime.so libonnxruntime.so.1)
  echo "$ORT_NPM_PACKAGE" > "$ORT_DIR/.version"
  log "ONNX Runtime: installed into $ORT_DIR"
}

# The GPU package holds only provider libraries (libonnxruntime_providers_cuda.so,
# _tensorrt.so, _shared.so), no libonnxruntime.so: ORT's core loads them from
# its own directory, so they go next to a copy of the core SDK.
install_gpu() {
  local stamp="$ORT_NPM_PACKAGE + $ORT_GPU_NPM_PACKAGE"
  if [ -f "$ORT_GPU_DIR/.version" ] && [ "$(cat "$ORT_GPU_DIR/.version")" = "$stamp" ]; then
    log "ONNX Runtime GPU providers: present in $ORT_GPU_DIR"; return
  fi
  (unset ONNXRUNTIME_ROOT; install_ort)
  local tmp; tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  log "ONNX Runtime GPU providers: fetching $ORT_GPU_NPM_PACKAGE (~180 MB)"
  (cd "$tmp" && npm pack --silent "$ORT_GPU_NPM_PACKAGE" >/dev/null)
  local tgz; tgz=$(ls "$tmp"/*.tgz)
  local got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$ORT_GPU_NPM_INTEGRITY" ]; then
    echo "[setup] GPU provider tarball integrity mismatch: expected $ORT_GPU_NPM_INTEGRITY, got $got" >&2; exit 1
  fi
  tar -xzf "$tgz" -C "$tmp" package/Plugins/Linux/x64
  rm -rf "$ORT_GPU_DIR"; mkdir -p "$ORT_GPU_DIR"
  cp -a "$ORT_DIR/include" "$ORT_DIR/lib" "$ORT_GPU_DIR/"
  cp "$tmp"/package/Plugins/Linux/x64/libonnxruntime_providers_*.so "$ORT_GPU_DIR/lib/"
  echo "$stamp" > "$ORT_GPU_DIR/.version"
  log "ONNX Runtime GPU providers: installed into $ORT_GPU_DIR (build with ONNXRUNTIME_ROOT=$ORT_GPU_DIR)"
}

GPU_WHEELS_REQUIREMENTS="$ROOT/scripts/requirements-gpu-wheels.txt"
GPU_WHEELS_DIR=${GPU_WHEELS_DIR:-$ROOT/.cache/gpu-wheels}
install_gpu_wheels() {
  local want; want=$(sha256sum "$GPU_WHEELS_REQUIREMENTS" | cut -d' ' -f1)
  if [ "$(cat "$GPU_WHEELS_DIR/.requirements.sha" 2>/dev/null)" = "$want" ]; then
    log "CUDA wheels: present in $GPU_WHEELS_DIR/site"; return
  fi
  [ -x "$ROOT/.venv/bin/pip" ] || install_python
  log "CUDA wheels: installing $GPU_WHEELS_REQUIREMENTS into $GPU_WHEELS_DIR/site (~1.8 GB)"
  rm -rf "$GPU_WHEELS_DIR/site"; mkdir -p "$GPU_WHEELS_DIR"
  "$ROOT/.venv/bin/pip" install -q --no-deps --require-hashes --only-binary=:all: \
    --target "$GPU_WHEELS_DIR/site" -r "$GPU_WHEELS_REQUIREMENTS"
  echo "$want" > "$GPU_WHEELS_DIR/.requirements.sha"
  log "CUDA wheels: installed"
}

PY_REQUIREMENTS="$ROOT/scripts/requirements.txt"
install_python() {
  local venv="$ROOT/.venv"
  local stamp="$venv/.requirements.sha"
  local want; want=$(sha256sum "$PY_REQUIREMENTS" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then log "Python venv: up to date"; return; fi
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -r "$PY_REQUIREMENTS"
  echo "$want" > "$stamp"
  log "Python venv: installed"
}

# Checks the cached file and fetches it only when it is missing or wrong. Only
# the tests need it: a failure here is reported, and the tests fetch again.
fetch_test_models() {
  local model
  if model=$("$ROOT/.venv/bin/python" "$ROOT/scripts/silero_vad.py" fetch); then
    log "Silero VAD: $model"
  else
    log "Silero VAD: fetch failed; tests/integration/test_sequence_vad.py will try again"
  fi
}

install_bench_tools() {
  # Where bench_servers.nginx_binary looks: PATH, then Debian's /usr/sbin.
  if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
    log "nginx: present"; return
  fi
  install_apt nginx-light
  # The package starts its own service on port 80; the bench needs only the program.
  as_root sh -c 'command -v invoke-rc.d >/dev/null && invoke-rc.d nginx stop' >/dev/null 2>&1 || true
}

DEPLOY_APT_PACKAGES=(haproxy)
HELM_MODULE="helm.sh/helm/v3/cmd/helm@v3.19.0"
DEPLOY_TOOLS=${DEPLOY_TOOLS:-$ROOT/.cache/deploy-tools}
install_deploy_tools() {
  install_apt "${DEPLOY_APT_PACKAGES[@]}"
  mkdir -p "$DEPLOY_TOOLS/bin"
  if [ -x "$DEPLOY_TOOLS/bin/helm" ] && [ "$(cat "$DEPLOY_TOOLS/bin/.helm-module" 2>/dev/null)" = "$HELM_MODULE" ]; then
    log "Helm: present in $DEPLOY_TOOLS/bin"
  else
    local go_bin; go_bin=$(command -v go || echo /usr/local/go/bin/go)
    [ -x "$go_bin" ] || { echo "[setup] Helm is built with Go (>= 1.24), which is not installed" >&2; exit 1; }
    log "Helm: building $HELM_MODULE from the Go module proxy"
    GOPATH="$DEPLOY_TOOLS/go" GOMODCACHE="$DEPLOY_TOOLS/go/mod" GOBIN="$DEPLOY_TOOLS/bin" GOFLAGS=-modcacherw \
      "$go_bin" install "$HELM_MODULE"
    echo "$HELM_MODULE" > "$DEPLOY_TOOLS/bin/.helm-module"
  fi
  local venv="$DEPLOY_TOOLS/venv" req="$ROOT/scripts/requirements-deploy.txt"
  local want; want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ "$(cat "$venv/.requirements.sha" 2>/dev/null)" = "$want" ]; then
    log "Deploy check venv: up to date"
  else
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q -r "$req"
    echo "$want" > "$venv/.requirements.sha"
    log "Deploy check venv: installed"
  fi
}

for s in "${steps[@]}"; do
  case $s in
    apt) install_apt "${APT_PACKAGES[@]}" ;;
    fuzz) install_apt "${FUZZ_APT_PACKAGES[@]}" ;;
    ort) install_ort ;;
    python) install_python; fetch_test_models ;;
    gpu) install_gpu ;;
    gpu-wheels) install_gpu_wheels ;;
    bench) install_bench_tools ;;
    deploy) install_deploy_tools ;;
    *) echo "unknown step: $s" >&2; exit 2 ;;
  esac
done
