-- wrk script: POST the same KServe v2 JSON body (read once from the file named
-- by WRK_BODY_FILE) on every request, and print a machine-readable summary.
-- Used by bench/run_bench.py for every contender so the bytes are identical.
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
  local p = function(q) return latency:percentile(q) end
  io.write(string.format(
    'WRK_JSON {"duration_us":%d,"requests":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"min":%d,"mean":%.1f,"stdev":%.1f,"max":%d,' ..
    '"p50":%d,"p75":%d,"p90":%d,"p95":%d,"p99":%d,"p999":%d}}\n',
    summary.duration, summary.requests, summary.bytes,
    summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout,
    latency.min, latency.mean, latency.stdev, latency.max,
    p(50), p(75), p(90), p(95), p(99), p(99.9)))
end
