-- wrk script: POST the same KServe v2 request body (read once from the file
-- named by WRK_BODY_FILE) on every request, and print a machine-readable
-- summary. Used by bench/run_bench.py for every contender so the bytes are
-- identical. With WRK_INFERENCE_HEADER_LENGTH set, the body is a binary-tensor
-- request (a JSON header of that many bytes, then raw tensor data), sent with
-- the Inference-Header-Content-Length header of Triton's binary extension.
local f = assert(io.open(os.getenv("WRK_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
local header_length = os.getenv("WRK_INFERENCE_HEADER_LENGTH")
if header_length then
  wrk.headers["Inference-Header-Content-Length"] = header_length
  wrk.headers["Content-Type"] = "application/octet-stream"
else
  wrk.headers["Content-Type"] = "application/json"
end

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
