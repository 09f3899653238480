# Sourced (`. cuda-env.sh`), by run-gpu-checks.sh and by whoever serves with
# the GPU bundle (docs/gpu.md, "The portable GPU bundle"): puts the CUDA 13 /
# cuDNN 9 libraries that ONNX Runtime's CUDA provider loads on
# LD_LIBRARY_PATH, before what it held:
#   - ORTSERVE_CUDA_LIB_DIRS (dir:dir), first when set;
#   - every site-packages/nvidia/*/lib that $PYTHON (default python3) sees:
#     the NVIDIA wheels (nvidia-cuda-runtime, nvidia-cublas, nvidia-cudnn-cu13, ...);
#   - the driver's libcuda.so.1 folder, last, when the loader knows none.
# Sets CUDA_WHEEL_LIB_DIRS (the wheel folders found) and defines
# found_by_loader NAME (where the loader would find NAME, or nothing).
found_by_loader() {
  local d
  for d in ${LD_LIBRARY_PATH//:/ }; do [ -e "$d/$1" ] && { echo "$d/$1"; return 0; }; done
  ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }'
}
CUDA_WHEEL_LIB_DIRS=$("${PYTHON:-python3}" - <<'PYEOF' 2>/dev/null
import importlib.util, pathlib
spec = importlib.util.find_spec("nvidia")
for root in (spec.submodule_search_locations if spec and spec.submodule_search_locations else []):
    for lib in sorted(pathlib.Path(root).glob("*/lib")):
        print(lib)
PYEOF
)
_cuda_lib_path=${ORTSERVE_CUDA_LIB_DIRS:-}
for _d in $CUDA_WHEEL_LIB_DIRS; do _cuda_lib_path=${_cuda_lib_path:+$_cuda_lib_path:}$_d; done
export LD_LIBRARY_PATH=${_cuda_lib_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -z "$(found_by_loader libcuda.so.1)" ]; then
  for _d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib; do
    if [ -e "$_d/libcuda.so.1" ]; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$_d; break; fi
  done
fi
unset _cuda_lib_path _d
