"""The plots of a run (bench/results/*.png), per model: throughput against concurrency, with the
in-process limit's lines, and p99 latency against throughput, closed loop and Poisson rate."""
from bench_common import RESULTS

CONTENDER_LINES = [  # (contender, load, label, style, colour)
    ("ortserve", "pa_http", "ortserve HTTP binary (perf_analyzer)", "-o", "tab:blue"),
    ("ortserve", "pa_grpc", "ortserve gRPC (perf_analyzer)", "-v", "tab:purple"),
    ("ortserve", "wrk_json", "ortserve HTTP JSON (wrk)", "-s", "tab:green"),
    ("ortserve", "wrk_bin", "ortserve HTTP binary (wrk)", "-D", "tab:cyan"),
    ("fastapi", "pa_http", "FastAPI HTTP binary (perf_analyzer)", "--o", "tab:orange"),
    ("fastapi", "wrk_json", "FastAPI HTTP JSON (wrk)", "--s", "tab:red"),
    ("http_floor", "wrk_json", "http_floor HTTP JSON (wrk), a no-op server", ":^", "tab:gray"),
    ("nginx", "wrk_json", "nginx HTTP JSON (wrk), a static answer", ":x", "tab:brown"),
]


def plot(out, models):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []
    for m in models:
        series = []
        for cont, load, label, style, colour in CONTENDER_LINES:
            pts = out.get(cont, {}).get("models", {}).get(m, {}).get(load, {})
            if pts and pts.get("concurrency"):
                series.append((label, style, colour, pts))
        if not series:
            continue
        p1 = throughput_figure(plt, out, m, series)
        p2 = p99_figure(plt, m, series)
        files += [p1, p2]
    return files


def throughput_figure(plt, out, m, series):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for label, style, colour, pts in series:
        c = pts["concurrency"]
        ax.plot([p["concurrency"] for p in c], [p["throughput"] for p in c], style, color=colour, label=label)
    ip = out.get("inprocess", {}).get("models", {}).get(m)
    if ip:
        for x in ip["results"]:
            ax.axhline(x["inferences_per_s"], ls=":", lw=1, color="gray")
            ax.annotate(f"in-process ORT, batch {x['batch_size']}", (1, x["inferences_per_s"]),
                        fontsize=7, color="gray", va="bottom")
    ax.set_xscale("log", base=2)
    concs = sorted({p["concurrency"] for _l, _s, _c, pts in series for p in pts["concurrency"]})
    ax.set_xticks(concs, [str(c) for c in concs])
    ax.set_yscale("log")
    ax.set_xlabel("concurrency (outstanding requests / connections)")
    ax.set_ylabel("inferences / s")
    ax.set_title(f"{m}: throughput vs concurrency")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    p1 = RESULTS / f"{m}_throughput_vs_concurrency.png"
    fig.savefig(p1, dpi=110)
    plt.close(fig)
    return p1


def p99_figure(plt, m, series):
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for label, style, colour, pts in series:
        c = sorted(pts["concurrency"], key=lambda p: p["throughput"])
        ax.plot([p["throughput"] for p in c], [p["p99_us"] / 1e3 for p in c], style, color=colour,
                label=label + ", closed loop")
        r = sorted(pts.get("rate", []), key=lambda p: p["throughput"])
        if r:
            ax.plot([p["throughput"] for p in r], [p["p99_us"] / 1e3 for p in r], ":x", color=colour,
                    label=label + ", Poisson request rate")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("inferences / s")
    ax.set_ylabel("p99 latency (ms)")
    ax.set_title(f"{m}: p99 latency vs throughput")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    p2 = RESULTS / f"{m}_p99_vs_throughput.png"
    fig.savefig(p2, dpi=110)
    plt.close(fig)
    return p2
