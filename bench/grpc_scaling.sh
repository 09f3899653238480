#!/usr/bin/env bash
# gRPC front-end scaling on the tiny model (no-op-sized): throughput vs
# --grpc-thread-count, then the demo mlp_classifier under perf_analyzer -i http
# at concurrency 8. Needs `make build` and `python bench/lib/make_bench_models.py`.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/.venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib
for t in 1 2; do
  build/ortserve --model-repository bench/work/repo --http-port 18400 --grpc-port 18401 --metrics-port 18402 --grpc-thread-count $t > /tmp/gs_$t.log 2>&1 &
  pid=$!
  sleep 4
  for c in 16 64; do
    r=$(timeout 60 .venv/bin/perf_analyzer -m tiny -x 1 -u 127.0.0.1:18401 -i grpc -p 2000 -r 3 -s 1000 --async --max-threads 2 --concurrency-range $c:$c --input-data bench/work/requests/tiny.pa.json 2>&1 | grep "^Concurrency:")
    echo "grpc-thread-count=$t $r"
  done
  kill $pid; wait $pid 2>/dev/null
done
build/ortserve --model-repository models --http-port 18500 --grpc-port 18501 --metrics-port 18502 > /tmp/demo.log 2>&1 &
pid=$!
sleep 4
timeout 60 .venv/bin/perf_analyzer -m mlp_classifier -u 127.0.0.1:18500 -i http --concurrency-range 8 -p 3000 2>&1 | grep -E "Throughput|p99 latency|Concurrency:|Avg request latency"
kill $pid; wait $pid 2>/dev/null
