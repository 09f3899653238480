"""Progressive canary (rollout_* parameters, issue 34): under real load from
tritonclient, a candidate version whose runs fail is rolled back within its
first step while the stable version answers everything else; a healthy
candidate is promoted through every step. State at GET /v2/models/<m>/rollout,
in the metrics and the log. Waits are bounded polls; nothing asserts timing.

The candidate that fails is "x + k" with a Gather whose index is the sum of
the input: an all-zero input runs, any other makes ONNX Runtime fail the run.
"""
from __future__ import annotations

import re
import threading
import time

import numpy as np
import requests
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

from harness import Reference, make_test_models, model_file
from version_helpers import params, write_model

demo = make_test_models.demo
WAIT_S = 90  # bound on a rollout reaching its end under load

def build_fails_unless_zero(k: float):
    """OUTPUT0 = INPUT0 + k + Gather([0], int(sum(INPUT0))): fails for a nonzero sum."""
    nodes = [helper.make_node("ReduceSum", ["INPUT0"], ["s"], keepdims=0),
             helper.make_node("Cast", ["s"], ["idx"], to=TensorProto.INT64),
             helper.make_node("Gather", ["zero", "idx"], ["g"]),
             helper.make_node("Add", ["INPUT0", "k"], ["t"]),
             helper.make_node("Add", ["t", "g"], ["OUTPUT0"])]
    return demo.make_model(nodes, [("INPUT0", TensorProto.FLOAT, ["batch", 4])],
                           [("OUTPUT0", TensorProto.FLOAT, ["batch", 4])],
                           [demo.const("k", np.array(k, np.float32)), demo.const("zero", np.zeros(1, np.float32))],
                           name="fails_unless_zero")


def build_slow_add_constant(k: float, rounds: int = 200, width: int = 256):
    """OUTPUT0 = INPUT0 + k, the same answer as build_add_constant(k), after
    `rounds` input-dependent width x width matrix products by the identity
    (some 60 ms a run on one thread: ONNX Runtime folds none of them away)."""
    nodes = [helper.make_node("ReduceSum", ["INPUT0"], ["s"], keepdims=1),
             helper.make_node("Mul", ["ones", "s"], ["m0"])]  # [width, width], depends on the input
    for i in range(rounds):
        nodes.append(helper.make_node("MatMul", [f"m{i}", "eye"], [f"m{i + 1}"]))
    nodes += [helper.make_node("ReduceMax", [f"m{rounds}"], ["r"], keepdims=0),
              helper.make_node("Mul", ["r", "zero"], ["z"]),  # 0, unless a product overflowed
              helper.make_node("Add", ["INPUT0", "k"], ["t"]),
              helper.make_node("Add", ["t", "z"], ["OUTPUT0"])]
    return demo.make_model(nodes, [("INPUT0", TensorProto.FLOAT, ["batch", 4])],
                           [("OUTPUT0", TensorProto.FLOAT, ["batch", 4])],
                           [demo.const("k", np.array(k, np.float32)), demo.const("zero", np.zeros((), np.float32)),
                            demo.const("ones", np.ones((width, width), np.float32)),
                            demo.const("eye", np.eye(width, dtype=np.float32))],
                           name="slow_add_constant")


def infer(client, name, x, version=""):
    inp = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return client.infer(name, [inp], model_version=version).as_numpy("OUTPUT0")


def rollout(srv, name):
    r = srv.get(f"/v2/models/{name}/rollout")
    assert r.status_code == 200, r.text
    return r.json()


def stats_by_version(srv, name):
    return {s["version"]: s["inference_stats"] for s in srv.get(f"/v2/models/{name}/stats").json()["model_stats"]}


def metric(srv, family, **labels):
    body = requests.get(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10).text
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{family}{{{re.escape(want)}}} (\S+)$", body, re.M)
    return float(m.group(1)) if m else None


def load_until(srv, name, x, done, threads=4):
    """Unversioned requests of `x` from `threads` clients until done(); each
    request's outcome: ("ok", output) or ("error", message)."""
    outcomes, lock, stop = [], threading.Lock(), threading.Event()

    def client_loop():
        client = httpclient.InferenceServerClient(srv.url)
        while not stop.is_set():
            try:
                result = ("ok", infer(client, name, x))
            except InferenceServerException as e:
                result = ("error", str(e))
            with lock:
                outcomes.append(result)

    workers = [threading.Thread(target=client_loop) for _ in range(threads)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + WAIT_S
    try:
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for w in workers:
            w.join()
    return outcomes


def test_failing_candidate_is_rolled_back_within_its_first_step(launch, tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, "canary", {1: make_test_models.build_add_constant(1.0), 2: build_fails_unless_zero(2.0)},
                params(rollout_steps="20,50,100", rollout_step_seconds="30", rollout_min_requests="5",
                       rollout_max_error_rate="0.1", rollout_max_p95_ms="10000"))
    srv = launch(repo, extra_args=("--model-control-mode=explicit", "--load-model=canary",
                                   "--allow-unauthenticated-model-control=true"))
    srv.wait_models_ready(["canary"])
    ref = Reference()
    x = np.ones((1, 4), np.float32)  # the candidate fails every run of it
    stable_out = ref.run(model_file(repo, "canary", 1), {"INPUT0": x})["OUTPUT0"]

    state = rollout(srv, "canary")
    assert (state["stable"], state["candidate"], state["state"], state["weight"], state["step"]) == \
        ("1", "2", "progressing", 20, 1), state

    outcomes = load_until(srv, "canary", x, lambda: rollout(srv, "canary")["state"] != "progressing")
    state = rollout(srv, "canary")
    assert state["state"] == "rolled_back", state
    assert state["weight"] == 0
    assert "error rate" in state["reason"] and "rollout_max_error_rate 0.1" in state["reason"], state["reason"]
    assert [(s["step"], s["outcome"]) for s in state["steps_finished"]] == [(1, "rolled_back")], state
    assert state["current_step"] is None

    # No request failed beyond those the candidate itself answered; the stable
    # version answered all the others, exactly as onnxruntime does.
    failures = [o for o in outcomes if o[0] == "error"]
    answers = [o[1] for o in outcomes if o[0] == "ok"]
    stats = stats_by_version(srv, "canary")
    assert failures and len(failures) == stats["2"]["fail"]["count"], (len(failures), stats)
    assert stats["2"]["success"]["count"] == 0
    assert len(answers) == stats["1"]["success"]["count"]
    for out in answers:
        np.testing.assert_array_equal(out, stable_out)

    # Rolled back stays rolled back: the stable version answers everything.
    client = httpclient.InferenceServerClient(srv.url)
    for _ in range(40):
        np.testing.assert_array_equal(infer(client, "canary", x), stable_out)
    assert rollout(srv, "canary")["state"] == "rolled_back"
    # A request naming a version is never redirected.
    zeros = np.zeros((1, 4), np.float32)
    np.testing.assert_array_equal(infer(client, "canary", zeros, "2"),
                                  ref.run(model_file(repo, "canary", 2), {"INPUT0": zeros})["OUTPUT0"])
    try:
        infer(client, "canary", x, "2")
        raise AssertionError("version 2 answered an input it cannot run")
    except InferenceServerException as e:
        assert "Gather" in str(e) or "indices" in str(e), str(e)

    assert metric(srv, "ortserve_rollout_weight", model="canary", version="2") == 0
    assert metric(srv, "ortserve_rollout_weight", model="canary", version="1") == 100
    assert metric(srv, "ortserve_rollout_events_total", model="canary", event="rolled_back") == 1
    assert "rollout of version 2 over stable version 1: rolled_back at weight 0%" in srv.log_text()

    # An operator's load restarts the rollout at its first step.
    assert srv.post("/v2/repository/models/canary/load").status_code == 200
    state = rollout(srv, "canary")
    assert (state["state"], state["weight"], state["step"], state["steps_finished"]) == \
        ("progressing", 20, 1, []), state
    assert state["events"]["started"] == 2 and state["events"]["rolled_back"] == 1, state


def test_slow_candidate_is_rolled_back_on_its_p95(launch, tmp_path):
    # The candidate answers exactly what the stable version does, on one
    # thread in some 60 ms (200 products of 256 x 256 matrices; the stable
    # version well under 1 ms): a p95 bound far below the one and far above
    # the other rolls it back in the first step, and no request fails.
    repo = tmp_path / "repo"
    write_model(repo, "slow", {1: make_test_models.build_add_constant(1.0), 2: build_slow_add_constant(1.0)},
                params(rollout_steps="20,100", rollout_step_seconds="60", rollout_min_requests="5",
                       rollout_max_p95_ms="5", rollout_max_error_rate="0.5",
                       intra_op_thread_count="1"))  # one thread: the candidate's run time, not the host's cores
    srv = launch(repo)
    srv.wait_models_ready(["slow"])
    ref = Reference()
    x = np.random.default_rng(3).standard_normal((1, 4)).astype(np.float32)
    expected = ref.run(model_file(repo, "slow", 2), {"INPUT0": x})["OUTPUT0"]
    np.testing.assert_array_equal(expected, ref.run(model_file(repo, "slow", 1), {"INPUT0": x})["OUTPUT0"])

    outcomes = load_until(srv, "slow", x, lambda: rollout(srv, "slow")["state"] != "progressing", threads=2)
    state = rollout(srv, "slow")
    assert state["state"] == "rolled_back" and state["weight"] == 0, state
    assert state["reason"].startswith("p95 ") and "rollout_max_p95_ms 5 in step 1 (20%)" in state["reason"], state
    assert [(s["step"], s["outcome"]) for s in state["steps_finished"]] == [(1, "rolled_back")], state
    assert state["steps_finished"][0]["candidate"]["requests"] >= 5, state

    assert all(kind == "ok" for kind, _ in outcomes), [o for o in outcomes if o[0] != "ok"][:3]
    for _, out in outcomes:
        np.testing.assert_array_equal(out, expected)
    stats = stats_by_version(srv, "slow")
    assert stats["2"]["success"]["count"] >= 5 and stats["2"]["fail"]["count"] == 0, stats
    assert metric(srv, "ortserve_rollout_events_total", model="slow", event="rolled_back") == 1
    client = httpclient.InferenceServerClient(srv.url)
    before = stats_by_version(srv, "slow")["2"]["success"]["count"]
    for _ in range(20):
        np.testing.assert_array_equal(infer(client, "slow", x), expected)
    assert stats_by_version(srv, "slow")["2"]["success"]["count"] == before


def test_healthy_candidate_is_promoted_through_every_step(launch, tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, "healthy", {1: make_test_models.build_add_constant(1.0),
                                  2: make_test_models.build_add_constant(2.0)},
                params(rollout_steps="25,50,75,100", rollout_step_seconds="1", rollout_min_requests="3",
                       rollout_max_error_rate="0.01", rollout_max_p95_ms="10000", rollout_max_p95_ratio="1000"))
    write_model(repo, "badsteps", {1: make_test_models.build_add_constant(1.0)},
                params(rollout_steps="50,20", rollout_step_seconds="1", rollout_max_error_rate="0.1"))
    # version_weights shares out what the candidate (3) does not take.
    write_model(repo, "mixed", {v: make_test_models.build_add_constant(float(v)) for v in (1, 2, 3)},
                params(version_weights="1:1,2:1", rollout_steps="50", rollout_step_seconds="600",
                       rollout_min_requests="1000", rollout_max_error_rate="0.5"))
    srv = launch(repo)
    srv.wait_models_ready(["healthy", "mixed"])
    entry = [e for e in srv.repository_index() if e["name"] == "badsteps"]
    assert entry and entry[0]["state"] == "UNAVAILABLE" and "rollout_steps" in entry[0]["reason"], entry

    ref = Reference()
    x = np.random.default_rng(7).standard_normal((1, 4)).astype(np.float32)
    expected = {v: ref.run(model_file(repo, "healthy", v), {"INPUT0": x})["OUTPUT0"] for v in (1, 2)}
    outcomes = load_until(srv, "healthy", x, lambda: rollout(srv, "healthy")["state"] == "promoted", threads=2)
    state = rollout(srv, "healthy")
    assert state["state"] == "promoted" and state["weight"] == 100, state
    assert [(s["step"], s["weight"], s["outcome"]) for s in state["steps_finished"]] == \
        [(1, 25, "passed"), (2, 50, "passed"), (3, 75, "passed")], state
    assert all(s["candidate"]["requests"] >= 3 for s in state["steps_finished"]), state
    assert state["events"] == {"started": 1, "advanced": 2, "paused": state["events"]["paused"],
                               "promoted": 1, "rolled_back": 0}, state

    assert all(kind == "ok" for kind, _ in outcomes), [o for o in outcomes if o[0] != "ok"][:3]
    for _, out in outcomes:
        assert np.array_equal(out, expected[1]) or np.array_equal(out, expected[2])
    client = httpclient.InferenceServerClient(srv.url)
    for _ in range(20):
        np.testing.assert_array_equal(infer(client, "healthy", x), expected[2])
    np.testing.assert_array_equal(infer(client, "healthy", x, "1"), expected[1])
    assert metric(srv, "ortserve_rollout_weight", model="healthy", version="2") == 100
    assert metric(srv, "ortserve_rollout_events_total", model="healthy", event="promoted") == 1
    r = srv.get("/v2/models/badsteps/rollout")
    assert r.status_code == 400 and "rollout_steps" in r.json()["error"], r.text

    # Sequential requests: of every 40, exactly 20 to the candidate at 50%,
    # the other 20 split 1:1 by version_weights among versions 1 and 2.
    ones = np.ones((1, 4), np.float32)
    ks = [float(infer(client, "mixed", ones)[0, 0]) - 1.0 for _ in range(40)]
    assert (ks.count(3.0), ks.count(1.0), ks.count(2.0)) == (20, 10, 10), ks
    state = rollout(srv, "mixed")
    assert (state["stable"], state["candidate"], state["weight"], state["state"]) == ("2", "3", 50, "progressing")
    assert srv.get("/v2/models/nosuch/rollout").status_code == 404
