"""The benchmark's tools: the in-process limit, ortserve_inprocess_limit
(bench/programs/inprocess_limit.cpp), runs a model on the server's own runtime, reports
the ONNX Runtime the server reports, and refuses bad arguments with a message
naming them; the transport floor, ortserve_http_floor (bench/programs/http_floor.cpp),
answers every framed request with its body, and so does the bench's nginx configuration;
run_bench.py's verdicts and report text (its modules bench/lib/bench_*.py)."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time

import numpy as np
import pytest
import requests

from harness import DEMO_REPO, free_ports, ortserve_binary

pytestmark = pytest.mark.timeout(120)


def bench_tool(name):
    """A benchmark tool built next to the server (make build), or the test skips."""
    path = ortserve_binary().parent / name
    if not path.exists():
        pytest.skip(f"{path} not built")
    return path


@pytest.fixture(scope="module")
def limit_binary():
    return bench_tool("ortserve_inprocess_limit")


def run_limit(binary, *args):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_runs_the_model_at_each_batch_size(limit_binary, demo_server, tmp_path):
    features = tmp_path / "features.bin"
    features.write_bytes(np.linspace(-1, 1, 16, dtype=np.float32).tobytes())
    done = run_limit(limit_binary, "--model-path", DEMO_REPO / "mlp_classifier" / "1" / "model.onnx",
                     "--threads", 1, "--batch-sizes", "4,1", "--duration", 0.2, "--warmup", 0.05,
                     "--input", f"features:FP32:1x16:{features}")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["engine"] == "ortserve-runtime" and result["threads"] == 1
    assert [r["batch_size"] for r in result["results"]] == [1, 4]
    for r in result["results"]:
        assert r["runs"] > 0 and r["inferences_per_s"] > 0
        lat = r["run_latency_us"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"]
    # The same ONNX Runtime as the server under test.
    text = requests.get(f"http://127.0.0.1:{demo_server.metrics_port}/metrics", timeout=10).text
    server_ort = re.search(r'ortserve_build_info\{[^}]*onnxruntime_version="([^"]+)"', text).group(1)
    assert result["onnxruntime"] == server_ort


@pytest.mark.parametrize("args, message", [
    (("--threads", 1), "--model-path and at least one --input are required"),
    (("--model-path", "m.onnx", "--input", "x:FP32:1x16"), "--input must be NAME:DTYPE:DIMS:FILE"),
    (("--model-path", "m.onnx", "--input", "x:FP99:1x16:f.bin"), "unknown data type FP99"),
    (("--model-path", "m.onnx", "--bogus", "1"), "unknown flag --bogus"),
    (("--model-path",), "--model-path needs a value"),
])
def test_bad_arguments_are_named(limit_binary, args, message):
    done = run_limit(limit_binary, *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_bad_model_and_input_file_are_named(limit_binary, tmp_path):
    features = tmp_path / "features.bin"
    features.write_bytes(bytes(64))
    done = run_limit(limit_binary, "--model-path", tmp_path / "missing.onnx", "--input",
                     f"features:FP32:1x16:{features}")
    assert done.returncode == 2 and "missing.onnx" in done.stderr
    done = run_limit(limit_binary, "--model-path", DEMO_REPO / "mlp_classifier" / "1" / "model.onnx",
                     "--input", f"features:FP32:1x16:{tmp_path / 'absent.bin'}")
    assert done.returncode == 2 and "cannot read" in done.stderr and "absent.bin" in done.stderr


def load_bench(name):
    """A bench module by name: a scenario (bench/*.py) or a helper (bench/lib/*.py);
    bench/ is not a package, its benchlib puts bench/lib/ on sys.path."""
    import importlib
    import sys
    from pathlib import Path
    bench_dir = str(Path(__file__).resolve().parents[2] / "bench")
    if bench_dir not in sys.path:
        sys.path.insert(0, bench_dir)
    importlib.import_module("benchlib")
    return importlib.import_module(name)


def closed_loop(throughput, p99_us):
    return {"throughput": throughput, "p99_us": p99_us, "server_stats": {}, "server_cpu_pct": 150.0}


def test_paired_rounds_verdict_is_the_median_round():
    """The bench's verdict over paired rounds: the round with the median ratio, its spread named,
    and the sweep's own point kept in the detail."""
    bench = load_bench("bench_targets")
    rounds = [{"tiny": {"ortserve": closed_loop(o, 1000), "fastapi": closed_loop(1000, 9000)}}
              for o in (24000, 30000, 26500)]
    out = {"rounds": rounds,
           "ortserve": {"models": {"tiny": {"wrk_json": {"concurrency": [dict(closed_loop(9500, 900), concurrency=32)]}}}},
           "fastapi": {"models": {"tiny": {"wrk_json": {"concurrency": [dict(closed_loop(1000, 8000), concurrency=32)]}}}}}
    targets = {t["target"]: t for t in bench.compute_targets(out, {})}
    tiny = targets[bench.TINY_TARGET]
    assert tiny["ratio"] == pytest.approx(26.5) and tiny["verdict"] == "PASS"
    assert "26500 vs 1000 inf/s, median of 3 rounds (ratio 24.00 to 30.00)" == tiny["measured"]
    assert "sweep point: 9500 vs 1000 inf/s = 9.50" in tiny["detail"]
    # An even count takes the lower middle round: no verdict rounds up.
    out["rounds"] = rounds[:2]
    first = bench.compute_targets(out, {})[0]
    assert first["ratio"] == pytest.approx(24.0) and first["verdict"] == "MISS"
    # Without rounds the sweep's point decides; missing pairs are N/A, not PASS.
    del out["rounds"]
    targets = {t["target"]: t for t in bench.compute_targets(out, {})}
    assert targets[bench.TINY_TARGET]["verdict"] == "MISS"
    assert targets[bench.CNN_TARGET]["verdict"] == "N/A"


def test_cnn_target_has_a_row_per_client_against_one_in_process_run():
    """A cnn round measures ortserve under each client and in-process ORT once; each client's ratio
    is over that same in-process figure, at the batch mix the server ran under that client."""
    bench = load_bench("bench_targets")
    inproc = {"results": [{"batch_size": 1, "inferences_per_s": 300.0},
                          {"batch_size": 3, "inferences_per_s": 330.0}]}
    def cnn_point(throughput, mix, client_cpu):
        r = dict(closed_loop(throughput, 20000), client_cpu_pct=client_cpu)
        r["server_stats"] = {"batch_sizes": {str(k): {"executions": v} for k, v in mix.items()}}
        return r
    rounds = [{"cnn": {"wrk_bin": cnn_point(297.0, {1: 1}, 1.4), "pa_http": cnn_point(270.0, {1: 1, 3: 1}, 7.8),
                       "inprocess": inproc}}]
    rows = {r[0]: r for r in bench.rounds_rows({"rounds": rounds}, {})[0]}
    assert set(rows) == {"cnn @4 (wrk_bin): ortserve / in-process ORT", "cnn @4 (pa_http): ortserve / in-process ORT"}
    assert rows["cnn @4 (wrk_bin): ortserve / in-process ORT"][2] == pytest.approx(297.0 / 300.0)
    # 1 run of 1 and 1 of 3: 4 inferences in 1/300 + 3/330 s.
    assert rows["cnn @4 (pa_http): ortserve / in-process ORT"][2] == pytest.approx(270.0 / (4 / (1 / 300 + 3 / 330)))
    assert "client CPU 8% of one core" in rows["cnn @4 (pa_http): ortserve / in-process ORT"][4]
    # On 2 cores a client taking 7.8% of one takes 3.9% of the machine: no server passes 0.961x.
    two_cores = {"rounds": rounds, "meta": {"machine": {"cores": 2}}}
    rows = {r[0]: r for r in bench.rounds_rows(two_cores, {})[0]}
    assert "the client's share of the 2 cores caps any server at 0.961x" in rows["cnn @4 (pa_http): ortserve / in-process ORT"][4]
    # gRPC and JSON have rows of their own; binary tensors are held to 0.97x, a JSON body to 0.9x.
    rounds[0]["cnn"].update(pa_grpc=cnn_point(285.0, {1: 1}, 6.0), wrk_json=cnn_point(276.0, {1: 1}, 1.2))
    rows = {r[0]: r for r in bench.rounds_rows({"rounds": rounds}, {})[0]}
    assert [r[3] for r in rows.values()] == [">= 0.97x", ">= 0.97x", ">= 0.97x", ">= 0.9x"]
    targets = {t["target"]: t for t in bench.compute_targets({"rounds": rounds}, {})}
    assert targets["cnn @4 (pa_grpc): ortserve / in-process ORT"]["verdict"] == "MISS"  # 0.95
    assert targets["cnn @4 (wrk_json): ortserve / in-process ORT"]["verdict"] == "PASS"  # 0.92
    # Results from before the wrk binary load kept perf_analyzer's point under "ortserve".
    old = [{"cnn": {"ortserve": cnn_point(270.0, {1: 1}, None), "inprocess": inproc}}]
    assert [r[0] for r in bench.rounds_rows({"rounds": old}, {})[0]] == ["cnn @4 (pa_http): ortserve / in-process ORT"]


def test_binary_request_of_the_bench_is_served_like_its_json_twin(demo_server):
    """make_bench_models.py's binary-tensor request (the wrk binary load's body) carries the same
    tensors as its JSON request: the server answers both with onnxruntime's outputs."""
    import importlib.util
    import onnxruntime as ort
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "bench" / "lib" / "make_bench_models.py"
    spec = importlib.util.spec_from_file_location("make_bench_models", path)
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    model = {"inputs": [{"name": "features", "datatype": "FP32", "dims": [16]}],
             "outputs": [{"name": "probabilities", "datatype": "FP32", "dims": [4]}]}
    body, _pa, binary, header_len = models.request_bodies(model, np.random.default_rng(5))
    features = np.asarray(json.loads(body)["inputs"][0]["data"], dtype=np.float32).reshape(1, 16)
    session = ort.InferenceSession(str(DEMO_REPO / "mlp_classifier" / "1" / "model.onnx"))
    expected = session.run(["probabilities"], {"features": features})[0]

    url = f"{demo_server.base}/v2/models/mlp_classifier/infer"
    r = requests.post(url, data=binary, timeout=10,
                      headers={"Inference-Header-Content-Length": str(header_len),
                               "Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    n = int(r.headers["Inference-Header-Content-Length"])
    header = json.loads(r.content[:n])
    (out,) = header["outputs"]
    assert out["name"] == "probabilities" and out["parameters"]["binary_data_size"] == 16
    got = np.frombuffer(r.content[n:n + 16], dtype="<f4").reshape(out["shape"])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    as_json = requests.post(url, data=body, timeout=10, headers={"Content-Type": "application/json"}).json()
    np.testing.assert_allclose(np.asarray(as_json["outputs"][0]["data"], dtype=np.float32).reshape(1, 4),
                               expected, rtol=1e-5, atol=1e-6)


def test_server_side_quantile_is_interpolated_within_its_bucket():
    bench = load_bench("bench_measure")
    m0 = {"h": {"buckets": {"0.001": 0, "0.0025": 0, "0.005": 0, "+Inf": 0}, "sum": 0, "count": 0}}
    m1 = {"h": {"buckets": {"0.001": 50, "0.0025": 90, "0.005": 100, "+Inf": 100}, "sum": 0.15, "count": 100}}
    d = bench.histogram_delta(m0, m1, "h")
    assert d["p99_le"] == 0.005
    # 99th of 100: 9 of the 10 requests between 2.5 and 5 ms.
    assert d["p99_est"] == pytest.approx(0.0025 + 0.0025 * 0.9)
    assert d["p50_le"] == 0.001
    m1["h"]["buckets"]["+Inf"] = 200
    m1["h"]["count"] = 200
    assert bench.histogram_delta(m0, m1, "h")["p99_est"] is None  # in +Inf: no estimate


def test_a_ratio_just_under_its_goal_does_not_print_as_the_goal():
    bench = load_bench("bench_targets")
    assert bench.fmt_ratio(0.94955, ">= 0.95x") == "0.9496"  # a MISS must not read "0.95"
    assert bench.fmt_ratio(0.9512, ">= 0.95x") == "0.951"
    assert bench.fmt_ratio(0.95, ">= 0.95x") == "0.95"
    assert bench.fmt_ratio(7.7724, ">= 10x") == "7.77"
    assert bench.fmt_ratio(1.0004, "<= 1x") == "1.0004"


@pytest.fixture(scope="module")
def floor_binary():
    return bench_tool("ortserve_http_floor")


@contextlib.contextmanager
def listening(cmd, port):
    """Runs a server program in its own process group until it accepts on `port`; kills the
    group (a master and its workers) on leaving."""
    proc = subprocess.Popen([str(c) for c in cmd], stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def floor_server(floor_binary, tmp_path):
    """ortserve_http_floor on a free port answering with a small JSON body: (port, body)."""
    body = b'{"model_name":"tiny","outputs":[]}'
    (tmp_path / "body.json").write_bytes(body)
    port = free_ports(1)[0]
    with listening([floor_binary, "--port", port, "--body", tmp_path / "body.json"], port):
        yield port, body


def test_http_floor_answers_every_request_with_its_body(floor_server):
    port, body = floor_server
    with requests.Session() as s:  # keep-alive: both on one connection
        for _ in range(2):
            r = s.post(f"http://127.0.0.1:{port}/v2/models/tiny/infer", data=b'{"inputs":[]}', timeout=10)
            assert r.status_code == 200 and r.content == body
        assert s.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=10).content == body
    # Two pipelined requests, the second's body split from its head: two answers.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        req = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
        c.sendall(req + req[:-3])
        c.sendall(req[-3:])
        got = b""
        while got.count(body) < 2:
            chunk = c.recv(4096)
            assert chunk, f"connection closed after {got!r}"
            got += chunk
        assert got.count(b"HTTP/1.1 200 OK") == 2
    # A request it will not read (a Content-Length over its 1 MiB limit) closes the connection.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(b"POST /x HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n")
        assert c.recv(4096) == b""


def test_http_floor_refuses_bad_arguments(floor_binary, tmp_path):
    for args in ((), ("--port", "1"), ("--port", "1", "--body"), ("--bogus", "1", "--body", "x")):
        done = subprocess.run([str(floor_binary), *args], capture_output=True, text=True, timeout=10)
        assert done.returncode == 2 and "usage:" in done.stderr
    done = subprocess.run([str(floor_binary), "--port", "0", "--body", str(tmp_path / "absent.json")],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 2 and "absent.json" in done.stderr


def test_floor_response_carries_the_reference_outputs():
    """The no-op server answers with the reference outputs written as ortserve writes floats."""
    bench = load_bench("bench_servers")
    ref = {"OUTPUT0": np.array([[0.1, -2.5e-7, 1.6231999]], dtype=np.float32)}
    spec = {"outputs": [{"name": "OUTPUT0", "datatype": "FP32", "dims": [3]}]}
    text = bench.floor_response("tiny", spec, ref)
    resp = json.loads(text)
    assert resp["model_name"] == "tiny"
    (o,) = resp["outputs"]
    assert o["name"] == "OUTPUT0" and o["datatype"] == "FP32" and o["shape"] == [1, 3]
    assert np.array_equal(np.asarray(o["data"], np.float32).reshape(1, 3), ref["OUTPUT0"])
    assert '"data":[0.1,' in text  # the shortest float32 text, not 0.10000000149011612


def test_tiny_target_names_the_transport_floor():
    bench = load_bench("bench_targets")
    out = {"ortserve": {"models": {"tiny": {"wrk_json": {"concurrency": [dict(closed_loop(9500, 900), concurrency=32)]}}}},
           "fastapi": {"models": {"tiny": {"wrk_json": {"concurrency": [dict(closed_loop(1000, 8000), concurrency=32)]}}}}}
    assert "no-op" not in bench.compute_targets(out, {})[0]["detail"]  # not measured: not named
    out["http_floor"] = {"models": {"tiny": {"wrk_json": {"concurrency": [dict(closed_loop(16000, 300), concurrency=32)]}}}}
    tiny = bench.compute_targets(out, {})[0]
    assert tiny["target"] == bench.TINY_TARGET
    assert "no-op HTTP server on this load (sweep): 16000 inf/s = 16.0x this FastAPI figure" in tiny["detail"]


def test_tiny_target_against_nginx_takes_the_median_round():
    """The nginx row (issue 41: ortserve >= 0.75x nginx's static answer, tiny wrk JSON @32): from the
    rounds when nginx was in them, else from the sweep's points; no nginx point, "missing data"."""
    bench = load_bench("bench_targets")
    sweep = lambda t: {"models": {"tiny": {"wrk_json": {"concurrency": [dict(closed_loop(t, 500), concurrency=32)]}}}}
    out = {"ortserve": sweep(60000), "fastapi": sweep(3000)}
    unmeasured = next(t for t in bench.compute_targets(out, {}) if t["target"] == bench.NGINX_TARGET)
    assert (unmeasured["verdict"], unmeasured["measured"]) == ("N/A", "missing data")
    out["nginx"] = sweep(100000)
    row = next(t for t in bench.compute_targets(out, {}) if t["target"] == bench.NGINX_TARGET)
    assert (row["ratio"], row["goal"], row["verdict"]) == (pytest.approx(0.6), ">= 0.75x", "MISS")
    assert row["measured"] == "60000 vs 100000 inf/s"
    out["rounds"] = [{"tiny": {"ortserve": closed_loop(o, 500), "nginx": closed_loop(100000, 300)}}
                     for o in (70000, 80000, 76000)]
    rows = {t["target"]: t for t in bench.compute_targets(out, {})}
    assert rows[bench.NGINX_TARGET]["ratio"] == pytest.approx(0.76) and rows[bench.NGINX_TARGET]["verdict"] == "PASS"
    assert "sweep point: 60000 vs 100000 inf/s = 0.60" in rows[bench.NGINX_TARGET]["detail"]
    # Rounds without FastAPI leave its target unmeasured, named as such.
    assert (rows[bench.TINY_TARGET]["verdict"], rows[bench.TINY_TARGET]["measured"]) == ("N/A", "missing data")


def test_nginx_configuration_answers_with_the_body_it_was_given(tmp_path):
    """The bench's nginx (NginxStatic's configuration) answers any request on a kept-alive
    connection with the body given; a body that nginx's quoting would change is refused."""
    servers = load_bench("bench_servers")
    body = '{"model_name":"tiny","outputs":[{"data":[0.5,-1.25]}]}'
    with pytest.raises(ValueError, match="may not contain"):
        servers.nginx_conf(body.replace("tiny", "ti'ny"), 1, 1, tmp_path)
    nginx = servers.nginx_binary()
    if nginx is None:
        pytest.skip("nginx not installed (make bench-deps)")
    port = free_ports(1)[0]
    (tmp_path / "nginx.conf").write_text(servers.nginx_conf(body, port, 1, tmp_path))
    with listening([nginx, "-p", tmp_path, "-c", tmp_path / "nginx.conf", "-e", tmp_path / "error.log"], port):
        with requests.Session() as s:
            for _ in range(3):
                r = s.post(f"http://127.0.0.1:{port}/v2/models/tiny/infer", data=b'{"inputs":[]}', timeout=10)
                assert (r.status_code, r.text, r.headers["Content-Type"]) == (200, body, "application/json")


def test_report_shows_the_targets_of_the_runs_it_is_compared_with(tmp_path):
    """--compare-with: an earlier run's targets table is copied into the report, under a link to
    that run's report, and a report that cannot be read is named instead."""
    report = load_bench("bench_report")
    earlier = tmp_path / "results" / "RESULTS-before.md"
    earlier.parent.mkdir()
    earlier.write_text("# ortserve benchmark results\n\nGenerated by `bench/run_bench.py` (old build) on then.\n\n"
                       "## Targets\n\nVerdicts rest on ...\n\n| target | measured |\n|---|---|\n| tiny | 9 vs 1 |\n\n"
                       "Ratio per paired round:\n\n| target | round 1 |\n|---|---|\n| tiny | 9.0 |\n")

    class Args:
        compare_with = [str(earlier), str(tmp_path / "missing.md")]

    lines = report.comparison_lines(Args(), tmp_path)
    assert "### [RESULTS-before.md](results/RESULTS-before.md)" in lines
    assert "Generated by `bench/run_bench.py` (old build) on then." in lines
    table = lines[lines.index("| target | measured |"):]
    assert table[:3] == ["| target | measured |", "|---|---|", "| tiny | 9 vs 1 |"]
    assert "| tiny | 9.0 |" not in lines  # only the first table: the targets
    assert any(line.startswith(f"- {tmp_path / 'missing.md'}: cannot be read") for line in lines)
    Args.compare_with = []
    assert report.comparison_lines(Args(), tmp_path) == []


def test_report_links_the_other_benches_that_have_a_report(tmp_path):
    """RESULTS.md names each bench with its own report (sequences) by its headline, and only
    when that report exists; then the page of measurements recorded by hand."""
    report = load_bench("bench_report")
    assert report.other_bench_lines(tmp_path) == []
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "RESULTS-sequences.md").write_text(
        "# Sequences\n\nCommit abc123, a machine.\n\nThroughput of the oldest strategy over one: 2.5x at 16.\n")
    lines = report.other_bench_lines(tmp_path)
    assert lines[0] == "## Other benches"
    assert lines[2] == ("- [RESULTS-sequences.md](results/RESULTS-sequences.md) (`make bench-sequences`; "
                        "Commit abc123): Throughput of the oldest strategy over one: 2.5x at 16.")
    # The page of measurements recorded by hand is linked once it exists (a run never rewrites it).
    assert not any("RESULTS-by-hand.md" in line for line in lines)
    (tmp_path / "results" / "RESULTS-by-hand.md").write_text("# Measurements recorded by hand\n")
    assert report.other_bench_lines(tmp_path)[3].startswith("- [RESULTS-by-hand.md](results/RESULTS-by-hand.md): ")


def test_sequence_report_summarises_points_and_the_batching_ratio():
    """bench/sequence_bench.py's report (bench/lib/sequence_report.py): per-chunk
    percentiles, throughput, mean batch from the statistics, the ratio of the
    oldest strategy over one sequence per execution where both ran."""
    report = load_bench("sequence_report")
    assert report.percentile([4, 1, 3, 2], 50) == pytest.approx(2.5)
    assert report.percentile(list(range(101)), 99) == pytest.approx(99.0)
    points = [
        {"contender": "oldest", "streams": 16, "chunks": 1600, "wall_s": 2.0,
         "latencies_us": [1000.0] * 1584 + [9000.0] * 16, "executions": 200, "inferences": 1600},
        {"contender": "one_per_execution", "streams": 16, "chunks": 1600, "wall_s": 8.0,
         "latencies_us": [4000.0] * 1600, "executions": 1600, "inferences": 1600},
        {"contender": "inprocess_sequential", "streams": 1, "chunks": 100, "wall_s": 0.1,
         "latencies_us": [1000.0] * 100, "executions": 100, "inferences": 100},
    ]
    summary = report.summarize(points[0])
    assert summary["throughput"] == pytest.approx(800.0)
    assert summary["mean_batch"] == pytest.approx(8.0)
    assert summary["p50_us"] == pytest.approx(1000.0)
    assert 1000.0 < summary["p99_us"] <= 9000.0
    assert "latencies_us" not in summary
    ratios = report.batching_ratios([report.summarize(p) for p in points])
    assert ratios == {16: pytest.approx(4.0)}  # no pair at 1 stream: no ratio
    text = report.render({"points": points, "thread_budget": 2, "chunks_per_stream": 100, "dry_run": True})
    assert "4.00x at 16 streams" in text
    assert "Dry run" in text
    assert "| oldest | 800 | 1.00 |" in text
    assert "### 1 concurrent stream\n" in text and "### 16 concurrent streams\n" in text
    # perf_analyzer's points bring their throughput and percentiles; their pair has its own line.
    pa = [{"contender": "oldest_pa", "streams": 16, "chunks": 5000, "throughput": 6000.0, "p50_us": 2000.0,
           "p99_us": 5000.0, "executions": 500, "inferences": 5000},
          {"contender": "one_per_execution_pa", "streams": 16, "chunks": 3000, "throughput": 3000.0,
           "p50_us": 4000.0, "p99_us": 8000.0, "executions": 3000, "inferences": 3000}]
    assert report.summarize(pa[0])["throughput"] == 6000.0
    pa_text = report.render({"points": points + pa, "thread_budget": 2, "chunks_per_stream": 100})
    assert "(tritonclient.grpc.aio): 4.00x at 16 streams." in pa_text
    assert "(perf_analyzer): 2.00x at 16 streams." in pa_text
    assert "| oldest_pa | 6000 | 2.00 | 5.00 | 10.00 |" in pa_text
    # Points already summarised (the JSON file) render the same.
    assert report.render({"points": [report.summarize(p) for p in points], "thread_budget": 2,
                          "chunks_per_stream": 100, "dry_run": True}) == text


def test_sequence_bench_dry_run_leaves_the_real_results_alone(tmp_path):
    bench = load_bench("sequence_bench")
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    assert bench.main(["--dry-run", "--streams", "1,4", "--chunks", "8",
                       "--results-md", str(md), "--results-json", str(js)]) == 0
    run = json.loads(js.read_text())
    assert run["dry_run"] is True
    assert {(p["contender"], p["streams"]) for p in run["points"]} >= {("oldest", 4), ("one_per_execution", 4),
                                                                      ("direct_one_slot", 1)}
    assert ("direct_one_slot", 4) not in {(p["contender"], p["streams"]) for p in run["points"]}
    assert "made up by `--dry-run`" in md.read_text()
    with pytest.raises(SystemExit):
        bench.parse_args(["--streams", "65"])
