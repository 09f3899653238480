"""Scale-out behind a load balancer (issue 25): three ortserve replicas behind
Debian's HAProxy, health-checked on /v2/health/ready, under a constant open-loop
load. A rolling restart (SIGTERM, exit, restart, one replica at a time) loses and
fails no request; SIGKILL fails only requests that were in flight at the kill.
The parts are bench/lib/scaleout_cluster.py's; bench/scaleout.py measures the same
at length. Nothing here asserts on timing."""
from __future__ import annotations

import signal
import sys
import time

import pytest

from deploy_helpers import haproxy
from harness import REPO_ROOT, ortserve_binary

sys.path.insert(0, str(REPO_ROOT / "bench" / "lib"))
from scaleout_cluster import (MODEL, HAProxy, OpenLoopLoad, Replica, build_repository,  # noqa: E402
                              infer_body)

# Several replicas: capacity, not memory safety; the sanitizer pass skips it.
pytestmark = pytest.mark.scale

RATE = 50.0   # requests per second, open loop
SETTLE_S = 1.0


@pytest.fixture
def cluster(tmp_path):
    haproxy()
    if not ortserve_binary().exists():
        pytest.skip(f"ortserve binary not found at {ortserve_binary()}")
    repo = build_repository(tmp_path / "repo")
    replicas = [Replica(str(ortserve_binary()), repo, tmp_path / "logs", f"r{i}", thread_budget=1,
                        exit_timeout_secs=10).start() for i in range(3)]
    lb = None
    try:
        for r in replicas:
            r.wait_ready()
        lb = HAProxy(replicas, tmp_path / "haproxy").start()
        lb.wait_all_up()
        yield replicas, lb
    finally:
        if lb:
            lb.stop()
        for r in replicas:
            r.stop()


def _describe(outcomes) -> str:
    return "; ".join(f"{o.status} {o.error[:100]}" for o in outcomes[:10])


@pytest.mark.timeout(120)
def test_rolling_restart_behind_haproxy_fails_and_loses_nothing(cluster):
    replicas, lb = cluster
    load = OpenLoopLoad(lb.safe_port, f"/v2/models/{MODEL}/infer", infer_body(), RATE).start()
    time.sleep(SETTLE_S)
    for r in replicas:
        r.signal(signal.SIGTERM)
        assert r.wait_exit() == 0, f"{r.name} did not exit 0 after SIGTERM; see {r.log_path}"
        r.start()
        r.wait_ready()
        lb.wait_all_up()
        time.sleep(SETTLE_S)
    outcomes = load.stop()
    failed = [o for o in outcomes if not o.ok]
    assert len(outcomes) > RATE * SETTLE_S * 3, "the load did not run"
    assert not failed, f"{len(failed)} of {len(outcomes)} failed: {_describe(failed)}"
    assert all(r.starts == 2 for r in replicas)


@pytest.mark.timeout(120)
def test_sigkill_fails_only_requests_meeting_the_dead_replica(cluster):
    """Through the frontend that never re-sends a request a replica took: what fails
    was in flight while a replica was dead or dying (from its SIGKILL until HAProxy
    sees it back up); every other request is served."""
    replicas, lb = cluster
    load = OpenLoopLoad(lb.strict_port, f"/v2/models/{MODEL}/infer", infer_body(4), RATE).start()
    time.sleep(SETTLE_S)
    outages = []
    for r in replicas:
        killed = time.monotonic()
        r.signal(signal.SIGKILL)
        r.wait_exit()
        time.sleep(SETTLE_S)
        r.start()
        r.wait_ready()
        lb.wait_all_up()
        outages.append((killed, time.monotonic()))
        time.sleep(SETTLE_S)
    outcomes = load.stop()
    failed = [o for o in outcomes if not o.ok]
    stray = [o for o in failed if not any(o.started <= back and o.ended >= killed for killed, back in outages)]
    assert not stray, f"{len(stray)} failed outside every outage: {_describe(stray)}"
    calm = [o for o in outcomes if not any(o.started <= back and o.ended >= killed for killed, back in outages)]
    assert len(calm) > RATE * SETTLE_S, "the load did not run between the kills"
