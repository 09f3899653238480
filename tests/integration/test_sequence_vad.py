"""A real stateful model from a registry package, served with implicit state:
Silero VAD (PyPI silero-vad, pinned and integrity-checked by
scripts/silero_vad.py, which also describes the model and the two ways it is
served here).

A client streams an audio clip in fixed-size chunks (512 new samples after
the previous chunk's last 64, as the package's own wrapper feeds the model)
as one sequence, sending `input` and `sr` only; the server carries `state`
from each chunk's `stateN`. The speech probabilities must equal onnxruntime
in process running the package's file over the same chunks with the state
threaded by hand. So that this check has teeth, the test also shows that the
same chunks without the state threaded give clearly different probabilities:
a server that dropped, reset or mixed up states would fail it.

onnxruntime here is the Python package of scripts/requirements.txt, the
server's the C++ SDK of scripts/setup.sh, of another version: outputs are
compared to within float rounding (rtol 1e-4, atol 1e-5), far below the
differences a lost state makes (tenths).
"""
from __future__ import annotations

import concurrent.futures
import sys

import numpy as np
import pytest

from harness import REPO_ROOT, metric, start_server
from sequence_helpers import INVALID, PROTOCOLS, SequenceClient, wait_loaded

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import silero_vad  # noqa: E402

pytestmark = pytest.mark.timeout(300)

CHUNKS = 24          # ~0.8 s of audio per sequence
CONCURRENT = 16      # sequences at once on the batched model
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def vad_file():
    return silero_vad.fetch()


@pytest.fixture(scope="module")
def vad_server(tmp_path_factory, log_dir, vad_file):
    repo = silero_vad.write_repository(tmp_path_factory.mktemp("vad_models"), vad_file)
    srv = start_server(repo, log_dir, "sequence_vad", strict_readiness=True)
    try:
        wait_loaded(srv, ["silero_vad", "silero_vad_batched"])
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def vad_session(vad_file):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3  # the package's file has unused initializers ORT warns about
    return ort.InferenceSession(str(vad_file), options, providers=["CPUExecutionProvider"])


def clip_windows(seed: int) -> np.ndarray:
    return silero_vad.windows(silero_vad.synthetic_clip(seed, CHUNKS))


def stream(c: SequenceClient, model: str, sequence_id, chunk_windows: np.ndarray, end: bool = True) -> np.ndarray:
    """One sequence of chunks; the speech probability of each."""
    batched = model == "silero_vad_batched"
    probabilities = []
    for n, window in enumerate(chunk_windows):
        tensors = {"input": ("FP32", window[None, :])}
        if not batched:
            tensors["sr"] = ("INT64", np.array([silero_vad.SAMPLE_RATE], np.int64))
        result = c.infer(model, tensors, sequence_id=sequence_id, start=(n == 0),
                         end=end and (n == len(chunk_windows) - 1), outputs=["output"])
        out = result.as_numpy("output")
        assert out.shape == (1, 1), out.shape  # [batch 1] + dims [1], or dims [1, 1]
        probabilities.append(float(out.reshape(-1)[0]))
    return np.array(probabilities, np.float32)


def test_vad_file_is_the_pinned_one(vad_file):
    assert silero_vad._sha256(vad_file) == silero_vad.ONNX_SHA256


def test_state_matters_for_these_clips(vad_session):
    """The premise of the comparisons below: threading the state changes the
    answers by far more than the tolerance."""
    windows = clip_windows(1)
    threaded = silero_vad.reference_probabilities(vad_session, windows)
    reset = silero_vad.reference_probabilities(vad_session, windows, thread_state=False)
    assert np.abs(threaded - reset).max() > 0.1, (threaded, reset)
    assert threaded.min() < 0.5 < threaded.max(), threaded  # speech and non-speech both occur


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["silero_vad", "silero_vad_batched"])
def test_one_stream_equals_onnxruntime_with_the_state_threaded(vad_server, vad_session, protocol, model):
    windows = clip_windows(1)
    with SequenceClient(vad_server, protocol) as c:
        got = stream(c, model, 31_000_001, windows)
    expected = silero_vad.reference_probabilities(vad_session, windows)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_grpc_stream_of_chunks(vad_server, vad_session):
    """The chunks of one sequence on one ModelStreamInfer stream, sent without
    waiting for answers; the sequence batcher keeps their order."""
    import queue
    import tritonclient.grpc as grpcclient
    windows = clip_windows(2)
    answers: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(vad_server.grpc_url) as client:
        client.start_stream(callback=lambda result, error: answers.put(error or result))
        for n, window in enumerate(windows):
            inp = grpcclient.InferInput("input", [1, silero_vad.WINDOW], "FP32")
            inp.set_data_from_numpy(window[None, :])
            client.async_stream_infer("silero_vad_batched", [inp], request_id=str(n), sequence_id="vad-stream",
                                      sequence_start=(n == 0), sequence_end=(n == len(windows) - 1))
        results = [answers.get(timeout=60) for _ in windows]
        client.stop_stream()
    got = np.zeros(len(windows), np.float32)
    for r in results:
        assert not isinstance(r, Exception), r
        got[int(r.get_response().id)] = r.as_numpy("output").reshape(-1)[0]
    np.testing.assert_allclose(got, silero_vad.reference_probabilities(vad_session, windows), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_concurrent_sequences_each_get_their_own_answers(vad_server, vad_session, protocol):
    """CONCURRENT sequences with different clips at once on the oldest-strategy
    model: each must equal its own reference, and the references differ from
    one another, so answers given to the wrong sequence, or states swapped
    between sequences that share an execution, would fail. (How many share
    one is timing, shown by bench/sequence_bench.py, not asserted here.)"""
    seeds = list(range(100, 100 + CONCURRENT))
    windows = {s: clip_windows(s) for s in seeds}
    expected = {s: silero_vad.reference_probabilities(vad_session, windows[s]) for s in seeds}
    # The clips' references differ by far more than the comparison's
    # tolerance (1e-3 is ~70x it at these probabilities).
    for a in seeds:
        for b in seeds:
            if a < b:
                assert np.abs(expected[a] - expected[b]).max() > 1e-3, (a, b)

    def one(seed):
        with SequenceClient(vad_server, protocol) as c:
            return seed, stream(c, "silero_vad_batched", 32_000_000 + seed, windows[seed])

    before = int(vad_server.model_stats("silero_vad_batched")["inference_count"])
    with concurrent.futures.ThreadPoolExecutor(CONCURRENT) as pool:
        got = dict(pool.map(one, seeds))
    after = int(vad_server.model_stats("silero_vad_batched")["inference_count"])
    assert after - before == CONCURRENT * CHUNKS, (before, after)
    for s in seeds:
        np.testing.assert_allclose(got[s], expected[s], rtol=RTOL, atol=ATOL, err_msg=f"sequence of clip {s}")


@pytest.mark.parametrize("model", ["silero_vad", "silero_vad_batched"])
def test_start_again_resets_the_state(vad_server, vad_session, model):
    """START for an id whose sequence is running: as Triton, a new sequence
    from the initial (zero) state."""
    first, second = clip_windows(3), clip_windows(4)
    with SequenceClient(vad_server, "http") as c:
        stream(c, model, 33_000_001, first, end=False)
        got = stream(c, model, 33_000_001, second)
    np.testing.assert_allclose(got, silero_vad.reference_probabilities(vad_session, second), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_state_is_not_an_output_to_ask_for(vad_server, vad_session, protocol):
    """As Triton's ONNX Runtime backend (qa/L0_implicit_state): a state's
    output is the server's, not a requested output."""
    windows = clip_windows(5)[:3]
    with SequenceClient(vad_server, protocol) as c:
        c.refused(INVALID, "stateN", model="silero_vad_batched", tensors={"input": ("FP32", windows[0][None, :])},
                  sequence_id=34_000_001, start=True, end=True, outputs=["stateN"])
        # Still serving.
        got = stream(c, "silero_vad_batched", 34_000_002, windows)
    np.testing.assert_allclose(got, silero_vad.reference_probabilities(vad_session, windows), rtol=RTOL, atol=ATOL)


def test_metrics_follow_the_sequences(vad_server):
    """Slots, live sequences, the state held and how sequences ended, on
    /metrics: two sequences opened hold one state each
    (silero_vad.STATE_SHAPE, FP32); ending them frees both."""
    model = {"model": "silero_vad_batched", "version": "1"}

    def read():
        return {name: metric(vad_server, name, **model) for name in
                ("ortserve_sequences_active", "ortserve_sequence_state_bytes", "ortserve_sequences_started_total")}

    state_bytes = int(np.prod(silero_vad.STATE_SHAPE)) * 4
    assert metric(vad_server, "ortserve_sequence_slots", **model) == 16
    ended_before = metric(vad_server, "ortserve_sequences_ended_total", reason="end", **model)
    before = read()
    windows = clip_windows(6)[:2]
    with SequenceClient(vad_server, "http") as c:
        for sequence_id in (35_000_001, 35_000_002):
            stream(c, "silero_vad_batched", sequence_id, windows[:1], end=False)
        opened = read()
        assert opened["ortserve_sequences_active"] == before["ortserve_sequences_active"] + 2
        assert opened["ortserve_sequence_state_bytes"] == before["ortserve_sequence_state_bytes"] + 2 * state_bytes
        assert opened["ortserve_sequences_started_total"] == before["ortserve_sequences_started_total"] + 2
        for sequence_id in (35_000_001, 35_000_002):
            c.infer("silero_vad_batched", {"input": ("FP32", windows[1][None, :])}, sequence_id=sequence_id,
                    end=True, outputs=["output"])
    after = read()
    assert after["ortserve_sequences_active"] == before["ortserve_sequences_active"]
    assert after["ortserve_sequence_state_bytes"] == before["ortserve_sequence_state_bytes"]
    assert metric(vad_server, "ortserve_sequences_ended_total", reason="end", **model) == ended_before + 2


def test_sigterm_answers_what_runs_and_drops_the_open_sequences(tmp_path, log_dir, vad_file, vad_session):
    """SIGTERM with sequences open: what was sent is answered (with the right
    probabilities), the server exits 0, and the open sequences are dropped
    with their state, as docs/model-config.md says."""
    repo = tmp_path / "repo"
    silero_vad.write_model(repo, "silero_vad_batched", silero_vad.build_batched(vad_file),
                           silero_vad.batched_config())
    srv = start_server(repo, log_dir, "sequence_vad_sigterm", strict_readiness=True)
    try:
        wait_loaded(srv, ["silero_vad_batched"])
        windows = clip_windows(7)[:3]
        with SequenceClient(srv, "grpc") as c:
            for sequence_id in (36_000_001, 36_000_002, 36_000_003):
                got = stream(c, "silero_vad_batched", sequence_id, windows, end=False)
                np.testing.assert_allclose(got, silero_vad.reference_probabilities(vad_session, windows),
                                           rtol=RTOL, atol=ATOL)
        assert srv.stop() == 0, srv.log_tail()
        assert "3 open sequence(s) dropped at shutdown" in srv.log_path.read_text()
    finally:
        srv.stop()
