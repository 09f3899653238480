"""The soak's model and requests: `cnn_soak` (the bench CNN) in a repository of its own with two
priority levels and bounded queues, its inputs and onnxruntime's outputs for them, the binary
tensor request for each, and the checks of the server after the load (ready, one correct JSON
inference)."""
import json
import re
import time
import urllib.error

import numpy as np

import make_bench_models as mbm
from bench_common import WORK
from bench_servers import http_get, http_post


SOAK_WORK = WORK / "soak"
MODEL = "cnn_soak"
INPUT, OUTPUT = "INPUT0", "OUTPUT0"
INPUT_DIMS = [3, 64, 64]
N_INPUTS = 8          # distinct request tensors, each with its reference output
HIGH, LOW = 1, 2      # Triton priority levels: 1 is served first
LIMIT_RE = re.compile(r"max_queue_size \d+")


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_repo(args):
    """The soak model in a repository of its own (so the thread plan is all
    its own). Returns (repo path, config text, model path)."""
    repo = SOAK_WORK / "repo"
    d = repo / MODEL / "1"
    d.mkdir(parents=True, exist_ok=True)
    model = mbm.make_cnn(np.random.default_rng(2))  # the seed make_bench_models uses for `cnn`
    model.graph.name = MODEL
    path = d / "model.onnx"
    data = model.SerializeToString()
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)
    cfg = f"""name: "{MODEL}"
platform: "onnxruntime_onnx"
max_batch_size: {args.max_batch}
input [ {{ name: "{INPUT}" data_type: TYPE_FP32 dims: [ {", ".join(map(str, INPUT_DIMS))} ] }} ]
output [ {{ name: "{OUTPUT}" data_type: TYPE_FP32 dims: [ 10 ] }} ]
instance_group [ {{ count: 1, kind: KIND_CPU }} ]
dynamic_batching {{
  max_queue_delay_microseconds: {args.queue_delay_us}
  priority_levels: 2
  default_priority_level: {LOW}
  default_queue_policy {{ max_queue_size: {args.queue_low} }}
  priority_queue_policy {{ key: {HIGH} value {{ max_queue_size: {args.queue_high} }} }}
  priority_queue_policy {{ key: {LOW} value {{ max_queue_size: {args.queue_low} }} }}
}}
"""
    (repo / MODEL / "config.pbtxt").write_text(cfg)
    return repo, cfg, path


def make_inputs_and_refs(model_path):
    import onnxruntime as ort
    rng = np.random.default_rng(5)
    xs = rng.uniform(-1.0, 1.0, size=(N_INPUTS, *INPUT_DIMS)).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
    refs = [sess.run([OUTPUT], {INPUT: xs[i:i + 1]})[0].reshape(-1) for i in range(N_INPUTS)]
    return xs, refs


def build_request(x, priority, port):
    """One complete HTTP/1.1 request: KServe v2 JSON header + binary tensor
    (Triton's binary tensor extension), JSON output."""
    raw = x.astype("<f4").tobytes()
    header = json.dumps({
        "inputs": [{"name": INPUT, "shape": [1] + INPUT_DIMS, "datatype": "FP32",
                    "parameters": {"binary_data_size": len(raw)}}],
        "outputs": [{"name": OUTPUT, "parameters": {"binary_data": False}}],
        "parameters": {"priority": priority}}, separators=(",", ":")).encode()
    body = header + raw
    head = (f"POST /v2/models/{MODEL}/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(header)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head + body


# --------------------------------------------------------------------------
# Server-side checks


HISTOGRAMS = ("ortserve_request_duration_seconds", "ortserve_queue_duration_seconds", "ortserve_batch_size")


def check_json_inference(base, xs, refs):
    body = json.dumps({"inputs": [{"name": INPUT, "shape": [1] + INPUT_DIMS, "datatype": "FP32",
                                   "data": xs[0].reshape(-1).tolist()}]}).encode()
    try:
        status, resp = http_post(f"{base}/v2/models/{MODEL}/infer", body, timeout=30.0)
        o = json.loads(resp)["outputs"][0]
        got = np.asarray(o["data"], np.float32).reshape(-1)
        if status != 200 or not np.allclose(got, refs[0], rtol=1e-3, atol=1e-4):
            return False, f"status {status}, max abs diff {np.abs(got - refs[0]).max():.3g}"
        return True, f"matches onnxruntime (max abs diff {np.abs(got - refs[0]).max():.2g})"
    except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
        return False, f"infer failed: {e}"


def is_ready(base):
    try:
        return (http_get(base + "/v2/health/ready", timeout=5.0)[0] == 200
                and http_get(f"{base}/v2/models/{MODEL}/ready", timeout=5.0)[0] == 200)
    except (urllib.error.URLError, OSError):
        return False
