#!/usr/bin/env bash
# Where a compute-bound request's CPU goes, per thread of the server: serves
# only one bench model (`cnn` unless CNN_MODEL names another), puts LOAD on it at concurrency 4 for SECONDS, and
# prints the inferences/s (the model's statistics) and, per thread group (the
# thread's name up to its number: run-cnn, ort-pool, http-io, grpc-cq, ...),
# its CPU (utime+stime from /proc) per inference. With PERF=DIR it also
# records `perf record -g` of the server over the load into DIR/LOAD.data.
#
#   bench/cnn_threads.sh BIN LOAD [SECONDS] [WORK]
# LOAD: wrk_bin, wrk_json, pa_http or pa_grpc. WORK holds
# bench/lib/make_bench_models.py's output (default bench/work). Env: CNN_PORT
# (18691, three ports from it), THREAD_BUDGET (2), CNN_CONCURRENCY (4).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:?ortserve binary}
LOAD=${2:?wrk_bin, wrk_json, pa_http or pa_grpc}
SECONDS_=${3:-6}
WORK=${4:-$ROOT/bench/work}
PORT=${CNN_PORT:-18691}
CONC=${CNN_CONCURRENCY:-4}
MODEL=${CNN_MODEL:-cnn}  # another bench model, e.g. tiny for a per-request overhead
REPO=$(mktemp -d)
trap 'rm -rf "$REPO"' EXIT
cp -r "$WORK/repo/$MODEL" "$REPO/$MODEL"

"$BIN" --model-repository "$REPO" --http-port "$PORT" --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) \
  --thread-budget "${THREAD_BUDGET:-2}" --log-verbose 0 > "$WORK/cnn_threads.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$REPO"' EXIT
for _ in $(seq 200); do curl -sf "localhost:$PORT/v2/models/$MODEL/ready" > /dev/null && break; sleep 0.1; done

thread_ticks() {  # "group ticks" per thread, the group being the name without its trailing number
  local task
  for task in /proc/"$PID"/task/*; do
    local name; name=$(cat "$task/comm" 2>/dev/null) || continue
    echo "${name%%[0-9]*} $(awk '{print $14 + $15}' "$task/stat" 2>/dev/null || echo 0)"
  done | awk '{ s[$1] += $2 } END { for (g in s) print g, s[g] }' | sort
}
inferences() {
  curl -sf "localhost:$PORT/v2/models/$MODEL/stats" | python3 -c \
    'import json,sys; print(json.load(sys.stdin)["model_stats"][0]["inference_count"])'
}

load() {  # runs LOAD for $1 seconds
  case $LOAD in
    wrk_bin) WRK_BODY_FILE="$WORK/requests/$MODEL.bin" WRK_INFERENCE_HEADER_LENGTH=$(python3 -c \
        "import json; print(json.load(open('$WORK/manifest.json'))['$MODEL']['request_bin_header_bytes'])") \
        wrk -t1 -c"$CONC" -d"$1s" -s "$ROOT/bench/lib/wrk_post.lua" "http://127.0.0.1:$PORT/v2/models/$MODEL/infer" ;;
    wrk_json) WRK_BODY_FILE="$WORK/requests/$MODEL.json" \
        wrk -t1 -c"$CONC" -d"$1s" -s "$ROOT/bench/lib/wrk_post.lua" "http://127.0.0.1:$PORT/v2/models/$MODEL/infer" ;;
    pa_http|pa_grpc)
      local proto=http url=127.0.0.1:$PORT
      [ "$LOAD" = pa_grpc ] && proto=grpc url=127.0.0.1:$((PORT + 1))
      # A window as long as the run, one measurement: the load lasts about $1 s.
      LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:$ROOT/.venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib" \
        "$ROOT/.venv/bin/perf_analyzer" -m "$MODEL" -u "$url" -i "$proto" --async --max-threads 2 \
        --concurrency-range "$CONC:$CONC" -p $(($1 * 1000)) -r 1 -s 1000 \
        --input-data "$WORK/requests/$MODEL.pa.json" || true ;;  # it may not see a stable window
    *) echo "unknown load $LOAD" >&2; exit 2 ;;
  esac > /dev/null 2>&1
}

load 2  # warm-up: the batcher's mix and ORT's arenas settle
before=$(thread_ticks); n0=$(inferences); t0=$(date +%s.%N)
if [ -n "${PERF:-}" ]; then
  mkdir -p "$PERF"
  perf record -g -q -o "$PERF/$LOAD.data" -p "$PID" > /dev/null 2>&1 &
  PERF_PID=$!
fi
load "$SECONDS_"
if [ -n "${PERF:-}" ]; then kill -INT "$PERF_PID"; wait "$PERF_PID" || true; fi
after=$(thread_ticks); n1=$(inferences); t1=$(date +%s.%N)
n=$((n1 - n0))
echo "$MODEL $LOAD @$CONC: $n inferences, $(awk -v n=$n -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", n / (b - a) }') inf/s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
join -a1 <(echo "$after") <(echo "$before") | awk -v n=$n -v hz="$(getconf CLK_TCK)" \
  '{ d = $2 - ($3 == "" ? 0 : $3); if (d > 0) printf "  %-12s %8.0f us CPU per inference\n", $1, d / hz * 1e6 / n; t += d }
   END { printf "  %-12s %8.0f us CPU per inference\n", "total", t / hz * 1e6 / n }'
