"""The sweep: each contender in its own phase, every load at every concurrency (and a Poisson
request-rate sweep at fractions of its own peak), the idle cost before and after; the transport
floor and nginx's static answer on tiny; the in-process limit at the batch sizes ortserve's batcher
chose."""
from bench_common import LOGS, RESULTS, WORK, bench_tool, log, note
from bench_loads import run_inprocess, run_perf_analyzer, run_wrk
from bench_measure import idle_cpu, log_point, measure
from bench_procs import log_tail
from bench_servers import (FastApiBaseline, HttpFloor, NginxStatic, OrtServe, check_outputs, nginx_binary,
                           start_checked, tiny_static_body, wait_ready)


def closed_loop_point(server, model, spec, load, conc, args):
    """One measured point: `conc` requests in flight from `load` (pa_http, pa_grpc, wrk_json or
    wrk_bin)."""
    if load in ("wrk_json", "wrk_bin"):
        body, header = ((spec["request_bin"], spec["request_bin_header_bytes"]) if load == "wrk_bin"
                        else (spec["request_json"], None))
        fn = lambda: run_wrk(f"{server.base}/v2/models/{model}/infer", body, conc,
                             args.duration, args.client_threads, args.client_cpus, header)
    else:
        url = f"127.0.0.1:{server.grpc_port if load == 'pa_grpc' else server.port}"
        fn = lambda: run_perf_analyzer(url, model, spec, "concurrency", conc, args.pa_window_ms,
                                       "grpc" if load == "pa_grpc" else "http", args.client_cpus)
    r = measure(server, model, fn)
    if r:
        r["concurrency"] = conc
    return r


def concurrency_sweep(server, model, spec, load, points, args):
    """One closed-loop point per --concurrency value, appended to points["concurrency"]."""
    for c in args.concurrency:
        log(f"{server.name}/{model} {load} c={c}")
        r = closed_loop_point(server, model, spec, load, c, args)
        if r:
            points["concurrency"].append(r)
            log_point(r)


def bench_server(server, models, manifest, refs, args, out):
    """Starts one server, runs every load point on every model, stops it."""
    log(f"starting {server.name}")
    server.start()
    try:
        ok, ready = wait_ready(server.base, server.proc, models, args.ready_timeout)
        if not ok:
            note(f"{server.name}: not ready within {args.ready_timeout} s or exited "
                 f"(rc {server.proc.poll()}); skipped. Log tail:\n{log_tail(LOGS / (server.name + '.log'))}")
            return
        for m in models:
            if m not in ready:
                note(f"{server.name}: model {m} not ready; skipped")
        res = out.setdefault(server.name, {"models": {}})
        res["idle_cpu_pct_after_start"] = idle_cpu(server, args.idle_seconds)
        log(f"{server.name}: idle CPU after start {res['idle_cpu_pct_after_start']}% of one core")
        loads = server_loads(server, args)
        for m in ready:
            if isinstance(server, FastApiBaseline) and m == "mlp_nobatch":
                continue  # identical to mlp without a batcher
            spec = manifest[m]
            err = check_outputs(server.base, m, spec, refs[m])
            if err:
                note(f"{server.name}/{m}: {err}; model skipped")
                continue
            mres = res["models"].setdefault(m, {})
            for key, _label in loads:
                if key == "wrk_bin" and "request_bin" not in spec:
                    note(f"{server.name}/{m}: no binary request in the manifest (rerun make_bench_models.py); "
                         "wrk binary load skipped")
                    continue
                points = mres.setdefault(key, {"concurrency": [], "rate": []})
                concurrency_sweep(server, m, spec, key, points, args)
                if key == "pa_http" and args.rate_fractions and points["concurrency"]:
                    rate_sweep(server, m, spec, key, points, args)
        res["idle_cpu_pct_after_load"] = idle_cpu(server, args.idle_seconds)
        log(f"{server.name}: idle CPU after load {res['idle_cpu_pct_after_load']}% of one core")
    finally:
        server.stop()
        log(f"stopped {server.name}")


def server_loads(server, args):
    """The loads a server gets: (key, label); ortserve's gRPC load only when its gRPC front end
    answers (noted when not)."""
    loads = [("pa_http", "perf_analyzer HTTP binary")] if args.pa else []
    if args.wrk:
        loads.append(("wrk_json", "wrk JSON"))
    grpc = isinstance(server, OrtServe) and args.pa and server.grpc_ready()
    if isinstance(server, OrtServe):
        if args.wrk:
            loads.append(("wrk_bin", "wrk HTTP binary"))
        if grpc:
            loads.append(("pa_grpc", "perf_analyzer gRPC"))
        else:
            note(f"ortserve: gRPC front end not answering on port {server.grpc_port} — gRPC load skipped "
                 "(hook: OrtServe.grpc_ready / pa_grpc)")
    return loads


def rate_sweep(server, m, spec, key, points, args):
    """perf_analyzer's Poisson request rate at each --rate-fractions of the closed loop's peak,
    appended to points["rate"]."""
    peak = max(p["throughput"] for p in points["concurrency"])
    url = f"127.0.0.1:{server.port}"
    for frac in args.rate_fractions:
        rate = max(1.0, peak * frac)
        log(f"{server.name}/{m} {key} rate={rate:.0f}/s ({frac:.0%} of peak)")
        r = measure(server, m, lambda: run_perf_analyzer(url, m, spec, "rate", rate,
                                                         args.pa_window_ms, "http", args.client_cpus))
        if r:
            r["fraction_of_peak"] = frac
            points["rate"].append(r)
            log_point(r)


def tiny_static_server(kind, manifest, refs, args):
    """A server of fixed answers on the tiny model's load, each answering every request with its
    reference response: `http_floor` (ortserve_http_floor, a no-op server: no server answering the
    same requests with the same bytes beats it on this machine) or `nginx` (NginxStatic, given the
    thread budget's workers). None, noted, when its program is missing."""
    if kind == "http_floor":
        binary = bench_tool(args, "ortserve_http_floor")
        if not binary.exists():
            note(f"{binary} not built (make build): the tiny model's transport floor is not measured")
            return None
        return HttpFloor(binary, tiny_static_body(manifest["tiny"], refs["tiny"]), args.server_cpus)
    binary = nginx_binary()
    if binary is None:
        note("nginx not installed (make bench-deps): the tiny model's nginx comparison is not measured")
        return None
    return NginxStatic(binary, tiny_static_body(manifest["tiny"], refs["tiny"]),
                       args.nginx_workers or args.thread_budget, args.server_cpus)


def bench_static(kind, manifest, refs, args, out):
    """A fixed-answer server (tiny_static_server) on the tiny model's wrk JSON load, at every
    concurrency."""
    if "tiny" not in args.models or not args.wrk:
        return
    server = tiny_static_server(kind, manifest, refs, args)
    if server is None:
        return
    log(f"starting {server.name}")
    err = start_checked(server, manifest["tiny"], refs["tiny"], args.ready_timeout)
    if err:
        note(f"{server.name}: {err}; skipped. Log tail:\n{log_tail(LOGS / (server.name + '.log'))}")
        return
    try:
        points = (out.setdefault(server.name, {"models": {}})["models"].setdefault("tiny", {})
                  .setdefault("wrk_json", {"concurrency": [], "rate": []}))
        concurrency_sweep(server, "tiny", manifest["tiny"], "wrk_json", points, args)
    finally:
        server.stop()
        log(f"stopped {server.name}")


def chosen_batch_sizes(out, model):
    """Batch sizes ortserve's batcher ran for a model (>= 5% of executions at any point of any load)."""
    sizes = set()
    loads = out.get("ortserve", {}).get("models", {}).get(model, {}).values()
    for p in (p for load in loads if isinstance(load, dict) for p in load.get("concurrency", [])):
        st = p.get("server_stats") or {}
        total = sum(b["executions"] for b in st.get("batch_sizes", {}).values())
        for bs, b in st.get("batch_sizes", {}).items():
            if total and b["executions"] / total >= 0.05:
                sizes.add(int(bs))
    return sorted(sizes)


def bench_inprocess(models, manifest, args, out):
    res = out.setdefault("inprocess", {"models": {}})
    for m in models:
        sizes = sorted({1} | set(chosen_batch_sizes(out, m)))
        if manifest[m]["max_batch_size"] == 0:
            sizes = [1]
        log(f"inprocess/{m}: batch sizes {sizes}")
        r = run_inprocess(m, sizes, args.inprocess_duration, RESULTS / f"inprocess_{m}.json", args)
        if r:
            res["models"][m] = r
