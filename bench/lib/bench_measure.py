"""What is measured around a load point: the server's CPU (its process tree, from /proc), the
deltas of its Triton statistics (batch sizes executed, queue and compute time) and, for ortserve,
of its request-duration histogram (the server-side p99); the idle cost."""
import json
import re
import time
import urllib.error

from bench_common import log
from bench_procs import tree_cpu_seconds
from bench_servers import http_get


def get_stats(base, model):
    """Triton statistics for one model: counts and per-batch-size executions."""
    try:
        _, body = http_get(f"{base}/v2/models/{model}/stats", timeout=2.0)
        ms = json.loads(body)["model_stats"][0]
    except Exception:  # stats are a bonus; a server without them still gets measured
        return None
    inf = ms.get("inference_stats", {})
    g = lambda k: (int(inf.get(k, {}).get("count", 0)), int(inf.get(k, {}).get("ns", 0)))
    batches = {}
    for b in ms.get("batch_stats", []) or []:
        ci = b.get("compute_infer", {})
        batches[int(b["batch_size"])] = (int(ci.get("count", 0)), int(ci.get("ns", 0)))
    return {"inference_count": int(ms.get("inference_count", 0)),
            "execution_count": int(ms.get("execution_count", 0)),
            "success": g("success"), "queue": g("queue"), "compute_infer": g("compute_infer"),
            "batches": batches}


def scrape_metrics(metrics_port, model, histograms):
    """One model's series from ortserve's /metrics: {"outcomes": {outcome: n},
    histogram name: {"buckets": {le: n}, "sum": x, "count": n}} for each of `histograms`."""
    _, body = http_get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5.0)
    out = {"outcomes": {}}
    for line in body.decode().splitlines():
        if f'model="{model}"' not in line:
            continue
        name, _, rest = line.partition("{")
        labels, _, value = rest.rpartition("}")
        value = float(value)
        if name == "ortserve_requests_total":
            m = re.search(r'outcome="([a-z_]+)"', labels)
            if m:
                out["outcomes"][m.group(1)] = out["outcomes"].get(m.group(1), 0) + int(value)
            continue
        for h in histograms:
            if name.startswith(h):
                d = out.setdefault(h, {"buckets": {}, "sum": 0.0, "count": 0})
                if name == h + "_bucket":
                    le = re.search(r'le="([^"]+)"', labels).group(1)
                    d["buckets"][le] = int(value)
                elif name == h + "_sum":
                    d["sum"] = value
                elif name == h + "_count":
                    d["count"] = int(value)
    return out


def histogram_delta(m0, m1, name):
    """Count, mean and bucket-bound quantiles of a histogram over an interval
    (a quantile is the upper bound of the bucket it falls in)."""
    h0, h1 = m0.get(name, {"buckets": {}, "sum": 0, "count": 0}), m1.get(name)
    if not h1:
        return None
    n = h1["count"] - h0["count"]
    if n <= 0:
        return {"count": 0}
    cum = sorted(((float(le), c - h0["buckets"].get(le, 0)) for le, c in h1["buckets"].items()))
    p50_le, _ = bucket_quantile(cum, n, 0.5)
    p99_le, p99_est = bucket_quantile(cum, n, 0.99)
    return {"count": n, "mean": (h1["sum"] - h0["sum"]) / n, "p50_le": p50_le, "p99_le": p99_le,
            "p99_est": p99_est}


def bucket_quantile(cum, n, x):
    """The upper bound of the bucket quantile x falls in, and the quantile estimated as Prometheus'
    histogram_quantile does: linear within that bucket (None in the +Inf bucket). cum: sorted
    (upper bound, cumulative count) of n observations."""
    lower, below = 0.0, 0
    for le, c in cum:
        if c >= x * n:
            if le == float("inf"):
                return le, None
            return le, lower + (le - lower) * ((x * n - below) / (c - below) if c > below else 1.0)
        lower, below = le, c
    return None, None


REQUEST_DURATION = "ortserve_request_duration_seconds"


def server_metrics(server, model):
    """ortserve's request-duration histogram for one load point, or None
    (no metrics port: not ortserve; a failed scrape costs only this figure)."""
    if not getattr(server, "metrics_port", None):
        return None
    try:
        return scrape_metrics(server.metrics_port, model, (REQUEST_DURATION,))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def stats_delta(s0, s1):
    if not s0 or not s1:
        return None
    batches = {}
    for bs, (c, ns) in s1["batches"].items():
        c0, ns0 = s0["batches"].get(bs, (0, 0))
        if c - c0 > 0:
            batches[bs] = {"executions": c - c0, "compute_infer_us": round((ns - ns0) / 1e3 / (c - c0), 1)}
    d = lambda k: (s1[k][0] - s0[k][0], s1[k][1] - s0[k][1])
    execs = s1["execution_count"] - s0["execution_count"]
    infs = s1["inference_count"] - s0["inference_count"]
    q, ci = d("queue"), d("compute_infer")
    return {"inferences": infs, "executions": execs,
            "avg_batch": round(infs / execs, 2) if execs else None,
            "avg_queue_us": round(q[1] / 1e3 / q[0], 1) if q[0] else None,
            # Triton's compute_infer adds the batch's duration once per
            # request in it: ns / count is the duration of one execution.
            "avg_compute_infer_us_per_execution": round(ci[1] / 1e3 / ci[0], 1) if ci[0] else None,
            "batch_sizes": dict(sorted(batches.items()))}


# --------------------------------------------------------------------------
# One load point

def measure(server, model, fn):
    """Runs fn() as one load point, with server CPU% and statistics deltas around it."""
    s0, m0 = get_stats(server.base, model), server_metrics(server, model)
    c0, t0 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    res = fn()
    c1, t1 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    s1, m1 = get_stats(server.base, model), server_metrics(server, model)
    if res is None:
        return None
    res["server_cpu_pct"] = round(100.0 * (c1 - c0) / (t1 - t0), 1)
    res["server_stats"] = stats_delta(s0, s1)
    # The server-side p99 (arrival to response ready) is at most the upper
    # edge of the bucket it falls in.
    d = histogram_delta(m0, m1, REQUEST_DURATION) if m0 and m1 else None
    p99_le, p99_est = (d or {}).get("p99_le"), (d or {}).get("p99_est")
    res["server_p99_upper_us"] = p99_le * 1e6 if p99_le not in (None, float("inf")) else None
    res["server_p99_est_us"] = p99_est * 1e6 if p99_est is not None else None
    return res


def log_point(r):
    st = r.get("server_stats") or {}
    log(f"   {r['throughput']:.0f} inf/s  p50 {r['p50_us']:.0f} us  p99 {r['p99_us']:.0f} us  "
        f"server cpu {r['server_cpu_pct']}%" + (f"  avg batch {st['avg_batch']}" if st.get("avg_batch") else ""))


def idle_cpu(server, seconds):
    time.sleep(1.0)
    c0, t0 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    time.sleep(seconds)
    c1, t1 = tree_cpu_seconds(server.proc.pid), time.monotonic()
    return round(100.0 * (c1 - c0) / (t1 - t0), 2)
