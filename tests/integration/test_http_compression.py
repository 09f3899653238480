"""HTTP response compression as Triton does it: only an infer response that
succeeded is compressed when the client accepts gzip or deflate; metadata,
config, index, statistics, health and every error are sent as they are, even
to a client that says `Accept-Encoding: gzip`. tritonclient.http.aio sends
aiohttp's Accept-Encoding on every call but decompresses only infer results,
so it is driven here through all the calls ortserve serves."""
from __future__ import annotations

import asyncio
import gzip
import json
import zlib

import numpy as np
import pytest
import tritonclient.http.aio as aioclient
from tritonclient.utils import InferenceServerException

from harness import infer_inputs, model_file, sample_array

pytestmark = pytest.mark.timeout(120)

MODEL = "add_sub_fp32"
ACCEPT = {"Accept-Encoding": "gzip, deflate"}

UNCOMPRESSED_GETS = [
    "/v2", "/v2/health/live", "/v2/health/ready", f"/v2/models/{MODEL}", f"/v2/models/{MODEL}/versions/1",
    f"/v2/models/{MODEL}/ready", f"/v2/models/{MODEL}/config", f"/v2/models/{MODEL}/stats",
    f"/v2/models/{MODEL}/versions/1/stats", "/v2/models/stats", "/v2/models/does_not_exist",
    "/v2/models/does_not_exist/config",
]


def _raw(response) -> bytes:
    return response.raw.read(decode_content=False)


@pytest.mark.parametrize("path", UNCOMPRESSED_GETS)
def test_non_infer_get_is_never_compressed(server, path):
    r = server.get(path, headers=ACCEPT, stream=True)
    assert "Content-Encoding" not in r.headers, (path, r.status_code, r.headers)
    body = _raw(r)
    if body:
        json.loads(body)  # plain JSON on the wire


def test_repository_index_is_never_compressed(server):
    r = server.post("/v2/repository/index", data=b"{}", headers=ACCEPT, stream=True)
    assert r.status_code == 200
    assert "Content-Encoding" not in r.headers, r.headers
    assert any(m["name"] == MODEL for m in json.loads(_raw(r)))


def test_infer_error_is_never_compressed(server):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [0.0] * 16}]}
    r = server.infer_raw(MODEL, body, headers=ACCEPT, stream=True)
    assert r.status_code == 400
    assert "Content-Encoding" not in r.headers, r.headers
    assert "INPUT1" in json.loads(_raw(r))["error"]


@pytest.mark.parametrize("algo", ["gzip", "deflate"])
@pytest.mark.parametrize("versioned", [False, True])
def test_infer_success_is_compressed(server, algo, versioned):
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 64], "datatype": "INT32", "data": list(range(64))}]}
    r = server.infer_raw("identity_int32", body, headers={"Accept-Encoding": algo},
                         version="1" if versioned else None, stream=True)
    assert r.status_code == 200
    assert r.headers.get("Content-Encoding") == algo
    raw = _raw(r)
    text = gzip.decompress(raw) if algo == "gzip" else zlib.decompress(raw)
    assert json.loads(text)["outputs"][0]["data"] == list(range(64))


async def _aio_calls(url: str, a: np.ndarray, b: np.ndarray) -> dict:
    out = {}
    async with aioclient.InferenceServerClient(url) as c:
        out["live"] = await c.is_server_live()
        out["ready"] = await c.is_server_ready()
        out["model_ready"] = await c.is_model_ready(MODEL)
        out["server_metadata"] = await c.get_server_metadata()
        out["model_metadata"] = await c.get_model_metadata(MODEL)
        out["versioned_metadata"] = await c.get_model_metadata(MODEL, "1")
        out["config"] = await c.get_model_config(MODEL)
        out["index"] = await c.get_model_repository_index()
        out["stats"] = await c.get_inference_statistics(MODEL)
        out["all_stats"] = await c.get_inference_statistics()
        inputs = infer_inputs({"INPUT0": ("FP32", a), "INPUT1": ("FP32", b)})
        out["infer"] = (await c.infer(MODEL, inputs)).as_numpy("OUTPUT0")
        out["infer_gzip"] = (await c.infer(MODEL, inputs, response_compression_algorithm="gzip")).as_numpy("OUTPUT1")
        try:
            await c.get_model_metadata("does_not_exist")
        except InferenceServerException as e:
            out["unknown_error"] = e.message()
        try:
            await c.infer(MODEL, inputs[:1])
        except InferenceServerException as e:
            out["infer_error"] = e.message()
    return out


def test_tritonclient_http_aio_reads_every_answer(server, reference, test_repo):
    a = sample_array("FP32", (2, 16), seed=71)
    b = sample_array("FP32", (2, 16), seed=72)
    out = asyncio.run(_aio_calls(server.url, a, b))
    assert out["live"] and out["ready"] and out["model_ready"]
    assert "binary_tensor_data" in out["server_metadata"]["extensions"]
    assert out["model_metadata"]["name"] == MODEL and out["versioned_metadata"]["versions"] == ["1"]
    assert out["config"]["name"] == MODEL
    assert any(m["name"] == MODEL for m in out["index"])
    assert out["stats"]["model_stats"][0]["name"] == MODEL
    assert any(s["name"] == MODEL for s in out["all_stats"]["model_stats"])
    ref = reference.run(model_file(test_repo, MODEL), {"INPUT0": a, "INPUT1": b})
    np.testing.assert_array_equal(out["infer"], ref["OUTPUT0"])
    np.testing.assert_array_equal(out["infer_gzip"], ref["OUTPUT1"])
    # The errors are read as the server wrote them, not as undecodable bytes.
    for key in ("unknown_error", "infer_error"):
        assert "exception occurred in the client" not in out[key], out[key]
    assert "does_not_exist" in out["unknown_error"]
    assert "INPUT1" in out["infer_error"]
