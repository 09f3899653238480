"""Triton's system shared memory extension, over HTTP and gRPC, with the
tritonclient shared memory utilities (tritonclient.utils.shared_memory) that
Triton's simple_*_shm_*_client.py examples use: register / status /
unregister, inputs read from regions and outputs written to them (compared
with onnxruntime), and the hostile cases: ranges out of a region and
overflowing, wrong sizes, unknown regions, bad keys, file paths as keys,
registration while disabled, the region limit, double registration, and
unregistering a region while requests use it. The server keeps serving after
each.
"""
from __future__ import annotations

import pathlib
import subprocess
import threading
import time
import uuid

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from harness import (HTTP_TIMEOUT_S, check_add_sub_fp32, make_test_models, metric, model_file,
                     start_server)

MODELS = ["add_sub_int32", "add_sub_fp32", "identity_bytes", "very_slow"]
MAX_REGIONS = 12


@pytest.fixture(scope="module")
def shm_repo(tmp_path_factory):
    return make_test_models.build_test_repository(tmp_path_factory.mktemp("shm_models"), MODELS)


@pytest.fixture(scope="module")
def shm_server(shm_repo, log_dir):
    srv = start_server(shm_repo, log_dir, "shm", extra_args=(
        "--allow-client-shm=true", "--max-shm-regions", str(MAX_REGIONS)))
    try:
        srv.wait_models_ready(MODELS)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(params=["http", "grpc"])
def protocol(request):
    return request.param


class Regions:
    """Client-side regions (created under /dev/shm) that are destroyed, and
    unregistered on the server, at teardown."""

    def __init__(self):
        self.handles = []

    def create(self, size: int, name: str | None = None):
        name = name or f"t{uuid.uuid4().hex[:12]}"
        handle = shm.create_shared_memory_region(name, "/" + name, size)
        self.handles.append(handle)
        return name, "/" + name, handle

    def destroy(self):
        for handle in self.handles:
            shm.destroy_shared_memory_region(handle)
        self.handles = []


@pytest.fixture
def regions(shm_server):
    r = Regions()
    yield r
    requests.post(f"{shm_server.base}/v2/systemsharedmemory/unregister", timeout=HTTP_TIMEOUT_S)
    r.destroy()


@pytest.fixture
def still_serves(shm_server, shm_repo, reference):
    """After the test: the server is alive and answers correctly."""
    yield shm_server
    assert shm_server.alive(), f"ortserve died; log tail:\n{shm_server.log_tail()}"
    check_add_sub_fp32(shm_server, shm_repo, reference)


def make_client(srv, protocol):
    if protocol == "http":
        return httpclient.InferenceServerClient(srv.url, network_timeout=HTTP_TIMEOUT_S)
    return grpcclient.InferenceServerClient(srv.grpc_url)


def module_of(protocol):
    return httpclient if protocol == "http" else grpcclient


def region_count(client, protocol) -> int:
    status = client.get_system_shared_memory_status()
    return len(status) if protocol == "http" else len(status.regions)


def shm_infer(client, protocol, model, inputs, outputs):
    """inputs: [(name, datatype, shape, region, byte_size, offset)];
    outputs: [(name, region, byte_size, offset)]."""
    m = module_of(protocol)
    infer_inputs = []
    for name, datatype, shape, region, byte_size, offset in inputs:
        i = m.InferInput(name, list(shape), datatype)
        i.set_shared_memory(region, byte_size, offset=offset)
        infer_inputs.append(i)
    infer_outputs = []
    for name, region, byte_size, offset in outputs:
        o = m.InferRequestedOutput(name)
        o.set_shared_memory(region, byte_size, offset=offset)
        infer_outputs.append(o)
    return client.infer(model, infer_inputs, outputs=infer_outputs)


def expect_error(fn, *substrings):
    with pytest.raises(InferenceServerException) as info:
        fn()
    text = str(info.value)
    for s in substrings:
        assert s in text, (s, text)
    return text


# ----------------------------------------------------------------- the examples' flow

def test_add_sub_inputs_and_outputs_in_one_region_each(shm_server, shm_repo, reference, regions, protocol,
                                                       still_serves):
    """simple_*_shm_client.py's flow on add_sub_int32: two inputs in one
    region, two outputs in another, offsets inside each."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, np.int32)
    nbytes = a.nbytes
    in_name, in_key, in_handle = regions.create(2 * nbytes)
    out_name, out_key, out_handle = regions.create(2 * nbytes)
    shm.set_shared_memory_region(in_handle, [a])
    shm.set_shared_memory_region(in_handle, [b], offset=nbytes)
    with make_client(shm_server, protocol) as client:
        client.register_system_shared_memory(in_name, in_key, 2 * nbytes)
        client.register_system_shared_memory(out_name, out_key, 2 * nbytes)
        assert region_count(client, protocol) == 2
        result = shm_infer(client, protocol, "add_sub_int32",
                           [("INPUT0", "INT32", a.shape, in_name, nbytes, 0),
                            ("INPUT1", "INT32", b.shape, in_name, nbytes, nbytes)],
                           [("OUTPUT0", out_name, nbytes, 0), ("OUTPUT1", out_name, nbytes, nbytes)])
        out0 = result.get_output("OUTPUT0")
        shape0 = out0["shape"] if protocol == "http" else list(out0.shape)
        assert shape0 == [1, 16]
        if protocol == "http":
            # As Triton: no data and no parameters (clients read an output's
            # parameters as binary_data_size).
            assert "data" not in out0 and "parameters" not in out0, out0
        else:
            params = {k: (v.string_param or v.int64_param) for k, v in out0.parameters.items()}
            assert params["shared_memory_region"] == out_name
            assert params["shared_memory_byte_size"] == nbytes
            assert result.get_response().raw_output_contents[0] == b""
        ref = reference.run(model_file(shm_repo, "add_sub_int32"), {"INPUT0": a, "INPUT1": b})
        got0 = shm.get_contents_as_numpy(out_handle, np.int32, [1, 16])
        got1 = shm.get_contents_as_numpy(out_handle, np.int32, [1, 16], offset=nbytes)
        np.testing.assert_array_equal(got0, ref["OUTPUT0"])
        np.testing.assert_array_equal(got1, ref["OUTPUT1"])
        client.unregister_system_shared_memory(in_name)
        assert region_count(client, protocol) == 1
        client.unregister_system_shared_memory()
        assert region_count(client, protocol) == 0


def test_mixed_region_and_wire_inputs_and_wire_outputs(shm_server, shm_repo, reference, regions, protocol):
    """One input from a region, one on the wire; outputs on the wire."""
    a = np.linspace(-2, 2, 32, dtype=np.float32).reshape(2, 16)
    b = np.full((2, 16), 0.25, np.float32)
    name, key, handle = regions.create(4096)
    shm.set_shared_memory_region(handle, [a], offset=1000)
    m = module_of(protocol)
    with make_client(shm_server, protocol) as client:
        client.register_system_shared_memory(name, key, 4096)
        i0 = m.InferInput("INPUT0", [2, 16], "FP32")
        i0.set_shared_memory(name, a.nbytes, offset=1000)
        i1 = m.InferInput("INPUT1", [2, 16], "FP32")
        i1.set_data_from_numpy(b)
        result = client.infer("add_sub_fp32", [i0, i1])
    ref = reference.run(model_file(shm_repo, "add_sub_fp32"), {"INPUT0": a, "INPUT1": b})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), ref["OUTPUT0"])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), ref["OUTPUT1"])


def test_registered_at_an_unaligned_offset(shm_server, shm_repo, reference, regions, protocol):
    """A region registered at an offset that is not page aligned (Triton maps
    at the offset itself, which mmap refuses) reads and writes the right bytes."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.arange(16, 32, dtype=np.int32).reshape(1, 16)
    base = 4096 + 12
    name, key, handle = regions.create(base + 4 * a.nbytes)
    shm.set_shared_memory_region(handle, [a, b], offset=base)
    with make_client(shm_server, protocol) as client:
        client.register_system_shared_memory(name, key, 4 * a.nbytes, offset=base)
        shm_infer(client, protocol, "add_sub_int32",
                  [("INPUT0", "INT32", [1, 16], name, a.nbytes, 0),
                   ("INPUT1", "INT32", [1, 16], name, a.nbytes, a.nbytes)],
                  [("OUTPUT0", name, a.nbytes, 2 * a.nbytes), ("OUTPUT1", name, a.nbytes, 3 * a.nbytes)])
    ref = reference.run(model_file(shm_repo, "add_sub_int32"), {"INPUT0": a, "INPUT1": b})
    np.testing.assert_array_equal(
        shm.get_contents_as_numpy(handle, np.int32, [1, 16], offset=base + 2 * a.nbytes), ref["OUTPUT0"])
    np.testing.assert_array_equal(
        shm.get_contents_as_numpy(handle, np.int32, [1, 16], offset=base + 3 * a.nbytes), ref["OUTPUT1"])


def test_bytes_tensors_through_regions(shm_server, regions, protocol):
    """simple_*_shm_string_client.py's flow: BYTES serialized into a region
    (4-byte length prefixes), the output read back with tritonclient."""
    from tritonclient.utils import serialize_byte_tensor, serialized_byte_size
    data = np.array([b"alpha", b"", "\u00e9t\u00e9".encode(), b"x" * 300], dtype=np.object_).reshape(1, 4)
    serialized = serialize_byte_tensor(data)
    size = serialized_byte_size(serialized)
    in_name, in_key, in_handle = regions.create(size)
    out_name, out_key, out_handle = regions.create(size)
    shm.set_shared_memory_region(in_handle, [serialized])
    with make_client(shm_server, protocol) as client:
        client.register_system_shared_memory(in_name, in_key, size)
        client.register_system_shared_memory(out_name, out_key, size)
        shm_infer(client, protocol, "identity_bytes", [("INPUT0", "BYTES", [1, 4], in_name, size, 0)],
                  [("OUTPUT0", out_name, size, 0)])
    got = shm.get_contents_as_numpy(out_handle, np.object_, [1, 4])
    np.testing.assert_array_equal(got, data)


# ----------------------------------------------------------------- hostile requests

def test_ranges_outside_the_region_are_refused(shm_server, regions, protocol, still_serves):
    a = np.zeros((1, 16), np.int32)
    name, key, handle = regions.create(64)
    out_name, out_key, _ = regions.create(64)
    with make_client(shm_server, protocol) as client:
        client.register_system_shared_memory(name, key, 64)
        client.register_system_shared_memory(out_name, out_key, 64)
        ok_in = ("INPUT1", "INT32", [1, 16], name, 64, 0)
        ok_out = [("OUTPUT0", out_name, 64, 0)]

        def infer(input0, outputs=ok_out):
            return lambda: shm_infer(client, protocol, "add_sub_int32", [input0, ok_in], outputs)

        # offset at the end, and far past it
        expect_error(infer(("INPUT0", "INT32", [1, 16], name, 64, 64)), "Invalid offset for shared memory region")
        expect_error(infer(("INPUT0", "INT32", [1, 16], name, 64, 2**62)), "Invalid offset for shared memory region")
        # offset + size past the end
        expect_error(infer(("INPUT0", "INT32", [1, 16], name, 64, 4)),
                     "Invalid offset + byte size for shared memory region")
        # the same for an output region
        expect_error(infer(("INPUT0", "INT32", [1, 16], name, 64, 0), [("OUTPUT0", out_name, 64, 1)]),
                     "Invalid offset + byte size for shared memory region")
        if protocol == "http":
            # offset + byte_size overflows 64 bits (gRPC's int64_param cannot carry it)
            expect_error(infer(("INPUT0", "INT32", [1, 16], name, 2**64 - 32, 32)), "Integer overflow detected")
            expect_error(infer(("INPUT0", "INT32", [1, 16], name, 64, 0), [("OUTPUT0", out_name, 2**64 - 1, 1)]),
                         "Integer overflow detected")
        # byte_size that does not match the tensor (smaller and larger)
        region_of_128, key_128, _ = regions.create(128)
        client.register_system_shared_memory(region_of_128, key_128, 128)
        expect_error(infer(("INPUT0", "INT32", [1, 16], region_of_128, 128, 0)), "INPUT0", "64")
        expect_error(infer(("INPUT0", "INT32", [1, 16], name, 32, 0)), "INPUT0", "64")
        # an output region too small for the output
        expect_error(infer(("INPUT0", "INT32", [1, 16], name, 64, 0), [("OUTPUT0", out_name, 32, 0)]),
                     "should be at least 64 bytes")
        # unknown region
        expect_error(infer(("INPUT0", "INT32", [1, 16], "no_such_region", 64, 0)),
                     "Unable to find shared memory region: 'no_such_region'")


def test_malformed_parameters_are_refused(shm_server, regions, still_serves):
    name, key, _ = regions.create(64)
    requests.post(f"{shm_server.base}/v2/systemsharedmemory/region/{name}/register",
                  json={"key": key, "byte_size": 64}, timeout=HTTP_TIMEOUT_S).raise_for_status()
    wire = {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [0] * 16}

    def post(input0):
        return requests.post(f"{shm_server.base}/v2/models/add_sub_int32/infer",
                             json={"inputs": [input0, wire]}, timeout=HTTP_TIMEOUT_S)

    base = {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16]}
    cases = [
        ({"shared_memory_region": name}, "no shared_memory_byte_size"),
        ({"shared_memory_region": 7, "shared_memory_byte_size": 64}, "shared_memory_region"),
        ({"shared_memory_region": name, "shared_memory_byte_size": -1}, "must not be negative"),
        ({"shared_memory_region": name, "shared_memory_byte_size": 64, "shared_memory_offset": "0"},
         "shared_memory_offset"),
        ({"shared_memory_byte_size": 64}, "no shared_memory_region"),
    ]
    for params, text in cases:
        r = post({**base, "parameters": params})
        assert r.status_code == 400, (params, r.status_code, r.text)
        assert text in r.json()["error"], (params, r.text)
    r = post({**base, "data": [0] * 16, "parameters": {"shared_memory_region": name, "shared_memory_byte_size": 64}})
    assert r.status_code == 400 and "only one of the following fields" in r.json()["error"], r.text
    r = requests.post(f"{shm_server.base}/v2/models/add_sub_int32/infer", timeout=HTTP_TIMEOUT_S, json={
        "inputs": [{**base, "data": [0] * 16}, wire],
        "outputs": [{"name": "OUTPUT0", "parameters": {"shared_memory_region": name, "shared_memory_byte_size": 64,
                                                        "binary_data": True}}]})
    assert r.status_code == 400 and "Output can't set both" in r.json()["error"], r.text
    r = requests.post(f"{shm_server.base}/v2/models/add_sub_int32/infer", timeout=HTTP_TIMEOUT_S, json={
        "inputs": [{**base, "data": [0] * 16}, wire],
        "outputs": [{"name": "OUTPUT0", "parameters": {"shared_memory_region": name, "shared_memory_byte_size": 64,
                                                        "classification": 2}}]})
    assert r.status_code == 400, r.text
    assert "Output can't set both 'shared_memory_region' and 'classification'" in r.json()["error"], r.text


@pytest.mark.parametrize("key, why", [
    ("/", "invalid shm key"),
    ("///", "invalid shm key"),
    ("noslash", "exactly one '/'"),
    ("//twoslashes", "exactly one '/'"),
    ("/../etc/passwd", "no '/' after the first"),
    ("/dev/shm/x", "no '/' after the first"),
    ("/..", "'.' and '..'"),
    ("/" + "k" * 256, "at most 255"),
    ("/triton_python_backend_shm_region_x", "reserved prefix"),
])
def test_bad_keys_are_refused(shm_server, protocol, key, why, still_serves):
    with make_client(shm_server, protocol) as client:
        text = expect_error(lambda: client.register_system_shared_memory("bad_key", key, 64),
                            "cannot register shared memory region 'bad_key'")
        assert why in text, text
        assert region_count(client, protocol) == 0


def test_key_with_nul_is_refused(shm_server, regions, still_serves):
    """A NUL would cut the key short at shm_open (naming another object)."""
    name, key, _ = regions.create(64)
    r = requests.post(f"{shm_server.base}/v2/systemsharedmemory/region/r/register",
                      data='{"key": "%s\\u0000x", "byte_size": 64}' % key, timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 400 and "NUL" in r.json()["error"], r.text


def test_registration_checks_the_object(shm_server, regions, protocol, still_serves):
    name, key, _ = regions.create(64)
    with make_client(shm_server, protocol) as client:
        for offset, size in [(0, 65), (1, 64), (64, 1), (65, 0), (2**63, 2**63)]:
            expect_error(lambda: client.register_system_shared_memory("r", key, size, offset=offset),
                         "failed to register shared memory region 'r'")
        # Triton's words, status INTERNAL / 500, before the size is looked at.
        for size in (64, 0):
            expect_error(lambda: client.register_system_shared_memory("r", "/no_such_object_here", size),
                         "Unable to open shared memory region: '/no_such_object_here'")
        client.register_system_shared_memory(name, key, 64)
        expect_error(lambda: client.register_system_shared_memory(name, key, 64),
                     f"shared memory region '{name}' already in manager")
        assert region_count(client, protocol) == 1
        expect_error(lambda: client.get_system_shared_memory_status("unknown"),
                     "Unable to find system shared memory region: 'unknown'")
        client.unregister_system_shared_memory("unknown")  # not an error, as in Triton


def test_region_limit(shm_server, regions, still_serves):
    with httpclient.InferenceServerClient(shm_server.url) as client:
        for i in range(MAX_REGIONS):
            name, key, _ = regions.create(64)
            client.register_system_shared_memory(name, key, 64)
        name, key, _ = regions.create(64)
        text = expect_error(lambda: client.register_system_shared_memory(name, key, 64), "--max-shm-regions=12")
        assert "unregister one first" in text
        client.unregister_system_shared_memory()
        client.register_system_shared_memory(name, key, 64)


def test_cuda_shared_memory_is_refused_clearly(shm_server, protocol):
    with make_client(shm_server, protocol) as client:
        status = client.get_cuda_shared_memory_status()
        assert len(status if protocol == "http" else status.regions) == 0
        client.unregister_cuda_shared_memory()
    r = requests.post(f"{shm_server.base}/v2/cudasharedmemory/region/g/register",
                      json={"raw_handle": {"b64": "AA=="}, "device_id": 0, "byte_size": 8}, timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 400, r.text
    # Triton's words (its GPU build, for a handle it cannot open), then why.
    assert r.json()["error"].startswith("failed to register shared memory region: invalid args"), r.text
    assert "GPUs not supported" in r.json()["error"], r.text
    with pytest.raises(InferenceServerException, match="failed to register shared memory region.*invalid args"):
        # L0_grpc's call (a path needs a region name over HTTP).
        make_client(shm_server, protocol).register_cuda_shared_memory("" if protocol == "grpc" else "g", b"", 0, 0)


def test_disabled_by_default(shm_repo, launch, regions, protocol):
    """Without --allow-client-shm=true: status answers (empty), register and
    unregister are refused naming the flag, and the server serves on."""
    srv = launch(shm_repo)
    srv.wait_models_ready(["add_sub_int32"])
    name, key, _ = regions.create(64)
    with make_client(srv, protocol) as client:
        assert region_count(client, protocol) == 0
        expect_error(lambda: client.register_system_shared_memory(name, key, 64),
                     "Client shared memory is disabled", "--allow-client-shm=true")
        expect_error(lambda: client.unregister_system_shared_memory(name), "--allow-client-shm=true")
        assert region_count(client, protocol) == 0
        expect_error(lambda: shm_infer(client, protocol, "add_sub_int32",
                                       [("INPUT0", "INT32", [1, 16], name, 64, 0),
                                        ("INPUT1", "INT32", [1, 16], name, 64, 0)], []),
                     "Unable to find shared memory region")
    r = requests.post(f"{srv.base}/v2/systemsharedmemory/region/{name}/register",
                      json={"key": key, "byte_size": 64}, timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 501, r.text
    assert srv.get("/v2/health/live").status_code == 200


# ----------------------------------------------------------------- unregister while in use

def server_maps(srv, key: str) -> bool:
    """Whether the server process has the object `key` mapped."""
    maps = pathlib.Path(f"/proc/{srv.proc.pid}/maps").read_text()
    return f"/dev/shm{key}" in maps


def test_unregister_while_requests_use_the_region(shm_server, shm_repo, reference, regions, protocol,
                                                  still_serves):
    """Requests queued on very_slow (one instance, one request at a time) hold
    their regions: unregistering them removes the names at once, the mapping
    stays until the last request is answered (each with the right output, in
    the region), then it is unmapped."""
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    in_name, in_key, in_handle = regions.create(x.nbytes)
    out_name, out_key, out_handle = regions.create(16)
    shm.set_shared_memory_region(in_handle, [x])
    count = 4
    with make_client(shm_server, protocol) as client:
        client.register_system_shared_memory(in_name, in_key, x.nbytes)
        client.register_system_shared_memory(out_name, out_key, 16)
    results, errors = [], []

    def one():
        try:
            with make_client(shm_server, protocol) as c:
                results.append(shm_infer(c, protocol, "very_slow", [("x", "FP32", [1, 16], in_name, x.nbytes, 0)],
                                         [("y", out_name, 16, 0)]))
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    # Wait (bounded) until every request is admitted: one runs, the rest queue.
    deadline = time.monotonic() + HTTP_TIMEOUT_S
    while metric(shm_server, "ortserve_pending_requests", model="very_slow") < count - 1:
        assert time.monotonic() < deadline and not errors, errors
        time.sleep(0.02)
    with make_client(shm_server, protocol) as client:
        client.unregister_system_shared_memory()
        assert region_count(client, protocol) == 0
        # The names are free again while the old mappings are still in use.
        client.register_system_shared_memory(in_name, in_key, x.nbytes)
        client.unregister_system_shared_memory(in_name)
    assert server_maps(shm_server, out_key), "the output region was unmapped under queued requests"
    for t in threads:
        t.join(HTTP_TIMEOUT_S)
    assert not errors, errors
    assert len(results) == count
    ref = reference.run(model_file(shm_repo, "very_slow"), {"x": x})
    np.testing.assert_allclose(shm.get_contents_as_numpy(out_handle, np.float32, [1, 4]), ref["y"],
                               rtol=1e-5, atol=1e-6)
    deadline = time.monotonic() + HTTP_TIMEOUT_S
    while server_maps(shm_server, out_key) or server_maps(shm_server, in_key):
        assert time.monotonic() < deadline, "the regions stayed mapped after their last request"
        time.sleep(0.02)


# ----------------------------------------------------------------- perf_analyzer

def test_perf_analyzer_shared_memory_system(shm_server, protocol, still_serves):
    """perf_analyzer's --shared-memory system mode (it registers a region per
    input and output, sends every request through them, unregisters at exit)."""
    from harness import perf_analyzer_command
    binary, env = perf_analyzer_command()
    url = shm_server.url if protocol == "http" else shm_server.grpc_url
    cmd = [str(binary), "-m", "add_sub_fp32", "-u", url, "-i", protocol, "--shared-memory", "system",
           "--shape", "INPUT0:16", "--shape", "INPUT1:16", "--concurrency-range", "2",
           "--measurement-mode", "count_windows", "--measurement-request-count", "50",
           "--stability-percentage", "999", "--max-trials", "3"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=HTTP_TIMEOUT_S * 2)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Throughput" in done.stdout, done.stdout[-2000:]
    with make_client(shm_server, protocol) as client:
        assert region_count(client, protocol) == 0


def test_object_shrunk_under_a_queued_request_does_not_crash_the_server(shm_server, shm_repo, reference, regions,
                                                                          still_serves):
    """The client truncates its input object after its requests were admitted
    (past every check): reading the lost pages would raise SIGBUS and end the
    process; the server reads zeros instead, answers, and refuses the region
    from then on."""
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    in_name, in_key, in_handle = regions.create(4096)
    out_name, out_key, out_handle = regions.create(16 * 4)
    shm.set_shared_memory_region(in_handle, [x])
    count = 3
    with make_client(shm_server, "http") as client:
        client.register_system_shared_memory(in_name, in_key, 4096)
        client.register_system_shared_memory(out_name, out_key, 16 * 4)
    results, errors = [], []

    def one(slot):
        try:
            with make_client(shm_server, "http") as c:
                results.append(shm_infer(c, "http", "very_slow", [("x", "FP32", [1, 16], in_name, x.nbytes, 0)],
                                         [("y", out_name, 16, 16 * slot)]))
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + HTTP_TIMEOUT_S
    while metric(shm_server, "ortserve_pending_requests", model="very_slow") < count - 1:
        assert time.monotonic() < deadline and not errors, errors
        time.sleep(0.02)
    with open(f"/dev/shm{in_key}", "r+b") as f:
        f.truncate(0)
    for t in threads:
        t.join(HTTP_TIMEOUT_S)
    assert shm_server.alive(), f"ortserve died; log tail:\n{shm_server.log_tail()}"
    assert not errors, errors
    # The queued requests read zeros where the object was cut off (the one
    # running at the cut may have read x before it).
    model = model_file(shm_repo, "very_slow")
    zeros = reference.run(model, {"x": np.zeros((1, 16), np.float32)})["y"]
    full = reference.run(model, {"x": x})["y"]
    outputs = [shm.get_contents_as_numpy(out_handle, np.float32, [1, 4], offset=16 * i) for i in range(count)]
    saw_zeros = [np.allclose(o, zeros, rtol=1e-5, atol=1e-6) for o in outputs]
    for o, z in zip(outputs, saw_zeros):
        assert z or np.allclose(o, full, rtol=1e-5, atol=1e-6), (o, zeros, full)
    assert sum(saw_zeros) >= count - 1, (outputs, zeros)
    with make_client(shm_server, "http") as client:
        expect_error(lambda: shm_infer(client, "http", "very_slow",
                                       [("x", "FP32", [1, 16], in_name, x.nbytes, 0)], []), "shrank")
