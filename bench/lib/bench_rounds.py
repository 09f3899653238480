"""Paired rounds: each target's pair measured again, back to back with both servers up, the order
flipping every round, so that a ratio does not carry the drift of a shared machine's load between
the sweep's phases."""
from pathlib import Path

from bench_common import RESULTS, log, manifest_repo, note
from bench_loads import run_inprocess
from bench_servers import FastApiBaseline, OrtServe, check_outputs, wait_ready
from bench_sweep import chosen_batch_sizes, closed_loop_point, tiny_static_server
from bench_targets import CNN_LOADS, MLP_LOADS


def paired_rounds(args, manifest, refs, out):
    """The target points again, args.target_rounds times, each pair measured back to back in
    alternating order with both servers up (idle when not measured): on two shared cores the
    machine's load drifts between the sweep's phases, and a ratio of two points taken minutes apart
    carries that drift. Pairs: tiny wrk JSON @32 ortserve/FastAPI/nginx (one group); cnn @4
    ortserve under each of CNN_LOADS and in-process at the batch sizes the sweep saw (one group: one
    in-process run serves both clients' ratios); mlp/mlp_nobatch @32 per load."""
    servers = {}
    if "ortserve" in args.contenders and Path(args.ortserve_bin).exists():
        servers["ortserve"] = OrtServe(Path(args.ortserve_bin), manifest_repo(manifest), args.thread_budget,
                                       args.http_thread_count, args.server_cpus, log_name="ortserve-rounds.log")
    if "fastapi" in args.contenders:
        servers["fastapi"] = FastApiBaseline(manifest_repo(manifest), args.fastapi_workers,
                                             max(1, args.thread_budget // args.fastapi_workers), args.server_cpus)
    if "ortserve" not in servers:
        return
    models = [m for m in ("tiny", "cnn", "mlp", "mlp_nobatch") if m in args.models]
    if "nginx" in args.contenders and "tiny" in models and args.wrk:
        nginx = tiny_static_server("nginx", manifest, refs, args)
        if nginx:  # answers tiny's request only: the output check leaves it tiny alone
            servers["nginx"] = nginx
    log(f"paired rounds: {args.target_rounds} x {models}")
    try:
        for name, server in servers.items():
            server.start()
        ready = {}
        for name, server in servers.items():
            ok, ready[name] = wait_ready(server.base, server.proc, models, args.ready_timeout)
            bad = [m for m in ready[name] if check_outputs(server.base, m, manifest[m], refs[m])]
            ready[name] = [m for m in ready[name] if m not in bad] if ok else []
        o = servers["ortserve"]
        grpc = args.pa and o.grpc_ready()  # the gRPC load is perf_analyzer's

        def usable(load, m):
            if load.startswith("wrk"):
                return args.wrk and (load != "wrk_bin" or "request_bin" in manifest[m])
            return args.pa and (load != "pa_grpc" or grpc)

        cnn_sizes = sorted({1} | set(chosen_batch_sizes(out, "cnn")))

        def back_to_back(rnd, label, *entries):
            """Runs a group's measurements (name, fn) back to back, the order reversed every round."""
            got = {name: fn() for name, fn in (entries if rnd % 2 == 0 else reversed(entries))}
            if None in got.values():
                note(f"paired round {rnd + 1}: {label} incomplete; round skipped for it")
                return None
            log(f"   round {rnd + 1} {label}: " + ", ".join(
                f"{k} {v['throughput'] if 'throughput' in v else v['results'][0]['inferences_per_s']:.0f} inf/s"
                for k, v in got.items()))
            return got

        def pt(srv, m, load, c):
            return lambda: closed_loop_point(srv, m, manifest[m], load, c, args)

        for rnd in range(args.target_rounds):
            rd = {"mlp": {}}
            tiny = [(name, pt(srv, "tiny", "wrk_json", 32)) for name, srv in servers.items()
                    if "tiny" in ready[name]]
            if args.wrk and "tiny" in ready["ortserve"] and len(tiny) > 1:
                rd["tiny"] = back_to_back(rnd, "tiny wrk_json @32", *tiny)
            cnn_loads = [x for x in CNN_LOADS if usable(x, "cnn")] if "cnn" in ready["ortserve"] else []
            if cnn_loads and "inprocess" in args.contenders:
                path = RESULTS / "inprocess_cnn_rounds.json"
                dur = min(args.inprocess_duration, args.duration)
                rd["cnn"] = back_to_back(rnd, f"cnn {'/'.join(cnn_loads)} @4",
                                         *[(x, pt(o, "cnn", x, 4)) for x in cnn_loads],
                                         ("inprocess", lambda: run_inprocess("cnn", cnn_sizes, dur, path, args)))
            if "mlp" in ready["ortserve"] and "mlp_nobatch" in ready["ortserve"]:
                for load in [x for x in MLP_LOADS if usable(x, "mlp")]:
                    rd["mlp"][load] = back_to_back(rnd, f"mlp {load} @32", ("on", pt(o, "mlp", load, 32)),
                                                   ("off", pt(o, "mlp_nobatch", load, 32)))
            rd["mlp"] = {k: v for k, v in rd["mlp"].items() if v}
            out.setdefault("rounds", []).append({k: v for k, v in rd.items() if v})
    finally:
        for server in servers.values():
            server.stop()
