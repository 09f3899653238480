"""RESULTS-sequences.md from sequence_bench.py's points: one table per stream
count, the batching ratio per stream count, and how the run was taken.

A point is a dict: contender (one of CONTENDERS), streams, chunks (answered),
wall_s, latencies_us (one per chunk, client-side) or p50_us/p99_us (and then
throughput, as perf_analyzer reports them), and for
ortserve executions, inferences, server_cpu_pct, client_cpu_pct. Pure
functions: tests/integration/test_bench_tools.py checks them on made-up
points."""
from __future__ import annotations

import math

# In table order: what each contender is, for the report.
CONTENDERS = {
    "oldest": "ortserve, oldest strategy: up to 64 sequences batched per execution",
    "one_per_execution": "ortserve, oldest strategy with max_batch_size 1: one sequence per execution",
    "direct_one_slot": "ortserve, the package's file unchanged (max_batch_size 0, direct, one slot)",
    "oldest_wrk": "as oldest, with wrk (HTTP, binary tensors, one connection per stream) as the client",
    "one_per_execution_wrk": "as one_per_execution, with wrk as the client",
    "oldest_pa": "as oldest, with perf_analyzer (C++, gRPC, async, 2 threads, random audio) as the client",
    "one_per_execution_pa": "as one_per_execution, with perf_analyzer as the client",
    "inprocess_sequential": "onnxruntime in process: the streams one after another, the state threaded by hand",
    "inprocess_lockstep": "onnxruntime in process: all streams' chunk k in one batch (the batching ceiling)",
}


# (batched contender, one-per-execution contender, the client both were measured with).
PAIRS = [("oldest", "one_per_execution", "tritonclient.grpc.aio"),
         ("oldest_wrk", "one_per_execution_wrk", "wrk"),
         ("oldest_pa", "one_per_execution_pa", "perf_analyzer")]


def percentile(values, q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(point: dict) -> dict:
    """Throughput, p50/p99 per chunk and mean batch of one point."""
    s = dict(point)
    lat = s.pop("latencies_us", None)
    if lat is not None:
        s["p50_us"], s["p99_us"] = percentile(lat, 50), percentile(lat, 99)
    if "throughput" not in s:  # perf_analyzer's points bring their own
        s["throughput"] = s["chunks"] / s["wall_s"] if s.get("wall_s") else float("nan")
    if s.get("executions"):
        s["mean_batch"] = s["inferences"] / s["executions"]
    return s


def batching_ratios(points: list, batched: str = "oldest", single: str = "one_per_execution") -> dict:
    """streams -> throughput of `batched` over `single`, where both ran."""
    by = {(p["contender"], p["streams"]): p for p in points}
    ratios = {}
    for (contender, streams), p in sorted(by.items(), key=lambda kv: kv[0][1]):
        other = by.get((single, streams))
        if contender == batched and other and other["throughput"] > 0:
            ratios[streams] = p["throughput"] / other["throughput"]
    return ratios


def _ms(us) -> str:
    return "—" if us is None or (isinstance(us, float) and math.isnan(us)) else f"{us / 1000:.2f}"


def _num(v, digits=0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}"


def table(points: list, streams: int) -> list:
    rows = [p for p in points if p["streams"] == streams]
    rows.sort(key=lambda p: list(CONTENDERS).index(p["contender"]))
    lines = [f"### {streams} concurrent stream{'s' if streams != 1 else ''}", "",
             "| contender | chunks/s | p50 ms | p99 ms | mean batch | server CPU % | client CPU % |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for p in rows:
        lines.append(f"| {p['contender']} | {_num(p['throughput'])} | {_ms(p.get('p50_us'))} | "
                     f"{_ms(p.get('p99_us'))} | {_num(p.get('mean_batch'), 2)} | "
                     f"{_num(p.get('server_cpu_pct'))} | {_num(p.get('client_cpu_pct'))} |")
    return lines + [""]


def render(run: dict) -> str:
    """The whole RESULTS-sequences.md for `run` (see sequence_bench.py's main)."""
    points = [summarize(p) for p in run["points"]]
    lines = ["# Sequences: Silero VAD streams, batched or not", ""]
    if run.get("dry_run"):
        lines += ["**Dry run: the numbers below are made up by `--dry-run` to check this report, not measured.**", ""]
    lines += [f"Commit {run.get('commit', '?')}, {run.get('machine', {}).get('cpu', '?')} "
              f"({run.get('machine', {}).get('cores', '?')} cores), thread budget {run.get('thread_budget', '?')}, "
              f"{run.get('chunks_per_stream', '?')} chunks of {run.get('chunk_samples', 512)} samples per stream "
              f"(each chunk one request), every stream a sequence that waits for each answer before sending "
              f"its next chunk.", ""]
    for batched, single, client in PAIRS:
        ratios = batching_ratios(points, batched, single)
        if ratios:
            lines += [f"Throughput of the oldest strategy over one sequence per execution ({client}): " +
                      ", ".join(f"{r:.2f}x at {n} stream{'s' if n != 1 else ''}" for n, r in ratios.items()) +
                      ".", ""]
    lines += ["| contender | what |", "|---|---|"]
    lines += [f"| {name} | {what} |" for name, what in CONTENDERS.items()]
    lines += [""]
    for streams in sorted({p["streams"] for p in points}):
        lines += table(points, streams)
    lines += ["p50/p99 are per chunk, from the client's send to its answer (in process: one run, or the run of "
              "the batch the chunk was in). mean batch = inferences / executions from the model's statistics. "
              "CPU % is of one core over the point (server CPU in process: the process running the model); client "
              "and server share the machine's cores.", ""]
    if run.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in run["notes"]] + [""]
    if run.get("commands"):
        lines += ["## Commands", "", "```"] + run["commands"] + ["```", ""]
    return "\n".join(lines)
