#!/usr/bin/env bash
# The batching window A/B (docs/decisions.md, "Triton's batching window by
# default"): bench models mlp (batch_window adaptive) and mlp_fixed (Triton's
# fixed window, the default), same ONNX file and max_queue_delay 2000 us,
# under perf_analyzer closed-loop concurrencies and one open-loop rate.
#
#   bench/batch_window_ab.sh [WORK] [ORTSERVE_BIN] [CONCURRENCIES] [RATE]
#   (defaults: bench/work build/ortserve "1 8 32" 1000)
# WORK holds the repository from bench/lib/make_bench_models.py. Prints one line
# per point: model, load, throughput, p50/p99 latency, average batch size
# (inference_count / execution_count from the statistics endpoint).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$ROOT/bench/work}
BIN=${2:-$ROOT/build/ortserve}
CONCURRENCIES=${3:-"1 8 32"}
RATE=${4:-1000}
PY=${PYTHON:-$ROOT/.venv/bin/python}
PA=$(dirname "$PY")/perf_analyzer
CUDART=$("$PY" -c 'import nvidia.cuda_runtime as m; print(list(m.__path__)[0] + "/lib")')
PORT=18571
"$BIN" --model-repository "$WORK/repo" --http-port $PORT --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) \
  > "$WORK/batch_window_ab.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER; wait $SERVER || true' EXIT
for _ in $(seq 120); do
  curl -sf "localhost:$PORT/v2/models/mlp_fixed/ready" >/dev/null && curl -sf "localhost:$PORT/v2/models/mlp/ready" \
    >/dev/null && break
  sleep 1
done
counts() { curl -s "localhost:$PORT/v2/models/$1/stats" | "$PY" -c \
  'import json,sys; s=json.load(sys.stdin)["model_stats"][0]; print(s["inference_count"], s["execution_count"])'; }
point() {  # model, load flag, load value
  read -r i0 e0 < <(counts "$1")
  out=$(LD_LIBRARY_PATH=$CUDART "$PA" -m "$1" -u "localhost:$PORT" "$2" "$3" -p 3000 -b 1 -s 1000 -r 4 \
        --input-data "$WORK/requests/$1.pa.json" 2>&1 || true)
  read -r i1 e1 < <(counts "$1")
  tput=$(grep -oP 'Throughput: \K[0-9.]+' <<<"$out" | tail -1 || true)
  p50=$(grep -oP 'p50 latency: \K[0-9]+' <<<"$out" | tail -1 || true)
  p99=$(grep -oP 'p99 latency: \K[0-9]+' <<<"$out" | tail -1 || true)
  batch=$("$PY" -c "print(round(($i1 - $i0) / max($e1 - $e0, 1), 1))")
  echo "$1 ${2#--} $3: ${tput} infer/s, p50 ${p50} us, p99 ${p99} us, avg batch ${batch}"
}
for c in $CONCURRENCIES; do
  for m in mlp_fixed mlp; do point $m --concurrency-range "$c"; done
done
for m in mlp_fixed mlp; do point $m --request-rate-range "$RATE"; done
