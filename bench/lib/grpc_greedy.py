#!/usr/bin/env python3
"""A closed-loop gRPC load for one quota client (bench/quota_latency.py's
greedy client over gRPC): --concurrency ModelInfer calls in flight on one
channel, each sent again as soon as it is answered, for --seconds; every call
carries the metadata `<--header>: <--client-id>`. Prints one line
`GREEDY_JSON {...}`: calls answered, ok, RESOURCE_EXHAUSTED, other errors and
the seconds it ran.

Why not perf_analyzer: its -H headers are ignored for gRPC (so the calls
could not name their client), and it stops at the first failed call, where
this load is almost all refusals. Why not tritonclient.grpc.aio's
InferenceServerClient.infer: it builds the request protobuf on every call; the
request is built once here and sent with grpc.aio on tritonclient's own
generated stub, so that the client's one core goes on calls. It runs in one
thread (one core at most), as wrk does with -t 1 on the HTTP side."""
from __future__ import annotations

import argparse
import asyncio
import json
import struct
import time

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc


def request(model: str) -> service_pb2.ModelInferRequest:
    """identity_fp32's request: INPUT0, FP32 [1, 4] (the HTTP body's values)."""
    req = service_pb2.ModelInferRequest(model_name=model)
    req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])  # data: raw_input_contents
    req.raw_input_contents.append(struct.pack("<4f", 1.5, -2.0, 3.25, 4.0))
    return req


async def run(url: str, model: str, header: str, client_id: str, concurrency: int, seconds: float) -> dict:
    counts = {"requests": 0, "ok": 0, "resource_exhausted": 0, "other_errors": 0}
    req = request(model)
    metadata = ((header.lower(), client_id),)
    async with grpc.aio.insecure_channel(url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        await channel.channel_ready()
        start = time.monotonic()
        end = start + seconds

        async def worker() -> None:
            while time.monotonic() < end:
                try:
                    await stub.ModelInfer(req, metadata=metadata, timeout=10)
                    counts["ok"] += 1
                except grpc.aio.AioRpcError as e:
                    key = "resource_exhausted" if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else "other_errors"
                    counts[key] += 1
                counts["requests"] += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        counts["duration_s"] = time.monotonic() - start
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="host:port of the gRPC endpoint")
    ap.add_argument("--model", required=True)
    ap.add_argument("--header", required=True, help="the server's --client-id-header (sent lowercase)")
    ap.add_argument("--client-id", required=True)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    counts = asyncio.run(run(args.url, args.model, args.header, args.client_id, args.concurrency, args.seconds))
    print("GREEDY_JSON " + json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
