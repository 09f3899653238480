-- wrk script: streams of a sequence-batched model. Run it with as many
-- connections as threads (-t N -c N): each thread's one connection is one
-- stream, a closed loop that sends sequences of WRK_SEQUENCE_LENGTH
-- requests one after another (sequence_start on the first, sequence_end on
-- the last, then the next sequence id), each request after the answer to the
-- one before. Every request is a binary-tensor request (Triton's binary
-- extension) of one input: the model input WRK_INPUT_NAME, FP32 [1, n], its
-- data the bytes of WRK_CHUNK_FILE; the output WRK_OUTPUT_NAME comes back as
-- binary. Sequence ids start at WRK_FIRST_SEQUENCE_ID + thread * 1000000.
local length = tonumber(os.getenv("WRK_SEQUENCE_LENGTH") or "64")
local first_id = tonumber(os.getenv("WRK_FIRST_SEQUENCE_ID") or "1")
local input_name = os.getenv("WRK_INPUT_NAME") or "input"
local output_name = os.getenv("WRK_OUTPUT_NAME") or "output"

local threads_started = 0
function setup(thread)
  thread:set("thread_number", threads_started)
  threads_started = threads_started + 1
end

local data, sent, sequence_id
function init(args)
  local f = assert(io.open(os.getenv("WRK_CHUNK_FILE"), "rb"))
  data = f:read("*a")
  f:close()
  sent = 0
  sequence_id = first_id + thread_number * 1000000
end

-- The request for the current position; it changes nothing, because wrk
-- also builds one request to check the script, and sends only the others.
function request()
  local n = sent % length
  local header = string.format(
    '{"inputs":[{"name":"%s","shape":[1,%d],"datatype":"FP32","parameters":{"binary_data_size":%d}}],' ..
    '"outputs":[{"name":"%s","parameters":{"binary_data":true}}],' ..
    '"parameters":{"sequence_id":%d,"sequence_start":%s,"sequence_end":%s}}',
    input_name, #data / 4, #data, output_name, sequence_id,
    n == 0 and "true" or "false", n == length - 1 and "true" or "false")
  return wrk.format("POST", nil, {["Inference-Header-Content-Length"] = tostring(#header),
                                  ["Content-Type"] = "application/octet-stream"}, header .. data)
end

-- A request was answered: the stream moves on (the next sequence after the last chunk).
function response(status, headers, body)
  sent = sent + 1
  if sent % length == 0 then sequence_id = sequence_id + 1 end
end

dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "wrk_summary.lua")
