"""The targets and their verdicts: the rows of each target (tiny: ortserve / FastAPI; cnn:
ortserve / in-process ORT at the server's batch mix; mlp: batching on / off and the p99 bound)
from the sweep's points or from the paired rounds (the median round), the idle cost, and how a
ratio is printed."""
import re


def point(out, contender, model, load, conc):
    pts = out.get(contender, {}).get("models", {}).get(model, {}).get(load, {}).get("concurrency", [])
    return next((p for p in pts if p["concurrency"] == conc), None)


def limit_at_mix(inproc, mix):
    """Inferences/s of back-to-back ORT (an in-process run's JSON) at the server's batch-size mix
    {batch size: executions}."""
    if not inproc:
        return None
    per = {x["batch_size"]: x for x in inproc["results"]}
    num = den = 0.0
    for bs, n in mix.items():
        if bs in per:
            num += n * bs
            den += n * bs / per[bs]["inferences_per_s"]
    return num / den if den else None


# Target rows: (target, measured, ratio, goal, detail); GOALS says when a ratio meets its goal.
GOALS = {">= 25x": lambda r: r >= 25, ">= 0.75x": lambda r: r >= 0.75, "< 1x": lambda r: r < 1,
         ">= 0.97x": lambda r: r >= 0.97, ">= 0.9x": lambda r: r >= 0.9, ">= 2x": lambda r: r >= 2,
         "<= 1x": lambda r: r <= 1}
TINY_TARGET = "tiny JSON @32: ortserve / FastAPI throughput"
NGINX_TARGET = "tiny JSON @32: ortserve / nginx static answer throughput"
CNN_TARGET = "cnn @4: ortserve / in-process ORT"
# The lightest client first: on two shared cores a client's own CPU is taken from the server.
CNN_LOADS = ("wrk_bin", "pa_http", "pa_grpc", "wrk_json")
# Issue 41: binary tensors (HTTP or gRPC) at least 0.97x in-process ORT; a JSON body, whose
# decoding is work in-process ORT never does, at least 0.9x.
CNN_GOALS = {"wrk_bin": ">= 0.97x", "pa_http": ">= 0.97x", "pa_grpc": ">= 0.97x", "wrk_json": ">= 0.9x"}
MLP_LOADS = ("pa_http", "pa_grpc", "wrk_json", "wrk_bin")


def tiny_rows(o, f, floor):
    """ortserve vs FastAPI, tiny model, wrk JSON @32: >= 25x throughput (issue 41), lower p99.
    `floor`: the no-op server's sweep point on the same load (None when not measured), for scale."""
    return [(TINY_TARGET, f"{o['throughput']:.0f} vs {f['throughput']:.0f} inf/s",
             o["throughput"] / f["throughput"], ">= 25x",
             f"server CPU ortserve {o['server_cpu_pct']:.0f}%, FastAPI {f['server_cpu_pct']:.0f}%"
             + (f"; no-op HTTP server on this load (sweep): {floor['throughput']:.0f} inf/s = "
                f"{floor['throughput'] / f['throughput']:.1f}x this FastAPI figure" if floor else "")),
            ("tiny JSON @32: ortserve p99 < FastAPI p99", f"{o['p99_us']:.0f} vs {f['p99_us']:.0f} us",
             o["p99_us"] / f["p99_us"], "< 1x", "")]


def nginx_rows(o, n, floor):
    """ortserve vs nginx answering every request with the same bytes, tiny model, wrk JSON @32:
    >= 0.75x throughput (issue 41)."""
    return [(NGINX_TARGET, f"{o['throughput']:.0f} vs {n['throughput']:.0f} inf/s",
             o["throughput"] / n["throughput"], ">= 0.75x",
             f"server CPU ortserve {o['server_cpu_pct']:.0f}%, nginx {n['server_cpu_pct']:.0f}%"
             + (f"; no-op HTTP server on this load (sweep): {floor['throughput']:.0f} inf/s" if floor else ""))]


def cnn_rows(load, o, inproc, cores=None):
    """ortserve cnn @4 under `load` vs back-to-back ORT at the batch sizes the batcher ran (its mix of
    executions). With the machine's `cores`, the detail names the ceiling the client leaves: in-process
    ORT has every core, a server shares them with its client, so a server costing nothing reaches at
    most 1 - the client's share of the machine."""
    mix = {int(k): v["executions"] for k, v in ((o.get("server_stats") or {}).get("batch_sizes") or {}).items()} or {1: 1}
    lim, lim1 = limit_at_mix(inproc, mix), limit_at_mix(inproc, {1: 1})
    if not lim:
        return []
    return [(f"cnn @4 ({load}): ortserve / in-process ORT", f"{o['throughput']:.1f} vs {lim:.1f} inf/s",
             o["throughput"] / lim, CNN_GOALS[load],
             "; ".join(x for x in (f"batch mix {mix}",
                                   f"in-process batch-1 limit {lim1:.1f} inf/s" if lim1 else "",
                                   client_cpu_str(o), client_ceiling_str(o, cores)) if x))]


def client_ceiling_str(r, cores):
    cpu = r.get("client_cpu_pct")
    if cpu is None or not cores:
        return ""
    return f"the client's share of the {cores} cores caps any server at {1 - cpu / (100 * cores):.3f}x"


def client_cpu_str(r):
    return f"client CPU {r['client_cpu_pct']:.0f}% of one core" if r.get("client_cpu_pct") is not None else ""


def mlp_rows(load, on, off, manifest, ceiling):
    """mlp @32, batching on vs off: >= 2x throughput; p99 <= max_queue_delay + 2x the batch compute."""
    rows = [(f"mlp @32 ({load}): batching on / off throughput",
             f"{on['throughput']:.0f} vs {off['throughput']:.0f} inf/s", on["throughput"] / off["throughput"],
             ">= 2x", "; ".join(x for x in (f"the same client on tiny @32: {ceiling['throughput']:.0f} inf/s"
                                            if ceiling else "", client_cpu_str(on)) if x))]
    comp = (on.get("server_stats") or {}).get("avg_compute_infer_us_per_execution")
    if comp is not None:
        bound = manifest["mlp"]["max_queue_delay_us"] + 2 * comp
        rows.append((f"mlp @32 ({load}): p99 <= max_queue_delay + 2x batch compute",
                     f"p99 {on['p99_us']:.0f} us, bound {bound:.0f} us", on["p99_us"] / bound, "<= 1x",
                     f"avg batch {on['server_stats']['avg_batch']}, compute {comp} us/batch"
                     + (f"; server-side p99 (arrival to response ready) <= {on['server_p99_upper_us']:.0f} us"
                        if on.get("server_p99_upper_us") else "")
                     + (f", about {on['server_p99_est_us']:.0f} us interpolated in that bucket"
                        if on.get("server_p99_est_us") else "")))
    return rows


def machine_cores(out):
    return out.get("meta", {}).get("machine", {}).get("cores")


def sweep_rows(out, manifest):
    """The target rows from the sweep's points (each contender measured in its own phase)."""
    rows = []
    o, f = point(out, "ortserve", "tiny", "wrk_json", 32), point(out, "fastapi", "tiny", "wrk_json", 32)
    n, floor = point(out, "nginx", "tiny", "wrk_json", 32), point(out, "http_floor", "tiny", "wrk_json", 32)
    if o and f:
        rows += tiny_rows(o, f, floor)
    if o and n:
        rows += nginx_rows(o, n, floor)
    for load in CNN_LOADS:
        o = point(out, "ortserve", "cnn", load, 4)
        if o:
            rows += cnn_rows(load, o, out.get("inprocess", {}).get("models", {}).get("cnn"), machine_cores(out))
    for load in MLP_LOADS:
        on, off = point(out, "ortserve", "mlp", load, 32), point(out, "ortserve", "mlp_nobatch", load, 32)
        if on and off:
            rows += mlp_rows(load, on, off, manifest, point(out, "ortserve", "tiny", load, 32))
    return rows


def rounds_rows(out, manifest):
    """The target rows of each paired round (see paired_rounds), one list per round; a client's
    ceiling for the mlp rows is the sweep's tiny @32 point."""
    per_round = []
    for rd in out.get("rounds") or []:
        rows = []
        tiny, floor = rd.get("tiny") or {}, point(out, "http_floor", "tiny", "wrk_json", 32)
        if "fastapi" in tiny:
            rows += tiny_rows(tiny["ortserve"], tiny["fastapi"], floor)
        if "nginx" in tiny:
            rows += nginx_rows(tiny["ortserve"], tiny["nginx"], floor)
        for load in CNN_LOADS if rd.get("cnn") else ():
            # Runs before the wrk binary load kept perf_analyzer's point under "ortserve".
            o = rd["cnn"].get(load) or (rd["cnn"].get("ortserve") if load == "pa_http" else None)
            if o:
                rows += cnn_rows(load, o, rd["cnn"]["inprocess"], machine_cores(out))
        for load, pair in rd.get("mlp", {}).items():
            rows += mlp_rows(load, pair["on"], pair["off"], manifest, point(out, "ortserve", "tiny", load, 32))
        per_round.append(rows)
    return per_round


def median_rows(per_round):
    """Per target, the round with the median ratio (the lower middle one for an even count), its
    figures labelled with the spread of the ratio over the rounds."""
    by_target = {}
    # The complete rounds first: their order is the targets' order.
    for rows in sorted(per_round, key=len, reverse=True):
        for row in rows:
            by_target.setdefault(row[0], []).append(row)
    out = []
    for name, rows in by_target.items():
        rows = sorted(rows, key=lambda r: r[2])
        mid = rows[(len(rows) - 1) // 2]
        spread = (f"median of {len(rows)} rounds (ratio {fmt_ratio(rows[0][2], mid[3])} to "
                  f"{fmt_ratio(rows[-1][2], mid[3])})" if len(rows) > 1
                  else "1 round")
        out.append((name, f"{mid[1]}, {spread}", mid[2], mid[3], mid[4]))
    return out


def compute_targets(out, manifest):
    """Verdicts on the paired rounds when the run has them (the sweep's figure in the detail), else on
    the sweep's points; then the idle cost."""
    sweep = sweep_rows(out, manifest)
    rounds = out.get("rounds") or []
    rows = median_rows(rounds_rows(out, manifest)) if rounds else sweep
    if rounds:
        at_sweep = {r[0]: r for r in sweep}
        def with_sweep_point(r):
            s = at_sweep[r[0]]
            return r[:4] + ("; ".join(x for x in (r[4], f"sweep point: {s[1]} = {fmt_ratio(s[2], r[3])}") if x),)
        rows = [with_sweep_point(r) if r[0] in at_sweep else r for r in rows]
    t = [{"target": name, "measured": measured, "ratio": ratio, "goal": goal,
          "verdict": "PASS" if GOALS[goal](ratio) else "MISS", "detail": detail}
         for name, measured, ratio, goal, detail in rows]
    for name, goal in ((TINY_TARGET, ">= 25x"), (NGINX_TARGET, ">= 0.75x"), (CNN_TARGET, ">= 0.97x"),
                       ("mlp @32: batching on / off throughput", ">= 2x")):
        # A target measured per load names it: "cnn @4 (wrk_bin): ..." for CNN_TARGET.
        if not any(x["target"] == name or x["target"].startswith(name.split(":")[0] + " (") for x in t):
            t.append({"target": name, "measured": "missing data", "ratio": None, "goal": goal,
                      "verdict": "N/A", "detail": ""})

    # idle cost: < 2% of one core with no traffic for 10 s.
    for key in ("idle_cpu_pct_after_start", "idle_cpu_pct_after_load"):
        v = out.get("ortserve", {}).get(key)
        t.append({"target": f"ortserve idle CPU ({key.replace('idle_cpu_pct_', '').replace('_', ' ')})",
                  "measured": "missing data" if v is None else f"{v}% of one core", "ratio": v, "goal": "< 2%",
                  "verdict": "N/A" if v is None else ("PASS" if v < 2 else "MISS"), "detail": ""})
    return t


def fmt(v, nd=0):
    if v is None:
        return "–"
    return f"{v:,.{nd}f}"


def fmt_ratio(ratio, goal):
    """A ratio measured against a goal, as every table and detail prints it: two decimals, more where
    two would print the goal's own figure (0.9495 against >= 0.95x reads 0.9495, not 0.95 next to a
    MISS)."""
    bound = float(re.search(r"[0-9.]+", goal).group())
    nd = 2
    while nd < 6 and ratio != bound and round(ratio, nd) == bound:
        nd += 1
    return fmt(ratio, nd)
