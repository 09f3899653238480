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

dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "wrk_summary.lua")
