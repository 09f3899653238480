-- The model's name at the start of a gRPC request, for HAProxy's consistent
-- hashing (haproxy-model-hash.cfg):
--   balance hash req.body,bytes(0,<n>),hex,lua.grpc_model_name
-- (hex: HAProxy hands a binary sample to Lua as a C string, cut at the first
-- NUL byte, and every gRPC message starts with one.)
-- A request is a 5-byte gRPC header (a compressed flag of 0, a length), then
-- the protobuf message whose field 1 (tag 0x0a: a varint length, the bytes)
-- names the model in ModelInferRequest, ModelMetadataRequest,
-- ModelReadyRequest, ModelConfigRequest and ModelStatisticsRequest; protobuf
-- writers put it first. Only the first bytes are needed, so a message larger
-- than HAProxy's buffer is routed by its model too. Anything else (compressed,
-- field 1 absent or cut off within the first bytes) gives no name, and no
-- routing by model.
core.register_converters("grpc_model_name", function(hex)
  local function byte_at(i)  -- 1-based
    return tonumber(hex:sub(2 * i - 1, 2 * i), 16)
  end
  if hex == nil or #hex < 14 or byte_at(1) ~= 0 or byte_at(6) ~= 0x0a then
    return nil
  end
  local len, shift, pos = 0, 0, 7
  while true do
    local b = byte_at(pos)
    if b == nil or shift > 28 then
      return nil
    end
    len = len | ((b & 0x7f) << shift)
    pos = pos + 1
    if b < 0x80 then
      break
    end
    shift = shift + 7
  end
  if len == 0 or 2 * (pos + len - 1) > #hex then
    return nil
  end
  return (hex:sub(2 * pos - 1, 2 * (pos + len - 1)):gsub("..", function(h)
    return string.char(tonumber(h, 16))
  end))
end)
