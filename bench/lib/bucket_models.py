"""The shape-bucket bench's model and load, shared by bench/bucket_bench.py,
bench/bucket_limit.py and the GPU bundle's checks (bench/gpu/make_check_data.py):
the BERT-shaped text encoder (tests/models/make_text_models.py) served with and
without `shape_buckets`, and the mixed-length request mix."""
import json
import sys
from pathlib import Path

import numpy as np

from bench_common import ROOT

sys.path.insert(0, str(ROOT / "tests" / "models"))
import make_text_models as text  # noqa: E402

MAX_BATCH = 32
# The encoder and buckets measured by default (also the GPU bundle's).
HIDDEN, LAYERS, BUCKETS = 128, 2, (16, 32, 64, 128)


def write_repository(repo: Path, hidden: int, layers: int, buckets: list, instances: int,
                     kind: str = "KIND_CPU") -> None:
    model = text.build_text_encoder(hidden=hidden, layers=layers)
    batching = "dynamic_batching { max_queue_delay_microseconds: 2000 }"
    for name, extra in (("text_buckets", text.bucket_parameters(buckets)), ("text_plain", "")):
        config = text.text_encoder_config(name, hidden, MAX_BATCH, batching=batching, extra=extra,
                                          instances=instances, kind=kind)
        text.demo.write_model(repo, name, model, config)


def mix_lengths(count: int, rng) -> list:
    """Lengths 8-128 skewed short (log-normal, median about 24), as short
    queries and sentences outnumber paragraphs."""
    lengths = np.exp(rng.normal(np.log(24), 0.7, size=count))
    return [int(n) for n in np.clip(np.round(lengths), 8, 128)]


def write_mix(path: Path, lengths: list, rng) -> None:
    """perf_analyzer --input-data: one entry per length; each client thread
    cycles through them in order."""
    entries = []
    for n in lengths:
        ids, mask = text.token_ids(n, rng)
        entries.append({"input_ids": {"content": ids[0].tolist(), "shape": [n]},
                        "attention_mask": {"content": mask[0].tolist(), "shape": [n]}})
    path.write_text(json.dumps({"data": entries}))
