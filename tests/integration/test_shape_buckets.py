"""Shape buckets (docs/model-config.md, "Shape buckets"): a text encoder's
requests of mixed lengths padded to a few lengths so that they batch, and
answered cropped back to their own length.

Every output is compared with onnxruntime running the request unpadded; a
per-token output comes back with the request's own length; a request over the
largest bucket runs at its own shape or is refused, as configured; requests of
different lengths in one bucket form one batch (read back from the
statistics); interleaved buckets each batch as if they had their own queue
(executions against the same requests in one bucket); a malformed bucket config fails the model's load naming the
parameter.
"""
from __future__ import annotations

import concurrent.futures
import sys

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from harness import REPO_ROOT, Reference, model_file

sys.path.insert(0, str(REPO_ROOT / "tests" / "models"))
import make_text_models as text  # noqa: E402

HIDDEN = 16
BUCKETS = (8, 16, 32)
# Four requests of different lengths in bucket 8 form one batch: the
# preferred size sends it as soon as they are all queued; the long window
# only keeps the batch open until they are.
WINDOW = 'dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 30000000 }'
# Interleaved buckets: 16 clients, batches of up to 16. The window is long
# (200 ms) so that each wave of the 16 clients' requests reaches its
# buckets' batches on a loaded machine too: the test counts batches, and a
# client slower than the window would split them in either run.
CLIENTS = 16
INTERLEAVED = 'dynamic_batching { max_queue_delay_microseconds: 200000 }'


def write_encoder(repo, name, extra="", batching="dynamic_batching { max_queue_delay_microseconds: 2000 }",
                  max_batch_size=8):
    config = text.text_encoder_config(name, HIDDEN, max_batch_size=max_batch_size, batching=batching, extra=extra)
    text.demo.write_model(repo, name, text.build_text_encoder(hidden=HIDDEN, layers=1), config)


@pytest.fixture(scope="module")
def bucket_repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("bucket_models")
    write_encoder(repo, "text_alone", text.bucket_parameters(BUCKETS, "alone"))
    write_encoder(repo, "text_reject", text.bucket_parameters(BUCKETS, "reject"))
    write_encoder(repo, "text_window", text.bucket_parameters(BUCKETS), batching=WINDOW)
    write_encoder(repo, "text_interleaved", text.bucket_parameters(BUCKETS), batching=INTERLEAVED,
                  max_batch_size=CLIENTS)
    write_encoder(repo, "text_one_bucket", text.bucket_parameters(BUCKETS[-1:]), batching=INTERLEAVED,
                  max_batch_size=CLIENTS)
    write_encoder(repo, "bad_buckets", text.bucket_parameters(BUCKETS).replace("input_ids:0", "token_type_ids:0"))
    return repo


@pytest.fixture(scope="module")
def bucket_server(bucket_repo, log_dir):
    from harness import start_server
    srv = start_server(bucket_repo, log_dir, "shape_buckets")
    try:
        srv.wait_models_ready(["text_alone", "text_reject", "text_window", "text_interleaved", "text_one_bucket"])
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def reference():
    return Reference()


def http_infer(srv, model, ids, mask):
    client = httpclient.InferenceServerClient(srv.url)
    inputs = [httpclient.InferInput("input_ids", list(ids.shape), "INT64"),
              httpclient.InferInput("attention_mask", list(mask.shape), "INT64")]
    inputs[0].set_data_from_numpy(ids, binary_data=True)
    inputs[1].set_data_from_numpy(mask, binary_data=False)
    result = client.infer(model, inputs)
    return {name: result.as_numpy(name) for name in ("last_hidden_state", "pooled")}


def grpc_infer(srv, model, ids, mask):
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    inputs = [grpcclient.InferInput("input_ids", list(ids.shape), "INT64"),
              grpcclient.InferInput("attention_mask", list(mask.shape), "INT64")]
    inputs[0].set_data_from_numpy(ids)
    inputs[1].set_data_from_numpy(mask)
    result = client.infer(model, inputs)
    return {name: result.as_numpy(name) for name in ("last_hidden_state", "pooled")}


def check_against_unpadded(actual, reference, path, ids, mask):
    """The answer is onnxruntime's for the request as sent, with no padding."""
    expected = reference.run(path, {"input_ids": ids, "attention_mask": mask})
    for name in ("last_hidden_state", "pooled"):
        assert actual[name].shape == expected[name].shape, (name, actual[name].shape, expected[name].shape)
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-5, err_msg=name)


def test_mixed_lengths_concurrently_match_unpadded_runs(bucket_server, bucket_repo, reference):
    rng = np.random.default_rng(3)
    lengths = [int(n) for n in rng.integers(1, BUCKETS[-1] + 1, size=48)] + list(BUCKETS) + [1, 9, 17]
    requests_ = [text.token_ids(n, rng) for n in lengths]
    path = model_file(bucket_repo, "text_alone")

    def one(i):
        ids, mask = requests_[i]
        infer = http_infer if i % 2 == 0 else grpc_infer
        return infer(bucket_server, "text_alone", ids, mask)

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(one, range(len(requests_))))
    for (ids, mask), answer, n in zip(requests_, answers, lengths):
        assert answer["last_hidden_state"].shape == (1, n, HIDDEN)  # cropped to the request's own length
        check_against_unpadded(answer, reference, path, ids, mask)


def test_rows_of_one_request_are_padded_and_cropped_together(bucket_server, bucket_repo, reference):
    rng = np.random.default_rng(4)
    ids, mask = text.token_ids(5, rng, rows=3)
    mask[1, 3:] = 0  # the client's own padding stays the client's
    answer = http_infer(bucket_server, "text_alone", ids, mask)
    assert answer["last_hidden_state"].shape == (3, 5, HIDDEN)
    check_against_unpadded(answer, reference, model_file(bucket_repo, "text_alone"), ids, mask)


def test_over_the_largest_bucket_runs_at_its_own_shape(bucket_server, bucket_repo, reference):
    ids, mask = text.token_ids(BUCKETS[-1] + 8, np.random.default_rng(5))
    answer = grpc_infer(bucket_server, "text_alone", ids, mask)
    assert answer["last_hidden_state"].shape == (1, BUCKETS[-1] + 8, HIDDEN)
    check_against_unpadded(answer, reference, model_file(bucket_repo, "text_alone"), ids, mask)


def test_over_the_largest_bucket_is_refused_when_configured(bucket_server, bucket_repo, reference):
    length = BUCKETS[-1] + 8
    ids, mask = text.token_ids(length, np.random.default_rng(6))
    body = {"inputs": [
        {"name": "input_ids", "shape": [1, length], "datatype": "INT64", "data": ids.flatten().tolist()},
        {"name": "attention_mask", "shape": [1, length], "datatype": "INT64", "data": mask.flatten().tolist()}]}
    resp = bucket_server.infer_raw("text_reject", body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert f"length {length}" in error and f"largest shape bucket {BUCKETS[-1]}" in error, error
    with pytest.raises(InferenceServerException) as refused:
        grpc_infer(bucket_server, "text_reject", ids, mask)
    assert "INVALID_ARGUMENT" in str(refused.value.status()) and f"length {length}" in refused.value.message()
    # Within the buckets the same model answers.
    ids, mask = text.token_ids(BUCKETS[-1], np.random.default_rng(7))
    check_against_unpadded(http_infer(bucket_server, "text_reject", ids, mask), reference,
                           model_file(bucket_repo, "text_reject"), ids, mask)


def test_padded_inputs_must_agree_on_the_length(bucket_server):
    body = {"inputs": [
        {"name": "input_ids", "shape": [1, 3], "datatype": "INT64", "data": [1, 2, 3]},
        {"name": "attention_mask", "shape": [1, 2], "datatype": "INT64", "data": [1, 1]}]}
    resp = bucket_server.infer_raw("text_alone", body)
    assert resp.status_code == 400, resp.text
    assert "'input_ids' and 'attention_mask'" in resp.json()["error"], resp.text


def test_different_lengths_in_one_bucket_form_one_batch(bucket_server, bucket_repo, reference):
    rng = np.random.default_rng(8)
    lengths = [3, 5, 7, 8]  # all in bucket 8; without buckets, four shapes and four runs
    sent = [text.token_ids(n, rng) for n in lengths]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(sent)) as pool:
        answers = list(pool.map(lambda r: http_infer(bucket_server, "text_window", *r), sent))
    for (ids, mask), answer in zip(sent, answers):
        check_against_unpadded(answer, reference, model_file(bucket_repo, "text_window"), ids, mask)
    stats = bucket_server.model_stats("text_window")
    assert stats["inference_count"] == 4, stats
    assert stats["execution_count"] == 1, stats
    assert [b["batch_size"] for b in stats["batch_stats"]] == [4], stats["batch_stats"]


def test_interleaved_buckets_batch_as_if_each_had_its_own_queue(bucket_server, bucket_repo, reference):
    """96 requests of lengths 1-32 whose buckets (8, 16, 32) take turns, from
    16 clients each waiting on its answer: every wave of 16 needs a batch per
    bucket, so at best 3x the executions of the same requests in one bucket
    (32); a request of another bucket releasing the pending batch made it
    about 8x."""
    rng = np.random.default_rng(12)
    lengths = text.interleaved_lengths(96, BUCKETS, rng)
    sent = [text.token_ids(n, rng) for n in lengths]
    executions = {}
    for model in ("text_one_bucket", "text_interleaved"):
        before = bucket_server.model_stats(model)
        answers = text.closed_loop(lambda i: http_infer(bucket_server, model, *sent[i]), len(sent), CLIENTS)
        after = bucket_server.model_stats(model)
        assert after["inference_count"] - before["inference_count"] == len(sent), after
        executions[model] = after["execution_count"] - before["execution_count"]
        for (ids, mask), answer, n in zip(sent, answers, lengths):
            assert answer["last_hidden_state"].shape == (1, n, HIDDEN)
            check_against_unpadded(answer, reference, model_file(bucket_repo, model), ids, mask)
    assert executions["text_interleaved"] <= 3.5 * executions["text_one_bucket"], executions


def test_a_malformed_bucket_config_fails_the_load_naming_the_parameter(bucket_server):
    index = {m["name"]: m for m in bucket_server.repository_index()}
    assert index["bad_buckets"]["state"] == "UNAVAILABLE", index["bad_buckets"]
    reason = index["bad_buckets"]["reason"]
    assert "parameter 'bucket_pad'" in reason and "'token_type_ids' is not in the config" in reason, reason
    assert requests.get(f"{bucket_server.base}/v2/models/bad_buckets/ready", timeout=10).status_code != 200
