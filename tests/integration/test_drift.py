"""Input drift statistics (drift_* parameters, issue 34): a stream whose
input distribution shifts halfway raises the PSI above 0.2 while a
stationary one stays below 0.1; a profile written by one server
(GET /v2/models/<m>/drift?format=profile) is another's drift_reference;
bad parameters make the model UNAVAILABLE naming them; with
drift_sample_fraction below 1 every request is still counted in "requests"
but only about that share of them in "observed_requests" and the window,
every value of each. Requests carry batches of 8 x 4 values, enough for
stable histograms; nothing asserts timing.
"""
from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient

from harness import make_test_models
from test_rollout import metric
from version_helpers import params, write_model

BATCH = 8


def send(client, name, rng, n, shift=0.0):
    for _ in range(n):
        x = (rng.standard_normal((BATCH, 4)) + shift).astype(np.float32)
        inp = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        out = client.infer(name, [inp]).as_numpy("OUTPUT0")
        np.testing.assert_allclose(out, x + 1.0, rtol=1e-6)


def drift(srv, name):
    r = srv.get(f"/v2/models/{name}/drift")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == name and len(body["versions"]) == 1, body
    return body["versions"][0]


def psi(srv, name):
    d = drift(srv, name)
    assert d["inputs"][0]["name"] == "INPUT0"
    return d["inputs"][0]["psi"]


def test_a_shift_halfway_raises_psi_and_a_stationary_stream_stays_low(launch, tmp_path):
    repo = tmp_path / "repo"
    add1 = {1: make_test_models.build_add_constant(1.0)}
    write_model(repo, "stationary", add1, params(drift_baseline_requests="100", drift_sample_fraction="1"))
    write_model(repo, "shifting", add1, params(drift_baseline_requests="100", drift_sample_fraction="0.25"))
    write_model(repo, "plain", add1, "")
    write_model(repo, "badbins", add1, params(drift_baseline_requests="100", drift_bins="1"))
    write_model(repo, "badref", add1, params(drift_reference="missing.txt"))
    write_model(repo, "both", add1, params(drift_baseline_requests="10", drift_reference="p.txt"))
    write_model(repo, "badfraction", add1, params(drift_baseline_requests="10", drift_sample_fraction="0"))
    srv = launch(repo)
    srv.wait_models_ready(["stationary", "shifting", "plain"])
    reasons = {e["name"]: e.get("reason", "") for e in srv.repository_index() if e.get("state") == "UNAVAILABLE"}
    assert "'drift_bins' value '1'" in reasons.get("badbins", ""), reasons
    assert "'drift_reference' value 'missing.txt'" in reasons.get("badref", ""), reasons
    assert "exclude each other" in reasons.get("both", ""), reasons
    assert "'drift_sample_fraction' value '0'" in reasons.get("badfraction", ""), reasons

    client = httpclient.InferenceServerClient(srv.url)
    rng = np.random.default_rng(11)
    send(client, "stationary", rng, 50)
    d = drift(srv, "stationary")
    assert d["recording"] and d["requests"] == 50 and d["inputs"][0]["psi"] is None, d
    assert srv.get("/v2/models/stationary/drift?format=profile").status_code == 400
    send(client, "stationary", rng, 350)
    d = drift(srv, "stationary")
    assert not d["recording"] and d["requests"] == 400 and d["baseline_requests"] == 100, d
    assert d["observed_requests"] == 400 and d["sample_fraction"] == 1.0, d
    x = d["inputs"][0]
    assert x["count"] == 300 * BATCH * 4 and abs(x["mean"]) < 0.1 and abs(x["variance"] - 1) < 0.15, x
    assert x["reference"]["count"] == 100 * BATCH * 4 and len(x["reference"]["edges"]) == 10, x["reference"]
    assert sum(x["histogram"]) == x["count"] and len(x["histogram"]) == 11
    assert x["psi"] < 0.1, x
    assert metric(srv, "ortserve_input_drift_psi", model="stationary", version="1", input="INPUT0") == \
        pytest.approx(x["psi"], rel=1e-6, abs=1e-9)

    send(client, "shifting", rng, 200)
    assert psi(srv, "shifting") < 0.1
    send(client, "shifting", rng, 200, shift=1.0)  # the second half: the mean moves by one sigma
    d = drift(srv, "shifting")
    assert d["inputs"][0]["psi"] > 0.2, d
    # 100 baseline requests, then about a quarter of 300 (within 4 per
    # accumulator, at most 8 of them), every value of each.
    assert d["requests"] == 400 and d["sample_fraction"] == 0.25, d
    observed = d["observed_requests"] - 100
    assert 75 - 32 <= observed <= 75 + 32, d
    x = d["inputs"][0]
    assert x["count"] == observed * BATCH * 4 and sum(x["histogram"]) == x["count"], x
    assert metric(srv, "ortserve_input_drift_psi", model="shifting", version="1", input="INPUT0") > 0.2

    r = srv.get("/v2/models/plain/drift")
    assert r.status_code == 400 and "drift_baseline_requests" in r.json()["error"], r.text
    assert metric(srv, "ortserve_input_drift_psi", model="plain", version="1", input="INPUT0") is None
    assert srv.get("/v2/models/nosuch/drift").status_code == 404
    assert srv.get("/v2/models/stationary/drift?format=csv").status_code == 400
    assert srv.get("/v2/models/stationary/versions/1/drift").json()["versions"][0]["version"] == "1"


def test_a_profile_from_one_server_is_the_reference_of_another(launch, tmp_path):
    first_repo, second_repo = tmp_path / "first", tmp_path / "second"
    add1 = {1: make_test_models.build_add_constant(1.0)}
    write_model(first_repo, "m", add1, params(drift_baseline_requests="50", drift_sample_fraction="1"))
    first = launch(first_repo)
    first.wait_models_ready(["m"])
    rng = np.random.default_rng(5)
    send(httpclient.InferenceServerClient(first.url), "m", rng, 250)
    r = first.get("/v2/models/m/drift?format=profile")
    assert r.status_code == 200 and r.text.startswith("ortserve-drift-profile 1\ninput INPUT0 "), r.text
    first.stop()

    write_model(second_repo, "m", add1, params(drift_reference="profiles/prod.txt"))
    (second_repo / "m" / "profiles").mkdir()
    (second_repo / "m" / "profiles" / "prod.txt").write_text(r.text)
    second = launch(second_repo)
    second.wait_models_ready(["m"])
    d = drift(second, "m")
    assert not d["recording"] and d["baseline_requests"] == 0 and d["sample_fraction"] == 0.1, d  # the default
    assert d["inputs"][0]["reference"]["count"] == 200 * BATCH * 4  # the first server's window
    client = httpclient.InferenceServerClient(second.url)
    send(client, "m", rng, 400)
    assert psi(second, "m") < 0.05
    send(client, "m", rng, 400, shift=-1.0)
    assert psi(second, "m") > 0.2
