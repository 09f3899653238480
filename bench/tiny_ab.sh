#!/usr/bin/env bash
# The tiny A/B of docs/decisions.md: two ortserve builds, alternated round by
# round, serving only the `tiny` bench model (per-request overhead dominates)
# under wrk's JSON load. Prints, per round and build, wrk's request rate and
# the server's CPU per request (utime+stime of every thread of the process,
# from /proc/<pid>/stat, over the load, divided by wrk's request count), then
# the median of each. CPU per request is the figure to compare: it moves less
# with the other load on the machine than the rate does.
#
#   bench/tiny_ab.sh OLD_BIN NEW_BIN [ROUNDS] [WORK]   (defaults: 5, bench/work)
# WORK holds bench/lib/make_bench_models.py's output (run it first). Env:
# WRK_CONNECTIONS (32), WRK_SECONDS (5), THREAD_BUDGET (2), AB_PORT (18591), AB_MODEL (tiny: another
# bench model, e.g. mlp, under its own JSON request, for the loads a change must not slow), NEW_CONFIG_APPEND
# (text appended to tiny's config.pbtxt for the NEW runs only: with the same
# binary twice, an A/B of a config feature, e.g. drift statistics:
#   NEW_CONFIG_APPEND='parameters { key: "drift_baseline_requests" value { string_value: "1000" } }' \
#     bench/tiny_ab.sh build/ortserve build/ortserve).
# BOTH_CONFIG_APPEND (text appended to tiny's config.pbtxt on both sides) and
# AB_COPY_VERSION (a version number: tiny's version 1 is copied as that
# version on both sides), for features that need two loaded versions, e.g.
# the shadow comparison's bookkeeping at a negligible fraction:
#   AB_COPY_VERSION=2 BOTH_CONFIG_APPEND='version_policy { all { } }' \
#   NEW_CONFIG_APPEND='parameters { key: "shadow_version" value { string_value: "2" } }
#     parameters { key: "shadow_fraction" value { string_value: "0.000001" } }' \
#     bench/tiny_ab.sh build/ortserve build/ortserve
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=${1:?old ortserve binary}
NEW=${2:?new ortserve binary}
ROUNDS=${3:-5}
WORK=${4:-$ROOT/bench/work}
CONNECTIONS=${WRK_CONNECTIONS:-32}
DURATION=${WRK_SECONDS:-5}
PORT=${AB_PORT:-18591}  # AB_PORT: another base port (three ports from it)
REPO=$(mktemp -d)
trap 'rm -rf "$REPO"' EXIT
mkdir "$REPO/old" "$REPO/new"
MODEL=${AB_MODEL:-tiny}
cp -r "$WORK/repo/$MODEL" "$REPO/old/$MODEL"
cp -r "$WORK/repo/$MODEL" "$REPO/new/$MODEL"
for side in old new; do
  if [ -n "${BOTH_CONFIG_APPEND:-}" ]; then printf '\n%s\n' "$BOTH_CONFIG_APPEND" >> "$REPO/$side/$MODEL/config.pbtxt"; fi
  if [ -n "${AB_COPY_VERSION:-}" ]; then cp -r "$REPO/$side/$MODEL/1" "$REPO/$side/$MODEL/$AB_COPY_VERSION"; fi
done
if [ -n "${NEW_CONFIG_APPEND:-}" ]; then printf '\n%s\n' "$NEW_CONFIG_APPEND" >> "$REPO/new/$MODEL/config.pbtxt"; fi
TICKS=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime+stime, all threads
io_ticks() {  # utime+stime of the HTTP I/O threads (http-io-N), the tiny load's busiest
  local sum=0 task
  for task in /proc/"$1"/task/*; do
    [[ $(cat "$task/comm" 2>/dev/null) == http-io-* ]] && sum=$((sum + $(awk '{print $14 + $15}' "$task/stat")))
  done
  echo $sum
}

one_round() {  # binary repository -> "req_per_s us_cpu_per_req us_io_thread_cpu_per_req"
  "$1" --model-repository "$2" --http-port $PORT --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) \
    --thread-budget "${THREAD_BUDGET:-2}" --log-verbose 0 > "$WORK/tiny_ab.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -sf "localhost:$PORT/v2/models/$MODEL/ready" > /dev/null && break; sleep 0.1; done
  local before; before=$(cpu_ticks $pid)
  local io_before; io_before=$(io_ticks $pid)
  local out; out=$(WRK_BODY_FILE="$WORK/requests/$MODEL.json" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" \
    -s "$ROOT/bench/lib/wrk_post.lua" "http://127.0.0.1:$PORT/v2/models/$MODEL/infer")
  local after; after=$(cpu_ticks $pid)
  local io_after; io_after=$(io_ticks $pid)
  kill $pid; wait $pid || true
  local requests; requests=$(grep -oP '^\s*\K[0-9]+(?= requests in)' <<< "$out")
  local rate; rate=$(grep -oP 'Requests/sec:\s*\K[0-9.]+' <<< "$out")
  awk -v r="$rate" -v n="$requests" -v t=$((after - before)) -v io=$((io_after - io_before)) -v hz="$TICKS" \
    'BEGIN { printf "%.0f %.2f %.2f\n", r, t / hz * 1e6 / n, io / hz * 1e6 / n }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -a old_rate old_cpu old_io new_rate new_cpu new_io
for r in $(seq "$ROUNDS"); do
  # Alternate which build goes first, so that a drift in the machine's load
  # favours neither.
  if (( r % 2 )); then order="old new"; else order="new old"; fi
  for which in $order; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    read -r rate cpu io < <(one_round "$bin" "$REPO/$which")
    echo "round $r $which: $rate req/s, $cpu us CPU/request ($io us on the HTTP I/O thread)"
    if [ "$which" = old ]; then
      old_rate+=("$rate"); old_cpu+=("$cpu"); old_io+=("$io")
    else
      new_rate+=("$rate"); new_cpu+=("$cpu"); new_io+=("$io")
    fi
  done
done
for side in old new; do
  declare -n rates=${side}_rate cpus=${side}_cpu ios=${side}_io
  echo "median $side: $(printf '%s\n' "${rates[@]}" | median) req/s, $(printf '%s\n' "${cpus[@]}" | median) us CPU/request" \
    "($(printf '%s\n' "${ios[@]}" | median) us on the HTTP I/O thread)"
  unset -n rates cpus ios
done
