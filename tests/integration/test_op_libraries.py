"""Custom-operator libraries (model_operations.op_library_filename, --op-library)
and the pre/post-processing graphs of scripts/make_pipeline_models.py.

Each processing model is served by a real ortserve process and called with
tritonclient; its outputs must equal onnxruntime in Python with the
onnxruntime-extensions library registered. A library that is missing, not a
shared object, or lacks RegisterCustomOps fails only its model's load, with a
message naming the library and the cause, and the server keeps serving.

The extensions library is a Python extension module: the server gets Debian's
libpython through LD_PRELOAD, as docs/model-config.md ("Operator libraries")
tells users to start it.
"""
from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from harness import REPO_ROOT, assert_matches, model_file, ortserve_binary
from pipeline_helpers import (encoded_images, ext_reference, image_repo, infer,  # noqa: F401 (fixtures)
                              paddle_cls_input, pipeline_server, pipelines, preload_env, text_repo)

pytestmark = pytest.mark.timeout(600)

onnxruntime_extensions = pytest.importorskip("onnxruntime_extensions")

SENTENCES = ["The movie was great", "boring plot, awful acting",
             "I loved the music but the ending was sad", "NOT GOOD!", "Crème brûlée", "",
             "the best film " * 20]  # the last is truncated to 32 tokens


@pytest.fixture(scope="module")
def text_server(text_repo, log_dir):
    with pipeline_server(text_repo, log_dir, "op_libraries_text", pipelines.TEXT_MODELS) as srv:
        yield srv


@pytest.fixture(scope="module", params=["http", "grpc"])
def text_client(request, text_server):
    if request.param == "http":
        return httpclient.InferenceServerClient(text_server.url)
    return grpcclient.InferenceServerClient(text_server.grpc_url)


def tokenize_served(client, text: str, model: str = "text_tokenizer") -> dict:
    return infer(client, model, [("TEXT", np.array([text.encode()], dtype=object), "BYTES")],
                 ["input_ids", "attention_mask"])


def test_tokenizer_matches_onnxruntime_extensions(text_client, text_repo, ext_reference):
    for text in SENTENCES:
        served = tokenize_served(text_client, text)
        expected = ext_reference.run(model_file(text_repo, "text_tokenizer"),
                                     {"TEXT": np.array([text], dtype=object)})
        for name in ("input_ids", "attention_mask"):
            assert_matches(served[name], expected[name], exact=True)
        assert served["input_ids"].shape == (1, pipelines.SEQ_LEN)
    assert tokenize_served(text_client, SENTENCES[-1])["attention_mask"].all()  # truncated, no padding


def test_classifier_and_postprocess_match_onnxruntime(text_client, text_repo, ext_reference):
    tokens = [tokenize_served(text_client, text) for text in SENTENCES[:4]]
    ids = np.concatenate([t["input_ids"] for t in tokens])
    mask = np.concatenate([t["attention_mask"] for t in tokens])
    logits = infer(text_client, "text_classifier", [("input_ids", ids, "INT64"), ("attention_mask", mask, "INT64")],
                   ["logits"])["logits"]
    expected_logits = ext_reference.run(model_file(text_repo, "text_classifier"),
                                        {"input_ids": ids, "attention_mask": mask})["logits"]
    np.testing.assert_allclose(logits, expected_logits, rtol=1e-4, atol=1e-5)

    served = infer(text_client, "text_postprocess", [("logits", expected_logits, "FP32")], ["LABEL", "SCORE"])
    expected = ext_reference.run(model_file(text_repo, "text_postprocess"), {"logits": expected_logits})
    assert_matches(served["LABEL"], expected["LABEL"], exact=True)
    np.testing.assert_allclose(served["SCORE"], expected["SCORE"], rtol=1e-6)
    # The labels are the top-1 of the softmax, and these sentences do not all get the same one.
    top = np.argmax(expected_logits, axis=1)
    assert [v.decode() for v in served["LABEL"].ravel()] == [pipelines.LABELS[i] for i in top]
    assert len(set(top)) > 1, top


def test_thread_plan_lists_the_processing_models(text_server):
    """Pre/post-processing are ordinary models: their threads are in the startup plan."""
    log = text_server.log_text()
    for name in pipelines.TEXT_MODELS:
        assert f"thread plan: {name}:1:" in log, name


# ---- image pipeline ----------------------------------------------------------

@pytest.fixture(scope="module")
def image_server(image_repo, log_dir):
    with pipeline_server(image_repo, log_dir, "op_libraries_image", pipelines.IMAGE_MODELS) as srv:
        yield srv


def test_image_preprocess_and_classifier_match_onnxruntime(image_server, image_repo, ext_reference):
    client = httpclient.InferenceServerClient(image_server.url)
    for label, data, picture in encoded_images():
        image = np.frombuffer(data, np.uint8)
        x = infer(client, "image_preprocess", [("IMAGE", image, "UINT8")], [pipelines.OCR_INPUT])[pipelines.OCR_INPUT]
        expected = ext_reference.run(model_file(image_repo, "image_preprocess"), {"IMAGE": image})[pipelines.OCR_INPUT]
        assert x.shape == (1, 3, pipelines.OCR_HEIGHT, pipelines.OCR_MAX_WIDTH), label
        np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-5, err_msg=label)
        if label.endswith(".png"):  # lossless: the graph must do what PaddleOCR's code does
            np.testing.assert_allclose(x, paddle_cls_input(picture), atol=1e-4, err_msg=label)
        probs = infer(client, "ocr_cls", [(pipelines.OCR_INPUT, x, "FP32")], [pipelines.OCR_OUTPUT])
        expected_probs = ext_reference.run(model_file(image_repo, "ocr_cls"), {pipelines.OCR_INPUT: expected})
        np.testing.assert_allclose(probs[pipelines.OCR_OUTPUT], expected_probs[pipelines.OCR_OUTPUT],
                                   rtol=1e-4, atol=1e-5, err_msg=label)


def test_bytes_that_are_not_an_image_are_a_clear_error(image_server):
    """A failure inside the graph is an ORT run error: 500 with the operator's message, as Triton's."""
    r = image_server.infer_raw("image_preprocess", {"inputs": [
        {"name": "IMAGE", "datatype": "UINT8", "shape": [4], "data": [1, 2, 3, 4]}]})
    assert r.status_code == 500, r.text
    assert "DecodeImage" in r.json()["error"] and "Invalid image data" in r.json()["error"], r.text
    assert image_server.get("/v2/models/image_preprocess/ready").status_code == 200


# ---- load errors ---------------------------------------------------------------

def copy_model(src_repo: pathlib.Path, name: str, dest_repo: pathlib.Path, new_name: str, op_library: str | None):
    shutil.copytree(src_repo / name, dest_repo / new_name)
    config = (dest_repo / new_name / "config.pbtxt").read_text().replace(f'name: "{name}"', f'name: "{new_name}"')
    config = "\n".join(line for line in config.splitlines() if not line.startswith("model_operations"))
    if op_library is not None:
        config += '\nmodel_operations { op_library_filename: "%s" }\n' % op_library
    (dest_repo / new_name / "config.pbtxt").write_text(config)


def reasons(srv) -> dict:
    return {m["name"]: m.get("reason", "") for m in srv.repository_index()}


def test_broken_libraries_fail_only_their_model(text_repo, tmp_path, launch):
    not_elf = tmp_path / "libnot_a_library.so"
    not_elf.write_text("this is not a shared object\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    broken = {"missing_library": ("/nonexistent/libortserve_ops.so", "No such file or directory"),
              "not_a_library": (str(not_elf), str(not_elf)),
              "no_entry_point": ("libz.so.1", "undefined symbol: RegisterCustomOps")}
    for name, (library, _) in broken.items():
        copy_model(text_repo, "text_tokenizer", repo, name, library)
    copy_model(text_repo, "text_tokenizer", repo, "tokenizer", pipelines.extensions_library())
    copy_model(text_repo, "text_postprocess", repo, "postprocess", None)
    srv = launch(repo, env=preload_env())
    srv.wait_models_ready(["tokenizer", "postprocess"])
    found = reasons(srv)
    for name, (library, cause) in broken.items():
        assert f"op library '{library}' cannot be registered" in found[name], found[name]
        assert cause in found[name], found[name]
        assert srv.get(f"/v2/models/{name}/ready").status_code != 200
    assert "ELF" in found["not_a_library"] or "too short" in found["not_a_library"], found["not_a_library"]
    served = infer(httpclient.InferenceServerClient(srv.url), "tokenizer",
                   [("TEXT", np.array([b"the film"], dtype=object), "BYTES")], ["input_ids"])
    assert served["input_ids"][0, :4].tolist() == [2, 5, pipelines.VOCAB.index("film"), 3]
    assert srv.alive()


def test_without_libpython_the_error_says_how_to_preload_it(text_repo, tmp_path, launch):
    repo = tmp_path / "repo"
    repo.mkdir()
    copy_model(text_repo, "text_tokenizer", repo, "tokenizer", pipelines.extensions_library())
    copy_model(text_repo, "text_postprocess", repo, "postprocess", None)
    srv = launch(repo)
    srv.wait_models_ready(["postprocess"])
    reason = reasons(srv)["tokenizer"]
    assert "undefined symbol: Py" in reason, reason
    assert f"LD_PRELOAD={pipelines.libpython_path().name}" in reason, reason


def test_server_wide_op_library_flag(text_repo, tmp_path, launch, ext_reference):
    """--op-library registers the library for every model; configs need no model_operations."""
    repo = tmp_path / "repo"
    repo.mkdir()
    copy_model(text_repo, "text_tokenizer", repo, "tokenizer", None)
    copy_model(text_repo, "text_classifier", repo, "classifier", None)
    srv = launch(repo, env=preload_env(), extra_args=("--op-library", pipelines.extensions_library()))
    srv.wait_models_ready(["tokenizer", "classifier"])
    served = tokenize_served(httpclient.InferenceServerClient(srv.url), "a great story", "tokenizer")
    expected = ext_reference.run(model_file(text_repo, "text_tokenizer"), {"TEXT": np.array(["a great story"], dtype=object)})
    assert_matches(served["input_ids"], expected["input_ids"], exact=True)
    assert "op libraries [" in srv.log_text()


def test_server_wide_op_library_that_is_missing_fails_each_model(text_repo, tmp_path, launch):
    repo = tmp_path / "repo"
    repo.mkdir()
    copy_model(text_repo, "text_postprocess", repo, "postprocess", None)
    srv = launch(repo, extra_args=("--op-library", "/nonexistent/libserver_ops.so"))
    reason = reasons(srv)["postprocess"]
    assert "op library '/nonexistent/libserver_ops.so' cannot be registered" in reason, reason
    assert srv.get("/v2/health/live").status_code == 200


# ---- a plain C++ library (tests/ops/negate_op_library.cpp) ------------------------

NEGATE_CONFIG = """name: "negate"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "input" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ -1 ] } ]
model_operations { op_library_filename: "libortserve_test_ops.so" }
"""


def test_library_found_by_name_survives_unload_and_reload(tmp_path, launch):
    """A bare file name is looked up on the library path (as dlopen, as Triton); after an
    unload released every session that held the library, a load registers it afresh."""
    library = ortserve_binary().parent / "libortserve_test_ops.so"
    if not library.is_file():
        pytest.skip(f"{library} not built (CMake target ortserve_test_ops)")
    repo = tmp_path / "repo"
    (repo / "negate" / "1").mkdir(parents=True)
    shutil.copyfile(REPO_ROOT / "tests" / "data" / "runtime" / "custom_negate.onnx", repo / "negate" / "1" / "model.onnx")
    (repo / "negate" / "config.pbtxt").write_text(NEGATE_CONFIG)
    srv = launch(repo, env={"LD_LIBRARY_PATH": str(library.parent)},
                 extra_args=("--model-control-mode=explicit", "--load-model", "negate",
                             "--allow-unauthenticated-model-control=true"))
    srv.wait_models_ready(["negate"])
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    x = np.array([1.5, -2.0, 0.25], np.float32)
    for _ in range(2):
        got = infer(client, "negate", [("input", x, "FP32")], ["output"])["output"]
        np.testing.assert_array_equal(got, -x)
        client.unload_model("negate")
        assert not client.is_model_ready("negate")
        client.load_model("negate")
        assert client.is_model_ready("negate")


def test_optimized_model_cache_keeps_custom_operator_graphs(text_repo, tmp_path, launch, ext_reference):
    """--model-cache-dir: the tokenizer's optimized graph (custom operators included) is saved on the
    first load and loaded on the next, with the library registered both times."""
    repo = tmp_path / "repo"
    repo.mkdir()
    copy_model(text_repo, "text_tokenizer", repo, "tokenizer", pipelines.extensions_library())
    cache = tmp_path / "cache"
    expected = ext_reference.run(model_file(text_repo, "text_tokenizer"), {"TEXT": np.array(["not bad"], dtype=object)})
    for use in ("optimized-model cache miss (saved)", "optimized-model cache hit"):
        srv = launch(repo, env=preload_env(), extra_args=("--model-cache-dir", str(cache)))
        srv.wait_models_ready(["tokenizer"])
        assert use in srv.log_text(), srv.log_tail()
        served = tokenize_served(httpclient.InferenceServerClient(srv.url), "not bad", "tokenizer")
        assert_matches(served["input_ids"], expected["input_ids"], exact=True)
        srv.stop()
