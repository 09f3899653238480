"""bench/results/soak.png: offered, accepted and rejected per second, the rejected share and the
p99 of the accepted by priority, server RSS and CPU over the whole run."""
import os

from soak_model import MODEL


def plot(out, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    w, s = out["overload"]["windows"], out["samples"]
    fig, axes = plt.subplots(4, 1, figsize=(10, 12), sharex=True)
    t = [r["t"] + 0.5 for r in w]
    ax = axes[0]
    ax.plot(t, [r["offered"] for r in w], label="offered")
    ax.plot(t, [r["accepted"] for r in w], label="accepted (200)")
    ax.plot(t, [r["rejected"] for r in w], label="rejected (503)")
    ax.axhline(out["capacity"]["rate_per_s"], color="grey", ls="--", lw=1, label="capacity (closed loop)")
    ax.set_ylabel("requests / s")
    ax.set_title(f"ortserve overload at {out['overload']['target_rate_per_s']:.0f} req/s "
                 f"({out['args']['multiplier']:g}x capacity), model {MODEL}")
    ax.legend(fontsize=8, loc="center right")
    ax = axes[1]
    for key, lab in (("", "all"), ("_high", "high (priority 1)"), ("_low", "low (priority 2)")):
        if key:
            ax.plot(t, [100 * r["rejected" + key] / r["offered" + key] if r["offered" + key] else None
                        for r in w], label=lab)
        else:
            ax.plot(t, [100 * r["rejected"] / r["offered"] if r["offered"] else None for r in w], label=lab)
    ax.set_ylabel("rejected (%)")
    ax.set_ylim(-2, 102)
    ax.legend(fontsize=8)
    ax = axes[2]
    for key, lab in (("", "all accepted"), ("_high", "high (priority 1)"), ("_low", "low (priority 2)")):
        ax.plot(t, [r["p99_ms" + key] for r in w], label=lab)
    ax.set_ylabel("p99 latency of accepted (ms)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax = axes[3]
    ts = [r["t"] for r in s]
    ax.plot(ts, [r["rss_mib"] for r in s], color="tab:purple", label="server RSS")
    ax.set_ylabel("server RSS (MiB)")
    hi = max((r["rss_mib"] for r in s if r["rss_mib"] is not None), default=0)
    ax.set_ylim(0, hi * 1.15 + 1)
    ax.axvspan(min(ts), 0, color="grey", alpha=0.12, label="start-up + capacity phase")
    ax.axvspan(out["overload"]["seconds"], max(ts), color="green", alpha=0.08, label="after the load")
    ax2 = ax.twinx()
    ax2.plot(ts, [r["server_cpu_pct"] for r in s], color="tab:orange", lw=0.8, alpha=0.7, label="server CPU %")
    ax2.plot(ts, [r["machine_cpu_pct"] for r in s], color="tab:grey", lw=0.8, alpha=0.7, label="machine CPU %")
    ax2.set_ylabel("CPU % (100 = one core)")
    ax2.set_ylim(0, 100 * (os.cpu_count() or 1) * 1.1)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower right")
    ax.set_xlabel("seconds since the start of the overload")
    for a in axes:
        a.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
