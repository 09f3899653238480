"""The text pipeline served the way people write it without ortserve: FastAPI + onnxruntime with the
pre- and post-processing in Python around the classifier (bench/pipeline_bench.py's "fastapi" leg).

    .venv/bin/python bench/baselines/baseline_fastapi.py --app baseline_fastapi_pipeline:app \
        --model-repository bench/work/pipeline/text_pipeline --port 8011 --workers 2

Workers and sockets as baseline_fastapi.py. One route does the whole pipeline:
  POST /v2/models/text_pipeline/infer   KServe v2 JSON, input TEXT (BYTES [1]) -> LABEL (BYTES [1, 1]),
                                        SCORE (FP32 [1, 1]): the request and answer of ortserve's
                                        text_pipeline ensemble
  1. tokenization in Python: BERT's basic tokenizer (lower case, accents stripped, punctuation split)
     and greedy longest-match WordPiece over the repository's vocab.txt, [CLS] ... [SEP], truncated
     and zero-padded to 32 -- the ids onnxruntime-extensions' BertTokenizer gives;
  2. the text_classifier ONNX model through onnxruntime;
  3. softmax, top-1 and the label from labels.txt in numpy.
"""
import json
import os
import unicodedata
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import onnxruntime as ort
from fastapi import FastAPI, Request, Response

MODEL = "text_pipeline"
SEQ_LEN = 32
MAX_WORD_CHARS = 100


class WordPieceTokenizer:
    def __init__(self, vocab_lines):
        self.ids = {token: i for i, token in enumerate(vocab_lines)}
        self.unk, self.cls, self.sep = self.ids["[UNK]"], self.ids["[CLS]"], self.ids["[SEP]"]

    @staticmethod
    def _is_punctuation(ch):
        cp = ord(ch)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(ch).startswith("P")

    def _basic_tokens(self, text):
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
        tokens = []
        for word in text.split():
            current = ""
            for ch in word:
                if self._is_punctuation(ch):
                    if current:
                        tokens.append(current)
                    tokens.append(ch)
                    current = ""
                else:
                    current += ch
            if current:
                tokens.append(current)
        return tokens

    def _word_pieces(self, word):
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    break
                end -= 1
            if end == start:
                return [self.unk]
            start = end
        return pieces

    def encode(self, text):
        ids = [i for word in self._basic_tokens(text) for i in self._word_pieces(word)]
        ids = [self.cls] + ids[:SEQ_LEN - 2] + [self.sep]
        input_ids = np.zeros((1, SEQ_LEN), np.int64)
        attention_mask = np.zeros((1, SEQ_LEN), np.int64)
        input_ids[0, :len(ids)] = ids
        attention_mask[0, :len(ids)] = 1
        return input_ids, attention_mask


STATE: dict = {}


@asynccontextmanager
async def lifespan(_app):
    repo = Path(os.environ["BASELINE_MODEL_REPOSITORY"])
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(os.environ.get("BASELINE_INTRA_OP_THREADS", "1"))
    so.inter_op_num_threads = 1
    STATE["tokenizer"] = WordPieceTokenizer((repo / "vocab.txt").read_text().splitlines())
    STATE["labels"] = (repo / "labels.txt").read_text().splitlines()
    STATE["session"] = ort.InferenceSession(str(repo / "text_classifier" / "1" / "model.onnx"), so,
                                            providers=["CPUExecutionProvider"])
    yield


app = FastAPI(lifespan=lifespan)


def _error(msg: str, code: int = 400) -> Response:
    return Response(json.dumps({"error": msg}), status_code=code, media_type="application/json")


@app.get("/v2/health/ready")
@app.get("/v2/health/live")
@app.get(f"/v2/models/{MODEL}/ready")
async def ready():
    return Response(status_code=200)


@app.post(f"/v2/models/{MODEL}/infer")
async def infer(request: Request):
    try:
        req = json.loads(await request.body())
        text = next(t for t in req["inputs"] if t["name"] == "TEXT")["data"][0]
    except (KeyError, ValueError, TypeError, StopIteration, IndexError) as e:
        return _error(f"bad request: {e}")
    input_ids, attention_mask = STATE["tokenizer"].encode(text)
    logits = STATE["session"].run(["logits"], {"input_ids": input_ids, "attention_mask": attention_mask})[0]
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = shifted / shifted.sum(axis=1, keepdims=True)
    top = int(np.argmax(probs[0]))
    body = {"model_name": MODEL, "model_version": "1", "outputs": [
        {"name": "LABEL", "datatype": "BYTES", "shape": [1, 1], "data": [STATE["labels"][top]]},
        {"name": "SCORE", "datatype": "FP32", "shape": [1, 1], "data": [float(probs[0, top])]}]}
    return Response(json.dumps(body, separators=(",", ":")), media_type="application/json")
