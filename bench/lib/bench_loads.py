"""The load generators, each run with a hard time bound: perf_analyzer (closed loop or Poisson
request rate, HTTP or gRPC), wrk posting one request body, and the in-process limit
(inprocess_ort.py: back-to-back runs, no client at all)."""
import csv
import io
import json
import os
from pathlib import Path

from bench_common import CUDART_LIB, LIB, PERF_ANALYZER, VENV_PY, WORK, bench_tool, log, note
from bench_procs import run_bounded, run_load, with_cpus


def pa_available():
    if not PERF_ANALYZER.exists():
        return False
    rc, _ = run_bounded([PERF_ANALYZER, "--version"], 20, pa_env(), record=False)
    return rc == 0


def pa_env():
    return {"LD_LIBRARY_PATH": ":".join(p for p in [os.environ.get("LD_LIBRARY_PATH", ""), str(CUDART_LIB)] if p)}


def run_perf_analyzer(url, model, spec, mode, value, window_ms, protocol="http", cpus=None, json_tensors=False,
                      extra_args=()):
    """One perf_analyzer point. mode: 'concurrency' or 'rate'; extra_args go to perf_analyzer as they
    are. Returns a dict or None."""
    csv_path = WORK / "pa_last.csv"
    if csv_path.exists():
        csv_path.unlink()
    cmd = [PERF_ANALYZER, "-m", model, "-x", "1", "-u", url, "-i", protocol,
           "-p", str(window_ms), "-r", "3", "-s", "1000",   # 3 windows, always accepted: bounded time
           "--input-data", spec["request_pa"], "-f", csv_path]
    if mode == "concurrency":
        # Async with 2 client threads: in sync mode perf_analyzer runs one
        # busy-polling thread per in-flight request, and 32 of them on a
        # 2-core machine starve the server under test (seen here: runs that
        # never finished). Still a closed loop of `value` requests in flight.
        cmd += ["--concurrency-range", f"{value}:{value}", "--async", "--max-threads", "2"]
    else:
        cmd += ["--request-rate-range", f"{value:.1f}:{value:.1f}", "--request-distribution", "poisson",
                "--max-threads", "64"]
    if json_tensors:
        cmd += ["--input-tensor-format", "json", "--output-tensor-format", "json"]
    cmd += list(extra_args)
    timeout = 3 * window_ms / 1000 * 3 + 60
    rc, out, client_cpu = run_load(with_cpus(cmd, cpus), timeout, pa_env())
    if rc != 0 or not csv_path.exists():
        tail = " | ".join(out.strip().splitlines()[-3:])
        note(f"perf_analyzer {protocol} {model} {mode}={value} failed (rc {rc}): {tail}")
        return None
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    if not rows:
        return None
    r = rows[0]
    f = lambda k: float(r[k]) if r.get(k) not in (None, "") else None
    return {"throughput": f("Inferences/Second"),
            "p50_us": f("p50 latency"), "p90_us": f("p90 latency"),
            "p95_us": f("p95 latency"), "p99_us": f("p99 latency"),
            "offered_rate": value if mode == "rate" else None, "client_cpu_pct": client_cpu}


def run_wrk(url, body_file, conns, duration_s, threads, cpus=None, header_bytes=None):
    """One wrk point posting body_file; header_bytes: the body is a binary-tensor request whose JSON
    header is that long."""
    threads = max(1, min(threads, conns))
    cmd = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{duration_s}s", "--timeout", "10s",
           "-s", LIB / "wrk_post.lua", url]
    env = {"WRK_BODY_FILE": str(body_file)}
    if header_bytes is not None:
        env["WRK_INFERENCE_HEADER_LENGTH"] = str(header_bytes)
    rc, out, client_cpu = run_load(with_cpus(cmd, cpus), duration_s + 40, env)
    return parse_wrk_summary(rc, out, client_cpu, f"wrk {url} c={conns}")


def parse_wrk_summary(rc, out, client_cpu, label):
    """The WRK_JSON line of a wrk run (bench/lib/wrk_summary.lua) as the bench's point, or None (noted)."""
    line = next((l for l in out.splitlines() if l.startswith("WRK_JSON ")), None)
    if rc != 0 or line is None:
        note(f"{label} failed (rc {rc}): {' | '.join(out.strip().splitlines()[-3:])}")
        return None
    w = json.loads(line[len("WRK_JSON "):])
    errors = sum(w["errors"].values())
    ok = w["requests"] - w["errors"]["status"]
    lat = w["latency_us"]
    res = {"throughput": ok / (w["duration_us"] / 1e6), "requests": w["requests"], "errors": w["errors"],
           "p50_us": lat["p50"], "p90_us": lat["p90"], "p95_us": lat["p95"], "p99_us": lat["p99"],
           "p75_us": lat["p75"], "p999_us": lat["p999"], "mean_us": lat["mean"], "client_cpu_pct": client_cpu}
    if errors:
        note(f"{label}: errors {w['errors']} of {w['requests']} requests")
    return res


def run_inprocess(model, sizes, duration, path, args):
    """Back-to-back ORT in one process at each batch size; its JSON, or None (noted)."""
    cmd = [VENV_PY, LIB / "inprocess_ort.py", "--model", model, "--threads", str(args.thread_budget),
           "--batch-sizes", ",".join(map(str, sizes)), "--duration", str(duration), "--json", path]
    # The C++ engine built next to the server under test (same ORT, same
    # session options); inprocess_ort.py falls back to Python without it.
    limit_bin = bench_tool(args, "ortserve_inprocess_limit")
    if limit_bin.exists():
        cmd += ["--engine", "ortserve", "--limit-bin", limit_bin]
    else:
        note(f"{limit_bin} not built: the in-process limit uses the onnxruntime Python wheel")
    rc, text = run_bounded(with_cpus(cmd, args.server_cpus), len(sizes) * (duration + 30) + 60)
    if rc != 0:
        note(f"inprocess/{model} failed (rc {rc}): {text.strip()[-300:]}")
        return None
    r = json.loads(Path(path).read_text())
    for x in r["results"]:
        log(f"   batch {x['batch_size']}: {x['inferences_per_s']:.0f} inf/s, run p50 {x['run_latency_us']['p50']} us")
    return r
