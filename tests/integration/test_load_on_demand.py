"""--model-load-on-demand: models listed at startup, loaded on their first
request (HTTP, gRPC and gRPC streams), one load for concurrent first requests, a load
failure answering every waiting request with its error and backing off, and
the interplay with --model-control-mode=explicit (--load-model still loads at
startup); the metadata of a model not loaded prepared once per folder change.

Outputs are checked against onnxruntime on the served file; load counts come
from ortserve_model_loads_total. No timing assertion.
"""
from __future__ import annotations

import concurrent.futures
import queue
import time

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from harness import Reference, metric
from test_model_control import write_addk

ON_DEMAND = "--model-load-on-demand=true"


def on_demand_repo(tmp_path, names=("a", "b")):
    repo = tmp_path / "models"
    for i, name in enumerate(names):
        write_addk(repo, name, {1: float(i + 1)})
    return repo


def infer(client, name, x):
    module = grpcclient if isinstance(client, grpcclient.InferenceServerClient) else httpclient
    inp = module.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return client.infer(name, [inp]).as_numpy("OUTPUT0")


def expected(repo, name, x):
    return Reference().run(repo / name / "1" / "model.onnx", {"INPUT0": x})["OUTPUT0"]


def loads(srv, reason="on_demand"):
    return metric(srv, "ortserve_model_loads_total", reason=reason)


def test_models_are_listed_and_load_on_their_first_request(tmp_path, launch):
    repo = on_demand_repo(tmp_path)
    srv = launch(repo, extra_args=(ON_DEMAND,))
    index = {e["name"]: e for e in srv.repository_index()}
    assert set(index) == {"a", "b"}
    assert all(e.get("state") != "READY" for e in index.values()), index
    # Metadata comes from config.pbtxt, without loading.
    meta = httpclient.InferenceServerClient(srv.url).get_model_metadata("a")
    assert meta["versions"] == ["1"]
    assert [(t["name"], t["shape"]) for t in meta["inputs"]] == [("INPUT0", [-1, 4])]
    gmeta = grpcclient.InferenceServerClient(srv.grpc_url).get_model_metadata("b")
    assert [t.name for t in gmeta.outputs] == ["OUTPUT0"]
    # Known and not ready (as Triton answers for a model it has not loaded): gRPC
    # ready=false with OK, HTTP 400 saying why; an unknown name stays NOT_FOUND / 404.
    assert not httpclient.InferenceServerClient(srv.url).is_model_ready("a")
    assert not grpcclient.InferenceServerClient(srv.grpc_url).is_model_ready("b")
    r = requests.get(f"{srv.base}/v2/models/a/ready", timeout=10)
    assert r.status_code == 400 and "loads on its first inference request" in r.text, r.text
    assert requests.get(f"{srv.base}/v2/models/nope/ready", timeout=10).status_code == 404
    with pytest.raises(InferenceServerException, match="unknown model"):
        grpcclient.InferenceServerClient(srv.grpc_url).is_model_ready("nope")
    assert loads(srv) == 0

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = infer(httpclient.InferenceServerClient(srv.url), "a", x)
    np.testing.assert_allclose(got, expected(repo, "a", x), rtol=1e-6)
    assert loads(srv) == 1
    got = infer(grpcclient.InferenceServerClient(srv.grpc_url), "b", x)
    np.testing.assert_allclose(got, expected(repo, "b", x), rtol=1e-6)
    assert loads(srv) == 2
    # Loaded now: later requests load nothing.
    infer(httpclient.InferenceServerClient(srv.url), "a", x)
    infer(grpcclient.InferenceServerClient(srv.grpc_url), "a", x)
    assert loads(srv) == 2
    assert loads(srv, "startup") == 0
    assert metric(srv, "ortserve_model_cold_start_seconds_count") == 2


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_concurrent_first_requests_cause_one_load(tmp_path, launch, protocol):
    repo = on_demand_repo(tmp_path, ("a",))
    srv = launch(repo, extra_args=(ON_DEMAND,))
    x = np.ones((1, 4), np.float32)
    want = expected(repo, "a", x)

    def one(_):
        client = (httpclient.InferenceServerClient(srv.url) if protocol == "http"
                  else grpcclient.InferenceServerClient(srv.grpc_url))
        return infer(client, "a", x)

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(one, range(32)))
    for got in results:
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert loads(srv) == 1


def test_a_failed_load_answers_every_waiting_request_with_its_error(tmp_path, launch):
    repo = on_demand_repo(tmp_path, ("good",))
    write_addk(repo, "broken")
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"not an onnx model")
    srv = launch(repo, extra_args=(ON_DEMAND,))
    x = np.ones((1, 4), np.float32)

    def one(i):
        client = (httpclient.InferenceServerClient(srv.url) if i % 2
                  else grpcclient.InferenceServerClient(srv.grpc_url))
        with pytest.raises(InferenceServerException) as e:
            infer(client, "broken", x)
        return str(e.value)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        messages = list(pool.map(one, range(8)))
    for m in messages:
        assert "failed to load 'broken'" in m, m
    # The failure is the model's alone.
    np.testing.assert_allclose(infer(httpclient.InferenceServerClient(srv.url), "good", x),
                               expected(repo, "good", x), rtol=1e-6)
    assert srv.alive()


def test_a_failed_load_backs_off_until_an_explicit_load_or_a_changed_file(tmp_path, launch):
    """Requests right after a failed on-demand load get its error without a new load
    (no load started: its log line) for the back-off (2 s after a first failure,
    docs/many-models.md); an explicit load ends it, and so does fixing the file."""
    repo = on_demand_repo(tmp_path, ("good",))
    model = write_addk(repo, "broken") / "1" / "model.onnx"
    fixed = model.read_bytes()
    model.write_bytes(b"not an onnx model")
    srv = launch(repo, extra_args=(ON_DEMAND, "--model-control-mode=explicit",
                                   "--allow-unauthenticated-model-control=true"))
    http = httpclient.InferenceServerClient(srv.url)
    grpc = grpcclient.InferenceServerClient(srv.grpc_url)
    x = np.ones((1, 4), np.float32)

    def error(client):
        with pytest.raises(InferenceServerException) as e:
            infer(client, "broken", x)
        return str(e.value)

    def attempts():  # on-demand loads started (a load that fails this early is not in loads_total)
        return srv.log_text().count("model 'broken': loading on its first request")

    failed_at = time.monotonic()
    assert "failed to load 'broken'" in error(http)
    assert attempts() == 1
    for client in (http, grpc, http, grpc):
        m = error(client)
        if time.monotonic() - failed_at >= 2:
            pytest.skip("the 2 s back-off ended before these requests came (a very slow run)")
        assert "failed to load 'broken'" in m and "not retried for 2 s" in m, m
    assert attempts() == 1
    with pytest.raises(InferenceServerException):
        http.load_model("broken")
    assert "failed to load 'broken'" in error(grpc)
    assert attempts() == 2
    model.write_bytes(fixed)
    np.testing.assert_allclose(infer(http, "broken", x), expected(repo, "broken", x), rtol=1e-6)
    assert attempts() == 3 and loads(srv) == 1


def test_a_streams_requests_load_their_models_on_demand(tmp_path, launch):
    """ModelStreamInfer: requests for models not loaded wait for their loads as unary
    calls do, the stream's other requests going on meanwhile; every request is answered
    (outputs checked), one load per model, a failed load answered in-band."""
    repo = on_demand_repo(tmp_path, ("a", "b", "c"))
    write_addk(repo, "broken")
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"not an onnx model")
    srv = launch(repo, extra_args=(ON_DEMAND,))
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    infer(client, "c", x)  # loaded before the stream
    answers = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    sent = ["a", "c", "b", "broken", "a", "c", "b", "a"]
    for i, name in enumerate(sent):
        inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        client.async_stream_infer(name, [inp], request_id=str(i))
    got = [answers.get(timeout=60) for _ in sent]
    client.stop_stream()
    errors = [str(error) for result, error in got if error is not None]
    assert len(errors) == 1 and "failed to load 'broken'" in errors[0], errors
    for result, error in got:
        if error is None:
            name = sent[int(result.get_response().id)]
            np.testing.assert_allclose(result.as_numpy("OUTPUT0"), expected(repo, name, x), rtol=1e-6)
    assert loads(srv) == 3  # c, then a and b once each (the broken file fails before a load counts)
    assert srv.log_text().count("model 'broken': loading on its first request") == 1


def test_explicit_mode_loads_load_model_at_startup_and_the_rest_on_demand(tmp_path, launch):
    repo = on_demand_repo(tmp_path)
    srv = launch(repo, extra_args=(ON_DEMAND, "--model-control-mode=explicit", "--load-model", "a",
                                        "--allow-unauthenticated-model-control=true"))
    srv.wait_models_ready(["a"])
    assert loads(srv, "startup") == 1
    client = httpclient.InferenceServerClient(srv.url)
    assert not client.is_model_ready("b")
    x = np.ones((1, 4), np.float32)
    np.testing.assert_allclose(infer(client, "b", x), expected(repo, "b", x), rtol=1e-6)
    assert loads(srv) == 1
    # Unloaded explicitly, it loads again on its next request.
    client.unload_model("b")
    np.testing.assert_allclose(infer(client, "b", x), expected(repo, "b", x), rtol=1e-6)
    assert loads(srv) == 2


def test_metadata_of_a_listed_model_is_prepared_once_per_folder_change(tmp_path, launch):
    """Many metadata requests (HTTP and gRPC, concurrent; HTTP's with a ready check) for a listed
    model all answer from its folder, and it stays unloaded; its folder is prepared
    once (each preparation logs its unknown parameter) until a file changes."""
    repo = tmp_path / "models"
    probe = 'parameters { key: "listed_probe" value { string_value: "x" } }'
    write_addk(repo, "a", extra=probe)
    srv = launch(repo, extra_args=(ON_DEMAND,))

    def preparations():
        return srv.log_text().count("model 'a': ignoring unknown parameters: listed_probe")

    def one(i):
        if i % 2:
            client = httpclient.InferenceServerClient(srv.url)
            meta = client.get_model_metadata("a")
            return meta["versions"], [(t["name"], t["shape"]) for t in meta["inputs"]], client.is_model_ready("a")
        client = grpcclient.InferenceServerClient(srv.grpc_url)
        meta = client.get_model_metadata("a")
        return list(meta.versions), [(t.name, list(t.shape)) for t in meta.inputs], False

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(40)))
    assert all(a == (["1"], [("INPUT0", [-1, 4])], False) for a in answers), answers
    assert preparations() == 1
    assert loads(srv) == 0
    # A new version folder: prepared again, and the metadata says so.
    write_addk(repo, "a", {1: 1.0, 2: 2.0}, extra=probe)
    assert httpclient.InferenceServerClient(srv.url).get_model_metadata("a")["versions"] == ["2"]
    assert grpcclient.InferenceServerClient(srv.grpc_url).get_model_metadata("a").versions == ["2"]
    assert preparations() == 2
    assert loads(srv) == 0


def test_the_first_request_after_a_metadata_request_loads_without_preparing_again(tmp_path, launch):
    """A listed model's metadata prepares its folder; the load of its first request takes that
    preparation while the folder is unchanged (each preparation logs its unknown parameter),
    and prepares again once a file changed."""
    repo = tmp_path / "models"
    probe = 'parameters { key: "listed_probe" value { string_value: "x" } }'
    write_addk(repo, "a", extra=probe)
    write_addk(repo, "b", extra=probe)
    srv = launch(repo, extra_args=(ON_DEMAND,))
    client = httpclient.InferenceServerClient(srv.url)
    x = np.ones((1, 4), np.float32)

    def preparations(name):
        return srv.log_text().count(f"model '{name}': ignoring unknown parameters: listed_probe")

    assert client.get_model_metadata("a")["versions"] == ["1"]
    np.testing.assert_allclose(infer(client, "a", x), expected(repo, "a", x), rtol=1e-6)
    assert loads(srv) == 1
    assert preparations("a") == 1
    # Changed after its metadata was read: the load prepares the folder again.
    assert client.get_model_metadata("b")["versions"] == ["1"]
    write_addk(repo, "b", {1: 5.0}, extra=probe)
    np.testing.assert_allclose(infer(client, "b", x), expected(repo, "b", x), rtol=1e-6)
    assert loads(srv) == 2
    assert preparations("b") == 2


def test_a_changed_model_level_file_ends_the_back_off(tmp_path, launch):
    """The back-off of a failed load ends when any file its preparation reads changes,
    a model-level one (here the label file the config names) included."""
    repo = on_demand_repo(tmp_path, ("good",))
    model_dir = write_addk(repo, "labelled")
    config = model_dir / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ]',
                                                  'name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] '
                                                  'label_filename: "labels.txt"'))
    assert 'label_filename: "labels.txt"' in config.read_text()
    srv = launch(repo, extra_args=(ON_DEMAND,))
    client = httpclient.InferenceServerClient(srv.url)
    x = np.ones((1, 4), np.float32)
    failed_at = time.monotonic()
    with pytest.raises(InferenceServerException) as e:
        infer(client, "labelled", x)
    assert "failed to load 'labelled'" in str(e.value) and "labels.txt" in str(e.value), str(e.value)
    (model_dir / "labels.txt").write_text("a\nb\nc\nd\n")
    if time.monotonic() - failed_at >= 2:
        pytest.skip("the 2 s back-off ended before the next request came (a very slow run)")
    np.testing.assert_allclose(infer(client, "labelled", x), expected(repo, "labelled", x), rtol=1e-6)
    assert srv.log_text().count("model 'labelled': loading on its first request") == 2
