"""L0_model_config for scripts/triton_qa.py, its ONNX cases.

Triton's test.sh is shell, not unittest: for every case it builds a one-model
repository, starts the server and then either expects the start to fail with
an error line matching the case's `expected*` file (grep `^E[0-9]{4}.*EX`,
glog's prefix), or expects it to succeed and compares the served config with
the `expected*` files (compare_status.py). Here each case is one result:
  * cli_messages/*, special_cases/*, autofill_noplatform/{onnx,common}/* and
    noautofill_platform/* with platform onnxruntime_onnx, once with
    --strict-model-config=true and once with --disable-auto-complete-config;
  * autofill_noplatform_success/onnx/* through compare_status.py.
The error line is matched as an ortserve error line (` E ` level field)
holding the expected text, since ortserve's log prefix is not glog's.
Other platforms' cases (tensorrt, pytorch, python, openvino, ensemble,
custom) and model_metrics/custom_parameters (python/TensorRT models, Triton
metrics config) are listed as excluded.
"""
import re
import shutil
import subprocess
import time
from pathlib import Path

STARTUP_SECONDS = 20  # test.sh: SERVER_TIMEOUT=20
# Their composing model is the decoupled `repeat` backend (libtriton_repeat.so).
DECOUPLED_ENSEMBLE_CASES = ("invalid_decoupled_branching", "invalid_decoupled_branching_2")


def _expected_texts(model_dir: Path) -> list:
    return [p.read_text().strip() for p in sorted(model_dir.glob("expected*"))]


def _failure_cases(qa: Path) -> list:
    """(case id, source dir, copy whole dir?, extra args, platform to set)."""
    cases = [(f"cli_messages/{t.name}", t, True,
              {"cli_override": ["--disable-auto-complete-config", "--strict-model-config=false"],
               "cli_deprecation": ["--strict-model-config=true"]}.get(t.name, []), None)
             for t in sorted((qa / "cli_messages").iterdir())]
    cases += [(f"special_cases/{t.name}", t, True,
               ["--disable-auto-complete-config"] if t.name == "invalid_platform" else [], None)
              for t in sorted((qa / "special_cases").iterdir())]
    for flag in ("--strict-model-config=true", "--disable-auto-complete-config"):
        cases += [(f"noautofill_platform/{t.name} [onnxruntime_onnx {flag}]", t, True, [flag],
                   "onnxruntime_onnx") for t in sorted((qa / "noautofill_platform").iterdir())]
    for group in ("onnx", "common", "ensemble"):
        for t in sorted((qa / "autofill_noplatform" / group).iterdir()):
            if t.name in DECOUPLED_ENSEMBLE_CASES:
                continue
            whole = (t / "config.pbtxt").exists()
            cases.append((f"autofill_noplatform/{group}/{t.name}", t, whole,
                          ["--strict-model-config=false"], None))
    return cases


def _build_repo(repo: Path, src: Path, whole: bool, platform):
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    if whole:
        shutil.copytree(src, repo / src.name)
        cfg = repo / src.name / "config.pbtxt"
        if platform and cfg.exists():  # test.sh: sed '/platform:/d'; append the trial's
            kept = [ln for ln in cfg.read_text().splitlines() if "platform:" not in ln]
            cfg.write_text("\n".join(kept + [f'platform: "{platform}"']) + "\n")
        return repo / src.name
    for item in src.iterdir():
        (shutil.copytree if item.is_dir() else shutil.copy)(item, repo / item.name)
    return repo


def _bre_to_python(pattern: str) -> str:
    """grep's basic regex: ( ) { } + ? | are literal there."""
    return re.sub(r"([(){}+?|])", r"\\\1", pattern)


def _startup_outcome(server, http_status) -> bool:
    """True when the server exits on its own; False once it answers
    /v2/health/live (it started) or after STARTUP_SECONDS."""
    end = time.time() + STARTUP_SECONDS
    while time.time() < end:
        if server.proc.poll() is not None:
            return True
        if http_status("/v2/health/live") == 200:
            return server.proc.poll() is not None
        time.sleep(0.2)
    return False


def _run_failure_case(ctx, server_cls, case, index: int) -> dict:
    case_id, src, whole, args, platform = case
    repo = ctx.work / "L0_model_config" / "models"
    model_dir = _build_repo(repo, src, whole, platform)
    expecteds = _expected_texts(model_dir)
    log = ctx.work / "L0_model_config" / f"server.{index}.log"
    # Triton's --exit-on-error defaults to true, ortserve's to false
    # (docs/triton-differences.md); these cases count on the exit.
    server = server_cls(ctx.ortserve, str(repo), args + ["--exit-on-error=true"], log)
    exited = _startup_outcome(server, ctx.http_status)
    server.stop()
    text = log.read_text()
    # An error line in either of ortserve's log layouts: Triton's default
    # ("E1202 05:30:26.123456 4711] ...") or ISO8601 ("... E 4711] ...").
    error_lines = [ln for ln in text.splitlines() if re.search(r"^E\d{4} |\sE\s", ln)]
    cli = case_id.startswith("cli_messages")
    found = [ex for ex in expecteds
             if any(re.search(re.escape(ex) if cli else _bre_to_python(ex), ln)
                    for ln in (text.splitlines() if cli else error_lines))]
    if exited and found:
        return {"id": case_id, "outcome": "passed", "detail": ""}
    # The case's models are another backend's (an ensemble's composing models,
    # a backend library named by `runtime`): here those fail to load first.
    other = re.search(r"backend '(\w+)' is not supported", text)
    if other:
        return {"id": case_id, "outcome": "excluded",
                "detail": f"its models are served by Triton's {other.group(1)} backend"}
    detail = "server exited" if exited else "server started"
    detail += "; expected message " + ("found" if found else "NOT found: " + " | ".join(expecteds))
    last_error = error_lines[-1] if error_lines else "(no error line)"
    return {"id": case_id, "outcome": "failed", "detail": f"{detail}\nlast error: {last_error}"}


def _run_success_case(ctx, server_cls, target: Path, index: int) -> dict:
    case_id = f"autofill_noplatform_success/onnx/{target.name}"
    suite_dir = ctx.work / "L0_model_config"
    if all("KIND_GPU" in text for text in _expected_texts(target)):
        return {"id": case_id, "outcome": "excluded",
                "detail": "needs a GPU: every expected config has instance_group KIND_GPU, gpus: 0"}
    whole = (target / "config.pbtxt").exists() or target.name.startswith("no_config")
    _build_repo(suite_dir / "models", target, whole, None)
    log = suite_dir / f"server.{index}.log"
    server = server_cls(ctx.ortserve, str(suite_dir / "models"), ["--strict-model-config=false"], log)
    try:
        if not server.wait_ready(STARTUP_SECONDS * 3):
            return {"id": case_id, "outcome": "failed", "detail": f"server not ready, see {log}"}
        cmp = subprocess.run([ctx.python, "compare_status.py", "--expected_dir",
                              f"models/{target.name}", "--model", target.name],
                             cwd=suite_dir, capture_output=True, text=True)
    finally:
        server.stop()
    if cmp.returncode == 0:
        return {"id": case_id, "outcome": "passed", "detail": ""}
    return {"id": case_id, "outcome": "failed",
            "detail": "served config matches none of the expected* files:\n" + cmp.stdout[-2500:]}


def _prepare(qa: Path, data: Path):
    """test.sh's set-up of the ONNX, ensemble and platform-free cases' folders."""
    # test.sh makes the (empty) version folders of the ensemble cases' models.
    for d in re.findall(r"autofill_noplatform(?:_success)?/ensemble/\S+/1\b", (qa / "test.sh").read_text()):
        (qa / d).mkdir(parents=True, exist_ok=True)
    for d in ("noautofill_platform/invalid_cpu/1", "noautofill_platform/invalid_gpu/1",
              "noautofill_platform/negative_gpu/1", "special_cases/invalid_platform/1",
              "special_cases/runtime_escape/1", "special_cases/runtime_escape/dummy_runtime",
              "special_cases/invalid_runtime/1", "autofill_noplatform_success/onnx/cpu_instance/1"):
        (qa / d).mkdir(parents=True, exist_ok=True)
    (qa / "special_cases/runtime_escape/dummy_runtime/libtriton_identity.so").touch()
    shutil.copy(data / "qa_model_repository/onnx_float32_float32_float32/1/model.onnx",
                qa / "special_cases/invalid_platform/1")
    shutil.copy(data / "qa_identity_model_repository/onnx_zero_1_float16/1/model.onnx",
                qa / "autofill_noplatform_success/onnx/cpu_instance/1")


def run_model_config(ctx, server_cls) -> list:
    qa = ctx.work / "L0_model_config"
    _prepare(qa, ctx.data)
    results = []
    for i, case in enumerate(_failure_cases(qa)):
        results.append(_run_failure_case(ctx, server_cls, case, i))
    for j, target in enumerate(sorted((qa / "autofill_noplatform_success/onnx").iterdir())):
        results.append(_run_success_case(ctx, server_cls, target, 1000 + j))
    others = ("tensorrt", "pytorch", "python", "openvino", "custom")
    for group in ("autofill_noplatform", "autofill_noplatform_success"):
        for platform in others:
            for t in sorted((qa / group / platform).glob("*")):
                results.append({"id": f"{group}/{platform}/{t.name}", "outcome": "excluded",
                                "detail": f"needs the {platform} backend"})
    for t in sorted((qa / "autofill_noplatform_success" / "ensemble").glob("*")):
        results.append({"id": f"autofill_noplatform_success/ensemble/{t.name}", "outcome": "excluded",
                        "detail": "its composing models are served by the identity backend"})
    for name in DECOUPLED_ENSEMBLE_CASES:
        results.append({"id": f"autofill_noplatform/ensemble/{name}", "outcome": "excluded",
                        "detail": "its composing model is the decoupled repeat backend"})
    results.append({"id": "noautofill_platform/* [tensorrt_plan, pytorch_libtorch]",
                    "outcome": "excluded", "detail": "trials of other platforms"})
    results.append({"id": "model_metrics/*, custom_parameters/*", "outcome": "excluded",
                    "detail": "python backend / TensorRT models"})
    return results
