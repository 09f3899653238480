"""The classification extension's reference: what Triton answers for an
output requested with "classification": N, computed in Python from
onnxruntime's output (docs/model-config.md, "Classification")."""
from __future__ import annotations

import numpy as np

import make_classification_models as cm  # noqa: F401  (tests/models, on the path through harness)

LABELS = cm.LABELS


def class_strings(row: np.ndarray, count: int, labels=None) -> list[bytes]:
    """One row's top `count`: "value:index[:label]", greater values first,
    the lower index first among equals; values printed as C's "%f" (Python's
    "%f" rounds the same binary value the same way) or as integers."""
    flat = row.reshape(-1)
    order = sorted(range(flat.size), key=lambda i: (-float(flat[i]), i))
    out = []
    for i in order[:min(count, flat.size)]:
        text = ("%f" % float(flat[i])) if flat.dtype.kind == "f" else str(int(flat[i]))
        entry = f"{text}:{i}"
        if labels and i < len(labels) and labels[i]:
            entry += ":" + labels[i]
        out.append(entry.encode())
    return out


def expected_classes(values: np.ndarray, count: int, batched: bool, labels=None) -> np.ndarray:
    """The BYTES tensor the server answers for `values` (the model's output):
    [batch, min(count, row)] for a batching model, [min(count, row)] otherwise."""
    if batched:
        rows = [class_strings(values[b], count, labels) for b in range(values.shape[0])]
        k = min(count, int(np.prod(values.shape[1:])))
        return np.array(rows, dtype=object).reshape(values.shape[0], k)
    return np.array(class_strings(values, count, labels), dtype=object)


def images(batch: int, seed: int = 0) -> np.ndarray:
    """`batch` FP32 images [3,32,32] in -1..1 (image_client.py's INCEPTION scaling)."""
    rng = np.random.default_rng(seed)
    size = cm.IMAGE_SIZE
    return (rng.integers(0, 256, (batch, 3, size, size)).astype(np.float32) / 127.5 - 1).astype(np.float32)


def write_images(folder) -> list:
    """Three small RGB pictures (sizes other than the model's, so the clients
    resize them) as PNG files in `folder`; their paths, sorted as the image
    clients sort them."""
    from PIL import Image
    folder.mkdir(parents=True, exist_ok=True)
    ys, xs = np.mgrid[0:48, 0:64]
    pictures = {
        "a_gradient.png": np.stack([xs * 4, ys * 5, 255 - xs * 4], axis=-1),
        "b_stripes.png": np.stack([(xs // 8 % 2) * 255, ys * 0 + 90, (ys // 6 % 2) * 200], axis=-1),
        "c_blob.png": np.stack([255 - np.hypot(xs - 32, ys - 24).astype(int) * 6] * 3, axis=-1),
    }
    paths = []
    for name, pixels in pictures.items():
        path = folder / name
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB").save(path)
        paths.append(path)
    return sorted(paths)
