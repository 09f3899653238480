"""`ortserve check --model-repository=DIR [server flags]` (docs/check.md): the
verdict for every model is the one a server start with the same flags gives
(READY or not, and the same reasons in Triton's words), the completed config
is what GET /v2/models/<m>/config answers, the exit status says whether every
model would load, and no session is created beyond what auto-complete reads
(a model asking ORT to save its optimized graph gets no file). `--load` also
creates the sessions and runs the warm-up, reporting what only those reveal
as a server start does; `--single-model-name` checks a single model's
directory as that model."""
from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess

import pytest
from onnx import TensorProto

from harness import HTTP_TIMEOUT_S, make_test_models, ortserve_binary
from test_triton_config_parity import CASES, ERROR_CASES, identity

pytestmark = pytest.mark.timeout(300)

FAILING_TEST_MODELS = make_test_models.MODELS_THAT_FAIL
GOOD_TEST_MODELS = ["add_sub_fp32", "versioned_add", "autocomplete_linear"]


def run_check(repo: pathlib.Path, *flags: str) -> tuple[int, dict, str]:
    """(exit status, {model: verdict}, stderr) of ortserve check."""
    binary = ortserve_binary()
    if not binary.is_file():
        pytest.skip(f"ortserve binary not found at {binary}")
    done = subprocess.run([str(binary), "check", f"--model-repository={repo}", *flags],
                          capture_output=True, timeout=120)
    verdicts = {}
    for line in done.stdout.decode("utf-8").splitlines():
        verdict = json.loads(line)
        verdicts[verdict["model"]] = verdict
    return done.returncode, verdicts, done.stderr.decode("utf-8", "replace")


def build_repository(repo: pathlib.Path) -> pathlib.Path:
    make_test_models.build_test_repository(repo, GOOD_TEST_MODELS + FAILING_TEST_MODELS)
    for name, (build, config, _) in CASES.items():
        build(repo / name / "1" / "model.onnx")
        if config is not None:
            (repo / name / "config.pbtxt").write_text(config)
    for name, (config, _) in ERROR_CASES.items():
        (repo / name).mkdir()
        (repo / name / "config.pbtxt").write_text(f'name: "{name}"\nplatform: "onnxruntime_onnx"\n{config}\n')
    identity(repo / "with_batch_input" / "1" / "model.onnx", TensorProto.FLOAT, ["N", 4])
    # An ensemble whose step names a model that fails, and one over a good model.
    for name, step in (("ensemble_of_bad", "bad_input_name"), ("ensemble_of_good", "add_sub_fp32")):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(f"""
name: "{name}" platform: "ensemble" max_batch_size: 8
input [ {{ name: "A" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "B" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "SUM" data_type: TYPE_FP32 dims: [ 16 ] }} ]
ensemble_scheduling {{ step [ {{ model_name: "{step}" model_version: -1
  input_map {{ key: "INPUT0" value: "A" }} input_map {{ key: "INPUT1" value: "B" }}
  output_map {{ key: "OUTPUT0" value: "SUM" }} }} ] }}
""")
    return repo


def server_verdicts(srv) -> dict:
    """{model: (READY in every version, reasons)} from the repository index."""
    out = {}
    for entry in srv.repository_index():
        ready, reasons = out.get(entry["name"], (True, []))
        out[entry["name"]] = (ready and entry.get("state") == "READY",
                              reasons + ([entry["reason"]] if entry.get("reason") else []))
    return out


def test_check_gives_the_verdicts_and_configs_of_a_server_start(tmp_path, launch):
    repo = build_repository(tmp_path / "repo")
    status, verdicts, stderr = run_check(repo)
    assert status == 1, stderr
    srv = launch(repo)
    served = server_verdicts(srv)
    assert set(verdicts) == set(served), (sorted(verdicts), sorted(served))
    for name, (ready, reasons) in served.items():
        verdict = verdicts[name]
        assert verdict["would_load"] == ready, (name, verdict, reasons)
        if ready:
            assert verdict["errors"] == [], verdict
            config = srv.get(f"/v2/models/{name}/config", timeout=HTTP_TIMEOUT_S).json()
            assert verdict["config"] == config, name
            continue
        assert verdict["errors"], verdict
        log = srv.log_text()
        for error in verdict["errors"]:
            why = re.sub(r"^version \d+: ", "", error)
            assert any(why in reason for reason in reasons) or why in log, (name, error, reasons)
            assert f"model '{name}' would fail to load: {error}" in stderr, stderr[-3000:]
    # Triton's words for the config errors, as the parity test expects them of the server.
    for name, (_, message) in ERROR_CASES.items():
        assert any(message in e for e in verdicts[name]["errors"]), verdicts[name]
    assert verdicts["ensemble_of_good"]["would_load"] and not verdicts["ensemble_of_bad"]["would_load"]
    assert f"{len(verdicts)} model(s)" in stderr


def test_check_passes_a_good_repository_and_creates_no_session(tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "repo", GOOD_TEST_MODELS)
    saved = tmp_path / "optimized.onnx"
    with open(repo / "add_sub_fp32" / "config.pbtxt", "a") as config:
        config.write(f'parameters {{ key: "session.session.optimized_model_filepath" '
                     f'value {{ string_value: "{saved}" }} }}\n')
    status, verdicts, stderr = run_check(repo)
    assert status == 0, stderr
    assert sorted(verdicts) == sorted(GOOD_TEST_MODELS)
    assert all(v["would_load"] and v["config"]["name"] == name for name, v in verdicts.items())
    assert verdicts["versioned_add"]["versions"], verdicts["versioned_add"]
    assert not saved.exists(), "ortserve check created a session with the model's session keys"


def test_check_takes_the_servers_flags(tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32", "autocomplete_linear"])
    status, verdicts, _ = run_check(repo, "--disable-auto-complete-config", "--http-port=1")
    assert status == 1 and not verdicts["autocomplete_linear"]["would_load"], verdicts
    assert verdicts["add_sub_fp32"]["would_load"], verdicts
    status, verdicts, stderr = run_check(
        repo, "--backend-config=onnxruntime,session.session.graph_optimization_level=fastest")
    assert status == 1 and "must be one of" in verdicts["add_sub_fp32"]["errors"][0], verdicts
    status, _, stderr = run_check(repo, "--no-such-flag")
    assert status == 2, stderr


def add_variant(repo: pathlib.Path, name: str, extra: str) -> None:
    """A copy of add_sub_fp32 named `name`, with `extra` appended to its config."""
    shutil.copytree(repo / "add_sub_fp32", repo / name)
    config = (repo / "add_sub_fp32" / "config.pbtxt").read_text()
    config = config.replace('name: "add_sub_fp32"', f'name: "{name}"')
    (repo / name / "config.pbtxt").write_text(config + extra)


def test_check_load_reports_what_only_sessions_and_warm_up_reveal(tmp_path, launch):
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32"])
    add_variant(repo, "refused_at_create",
                'parameters { key: "session.session.max_shape_override" value { string_value: "garbage" } }\n')
    add_variant(repo, "warm_up_fails", 'model_warmup [ { name: "from_file" batch_size: 1 inputs [\n'
                '  { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 16 ] input_data_file: "missing" } },\n'
                '  { key: "INPUT1" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } } ] } ]\n')
    # Without --load both pass: their failures need a session or the warm-up.
    status, verdicts, stderr = run_check(repo)
    assert status == 0 and all(v["would_load"] for v in verdicts.values()), (verdicts, stderr)

    status, verdicts, stderr = run_check(repo, "--load")
    assert status == 1, stderr
    assert verdicts["add_sub_fp32"]["would_load"] and verdicts["add_sub_fp32"]["versions"] == [1], verdicts
    served = server_verdicts(launch(repo))
    for name in ("refused_at_create", "warm_up_fails"):
        assert not verdicts[name]["would_load"] and verdicts[name]["versions"] == [], verdicts[name]
        assert not served[name][0], served[name]
        # The same reason as the server's, which names the model's version first.
        (error,) = verdicts[name]["errors"]
        assert error.startswith("version 1: ") and error[len("version 1: "):] in served[name][1][0], (error, served)
    assert "max_shape_override" in verdicts["refused_at_create"]["errors"][0]
    assert "warm-up" in verdicts["warm_up_fails"]["errors"][0]


def test_check_serves_a_single_model_directory_under_its_name(tmp_path):
    repo = make_test_models.build_test_repository(tmp_path / "repo", ["add_sub_fp32"])
    single = tmp_path / "mnt_models"  # KServe's /mnt/models: the model file at the top
    single.mkdir()
    shutil.copy(repo / "add_sub_fp32" / "1" / "model.onnx", single / "model.onnx")
    status, verdicts, stderr = run_check(single, "--single-model-name=my_model")
    assert status == 0, stderr
    assert list(verdicts) == ["my_model"] and verdicts["my_model"]["versions"] == [1], verdicts
    # A Triton layout is checked as it is, the flag notwithstanding.
    status, verdicts, stderr = run_check(repo, "--single-model-name=my_model")
    assert status == 0 and list(verdicts) == ["add_sub_fp32"], (verdicts, stderr)
