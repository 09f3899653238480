"""What the tests of a model's versions share (test_rollout.py,
test_shadow.py, test_drift.py): a model folder that serves every version
under one config, and that config's parameters block."""
from __future__ import annotations

CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy {{ all {{ }} }}
input [ {inputs} ]
output [ {outputs} ]
{params}
"""
# build_add_constant's tensors (make_test_models).
ADD_INPUT = '{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }'
ADD_OUTPUT = '{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }'


def params(**kv) -> str:
    return "\n".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}' for k, v in kv.items())


def write_model(repo, name, versions: dict, extra: str, inputs: str = ADD_INPUT, outputs: str = ADD_OUTPUT):
    """<repo>/<name>: a config serving every version, with `extra` (params())
    and the given input and output tensors, and <v>/model.onnx for each
    {v: ONNX model or its bytes} of `versions`. Returns the model folder."""
    d = repo / name
    d.mkdir(parents=True)
    (d / "config.pbtxt").write_text(CONFIG.format(name=name, inputs=inputs, outputs=outputs, params=extra))
    for v, model in versions.items():
        (d / str(v)).mkdir()
        (d / str(v) / "model.onnx").write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    return d
