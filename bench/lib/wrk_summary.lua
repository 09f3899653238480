-- The machine-readable summary line every wrk script of the bench prints
-- (bench_loads.parse_wrk_summary reads it): loaded with dofile by
-- wrk_post.lua and wrk_sequence.lua.
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
