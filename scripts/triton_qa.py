#!/usr/bin/env python3
"""Run Triton's own QA suites (qa/L0_*) against ortserve, ONNX cases only.

Triton's QA sources are read from --triton-server-src and run from a copy in
--work-dir (git-ignored), as each suite's test.sh runs them for BACKENDS=onnx
on a CPU-only machine: ONNX QA models from qa/common/gen_qa_*models.py --onnx,
each suite's model repository built as its test.sh builds it, ortserve on
localhost:8000/8001/8002 with the suite's flags, the test files under
unittest, one result per case. Cases that need another backend, a GPU, nginx
or a Triton-internal hook are reported as excluded, each with its reason.
What runs and what is left out: docs/triton-qa.md.

Usage: python scripts/triton_qa.py --triton-server-src /path/to/server \
           --ortserve-bin build/ortserve [--suites L0_infer_zero L0_http ...]
"""
import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from triton_qa_model_config import run_model_config

PORTS = (8000, 8001, 8002)
OTHER_BACKEND_MODEL = re.compile(
    r"\b(plan|libtorch|openvino|python|python_dlpack|custom|nop|simple_identity"
    r"|string_identity|graphdef|savedmodel)_?\w*\\?['\"]? (is not found|version|is not)"
    r"|unknown model: '(plan|libtorch|openvino|python|custom|nop)_"
)


@dataclass
class Run:
    """One invocation of a Triton test file, as test.sh makes it."""
    test_file: str
    names: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    before: object = None  # callable run first (test.sh's steps between two runs)


@dataclass
class Step:
    """One server start: its repository, its flags and the tests run against it."""
    repo: str
    args: list
    runs: list


@dataclass
class Suite:
    name: str
    steps: list
    excluded: dict = field(default_factory=dict)  # test id pattern -> reason
    runner: object = None  # callable(ctx, Server) -> results, for a shell-only suite


# ---------------------------------------------------------------- models ----

GENERATORS = [
    ("qa_model_repository", "gen_qa_models.py", ["--onnx"]),
    ("qa_variable_model_repository", "gen_qa_models.py", ["--onnx", "--variable"]),
    ("qa_identity_model_repository", "gen_qa_identity_models.py", ["--onnx"]),
    ("qa_reshape_model_repository", "gen_qa_reshape_models.py", ["--onnx", "--variable"]),
    ("qa_ragged_model_repository", "gen_qa_ragged_models.py", ["--onnx"]),
]


def generate_models(qa_common: Path, data_dir: Path, python: str):
    """Generates the ONNX QA repositories once (a directory that exists is kept)."""
    for repo, script, flags in GENERATORS:
        target = data_dir / repo
        if target.is_dir():
            continue
        print(f"generating {repo} ({script} {' '.join(flags)})", flush=True)
        tmp = data_dir / (repo + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([python, script, *flags, f"--models_dir={tmp}"], cwd=qa_common,
                       check=True, stdout=subprocess.DEVNULL)
        tmp.rename(target)


def copy_models(src: Path, dst: Path, pattern="*"):
    """Copies models as test.sh's `cp -r`, without the BF16 ones: ONNX Runtime's
    CPU provider has no BF16 kernels, so they need a GPU (L0_infer's test.sh
    removes them for TARGET=cpu too)."""
    dst.mkdir(parents=True, exist_ok=True)
    for model in sorted(src.glob(pattern)):
        if model.is_dir() and "bf16" not in model.name:
            shutil.copytree(model, dst / model.name, dirs_exist_ok=True)


def append_config(model_dir: Path, text: str):
    with open(model_dir / "config.pbtxt", "a") as f:
        f.write(text + "\n")


def sed_config(model_dir: Path, pattern: str, repl: str, count=0):
    cfg = model_dir / "config.pbtxt"
    cfg.write_text(re.sub(pattern, repl, cfg.read_text(), count=count, flags=re.M))


def drop_unservable(repo: Path, notes: list):
    """Removes models no ONNX server can load (other backends, files Triton's
    image downloads): test.sh copies them, the cases that use them are
    reported excluded."""
    for model in sorted(p for p in repo.iterdir() if p.is_dir()):
        cfg = (model / "config.pbtxt").read_text() if (model / "config.pbtxt").exists() else ""
        backend = re.search(r'^backend:\s*"(\w+)"', cfg, re.M)
        has_onnx = any(model.glob("*/model.onnx"))
        if (backend and backend.group(1) != "onnxruntime") or not has_onnx:
            why = f"backend {backend.group(1)}" if backend else "no model.onnx in the QA sources"
            notes.append(f"{repo.parent.name}/{repo.name}/{model.name} not served ({why})")
            shutil.rmtree(model)


# ---------------------------------------------------------------- suites ----

def infer_suites(data: Path, work: Path) -> list:
    infer = work / "L0_infer/models"
    copy_models(data / "qa_model_repository", infer, "onnx*")
    for m in infer.glob("onnx*"):
        append_config(m, "instance_group [ { kind: KIND_CPU }]")
    var = work / "L0_infer_variable/models"
    copy_models(data / "qa_variable_model_repository", var)
    for m in var.glob("onnx*"):
        append_config(m, "instance_group [ { kind: KIND_CPU }]")
    copy_models(data / "qa_reshape_model_repository", work / "L0_infer_reshape/models")
    copy_models(data / "qa_identity_model_repository", work / "L0_infer_zero/models")
    onnx_env = {"BACKENDS": "onnx", "ENSEMBLES": "0", "TRITON_SERVER_CPU_ONLY": "1",
                "TRITON_QA_COUNT_INFER": "1"}
    return [
        Suite("L0_infer", [Step(str(infer), ["--exit-timeout-secs=600"],
                                [Run("infer_test.py", env=onnx_env)])],
              {"ensemble cases": "ENSEMBLES=0: they need Triton's identity backend "
                                 "(nop_*, custom_zero_1_float32) and ensembles"}),
        Suite("L0_infer_variable", [Step(str(var), ["--exit-timeout-secs=120"],
                                         [Run("infer_variable_test.py", env=onnx_env)])]),
        Suite("L0_infer_reshape", [Step(str(work / "L0_infer_reshape/models"), [],
                                        [Run("infer_reshape_test.py", env=onnx_env)])]),
        Suite("L0_infer_zero", [Step(str(work / "L0_infer_zero/models"), [],
                                     [Run("infer_zero_test.py", env=onnx_env)])]),
    ]


def small_suites(data: Path, work: Path) -> list:
    nobatch = work / "L0_client_nobatch/qa_model_repository"
    copy_models(data / "qa_model_repository", nobatch, "onnx_*")
    string_io = work / "L0_string_io/models"
    copy_models(data / "qa_identity_model_repository", string_io, "onnx_zero_1_object")
    status = work / "L0_server_status/models"
    copy_models(data / "qa_model_repository", status)

    def drop_versions():
        # test.sh: remove versions 2 and 3, then let the poller notice.
        for v in ("2", "3"):
            shutil.rmtree(status / "onnx_int32_int32_int32" / v, ignore_errors=True)
        time.sleep(3)
        http_post("/v2/repository/index")

    return [
        Suite("L0_client_nobatch", [Step(str(nobatch), [], [Run("client_test.py")])]),
        Suite("L0_string_io", [Step(str(string_io), [], [Run("string_client_test.py")])]),
        Suite("L0_server_status", [
            Step(str(status), ["--repository-poll-secs=1", "--model-control-mode=poll"],
                 [Run("server_status_test.py", ["ServerMetadataTest"], STATUS_ENV),
                  Run("server_status_test.py", ["ModelMetadataTest"], STATUS_ENV,
                      before=drop_versions)]),
        ], {
            "*.test_model_specific_infer": "asks libtorch_float32_float32_float32 first "
                                           "(loop libtorch, onnx, plan)",
            "*.test_infer_stats_no_model": "expects EXPECTED_MODEL_STATS=144 versions, "
                                           "counted over all backends' QA models",
        }),
    ]


def http_suite(src: Path, data: Path, work: Path, notes: list) -> Suite:
    examples = src / "docs/examples/model_repository"
    models = work / "L0_http/models"
    for m in ("simple", "simple_dyna_sequence", "simple_identity", "simple_sequence",
              "simple_string", "densenet_onnx"):
        shutil.copytree(examples / m, models / m, dirs_exist_ok=True)
    unit = work / "L0_http/python_unit_test_models"
    ident = data / "qa_identity_model_repository"
    for m in ("onnx_zero_1_float32", "onnx_zero_1_object", "onnx_zero_1_float16",
              "onnx_zero_3_float32"):
        shutil.copytree(ident / m, unit / m, dirs_exist_ok=True)
    one = unit / "onnx_zero_1_object_1_element"
    shutil.copytree(unit / "onnx_zero_1_object", one, dirs_exist_ok=True)
    sed_config(one, "onnx_zero_1_object", "onnx_zero_1_object_1_element")
    sed_config(one, "-1", "1", count=1)
    queue = unit / "onnx_zero_1_float32_queue"
    shutil.copytree(unit / "onnx_zero_1_float32", queue, dirs_exist_ok=True)
    sed_config(queue, "onnx_zero_1_float32", "onnx_zero_1_float32_queue")
    append_config(queue, "dynamic_batching { max_queue_delay_microseconds: 1000000 "
                         "preferred_batch_size: [ 8 ] default_queue_policy { max_queue_size: 1 } }")
    limit = work / "L0_http/http_input_size_limit_test_models"
    shutil.copytree(ident / "onnx_zero_1_float32", limit / "onnx_zero_1_float32", dirs_exist_ok=True)
    for repo in (models, unit, limit):
        drop_unservable(repo, notes)
    notes.append("L0_http: simple_identity, simple_identity_int64 (python backend) left out of "
                 "python_unit_test_models and http_input_size_limit_test_models")
    size = "http_input_size_limit_test.py"
    default_limit = [f"InferSizeLimitTest.test_{t}" for t in (
        "default_limit_raw_binary", "default_limit_json", "large_string_in_json",
        "default_limit_compressed", "json_dtype_size_expansion_exceeds_limit_error",
        "no_leak_on_invalid_inference_header_length")]
    large = [f"InferSizeLimitTest.test_large_input_{t}" for t in ("raw_binary", "json", "compressed")]
    control = ["--allow-unauthenticated-model-control=true"]
    return Suite("L0_http", [
        Step(str(models), ["--allow-client-shm=true"],
             [Run("python_http_aio_test.py"), Run("http_client_plugin_test.py")]),
        Step(str(unit), ["--model-control-mode=explicit", "--load-model=*", *control],
             [Run("http_test.py")]),
        Step(str(models), ["--http-restricted-api=model-repository:admin-key=admin-value",
                           "--http-restricted-api=inference,metadata:infer-key=infer-value"],
             [Run("http_restricted_api_test.py", ["RestrictedAPITest"])]),
        Step(str(limit), [], [Run(size, default_limit)]),
        Step(str(limit), [f"--http-max-input-size={2**27}"], [Run(size, large)]),
        Step(str(models), ["--allow-client-shm=true", "--log-verbose=1",
                           "--model-control-mode=explicit", "--load-model=simple", *control],
             [Run("http_request_many_chunks.py")]),
    ], {
        "generate_endpoint_test.py": "python backend models (../python_models/generate_models)",
        "http_basic_auth_test.py": "needs nginx in front of the server",
        "TestHttpAioClient.test_get_model_repository_index": INDEX_OF_8.replace("8", "7"),
        "HttpTest.test_json_recursion_depth_limit": "its models simple_identity and "
                                                    "simple_identity_int64 are python backend models",
    })


def grpc_suite(src: Path, data: Path, work: Path, notes: list) -> Suite:
    examples = src / "docs/examples/model_repository"
    models = work / "L0_grpc/models"
    for m in ("simple", "simple_dyna_sequence", "simple_int8", "simple_identity",
              "simple_sequence", "simple_string", "densenet_onnx"):
        shutil.copytree(examples / m, models / m, dirs_exist_ok=True)
    unit = work / "L0_grpc/grpc_test_models"
    shutil.copytree(examples / "simple", unit / "simple", dirs_exist_ok=True)
    for repo in (models, unit):
        drop_unservable(repo, notes)
    notes.append("L0_grpc/grpc_test_models/string_identity not served (python backend)")
    return Suite("L0_grpc", [
        Step(str(unit), [], [Run("python_unit_test.py", ["GrpcTest"])]),
        Step(str(models), ["--allow-client-shm=true"], [Run("python_grpc_aio_test.py")]),
        Step(str(models), ["--grpc-restricted-protocol=model-repository:admin-key=admin-value",
                           "--grpc-restricted-protocol=inference,health:infer-key=infer-value"],
             [Run("python_unit_test.py", ["RestrictedProtocolTest"])]),
    ], {
        "grpc_client_plugin_test.py": "its model client_plugin_test is a python backend model",
        "grpc_basic_auth_test.py": "needs nginx in front of the server",
        "TestGrpcAioClient.test_get_model_repository_index": INDEX_OF_8,
    })


INDEX_OF_8 = ("expects 8 models, with densenet_onnx (downloaded by Dockerfile.QA), "
              "simple_identity (python) and simple_string_dyna_sequence (custom backend)")
BATCHER_NO_DELAY = (
    "test_static_batch_preferred test_static_batch_lt_any_preferred "
    "test_static_batch_not_preferred test_static_batch_gt_max_preferred "
    "test_multi_batch_not_preferred test_multi_batch_gt_max_preferred "
    "test_multi_batch_sum_gt_max_preferred test_multi_same_output0 test_multi_same_output1 "
    "test_multi_different_outputs test_multi_different_output_order").split()
BATCHER_DIFFERENT_SHAPE = (
    "test_multi_batch_not_preferred_different_shape test_multi_batch_preferred_different_shape "
    "test_multi_batch_different_shape_allow_ragged test_multi_batch_different_shape").split()
BATCHER_HOOKED = (
    "test_multi_batch_delayed_sum_gt_max_preferred test_multi_batch_use_biggest_preferred "
    "test_multi_batch_use_best_preferred test_multi_batch_delayed_use_max_batch "
    "test_multi_batch_delayed_preferred_different_shape test_preferred_batch_only_aligned "
    "test_preferred_batch_only_unaligned test_preferred_batch_only_use_biggest_preferred "
    "test_preferred_batch_only_use_no_preferred_size").split()


def batcher_suite(data: Path, work: Path) -> Suite:
    fixed, var = work / "L0_batcher/models", work / "L0_batcher/var_models"
    for src, dst in ((data / "qa_model_repository", fixed), (data / "qa_variable_model_repository", var)):
        m = dst / "onnx_float32_float32_float32"
        shutil.copytree(src / m.name, m, dirs_exist_ok=True)
        sed_config(m, r"^max_batch_size:.*", "max_batch_size: 8")
        sed_config(m, r"^version_policy:.*", "version_policy: { specific { versions: [1] }}")
        append_config(m, "dynamic_batching { preferred_batch_size: [ 2, 6 ], "
                         "max_queue_delay_microseconds: 10000000 }")
    sed_config(var / "onnx_float32_float32_float32", "16", "-1")
    ragged = var / "onnx_zero_1_float32"
    shutil.copytree(data / "qa_identity_model_repository/onnx_nobatch_zero_1_float32", ragged,
                    dirs_exist_ok=True)
    sed_config(ragged, "nobatch_", "")
    sed_config(ragged, r"^max_batch_size:.*", "max_batch_size: 8")
    sed_config(ragged, 'name: "INPUT0"', 'name: "INPUT0"\nallow_ragged_batch: true')
    append_config(ragged, 'batch_output [{target_name: "OUTPUT0" kind: '
                          'BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT0" }] '
                          "dynamic_batching { preferred_batch_size: [ 2, 6 ], "
                          "max_queue_delay_microseconds: 10000000 }")
    steps = []
    for kind, repo in (("FIXED", fixed), ("VARIABLE", var)):
        for test in BATCHER_NO_DELAY:  # test.sh restarts the server for every case
            steps.append(Step(str(repo), [], [Run("batcher_test.py", [f"BatcherTest.{test}"],
                                                  {"BACKENDS": "onnx", "BATCHER_TYPE": kind})]))
    for test in BATCHER_DIFFERENT_SHAPE:
        steps.append(Step(str(var), [], [Run("batcher_test.py", [f"BatcherTest.{test}"],
                                             {"BACKENDS": "onnx", "BATCHER_TYPE": "VARIABLE"})]))
    excluded = {f"BatcherTest.{t}": "needs Triton's TRITONSERVER_DELAY_SCHEDULER hook"
                for t in BATCHER_HOOKED}
    excluded["BatcherTest.test_max_queue_delay_only_*"] = "identity backend (custom_zero_1_float32)"
    excluded["BatcherTest.test_multi_batch_preserve_ordering"] = (
        "identity backend + TRITONSERVER_DELAY_SCHEDULER + trace file timestamps")
    excluded["queue_timeout_test.py"] = "identity backend model (dynamic_batch)"
    return Suite("L0_batcher", steps, excluded)


# ---------------------------------------------------------------- server ----

def http_post(path: str):
    req = urllib.request.Request(f"http://localhost:8000{path}", data=b"{}", method="POST")
    try:
        urllib.request.urlopen(req, timeout=10).read()
    except OSError as e:
        print(f"  POST {path}: {e}", flush=True)


def http_status(path: str) -> int:
    try:
        return urllib.request.urlopen(f"http://localhost:8000{path}", timeout=2).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def ports_free() -> bool:
    for port in PORTS:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return False
    return True


class Server:
    """ortserve on Triton's default ports, its log in the work dir."""

    def __init__(self, binary: str, repo: str, args: list, log: Path):
        if not ports_free():
            raise RuntimeError("a port of 8000/8001/8002 is in use; Triton's tests need them")
        cmd = [binary, f"--model-repository={repo}", "--http-port=8000", "--grpc-port=8001",
               "--metrics-port=8002", *args]
        self.log = log
        self.out = open(log, "w")
        self.out.write(" ".join(cmd) + "\n")
        self.out.flush()
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=120.0) -> bool:
        """True once /v2/health/ready answers 200 (Triton's wait_for_server_ready).
        ortserve listens only after its startup loads, so a server that is live
        but stays unready has a model that failed: the tests run anyway (Triton
        would not start them) and that model's cases fail on it."""
        end, live_since = time.time() + timeout, None
        while time.time() < end:
            if self.proc.poll() is not None:
                return False
            if http_status("/v2/health/ready") == 200:
                return True
            if http_status("/v2/health/live") == 200:
                live_since = live_since or time.time()
                if time.time() - live_since > 2:
                    return True
            time.sleep(0.2)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()


# ----------------------------------------------------------------- run ----

def run_tests(ctx, suite_dir: Path, run: Run, server_pid: int, deadline: float, results: list):
    out = suite_dir / "results.jsonl"
    out.unlink(missing_ok=True)
    env = dict(os.environ, SERVER_PID=str(server_pid), **run.env)  # test.sh: SERVER_PID=$SERVER_PID
    cmd = [ctx.python, str(Path(__file__).with_name("triton_qa_driver.py").resolve()), str(out),
           run.test_file, *run.names]
    log = suite_dir / f"client.{Path(run.test_file).stem}.log"
    with open(log, "a") as f:
        try:
            subprocess.run(cmd, cwd=suite_dir, env=env, stdout=f, stderr=subprocess.STDOUT,
                           timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            results.append({"id": f"{run.test_file} {' '.join(run.names)}", "outcome": "failed",
                            "detail": "suite time bound reached; cases not finished are missing"})
    if out.exists():
        results.extend(json.loads(line) for line in out.read_text().splitlines())
    elif not any(r["outcome"] == "failed" and run.test_file in r["id"] for r in results):
        results.append({"id": run.test_file, "outcome": "failed",
                        "detail": f"no result recorded, see {log}"})


def run_step(ctx, suite: Suite, index: int, step: Step, deadline: float, results: list):
    suite_dir = ctx.work / suite.name
    log = suite_dir / f"server.{index}.log"
    server = Server(ctx.ortserve, step.repo, step.args, log)
    try:
        if not server.wait_ready():
            for run in step.runs:
                results.append({"id": f"{run.test_file} {' '.join(run.names)}",
                                "outcome": "failed",
                                "detail": f"server did not become ready, see {log}"})
            return
        for run in step.runs:
            if time.time() >= deadline:
                break
            if run.before:
                run.before()
            run_tests(ctx, suite_dir, run, server.proc.pid, deadline, results)
    finally:
        server.stop()


def classify(results: list) -> list:
    """A failure whose error names a model of another backend is an exclusion."""
    for r in results:
        if r["outcome"] == "failed" and OTHER_BACKEND_MODEL.search(r["detail"]):
            r["outcome"] = "excluded"
            r["detail"] = "needs another backend: " + r["detail"].strip().splitlines()[-1]
    return results


def run_suite(ctx, suite: Suite) -> list:
    deadline = time.time() + ctx.timeout
    print(f"== {suite.name} ({len(suite.steps) or 'many'} server starts)", flush=True)
    results = suite.runner(ctx, Server) if suite.runner else []
    for i, step in enumerate(suite.steps):
        if time.time() >= deadline:
            results.append({"id": f"{suite.name} steps {i}..", "outcome": "failed",
                            "detail": f"suite time bound ({ctx.timeout}s) reached"})
            break
        run_step(ctx, suite, i, step, deadline, results)
    results = classify(results)
    for pattern, reason in suite.excluded.items():
        ran = [r for r in results if fnmatch.fnmatch(r["id"], pattern)]
        for r in ran:  # a mixed case whose ONNX part cannot be reached
            last = (r["detail"].strip().splitlines() or [""])[-1]
            r["outcome"], r["detail"] = "excluded", f"{reason} (ran: {last})"
        if not ran:
            results.append({"id": pattern, "outcome": "excluded", "detail": reason})
    (ctx.work / suite.name / "summary.json").write_text(json.dumps(results, indent=1))
    return results


def print_table(all_results: dict):
    print(f"\n{'suite':<20}{'passed':>8}{'failed':>8}{'skipped':>9}{'excluded':>10}")
    totals = [0, 0, 0, 0]
    for name, results in all_results.items():
        counts = [sum(r["outcome"] == o for r in results)
                  for o in ("passed", "failed", "skipped", "excluded")]
        totals = [a + b for a, b in zip(totals, counts)]
        print(f"{name:<20}{counts[0]:>8}{counts[1]:>8}{counts[2]:>9}{counts[3]:>10}")
    print(f"{'total':<20}{totals[0]:>8}{totals[1]:>8}{totals[2]:>9}{totals[3]:>10}")
    for name, results in all_results.items():
        for r in results:
            if r["outcome"] in ("failed", "skipped"):
                last = (r["detail"].strip().splitlines() or [""])[-1][:300]
                print(f"  {name} {r['outcome'].upper()} {r['id']}: {last}")
        reasons = {}
        for r in results:
            if r["outcome"] == "excluded":
                reason = r["detail"].split(" (ran:")[0][:160]
                if reason.startswith("needs another backend:"):
                    reason = "needs another backend: its error names a model of one"
                reasons.setdefault(reason, []).append(r["id"])
        for reason, ids in reasons.items():
            print(f"  {name} EXCLUDED x{len(ids)} ({reason}): {', '.join(ids)[:300]}")


def batch_input_suite(data: Path, work: Path) -> Suite:
    """L0_batch_input's repository as its test.sh builds it for BACKEND=onnx."""
    models = work / "L0_batch_input/models"
    ragged = data / "qa_ragged_model_repository"
    renames = {  # model -> (source, [(pattern, replacement, count)])
        "ragged_element_count_acc_zero": ("onnx_batch_input", []),
        "ragged_acc_shape": ("onnx_batch_input", [
            ("BATCH_ELEMENT_COUNT", "BATCH_ACCUMULATED_ELEMENT_COUNT", 0),
            ("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", 0)]),
        "batch_item_flatten": ("onnx_batch_input", [
            ("-1", "-1, -1", 1),
            ("BATCH_ELEMENT_COUNT", "BATCH_ACCUMULATED_ELEMENT_COUNT", 0),
            ("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", "BATCH_ITEM_SHAPE_FLATTEN", 0)]),
        "batch_item": ("onnx_batch_item", []),
    }
    for name, (source, edits) in renames.items():
        shutil.copytree(ragged / source, models / name, dirs_exist_ok=True)
        sed_config(models / name, source, name)
        for pattern, repl, count in edits:
            sed_config(models / name, pattern, repl, count)
    io = models / "ragged_io"
    shutil.copytree(data / "qa_identity_model_repository/onnx_nobatch_zero_1_float32", io, dirs_exist_ok=True)
    sed_config(io, "onnx_nobatch_zero_1_float32", "ragged_io")
    sed_config(io, r"^max_batch_size:.*", "max_batch_size: 4")
    sed_config(io, 'name: "INPUT0"', 'name: "INPUT0"\nallow_ragged_batch: true')
    append_config(io, 'batch_output [{target_name: "OUTPUT0" kind: BATCH_SCATTER_WITH_INPUT_SHAPE '
                      'source_input: "INPUT0" }] dynamic_batching { max_queue_delay_microseconds: 1000000 }')
    return Suite("L0_batch_input", [Step(str(models), ["--exit-timeout-secs=120"],
                                         [Run("batch_input_test.py")])])


def prepare(ctx) -> list:
    """Copies qa/common and the suites' directories into the work dir and
    builds every suite's model repository there."""
    qa = ctx.src / "qa"
    shutil.copytree(qa / "common", ctx.work / "common", dirs_exist_ok=True)
    generate_models(ctx.work / "common", ctx.data, ctx.python)
    notes = []
    for name in ALL_SUITES:
        shutil.rmtree(ctx.work / name, ignore_errors=True)
        shutil.copytree(qa / name, ctx.work / name)
    suites = infer_suites(ctx.data, ctx.work) + small_suites(ctx.data, ctx.work)
    suites.append(http_suite(ctx.src, ctx.data, ctx.work, notes))
    suites.append(grpc_suite(ctx.src, ctx.data, ctx.work, notes))
    suites.append(batcher_suite(ctx.data, ctx.work))
    suites.append(batch_input_suite(ctx.data, ctx.work))
    suites.append(Suite("L0_model_config", [], runner=run_model_config))
    for note in notes:
        print("note:", note)
    return suites


ALL_SUITES = ["L0_infer_zero", "L0_infer_reshape", "L0_client_nobatch", "L0_string_io",
              "L0_server_status", "L0_infer_variable", "L0_http", "L0_grpc",
              "L0_model_config", "L0_batcher", "L0_batch_input", "L0_infer"]
STATUS_ENV = {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--triton-server-src", required=True, type=Path,
                    help="checkout of github.com/triton-inference-server/server (its qa/ is run)")
    ap.add_argument("--ortserve-bin", required=True, help="the ortserve binary to test")
    ap.add_argument("--work-dir", type=Path, default=Path("build/triton-qa"),
                    help="models, copied suites and logs (default build/triton-qa)")
    ap.add_argument("--suites", nargs="*", default=ALL_SUITES, choices=ALL_SUITES)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per suite")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter with tritonclient, numpy, onnx, ml_dtypes")
    ctx = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the server via finally
    ctx.src = ctx.triton_server_src.resolve()
    ctx.work = ctx.work_dir.resolve()
    ctx.data = ctx.work / "data"
    ctx.http_status = http_status
    ctx.ortserve = str(Path(ctx.ortserve_bin).resolve())
    ctx.data.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([ctx.ortserve, "--version"], capture_output=True, text=True)
    STATUS_ENV["TRITON_SERVER_VERSION"] = version.stdout.split()[-1]  # CI: the build's version
    suites = {s.name: s for s in prepare(ctx)}
    all_results = {}
    for name in [s for s in ALL_SUITES if s in ctx.suites]:
        all_results[name] = run_suite(ctx, suites[name])
    print_table(all_results)
    (ctx.work / "results.json").write_text(json.dumps(all_results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
