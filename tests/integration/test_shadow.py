"""Shadow comparison (shadow_version / shadow_fraction / shadow_tolerance,
issue 34): the sampled requests a serving version answers run again on the
shadow version after the real answer was sent; the two answers are compared
per output and counted in ortserve_shadow_* metrics. The real answers all
come from the serving version and equal onnxruntime's; the shadow version
answers only requests that name it. An INT8 version made by onnxruntime's
quantize_dynamic, shadowed against its FP32 original, reports top-1
agreement equal to what onnxruntime gives. No assertion on timing: waits are
bounded polls on the counters.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, helper

from harness import Reference, make_test_models, metric
from quantization_helpers import CLASSES, FEATURES, quantize_mlp
from version_helpers import params, write_model

demo = make_test_models.demo
WAIT_S = 60

TWO_OUTPUTS = ('{ name: "shifted" data_type: TYPE_FP32 dims: [ 4 ] }, '
               '{ name: "same" data_type: TYPE_FP32 dims: [ 4 ] }')
LOGITS = f'{{ name: "logits" data_type: TYPE_FP32 dims: [ {CLASSES} ] }}'
SHIFT = 0.25  # version 2's "shifted" is version 1's plus this


def x_input(width: int) -> str:
    return f'{{ name: "x" data_type: TYPE_FP32 dims: [ {width} ] }}'


SHIFTED_IO = dict(inputs=x_input(4), outputs=TWO_OUTPUTS)  # build_shifted's tensors


def build_shifted(k: float):
    """shifted = 2x + k, same = x * 3: versions differ in "shifted" by their k."""
    nodes = [helper.make_node("Mul", ["x", "two"], ["d"]), helper.make_node("Add", ["d", "k"], ["shifted"]),
             helper.make_node("Mul", ["x", "three"], ["same"])]
    return demo.make_model(nodes, [("x", TensorProto.FLOAT, ["batch", 4])],
                           [("shifted", TensorProto.FLOAT, ["batch", 4]), ("same", TensorProto.FLOAT, ["batch", 4])],
                           [demo.const("two", np.array(2, np.float32)), demo.const("k", np.array(k, np.float32)),
                            demo.const("three", np.array(3, np.float32))], name="shifted")


def infer(client, name, x, version="", outputs=("shifted", "same")):
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = client.infer(name, [inp], model_version=version)
    response = result.get_response()
    return response["model_version"], {o: result.as_numpy(o) for o in outputs}


def shadow_counts(srv, name, version="1"):
    """(compared, dropped, failed) of the serving version `version`."""
    return tuple(int(metric(srv, f"ortserve_shadow_{c}_total", model=name, version=version))
                 for c in ("compared", "dropped", "failed"))


def wait_accounted(srv, name, n):
    """Until every one of n sampled requests is compared, dropped or failed."""
    deadline = time.monotonic() + WAIT_S
    while sum(shadow_counts(srv, name)) < n:
        assert time.monotonic() < deadline, shadow_counts(srv, name)
        time.sleep(0.02)
    return shadow_counts(srv, name)


def version_successes(srv, name, version):
    stats = srv.get(f"/v2/models/{name}/versions/{version}/stats").json()["model_stats"][0]
    return stats["inference_stats"]["success"]["count"]


def test_version_differing_by_a_known_amount_counts_mismatches_per_output(launch, tmp_path):
    repo = tmp_path / "repo"
    v1, v2 = build_shifted(1.0), build_shifted(1.0 + SHIFT)
    d = write_model(repo, "shifted", {1: v1, 2: v2},
                    params(shadow_version="2", shadow_fraction="1", shadow_tolerance="0.1"),
                    **SHIFTED_IO)
    write_model(repo, "sampled", {1: v1, 2: v2},
                params(shadow_version="2", shadow_fraction="0.25", shadow_tolerance="0.5"),
                **SHIFTED_IO)
    srv = launch(repo)
    srv.wait_models_ready(["shifted", "sampled"])
    client = httpclient.InferenceServerClient(srv.url)
    ref, rng = Reference(), np.random.default_rng(5)

    # Fraction 1: every answer of version 1 is shadowed. One request at a
    # time, each shadow run accounted for before the next: none is dropped.
    n = 12
    for i in range(n):
        x = rng.normal(0, 3, (1 + i % 3, 4)).astype(np.float32)
        version, got = infer(client, "shifted", x, version="1" if i % 4 == 0 else "")
        assert version == "1"  # unversioned requests never go to the shadow version
        want = ref.run(d / "1" / "model.onnx", {"x": x})
        for o in ("shifted", "same"):
            np.testing.assert_allclose(got[o], want[o], rtol=1e-6, atol=1e-6)
        assert wait_accounted(srv, "shifted", i + 1) == (i + 1, 0, 0)
    assert metric(srv, "ortserve_shadow_mismatch_total", model="shifted", version="1", output="shifted") == n
    assert metric(srv, "ortserve_shadow_mismatch_total", model="shifted", version="1", output="same") == 0
    # Every comparison's largest difference is SHIFT: in the (0.1, 1] bucket.
    assert metric(srv, "ortserve_shadow_max_abs_difference_bucket", model="shifted", version="1",
                  output="shifted", le="0.1") == 0
    assert metric(srv, "ortserve_shadow_max_abs_difference_bucket", model="shifted", version="1",
                  output="shifted", le="1") == n
    assert metric(srv, "ortserve_shadow_max_abs_difference_sum", model="shifted", version="1",
                  output="shifted") == pytest.approx(n * SHIFT, rel=1e-4)
    # The same as JSON, with the largest differences seen.
    view = srv.get("/v2/models/shifted/shadow").json()
    assert [v["version"] for v in view["versions"]] == ["1"], view
    v = view["versions"][0]
    assert (v["shadow_version"], v["compared"], v["dropped"], v["failed"]) == ("2", n, 0, 0), v
    outputs = {o["name"]: o for o in v["outputs"]}
    assert outputs["shifted"]["mismatches"] == n
    assert outputs["shifted"]["max_abs_difference"] == pytest.approx(SHIFT, rel=1e-5)
    # [batch, 4] has a class dimension: the shift keeps every row's top-1.
    assert outputs["same"]["max_abs_difference"] == 0 and outputs["shifted"]["top1_agreement"] == 1
    assert srv.get("/v2/models/nowhere/shadow").status_code == 404
    # The shadow runs ran on version 2, which no client asked.
    assert version_successes(srv, "shifted", 2) == n
    # A request naming the shadow version is answered by it, and not shadowed.
    version, got = infer(client, "shifted", np.ones((1, 4), np.float32), version="2")
    assert version == "2" and got["shifted"][0, 0] == pytest.approx(3.0 + SHIFT)
    assert shadow_counts(srv, "shifted") == (n, 0, 0)

    # Fraction 0.25 under four concurrent clients: the sampler takes exactly
    # one request in four; each is compared or (under load) dropped.
    per_client, threads = 10, 4
    answered_by = []

    def client_loop():
        c = httpclient.InferenceServerClient(srv.url)
        for _ in range(per_client):
            answered_by.append(infer(c, "sampled", np.full((2, 4), 0.5, np.float32))[0])

    workers = [threading.Thread(target=client_loop) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert answered_by == ["1"] * (per_client * threads)
    compared, dropped, failed = wait_accounted(srv, "sampled", per_client * threads // 4)
    assert compared + dropped + failed == per_client * threads // 4 and compared >= 1 and failed == 0
    # Within shadow_tolerance 0.5: no mismatch.
    assert metric(srv, "ortserve_shadow_mismatch_total", model="sampled", version="1", output="shifted") == 0


def test_int8_shadow_reports_top1_agreement_with_fp32(launch, tmp_path):
    fp32, int8 = quantize_mlp(tmp_path)
    repo = tmp_path / "repo"
    write_model(repo, "mlp", {1: fp32.read_bytes(), 2: int8.read_bytes()},
                params(shadow_version="2", shadow_fraction="1.0", shadow_tolerance="0.5"),
                inputs=x_input(FEATURES), outputs=LOGITS)
    srv = launch(repo)
    srv.wait_models_ready(["mlp"])
    client = httpclient.InferenceServerClient(srv.url)
    ref, rng = Reference(), np.random.default_rng(11)
    agreeing = rows = 0
    largest = 0.0
    for i in range(8):
        x = rng.random((8, FEATURES), dtype=np.float32)
        version, got = infer(client, "mlp", x, outputs=("logits",))
        assert version == "1"
        want = ref.run(fp32, {"x": x})["logits"]
        np.testing.assert_allclose(got["logits"], want, rtol=1e-5, atol=1e-5)  # the FP32 answer
        quantized = ref.run(int8, {"x": x})["logits"]
        agreeing += int((quantized.argmax(1) == want.argmax(1)).sum())
        rows += len(x)
        largest = max(largest, float(np.abs(quantized - want).max()))
        assert wait_accounted(srv, "mlp", i + 1) == (i + 1, 0, 0)
    assert largest > 1e-4  # quantization changed the math
    got = metric(srv, "ortserve_shadow_top1_agreement", model="mlp", version="1", output="logits")
    assert got == pytest.approx(agreeing / rows), (agreeing, rows)
    assert agreeing / rows > 0.5
    count = metric(srv, "ortserve_shadow_max_abs_difference_count", model="mlp", version="1", output="logits")
    assert count == 8
    # The largest difference lands in the bucket onnxruntime's figure says.
    bound = 10.0 ** np.ceil(np.log10(largest))
    assert metric(srv, "ortserve_shadow_max_abs_difference_bucket", model="mlp", version="1", output="logits",
                  le=f"{bound:g}") == 8


BAD = {
    "bad_not_loaded": (dict(shadow_version="9", shadow_fraction="0.5"), "shadow_version"),
    "bad_version": (dict(shadow_version="two", shadow_fraction="0.5"), "shadow_version"),
    "bad_fraction": (dict(shadow_version="2", shadow_fraction="1.5"), "shadow_fraction"),
    "bad_zero_fraction": (dict(shadow_version="2", shadow_fraction="0"), "shadow_fraction"),
    "bad_tolerance": (dict(shadow_version="2", shadow_fraction="1", shadow_tolerance="-1"), "shadow_tolerance"),
    "bad_no_version": (dict(shadow_fraction="1"), "shadow_version"),
    "bad_no_fraction": (dict(shadow_version="2"), "shadow_fraction"),
    "bad_weighted": (dict(shadow_version="2", shadow_fraction="1", version_weights="1:1,2:1"), "shadow_version"),
}


def test_every_bad_shadow_parameter_names_itself(launch, tmp_path):
    repo = tmp_path / "repo"
    v = build_shifted(1.0).SerializeToString()
    for name, (extra, _) in BAD.items():
        write_model(repo, name, {1: v, 2: v}, params(**extra), **SHIFTED_IO)
    srv = launch(repo)
    index = {e["name"]: e for e in srv.repository_index()}
    for name, (_, named) in BAD.items():
        entry = index[name]
        assert entry["state"] == "UNAVAILABLE" and f"'{named}'" in entry["reason"], entry
