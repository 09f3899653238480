#!/usr/bin/env bash
# Regenerates the binary seeds of corpus/grpc_infer_request/ from the readable
# text-format requests in grpc_seeds/*.txtpb:
#   tests/fuzz/make_grpc_seeds.sh
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
for f in grpc_seeds/*.txtpb; do
  out=corpus/grpc_infer_request/$(basename "$f" .txtpb).bin
  protoc --encode=inference.ModelInferRequest -I "$ROOT/proto" "$ROOT/proto/grpc_service.proto" <"$f" >"$out"
  echo "$out ($(stat -c %s "$out") bytes)"
done
