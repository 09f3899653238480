"""The pre/post-processing pipelines of scripts/make_pipeline_models.py as Triton ensembles, end to
end through a real ortserve process and tritonclient:

  text_pipeline   raw string -> text_tokenizer -> text_classifier -> text_postprocess -> LABEL, SCORE
  image_pipeline  encoded JPEG/PNG bytes -> image_preprocess -> ocr_cls -> PROBS

Each answer must equal the same graphs run one after another by onnxruntime in process (with the
onnxruntime-extensions library registered); the image pipeline is also checked against
PaddleOCR's preprocessing written in numpy. The server gets libpython through LD_PRELOAD
(docs/model-config.md, "Operator libraries").
"""
from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from harness import assert_matches, model_file
from pipeline_helpers import (encoded_images, ext_reference, image_repo, infer,  # noqa: F401 (fixtures)
                              paddle_cls_input, pipeline_server, pipelines, text_repo)

pytestmark = pytest.mark.timeout(600)

pytest.importorskip("onnxruntime_extensions")

SENTENCES = ["The movie was great", "boring plot, awful acting", "I loved the music but the ending was sad",
             "NOT GOOD!", "Crème brûlée", "", "the best film " * 20, "funny and sad", "ok", "worst story ever"]


@pytest.fixture(scope="module")
def text_server(text_repo, log_dir):
    with pipeline_server(text_repo, log_dir, "pipeline_ensemble_text",
                         [*pipelines.TEXT_MODELS, pipelines.TEXT_ENSEMBLE]) as srv:
        yield srv


@pytest.fixture(scope="module")
def image_server(image_repo, log_dir):
    with pipeline_server(image_repo, log_dir, "pipeline_ensemble_image",
                         [*pipelines.IMAGE_MODELS, pipelines.IMAGE_ENSEMBLE]) as srv:
        yield srv


def text_in_process(ext_reference, repo, text):
    """tokenizer -> classifier -> postprocess, one after another, in onnxruntime."""
    tokens = ext_reference.run(model_file(repo, "text_tokenizer"), {"TEXT": np.array([text], dtype=object)})
    logits = ext_reference.run(model_file(repo, "text_classifier"), tokens)["logits"]
    return ext_reference.run(model_file(repo, "text_postprocess"), {"logits": logits})


def classify_served(client, text):
    return infer(client, pipelines.TEXT_ENSEMBLE, [("TEXT", np.array([text.encode()], dtype=object), "BYTES")],
                 ["LABEL", "SCORE"])


def assert_same_answer(served, expected, what):
    assert_matches(served["LABEL"], expected["LABEL"], exact=True)
    np.testing.assert_allclose(served["SCORE"], expected["SCORE"], rtol=1e-5, err_msg=what)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_text_ensemble_equals_the_three_graphs_in_process(text_server, text_repo, ext_reference, protocol):
    client = (httpclient.InferenceServerClient(text_server.url) if protocol == "http"
              else grpcclient.InferenceServerClient(text_server.grpc_url))
    labels = set()
    for text in SENTENCES:
        served = classify_served(client, text)
        assert served["LABEL"].shape == (1, 1) and served["SCORE"].shape == (1, 1)
        assert_same_answer(served, text_in_process(ext_reference, text_repo, text), text)
        labels.add(served["LABEL"][0, 0])
    assert len(labels) > 1, labels  # the answers depend on the text


def test_text_ensemble_answers_concurrent_requests_each_with_its_own(text_server, text_repo, ext_reference):
    """Requests in flight together share the classifier's batches; each gets its own answer."""
    expected = {text: text_in_process(ext_reference, text_repo, text) for text in SENTENCES}
    texts = SENTENCES * 4

    def call(text):
        return text, classify_served(grpcclient.InferenceServerClient(text_server.grpc_url), text)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for text, served in pool.map(call, texts):
            assert_same_answer(served, expected[text], text)
    stats = text_server.model_stats(pipelines.TEXT_ENSEMBLE)
    assert int(stats["inference_stats"]["success"]["count"]) >= len(texts)


def test_image_ensemble_from_encoded_bytes(image_server, image_repo, ext_reference):
    client = httpclient.InferenceServerClient(image_server.url)
    cls_path = model_file(image_repo, "ocr_cls")
    for label, data, picture in encoded_images():
        image = np.frombuffer(data, np.uint8)
        probs = infer(client, pipelines.IMAGE_ENSEMBLE, [("IMAGE", image, "UINT8")], ["PROBS"])["PROBS"]
        x = ext_reference.run(model_file(image_repo, "image_preprocess"), {"IMAGE": image})[pipelines.OCR_INPUT]
        in_process = ext_reference.run(cls_path, {pipelines.OCR_INPUT: x})[pipelines.OCR_OUTPUT]
        np.testing.assert_allclose(probs, in_process, rtol=1e-4, atol=1e-5, err_msg=label)
        if label.endswith(".png"):  # lossless: PaddleOCR's steps in numpy give the same input
            python_steps = ext_reference.run(cls_path, {pipelines.OCR_INPUT: paddle_cls_input(picture)})
            np.testing.assert_allclose(probs, python_steps[pipelines.OCR_OUTPUT], atol=1e-4, err_msg=label)


def test_image_ensemble_names_the_failing_step(image_server):
    r = image_server.infer_raw(pipelines.IMAGE_ENSEMBLE, {"inputs": [
        {"name": "IMAGE", "datatype": "UINT8", "shape": [4], "data": [1, 2, 3, 4]}]})
    assert r.status_code == 500, r.text
    error = r.json()["error"]
    assert f"in ensemble '{pipelines.IMAGE_ENSEMBLE}', step 0 (model 'image_preprocess')" in error, error
    assert "Invalid image data" in error, error
    assert image_server.get(f"/v2/models/{pipelines.IMAGE_ENSEMBLE}/ready").status_code == 200
