#!/usr/bin/env python3
"""The baseline people deploy: FastAPI + onnxruntime behind uvicorn.

    .venv/bin/python bench/baselines/baseline_fastapi.py --model-repository bench/work/repo \
        --port 8010 --workers 2 --intra-op-threads 1

N uvicorn worker processes (uvloop + httptools; each its own SO_REUSEPORT
socket on the port, see main()), each with one InferenceSession
per model (intra_op_num_threads so that workers x threads = the cores the server
gets), session.run per request, no batching. Written the way such services are
written, without handicaps: the body is parsed with json, the tensor built with
numpy from the JSON list, the handler is `async def` and runs the model inline
(a worker per core, so a thread pool hop would only add a context switch), and
access logging is off.

Routes (the KServe v2 subset perf_analyzer and our load tools need):
  GET  /v2/health/ready, /v2/health/live, /v2 (server metadata)
  GET  /v2/models/{m}            metadata
  GET  /v2/models/{m}/config     Triton-style JSON config (perf_analyzer reads it)
  GET  /v2/models/{m}/stats      Triton statistics shape, zeros (see stats())
  POST /v2/models/{m}/infer      KServe v2 JSON, or Triton's binary tensor
                                 extension (so perf_analyzer can drive it too)
"""
import argparse
import json
import os
import re
import signal
import socket
import sys
import traceback
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import onnxruntime as ort
from fastapi import FastAPI, Request, Response

ORT_TO_V2 = {"tensor(float)": "FP32", "tensor(float16)": "FP16", "tensor(double)": "FP64",
             "tensor(int32)": "INT32", "tensor(int64)": "INT64", "tensor(int8)": "INT8",
             "tensor(uint8)": "UINT8", "tensor(bool)": "BOOL"}
V2_TO_NP = {"FP32": np.float32, "FP16": np.float16, "FP64": np.float64, "INT32": np.int32,
            "INT64": np.int64, "INT8": np.int8, "UINT8": np.uint8, "BOOL": np.bool_}


class Model:
    def __init__(self, name: str, path: Path, threads: int):
        self.name = name
        cfg = (path / "config.pbtxt").read_text() if (path / "config.pbtxt").exists() else ""
        m = re.search(r"max_batch_size\s*:\s*(\d+)", cfg)
        self.max_batch_size = int(m.group(1)) if m else 0
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path / "1" / "model.onnx"), so,
                                            providers=["CPUExecutionProvider"])
        self.inputs = [(i.name, ORT_TO_V2[i.type], i.shape) for i in self.session.get_inputs()]
        self.outputs = [(o.name, ORT_TO_V2[o.type], o.shape) for o in self.session.get_outputs()]

    @staticmethod
    def _dims(shape):
        return [d if isinstance(d, int) else -1 for d in shape]

    def metadata(self):
        t = lambda xs: [{"name": n, "datatype": dt, "shape": self._dims(s)} for n, dt, s in xs]
        return {"name": self.name, "versions": ["1"], "platform": "onnxruntime_onnx",
                "inputs": t(self.inputs), "outputs": t(self.outputs)}

    def config(self):
        def t(xs):
            out = []
            for n, dt, s in xs:
                dims = self._dims(s)
                out.append({"name": n, "data_type": "TYPE_" + dt,
                            "dims": dims[1:] if self.max_batch_size > 0 else dims})
            return out
        return {"name": self.name, "platform": "onnxruntime_onnx", "backend": "onnxruntime",
                "max_batch_size": self.max_batch_size, "input": t(self.inputs), "output": t(self.outputs),
                "instance_group": [{"count": 1, "kind": "KIND_CPU"}]}


def load_models(repo: Path, threads: int) -> dict:
    models = {}
    for d in sorted(repo.iterdir()):
        if (d / "1" / "model.onnx").exists():
            models[d.name] = Model(d.name, d, threads)
    return models


MODELS: dict = {}


@asynccontextmanager
async def lifespan(_app):
    # Each worker process loads its own sessions before it accepts requests.
    repo = Path(os.environ["BASELINE_MODEL_REPOSITORY"])
    threads = int(os.environ.get("BASELINE_INTRA_OP_THREADS", "1"))
    MODELS.update(load_models(repo, threads))
    yield


app = FastAPI(lifespan=lifespan)


def _error(msg: str, code: int = 400) -> Response:
    return Response(json.dumps({"error": msg}), status_code=code, media_type="application/json")


@app.get("/v2/health/ready")
@app.get("/v2/health/live")
async def ready():
    return Response(status_code=200)


@app.get("/v2")
async def server_metadata():
    return {"name": "baseline_fastapi", "version": "1", "extensions": ["binary_tensor_data", "statistics"]}


@app.get("/v2/models/{name}")
@app.get("/v2/models/{name}/versions/{version}")
async def metadata(name: str):
    m = MODELS.get(name)
    return m.metadata() if m else _error(f"unknown model '{name}'", 404)


@app.get("/v2/models/{name}/ready")
@app.get("/v2/models/{name}/versions/{version}/ready")
async def model_ready(name: str):
    return Response(status_code=200 if name in MODELS else 404)


@app.get("/v2/models/{name}/config")
@app.get("/v2/models/{name}/versions/{version}/config")
async def config(name: str):
    m = MODELS.get(name)
    return m.config() if m else _error(f"unknown model '{name}'", 404)


@app.get("/v2/models/{name}/stats")
@app.get("/v2/models/{name}/versions/{version}/stats")
async def stats(name: str):
    m = MODELS.get(name)
    if not m:
        return _error(f"unknown model '{name}'", 404)
    # Counters live in each worker process and a request for them lands on any
    # one worker, so successive reads are not comparable: report zeros (the
    # shape perf_analyzer expects) and leave server-side figures to the server.
    zero = {"count": 0, "ns": 0}
    return {"model_stats": [{
        "name": name, "version": "1", "last_inference": 0, "inference_count": 0, "execution_count": 0,
        "inference_stats": {k: zero for k in ("success", "fail", "queue", "compute_input", "compute_infer",
                                              "compute_output", "cache_hit", "cache_miss")},
        "batch_stats": []}]}


@app.post("/v2/models/{name}/infer")
@app.post("/v2/models/{name}/versions/{version}/infer")
async def infer(name: str, request: Request):
    m = MODELS.get(name)
    if m is None:
        return _error(f"unknown model '{name}'", 404)
    raw = await request.body()
    header_len = request.headers.get("inference-header-content-length")
    if header_len is not None:  # Triton binary tensor extension
        n = int(header_len)
        req = json.loads(raw[:n])
        offset = n
    else:
        req = json.loads(raw)
        offset = None

    feeds = {}
    try:
        for t in req["inputs"]:
            dt = V2_TO_NP[t["datatype"]]
            size = (t.get("parameters") or {}).get("binary_data_size")
            if size is not None:
                arr = np.frombuffer(raw, dtype=dt, count=int(size) // np.dtype(dt).itemsize, offset=offset)
                offset += int(size)
            else:
                arr = np.asarray(t["data"], dtype=dt)
            feeds[t["name"]] = arr.reshape(t["shape"])
    except (KeyError, ValueError, TypeError) as e:
        return _error(f"bad request: {e}")

    requested = req.get("outputs")
    names = [o["name"] for o in requested] if requested else [n for n, _, _ in m.outputs]
    binary_all = bool((req.get("parameters") or {}).get("binary_data_output", False))
    binary = {o["name"]: bool((o.get("parameters") or {}).get("binary_data", binary_all))
              for o in requested} if requested else {n: binary_all for n in names}

    try:
        results = m.session.run(names, feeds)
    except Exception as e:  # ORT reports shape/type errors as exceptions
        return _error(f"inference failed: {e}")

    dtypes = {n: dt for n, dt, _ in m.outputs}
    outs, blobs = [], []
    for n, arr in zip(names, results):
        o = {"name": n, "datatype": dtypes[n], "shape": list(arr.shape)}
        if binary[n]:
            blob = np.ascontiguousarray(arr).tobytes()
            o["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            o["data"] = arr.ravel().tolist()
        outs.append(o)
    resp = {"model_name": name, "model_version": "1", "outputs": outs}
    if "id" in req:
        resp["id"] = req["id"]
    body = json.dumps(resp, separators=(",", ":")).encode()
    if not blobs:
        return Response(body, media_type="application/json")
    return Response(body + b"".join(blobs), media_type="application/octet-stream",
                    headers={"Inference-Header-Content-Length": str(len(body))})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-repository", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8010)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--intra-op-threads", type=int, default=1)
    ap.add_argument("--app", default="baseline_fastapi:app",
                    help="uvicorn import path of the app the workers serve (another module in bench/, "
                         "e.g. baseline_fastapi_pipeline:app)")
    args = ap.parse_args()
    os.environ["BASELINE_MODEL_REPOSITORY"] = str(Path(args.model_repository).resolve())
    os.environ["BASELINE_INTRA_OP_THREADS"] = str(args.intra_op_threads)
    if args.workers == 1:
        return serve_worker(args)
    # One process per worker, each with its own SO_REUSEPORT listening socket
    # (gunicorn's --reuse-port), rather than uvicorn's --workers: those share
    # one socket, and a burst of connections (wrk opens all 32 at once) can be
    # accepted by a single worker, which then serves them all on one core
    # while the other idles -- measured here in some runs as half the
    # throughput at 100% CPU. The kernel spreads connections over
    # SO_REUSEPORT sockets by their address hash, so every worker gets some.
    children = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                serve_worker(args)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        children.append(pid)

    def stop(_signum, _frame):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = 0
    for pid in children:
        _, status = os.waitpid(pid, 0)
        failed += os.waitstatus_to_exitcode(status) not in (0, -signal.SIGTERM)
    return 1 if failed else 0


def serve_worker(args):
    """One uvicorn worker on its own SO_REUSEPORT socket; loads the models in its lifespan."""
    import uvicorn
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((args.host, args.port))
    sock.listen(2048)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # uvicorn.run's app_dir
    config = uvicorn.Config(args.app, loop="uvloop", http="httptools", access_log=False,
                            log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
