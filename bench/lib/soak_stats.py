"""Aggregation of the soak's per-request records: percentiles by priority, per-second windows and
30 s spans of scheduled arrival time, the spans joined with the server's samples."""
import collections

import numpy as np

from soak_model import HIGH, LOW


def pct(a, q):
    return float(np.percentile(a, q)) if len(a) else None


def ms(v):
    return None if v is None else round(v * 1e3, 2)


def summarize(recs, seconds):
    lat = lambda p=None: np.array([r.lat for r in recs if r.code == 200 and (p is None or r.prio == p)])
    by = lambda p=None: [r for r in recs if p is None or r.prio == p]
    out = {}
    for key, p in (("all", None), ("high", HIGH), ("low", LOW)):
        rs, la = by(p), lat(p)
        n = len(rs)
        acc = sum(1 for r in rs if r.code == 200)
        rej = sum(1 for r in rs if r.code == 503)
        out[key] = {"sent": n, "accepted": acc, "rejected": rej, "errors": n - acc - rej,
                    "offered_per_s": round(n / seconds, 1), "accepted_per_s": round(acc / seconds, 1),
                    "rejected_pct": round(100.0 * rej / n, 2) if n else None,
                    "p50_ms": ms(pct(la, 50)), "p90_ms": ms(pct(la, 90)), "p99_ms": ms(pct(la, 99)),
                    "p999_ms": ms(pct(la, 99.9)), "max_ms": ms(float(la.max()) if len(la) else None)}
    lags = np.array([r.lag for r in recs])
    out["send_lag_ms"] = {"p50": ms(pct(lags, 50)), "p99": ms(pct(lags, 99)),
                          "max": ms(float(lags.max()) if len(lags) else None)}
    wl = np.array([r.wlag for r in recs])
    out["written_lag_ms"] = {"p50": ms(pct(wl, 50)), "p99": ms(pct(wl, 99)),
                             "max": ms(float(wl.max()) if len(wl) else None)}
    out["error_codes"] = dict(collections.Counter(r.code for r in recs if r.code not in (200, 503)))
    return out


def windows(recs, seconds):
    """Per 1 s window of scheduled arrival time."""
    buckets = [[] for _ in range(int(np.ceil(seconds)))]
    for r in recs:
        i = int(r.t_sched)
        if 0 <= i < len(buckets):
            buckets[i].append(r)
    rows = []
    for i, b in enumerate(buckets):
        row = {"t": i, "offered": len(b), "accepted": 0, "rejected": 0, "errors": 0}
        for key, p in (("all", None), ("high", HIGH), ("low", LOW)):
            la = np.array([r.lat for r in b if r.code == 200 and (p is None or r.prio == p)])
            sfx = "" if key == "all" else "_" + key
            row["p50_ms" + sfx] = ms(pct(la, 50))
            row["p99_ms" + sfx] = ms(pct(la, 99))
            if p is not None:
                pb = [r for r in b if r.prio == p]
                row["offered" + sfx] = len(pb)
                row["rejected" + sfx] = sum(1 for r in pb if r.code == 503)
        for r in b:
            if r.code == 200:
                row["accepted"] += 1
            elif r.code == 503:
                row["rejected"] += 1
            else:
                row["errors"] += 1
        row["lag_p99_ms"] = ms(pct(np.array([r.lag for r in b]), 99))
        row["written_lag_p99_ms"] = ms(pct(np.array([r.wlag for r in b]), 99))
        rows.append(row)
    return rows


def spans(recs, seconds, step=30):
    """Latency and counts per `step` s of scheduled arrival time."""
    rows = []
    for a in np.arange(0, seconds, step):
        b = min(seconds, a + step)
        rs = [r for r in recs if a <= r.t_sched < b]
        n_s = b - a
        row = {"from": int(a), "to": int(round(b)), "offered_per_s": len(rs) / n_s,
               "accepted_per_s": sum(1 for r in rs if r.code == 200) / n_s}
        for key, pr in (("", None), ("_high", HIGH), ("_low", LOW)):
            sel = [r for r in rs if pr is None or r.prio == pr]
            row["rejected_pct" + key] = (100 * sum(1 for r in sel if r.code == 503) / len(sel)) if sel else None
            row["p99_ms" + key] = ms(pct(np.array([r.lat for r in sel if r.code == 200]), 99))
        rows.append(row)
    return rows


def over_time(span_rows, srows):
    """spans() plus the server's RSS at the end of each span and its mean CPU."""
    for row in span_rows:
        sr = [r for r in srows if row["from"] < r["t"] <= row["to"]]
        row["rss_mib"] = sr[-1]["rss_mib"] if sr else None
        row["server_cpu_pct"] = float(np.mean([r["server_cpu_pct"] for r in sr])) if sr else None
        mc = [r["machine_cpu_pct"] for r in sr if r["machine_cpu_pct"] is not None]
        row["machine_cpu_pct"] = float(np.mean(mc)) if mc else None
    return span_rows
