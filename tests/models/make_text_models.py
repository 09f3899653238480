"""A BERT-shaped text encoder, for the shape-bucket tests and benchmark.

Inputs `input_ids` and `attention_mask`, INT64 [batch, seq]. Token and
position embeddings, `layers` blocks of single-head self-attention whose keys
are masked by `attention_mask` (padded keys get -1e9 before the softmax, so
they weigh exactly 0), then:
  last_hidden_state  FP32 [batch, seq, hidden]  one vector per token
  pooled             FP32 [batch, hidden]       masked mean over the tokens
A request padded with mask 0 therefore gives, on its own tokens, what it gives
unpadded (within float rounding): the property shape buckets rely on.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
import make_demo_models as demo  # noqa: E402  (shared builders)

VOCAB = 1000
MAX_POSITIONS = 512


def _attention_block(i: int, x: str, bias: str, hidden: int, rng) -> tuple[list, list, str]:
    """One masked self-attention block with a residual: returns nodes, weights, output name."""
    scale = 1.0 / np.sqrt(hidden)
    w = {k: (rng.standard_normal((hidden, hidden)) * scale).astype(np.float32) for k in ("q", "k", "v", "o")}
    p = f"l{i}_"
    consts = [demo.const(p + "w" + k, v) for k, v in w.items()]
    consts.append(demo.const(p + "scale", np.array(scale, np.float32)))
    nodes = [
        helper.make_node("MatMul", [x, p + "wq"], [p + "q"]),
        helper.make_node("MatMul", [x, p + "wk"], [p + "k"]),
        helper.make_node("MatMul", [x, p + "wv"], [p + "v"]),
        helper.make_node("Transpose", [p + "k"], [p + "kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", [p + "q", p + "kt"], [p + "raw"]),
        helper.make_node("Mul", [p + "raw", p + "scale"], [p + "scaled"]),
        helper.make_node("Add", [p + "scaled", bias], [p + "scores"]),
        helper.make_node("Softmax", [p + "scores"], [p + "probs"], axis=-1),
        helper.make_node("MatMul", [p + "probs", p + "v"], [p + "ctx"]),
        helper.make_node("MatMul", [p + "ctx", p + "wo"], [p + "proj"]),
        helper.make_node("Add", [p + "proj", x], [p + "sum"]),
        helper.make_node("Tanh", [p + "sum"], [p + "out"]),
    ]
    return nodes, consts, p + "out"


def build_text_encoder(hidden: int = 32, layers: int = 1, seed: int = 11):
    rng = np.random.default_rng(seed)
    consts = [
        demo.const("tok_emb", rng.standard_normal((VOCAB, hidden)).astype(np.float32)),
        demo.const("pos_emb", (rng.standard_normal((MAX_POSITIONS, hidden)) * 0.1).astype(np.float32)),
        demo.const("zero", np.array(0, np.int64)),
        demo.const("one", np.array(1, np.int64)),
        demo.const("one_f", np.array(1.0, np.float32)),
        demo.const("neg_big", np.array(-1e9, np.float32)),
        demo.const("axis1", np.array([1], np.int64)),
        demo.const("axis2", np.array([2], np.int64)),
    ]
    nodes = [
        # Embeddings: token + position (positions 0..seq-1, so padding at the
        # end leaves every real token's position as it was).
        helper.make_node("Gather", ["tok_emb", "input_ids"], ["tok"]),
        helper.make_node("Shape", ["input_ids"], ["ids_shape"]),
        helper.make_node("Gather", ["ids_shape", "one"], ["seq_len"], axis=0),
        helper.make_node("Range", ["zero", "seq_len", "one"], ["positions"]),
        helper.make_node("Gather", ["pos_emb", "positions"], ["pos"]),
        helper.make_node("Add", ["tok", "pos"], ["x0"]),
        # Key mask as an additive bias [batch, 1, seq]: 0 for tokens, -1e9 for padding.
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["one_f", "mask_f"], ["mask_inv"]),
        helper.make_node("Mul", ["mask_inv", "neg_big"], ["bias2"]),
        helper.make_node("Unsqueeze", ["bias2", "axis1"], ["bias"]),
    ]
    x = "x0"
    for i in range(layers):
        block, weights, x = _attention_block(i, x, "bias", hidden, rng)
        nodes += block
        consts += weights
    nodes += [
        helper.make_node("Identity", [x], ["last_hidden_state"]),
        # Masked mean pooling over the tokens.
        helper.make_node("Unsqueeze", ["mask_f", "axis2"], ["mask3"]),
        helper.make_node("Mul", [x, "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask_f", "axis1"], ["count"], keepdims=1),
        helper.make_node("Max", ["count", "one_f"], ["count1"]),
        helper.make_node("Div", ["summed", "count1"], ["pooled"]),
    ]
    return demo.make_model(
        nodes,
        [("input_ids", TensorProto.INT64, ["batch", "seq"]), ("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden]),
         ("pooled", TensorProto.FLOAT, ["batch", hidden])],
        consts, name="text_encoder")


def bucket_parameters(buckets, overflow: str = "alone") -> str:
    """The shape-bucket parameters of a text encoder's config."""
    items = {
        "shape_buckets": ",".join(str(b) for b in buckets),
        "bucket_pad": "input_ids:0",
        "bucket_mask": "attention_mask",
        "bucket_outputs": "last_hidden_state",
        "bucket_overflow": overflow,
    }
    return "\n".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}' for k, v in items.items())


def text_encoder_config(name: str, hidden: int, max_batch_size: int, batching: str = "dynamic_batching { }",
                        extra: str = "", instances: int = 1, kind: str = "KIND_CPU") -> str:
    return f"""
name: "{name}"
backend: "onnxruntime"
max_batch_size: {max_batch_size}
input [
  {{ name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }},
  {{ name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }}
]
output [
  {{ name: "last_hidden_state" data_type: TYPE_FP32 dims: [ -1, {hidden} ] }},
  {{ name: "pooled" data_type: TYPE_FP32 dims: [ {hidden} ] }}
]
instance_group [ {{ count: {instances} kind: {kind} }} ]
{batching}
{extra}
"""


def token_ids(length: int, rng, rows: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Random token ids (never the pad id 0) and an all-ones mask, [rows, length]."""
    ids = rng.integers(1, VOCAB, size=(rows, length), dtype=np.int64)
    return ids, np.ones((rows, length), np.int64)


def interleaved_lengths(count: int, buckets, rng) -> list[int]:
    """`count` lengths whose buckets take turns: request i falls in bucket
    i % len(buckets) (lengths above the bucket before it, 1 for the first),
    so any run of consecutive requests mixes every bucket."""
    lows = [1] + [b + 1 for b in buckets[:-1]]
    return [int(rng.integers(lows[i % len(buckets)], buckets[i % len(buckets)] + 1)) for i in range(count)]


def closed_loop(send, count: int, concurrency: int) -> list:
    """Sends requests 0..count-1 from `concurrency` clients, each waiting on
    its answer before its next request (client j sends j, j + concurrency,
    ...); returns `send(i)`'s answers in request order."""
    import concurrent.futures

    answers = [None] * count

    def client(j: int) -> None:
        for i in range(j, count, concurrency):
            answers[i] = send(i)

    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        for done in [pool.submit(client, j) for j in range(concurrency)]:
            done.result()
    return answers
