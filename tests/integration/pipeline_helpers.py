"""What the pipeline tests share (test_op_libraries.py, test_pipeline_ensembles.py): the models of
scripts/make_pipeline_models.py and their repositories (module fixtures, imported by the test
files), a server with the environment the onnxruntime-extensions library needs, one request
through tritonclient, onnxruntime in process with that library as the oracle, sample images, and
PaddleOCR's classifier preprocessing written in numpy as an independent check of the
image_preprocess graph."""
from __future__ import annotations

import contextlib
import io
import os
import pathlib
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from harness import REPO_ROOT, start_server

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import make_pipeline_models as pipelines  # noqa: E402  (re-exported)


def preload_env() -> dict:
    """LD_PRELOAD of this interpreter's libpython (the extension module's symbols)."""
    libpython = pipelines.libpython_path()
    assert libpython.is_file(), f"{libpython} missing: scripts/setup.sh installs Debian's libpython3.11"
    # ASan insists on coming first among the initial libraries; the preload is not its business.
    asan = os.environ.get("ASAN_OPTIONS", "")
    return {"LD_PRELOAD": str(libpython),
            "ASAN_OPTIONS": f"{asan}:verify_asan_link_order=0" if asan else "verify_asan_link_order=0"}


@pytest.fixture(scope="module")
def text_repo(tmp_path_factory):
    return pipelines.write_text_pipeline(tmp_path_factory.mktemp("pipelines") / "text_pipeline",
                                         pipelines.extensions_library())


@pytest.fixture(scope="module")
def image_repo(tmp_path_factory):
    return pipelines.write_image_pipeline(tmp_path_factory.mktemp("pipelines") / "image_pipeline",
                                          pipelines.extensions_library(), REPO_ROOT / ".cache" / "pipeline")


@pytest.fixture(scope="module")
def ext_reference():
    return ExtensionsReference()


@contextlib.contextmanager
def pipeline_server(repo, log_dir, name: str, models: list[str]):
    """ortserve over `repo` with libpython preloaded, every one of `models` READY; stopped on exit."""
    srv = start_server(repo, log_dir, name, env=preload_env())
    try:
        srv.wait_models_ready(models)
        yield srv
    finally:
        srv.stop()


def infer(client, model: str, inputs: list[tuple[str, np.ndarray, str]], outputs: list[str]) -> dict:
    """One request through tritonclient (HTTP or gRPC, by the client's module)."""
    mod = grpcclient if isinstance(client, grpcclient.InferenceServerClient) else httpclient
    tensors = []
    for name, array, datatype in inputs:
        t = mod.InferInput(name, list(array.shape), datatype)
        t.set_data_from_numpy(array)
        tensors.append(t)
    result = client.infer(model, tensors, outputs=[mod.InferRequestedOutput(o) for o in outputs])
    return {o: result.as_numpy(o) for o in outputs}


class ExtensionsReference:
    """onnxruntime in process with the extensions library registered: the oracle."""

    def __init__(self):
        import onnxruntime as ort
        import onnxruntime_extensions
        self._ort = ort
        self._library = onnxruntime_extensions.get_library_path()
        self._sessions = {}

    def run(self, path: pathlib.Path, feeds: dict) -> dict:
        if path not in self._sessions:
            options = self._ort.SessionOptions()
            options.register_custom_ops_library(self._library)
            self._sessions[path] = self._ort.InferenceSession(str(path), options,
                                                              providers=["CPUExecutionProvider"])
        session = self._sessions[path]
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, feeds)))


def sample_pictures() -> list[np.ndarray]:
    """RGB uint8 pictures of text-like stripes at a few aspect ratios (wide, tall, tiny, exact)."""
    rng = np.random.default_rng(7)
    pictures = []
    for h, w in ((32, 100), (48, 500), (60, 30), (5, 7), (48, 192)):
        picture = np.full((h, w, 3), 230, np.uint8)
        rows = slice(h // 3, max(h // 3 + 1, 2 * h // 3))
        picture[rows, ::3] = rng.integers(0, 80, picture[rows, ::3].shape)
        pictures.append(picture)
    return pictures


def encode(picture: np.ndarray, fmt: str) -> bytes:
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(picture).save(buf, format=fmt)
    return buf.getvalue()


def encoded_images() -> list[tuple[str, bytes, np.ndarray]]:
    """(label, encoded bytes, the RGB picture) for every sample picture as PNG and JPEG."""
    return [(f"{p.shape[0]}x{p.shape[1]}.{fmt.lower()}", encode(p, fmt), p)
            for p in sample_pictures() for fmt in ("PNG", "JPEG")]


def _resize_bilinear_half_pixel(chw: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Bilinear resize of [C, H, W] with half-pixel centres and no antialiasing (as cv2.INTER_LINEAR)."""
    def taps(out, size):
        x = np.clip((np.arange(out) + 0.5) * (size / out) - 0.5, 0, size - 1)
        x0 = np.floor(x).astype(int)
        return x0, np.minimum(x0 + 1, size - 1), (x - x0).astype(np.float32)
    y0, y1, fy = taps(out_h, chw.shape[1])
    x0, x1, fx = taps(out_w, chw.shape[2])
    top = chw[:, y0][:, :, x0] * (1 - fx) + chw[:, y0][:, :, x1] * fx
    bottom = chw[:, y1][:, :, x0] * (1 - fx) + chw[:, y1][:, :, x1] * fx
    return top * (1 - fy)[:, None] + bottom * fy[:, None]


def paddle_cls_input(rgb: np.ndarray) -> np.ndarray:
    """PaddleOCR's text-direction classifier input (resize_norm_img) from a decoded RGB picture:
    BGR, height 48 with the aspect ratio kept (width ceil(48 w / h), at most 192),
    (x / 255 - 0.5) / 0.5, zero-padded on the right to [1, 3, 48, 192]."""
    h, w = rgb.shape[:2]
    width = int(min(pipelines.OCR_MAX_WIDTH, max(1, np.ceil(pipelines.OCR_HEIGHT * w / h))))
    chw = rgb[:, :, ::-1].astype(np.float32).transpose(2, 0, 1)
    x = np.zeros((1, 3, pipelines.OCR_HEIGHT, pipelines.OCR_MAX_WIDTH), np.float32)
    x[0, :, :, :width] = _resize_bilinear_half_pixel(chw, pipelines.OCR_HEIGHT, width) / 127.5 - 1.0
    return x
